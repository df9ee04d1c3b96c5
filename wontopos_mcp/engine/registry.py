"""The registry: stores, speakers, sequence high-water marks and kept idempotency records.
``Registry`` is the only reader and writer of those rows; their keys, kinds and what
``value`` means for each are defined here and nowhere else (the row's type is
``storage.rows.RegistryRow``; the model record and the purge markers are storage's own
rows, kept by ``storage.adapter`` and ``storage.purge``).

``resolve`` parses a ``user_id`` once per call and answers a ``StoreHandle``; the rule
"a named speaker must be registered, and ``me`` needs no registration" is
``_unregistered_among``, used by every check. Writers call the methods marked "inside the
write lock" under ``store.write_lock()``, where the checks that decide (existence, the
speaker limit) are made again, so several processes never break them.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from wontopos_mcp.errors import ConflictError, Fix, InvalidRequestError, NotFoundError
from wontopos_mcp.rules.answers import StoreCreateAnswer
from wontopos_mcp.rules.idempotency import names_any
from wontopos_mcp.rules.names import DEFAULT_STORE, ME, named_store, store_key, store_skeleton
from wontopos_mcp.storage import where
from wontopos_mcp.storage.rows import RegistryRow

if TYPE_CHECKING:
    from wontopos_mcp.storage.adapter import Store

_DELETE_BATCH = 500  # registry keys per delete
_SECRET = "secret:idempotency"  # the database's key for idempotency fingerprints
Speakers = Sequence[tuple[str | None, str]]  # (name or None, the field that named it)


@dataclass(frozen=True)
class StoreHandle:
    """An existing store, as one call sees it: ``key`` (its lookup key), ``display`` (its
    id as created), ``given`` (the id as this call spelled it) and ``recorded_seq`` (the
    sequence high-water mark on its registry row when it was read)."""

    key: str
    display: str
    given: str
    recorded_seq: int = 0


class Registry:
    def __init__(self, store: Store, *, speaker_limit: int, now_us: Callable[[], int]) -> None:
        self.store = store
        self.speaker_limit = speaker_limit
        self._now_us = now_us
        self._secret: bytes | None = None

    # -- stores ----------------------------------------------------------------------------

    def resolve(self, user_id: object, speakers: Speakers = (), *, writing: bool = True) -> StoreHandle:
        """The store ``user_id`` names (``None``: "default"), after checking it and every
        (speaker, field) named with ONE registry read: the store first, then the speakers
        in order, so that a missing store is told before any speaker. 404 for a missing
        store, saying how to create it."""
        store_id = named_store(user_id)
        return self._read(store_key(store_id), store_id, speakers, writing)

    def confirm(self, handle: StoreHandle, speakers: Speakers = (), *, writing: bool = True) -> StoreHandle:
        """``resolve`` again for a store already resolved in this call (the id is not
        parsed again): before or inside the write lock, where the answer decides."""
        return self._read(handle.key, handle.given, speakers, writing)

    def _read(self, key: str, given: str, speakers: Speakers, writing: bool) -> StoreHandle:
        people = _people(speakers)
        wanted = [_store_row_key(key), *(_speaker_key(key, name) for name, _ in people)]
        found = {row["key"]: row for row in self.store.registry.rows(where.registry_keys_in(sorted(set(wanted))))}
        row = found.get(wanted[0])
        if row is None:
            raise _missing_store(given)
        _unregistered_among(key, people, found, writing=writing)
        return StoreHandle(key, row["name"], given, _recorded_seq(row))

    def ensure_default_store(self) -> None:
        if self.store.registry.count(where.registry_store(store_key(DEFAULT_STORE))):
            return
        with self.store.write_lock():
            if not self.store.registry.count(where.registry_store(store_key(DEFAULT_STORE))):
                self.store.registry.insert([_store_row(DEFAULT_STORE, self._now_us())])

    def create_store(self, store_id: str) -> StoreCreateAnswer:
        """Register a store (``store_id`` already checked); "exists" when it does, as
        decided by the row actually inserted (another writer may have decided too)."""
        with self.store.write_lock():
            existing = self._store_rows(store_id)
            if existing:
                return {"user_id": existing[0]["name"], "status": "exists"}
            skeleton = store_skeleton(store_id)
            for row in self.store.registry.rows(where.REGISTRY_STORES):
                if store_skeleton(row["name"]) == skeleton:
                    raise ConflictError(
                        f"store '{store_id}' would be confused with the existing store "
                        f"'{row['name']}' (ids differing only in '.', '_' or '-' cannot both exist)",
                        field="user_id",
                        user_id=store_id,
                        conflicts_with=row["name"],
                    )
            if not self.store.registry.insert([_store_row(store_id, self._now_us())]):
                return {"user_id": self._store_rows(store_id)[0]["name"], "status": "exists"}
        return {"user_id": store_id, "status": "created"}

    def _store_rows(self, store_id: str) -> list[RegistryRow]:
        return self.store.registry.rows(where.registry_store(store_key(store_id)))

    def stores(self) -> list[RegistryRow]:
        """Every store's row, oldest first."""
        return sorted(self.store.registry.rows(where.REGISTRY_STORES), key=lambda r: (r["created_us"], r["name"]))

    def forget_store(self, key: str) -> None:
        """Inside the write lock: drop a store's speakers and kept records, and the store
        itself unless it is "default" (which is only emptied)."""
        self.store.registry.delete(where.registry_of_store(("speaker", "idem"), key))
        if key != DEFAULT_STORE:
            self.store.registry.delete(where.registry_store(key))

    # -- sequence high-water marks ------------------------------------------------------------

    def recorded_seq(self, key: str) -> int:
        """The high-water mark deletes left on the store's row (0 when none)."""
        rows = self.store.registry.rows(where.registry_store(key))
        return _recorded_seq(rows[0]) if rows else 0

    def record_seq(self, key: str, last: int) -> None:
        """Inside the write lock: keep ``last`` as the store's high-water mark."""
        self.store.registry.update(where.registry_store(key), {"value": str(last)})

    # -- speakers --------------------------------------------------------------------------

    def speaker(self, key: str, name: str) -> RegistryRow | None:
        rows = self.store.registry.rows(where.registry_key_is(_speaker_key(key, name)))
        return rows[0] if rows else None

    def require_speaker(self, key: str, name: str, *, writing: bool, field: str = "speaker") -> None:
        """Refuse ``name`` unless it is registered in the store (or is ``me``)."""
        people = _people([(name, field)])
        row = self.speaker(key, name) if people else None
        _unregistered_among(key, people, {} if row is None else {row["key"]: row}, writing=writing)

    def speakers(self, key: str) -> list[RegistryRow]:
        """The store's speaker rows, oldest first."""
        rows = self.store.registry.rows(where.registry_of_store(("speaker",), key))
        return sorted(rows, key=lambda r: (r["created_us"], r["name"]))

    def speaker_count(self, key: str) -> int:
        return self.store.registry.count(where.registry_of_store(("speaker",), key))

    def register_speaker(
        self, handle: StoreHandle, name: str
    ) -> tuple[RegistryRow, Literal["registered", "exists"], int]:
        """(speaker row, "registered" or "exists", speakers now) once the store is
        confirmed inside the write lock; 400 past the speaker limit. "registered" only
        when this call's row was the one inserted."""
        with self.store.write_lock(handle.key):
            self.confirm(handle)
            row = self.speaker(handle.key, name)
            status: Literal["registered", "exists"] = "exists"
            if row is None:
                count = self.speaker_count(handle.key)
                if count >= self.speaker_limit:
                    raise InvalidRequestError(
                        (
                            f"this store already has {count} registered speakers and its limit is "
                            f"{self.speaker_limit}; remove one with ",
                            Fix.of("speaker_remove", user_id=store_in_fix(handle.key)),
                            " before registering another",
                        ),
                        field="speaker",
                        speaker=name,
                        speaker_limit=self.speaker_limit,
                    )
                new = _registry_row("speaker", _speaker_key(handle.key, name), handle.key, name, self._now_us())
                inserted = self.store.registry.insert([new])
                row, status = (new, "registered") if inserted else (self.speaker(handle.key, name) or new, "exists")
            return row, status, self.speaker_count(handle.key)

    def forget_speaker(self, key: str, name: str) -> None:
        """Inside the write lock: the speaker's registration goes."""
        self.store.registry.delete(where.registry_key_is(_speaker_key(key, name)))

    def begin_rename(self, key: str, row: RegistryRow, new_name: str) -> bool:
        """Inside the write lock: register ``new_name`` as the renamed ``row`` (its
        registration date kept, outside the limit), marked as a rename in progress; False
        when ``new_name`` is registered as anyone else. A rename cut short (a crash
        between its commits) left that mark, so a repeated call carries on."""
        marker = f"renamed-from:{row['name']}"
        existing = self.speaker(key, new_name)
        if existing is not None:
            return bool(existing["value"] == marker)
        new = _registry_row("speaker", _speaker_key(key, new_name), key, new_name, row["created_us"], marker)
        return bool(self.store.registry.insert([new])) or self.begin_rename(key, row, new_name)

    def end_rename(self, key: str, name: str, new_name: str) -> None:
        """Inside the write lock, once the memories carry ``new_name``: the old
        registration goes, and the new one loses its mark."""
        self.forget_speaker(key, name)
        self.store.registry.update(where.registry_key_is(_speaker_key(key, new_name)), {"value": None})

    # -- kept idempotency records --------------------------------------------------------------

    def idempotency_secret(self) -> bytes:
        """The key of every idempotency fingerprint in this database: 32 bytes from
        ``secrets``, created by the first write that carries an ``Idempotency-Key`` (one
        insert-if-absent: of two processes creating it, one row wins and both read it)."""
        if self._secret is None:
            rows = self.store.registry.rows(where.registry_key_is(_SECRET))
            if not rows:
                row = _registry_row("secret", _SECRET, "", "idempotency", self._now_us(), secrets.token_hex(32))
                with self.store.write_lock():
                    self.store.registry.insert([row])
                rows = self.store.registry.rows(where.registry_key_is(_SECRET))
            self._secret = bytes.fromhex(rows[0]["value"] or "")
        return self._secret

    def idempotency_record(self, key: str, idem_key: str, since_us: int) -> tuple[str, str] | None:
        """(fingerprint, answer JSON) kept for this key at or after ``since_us``."""
        records = self.store.registry.rows(where.registry_record(_record_key(key, idem_key), since_us))
        if not records:
            return None
        return _record_parts(records[0]["value"])

    def kept_records(self, key: str, idem_keys: Sequence[str]) -> dict[str, tuple[str, str]]:
        """(fingerprint, answer JSON) kept for each of these keys that has a record, at any
        age (one lookup per 500 keys): what an import batch finds of its items that stored
        no memory before (a duplicate)."""
        wanted = {_record_key(key, idem_key): idem_key for idem_key in idem_keys}
        names = sorted(wanted)
        found: dict[str, tuple[str, str]] = {}
        for start in range(0, len(names), _DELETE_BATCH):
            for row in self.store.registry.rows(where.registry_keys_in(names[start : start + _DELETE_BATCH])):
                found[wanted[row["key"]]] = _record_parts(row["value"])
        return found

    def keep_idempotency_records(self, key: str, records: Sequence[tuple[str, str, str, int]]) -> None:
        """Inside the write lock: keep these (key, fingerprint, answer JSON, created
        microseconds), replacing any kept under the same keys: for an outcome that stored
        no memory, or when the memories that carried them are about to be deleted. One
        row per key (the latest of several memories carrying one key), in one commit."""
        latest = {record[0]: record for record in sorted(records, key=lambda record: record[3])}
        if latest:
            self.store.registry.upsert([_idempotency_row(key, *record) for record in latest.values()])

    def forget_records_naming(self, key: str, memory_ids: set[str] | None) -> None:
        """Inside the write lock, before the memories go (a crash in between leaves a
        repeat that answers afresh, never a record naming a forgotten memory): the kept
        records whose answer names one of ``memory_ids`` (a duplicate's ``duplicate_of``);
        ``None``: every memory of the store is going, and every record of the store goes."""
        records = where.registry_of_store(("idem",), key)
        if memory_ids is None:
            self.store.registry.delete(records)
            return
        naming = [
            row["key"]
            for row in self.store.registry.rows(records)
            if names_any(_record_parts(row["value"])[1], memory_ids)
        ]
        for start in range(0, len(naming), _DELETE_BATCH):
            self.store.registry.delete(where.registry_keys_in(naming[start : start + _DELETE_BATCH]))


