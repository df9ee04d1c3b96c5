"""Dates and timestamps: what a caller may send, and how every answer writes them.

Inputs: RFC 3339 with an offset, or a plain ``YYYY-MM-DD`` meaning that UTC day (as an
end bound: the whole day). A date-time without an offset is refused rather than guessed.
Outputs: RFC 3339 UTC with microseconds (``2026-07-10T04:20:39.123456Z``). Internally
every instant is an integer of microseconds since the epoch, which LanceDB filters and
sorts exactly.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

from wontopos_mcp.errors import InvalidRequestError

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US_PER_DAY = 86_400_000_000


def to_us(moment: datetime) -> int:
    """Microseconds since the epoch of an aware datetime."""
    delta = moment.astimezone(timezone.utc) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def format_us(us: int) -> str:
    """RFC 3339 UTC with microseconds, the one timestamp format every answer uses."""
    t = from_us(us)
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}.{t.microsecond:06d}Z"


def month_bucket(us: int) -> str:
    t = from_us(us)
    return f"{t.year:04d}-{t.month:02d}"


def parse_moment(raw: object, *, field: str, end_of_day: bool = False) -> tuple[int, str]:
    """Parse a date as the module's inputs allow; return (microseconds, canonical text).

    A plain day keeps its text (``2026-07-01``) and means 00:00 UTC, or the last
    microsecond of that day when ``end_of_day`` (an inclusive upper bound).
    """
    if not isinstance(raw, str):
        raise InvalidRequestError(f"{field} must be a string date", field=field)
    text = raw.strip()
    if _DAY.fullmatch(text):
        try:
            day = date.fromisoformat(text)
        except ValueError:
            raise _bad(field, raw) from None
        start = to_us(datetime(day.year, day.month, day.day, tzinfo=timezone.utc))
        return (start + _US_PER_DAY - 1 if end_of_day else start), text
    match = _DATETIME.fullmatch(text)
    if not match:
        raise _bad(field, raw)
    day_text, clock, fraction, offset = match.groups()
    micros = (fraction or ".0")[1:7].ljust(6, "0")
    offset = "+00:00" if offset in ("Z", "z") else offset
    try:
        moment = datetime.fromisoformat(f"{day_text}T{clock}.{micros}{offset}")
        us = to_us(moment)
        return us, format_us(us)
    except (ValueError, OverflowError):  # no such day, or outside years 1-9999 in UTC
        raise _bad(field, raw) from None


def _bad(field: str, raw: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"{field} must be RFC 3339 with an offset (2026-07-10T04:20:39Z) or a plain YYYY-MM-DD day; got {raw[:60]!r}",
        field=field,
    )
