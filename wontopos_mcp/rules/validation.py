"""Argument checks every entry point shares: types and ranges, refused as a 400 naming
the field. The core runs them itself because the library face passes raw values; the
MCP schemas only document them.
"""

from __future__ import annotations

import re
import unicodedata

from wontopos_mcp.errors import InvalidRequestError

MAX_CONTENT_CHARS = 32_000
MAX_QUERY_CHARS = 4_000
MAX_LABEL_CHARS = 128
MAX_SKIP_IDS = 1_000

# A code point of the surrogate range in a str is a lone surrogate (JSON's "\ud800"): a
# pair was joined into one character when it was decoded. UTF-8 cannot hold one, so the
# tokenizer and the database would fail on it; it is refused first, naming the field.
SURROGATE = re.compile("[\ud800-\udfff]")
# What a text holds nothing of when it holds only these (and white space): controls,
# format marks (zero-width, bidi) and separators.
_INVISIBLE = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


def not_unicode(field: str) -> str:
    """The message of the 400 for a lone surrogate in ``field`` (every face words it so)."""
    return (
        f"{field} is not valid Unicode: it holds a lone surrogate (an unpaired \\ud800-\\udfff escape); "
        "send the text as UTF-8 or as complete surrogate pairs"
    )


def unicode_text(value: str, *, field: str) -> str:
    """``value`` if it is valid Unicode (no lone surrogate), else a 400 naming ``field``."""
    if SURROGATE.search(value):
        raise InvalidRequestError(not_unicode(field), field=field)
    return value


def integer(value: object, *, field: str, low: int, high: int | None = None) -> int:
    """An int in [low, high]; bools and floats are refused rather than coerced."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequestError(f"{field} must be an integer", field=field)
    if value < low or (high is not None and value > high):
        span = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidRequestError(f"{field} must be {span}, got {value}", field=field)
    return value


def boolean(value: object, *, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequestError(f"{field} must be true or false", field=field)
    return value


def text(value: object, *, field: str, max_chars: int) -> str:
    """Non-empty text (after trimming) of at most ``max_chars``; returned as given. Text of
    nothing but white space and invisible controls (NUL, zero-width and bidi marks) is
    empty too: stored, it would match nothing, and every other invisible text would
    restate it."""
    if not isinstance(value, str):
        raise InvalidRequestError(f"{field} must be a string", field=field)
    if not value.strip() or not any(_visible(ch) for ch in value[: max_chars + 1]):
        raise InvalidRequestError(f"{field} must not be empty", field=field)
    return unicode_text(bounded(value, field=field, max_chars=max_chars), field=field)


def _visible(ch: str) -> bool:
    return not ch.isspace() and unicodedata.category(ch) not in _INVISIBLE


def bounded(value: str, *, field: str, max_chars: int) -> str:
    """``value`` if it has at most ``max_chars`` characters, else the 400 carrying ``max_chars``."""
    if len(value) > max_chars:
        raise InvalidRequestError(
            f"{field} is {len(value)} characters; at most {max_chars} are allowed",
            field=field,
            max_chars=max_chars,
        )
    return value


def label(value: object, *, field: str) -> str:
    """A short identifier-like string (category, conversation id, memory id): trimmed."""
    return text(value, field=field, max_chars=MAX_LABEL_CHARS).strip()


def optional_label(value: object, *, field: str) -> str | None:
    return None if value is None else label(value, field=field)


def string_list(value: object, *, field: str, max_items: int) -> list[str]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InvalidRequestError(f"{field} must be a list of strings", field=field)
    if len(value) > max_items:
        raise InvalidRequestError(f"{field} has more than {max_items} items", field=field)
    return [unicode_text(item, field=field) for item in value]


def number(value: object, *, field: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise InvalidRequestError(f"{field} must be a number", field=field)
    if not low <= value <= high:
        raise InvalidRequestError(f"{field} must be between {low} and {high}", field=field)
    return float(value)
