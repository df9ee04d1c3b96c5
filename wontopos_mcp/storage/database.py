"""What the two tables share: the database's connection, and the way every commit is made.

A table object (``registry_table``, ``chunks_table``) owns its own handles, reads and
writes; it opens them through the one ``Connection`` and commits through the one
``Commits``, so a lapsed lease, a lost race with another replica's maintenance commit and
the upkeep after a write are handled the same way for both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from typing import Any, TypeVar

from wontopos_mcp.errors import TableMissing

from .chunk_search import run
from .lancedb_import import import_lancedb
from .locks.coordination import Coordinator
from .upkeep import Upkeep
from .upkeep_policy import Beside

__all__ = ["Commits", "Connection"]

T = TypeVar("T")
_CONFLICT_TRIES = 5  # a commit that lost to a concurrent maintenance commit


class Connection:
    """One LanceDB database, opened twice: the sync API for writes (and the tables' own
    Lance datasets), the async API for reads (one hop to its loop instead of about six,
    see ``chunk_search``). Both read with ``read_consistency_interval=0``, so they always
    see other processes' commits.

    ``ready`` opens the database when it is not open yet (the ``Store``'s ``connect``,
    which also runs its hooks and its due purge); a table calls it before its first use.
    """

    def __init__(self, uri: str, storage_options: dict[str, str], ready: Callable[[], None]) -> None:
        self.uri = uri
        self.storage_options = storage_options
        self.ready = ready
        self.db: Any = None
        self.adb: Any = None

    @property
    def opened(self) -> bool:
        return self.db is not None

    def open(self) -> None:
        lancedb = import_lancedb()
        options = {"read_consistency_interval": timedelta(0), "storage_options": self.storage_options or None}
        db = lancedb.connect(self.uri, **options)
        self.adb = run(lancedb.connect_async(self.uri, **options))
        self.db = db

    def close(self) -> None:
        self.db = self.adb = None

    def names(self) -> list[str]:
        """The tables the database holds now (another process may have created one)."""
        result = self.db.list_tables()
        return list(getattr(result, "tables", result))

    def table(self, name: str) -> Any:
        """The table through the sync API (``TableMissing``: listed, yet not there)."""
        return _opened(lambda: self.db.open_table(name))

    def async_table(self, name: str) -> Any:
        """The table through the async API (``TableMissing`` as ``table``)."""
        return _opened(lambda: run(self.adb.open_table(name)))

    def open_or_create(self, name: str, schema: Any, key: str, check: Callable[[], None]) -> Any:
        """The table, created with its primary key when absent (inside the write lock;
        ``check``: the coordinator's say that this process may still write)."""
        if name in self.names():
            return self.db.open_table(name)
        check()
        table = self.db.create_table(name, schema=schema)
        table.set_unenforced_primary_key(key)
        return table


def _opened(open_table: Callable[[], Any]) -> Any:
    """``open_table()``, with LanceDB's "table not found" (a ``ValueError``) as
    ``TableMissing``: a table listed while another thread or process creates it."""
    try:
        return open_table()
    except ValueError as exc:
        if "not found" in str(exc):
            raise TableMissing(str(exc)) from exc
        raise


class Commits:
    """Every commit of either table: made once the coordinator confirms this process may
    still write, tried again when it lost to another replica's maintenance commit, and
    followed by the upkeep its table's state calls for."""

    def __init__(
        self, coordinator: Coordinator, upkeep: Upkeep, registry: Callable[[], Any], beside: Beside | None = None
    ) -> None:
        """``registry``: the registry's sync handle, where the upkeep records the vector
        index's size; ``beside``: this process's purge's say on merges beside it
        (``upkeep_policy.maintain``)."""
        self.coordinator = coordinator
        self._upkeep = upkeep
        self._registry = registry
        self._beside = beside

    def commit(self, action: Callable[[], T]) -> T:
        """Run ``action``, one LanceDB commit, once the coordinator confirms this process
        may still write (a lapsed lease: 503, nothing written). A commit that lost to
        another replica's maintenance commit (Lance's "commit conflict", which writes
        nothing) is tried again: every action here means the same on the newer version."""
        for attempt in range(1, _CONFLICT_TRIES + 1):
            self.coordinator.check()
            try:
                return action()
            except (OSError, RuntimeError, ValueError) as exc:
                if attempt == _CONFLICT_TRIES or "commit conflict" not in str(exc).lower():
                    raise
                time.sleep(0.05 * attempt)
        raise AssertionError("unreachable")

    def compaction(self) -> AbstractContextManager[bool]:
        """Around a delete or an update of the chunks table: after a purge's compaction
        running beside the writers (``coordination``)."""
        return self.coordinator.compaction()

    def after(self, table: Any = None) -> None:
        """The upkeep round after a commit to ``table`` (``None``: the registry)."""
        registry = self._registry()
        self._upkeep.after_write(registry if table is None else table, registry, self._claim, self._beside)

    def full(self, chunks: Any | None) -> None:
        """Both tables fully up to date now (``Upkeep.full``); inside the write lock."""
        self._upkeep.full(chunks, self._registry())

    @contextmanager
    def _claim(self) -> Iterator[bool]:
        """Whether a writer's upkeep round runs now: the maintenance exclusion if it is free
        (a purge rebuilding the indexes holds it: the next commit decides again), then
        ``upkeep``'s say (of several replicas, the database lease's holder)."""
        with self.coordinator.maintenance(wait=False) as free:
            if not free:
                yield False
                return
            with self.coordinator.upkeep() as ours:
                yield ours
