"""The registry table: stores, speakers, idempotency records, the per-database secret,
the purge markers and the store's own bookkeeping, one row per ``key``. This object owns
its handles, its reads (``chunk_search.RegistryReads``: answered from memory while the
table's version holds) and its writes; which rows mean what is the engine's
(``engine.registry``) and the purge's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .chunk_search import RegistryReads, run
from .database import Commits, Connection
from .rows import RegistryRow
from .schema import REGISTRY, arrow, registry_schema

__all__ = ["RegistryTable"]


class RegistryTable(RegistryReads):
    """``rows`` (``RegistryReads``: from memory while the version holds), ``count``, and
    the writes, each one commit followed by the upkeep it calls for."""

    def __init__(self, connection: Connection, commits: Commits) -> None:
        self._connection = connection
        self._commits = commits
        super().__init__(self._reader)
        self._sync: Any = None
        self._async: Any = None

    # -- handles ----------------------------------------------------------------------

    def attach(self, table: Any) -> None:
        """The table's sync handle, once the database is open (``Store.connect``)."""
        self._sync = table

    @property
    def table(self) -> Any:
        """The table's sync handle (LanceDB's ``Table``), opening the database first."""
        self._connection.ready()
        return self._sync

    @property
    def handle(self) -> Any:
        """The sync handle as it is now, without opening anything (``None`` before the
        open): what the upkeep and the purge commit through."""
        return self._sync

    def _reader(self) -> Any:
        self._connection.ready()  # waits while another thread is opening (the hooks run first)
        if self._async is None:
            self._async = run(self._connection.adb.open_table(REGISTRY))
        return self._async

    def version(self) -> Any:
        """The latest version's number, as a coroutine of the async API (``Store.versions``
        reads both tables' in one hop)."""
        return self._reader().version()

    def close(self) -> None:
        self._sync = self._async = None
        self.clear()

    # -- reads (``rows``: ``RegistryReads``) ----------------------------------------------

    def count(self, where: str) -> int:
        return len(self.rows(where))

    # -- writes -----------------------------------------------------------------------

    def insert(self, rows: Sequence[RegistryRow]) -> int:
        """Insert the rows whose ``key`` is absent; answers how many were inserted.

        One ``merge_insert`` on the primary key: LanceDB records the inserted keys in
        the commit, so of two writers that both decided a key was absent (another
        process, another replica) one commit is retried and inserts nothing. The data
        keeps one row per key even where the write lock does not reach."""
        merge = self.table.merge_insert("key").when_not_matched_insert_all()
        result = self._commits.commit(lambda: merge.execute(arrow(rows, registry_schema())))
        self._commits.after()
        return int(result.num_inserted_rows)

    def upsert(self, rows: Sequence[RegistryRow]) -> None:
        """Insert the rows, replacing those already kept under the same ``key`` (one
        commit: a row is never absent in between, nor kept twice)."""
        merge = self.table.merge_insert("key").when_matched_update_all().when_not_matched_insert_all()
        self._commits.commit(lambda: merge.execute(arrow(rows, registry_schema())))
        self._commits.after()

    def delete(self, where: str) -> None:
        self._commits.commit(lambda: self.table.delete(where))
        self._commits.after()

    def update(self, where: str, values: dict[str, Any]) -> None:
        self._commits.commit(lambda: self.table.update(where=where, values=values))
        self._commits.after()
