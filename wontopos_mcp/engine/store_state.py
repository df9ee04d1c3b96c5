"""What a store holds and how it changed: the SDK's ``stats``, ``history``, ``lineage`` and
``revisions``, served by REST and the library; MCP gains no tool for them, so that an
agent's tool listing stays short.

- ``stats`` counts memories, never chunk records: every stored version, superseded ones
  included (each is a memory ``memory_list`` lists), and the short-term turns ``history``
  gives.
- ``history`` is the short-term memory ``memory_recall`` reads when called with its
  defaults: the store's last ``context_limit`` (10) conversation turns, oldest first.
- ``lineage`` walks one memory's supersede chain forward, from the id given to the version
  in force (forgetting a middle version relinks the chain, so it always ends in a stored
  memory): oldest first, the current version alone for a current id.
- ``revisions`` counts the memories a later version superseded (``revised``) and the rest
  (``unrevised``); a forgotten memory is gone and counts nowhere. With ``include`` it adds
  one page of either side, newest stored first, paged as ``by_speaker`` is (``before`` /
  ``skip_ids``), through the same time windows, so a page costs what a speaker's page does;
  the answer's size never grows with the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wontopos_mcp.contract import operation
from wontopos_mcp.errors import InvalidRequestError
from wontopos_mcp.rules import validation as v
from wontopos_mcp.rules.answers import (
    JSON,
    HistoryAnswer,
    HistoryTurn,
    LineageAnswer,
    RevisionsAnswer,
    Side,
    StatsAnswer,
    Version,
)
from wontopos_mcp.rules.dates import format_us, parse_moment
from wontopos_mcp.rules.records import turn_role
from wontopos_mcp.storage.where import FIRST_CHUNK, current, in_store, superseded, with_role

from .history import History

if TYPE_CHECKING:
    from wontopos_mcp.storage.rows import ChunkRow

    from .memories import Memories
    from .registry import Registry
    from .speaker_pages import SpeakerPages

SHORT_TERM = operation("memory_recall").param("context_limit")  # the turns recall reads by default
REVISIONS_LIMIT = operation("revisions").param("limit")
INCLUDE: tuple[Side, ...] = ("revised", "unrevised")
# The window hints of revision pages, apart from every speaker's: no name has a control character.
_HINTS = {"revised": "\x00revised", "unrevised": "\x00unrevised"}


class StoreState:
    def __init__(self, registry: Registry, memories: Memories, pages: SpeakerPages) -> None:
        self.registry = registry
        self.memories = memories
        self.pages = pages
        self.history = History(memories.store)

    def stats(self, user_id: JSON = None) -> StatsAnswer:
        handle = self.registry.resolve(user_id, writing=False)
        total = self.memories.count_memories(in_store(handle.key))
        turns = self.memories.count_memories(in_store(handle.key) + with_role()) if total else 0
        return {"user_id": handle.display, "total_memories": total, "short_term_turns": min(turns, SHORT_TERM.default)}

    def recent_turns(self, user_id: JSON = None) -> HistoryAnswer:
        handle = self.registry.resolve(user_id, writing=False)
        rows = self.history.recent_turns(handle.key, SHORT_TERM.default)
        return {"user_id": handle.display, "turns": [_turn(row) for row in reversed(rows)]}

    def lineage(self, memory_id: JSON, user_id: JSON = None) -> LineageAnswer:
        mid = v.label(memory_id, field="memory_id")
        handle = self.registry.resolve(user_id, writing=False)
        row = self.memories.memory_row(handle.key, mid)  # 404 naming memory_id
        versions = [_version(row)]
        seen = {mid}
        while row["superseded_by"] is not None and row["superseded_by"] not in seen:
            seen.add(row["superseded_by"])
            row = self.memories.memory_row(handle.key, row["superseded_by"])
            versions.append(_version(row))
        return {"user_id": handle.display, "memory_id": mid, "versions": versions}

    def revisions(
        self,
        include: JSON = None,
        limit: JSON = REVISIONS_LIMIT.default,
        before: JSON = None,
        skip_ids: JSON = None,
        user_id: JSON = None,
    ) -> RevisionsAnswer:
        """Counts; with ``include``, one page of those memories. ``before`` and ``skip_ids``
        without ``include`` are a 400: they continue a page that was not asked for."""
        side = next((one for one in INCLUDE if one == include), None)
        if include is not None and side is None:
            raise InvalidRequestError('include must be "revised" or "unrevised" (or left out)', field="include")
        size = REVISIONS_LIMIT.integer(limit)
        for name, value in (("before", before), ("skip_ids", skip_ids)):
            if value is not None and include is None:
                raise InvalidRequestError(
                    f'{name} continues a page of memories: give the include="revised" or "unrevised" '
                    "of the page it came from",
                    field=name,
                )
        before_us = None if before is None else parse_moment(before, field="before")[0]
        skip = [] if skip_ids is None else v.string_list(skip_ids, field="skip_ids", max_items=v.MAX_SKIP_IDS)
        handle = self.registry.resolve(user_id, writing=False)
        stored = in_store(handle.key)
        total = self.memories.count_memories(stored)
        revised = self.memories.count_memories(stored + superseded()) if total else 0
        answer: RevisionsAnswer = {
            "user_id": handle.display,
            "revised": revised,
            "unrevised": total - revised,
            "total": total,
            "counts": f"{revised} of the {total} memories stored were revised: a later version superseded them",
            "excludes": "forgotten memories: a forgotten memory leaves nothing to count",
            "ordered_by": "stored",
        }
        if side is None:
            return answer
        scope = (stored + superseded() if side == "revised" else current(stored)) + FIRST_CHUNK
        in_scope = revised if side == "revised" else total - revised
        rows = (
            self.pages.newest(handle.key, _HINTS[side], scope, before_us, skip, size + 1, in_scope) if in_scope else []
        )
        page = self.pages.page(handle.key, rows, size, before_us, skip)
        answer["include"] = side
        answer["memories"] = page.memories
        answer["has_more"] = page.has_more
        answer["next_before"] = page.next_before
        answer["next_skip_ids"] = page.next_skip_ids
        return answer


def _turn(row: ChunkRow) -> HistoryTurn:
    when = format_us(row["created_us"])
    turn: HistoryTurn = {"role": turn_role(row["role"]), "content": row["content"], "created_at": when}
    if row["speaker"] is not None:
        turn["speaker"] = row["speaker"]
    return turn


def _version(row: ChunkRow) -> Version:
    return {
        "id": row["memory_id"],
        "content": row["content"],
        "created_at": format_us(row["created_us"]),
        "is_current": not row["superseded"],
    }
