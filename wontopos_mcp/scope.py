"""Where-clauses: quoting, and the scopes of the chunk table (a store, a speaker, a
memory, SPEC's search filters).

Every string that reaches a LanceDB filter goes through :func:`quote`, defined here and
nowhere else. The chunk-table clauses the parts share are built here; clauses that only
one part needs are built in that part from these (``memories`` for the chunk table,
``registry`` for the registry table).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from . import validation as v
from .dates import parse_moment
from .errors import InvalidRequestError
from .names import ME

FILTER_KEYS = ("categories", "event_from", "event_to", "time_from", "time_to", "min_importance")
FIRST_CHUNK = " AND chunk_idx = 0"  # one row per memory


def quote(value: str) -> str:
    """The one way a string enters a filter: a quoted SQL literal, quotes doubled."""
    return "'" + value.replace("'", "''") + "'"


def quote_all(values: Sequence[str]) -> str:
    return "(" + ", ".join(quote(v) for v in values) + ")"


def in_store(key: str) -> str:
    return f"user_id = {quote(key)}"


def speaker_is(name: str | None) -> str:
    return "speaker IS NULL" if name is None else f"speaker = {quote(name)}"


def said_by(key: str, name: str) -> str:
    """Every chunk the speaker ``name`` said in the store ``key``."""
    return in_store(key) + f" AND speaker = {quote(name)}"


def memory_is(key: str, memory_id: str) -> str:
    """Every chunk of one memory."""
    return in_store(key) + f" AND memory_id = {quote(memory_id)}"


def memories_in(key: str, memory_ids: Sequence[str]) -> str:
    """Every chunk of these memories."""
    return among(in_store(key), memory_ids)


def among(where: str, memory_ids: Sequence[str]) -> str:
    """The chunks of these memories that ``where`` selects."""
    return f"({where}) AND memory_id IN {quote_all(memory_ids)}"


def not_among(memory_ids: Sequence[str]) -> str:
    """A clause to append that leaves these memories out (nothing when there are none)."""
    return f" AND memory_id NOT IN {quote_all(memory_ids)}" if memory_ids else ""


def created_after(us: int) -> str:
    """A clause to append: written (``created_at``) after ``us`` microseconds."""
    return f" AND created_us > {us}"


def created_by(us: int) -> str:
    """A clause to append: written at or before ``us`` microseconds."""
    return f" AND created_us <= {us}"


def search_scope(key: str, name: str | None, include_superseded: bool, filters: list[str]) -> str:
    """What ``memory_search`` ranks: the store, the speaker, current or all, SPEC's filters."""
    return " AND ".join(
        [in_store(key)]
        + ([f"speaker = {quote(name)}"] if name is not None else [])
        + ([] if include_superseded else ["NOT superseded"])
        + filters
    )


def seq_windows(base: str, spans: Sequence[tuple[int, int]]) -> str:
    """The chunks of ``base`` (a store's memories: its current ones, or those of a past
    moment) within these stretches of write order.

    The windows bound ``seq`` only: a conversation term inside the OR would stop LanceDB
    from using the seq index (a full scan, ~250 ms at 1M rows).
    """
    windows = " OR ".join(f"(seq >= {low} AND seq <= {high})" for low, high in spans)
    return f"{base} AND ({windows})"


def query_without_name(query: str, name: str | None) -> str:
    """Drop the filtered speaker's own name from the query: the filter already says who."""
    if name is None or name == ME:
        return query
    stripped = re.sub(rf"(?<!\w){re.escape(name)}(?:'s|’s)?(?!\w)", " ", query, flags=re.IGNORECASE)
    return stripped if stripped.strip(" ?!.,") else query


def _name_pattern(name: str) -> str:
    return rf"(?<!\w){re.escape(name)}(?:'s|’s)?(?!\w)"


def names_in(query: str, names: Sequence[str]) -> list[str]:
    """The registered speakers ``query`` names (as written, a possessive allowed; never
    ``me``): a question about "what Bob said" without a filter leans towards Bob."""
    return [n for n in names if n != ME and re.search(_name_pattern(n), query)]


def query_without_names(query: str, names: Sequence[str]) -> str:
    """The query with these names dropped (the query itself when nothing would be left)."""
    stripped = query
    for name in names:
        stripped = re.sub(_name_pattern(name), " ", stripped)
    return stripped if stripped.strip(" ?!.,") else query


def filter_clauses(filters: Any) -> list[str]:
    """SPEC's search filters as LanceDB clauses; an unknown key or bad value is a 400."""
    if filters is None:
        return []
    if not isinstance(filters, dict):
        raise InvalidRequestError("filters must be an object", field="filters")
    for name in filters:
        if name not in FILTER_KEYS:
            raise InvalidRequestError(
                f"unknown filter {name!r}; known filters: {', '.join(FILTER_KEYS)}", field=f"filters.{name}"
            )
    clauses: list[str] = []
    if filters.get("categories") is not None:
        cats = filters["categories"]
        cats = [cats] if isinstance(cats, str) else cats
        cats = v.string_list(cats, field="filters.categories", max_items=100)
        clauses.append(f"category IN {quote_all([c.strip() for c in cats])}" if cats else "FALSE")
    for low, high, column in (("event_from", "event_to", "when_us"), ("time_from", "time_to", "created_us")):
        lo = filters.get(low)
        hi = filters.get(high)
        lo_us = None if lo is None else parse_moment(lo, field=f"filters.{low}")[0]
        hi_us = None if hi is None else parse_moment(hi, field=f"filters.{high}", end_of_day=True)[0]
        if lo_us is not None and hi_us is not None and lo_us > hi_us:
            raise InvalidRequestError(f"filters.{low} is after filters.{high}", field=f"filters.{low}")
        clauses += [f"{column} >= {lo_us}"] if lo_us is not None else []
        clauses += [f"{column} <= {hi_us}"] if hi_us is not None else []
    if filters.get("min_importance") is not None:
        floor = v.number(filters["min_importance"], field="filters.min_importance", low=0.0, high=1.0)
        clauses.append(f"importance >= {floor!r}")
    return clauses
