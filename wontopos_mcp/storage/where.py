"""Every where-clause of both tables, and the one way a value enters one.

Every string that reaches a LanceDB filter goes through :func:`quote`, defined here and
nowhere else; every number is formatted by an ``int``/``float`` parameter here. The parts
call these by meaning (``in_store``, ``said_by``, ``restating``, ``registry_store``...),
so a column's name or a clause's shape is written once, and an index-friendly shape
(ranges instead of an OR, see ``seq_windows``) is kept for every caller at once.

Clauses that end in a condition to append start with `` AND `` (``created_by``,
``not_among``); the others are whole clauses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wontopos_mcp.errors import InvalidRequestError
from wontopos_mcp.rules import validation as v
from wontopos_mcp.rules.dates import parse_moment

FILTER_KEYS = ("categories", "event_from", "event_to", "time_from", "time_to", "min_importance")
EVERY_MEMORY = "chunk_idx = 0"  # one row per memory, of every store
FIRST_CHUNK = " AND " + EVERY_MEMORY  # one row per memory of those a clause selects


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


def current(where: str) -> str:
    """The memories ``where`` selects that no later version superseded."""
    return where + " AND NOT superseded"


def first_chunks(where: str) -> str:
    """One row per memory of those ``where`` selects."""
    return where + FIRST_CHUNK


def seq_above(seq: int) -> str:
    """A clause to append: written after sequence number ``seq``."""
    return f" AND seq > {int(seq)}"


def seq_between(low: int, high: int) -> str:
    """A clause to append: a sequence number from ``low`` to ``high``."""
    return f" AND seq >= {int(low)} AND seq <= {int(high)}"


def after_in_write_order(where: str, seq: int, memory_id: str | None) -> tuple[str | None, str]:
    """(the rows tied at ``seq`` after ``memory_id``, or None; the rows after ``seq``):
    two range queries, not one OR, which made LanceDB scan (~250 ms at 1M rows)."""
    tied = None if memory_id is None else f"{where} AND seq = {int(seq)} AND memory_id > {quote(memory_id)}"
    return tied, f"{where} AND seq > {int(seq)}"


def in_conversation(conversation_id: str) -> str:
    """A clause to append: said in this conversation."""
    return f" AND conversation_id = {quote(conversation_id)}"


def with_role() -> str:
    """A clause to append: a conversation turn (a memory with a role)."""
    return " AND role IS NOT NULL"


def tagged() -> str:
    """A clause to append: carrying a speaker."""
    return " AND speaker IS NOT NULL"


def superseded() -> str:
    """A clause to append: a version a later one superseded."""
    return " AND superseded"


def superseded_by(memory_id: str) -> str:
    """A clause to append: the versions ``memory_id`` superseded. ``superseded`` (bitmap
    indexed, true exactly where ``superseded_by`` is set) narrows it first: at 1M rows the
    forget that relinks them read 75 ms without it, 2 ms with it, in the write lock."""
    return f" AND superseded AND superseded_by = {quote(memory_id)}"


def restating(keys: Sequence[str], dup_keys: Sequence[str]) -> str:
    """A clause to append: a restatement key among ``keys`` or a normalised (older) key
    among ``dup_keys``."""
    return f" AND (restate_key IN {quote_all(keys)} OR dup_key IN {quote_all(dup_keys)})"


def idempotency_key_is(idem_key: str, since_us: int) -> str:
    """A clause to append: written under ``idem_key`` at or after ``since_us``."""
    return f" AND idem_key = {quote(idem_key)} AND created_us >= {int(since_us)}"


def idempotency_keys_in(idem_keys: Sequence[str]) -> str:
    """A clause to append: written under one of these idempotency keys, at any age."""
    return f" AND idem_key IN {quote_all(idem_keys)}"


def answer_names(text: str) -> str:
    """A clause to append: a kept first answer whose JSON contains ``text``."""
    return f" AND strpos(idem_answer, {quote(text)}) > 0"


def answer_names_any(texts: Sequence[str]) -> str:
    """A clause to append: a kept first answer whose JSON contains one of ``texts``."""
    return " AND (" + " OR ".join(f"strpos(idem_answer, {quote(text)}) > 0" for text in texts) + ")"


def replaced_in_answer(old: str, new: str) -> str:
    """The update expression that replaces ``old`` by ``new`` in a kept first answer."""
    return f"replace(idem_answer, {quote(old)}, {quote(new)})"


def literal(value: str | None) -> str:
    """A string (or NULL) as an update expression sets it."""
    return "NULL" if value is None else quote(value)


# -- the registry table ---------------------------------------------------------------------------

REGISTRY_STORES = "kind = 'store'"
REGISTRY_META = "kind = 'meta'"  # the model record
REGISTRY_PURGES = "kind = 'purge'"  # purge markers: an erasure still to reach the disk


def registry_key_is(key: str) -> str:
    """The registry row kept under ``key`` (its primary key)."""
    return f"key = {quote(key)}"


def registry_keys_in(keys: Sequence[str]) -> str:
    """The registry rows kept under these keys."""
    return f"key IN {quote_all(keys)}"


def registry_record(key: str, since_us: int) -> str:
    """The registry row kept under ``key``, if written at or after ``since_us``."""
    return f"key = {quote(key)} AND created_us >= {int(since_us)}"


def registry_store(store: str) -> str:
    """The registry row of the store ``store`` (its lookup key)."""
    return f"{REGISTRY_STORES} AND user_id = {quote(store)}"


def registry_of_store(kinds: Sequence[str], store: str) -> str:
    """The registry rows of these kinds that belong to the store ``store``."""
    return f"kind IN {quote_all(kinds)} AND user_id = {quote(store)}"


def search_scope(key: str, name: str | None, include_superseded: bool, filters: list[str]) -> str:
    """What ``memory_search`` ranks: the store, the speaker, current or all, the filters."""
    return " AND ".join(
        [in_store(key)]
        + ([f"speaker = {quote(name)}"] if name is not None else [])
        + ([] if include_superseded else ["NOT superseded"])
        + filters
    )


def in_conversations(base: str, conversation_ids: Sequence[str]) -> str:
    """The chunks of ``base`` (a store's memories: its current ones, or those of a past
    moment) said in these conversations: one B-tree look-up per conversation, cheaper than
    the ranges of ``seq_windows`` (at 100k rows, ~4 ms against ~11 ms for 50 conversations
    and 80 windows)."""
    return f"{base} AND conversation_id IN {quote_all(conversation_ids)}"


def seq_windows(base: str, spans: Sequence[tuple[int, int]]) -> str:
    """The chunks of ``base`` (a store's memories: its current ones, or those of a past
    moment) within these stretches of write order.

    The windows bound ``seq`` only: a conversation term inside the OR would stop LanceDB
    from using the seq index (a full scan, ~250 ms at 1M rows).
    """
    windows = " OR ".join(f"(seq >= {low} AND seq <= {high})" for low, high in spans)
    return f"{base} AND ({windows})"


def filter_clauses(filters: Any) -> list[str]:
    """``memory_search``'s ``filters`` as LanceDB clauses; an unknown key or bad value is a 400."""
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