# -- the rule, once ------------------------------------------------------------------------------


def _people(speakers: Speakers) -> list[tuple[str, str]]:
    """The speakers that must be registered: every one named, except ``me``."""
    return [(name, field) for name, field in speakers if name is not None and name != ME]


def _unregistered_among(
    key: str, people: Sequence[tuple[str, str]], found: dict[str, RegistryRow], *, writing: bool
) -> None:
    """Refuse the first of ``people`` whose registration is not among the ``found`` rows:
    a write naming an unregistered speaker is 400, a read or removal 404."""
    for name, field in people:
        if _speaker_key(key, name) in found:
            continue
        if writing:
            raise InvalidRequestError(
                (
                    f"speaker '{name}' is not registered in this store. Register it first: ",
                    Fix.of("speaker_register", speaker=name, user_id=store_in_fix(key)),
                    "; 'me' (the assistant) needs no registration",
                ),
                field=field,
                speaker=name,
            )
        raise NotFoundError(f"speaker '{name}' is not registered in this store", field=field, speaker=name)


def _missing_store(store_id: str) -> NotFoundError:
    return NotFoundError(
        (
            f"store '{store_id}' does not exist; create it first with ",
            Fix.of("store_create", user_id=store_id),
            " or use the built-in 'default' store",
        ),
        field="user_id",
        user_id=store_id,
    )


