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
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from . import validation as v
from .dates import format_us, month_bucket, parse_moment, to_us
from .duplicates import is_restatement
from .errors import ConflictError, InvalidRequestError, NotFoundError
from .names import (
    DEFAULT_STORE,
    ME,
    check_person,
    check_speaker,
    check_store_id,
    store_key,
    store_skeleton,
)
from .records import memory_record
from .scope import (
    filter_clauses,
    in_store,
    query_without_name,
    quote,
    quote_all,
    speaker_is,
    speaker_key,
    store_where,
)
from .text import chunk_text, duplicate_key, importance

if TYPE_CHECKING:
    from .config import Settings
    from .embeddings import Embedder, ModelLoader
    from .store import Store

log = logging.getLogger(__name__)

DEFAULT_CATEGORY = "general"
# Near-duplicate candidates: the nearest chunks of the same speaker above this cosine
# similarity go to the text comparison (which decides); below it nothing is a restatement.
DUPLICATE_CANDIDATES = 8
DUPLICATE_MIN_SIMILARITY = 0.80


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class MemoryService:
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

    # -- stores ------------------------------------------------------------------------

    def _ensure_default_store(self) -> None:
        if self.store.registry_count(store_where(DEFAULT_STORE)):
            return
        with self.store.write_lock():
            if not self.store.registry_count(store_where(DEFAULT_STORE)):
                self.store.registry_add([_store_row(DEFAULT_STORE, self._now_us())])

    def _resolve(self, user_id: Any) -> tuple[str, str]:
        """(key, id as created) of an existing store, else 404 saying how to create it."""
        if user_id is None:
            user_id = DEFAULT_STORE
        store_id = check_store_id(user_id)
        rows = self.store.registry_rows(store_where(store_id))
        if not rows:
            raise NotFoundError(
                f"store '{store_id}' does not exist; create it first with store_create "
                f"(user_id='{store_id}') or use the built-in 'default' store",
                user_id=store_id,
            )
        return store_key(store_id), rows[0]["name"]

    def store_create(self, user_id: Any) -> dict[str, Any]:
        store_id = check_store_id(user_id)
        with self.store.write_lock():
            existing = self.store.registry_rows(store_where(store_id))
            if existing:
                return {"user_id": existing[0]["name"], "status": "exists"}
            skeleton = store_skeleton(store_id)
            for row in self.store.registry_rows("kind = 'store'"):
                if store_skeleton(row["name"]) == skeleton:
                    raise ConflictError(
                        f"store '{store_id}' would be confused with the existing store "
                        f"'{row['name']}' (ids differing only in '.', '_' or '-' cannot both exist)",
                        user_id=store_id,
                        conflicts_with=row["name"],
                    )
            self.store.registry_add([_store_row(store_id, self._now_us())])
        return {"user_id": store_id, "status": "created"}

    def stores_list(self) -> dict[str, Any]:
        rows = sorted(self.store.registry_rows("kind = 'store'"), key=lambda r: (r["created_us"], r["name"]))
        return {"stores": [{"user_id": r["name"], "created_at": format_us(r["created_us"])} for r in rows]}

    def store_delete(self, user_id: Any) -> dict[str, Any]:
        if user_id is None:
            raise InvalidRequestError("user_id is required to delete a store", field="user_id")
        key, display = self._resolve(user_id)
        with self.store.write_lock():
            # Memories first, then the registrations: a crash in between leaves a store
            # that a repeated call finishes deleting, never memories without their store.
            self.store.delete_chunks(in_store(key))
            self.store.registry_delete(f"kind = 'speaker' AND user_id = {quote(key)}")
            if key != DEFAULT_STORE:
                self.store.registry_delete(f"kind = 'store' AND user_id = {quote(key)}")
        return {"user_id": display, "status": "deleted"}

    def delete_all(self, user_id: Any) -> dict[str, Any]:
        """Erase every memory of a store; the store and its speakers stay (REST/library)."""
        if user_id is None:
            raise InvalidRequestError("user_id is required to delete every memory", field="user_id")
        key, display = self._resolve(user_id)
        with self.store.write_lock():
            deleted = self.store.count(in_store(key) + " AND chunk_idx = 0")
            self.store.delete_chunks(in_store(key))
        return {"user_id": display, "status": "deleted", "deleted": deleted}

    # -- speakers --------------------------------------------------------------------------

    def _speaker_row(self, key: str, name: str) -> dict[str, Any] | None:
        rows = self.store.registry_rows(f"key = {quote(speaker_key(key, name))}")
        return rows[0] if rows else None

    def _require_registered(self, key: str, name: str, *, writing: bool, field: str = "speaker") -> None:
        if name == ME or self._speaker_row(key, name) is not None:
            return
        if writing:
            raise InvalidRequestError(
                f"speaker '{name}' is not registered in this store. Register it first: "
                f"speaker_register(speaker='{name}'); 'me' (the assistant) needs no registration",
                field=field,
                speaker=name,
            )
        raise NotFoundError(f"speaker '{name}' is not registered in this store", field=field, speaker=name)

    def _speaker_count(self, key: str) -> int:
        return self.store.registry_count(f"kind = 'speaker' AND user_id = {quote(key)}")

    def speaker_register(self, speaker: Any, user_id: Any = None) -> dict[str, Any]:
        name = check_person(speaker)
        key, display = self._resolve(user_id)
        with self.store.write_lock():
            self._resolve(user_id)
            row = self._speaker_row(key, name)
            status = "exists"
            if row is None:
                count = self._speaker_count(key)
                if count >= self.speaker_limit:
                    raise InvalidRequestError(
                        f"this store already has {count} registered speakers, the limit; "
                        "remove one with speaker_remove before registering another",
                        field="speaker",
                        speaker=name,
                        speaker_limit=self.speaker_limit,
                    )
                row = _registry_row("speaker", speaker_key(key, name), key, name, self._now_us())
                self.store.registry_add([row])
                status = "registered"
            count = self._speaker_count(key)
        return {
            "user_id": display,
            "speaker": name,
            "status": status,
            "created_at": format_us(row["created_us"]),
            "count": count,
            "limit": self.speaker_limit,
        }

    def speakers_list(self, user_id: Any = None) -> dict[str, Any]:
        key, display = self._resolve(user_id)
        rows = self.store.registry_rows(f"kind = 'speaker' AND user_id = {quote(key)}")
        counts = Counter(self.store.column(in_store(key) + " AND chunk_idx = 0 AND speaker IS NOT NULL", "speaker"))
        speakers = [
            {"speaker": r["name"], "memories": counts.get(r["name"], 0), "created_at": format_us(r["created_us"])}
            for r in sorted(rows, key=lambda r: (r["created_us"], r["name"]))
        ]
        return {"user_id": display, "speakers": speakers, "count": len(speakers), "limit": self.speaker_limit}

    def speaker_remove(self, speaker: Any, user_id: Any = None) -> dict[str, Any]:
        name = check_person(speaker)
        key, display = self._resolve(user_id)
        self._require_registered(key, name, writing=False)
        with self.store.write_lock():
            self._require_registered(key, name, writing=False)
            tagged = in_store(key) + f" AND speaker = {quote(name)}"
            untagged = self.store.count(tagged + " AND chunk_idx = 0")
            # Untag first: a crash before the registry delete leaves a registered name
            # with no memories, which a repeated call finishes removing.
            self.store.update_chunks(tagged, {"speaker": "NULL"})
            self.store.registry_delete(f"key = {quote(speaker_key(key, name))}")
        return {"user_id": display, "speaker": name, "status": "removed", "memories_untagged": untagged}

    # -- memories: writes ----------------------------------------------------------------------

    def memory_add(
        self,
        content: Any,
        speaker: Any = None,
        category: Any = None,
        event_date: Any = None,
        conversation_id: Any = None,
        user_id: Any = None,
    ) -> dict[str, Any]:
        text = v.text(content, field="content", max_chars=v.MAX_CONTENT_CHARS)
        name = None if speaker is None else check_speaker(speaker)
        category = v.optional_label(category, field="category") or DEFAULT_CATEGORY
        event = None if event_date is None else parse_moment(event_date, field="event_date")
        conversation = v.optional_label(conversation_id, field="conversation_id")
        key, display = self._resolve(user_id)
        if name is not None:
            self._require_registered(key, name, writing=True)
        embedder = self._embedder()
        chunks = chunk_text(text, embedder.max_chars)
        vectors = embedder.embed_passages(chunks)
        memory = {
            "content": text, "speaker": name, "category": category, "event": event,
            "conversation_id": conversation, "role": None,
        }  # fmt: skip
        with self.store.write_lock():
            self._resolve(user_id)
            if name is not None:
                self._require_registered(key, name, writing=True)
            table = self.store.chunks(embedder.model_id, embedder.dim)
            duplicate = self._find_duplicate(key, text, name, conversation, vectors[0])
            if duplicate is not None:
                return _duplicate_answer(display, duplicate)
            memory_id, rows = self._new_rows(key, memory, chunks, vectors)
            self.store.add_chunks(table, rows)
        answer: dict[str, Any] = {"user_id": display, "id": memory_id, "status": "stored"}
        if name is not None:
            answer["speaker"] = name
        answer["chunks"] = len(chunks)
        return answer

    def _find_duplicate(
        self, key: str, text: str, name: str | None, conversation: str | None, vector: Any
    ) -> str | None:
        """A current memory this text restates, by the same speaker, from another conversation.

        Exact restatements are found by their normalised key; near-verbatim ones among the
        nearest memories by vector, then decided by comparing the texts (``duplicates``).
        """
        scope = in_store(key) + " AND NOT superseded AND " + speaker_is(name)

        def other_conversation(row: dict[str, Any]) -> bool:
            return conversation is None or row["conversation_id"] != conversation

        exact = self.store.rows(
            scope + f" AND chunk_idx = 0 AND dup_key = {quote(duplicate_key(text))}",
            columns=("memory_id", "conversation_id"),
        )
        for row in filter(other_conversation, exact):
            return row["memory_id"]
        near = self.store.vector_search(
            vector, scope, DUPLICATE_CANDIDATES, ("memory_id", "content", "conversation_id")
        )
        for row in near:
            if 1.0 - row["_distance"] < DUPLICATE_MIN_SIMILARITY or not other_conversation(row):
                continue
            if is_restatement(text, row["content"]):
                return row["memory_id"]
        return None

    def _new_rows(
        self, key: str, memory: dict[str, Any], chunks: list[str], vectors: Any
    ) -> tuple[str, list[dict[str, Any]]]:
        memory_id = str(uuid.uuid4())
        created = self._now_us()
        event = memory["event"]
        when = event[0] if event else created
        shared = {
            "memory_id": memory_id,
            "n_chunks": len(chunks),
            "user_id": key,
            "speaker": memory["speaker"],
            "content": memory["content"],
            "dup_key": duplicate_key(memory["content"]),
            "created_us": created,
            "seq": self.store.max_seq(key) + 1,
            "event_date": event[1] if event else None,
            "event_us": event[0] if event else None,
            "when_us": when,
            "time_bucket": month_bucket(when),
            "category": memory["category"],
            "importance": importance(memory["content"]),
            "superseded": False,
            "superseded_by": None,
            "conversation_id": memory["conversation_id"],
            "role": memory["role"],
        }
        rows = [
            {**shared, "chunk_id": f"{memory_id}:{i}", "chunk_idx": i, "text": chunk, "vector": vectors[i].tolist()}
            for i, chunk in enumerate(chunks)
        ]
        return memory_id, rows

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

    def memory_get(self, memory_id: Any, user_id: Any = None) -> dict[str, Any]:
        mid = v.label(memory_id, field="memory_id")
        key, _ = self._resolve(user_id)
        return {"memory": memory_record(self._memory_row(key, mid))}

    def _memory_row(self, key: str, memory_id: str, columns: Any = None) -> dict[str, Any]:
        where = in_store(key) + f" AND memory_id = {quote(memory_id)} AND chunk_idx = 0"
        rows = self.store.rows(where, **({"columns": columns} if columns else {}))
        if not rows:
            raise NotFoundError(f"memory '{memory_id}' does not exist in this store", memory_id=memory_id)
        return rows[0]

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

    # -- memories: forget and supersede -----------------------------------------------------------

    def memory_forget(
        self, memory_id: Any = None, speaker: Any = None, confirm_records: Any = None, user_id: Any = None
    ) -> dict[str, Any]:
        if (memory_id is None) == (speaker is None):
            raise InvalidRequestError(
                "give exactly one of memory_id, or speaker with confirm_records", field="memory_id"
            )
        if memory_id is not None:
            if confirm_records is not None:
                raise InvalidRequestError("confirm_records goes with speaker, not memory_id", field="confirm_records")
            return self._forget_one(v.label(memory_id, field="memory_id"), user_id)
        name = check_speaker(speaker)
        if confirm_records is None:
            raise InvalidRequestError(
                "confirm_records is required with speaker: pass records_to_delete from by_speaker",
                field="confirm_records",
            )
        confirm = v.integer(confirm_records, field="confirm_records", low=0)
        return self._forget_speaker(name, confirm, user_id)

    def _forget_one(self, memory_id: str, user_id: Any) -> dict[str, Any]:
        key, display = self._resolve(user_id)
        self._memory_row(key, memory_id)
        with self.store.write_lock():
            self._memory_row(key, memory_id)
            gone = in_store(key) + f" AND memory_id = {quote(memory_id)}"
            # Forgetting the newest version makes its predecessor current again, in the
            # same commit as the delete.
            previous = self.store.rows(in_store(key) + f" AND superseded_by = {quote(memory_id)}", columns=_ALL)
            if previous:
                restored = [{**r, "superseded": False, "superseded_by": None} for r in previous]
                self.store.upsert_chunks(self.store.existing_chunks(), restored, delete_where=gone)
            else:
                self.store.delete_chunks(gone)
        return {"user_id": display, "status": "deleted", "deleted": 1}

    def _forget_speaker(self, name: str, confirm: int, user_id: Any) -> dict[str, Any]:
        key, display = self._resolve(user_id)
        self._require_registered(key, name, writing=False)
        said = in_store(key) + f" AND speaker = {quote(name)}"
        with self.store.write_lock():
            current = self.store.count(said)
            if current != confirm:
                raise ConflictError(
                    f"confirm_records is {confirm} but {name!r} now has {current} records to delete; "
                    "call by_speaker again and confirm the current number",
                    field="confirm_records",
                    records_to_delete=current,
                )
            deleted = self.store.count(said + " AND chunk_idx = 0")
            self.store.delete_chunks(said)
        return {"user_id": display, "status": "deleted", "deleted": deleted}

    def memory_supersede(self, memory_id: Any, content: Any, user_id: Any = None) -> dict[str, Any]:
        mid = v.label(memory_id, field="memory_id")
        text = v.text(content, field="content", max_chars=v.MAX_CONTENT_CHARS)
        key, display = self._resolve(user_id)
        _refuse_superseded(self._memory_row(key, mid))
        embedder = self._embedder()
        chunks = chunk_text(text, embedder.max_chars)
        vectors = embedder.embed_passages(chunks)
        with self.store.write_lock():
            old = _refuse_superseded(self._memory_row(key, mid))
            memory = {
                "content": text, "speaker": old["speaker"], "category": old["category"], "event": None,
                "conversation_id": old["conversation_id"], "role": old["role"],
            }  # fmt: skip
            new_id, rows = self._new_rows(key, memory, chunks, vectors)
            old_rows = self.store.rows(in_store(key) + f" AND memory_id = {quote(mid)}", columns=_ALL)
            marked = [{**r, "superseded": True, "superseded_by": new_id} for r in old_rows]
            self.store.upsert_chunks(self.store.chunks(embedder.model_id, embedder.dim), marked + rows)
        return {"user_id": display, "id": new_id, "status": "stored", "superseded": mid}

    # -- helpers ------------------------------------------------------------------------------------

    def _embedder(self) -> "Embedder":
        return self.models.get(timeout=self.model_wait)

    def _now_us(self) -> int:
        return to_us(self.clock())


