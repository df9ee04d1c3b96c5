"""The store as it stood at a moment (``as_of``), and when each superseded version
stopped being current (``superseded_at``).

A supersede stores the new version and marks the old one in one commit, stamped with one
clock reading: the successor's ``created_at`` *is* the moment the old version was
superseded, so ``superseded_at`` is read from the successor rather than kept twice (a
database from before this rule needs nothing: the fallback it would need, the successor's
``created_at``, is the rule itself). Forgetting a middle version relinks its
predecessor to its successor, so a chain always ends in stored memories.

At ``as_of`` T a version is there if it was stored at or before T and is still stored;
it is current then unless its successor was stored at or before T too. Memories in such
an answer show their state at T: superseded later means not superseded yet.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timezone
from typing import TYPE_CHECKING

from wontopos_mcp.errors import InvalidRequestError
from wontopos_mcp.rules.answers import JSON, MemoryRecord
from wontopos_mcp.rules.dates import format_us, from_us, parse_moment
from wontopos_mcp.storage.where import (
    FIRST_CHUNK,
    created_by,
    current,
    in_conversation,
    in_store,
    memories_in,
    not_among,
    seq_between,
    superseded,
    with_role,
)

if TYPE_CHECKING:
    from wontopos_mcp.storage.adapter import Store
    from wontopos_mcp.storage.rows import ChunkRow


def moment(raw: JSON, now_us: int) -> int:
    """``as_of`` as microseconds: a plain day means its end, today's means now; later than
    now is a 400 (the store cannot answer for a moment it has not reached)."""
    us, text = parse_moment(raw, field="as_of", end_of_day=True)
    if us <= now_us:
        return us
    if text == from_us(now_us).astimezone(timezone.utc).date().isoformat():
        return now_us
    raise InvalidRequestError(
        f"as_of {text} is later than now ({format_us(now_us)}); give a moment that has passed",
        field="as_of",
        as_of=text,
    )


@dataclass(frozen=True)
class AsOf:
    """A past moment a read answers at (``as_of``): ``until`` in microseconds, and
    ``gone``, the versions already superseded then (read once per call, for every part of
    its answer)."""

    until: int
    gone: tuple[str, ...]


class History:
    def __init__(self, store: Store) -> None:
        self.store = store

    def as_of(self, key: str, until: int) -> AsOf:
        """The store ``key`` as it stood at ``until``."""
        return AsOf(until, tuple(self.replaced_by(key, until)))

    def replaced_by(self, key: str, until: int) -> list[str]:
        """Ids of the versions already superseded at ``until`` (their successor stored by then)."""
        old = self.store.chunks.rows(
            in_store(key) + FIRST_CHUNK + superseded() + created_by(until),
            columns=("memory_id", "superseded_by"),
        )
        successors = self._stored(key, {r["superseded_by"] for r in old if r["superseded_by"]})
        return sorted(r["memory_id"] for r in old if successors.get(r["superseded_by"] or "", until + 1) <= until)

    @staticmethod
    def scope(every_version: str, at: AsOf, include_superseded: bool) -> str:
        """``every_version`` (a scope that leaves superseded versions in) as it stood ``at``."""
        where = every_version + created_by(at.until)
        if not include_superseded and at.gone:
            where += not_among(at.gone)
        return where

    def dated(self, key: str, records: list[MemoryRecord], until: int | None = None) -> list[MemoryRecord]:
        """``records`` with ``superseded_at`` on each superseded one; with ``until``, each as
        it stood then (a version superseded later shows as current)."""
        times = self._stored(key, {r["superseded_by"] for r in records if "superseded_by" in r})
        for record in records:
            successor = record.get("superseded_by")
            if successor is None or successor not in times:
                continue
            if until is not None and times[successor] > until:
                record["is_superseded"] = False
                del record["superseded_by"]
            else:
                record["superseded_at"] = format_us(times[successor])
        return records

    def around(self, key: str, top: ChunkRow, reach: int, until: int | None = None) -> list[ChunkRow]:
        """Current memories near ``top`` in write order (``until``: every version stored by
        then): its conversation, or (without one) ``reach`` sequence numbers either side."""
        stored = in_store(key) + FIRST_CHUNK
        same = current(stored) if until is None else stored + created_by(until)
        if top["conversation_id"] is not None:
            same += in_conversation(top["conversation_id"])
        else:
            same += seq_between(top["seq"] - reach, top["seq"] + reach)
        return self.store.chunks.rows(same, order=(("seq", True),))

    def recent_turns(self, key: str, limit: int, until: int | None = None) -> list[ChunkRow]:
        """The store's newest conversation turns (memories with a role, stored by ``until``), newest first."""
        where = in_store(key) + FIRST_CHUNK + with_role() + ("" if until is None else created_by(until))
        return self.store.chunks.rows(where, order=(("seq", False),), limit=limit)

    def _stored(self, key: str, ids: Iterable[str]) -> dict[str, int]:
        """When each of these memories was stored (those still stored)."""
        wanted = sorted(ids)
        if not wanted:
            return {}
        rows = self.store.chunks.rows(memories_in(key, wanted) + FIRST_CHUNK, columns=("memory_id", "created_us"))
        return {r["memory_id"]: int(r["created_us"]) for r in rows}
