"""Upkeep of a LanceDB table: compaction, index updates and removal of old versions,
decided from the table's own state after each commit.

Every write appends a small fragment, a manifest and a transaction file, and leaves the
new rows outside the indexes. Left alone, reads slow down with the fragment count; done
naively (LanceDB's ``optimize()`` every N writes) each run rewrites every fragment below
a million rows, so the whole table, and with versions kept an hour the database grew
quadratically (2,000 adds: 284 MB against a 5.2 MB floor). What this module does instead:

* **Size-tiered compaction.** A fragment's tier is how many times ``FAN_IN`` its row
  count is above ``TIER_BASE`` (``tier``). Once ``FAN_IN`` fragments of one tier lie
  side by side (younger, smaller ones may sit among them), that run alone is merged into
  one fragment of the next tier (``merge_run``); every other fragment is excluded. A row
  is rewritten once per tier (log₈ of the table's size), never once per write, and the
  table keeps at most about ``FAN_IN`` fragments per tier. A fragment with more than a
  tenth of its rows deleted is rewritten on its own (Lance's own threshold).
* **Fragments of a bounded size.** A merge makes fragments of at most about
  ``FRAGMENT_ROWS`` rows (one of ``FINAL_TIER`` is never merged again, and a merge that
  would pass it is written as pieces of that size): a forget's purge rewrites each fragment
  that held a forgotten row whole, so the size of a fragment is what a forget costs.
* **Indexes updated, not rebuilt**, once the rows outside them pass a share of the
  table (``index_due``): queries still see those rows (LanceDB scans them), and updating
  every index after every write would rewrite each of them per write.
* **Old versions removed** once no reader can need them (``RETAIN``, ``RETAIN_REMOTE``
  for object storage): a reader loads the
  latest manifest when a query starts and reads only that version's files until it ends.
  Cleanup lists every file of the table (~30 ms), so it runs on every ``CLEANUP_EVERY``-th
  version of the table: its own counter, which every process's commits advance.

Runs inside the database's write lock (the caller holds it), so no other writer commits
meanwhile, in this process or another, and a writer's round only when the maintenance
exclusion is free (``Claim``; a purge holds it while it rebuilds the indexes outside the
write lock); nothing here depends on how long a process lives.

* **Merges beside a purge.** While this process's purge holds the exclusion in a phase
  that allows it (``Beside``: its compaction beside the writers, its wait and cleanup), a
  writer's round still merges the fragments no index covers and no delete touched
  (``merge_beside``): the ones the writes appended meanwhile. Every write appends a
  fragment and every filtered read opens each one: at 1M rows, a duplicate look-up took
  5.7 ms with none of them, 12.4 / 20.5 / 31.3 / 36.7 ms after 50 / 100 / 150 / 200 writes
  with upkeep held off (measured), so the writes of a purge's last seconds paid for all
  those before. Lance commits two compactions of distinct fragments over each other, and
  one of fragments no index covers remaps no index, so the purge's commits stand.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

log = logging.getLogger(__name__)

Claim = Callable[[], AbstractContextManager[bool]]  # whether this process maintains now
# Whether a writer's round may merge beside this process's purge now, held while it does.
Beside = Callable[[], AbstractContextManager[bool]]

FAN_IN = 8
TIER_BASE = 32  # rows: fragments below this are tier 0
# Fragments of this tier (from TIER_BASE * FAN_IN ** 4 = 131,072 rows) and above are
# never merged again; a merge or a purge writes what passes ``FRAGMENT_ROWS`` as pieces of
# between one and two times it (Lance splits its output evenly). bench/purge.py at 1M
# memories in one fragment: a forget's purge rewrote all of it, 10-14 s (22-29 s at the
# purge's lower CPU priority), while the writes made meanwhile (their upkeep waits for the
# purge) piled up small fragments and took 3x their usual p99; at 100k, 1.7-3.4 s and 1.5-1.8x.
FINAL_TIER = 5
CATCH_UP_FRAGMENTS = FAN_IN**3  # the most fragments one round merges (see ``merge_run``)
FRAGMENT_ROWS: int = TIER_BASE * FAN_IN ** (FINAL_TIER - 1)  # the tier's floor (int: mypy types a power as Any)
DELETED_SHARE = 0.1  # a fragment this much deleted is rewritten (Lance's default)
INDEX_LAG_MIN, INDEX_LAG_MAX, INDEX_LAG_SHARE = 64, 4096, 1 / 16
CLEANUP_EVERY = 16
# How old a version must be before cleanup may remove it and the files only it uses (the
# latest version always stays; a version's age counts from its commit). A reader loads the
# latest manifest when a query starts and needs that version's files until the query ends:
# with no retention at all, two reader processes (search + list, ~1,100 rounds, slowest
# round 0.96 s on a loaded machine) never failed on a local disk. Object storage reads are
# slower and a deleted object cannot be read at all (no open file handle keeps it), so it
# keeps them longer.
RETAIN = timedelta(seconds=2)
RETAIN_REMOTE = timedelta(seconds=15)
# The IVF_SQ vector index is built again each time the table has grown this many times
# since its last build: its partition count is fixed when it is built, so partitions
# would otherwise grow with the table and every probe would scan more.
REINDEX_GROWTH = 10


@dataclass(frozen=True)
class Fragment:
    id: int
    rows: int  # live rows
    deleted: int


def tier(rows: int) -> int:
    level, ceiling = 0, TIER_BASE
    while rows >= ceiling:
        level, ceiling = level + 1, ceiling * FAN_IN
    return level


def merge_run(fragments: Sequence[Fragment]) -> list[int]:
    """Ids of the fragments to compact now (in table order), or ``[]``.

    The lowest tier with ``FAN_IN`` fragments in one stretch where nothing is of a higher
    tier wins: cheap merges first, and a merge's output (at least ``FAN_IN`` times the
    tier's floor) belongs to the next tier, so it is not merged again at this one. The
    merge takes the stretch from its first fragment of that tier through its
    ``FAN_IN``-th, smaller fragments between them included, and on through the stretch's
    end (at most ``CATCH_UP_FRAGMENTS`` in all): fragments that piled up while upkeep was
    held off (writes during a purge, which holds the maintenance exclusion) are caught up
    in one round, one write's wait, not one round per ``FAN_IN`` of them (at 1M rows ~96
    fragments after a purge took 11 rounds of 0.2-0.4 s, each in a write's answer).
    Fragments of ``FINAL_TIER`` and above stand between stretches, as a higher tier does:
    they are never merged.
    """
    top = min(tier(max((f.rows for f in fragments), default=0)), FINAL_TIER - 1)
    for level in range(top + 1):
        run: list[Fragment] = []
        for at, fragment in enumerate([*fragments, None]):
            if fragment is not None and tier(fragment.rows) <= level:
                if run or tier(fragment.rows) == level:
                    run.append(fragment)
                if sum(tier(f.rows) == level for f in run) == FAN_IN:
                    for more in fragments[at + 1 :]:
                        if tier(more.rows) > level or len(run) == CATCH_UP_FRAGMENTS:
                            break
                        run.append(more)
                    return [f.id for f in run]
            else:
                run = []
    return [f.id for f in fragments if f.deleted > DELETED_SHARE * (f.rows + f.deleted)][:1]


def merge_beside(fragments: Sequence[Fragment], indexed: set[int]) -> list[int]:
    """``merge_run``'s answer among the fragments no index covers (``indexed``: the ids
    some index covers) and with no deleted rows, the others standing between stretches:
    a merge that commits beside a purge's compaction and index rebuilds without touching
    what they touch."""
    free: list[Fragment] = []
    for fragment in [*fragments, None]:
        if fragment is not None and fragment.id not in indexed and not fragment.deleted:
            free.append(fragment)
            continue
        merge = merge_run(free)
        if merge:
            return merge
        free = []
    return []


def indexed_fragments(dataset: Any) -> set[int]:
    """Ids of the fragments at least one index covers."""
    return {fid for index in dataset.describe_indices() for segment in index.segments for fid in segment.fragment_ids}


def merge_fragments(dataset: Any, fragments: Sequence[Fragment], merge: Sequence[int]) -> int:
    """Compact the fragments ``merge`` names (``merge_run``'s answer) and no other; the
    dataset is checked out at the result. Returns how many were merged."""
    keep = [f.id for f in fragments if f.id not in merge]
    total = sum(f.rows + f.deleted for f in fragments if f.id in merge)
    size = merged_size(total)
    dataset.optimize.compact_files(target_rows_per_fragment=size, excluded_fragment_ids=keep, num_threads=1)
    dataset.checkout_latest()
    return len(merge)


def merged_size(rows: int) -> int:
    """The ``target_rows_per_fragment`` that writes ``rows`` rows as one fragment, or as
    pieces of ``FRAGMENT_ROWS`` to ``2 * FRAGMENT_ROWS`` rows when they are more."""
    return min(rows + 1, FRAGMENT_ROWS)


def index_due(unindexed: int, indexed: int) -> bool:
    """Whether the rows outside the indexes are enough to fold in now."""
    lag = min(INDEX_LAG_MAX, max(INDEX_LAG_MIN, int(INDEX_LAG_SHARE * indexed)))
    return unindexed >= lag


def vector_index_due(rows: int, *, has_index: bool, built_at: int) -> bool:
    """Whether to (re)build the vector index of a table of ``rows`` rows that is large
    enough to have one, when it was last built at ``built_at`` rows."""
    return not has_index or rows >= built_at * REINDEX_GROWTH


def fragments_of(dataset: Any) -> list[Fragment]:
    result = []
    for fragment in dataset.get_fragments():
        meta = fragment.metadata
        deleted = meta.deletion_file.num_deleted_rows if meta.deletion_file is not None else 0
        result.append(Fragment(meta.id, meta.physical_rows - deleted, deleted))
    return result


def unindexed_rows(dataset: Any, fragments: Sequence[Fragment]) -> tuple[int, int]:
    """(rows outside, rows inside) the least complete index; (0, 0) without indexes."""
    rows = {f.id: f.rows for f in fragments}
    worst: tuple[int, int] | None = None
    for index in dataset.describe_indices():
        covered = {fid for segment in index.segments for fid in segment.fragment_ids}
        inside = sum(n for fid, n in rows.items() if fid in covered)
        outside = sum(rows.values()) - inside
        if worst is None or outside > worst[0]:
            worst = (outside, inside)
    return worst or (0, 0)


def maintain(
    table: Any, *, retain: timedelta, claim: Claim | None = None, beside: Beside | None = None
) -> dict[str, int]:
    """One round of upkeep on a LanceDB table (call inside the write lock): at most one
    compaction, then the index update if due, then cleanup when this round's commits
    passed a multiple of ``CLEANUP_EVERY`` versions. Returns what it did, for logs and
    tests. ``claim`` is asked only when something is due: whether this process is the
    one to do it (of several replicas, the database lease's holder). When it is not,
    ``beside`` says whether a merge of the fragments no index covers may commit beside
    this process's purge now, and holds the purge's next step back until it has
    (``merge_beside``; counted as ``merged_beside``)."""
    dataset = table.to_lance()
    first = dataset.version  # the commit this round follows
    done = {"compacted": 0, "indexed": 0, "cleaned": 0, "merged_beside": 0}
    fragments = fragments_of(dataset)
    merge = merge_run(fragments)
    outside, inside = unindexed_rows(dataset, fragments)
    if not merge and not (outside and index_due(outside, inside)) and first % CLEANUP_EVERY:
        return done
    with (claim or _ours)() as ours:
        if ours:
            _round(table, dataset, first, fragments, merge, retain, done)
            return done
    if merge and beside is not None:
        with beside() as allowed:
            free = merge_beside(fragments, indexed_fragments(dataset)) if allowed else []
            if free:
                done["merged_beside"] = merge_fragments(dataset, fragments, free)
                table.checkout_latest()
    return done


def compact_all(table: Any, *, retain: timedelta) -> None:
    """The whole table compacted into fragments of ``FRAGMENT_ROWS`` to twice that (smaller
    ones only where the table is), every index brought up to date, and versions older than
    ``retain`` removed: LanceDB's ``optimize()`` with the fragments bounded (its own would
    merge them up to a million rows). Inside the write lock."""
    dataset = table.to_lance()
    dataset.optimize.compact_files(target_rows_per_fragment=FRAGMENT_ROWS, num_threads=1)
    dataset.checkout_latest()
    dataset.optimize.optimize_indices()
    dataset.checkout_latest()
    dataset.cleanup_old_versions(older_than=retain, error_if_tagged_old_versions=False)
    table.checkout_latest()


@contextmanager
def _ours() -> Iterator[bool]:
    yield True


def _round(
    table: Any,
    dataset: Any,
    first: int,
    fragments: list[Fragment],
    merge: list[int],
    retain: timedelta,
    done: dict[str, int],
) -> None:
    if merge:
        done["compacted"] = merge_fragments(dataset, fragments, merge)
        fragments = fragments_of(dataset)
    outside, inside = unindexed_rows(dataset, fragments)
    if outside and index_due(outside, inside):
        dataset.optimize.optimize_indices()
        done["indexed"] = outside
    if dataset.version // CLEANUP_EVERY > (first - 1) // CLEANUP_EVERY:
        stats = dataset.cleanup_old_versions(older_than=retain, error_if_tagged_old_versions=False)
        done["cleaned"] = int(stats.old_versions)
    if done["compacted"] or done["indexed"]:
        table.checkout_latest()
