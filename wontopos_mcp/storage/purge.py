"""Erasure that reaches the disk (SPEC "Memories": a forget "reaches the disk").

LanceDB deletes by marking: a forgotten memory's rows stay in their data file behind a
deletion vector, and every old version of the table keeps them readable
(``lance.dataset(path, version=v)``). Measured on the Lance this LanceDB embeds (pylance
13): compaction that materialises deletions rewrites the data and remaps the indexes,
which drops the rows from the full-text and B-tree indexes but keeps a bitmap index's
key whose rows are all gone (a category, a speaker's name, a store id); and a fragment
whose every row was deleted leaves the table at once, so no compaction visits it, and the
full-text, B-tree and bitmap indexes all keep its rows (the full-text index only blocks
them at search time) until an index update that has new rows to add prunes them (not a
bitmap's key); an update with nothing new, merging segments or not, kept them. The vector
index keeps such a fragment's vectors too, until a merge of its segments (with new rows
or not: measured) or a rebuild. A rebuild never keeps anything. So a purge does, for each table:

1. *rewrite*, inside the database's write lock: every fragment holding deleted rows is
   compacted with its deletions materialised (only those: the size tiers of
   ``upkeep_policy`` stay as they are; the regular upkeep may have compacted some already,
   with the same effect on the indexes). The chunks table's bitmap indexes are built
   again from the live rows (``schema.create_indexes``: cheap, a few values each),
   and its B-tree and full-text indexes too when one still covers a fragment that is
   gone. The vector index is remapped by the compaction, and merged into one segment
   (``prune_vectors``, not retrained) when it still holds the rows of a fragment that is
   gone. A last commit of the purge's own follows (the latest version is never removed,
   and its files describe its operation).
2. *cleanup*, once the rewrite is ``retain`` old (a query in another process that loaded
   an older version when it started has had that long to finish, as for every cleanup in
   ``upkeep_policy``): every version older than the rewrite goes, with the files only those
   versions used. Chosen by version number, never by age, so a replica whose clock runs
   ahead cannot keep a version out of reach.

When: a commit that erases (``Store.erasing``) first records a marker row in the
registry, so the database itself knows a purge is due, whichever process runs next. Every
process that opens the database runs a due purge before it answers (a process stopped
before its purge leaves it to the next one), then polls every ``PurgeTiming.tick`` and
starts a purge once the oldest marker is one tick old: erasures close together share a
purge. Bound (the default ``within`` of 60 s): about two ticks, then the rewrite, then
``retain``: 19-24 s measured at 10,000 and 100,000 memories (``bench/purge.py``). A marker is
removed only by the cleanup of the purge that read it, so an erasure during a purge
keeps its own marker for the next one.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .rows import RegistryRow
from .schema import create_indexes
from .upkeep_policy import Claim, fragments_of
from .where import REGISTRY_PURGES, registry_keys_in

log = logging.getLogger(__name__)

MARKERS = REGISTRY_PURGES  # registry rows: a purge is due (the store's own bookkeeping)
PURGED = "wontopos.purged_us"  # table metadata: when the last purge rewrote the table


@dataclass(frozen=True)
class PurgeTiming:
    """``within``: how soon after an erasure no file holds what it erased (SPEC: 60 s).
    A purge starts about ``tick`` (a sixth of it) after the erasure, leaving the rest for
    the rewrite and the readers' grace; tests pass a second."""

    within: timedelta = timedelta(seconds=60)

    @property
    def tick(self) -> float:
        return self.within.total_seconds() / 6


def marker(now_us: int) -> RegistryRow:
    return RegistryRow(key=f"purge:{uuid.uuid4()}", kind="purge", user_id="", name="", created_us=now_us, value=None)


def rewrite(table: Any, reindex: bool) -> int:
    """Step 1 on one table (inside the write lock): its version afterwards."""
    dataset = table.to_lance()
    fragments = fragments_of(dataset)
    holding = [f for f in fragments if f.deleted]
    live = {f.id for f in fragments}
    # A fully deleted fragment is gone from the table, not from the indexes covering it
    # (the vector index, only remapped, keeps covering it: see the module).
    searched = [index for index in dataset.describe_indices() if not _is_vector(index.index_type)]
    stale = any(not set(s.fragment_ids) <= live for index in searched for s in index.segments)
    if holding:
        dataset.optimize.compact_files(
            materialize_deletions=True,
            materialize_deletions_threshold=0.0,
            excluded_fragment_ids=[f.id for f in fragments if not f.deleted],
            target_rows_per_fragment=max(f.rows + f.deleted for f in holding) + 1,
            num_threads=1,
        )
    if reindex:  # each index replaced: one commit each
        create_indexes(table, bitmaps_only=not stale)
        prune_vectors(table)
    # The latest version stays whatever its age, and its manifest and transaction file
    # hold its operation: an erasing delete's where-clause names a store or a speaker. So
    # the purge's own commit comes last (a timestamp in the table's metadata).
    table.checkout_latest()
    table.to_lance().update_metadata({PURGED: str(_now_us())})
    table.checkout_latest()
    return int(table.version)


