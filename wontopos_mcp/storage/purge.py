"""Erasure that reaches the disk: within a minute of a forget, no file of the database holds what it erased.

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
or not: measured) or a rebuild. A rebuild never keeps anything. So a purge does, for each
table, holding the maintenance exclusion (``coordination``: no upkeep round, reindex or
other purge commits meanwhile, in this process or another, but for the merges of the
fragments no index covers that this process's writers make in the phases
``Purges.merging_beside`` opens):

1. *rewrite*: every fragment holding deleted rows is compacted with its deletions
   materialised (only those: the size tiers of ``upkeep_policy`` stay as they are; the
   regular upkeep may have compacted some already, with the same effect on the indexes).
   On a local directory the chunks table's compaction runs beside the writers, inside the
   ``compaction`` exclusion alone: appends commit meanwhile (Lance rebases the
   compaction's commit over them), while a delete or an update waits for it, as Lance
   would refuse the compaction after one touched its fragments, once its index remap had
   written files no version names (measured on pylance 13; a source fragment changed all
   the same means its files are removed and it runs in the write lock instead). The
   registry's compaction (a small table), and the chunks table's on object storage, run
   inside the database's write lock. Then, outside the write lock, the chunks table's
   bitmap indexes are built again from the live rows (``schema.create_indexes``: cheap, a
   few values each), and its B-tree and full-text indexes too when one still covers a
   fragment that is gone; the vector index, remapped by the compaction, is merged into
   one segment (``prune_vectors``, not retrained) when it still holds the rows of a
   fragment that is gone. Each new index commits over the writes made while it was built
   (appends, deletes, updates: Lance rebases an index over them); the rows appended
   meanwhile stay outside it and are searched beside it, and a row deleted meanwhile is
   its own erasure's, whose marker the next purge reads. A last commit of the purge's own
   follows (the latest version is never removed, and its files describe its operation);
   the versions writers made before it, during the rebuild, may still name the old
   indexes, and go with every other version older than it.
   The compaction beside the writers and the index rebuilds of a chunks table of at least
   ``PurgeTiming.apart_from_rows`` rows (100k) run in a child process of lower CPU
   priority (``purge_worker``, the functions of ``purge_steps``), the purge holding every
   lock and exclusion meanwhile: the writers beside it keep the cores.
2. *cleanup*, once the rewrite is ``retain`` old (a query in another process that loaded
   an older version when it started has had that long to finish, as for every cleanup in
   ``upkeep_policy``): every version older than the rewrite goes, with the files only those
   versions used. Chosen by version number, never by age, so a replica whose clock runs
   ahead cannot keep a version out of reach. On a local directory it runs beside the
   writers, outside the write lock, the maintenance exclusion still held (see
   ``Purges._finish``); on object storage inside the write lock.

When: a commit that erases (``Store.erasing``) first records a marker row in the
registry, so the database itself knows a purge is due, whichever process runs next. Every
process that opens the database runs a due purge before it answers (a process stopped
before its purge leaves it to the next one), then polls every ``PurgeTiming.tick`` and
starts a purge once the oldest marker is one tick old: erasures close together share a
purge. Bound (the default ``within`` of 60 s): about two ticks, then the rewrite, then
``retain`` (``bench/purge.py`` measures it with the README's figures). A marker is
removed only by the cleanup of the purge that read it, so an erasure during a purge
keeps its own marker for the next one.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .purge_steps import HereRewrite, catch_up, cleanup, compact, seal, stale_indexes
from .purge_worker import NICENESS, ApartRewrite, PurgeWorkerError
from .rows import RegistryRow
from .schema import CHUNKS
from .upkeep_policy import Claim
from .where import REGISTRY_PURGES, registry_keys_in

log = logging.getLogger(__name__)

MARKERS = REGISTRY_PURGES  # registry rows: a purge is due (the store's own bookkeeping)


@dataclass(frozen=True)
class PurgeTiming:
    """``within``: how soon after an erasure no file holds what it erased (60 s).
    A purge starts about ``tick`` (a sixth of it) after the erasure, leaving the rest for
    the rewrite and the readers' grace; tests pass a second. ``apart_from_rows``: a chunks
    table of at least this many rows has its compaction and index rebuilds done by a child
    process of lower priority (``purge_worker``: the writers beside it keep the CPU), a
    smaller one in this process (``None``: never apart; 0: always, as a test does)."""

    within: timedelta = timedelta(seconds=60)
    apart_from_rows: int | None = 100_000

    @property
    def tick(self) -> float:
        return self.within.total_seconds() / 6


def marker(now_us: int) -> RegistryRow:
    return RegistryRow(key=f"purge:{uuid.uuid4()}", kind="purge", user_id="", name="", created_us=now_us, value=None)


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
        maintenance: Callable[[], AbstractContextManager[bool]],
        compaction: Callable[[], AbstractContextManager[bool]],
        local: bool,
        uri: str,
        storage_options: dict[str, str],
        during_reindex: Callable[[], None] | None = None,
    ) -> None:
        """``maintenance`` and ``compaction``: the coordinator's exclusions (``coordination``);
        ``local``: the database is a local directory, where the compaction runs outside the
        write lock; ``uri`` and ``storage_options``: the database's, for the child that
        rewrites a large table (``purge_worker``); ``during_reindex``: called between the
        index rebuild and the vector index's merge, outside the write lock (a test's seam)."""
        self.timing, self.retain = timing, retain
        self._chunks, self._registry = chunks, registry
        self._rows, self._insert, self._delete = registry_rows, registry_insert, registry_delete
        self._lock, self._claim = lock, claim
        self._maintenance, self._compaction = maintenance, compaction
        self._local, self._during_reindex = local, during_reindex
        self._uri, self._storage_options = uri, storage_options
        self._stop = threading.Event()
        self._window = threading.Lock()  # ``merging_beside``: held by a writer's merge, or to open or close
        self._window_open = False
        self._thread: threading.Thread | None = None
        self._threads = threading.Lock()  # start and stop, from different threads

    def record(self) -> None:
        """Inside the database's write lock, before the commit that erases: a purge is due."""
        self._insert([marker(_now_us())])

    def run(self, *, now: bool = False) -> dict[str, float] | None:
        """One purge when one is due (``now``: whatever the oldest marker's age, as at
        start-up). Returns what it took once it completed (seconds: the rewrite, the part
        of it in the write lock, the cleanup; old versions removed), else ``None``: none
        due, or another replica holding the database's lease, which leaves it to that
        replica. The maintenance exclusion is held throughout the rewrite (on a local
        directory through the cleanup too), so no upkeep round, reindex or other purge
        commits beside it."""
        markers = self._rows(MARKERS)
        oldest = min((m["created_us"] for m in markers), default=None)
        if oldest is None or (not now and _now_us() - oldest < self.timing.tick * 1e6):
            return None
        with self._maintenance(), self._claim() as ours:
            if not ours:
                return None
            started = time.monotonic()
            with self._lock():
                keys = [m["key"] for m in self._rows(MARKERS)]  # again: another process may have purged
                if not keys:
                    return None
                locked = time.monotonic() - started
            # Every erasure whose marker was read has committed (its marker and its commit
            # share one hold of the lock): the compaction below sees its deletions.
            chunks = self._chunks()
            stale = chunks is not None and stale_indexes(chunks)
            compacted = False
            with self._rewrite(chunks) as rewrite:
                if chunks is not None and self._local:
                    with self._compaction(), self._merges_beside():  # appends go on; a delete or an update waits
                        compacted = rewrite.compact()
                begun = time.monotonic()
                with self._lock():
                    compact(self._registry())
                    if chunks is not None and not compacted:
                        compact(chunks)
                    versions = [(self._registry(), seal(self._registry(), _now_us()))]
                locked += time.monotonic() - begun
                if chunks is not None:
                    rewrite.indexes(stale)
                    if self._during_reindex is not None:
                        self._during_reindex()
                    rewrite.vectors()
                    if self._local:
                        self._catch_up(chunks)
                    versions.append((chunks, seal(chunks, _now_us())))
            rewritten = time.monotonic() - started
            if self._local:  # the cleanup too, beside the writers, before their upkeep resumes
                return self._finish(keys, versions, rewritten, locked, now, chunks)
        return self._finish(keys, versions, rewritten, locked, now, chunks)

    def _finish(
        self, keys: list[str], versions: list[tuple[Any, int]], rewritten: float, locked: float, now: bool,
        chunks: Any | None,
    ) -> dict[str, float] | None:  # fmt: skip
        """Step 2, once the rewrite is ``retain`` old: every version before the purge's own
        commit removed, then the markers. On a local directory (the caller holds the
        maintenance exclusion) the cleanup runs outside the write lock, as Lance allows
        beside writers (a file no version names yet, an append's in progress, is kept for 7
        days; only the files of the removed versions go), so no write waits behind it (at 1M
        rows it unlinks the old data and index files: 0.3 s in the write lock, measured), and
        no upkeep round cleans meanwhile; what the writes appended meanwhile is merged before
        the exclusion goes. Else (object storage) inside the lease and the write lock."""
        beside = self._local
        with self._merges_beside() if beside else contextlib.nullcontext():
            if self._stop.wait(self.retain.total_seconds()) and not now:
                return None  # closing: the markers stay, and the next process to open finishes
            with self._claim() as ours:
                if not ours:
                    return None
                begun = time.monotonic()
                if beside:
                    removed = sum(cleanup(table, before) for table, before in versions)
                    with self._lock():
                        self._delete(registry_keys_in(keys))
                else:
                    with self._lock():
                        removed = sum(cleanup(table, before) for table, before in versions)
                        self._delete(registry_keys_in(keys))
                cleaned = time.monotonic() - begun
        if beside and chunks is not None:
            self._catch_up(chunks)
        log.info(
            "purge: rewrite %.0f ms (%.0f ms in the write lock), cleanup %.0f ms (%d old versions)",
            1000 * rewritten, 1000 * locked, 1000 * cleaned, removed,
        )  # fmt: skip
        return {"rewrite_s": rewritten, "locked_s": locked, "cleanup_s": cleaned, "versions_removed": removed}

    @contextlib.contextmanager
    def merging_beside(self) -> Iterator[bool]:
        """For a writer's upkeep round (``upkeep_policy.maintain``): whether it may merge
        the fragments no index covers now, beside this process's purge, which holds the
        maintenance exclusion; the purge's next step waits until the merge is done. Open
        during the compaction beside the writers and the wait before the cleanup and the
        cleanup itself, never while the indexes are rebuilt (Lance refuses a merge that
        commits over an index built from its fragments, or the index over the merge) or
        the purge merges (``catch_up``)."""
        with self._window:
            yield self._window_open

    @contextlib.contextmanager
    def _merges_beside(self) -> Iterator[None]:
        """Writers' merges allowed (``merging_beside``) inside this block."""
        with self._window:
            self._window_open = True
        try:
            yield
        finally:
            with self._window:
                self._window_open = False

    def _catch_up(self, chunks: Any) -> None:
        """What the writes appended while upkeep was held off, merged beside them
        (``purge_steps.catch_up``) before their upkeep resumes."""
        with self._compaction():
            try:
                catch_up(chunks)
            except Exception:  # housekeeping: the writers' upkeep merges them instead
                log.warning("purge: the catch-up merge was skipped", exc_info=True)

    def _rewrite(self, chunks: Any | None) -> AbstractContextManager[HereRewrite | ApartRewrite]:
        """Where the chunks table's heavy steps run: a child of lower priority for a large
        table (``PurgeTiming.apart_from_rows``), else here; here too when the child cannot
        start (a warning: the purge must not wait for it)."""
        least = self.timing.apart_from_rows
        if chunks is None or least is None or (least > 0 and chunks.count_rows() < least):
            return HereRewrite(chunks)
        apart = ApartRewrite(self._uri, self._storage_options, CHUNKS)
        try:
            apart.start()
        except (OSError, PurgeWorkerError) as exc:
            log.warning("purge: the worker process did not start (%s); the rewrite runs here", exc)
            apart.stop()
            return HereRewrite(chunks)
        log.debug("purge: the chunks table's rewrite runs in a worker process at niceness %d", NICENESS)
        return apart

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


def _now_us() -> int:
    return time.time_ns() // 1000
