"""Stores and speakers: the registry rules of SPEC ("Stores", "Speakers").

``MemoryService`` inherits these; they are apart only to keep each module short. Every
registry change happens under the database's write lock, where the checks that decide
(existence, the speaker limit) are made again, so several processes never break them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .dates import format_us, to_us
from .errors import ConflictError, InvalidRequestError, NotFoundError
from .idempotency import WINDOW_US, record_row
from .names import DEFAULT_STORE, ME, check_person, check_store_id, store_key, store_skeleton
from .scope import in_store, quote, quote_all, speaker_key, store_where

if TYPE_CHECKING:
    from .store import Store


class StoresAndSpeakers:
    store: "Store"
    speaker_limit: int
    clock: Callable[[], datetime]

    def _now_us(self) -> int:
        return to_us(self.clock())

    # -- write order --------------------------------------------------------------------

    def _last_seq(self, key: str, recorded: int | None = None) -> int:
        """The store's highest sequence number ever given, deleted memories included.

        Deletes record the high-water mark on the store's registry row first, so a
        number is never given twice and a ``memory_list`` cursor stays a place in the
        store's write order. ``recorded``: that mark, when the caller has just read it.
        """
        if recorded is None:
            rows = self.store.registry_rows(f"kind = 'store' AND user_id = {quote(key)}")
            recorded = _recorded_seq(rows[0]) if rows else 0
        return max(self.store.max_seq(key), recorded)

    def _remember_last_seq(self, key: str) -> None:
        """Call inside the write lock before deleting memories of the store ``key``."""
        last = self._last_seq(key)
        self.store.registry_update(f"kind = 'store' AND user_id = {quote(key)}", {"value": str(last)})

    def _delete_memories(self, key: str, where: str, *, updated: list[dict[str, Any]] | None = None) -> None:
        """Delete the memories ``where`` selects (inside the write lock), keeping the
        store's sequence high-water mark and their idempotency records first; rows in
        ``updated`` are rewritten in the same commit as the delete."""
        self._remember_last_seq(key)
        self._keep_idempotency_records(key, where)
        if updated:
            self.store.upsert_chunks(self.store.existing_chunks(), updated, delete_where=where)
        else:
            self.store.delete_chunks(where)

    def _keep_idempotency_records(self, key: str, where: str) -> None:
        """Before memories that carry an idempotency key within its 24 hours are deleted,
        keep the key's first answer in the registry: a repeat must still replay, never
        store again what was forgotten. Call inside the write lock."""
        since = self._now_us() - WINDOW_US
        rows = self.store.rows(
            where + f" AND chunk_idx = 0 AND idem_key IS NOT NULL AND created_us >= {since}",
            columns=("idem_key", "idem_fp", "idem_answer", "created_us"),
        )
        records = {
            r["idem_key"]: record_row(key, r["idem_key"], r["idem_fp"], r["idem_answer"], r["created_us"]) for r in rows
        }
        if records:
            self.store.registry_delete(f"kind = 'idem' AND user_id = {quote(key)} AND name IN {quote_all(sorted(records))}")
            self.store.registry_add(list(records.values()))

    # -- stores ------------------------------------------------------------------------

    def _ensure_default_store(self) -> None:
        if self.store.registry_count(store_where(DEFAULT_STORE)):
            return
        with self.store.write_lock():
            if not self.store.registry_count(store_where(DEFAULT_STORE)):
                self.store.registry_add([_store_row(DEFAULT_STORE, self._now_us())])

    def _resolve(self, user_id: Any) -> tuple[str, str]:
        """(key, id as created) of an existing store, else 404 saying how to create it."""
        key, display, _ = self._checked(user_id)
        return key, display

    def _checked(
        self, user_id: Any, speakers: Sequence[tuple[str | None, str]] = (), *, writing: bool = True
    ) -> tuple[str, str, int]:
        """(key, id as created, recorded sequence high-water mark) of an existing store,
        after checking it and every (speaker, field) named, with ONE registry read. The
        store is checked first, then the speakers in order (SPEC's precedence); an
        unregistered speaker is 400 for a write, 404 for a read."""
        store_id = check_store_id(DEFAULT_STORE if user_id is None else user_id)
        key = store_key(store_id)
        people = [(name, field) for name, field in speakers if name is not None and name != ME]
        wanted = [_store_row_key(store_id), *(speaker_key(key, name) for name, _ in people)]
        found = {row["key"]: row for row in self.store.registry_rows(f"key IN {quote_all(sorted(set(wanted)))}")}
        if wanted[0] not in found:
            raise _missing_store(store_id)
        for name, field in people:
            if speaker_key(key, name) not in found:
                raise _unregistered(name, field, writing=writing)
        store_row = found[wanted[0]]
        return key, store_row["name"], _recorded_seq(store_row)

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
            self._remember_last_seq(key)
            self.store.delete_chunks(in_store(key))
            # A deleted store's keys go with it (its speakers too; "default" is emptied).
            self.store.registry_delete(f"kind IN ('speaker', 'idem') AND user_id = {quote(key)}")
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
            self._delete_memories(key, in_store(key))
        return {"user_id": display, "status": "deleted", "deleted": deleted}

    # -- speakers --------------------------------------------------------------------------

    def _speaker_row(self, key: str, name: str) -> dict[str, Any] | None:
        rows = self.store.registry_rows(f"key = {quote(speaker_key(key, name))}")
        return rows[0] if rows else None

    def _require_registered(self, key: str, name: str, *, writing: bool, field: str = "speaker") -> None:
        if name == ME or self._speaker_row(key, name) is not None:
            return
        raise _unregistered(name, field, writing=writing)

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


def _missing_store(store_id: str) -> NotFoundError:
    return NotFoundError(
        f"store '{store_id}' does not exist; create it first with store_create "
        f"(user_id='{store_id}') or use the built-in 'default' store",
        user_id=store_id,
    )


def _unregistered(name: str, field: str, *, writing: bool) -> InvalidRequestError | NotFoundError:
    """A write names an unregistered speaker: 400; a read or removal: 404."""
    if writing:
        return InvalidRequestError(
            f"speaker '{name}' is not registered in this store. Register it first: "
            f"speaker_register(speaker='{name}'); 'me' (the assistant) needs no registration",
            field=field,
            speaker=name,
        )
    return NotFoundError(f"speaker '{name}' is not registered in this store", field=field, speaker=name)


def _recorded_seq(store_row: dict[str, Any]) -> int:
    return int(store_row["value"]) if store_row["value"] else 0


def _store_row_key(store_id: str) -> str:
    return f"store:{store_key(store_id)}"


def _registry_row(kind: str, key: str, user_key: str, name: str, created_us: int) -> dict[str, Any]:
    return {"key": key, "kind": kind, "user_id": user_key, "name": name, "created_us": created_us, "value": None}


def _store_row(store_id: str, created_us: int) -> dict[str, Any]:
    return _registry_row("store", _store_row_key(store_id), store_key(store_id), store_id, created_us)