_ALL = (
    "chunk_id", "memory_id", "chunk_idx", "n_chunks", "user_id", "speaker", "content", "text", "dup_key",
    "created_us", "seq", "event_date", "event_us", "when_us", "time_bucket", "category", "importance",
    "superseded", "superseded_by", "conversation_id", "role", "vector",
)  # fmt: skip


def _registry_row(kind: str, key: str, user_key: str, name: str, created_us: int) -> dict[str, Any]:
    return {"key": key, "kind": kind, "user_id": user_key, "name": name, "created_us": created_us, "value": None}


def _store_row(store_id: str, created_us: int) -> dict[str, Any]:
    return _registry_row("store", f"store:{store_key(store_id)}", store_key(store_id), store_id, created_us)


def _duplicate_answer(display: str, duplicate_of: str) -> dict[str, Any]:
    return {
        "user_id": display,
        "status": "duplicate",
        "id": "",
        "duplicate_of": duplicate_of,
        "note": "not stored: this restates a current memory of the same speaker; "
        "use memory_supersede to change a fact",
    }


def _refuse_superseded(row: dict[str, Any]) -> dict[str, Any]:
    if row["superseded"]:
        raise ConflictError(
            f"memory '{row['memory_id']}' was already superseded; supersede its current version",
            memory_id=row["memory_id"],
            superseded_by=row["superseded_by"],
        )
    return row


def _parse_cursor(cursor: Any) -> int:
    if cursor is None:
        return 0
    if not isinstance(cursor, str) or not cursor.isdigit() or len(cursor) > 19:
        raise InvalidRequestError("cursor must be a next_cursor from an earlier memory_list", field="cursor")
    return int(cursor)


