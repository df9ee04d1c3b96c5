"""LanceDB: the adapter the rest of the engine talks to. With ``schema`` (the
tables' layout) and ``chunk_search`` (the async loop and the chunk searches), the only
modules that import ``lancedb`` and ``pyarrow``. It knows tables, rows and indexes; none
of the product's rules, and none of the registry's row kinds but its own bookkeeping (the
``meta`` row and the vector index's ``index`` row).

Writes are serialised by the database's ``Coordinator`` (``coordination``: a thread lock
plus a file lock for a local directory, so several processes can share one database);
handles read with ``read_consistency_interval=0`` so they always see other processes'
commits. LanceDB's own failures that the engine acts on are mapped once, here, to
``StorageError``s (``TableMissing``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from datetime import timedelta
from typing import Any, TypeVar

from wontopos_mcp.errors import ConfigError, ModelMismatch, TableMissing, UnavailableError
from wontopos_mcp.rules.locations import is_remote

from .chunk_search import ChunkReads, Found, RegistryReads, run
from .lancedb_import import import_lancedb
from .locks.coordination import LOCK_FILE, Patience, coordinator_for
from .locks.lease import LeaseTiming
from .purge import Purges, PurgeTiming
from .rows import ChunkRow, RegistryRow
from .schema import (
    CHUNKS,
    MEMORY_FIELDS,
    REGISTRY,
    arrow,
    chunk_schema,
    create_indexes,
    recorded_model,
    reembedded_schema,
    registry_schema,
    upgrade,
)
from .upkeep import Upkeep
from .upkeep_policy import RETAIN, RETAIN_REMOTE
from .where import REGISTRY_META, REGISTRY_STORES

__all__ = ["LOCK_FILE", "MEMORY_FIELDS", "META_FILE", "Store"]

META_FILE = "wontopos.json"
_CONFLICT_TRIES = 5  # a commit that lost to a concurrent maintenance commit
T = TypeVar("T")
_CHECK_TIMEOUT_S = 20.0  # check_usable: longest wait for object storage to answer
# A write waits this long for the lock a reindex holds, then answers 503 (the SDK retries).
WRITE_WAIT_S = 5.0


def _opened(open_table: Callable[[], Any]) -> Any:
    """``open_table()``, with LanceDB's "table not found" (a ``ValueError``) as
    ``TableMissing``: a table listed while another thread or process creates it."""
    try:
        return open_table()
    except ValueError as exc:
        if "not found" in str(exc):
            raise TableMissing(str(exc)) from exc
        raise


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


class Store:
    """Storage primitives over one LanceDB database.

    Construction is cheap: LanceDB (about a second to import) is imported and the
    database opened on first use, so a server can answer ``tools/list`` first.
    """

    def __init__(
        self,
        uri: str,
        *,
        flat_search_max: int = 5_000,
        vector_index_min_rows: int = 50_000,
        retain: timedelta | None = None,
        storage_options: dict[str, str] | None = None,
        writers: str = "single",
        lease: LeaseTiming | None = None,
        purge: PurgeTiming | None = None,
        write_wait: float = WRITE_WAIT_S,
        during_purge_reindex: Callable[[], None] | None = None,
    ) -> None:
        """``flat_search_max``: scopes up to this many chunk rows are searched exactly;
        ``vector_index_min_rows``: the table gets its IVF_SQ index at this size. Both are
        arguments so a test can cross them with a few hundred rows. ``retain``: how long
        old versions are kept for readers (default ``upkeep_policy.RETAIN``, or
        ``RETAIN_REMOTE`` on object storage). ``storage_options``
        go to ``lancedb.connect`` (object storage: endpoint, region, allow_http...).
        ``writers`` and ``lease``: how writers on object storage share the database
        (``coordination``). ``purge``: how soon what an erasure removed leaves the disk
        (``purge``; tests shorten it). ``write_wait``: a writer waiting this long for a
        local database's lock while a reindex holds it answers 503 (``Patience``).
        ``during_purge_reindex``: called in the middle of a purge's index rebuild, outside
        the write lock (a test's seam: ``purge.reindex``)."""
        self.uri = uri
        self.storage_options = dict(storage_options or {})
        self.vector_index_min_rows = vector_index_min_rows
        self._remote = is_remote(uri)
        self.retain = retain if retain is not None else (RETAIN_REMOTE if self._remote else RETAIN)
        self._upkeep = Upkeep(self.retain, vector_index_min_rows, self.registry_rows)
        self._coordinator = coordinator_for(uri, writers=writers, storage_options=self.storage_options, timing=lease)
        self._patience = Patience(write_wait, self._refuse_while_reindexing)
        self._reads = ChunkReads(self._reader, flat_search_max)
        self._db: Any = None
        self._registry: Any = None
        self._chunks: Any = None
        self._adb: Any = None  # the same database through LanceDB's async API (reads)
        self._aregistry: Any = None
        self._achunks: Any = None
        self._registry_reads = RegistryReads(self._registry_reader)
        self._model = ModelRecord(
            uri,
            self._remote,
            self.registry_rows,
            self.registry_insert,
            self.registry_upsert,
            self._table_model,
            self.write_lock,
            self._coordinator.try_hold,
        )
        self._writer: tuple[str, int] | None = None  # (model id, size) of the vectors this process makes
        self._purges = Purges(
            purge or PurgeTiming(), self.retain,
            chunks=self.existing_chunks, registry=lambda: self._registry,
            registry_rows=self.registry_rows, registry_insert=self.registry_insert,
            registry_delete=self.registry_delete, lock=self.write_lock, claim=self._coordinator.upkeep,
            maintenance=self._coordinator.maintenance, compaction=self._coordinator.compaction,
            local=not self._remote, during_reindex=during_purge_reindex,
        )  # fmt: skip
        self._on_open: list[Callable[[], None]] = []
        self._ready = False  # set only once the registry is open and the hooks have run

    @property
    def flat_search_max(self) -> int:
        return self._reads.flat_search_max

    def on_open(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` once, right after the database is first opened."""
        self._on_open.append(hook)

    def connect(self) -> None:
        """Open the database now (idempotent); the server calls this in the background.

        Other threads wait (on the lock) until the open is complete; the hooks run on the
        opening thread, which may re-enter (``_db`` is set before them, ``_ready`` after).
        """
        if self._ready:
            return
        with self._coordinator.local():
            if self._db is not None:
                return
            try:
                self._open()
            except BaseException:
                self._db = self._adb = self._registry = None  # never half open: the next call tries again
                raise
            self._ready = True

    def _open(self) -> None:
        lancedb = import_lancedb()
        self._coordinator.attach()
        options = {"read_consistency_interval": timedelta(0), "storage_options": self.storage_options or None}
        db = lancedb.connect(self.uri, **options)
        self._adb = run(lancedb.connect_async(self.uri, **options))
        self._db = db
        if REGISTRY in self._table_names():  # readers never need the write lock
            self._registry = db.open_table(REGISTRY)
        else:
            with self.write_lock():
                self._registry = self._open_or_create(REGISTRY, registry_schema(), "key")
        for hook in self._on_open:
            hook()
        self._purges.start()  # a purge left due runs before anything is answered

    def open_or_refuse(self) -> None:
        """``connect()``, or ``ConfigError``: one line naming the database and why it cannot
        be opened (a corrupt table, a directory LanceDB cannot read or write). What the
        human commands call before they run, and the server after its background open."""
        try:
            self.connect()
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - LanceDB's failures have no common type
            raise self.open_failure(exc) from None

    def open_failure(self, exc: Exception) -> ConfigError:
        """What ``connect`` raised, as the one line ``open_or_refuse`` raises."""
        from . import startup_checks

        return exc if isinstance(exc, ConfigError) else startup_checks.open_failure(self.uri, exc, remote=self._remote)

    def check_usable(self, timeout: float = _CHECK_TIMEOUT_S) -> None:
        """Raise ``ConfigError`` (one line: the problem and the fix) unless the database
        can be opened and written; the CLI asks this before serving anything. A local
        directory is checked on the filesystem alone, in about a millisecond and without
        importing LanceDB; object storage is asked to list the tables (``startup_checks``)."""
        from . import startup_checks

        if not self._remote:
            startup_checks.check_directory(self.uri, LOCK_FILE)
            return
        options = self.storage_options or None
        startup_checks.check_remote(
            self.uri, lambda: import_lancedb().connect(self.uri, storage_options=options).list_tables(), timeout
        )

    @property
    def registry(self) -> Any:
        self.connect()
        return self._registry

    @contextmanager
    def write_lock(self, scope: str | None = None) -> Iterator[None]:
        """Serialise writers of the store ``where`` (its key), or of the whole database,
        across processes and machines where the URI allows. Take a store's before the
        database's, never the other way round."""
        with self._coordinator.hold(scope, self._patience):
            yield

    def _refuse_while_reindexing(self) -> None:
        """A writer has waited ``write_wait`` for the lock: 503 if a reindex holds it (it
        may take minutes), else it waits on (another write, a purge, an index build)."""
        if self._model.reindexing():
            raise UnavailableError(
                "the database is being re-embedded for another model (wontopos-mcp reindex); "
                "writes wait until it is done: retry shortly",
                retry_after_ms=int(1000 * max(1.0, self._patience.seconds)),
            )

    @contextmanager
    def erasing(self) -> Iterator[None]:
        """Around the commits that remove what must leave the disk (a forget, a
        store's or a speaker's end, a rename; the caller holds the store's lock): the
        database's lock too, which the purge takes, and a marker saying a purge is due,
        recorded first, so neither a crash nor another process can lose it."""
        with self.write_lock():
            self._purges.record()
            yield

    def purge(self) -> dict[str, float] | None:
        """Run a due purge now, whatever the oldest marker's age (``purge.Purges.run``)."""
        return self._purges.run(now=True)

    def claim(self) -> None:
        """At a server's start: take what writing needs for the process's lifetime
        (object storage, ``--writers single``: the database), or ``ConfigError``."""
        self._coordinator.claim()

    def _open_or_create(self, name: str, schema: Any, key: str) -> Any:
        if name in self._table_names():
            return self._db.open_table(name)
        self._coordinator.check()
        table = self._db.create_table(name, schema=schema)
        table.set_unenforced_primary_key(key)
        return table

    def _table_names(self) -> list[str]:
        result = self._db.list_tables()
        return list(getattr(result, "tables", result))

    # -- registry ------------------------------------------------------------------

    def _registry_reader(self) -> Any:
        self.connect()  # waits while another thread is opening (the hooks run first)
        if self._aregistry is None:
            self._aregistry = run(self._adb.open_table(REGISTRY))
        return self._aregistry

    def registry_rows(self, where: str) -> list[RegistryRow]:
        """Registry rows ``where`` selects (from memory while the registry's version holds)."""
        return self._registry_reads.rows(where)

    def registry_count(self, where: str) -> int:
        return len(self.registry_rows(where))

    def registry_insert(self, rows: Sequence[RegistryRow]) -> int:
        """Insert the rows whose ``key`` is absent; answers how many were inserted.

        One ``merge_insert`` on the primary key: LanceDB records the inserted keys in
        the commit, so of two writers that both decided a key was absent (another
        process, another replica) one commit is retried and inserts nothing. The data
        keeps one row per key even where the write lock does not reach."""
        merge = self.registry.merge_insert("key").when_not_matched_insert_all()
        result = self._commit(lambda: merge.execute(arrow(rows, registry_schema())))
        self._after_write()
        return int(result.num_inserted_rows)

    def registry_upsert(self, rows: Sequence[RegistryRow]) -> None:
        """Insert the rows, replacing those already kept under the same ``key`` (one
        commit: a row is never absent in between, nor kept twice)."""
        merge = self.registry.merge_insert("key").when_matched_update_all().when_not_matched_insert_all()
        self._commit(lambda: merge.execute(arrow(rows, registry_schema())))
        self._after_write()

    def registry_delete(self, where: str) -> None:
        self._commit(lambda: self.registry.delete(where))
        self._after_write()

    def registry_update(self, where: str, values: dict[str, Any]) -> None:
        self._commit(lambda: self.registry.update(where=where, values=values))
        self._after_write()

    # -- model record ----------------------------------------------------------------

    def check_model(self, model_id: str) -> None:
        """Stop (``ModelMismatch``) when the database was built with another model."""
        return self._model.check(model_id)

    def recorded_model(self) -> tuple[str, int] | None:
        """(model id, vector size) of the database's vectors (``ModelRecord.truth``)."""
        return self._model.truth()

    def _table_model(self) -> tuple[str, int] | None:
        """The model record the chunks table keeps itself, if it exists and keeps one."""
        table = self.existing_chunks()
        return None if table is None else recorded_model(table.schema)

    def embeds_with(self, model_id: str, dim: int) -> None:
        """The model this process makes vectors with (writes and queries): what the
        writes of embedded rows and the vector searches check the table's record against."""
        self._writer = (model_id, dim)

    def chunks(self, model_id: str, dim: int) -> Any:
        """The chunks table, created (and the model recorded) on first use, for vectors of
        this model (``embeds_with``)."""
        self.embeds_with(model_id, dim)
        if self.existing_chunks() is None:
            with self.write_lock():
                self._create_chunks(model_id, dim)
            self._chunks = self._db.open_table(CHUNKS)
        return self._chunks

    def _create_chunks(self, model_id: str, dim: int) -> None:
        if CHUNKS in self._table_names():
            return
        self._model.check(model_id)
        self._model.record(model_id, dim)
        create_indexes(self._open_or_create(CHUNKS, chunk_schema(dim, model_id), "chunk_id"))

    def existing_chunks(self) -> Any | None:
        """The chunks table if it exists yet (reads that need no model use this)."""
        self.connect()
        if self._chunks is None and CHUNKS in self._table_names():
            try:
                table = _opened(lambda: self._db.open_table(CHUNKS))
            except TableMissing:
                return None
            upgrade(table, self.write_lock)
            self._chunks = table
        return self._chunks

    def versions(self) -> tuple[int, int | None]:
        """The registry's and the chunks table's latest versions (other processes'
        commits included): equal answers mean nothing was written in between."""
        registry, chunks = self._registry_reader(), self._reader()

        async def both() -> tuple[int, int | None]:
            return await registry.version(), None if chunks is None else await chunks.version()

        return run(both())

    # -- chunk reads ---------------------------------------------------------------------

    def _reader(self) -> Any | None:
        """The chunks table through the async API, once it exists."""
        if self._achunks is None:
            if self.existing_chunks() is None:
                return None
            try:
                self._achunks = _opened(lambda: run(self._adb.open_table(CHUNKS)))
            except TableMissing:
                return None
        return self._achunks

    def count(self, where: str) -> int:
        """How many chunk rows ``where`` selects."""
        return self._reads.count(where)

    def rows(
        self,
        where: str,
        *,
        columns: Sequence[str] | None = MEMORY_FIELDS,
        order: Sequence[tuple[str, bool]] = (),
        limit: int | None = None,
        row_ids: bool = False,
    ) -> list[ChunkRow]:
        """Chunk rows ``where`` selects (``columns=None``: every column; ``row_ids`` adds ``_rowid``)."""
        return self._reads.rows(where, columns=columns, order=order, limit=limit, row_ids=row_ids)

    def take(self, row_ids: Sequence[int], columns: Sequence[str]) -> dict[int, ChunkRow]:
        """Chunk rows by the ``_rowid`` an earlier query gave, keyed by it (a direct read)."""
        return self._reads.take(row_ids, columns)

    def column(self, where: str, column: str) -> list[Any]:
        """One column of the chunk rows ``where`` selects."""
        return self._reads.column(where, column)

    def vector_search(
        self, vector: Any, where: str, k: int, columns: Sequence[str], *, scope_rows: int | None = None
    ) -> list[ChunkRow]:
        """Cosine search inside ``where``; rows carry ``_distance`` and ``_rowid``."""
        self._refuse_other_model()
        return self._reads.vector_search(vector, where, k, columns, scope_rows=scope_rows)

    def text_search(self, text: str, where: str, k: int, columns: Sequence[str]) -> list[ChunkRow]:
        """BM25 full-text search inside ``where``; rows carry ``_score`` and ``_rowid``."""
        return self._reads.text_search(text, where, k, columns)

    def vector_and_text_search(
        self,
        embed: Callable[[], Any],
        text: str,
        where: str,
        k: int,
        columns: Sequence[str],
        text_columns: Sequence[str],
        *,
        scope_rows: int | None = None,
        context_where: str | None = None,
    ) -> Found:
        """``vector_search`` and ``text_search`` side by side, the query embedded meanwhile."""
        self._refuse_other_model()
        return self._reads.vector_and_text_search(
            embed, text, where, k, columns, text_columns, scope_rows=scope_rows, context_where=context_where
        )

    # -- chunk writes (call inside write_lock) ----------------------------------------------

    def add_chunks(self, table: Any, rows: Sequence[ChunkRow]) -> None:
        """Commit new rows, whose vectors this process's model made (see ``_fitting``)."""
        self._commit(lambda: table.add(self._fitting(table, rows)))
        self._after_write(table)

    def upsert_chunks(
        self, table: Any, rows: Sequence[ChunkRow], delete_where: str | None = None, *, embedded: bool = True
    ) -> None:
        """Update/insert ``rows`` by chunk id and delete ``delete_where`` in ONE commit.
        ``embedded``: some rows carry vectors this process made (else all were read from
        the table, and any model may write them back)."""
        merge = table.merge_insert("chunk_id").when_matched_update_all().when_not_matched_insert_all()
        if delete_where:
            merge = merge.when_not_matched_by_source_delete(delete_where)
        fitting = self._fitting if embedded else (lambda t, r: arrow(r, t.schema))
        with self._coordinator.compaction():  # an update: after a purge's compaction (``coordination``)
            self._commit(lambda: merge.execute(fitting(table, rows)))
        self._after_write(table)

    def _fitting(self, table: Any, rows: Sequence[ChunkRow]) -> Any:
        """``rows`` as Arrow in the table's schema, once the table's own model record (the
        schema of the version the commit is based on: read anyway, ~0.2 ms) names the
        model this process embeds with. A reindex by another process may have re-embedded
        the table since this one started: writing would mix two models' vectors, so the
        write is refused (503, nothing written; inside the write lock, which the reindex
        held throughout, and again on a retried commit)."""
        schema = table.schema
        self._refuse_other_model(recorded_model(schema))
        return arrow(rows, schema)

    def _refuse_other_model(self, recorded: tuple[str, int] | None = None) -> None:
        """503 when the chunks table's vectors are of another model than this process's
        (``recorded``: the table's record, when the caller has read it; else the latest
        version's schema is read, ~0.2 ms): a server started before a reindex finished
        neither writes nor searches with its old model."""
        if self._writer is None:
            return
        if recorded is None:
            reader = self._reader()
            recorded = None if reader is None else recorded_model(run(reader.schema()))
        if recorded is not None and recorded[0] != self._writer[0]:
            raise UnavailableError(
                f"the database was re-embedded for embedding model {recorded[0]!r} while this process runs "
                f"{self._writer[0]!r}; nothing was done; fix: restart it with --embed-model {recorded[0]}",
                model=self._writer[0],
            )

    def update_chunks(self, where: str, values_sql: dict[str, str]) -> int:
        table = self.existing_chunks()
        if table is None:
            return 0
        with self._coordinator.compaction():
            result = self._commit(lambda: table.update(where=where, values_sql=values_sql))
        self._after_write(table)
        return int(getattr(result, "rows_updated", 0) or 0)

    def delete_chunks(self, where: str) -> int:
        table = self.existing_chunks()
        if table is None:
            return 0
        before = int(table.count_rows(where))
        if before:
            with self._coordinator.compaction():
                self._commit(lambda: table.delete(where))
            self._after_write(table)
        return before

    # -- re-embedding (a reindex, inside ``exclusive``) ---------------------------------------------

    def exists(self) -> bool | None:
        """Whether a database is there yet (a local directory holding the registry table);
        ``None`` for object storage, which is known only once opened."""
        if self._remote:
            return None
        return os.path.isdir(os.path.join(self.uri, f"{REGISTRY}.lance"))

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Every writer of the database held off: the maintenance exclusion (a purge
        rebuilding the indexes outside the write lock finishes first), each store's lock
        (in key order), then the database's, as ``write_lock`` orders them. A local database has one lock for
        all; with ``--writers leased`` each store has its own lease, and a store created
        while they were being taken means letting go and taking them again (creating one
        needs the database's lease, held last)."""
        while True:
            with ExitStack() as held:
                held.enter_context(self._coordinator.maintenance())  # a purge's index rebuild finishes first
                keys = sorted({row["user_id"] for row in self.registry_rows(REGISTRY_STORES)})
                for key in keys:  # without patience: the reindex itself waits for every writer
                    held.enter_context(self._coordinator.hold(key))
                held.enter_context(self._coordinator.hold())
                if sorted({row["user_id"] for row in self.registry_rows(REGISTRY_STORES)}) == keys:
                    yield
                    return

    def mark_model(self, model_id: str, dim: int) -> None:
        """A reindex to ``model_id`` starts (``ModelRecord.mark``)."""
        self._model.mark(model_id, dim)

    def record_model(self, model_id: str, dim: int) -> None:
        """A reindex re-embedded the table for ``model_id``: the record follows it (last)."""
        self._model.record(model_id, dim, replace=True)

    def reembed(
        self,
        model_id: str,
        dim: int,
        vectors_for: Callable[[list[ChunkRow]], Any],
        *,
        batch_rows: int = 256,
        on_batch: Callable[[int, int], None] | None = None,
    ) -> int:
        """Replace every chunk row's vector with ``vectors_for(rows)`` (``rows``: the
        batch's ``memory_id``, ``chunk_idx``, ``n_chunks`` and ``content``; an array of
        ``len(rows)`` × ``dim`` float32) in ONE commit, every other column as it was; how
        many rows. Inside ``exclusive`` (nothing else commits meanwhile).

        The rows are read from one version, batch by batch, and streamed into LanceDB's
        overwrite, whose commit writes the new vectors, their size and the model's record
        (``schema.reembedded_schema``) at once: a kill before it leaves the old version
        current (and, in the table's ``data`` folder, files no version uses, which the
        next reindex removes first on a local disk), a kill after it the new one. An
        overwrite drops every index: they are built again here; until then full-text
        search answers nothing (it falls back to vectors) and the next open of the table
        builds them (``schema.repair_indexes``)."""
        import pyarrow as pa

        table = self.existing_chunks()
        if table is None:
            return 0
        table.checkout_latest()
        # Files a killed reindex (or a killed write) left behind: safe to remove now on a
        # local disk, where no other writer is at work (inside ``exclusive``). Not on object
        # storage: a replica that stalled past its lease may still be writing files for a
        # commit (leases have no fencing token), so Lance's own 7 days apply there.
        table.to_lance().cleanup_old_versions(older_than=self.retain, delete_unverified=not self._remote,
                                              error_if_tagged_old_versions=False)  # fmt: skip
        dataset = table.to_lance()  # one version: every row is read from it
        total = int(dataset.count_rows())
        schema = reembedded_schema(table.schema, model_id, dim)
        wanted = ["memory_id", "chunk_idx", "n_chunks", "content"]

        def read() -> Iterator[Any]:
            """The version's rows in batches of ``batch_rows`` (a scan yields at most one
            fragment per batch, and a table of small writes has many small fragments)."""
            held: list[Any] = []
            for batch in dataset.to_batches(batch_size=batch_rows):
                held.append(batch)
                if sum(b.num_rows for b in held) >= batch_rows:
                    yield from pa.Table.from_batches(held).combine_chunks().to_batches()
                    held = []
            if held:
                yield from pa.Table.from_batches(held).combine_chunks().to_batches()

        failed: list[Exception] = []  # what the stream raised: LanceDB re-raises it as a RuntimeError

        def batches() -> Iterator[Any]:
            done = 0
            try:
                for batch in read():
                    if not batch.num_rows:
                        continue
                    vectors = vectors_for(batch.select(wanted).to_pylist())
                    flat = pa.array(vectors.astype("float32").reshape(-1), type=pa.float32())
                    column = pa.FixedSizeListArray.from_arrays(flat, dim)
                    arrays = [column if name == "vector" else batch.column(name) for name in schema.names]
                    done += batch.num_rows
                    yield pa.RecordBatch.from_arrays(arrays, schema=schema)
                    if on_batch is not None:
                        on_batch(done, total)
                # The last moment before LanceDB commits: a lease lost meanwhile (object
                # storage) fails the write here, so nothing is committed.
                self._coordinator.check()
            except Exception as exc:
                failed.append(exc)
                raise

        self._coordinator.check()
        try:
            table.add(pa.RecordBatchReader.from_batches(schema, batches()), mode="overwrite")
        except Exception:
            if failed:
                raise failed[0] from None
            raise
        table.checkout_latest()
        self._reads.indexed = False  # the overwrite dropped the vector index too
        return total

    def rebuild_indexes(self) -> None:
        """Every index of the chunks table built again, then the full upkeep (the vector
        index once the table is large enough; old versions removed past ``retain``)."""
        table = self.existing_chunks()
        if table is not None:
            create_indexes(table)
            self.maintain(table)

    # -- upkeep (inside write_lock) -------------------------------------------------------------

    def _commit(self, action: Callable[[], T]) -> T:
        """Run ``action``, one LanceDB commit, once the coordinator confirms this process
        may still write (a lapsed lease: 503, nothing written). A commit that lost to
        another replica's maintenance commit (Lance's "commit conflict", which writes
        nothing) is tried again: every action here means the same on the newer version."""
        for attempt in range(1, _CONFLICT_TRIES + 1):
            self._coordinator.check()
            try:
                return action()
            except (OSError, RuntimeError, ValueError) as exc:
                if attempt == _CONFLICT_TRIES or "commit conflict" not in str(exc).lower():
                    raise
                time.sleep(0.05 * attempt)
        raise AssertionError("unreachable")

    def _after_write(self, table: Any = None) -> None:
        self._upkeep.after_write(self._registry if table is None else table, self._registry, self._upkeep_claim)

    @contextmanager
    def _upkeep_claim(self) -> Iterator[bool]:
        """Whether a writer's upkeep round runs now: the maintenance exclusion if it is free
        (a purge rebuilding the indexes holds it: the next commit decides again), then
        ``upkeep``'s say (of several replicas, the database lease's holder)."""
        with self._coordinator.maintenance(wait=False) as free:
            if not free:
                yield False
                return
            with self._coordinator.upkeep() as ours:
                yield ours

    def maintain(self, table: Any | None = None) -> None:
        """Bring both tables fully up to date now (``Upkeep.full``); inside the write lock."""
        self._upkeep.full(table if table is not None else self.existing_chunks(), self.registry)

    def release(self) -> None:
        """Give up what this process holds for writing (leases), without waiting for any
        lock: the way out on SIGTERM."""
        self._purges.stop(wait=False)
        self._coordinator.close()

    def close(self) -> None:
        self._purges.stop()  # first: its purge may be waiting for the lock taken below
        with self._coordinator.local():
            self._purges.stop(wait=False)  # the one an open finishing meanwhile started
            self._coordinator.close()
            self._ready = False
            self._chunks = None
            self._registry = None
            self._db = None
            self._adb = None
            self._achunks = None
            self._aregistry = None
            self._reads.indexed = False
            self._registry_reads.clear()