def store_in_fix(key: str) -> str | None:
    """The store as a :class:`Fix` names it: left out for the default store, which every
    call uses when no store is named."""
    return None if key == DEFAULT_STORE else key


# -- row layout -------------------------------------------------------------------------------------


def _store_row_key(key: str) -> str:
    return f"store:{key}"


def _speaker_key(key: str, name: str) -> str:
    return f"speaker:{key}:{name}"


def _record_key(key: str, idem_key: str) -> str:
    return f"idem:{key}:{idem_key}"


def _recorded_seq(store_row: RegistryRow) -> int:
    return int(store_row["value"]) if store_row["value"] else 0


def _registry_row(
    kind: str, key: str, user_key: str, name: str, created_us: int, value: str | None = None
) -> RegistryRow:
    return RegistryRow(key=key, kind=kind, user_id=user_key, name=name, created_us=created_us, value=value)


def _store_row(store_id: str, created_us: int) -> RegistryRow:
    key = store_key(store_id)
    return _registry_row("store", _store_row_key(key), key, store_id, created_us)


def _idempotency_row(key: str, idem_key: str, fingerprint: str, answer_json: str, created_us: int) -> RegistryRow:
    return _registry_row("idem", _record_key(key, idem_key), key, idem_key, created_us, f"{fingerprint}\n{answer_json}")


def _record_parts(value: str | None) -> tuple[str, str]:
    """(fingerprint, answer JSON) of a kept record's value, as ``_idempotency_row`` joins them."""
    fingerprint, answer_json = (value or "\n").split("\n", 1)
    return fingerprint, answer_json
