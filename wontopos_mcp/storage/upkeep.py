"""Upkeep of the two tables after commits, and in full on demand (inside the write lock).

What to do is decided by ``upkeep_policy`` from each table's own state; this module runs
it and builds the vector index, keeping the table size at the last build in the
registry (the store's own ``index`` row), so every process's writes keep it current.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from .rows import RegistryRow
from .schema import arrow, indexes_on, registry_schema
from .upkeep_policy import Beside, Claim, compact_all, maintain, vector_index_due
from .where import registry_key_is

log = logging.getLogger(__name__)

_VECTOR_INDEX_KEY = "index:vector"  # registry row: table size when the vector index was last built


class Upkeep:
    def __init__(
        self, retain: timedelta, vector_index_min_rows: int, registry_rows: Callable[[str], list[RegistryRow]]
    ) -> None:
        self.retain = retain
        self.vector_index_min_rows = vector_index_min_rows
        self._registry_rows = registry_rows

    def after_write(self, table: Any, registry: Any, claim: Claim | None = None, beside: Beside | None = None) -> None:
        """Upkeep after a commit to ``table``, decided from its state: whichever process
        writes keeps the database healthy (of several replicas, the one ``claim`` lets;
        beside this process's purge, the merges ``beside`` allows, of the chunks table)."""
        try:
            chunks = table is not registry
            done = maintain(table, retain=self.retain, claim=claim, beside=beside if chunks else None)
            if chunks and (done["compacted"] or done["indexed"]):
                self._index_vectors(table, registry)
        except Exception:  # housekeeping: the next commit decides again
            log.warning("table upkeep skipped", exc_info=True)

    def full(self, chunks: Any | None, registry: Any) -> None:
        """Both tables fully up to date now: compacted (the chunks table into fragments of
        ``FRAGMENT_ROWS`` or so, which a purge rewrites one at a time; the registry into
        one), every index current, the vector index built once the table is large enough,
        old versions removed once no reader can need them. (Commits run the cheaper tiered
        ``after_write`` instead.)"""
        try:
            if chunks is not None:
                self._index_vectors(chunks, registry)
                compact_all(chunks, retain=self.retain)
            registry.optimize(cleanup_older_than=self.retain)
        except Exception:  # housekeeping: a lost commit race is retried next time
            log.warning("index maintenance skipped", exc_info=True)

    def _index_vectors(self, table: Any, registry: Any) -> None:
        """Build the IVF_SQ index once the table has ``vector_index_min_rows`` rows, and
        again when ``upkeep_policy.vector_index_due`` says so."""
        from lancedb.index import IvfSq

        rows = table.count_rows()
        has_index = bool(indexes_on("vector", table.list_indices()))
        if not has_index and rows < self.vector_index_min_rows:
            return
        record = self._registry_rows(registry_key_is(_VECTOR_INDEX_KEY))
        built_at = int(record[0]["value"] or 0) if record else (rows if has_index else 0)
        if not vector_index_due(rows, has_index=has_index, built_at=built_at):
            if not record:
                _record_index_size(registry, rows)
            return
        table.create_index("vector", config=IvfSq(distance_type="cosine"), replace=True)
        _record_index_size(registry, rows)


def _record_index_size(registry: Any, rows: int) -> None:
    registry.delete(registry_key_is(_VECTOR_INDEX_KEY))
    row = {
        "key": _VECTOR_INDEX_KEY,
        "kind": "index",
        "user_id": "",
        "name": "vector",
        "created_us": 0,
        "value": str(rows),
    }
    registry.add(arrow([row], registry_schema()))
