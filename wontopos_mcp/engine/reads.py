"""Memory reads: search, recall, get, list. ``by_speaker`` is ``speaker_pages``.

Each validates its arguments, then resolves the store (and a named speaker) once, and
only then asks for the model, so a call that fails early never waits for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from wontopos_mcp.contract import operation
from wontopos_mcp.errors import Fix, InvalidRequestError
from wontopos_mcp.rules import validation as v
from wontopos_mcp.rules.answers import (
    JSON,
    MemoryGetAnswer,
    MemoryListAnswer,
    MemoryRecallAnswer,
    MemoryRecord,
    MemorySearchAnswer,
    RecallTurn,
)
from wontopos_mcp.rules.budget import fit
from wontopos_mcp.rules.conversation import context_line, context_window
from wontopos_mcp.rules.dates import format_us
from wontopos_mcp.rules.names import check_speaker
from wontopos_mcp.rules.query_names import names_in, query_without_name, query_without_names
from wontopos_mcp.rules.records import memory_record, turn_role
from wontopos_mcp.storage.rows import ChunkRow
from wontopos_mcp.storage.where import filter_clauses, search_scope

from .history import AsOf, History, moment

if TYPE_CHECKING:
    from wontopos_mcp.model.embeddings import Embedder

    from .memories import Memories
    from .registry import Registry, StoreHandle


# Ranges and defaults: the contract table's, written once there.
SEARCH_LIMIT = operation("memory_search").param("limit")
RECALL_LIMIT, CONTEXT_LIMIT = (operation("memory_recall").param(name) for name in ("limit", "context_limit"))
LIST_LIMIT = operation("memory_list").param("limit")
MAX_CHARS = operation("memory_search").param("max_chars")


def _text_size(memory: MemoryRecord | RecallTurn) -> int:
    return len(memory["content"])


class Reads:
    def __init__(
        self, registry: Registry, memories: Memories, *, embedder: Callable[[], Embedder], now_us: Callable[[], int]
    ) -> None:
        self.registry = registry
        self.memories = memories
        self.history = History(memories.store)
        self._embedder = embedder
        self._now_us = now_us

    def _moment(self, as_of: JSON) -> int | None:
        return None if as_of is None else moment(as_of, self._now_us())

    def memory_search(
        self,
        query: JSON,
        speaker: JSON = None,
        limit: JSON = SEARCH_LIMIT.default,
        filters: JSON = None,
        include_superseded: JSON = False,
        user_id: JSON = None,
        max_chars: JSON = None,
        as_of: JSON = None,
    ) -> MemorySearchAnswer:
        text = v.text(query, field="query", max_chars=v.MAX_QUERY_CHARS)
        name = None if speaker is None else check_speaker(speaker)
        limit = SEARCH_LIMIT.integer(limit)
        scope_filters = filter_clauses(filters)
        include_superseded = v.boolean(include_superseded, field="include_superseded")
        budget = None if max_chars is None else MAX_CHARS.integer(max_chars)
        until = self._moment(as_of)
        handle = self.registry.resolve(user_id, [(name, "speaker")], writing=False)
        at = None if until is None else self.history.as_of(handle.key, until)
        answer: MemorySearchAnswer = {"user_id": handle.display, "query": text}  # type: ignore[typeddict-item]
        if name is not None:
            answer["speaker"] = name  # after the query, before the memories: the answer's order
        found = self._search(handle, text, name, limit, scope_filters, include_superseded, at)
        answer["memories"] = found if budget is None else fit(found, _text_size, budget)[0]
        if len(answer["memories"]) < len(found):
            answer["truncated"] = True
        return answer

    def _search(
        self,
        handle: StoreHandle,
        text: str,
        name: str | None,
        limit: int,
        filters: list[str],
        superseded: bool,
        at: AsOf | None = None,
    ) -> list[MemoryRecord]:
        # ``context``: whose words may lend full-text score to their neighbours and seed
        # replies, and where neighbours are read: the store's current memories, or at a
        # past moment those current then, so a memory stored later moves nothing.
        if at is None:
            where = search_scope(handle.key, name, superseded, filters)
            context = search_scope(handle.key, None, False, [])
        else:
            where = self.history.scope(search_scope(handle.key, name, True, filters), at, superseded)
            context = self.history.scope(search_scope(handle.key, None, True, []), at, False)
        from .ranking import search_memories  # numpy: off the start-up path (spawn -> tools/list)

        # Registered speakers' names in the query are who, not what: all are dropped from
        # it (most turns that hold a name only address that person). Without a filter the
        # speakers it names lean the ranking; with one the filter alone decides.
        named = names_in(text, [row["name"] for row in self.registry.speakers(handle.key)])
        query = query_without_name(query_without_names(text, named), name)
        lean = named if name is None else ()
        hits = search_memories(self.memories.store, self._embedder(), query, where, limit, named=lean, context=context)
        records = [memory_record(row, similarity=sim) for row, sim in hits]
        return self.history.dated(handle.key, records, None if at is None else at.until)

    def memory_recall(
        self,
        query: JSON,
        limit: JSON = RECALL_LIMIT.default,
        context_limit: JSON = CONTEXT_LIMIT.default,
        user_id: JSON = None,
        max_chars: JSON = None,
        as_of: JSON = None,
    ) -> MemoryRecallAnswer:
        """Prompt-ready context: recent turns, the best memories, the conversation around
        the best. ``max_chars`` budgets the whole answer's texts: the memories, then
        the context lines, then the short-term turns, newest first (an older turn goes
        before a newer one: the newest is what the conversation is about now); ``as_of``
        answers all three as the store stood then."""
        text = v.text(query, field="query", max_chars=v.MAX_QUERY_CHARS)
        limit = RECALL_LIMIT.integer(limit)
        context_limit = CONTEXT_LIMIT.integer(context_limit)
        budget = None if max_chars is None else MAX_CHARS.integer(max_chars)
        until = self._moment(as_of)
        handle = self.registry.resolve(user_id)
        at = None if until is None else self.history.as_of(handle.key, until)  # for all three parts
        found = self._search(handle, text, None, limit, [], False, at)
        lines = self._around(handle, found, context_limit, at)
        recent = self._turns(handle, context_limit, at)
        memories, around, turns = found, lines, recent
        if budget is not None:
            memories, left = fit(found, _text_size, budget)
            around, left = fit(lines, len, left, at_least_one=False)
            newest_first, _ = fit(recent[::-1], _text_size, left, at_least_one=False)
            turns = newest_first[::-1]
        answer: MemoryRecallAnswer = {
            "user_id": handle.display,
            "short_term": {"turns": turns},
            "long_term": {"memories": memories},
            "context": {"around_top_memory": around},
        }
        if len(memories) < len(found) or len(around) < len(lines) or len(turns) < len(recent):
            answer["truncated"] = True
        return answer

    def _around(
        self,
        handle: StoreHandle,
        memories: list[MemoryRecord],
        reach: int,
        at: AsOf | None = None,
    ) -> list[str]:
        """The conversation around the best memory, as prompt lines (as it stood ``at``)."""
        if not memories or not reach:
            return []
        top = self.memories.memory_row(handle.key, memories[0]["id"])
        rows = self.history.around(handle.key, top, reach, None if at is None else at.until)
        if at is not None and at.gone:
            replaced = set(at.gone)
            rows = [r for r in rows if r["memory_id"] not in replaced]
        return [context_line(pos, row) for pos, row in context_window(rows, top["memory_id"], reach)]

    def _turns(self, handle: StoreHandle, limit: int, at: AsOf | None = None) -> list[RecallTurn]:
        """The store's last ``limit`` conversation turns (stored by then), oldest first."""
        rows = self.history.recent_turns(handle.key, limit, None if at is None else at.until) if limit else []
        return [_turn(row) for row in reversed(rows)]

    def memory_get(self, memory_id: JSON, user_id: JSON = None) -> MemoryGetAnswer:
        mid = v.label(memory_id, field="memory_id")
        handle = self.registry.resolve(user_id)
        return {"memory": self.history.dated(handle.key, [memory_record(self.memories.memory_row(handle.key, mid))])[0]}

    def memory_list(
        self, limit: JSON = LIST_LIMIT.default, cursor: JSON = None, user_id: JSON = None, speaker: JSON = None
    ) -> MemoryListAnswer:
        """Every memory of the store (or of one speaker: one person's export), oldest first."""
        limit = LIST_LIMIT.integer(limit)
        after, after_id = _parse_cursor(cursor)
        name = None if speaker is None else check_speaker(speaker)
        handle = self.registry.resolve(user_id)
        if name is not None:
            self.registry.require_speaker(handle.key, name, writing=False)
        rows = self.memories.after_seq(handle.key, after, limit + 1, after_id, speaker=name)
        page = rows[:limit]
        more = len(rows) > limit and page
        return {
            "user_id": handle.display,
            "memories": self.history.dated(handle.key, [memory_record(r) for r in page]),
            "count": len(page),
            "next_cursor": f"{page[-1]['seq']}:{page[-1]['memory_id']}" if more else None,
        }


def _turn(row: ChunkRow) -> RecallTurn:
    turn: RecallTurn = {"role": turn_role(row["role"]), "content": row["content"]}  # type: ignore[typeddict-item]
    if row["speaker"] is not None:
        turn["speaker"] = row["speaker"]
    turn["timestamp"] = format_us(row["created_us"])  # after the speaker: the answer's order
    return turn


_CURSOR = re.compile(r"([0-9]{1,18})(?::([0-9a-f-]{36}))?")


def _parse_cursor(cursor: JSON) -> tuple[int, str | None]:
    """(seq, memory id) of the last memory listed: ``"<seq>:<memory id>"``, or a bare
    ``"<seq>"`` as earlier versions gave (read as "after every memory with that seq")."""
    if cursor is None:
        return 0, None
    match = _CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
    if match is None:
        raise InvalidRequestError(
            ("cursor must be a next_cursor from an earlier ", Fix.of("memory_list")), field="cursor"
        )
    return int(match[1]), match[2]
