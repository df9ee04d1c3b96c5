"""Where-clauses of a scope: a store, a speaker, SPEC's search filters.

Every value that reaches a LanceDB filter goes through ``sql_str`` (in ``store``), here
and nowhere else in the rules.
"""

from __future__ import annotations

import re
from typing import Any

from . import validation as v
from .dates import parse_moment
from .errors import InvalidRequestError
from .names import ME, store_key
from .store import sql_in as quote_all
from .store import sql_str as quote

FILTER_KEYS = ("categories", "event_from", "event_to", "time_from", "time_to", "min_importance")


def in_store(key: str) -> str:
    return f"user_id = {quote(key)}"


def speaker_is(name: str | None) -> str:
    return "speaker IS NULL" if name is None else f"speaker = {quote(name)}"


def store_where(store_id: str) -> str:
    return f"kind = 'store' AND user_id = {quote(store_key(store_id))}"


def speaker_key(key: str, name: str) -> str:
    return f"speaker:{key}:{name}"


def query_without_name(query: str, name: str | None) -> str:
    """Drop the filtered speaker's own name from the query: the filter already says who."""
    if name is None or name == ME:
        return query
    stripped = re.sub(rf"(?<!\w){re.escape(name)}(?:'s|’s)?(?!\w)", " ", query, flags=re.IGNORECASE)
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
