"""LanceDB: the adapter the rest of the engine talks to. With ``schema`` (the tables'
layout), ``chunk_search`` (the async loop and the searches) and the modules below, the only
code that imports ``lancedb`` and ``pyarrow``. It knows tables, rows and indexes; none of
the product's rules, and none of the registry's row kinds but its own bookkeeping (the
``meta`` row and the vector index's ``index`` row).

``Store`` is the database: the connection both tables share (``database``), the locks,
the model record (``model_record``) and the purge's wiring (``purge``). Each table is an
object of its own holding its reads and writes: ``store.registry``
(``registry_table.RegistryTable``) and ``store.chunks`` (``chunks_table.ChunksTable``).

Writes are serialised by the database's ``Coordinator`` (``coordination``: a thread lock
plus a file lock for a local directory, so several processes can share one database);
handles read with ``read_consistency_interval=0`` so they always see other processes'
commits. LanceDB's own failures that the engine acts on are mapped once, in
``database``, to ``StorageError``s (``TableMissing``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta

from wontopos_mcp.errors import ConfigError, UnavailableError
from wontopos_mcp.rules.locations import is_remote

from .chunk_search import run
from .chunks_table import ChunksTable
from .database import Commits, Connection
from .lancedb_import import import_lancedb
from .locks.coordination import LOCK_FILE, Patience, coordinator_for
from .locks.lease import LeaseTiming
from .model_record import META_FILE, ModelRecord
from .purge import Purges, PurgeTiming
from .registry_table import RegistryTable
from .schema import MEMORY_FIELDS, REGISTRY, registry_schema
from .upkeep import Upkeep
from .upkeep_policy import RETAIN, RETAIN_REMOTE
from .where import REGISTRY_STORES

__all__ = ["LOCK_FILE", "MEMORY_FIELDS", "META_FILE", "Store"]

_CHECK_TIMEOUT_S = 20.0  # check_usable: longest wait for object storage to answer
# A write waits this long for the lock a reindex holds, then answers 503 (the SDK retries).
WRITE_WAIT_S = 5.0


class Store:
    """One LanceDB database: its connection, its locks, its model record, its purges,
    and its two tables (``registry``, ``chunks``).

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
        ``during_purge_reindex``: called between a purge's index rebuild and its vector
        index merge, outside the write lock (a test's seam: ``purge.Purges``)."""
        self.uri = uri
        self.storage_options = dict(storage_options or {})
        self.vector_index_min_rows = vector_index_min_rows
        self._remote = is_remote(uri)
        self.retain = retain if retain is not None else (RETAIN_REMOTE if self._remote else RETAIN)
        self._coordinator = coordinator_for(uri, writers=writers, storage_options=self.storage_options, timing=lease)
        self._patience = Patience(write_wait, self._refuse_while_reindexing)
        self._connection = Connection(uri, self.storage_options, self.connect)
        upkeep = Upkeep(self.retain, vector_index_min_rows, lambda where: self.registry.rows(where))
        self._commits = Commits(
            self._coordinator, upkeep, lambda: self.registry.handle, lambda: self._purges.merging_beside()
        )
        self.registry = RegistryTable(self._connection, self._commits)
        self._model = ModelRecord(
            uri,
            self._remote,
            self.registry.rows,
            self.registry.insert,
            self.registry.upsert,
            lambda: self.chunks.recorded_model(),
            self.write_lock,
            self._coordinator.try_hold,
        )
        self.chunks = ChunksTable(
            self._connection, self._commits, self._model, self.write_lock,
            flat_search_max=flat_search_max, retain=self.retain, remote=self._remote,
        )  # fmt: skip
        self._purges = Purges(
            purge or PurgeTiming(), self.retain,
            chunks=self.chunks.existing, registry=lambda: self.registry.handle,
            registry_rows=self.registry.rows, registry_insert=self.registry.insert,
            registry_delete=self.registry.delete, lock=self.write_lock, claim=self._coordinator.upkeep,
            maintenance=self._coordinator.maintenance, compaction=self._coordinator.compaction,
            local=not self._remote, uri=uri, storage_options=self.storage_options,
            during_reindex=during_purge_reindex,
        )  # fmt: skip
        self._on_open: list[Callable[[], None]] = []
        self._ready = False  # set only once the registry is open and the hooks have run

    @property
    def flat_search_max(self) -> int:
        return self.chunks.flat_search_max

    def on_open(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` once, right after the database is first opened."""
        self._on_open.append(hook)

    def connect(self) -> None:
        """Open the database now (idempotent); the server calls this in the background.

        Other threads wait (on the lock) until the open is complete; the hooks run on the
        opening thread, which may re-enter (the connection is set before them, ``_ready``
        after).
        """
        if self._ready:
            return
        with self._coordinator.local():
            if self._connection.opened:
                return
            try:
                self._open()
            except BaseException:
                self._connection.close()  # never half open: the next call tries again
                self.registry.close()
                raise
            self._ready = True

    def _open(self) -> None:
        self._coordinator.attach()
        self._connection.open()
        if REGISTRY in self._connection.names():  # readers never need the write lock
            self.registry.attach(self._connection.db.open_table(REGISTRY))
        else:
            with self.write_lock():
                check = self._coordinator.check
                self.registry.attach(self._connection.open_or_create(REGISTRY, registry_schema(), "key", check))
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

    @contextmanager
    def write_lock(self, scope: str | None = None, *, rewriting: bool = False) -> Iterator[None]:
        """Serialise writers of the store ``where`` (its key), or of the whole database,
        across processes and machines where the URI allows. Take a store's before the
        database's, never the other way round. ``rewriting``: the block will delete or
        update rows of the chunks table, which must come after a purge's compaction running
        beside the writers (``coordination``): that is waited for first, outside the lock,
        so the writers that only append are not held behind this one meanwhile (at 1M
        memories a compaction takes about 10 s). Waited for, not held: holding it while
        waiting for the lock could deadlock with a writer that learns inside the lock that
        it updates rows; such a one waits for the compaction there, as before."""
        if rewriting:
            with self._coordinator.compaction():
                pass
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

    def versions(self) -> tuple[int, int | None]:
        """The registry's and the chunks table's latest versions (other processes'
        commits included): equal answers mean nothing was written in between."""
        registry, chunks = self.registry.version(), self.chunks.version()

        async def both() -> tuple[int, int | None]:
            return await registry, None if chunks is None else await chunks

        return run(both())

    # -- model record ----------------------------------------------------------------

    def check_model(self, model_id: str) -> None:
        """Stop (``ModelMismatch``) when the database was built with another model."""
        return self._model.check(model_id)

    def recorded_model(self) -> tuple[str, int] | None:
        """(model id, vector size) of the database's vectors (``ModelRecord.truth``)."""
        return self._model.truth()

    def mark_model(self, model_id: str, dim: int) -> None:
        """A reindex to ``model_id`` starts (``ModelRecord.mark``)."""
        self._model.mark(model_id, dim)

    def record_model(self, model_id: str, dim: int) -> None:
        """A reindex re-embedded the table for ``model_id``: the record follows it (last)."""
        self._model.record(model_id, dim, replace=True)

    # -- whole-database writes ------------------------------------------------------------

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
                keys = sorted({row["user_id"] for row in self.registry.rows(REGISTRY_STORES)})
                for key in keys:  # without patience: the reindex itself waits for every writer
                    held.enter_context(self._coordinator.hold(key))
                held.enter_context(self._coordinator.hold())
                if sorted({row["user_id"] for row in self.registry.rows(REGISTRY_STORES)}) == keys:
                    yield
                    return

    def maintain(self) -> None:
        """Bring both tables fully up to date now (``Upkeep.full``); inside the write lock."""
        self._commits.full(self.chunks.existing())

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
            self.chunks.close()
            self.registry.close()
            self._connection.close()