def prune_vectors(table: Any) -> int:
    """Merge every vector index that holds rows the table no longer has (the vectors of
    a fragment a delete emptied: compaction's remapping never visits it) into one that
    holds none; how many indexes were merged. A merge writes the index again without
    training it (no rebuild); the index's bookkeeping still lists the emptied fragment
    afterwards, so what it holds is counted instead: its partitions' rows against the
    table's rows it covers."""
    table.checkout_latest()
    dataset = table.to_lance()
    merged = 0
    for index in dataset.describe_indices():
        if not _is_vector(index.index_type):
            continue
        stats = dataset.stats.index_stats(index.name)
        held = sum(partition["size"] for segment in stats["indices"] for partition in segment["partitions"])
        if held > stats["num_indexed_rows"]:
            dataset.optimize.optimize_indices(index_names=[index.name], num_indices_to_merge=len(index.segments))
            dataset = table.to_lance()
            merged += 1
    if merged:
        table.checkout_latest()
    return merged


def cleanup(table: Any, before: int) -> int:
    """Step 2 on one table: remove every version older than ``before``; how many went."""
    dataset = table.to_lance()
    old = [v["version"] for v in dataset.versions() if v["version"] < before]
    if not old:
        return 0
    stats = dataset.cleanup_old_versions(versions=old, error_if_tagged_old_versions=False)
    return int(stats.old_versions)


class Purges:
    """The markers, the purge, and the thread that runs it when due (one per ``Store``)."""

    def __init__(
        self,
        timing: PurgeTiming,
        retain: timedelta,
        *,
        chunks: Callable[[], Any | None],
        registry: Callable[[], Any],
        registry_rows: Callable[[str], list[RegistryRow]],
        registry_insert: Callable[[Sequence[RegistryRow]], int],
        registry_delete: Callable[[str], None],
        lock: Callable[[], AbstractContextManager[Any]],
        claim: Claim,
    ) -> None:
        self.timing, self.retain = timing, retain
        self._chunks, self._registry = chunks, registry
        self._rows, self._insert, self._delete = registry_rows, registry_insert, registry_delete
        self._lock, self._claim = lock, claim
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._threads = threading.Lock()  # start and stop, from different threads

    def record(self) -> None:
        """Inside the database's write lock, before the commit that erases: a purge is due."""
        self._insert([marker(_now_us())])

    def run(self, *, now: bool = False) -> dict[str, float] | None:
        """One purge when one is due (``now``: whatever the oldest marker's age, as at
        start-up). Returns what it took (seconds in the write lock for each step, old
        versions removed) once it completed, else ``None``: none due, or another replica
        holding the database's lease, which leaves it to that replica."""
        markers = self._rows(MARKERS)
        oldest = min((m["created_us"] for m in markers), default=None)
        if oldest is None or (not now and _now_us() - oldest < self.timing.tick * 1e6):
            return None
        with self._claim() as ours:
            if not ours:
                return None
            with self._lock():
                keys = [m["key"] for m in self._rows(MARKERS)]  # again: another process may have purged
                if not keys:
                    return None
                started = time.monotonic()
                chunks = self._chunks()
                versions = [(self._registry(), rewrite(self._registry(), reindex=False))]
                if chunks is not None:
                    versions.append((chunks, rewrite(chunks, reindex=True)))
                rewritten = time.monotonic() - started
        if self._stop.wait(self.retain.total_seconds()) and not now:
            return None  # closing: the markers stay, and the next process to open finishes
        with self._claim() as ours:
            if not ours:
                return None
            with self._lock():
                started = time.monotonic()
                removed = sum(cleanup(table, before) for table, before in versions)
                self._delete(registry_keys_in(keys))
                cleaned = time.monotonic() - started
        log.info("purge: rewrite %.0f ms, cleanup %.0f ms (%d old versions)", 1000 * rewritten, 1000 * cleaned, removed)
        return {"rewrite_s": rewritten, "cleanup_s": cleaned, "versions_removed": removed}

    # -- the thread ------------------------------------------------------------------------

    def start(self) -> None:
        """Run a due purge now (before the process answers), then poll in the background."""
        self._stop.clear()
        self._guarded(lambda: self.run(now=True))
        with self._threads:
            if self._thread is None:
                thread = threading.Thread(target=self._poll, name="wontopos-purge", daemon=True)
                thread.start()
                self._thread = thread

    def stop(self, *, wait: bool = True) -> None:
        """End the thread (``wait``: until it has; a purge in its rewrite finishes first,
        one waiting for its cleanup leaves it to the next process)."""
        with self._threads:
            thread, self._thread = self._thread, None
            self._stop.set()
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(self.timing.tick):
            self._guarded(self.run)

    def _guarded(self, purge: Callable[[], object]) -> None:
        try:
            purge()
        except Exception:  # housekeeping: the markers stay, and the next tick tries again
            log.warning("purge skipped; it is tried again", exc_info=True)


def _is_vector(index_type: str) -> bool:
    return any(kind in index_type.upper() for kind in ("IVF", "HNSW"))


def _now_us() -> int:
    return time.time_ns() // 1000
