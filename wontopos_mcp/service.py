"""MemoryService: every rule of SPEC.md, once.

The faces (MCP tools, REST, the ``Memory`` library) call these methods with SPEC's MCP
parameter names and send back the dicts they return; refusals are ``WontoposError``s.
The service is synchronous and thread-safe: the async faces call it through
``anyio.to_thread.run_sync``.

Order of checks in every call (SPEC "Errors", precedence): argument shape and ranges,
then the store, then the speaker, then the memory, then conflicts, and only then the
model, so a call that fails early never waits for the model. Checks that depend on
stored state are repeated inside the write lock, where they decide.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from . import validation as v
from .conversation import context_line, context_window
from .dates import format_us, parse_moment
from .errors import InvalidRequestError
from .idempotency import Running
from .names import check_speaker
from .records import memory_record
from .scope import filter_clauses, in_store, query_without_name, quote, quote_all
from .writes import MemoryWrites

if TYPE_CHECKING:
    from .config import Settings
    from .embeddings import ModelLoader
    from .store import Store

log = logging.getLogger(__name__)

def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class MemoryService(MemoryWrites):
    """The engine: stores and speakers (``registry``), writes (``writes``), reads (here)."""

    def __init__(
        self,
        store: "Store",
        models: "ModelLoader",
        *,
        speaker_limit: int = 50,
        clock: Callable[[], datetime] = _utcnow,
        model_wait: float = 20.0,
    ) -> None:
        self.store = store
        self.models = models
        self.speaker_limit = speaker_limit
        self.clock = clock
        self.model_wait = model_wait
        self._running = Running()
        store.on_open(self._ensure_default_store)

    @classmethod
    def open(cls, settings: "Settings", *, models: "ModelLoader | None" = None, **kwargs: Any) -> "MemoryService":
        """The composition root's way in: a database and a (not yet started) model loader."""
        from functools import partial

        from .embeddings import ModelLoader, load_embedder
        from .store import Store

        store = Store(settings.db)
        if models is None:
            models = ModelLoader(partial(load_embedder, settings.embed_model, settings.model_cache))
        return cls(store, models, speaker_limit=settings.speaker_limit, **kwargs)

    def start(self) -> None:
        """Begin loading the model and opening the database in the background.

        Returns at once: a server answers ``initialize`` and ``tools/list`` meanwhile.
        """
        self.models.start()
        threading.Thread(target=self._warm_up, name="wontopos-open-db", daemon=True).start()

    def _warm_up(self) -> None:
        try:
            self.store.connect()
        except Exception:  # the first call that needs the database reports it properly
            log.warning("opening the database in the background failed", exc_info=True)

    def close(self) -> None:
        self.store.close()

    # -- memories: reads ---------------------------------------------------------------------------

    def memory_search(
        self,
        query: Any,
        speaker: Any = None,
        limit: Any = 10,
        filters: Any = None,
        include_superseded: Any = False,
        user_id: Any = None,
    ) -> dict[str, Any]:
        text = v.text(query, field="query", max_chars=v.MAX_QUERY_CHARS)
        name = None if speaker is None else check_speaker(speaker)
        limit = v.integer(limit, field="limit", low=5, high=20)
        scope_filters = filter_clauses(filters)
        include_superseded = v.boolean(include_superseded, field="include_superseded")
        key, display = self._resolve(user_id)
        if name is not None:
            self._require_registered(key, name, writing=False)
        where = " AND ".join(
            [in_store(key)]
            + ([f"speaker = {quote(name)}"] if name is not None else [])
            + ([] if include_superseded else ["NOT superseded"])
            + scope_filters
        )
        embedder = self._embedder()
        from .search import search_memories

        hits = search_memories(self.store, embedder, query_without_name(text, name), where, limit)
        answer: dict[str, Any] = {"user_id": display, "query": text}
        if name is not None:
            answer["speaker"] = name
        answer["memories"] = [memory_record(row, similarity=sim) for row, sim in hits]
        return answer

    def by_speaker(
        self, speaker: Any, limit: Any = 20, before: Any = None, skip_ids: Any = None, user_id: Any = None
    ) -> dict[str, Any]:
        name = check_speaker(speaker)
        limit = v.integer(limit, field="limit", low=5, high=20)
        before_us = None if before is None else parse_moment(before, field="before")[0]
        skip = [] if skip_ids is None else v.string_list(skip_ids, field="skip_ids", max_items=v.MAX_SKIP_IDS)
        key, display = self._resolve(user_id)
        self._require_registered(key, name, writing=False)
        said = in_store(key) + f" AND speaker = {quote(name)}"
        where = said + " AND chunk_idx = 0"
        if before_us is not None:
            where += f" AND created_us <= {before_us}"
        if skip:
            where += f" AND memory_id NOT IN {quote_all(skip)}"
        rows = self.store.rows(where, order=(("created_us", False), ("seq", False)), limit=limit + 1)
        page, has_more = rows[:limit], len(rows) > limit
        chunks = self.store.count(said)
        next_before, next_skip = None, []
        if has_more and page:
            last = page[-1]["created_us"]
            next_before = format_us(last)
            carried = skip if before_us == last else []
            next_skip = carried + [r["memory_id"] for r in page if r["created_us"] == last]
        return {
            "user_id": display,
            "speaker": name,
            "memories": [memory_record(r) for r in page],
            "returned": len(page),
            "chunks": chunks,
            "records_to_delete": chunks,
            "points_to_delete": chunks,
            "has_more": has_more,
            "next_before": next_before,
            "next_skip_ids": next_skip,
        }

    def memory_recall(
        self, query: Any, limit: Any = 10, context_limit: Any = 10, user_id: Any = None
    ) -> dict[str, Any]:
        """Prompt-ready context: recent turns, the best memories, the conversation around the best."""
        text = v.text(query, field="query", max_chars=v.MAX_QUERY_CHARS)
        limit = v.integer(limit, field="limit", low=5, high=20)
        context_limit = v.integer(context_limit, field="context_limit", low=0, high=20)
        key, display = self._resolve(user_id)
        memories = self.memory_search(text, limit=limit, user_id=user_id)["memories"]
        around: list[str] = []
        if memories and context_limit:
            top = self._memory_row(key, memories[0]["id"])
            same = in_store(key) + " AND chunk_idx = 0 AND NOT superseded"
            if top["conversation_id"] is not None:
                same += f" AND conversation_id = {quote(top['conversation_id'])}"
            else:
                same += f" AND seq >= {top['seq'] - context_limit} AND seq <= {top['seq'] + context_limit}"
            rows = self.store.rows(same, order=(("seq", True),))
            around = [context_line(pos, row) for pos, row in context_window(rows, top["memory_id"], context_limit)]
        turns = self.store.rows(
            in_store(key) + " AND chunk_idx = 0 AND role IS NOT NULL", order=(("seq", False),), limit=context_limit
        ) if context_limit else []
        return {
            "user_id": display,
            "short_term": {"turns": [_turn(row) for row in reversed(turns)]},
            "long_term": {"memories": memories},
            "context": {"around_top_memory": around},
        }

    def memory_get(self, memory_id: Any, user_id: Any = None) -> dict[str, Any]:
        mid = v.label(memory_id, field="memory_id")
        key, _ = self._resolve(user_id)
        return {"memory": memory_record(self._memory_row(key, mid))}

    def memory_list(self, limit: Any = 100, cursor: Any = None, user_id: Any = None) -> dict[str, Any]:
        limit = v.integer(limit, field="limit", low=1, high=500)
        after = _parse_cursor(cursor)
        key, display = self._resolve(user_id)
        where = in_store(key) + f" AND chunk_idx = 0 AND seq > {after}"
        rows = self.store.rows(where, order=(("seq", True),), limit=limit + 1)
        page = rows[:limit]
        more = len(rows) > limit and page
        return {
            "user_id": display,
            "memories": [memory_record(r) for r in page],
            "count": len(page),
            "next_cursor": str(page[-1]["seq"]) if more else None,
        }

def _turn(row: dict[str, Any]) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": row["role"], "content": row["content"]}
    if row["speaker"] is not None:
        turn["speaker"] = row["speaker"]
    turn["timestamp"] = format_us(row["created_us"])
    return turn


def _parse_cursor(cursor: Any) -> int:
    if cursor is None:
        return 0
    if not isinstance(cursor, str) or not re.fullmatch(r"[0-9]{1,18}", cursor):
        raise InvalidRequestError("cursor must be a next_cursor from an earlier memory_list", field="cursor")
    return int(cursor)


