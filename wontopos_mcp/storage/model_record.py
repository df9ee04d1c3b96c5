"""Which embedding model built a database: the record the CLI reads at start-up without
LanceDB, and the table's own record it is checked against (``ModelRecord``)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from wontopos_mcp.errors import ModelMismatch

from .rows import RegistryRow
from .where import REGISTRY_META

__all__ = ["META_FILE", "ModelRecord", "mismatch"]

META_FILE = "wontopos.json"


class ModelRecord:
    """Which embedding model (and vector size) a database was built with: the registry's
    ``meta`` row, and beside a local database a small JSON file, which answers without
    importing LanceDB, so the CLI refuses a mismatch at start-up in milliseconds.

    The chunks table records its model too (``schema.MODEL_META``, written in the same
    commit as the vectors), and that is the truth: a ``reindex`` overwrites the table,
    then updates this record, so a kill in between leaves a table of the new model under
    the old record. The reindex marks the JSON file first (``pending``); while that mark
    stands, and always on object storage (no file there), ``check`` reads the table's
    record, repairs this one forward when they differ, then compares."""

    def __init__(
        self,
        uri: str,
        remote: bool,
        registry_rows: Callable[[str], list[RegistryRow]],
        registry_insert: Callable[[Sequence[RegistryRow]], int],
        registry_upsert: Callable[[Sequence[RegistryRow]], None],
        table_model: Callable[[], tuple[str, int] | None],
        lock: Callable[[], AbstractContextManager[None]],
        try_lock: Callable[[], AbstractContextManager[bool]],
    ) -> None:
        self._uri, self._remote = uri, remote
        self._rows, self._insert, self._upsert = registry_rows, registry_insert, registry_upsert
        self._table_model, self._lock, self._try_lock = table_model, lock, try_lock

    def _file(self) -> dict[str, Any] | None:
        try:
            with open(os.path.join(self._uri, META_FILE), encoding="utf-8") as fh:
                meta = json.load(fh)
            return meta if isinstance(meta, dict) else None
        except (OSError, ValueError):
            return None

    def recorded(self) -> tuple[str, int] | None:
        """(model id, vector size) the record names, if the database has vectors yet."""
        if not self._remote:
            try:
                meta = self._file() or {}
                return str(meta["model"]), int(meta["dim"])
            except (KeyError, TypeError, ValueError):
                return None
        rows = self._rows(REGISTRY_META)
        return (rows[0]["name"], int(rows[0]["value"] or 0)) if rows else None

    def pending(self) -> bool:
        """Whether a reindex marked the record and has not finished (or was killed)."""
        return self._remote or "reindex" in (self._file() or {})

    def reindexing(self) -> bool:
        """Whether a reindex of a local database marked the record and has not finished
        (on object storage, leases bound a writer's wait themselves)."""
        return not self._remote and "reindex" in (self._file() or {})

    def truth(self) -> tuple[str, int] | None:
        """The model the vectors are of: the table's own record when it keeps one (read
        only when the record may be behind it, see the class), else the record's; a
        record behind the table is repaired forward (inside the database's write lock)."""
        recorded = self.recorded()
        if not self.pending():
            return recorded
        table = self._table_model()
        if table is None or table == recorded:
            self._clear_stale_mark(recorded)
            return recorded
        with self._lock():
            table = self._table_model()
            if table is not None and table != self.recorded():
                self.record(*table, replace=True)
        return table

    def _clear_stale_mark(self, recorded: tuple[str, int] | None) -> None:
        """A local mark whose reindex is not running (the lock is free: it was killed
        before its commit) and whose table is still of the recorded model goes, so later
        starts are fast again; while a reindex runs (the lock is taken), it stays."""
        if self._remote or recorded is None:
            return
        with self._try_lock() as ours:
            if ours and "reindex" in (self._file() or {}) and self._table_model() in (None, recorded):
                self._write_file({"model": recorded[0], "dim": recorded[1]})

    def check(self, model_id: str) -> None:
        """Stop when the database was built with another model (vectors not comparable);
        names are compared as loading resolves them (``embeddings.model_key``), so the
        flag that built a database opens it again, whatever its case."""
        from wontopos_mcp.model.embeddings import model_key

        recorded = self.truth()
        if recorded and model_key(recorded[0]) != model_key(model_id):
            raise ModelMismatch(mismatch(self._uri, recorded, model_id))

    def record(self, model_id: str, dim: int, *, replace: bool = False) -> None:
        """Record the model when the chunks table is created, or (``replace``) when a
        reindex has re-embedded it; inside the write lock. The JSON file is written last,
        whole (a temporary file renamed over it), which also clears a reindex's mark."""
        meta = RegistryRow(key="meta", kind="meta", user_id="", name=model_id, created_us=0, value=str(dim))
        if replace:
            self._upsert([meta])
        elif not self._rows(REGISTRY_META):
            self._insert([meta])
        self._write_file({"model": model_id, "dim": dim})

    def mark(self, model_id: str, dim: int) -> None:
        """A reindex to ``model_id`` starts (inside the write lock): until ``record``
        replaces the file, ``check`` asks the table which model its vectors are of."""
        recorded = self.recorded()
        if recorded is not None:
            self._write_file({"model": recorded[0], "dim": recorded[1], "reindex": {"model": model_id, "dim": dim}})

    def _write_file(self, meta: dict[str, Any]) -> None:
        if self._remote:
            return
        path = os.path.join(self._uri, META_FILE)
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as fh:
            json.dump(meta, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, path)


def mismatch(uri: str, recorded: tuple[str, int], model_id: str) -> str:
    """The one line naming both models and the two ways on."""
    return (
        f"the database at {uri} was built with embedding model {recorded[0]!r} ({recorded[1]} dimensions), "
        f"not {model_id!r}; start with --embed-model {recorded[0]}, or re-embed it for the new model with "
        f"`wontopos-mcp reindex --embed-model {model_id}`"
    )
