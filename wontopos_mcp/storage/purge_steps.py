"""The purge's steps on one table: each a function of the table alone, so the purge
(``purge.Purges``, whose docstring gives the rules and why) runs them here or has its child
process run them (``purge_worker``) alike. Which lock each step runs in is the purge's to
say; each docstring says which it expects.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .schema import create_indexes
from .upkeep_policy import Fragment, fragments_of, merge_fragments, merge_run, merged_size

if TYPE_CHECKING:
    from lance.optimize import CompactionOptions

_CATCH_UP_ROUNDS = 8  # merges one catch-up makes at most (two stretches are usual: see ``catch_up``)
PURGED = "wontopos.purged_us"  # table metadata: when the last purge rewrote the table


def _compaction(fragments: Sequence[Fragment]) -> CompactionOptions | None:
    """The options that compact every fragment holding deleted rows with its deletions
    materialised, and only those (``None``: none holds any); one larger than
    ``FRAGMENT_ROWS`` (a database from before that bound, or a reindex) is written as
    pieces of that size, so the next purge rewrites a piece, not all of it."""
    holding = [f for f in fragments if f.deleted]
    if not holding:
        return None
    return {
        "materialize_deletions": True,
        "materialize_deletions_threshold": 0.0,
        "excluded_fragment_ids": [f.id for f in fragments if not f.deleted],
        "target_rows_per_fragment": merged_size(max(f.rows + f.deleted for f in holding)),
        "num_threads": 1,
    }


def stale_indexes(table: Any) -> bool:
    """Whether a B-tree or full-text index still covers a fragment the table no longer has
    (one a delete emptied, which no compaction visits: see the module). Asked before the
    compaction, whose remapping rewrites the indexes' fragment lists."""
    dataset = table.to_lance()
    live = {f.id for f in fragments_of(dataset)}
    searched = [index for index in dataset.describe_indices() if not _is_vector(index.index_type)]
    return any(not set(s.fragment_ids) <= live for index in searched for s in index.segments)


def compact_beside_writers(table: Any) -> bool:
    """Outside the write lock, inside the ``compaction`` exclusion (every delete and update
    of the table waits for it; appends go on): the fragments holding deleted rows
    compacted, read from the latest version and committed over the appends made meanwhile
    (Lance remaps the indexes at the commit). Whether it is done: not when a source
    fragment changed all the same (a commit outside the exclusion), which Lance would
    refuse only after its remap had written index files no version names; its new
    fragments are removed then, and ``compact`` runs in the write lock instead."""
    from lance.optimize import Compaction

    table.checkout_latest()
    dataset = table.to_lance()  # a dataset of its own, left at this version
    options = _compaction(fragments_of(dataset))
    if options is None:
        return True
    # ``Any``: pylance 13's stub names the sources ``old_fragments``, the object ``original_fragments``
    results: list[Any] = [task.execute(dataset) for task in Compaction.plan(dataset, options).tasks]
    now = {f.metadata.id: f.metadata.to_json() for f in table.to_lance().get_fragments()}  # the latest
    if any(now.get(f.id) != f.to_json() for result in results for f in result.original_fragments):
        _discard(dataset, results)
        return False
    Compaction.commit(dataset, results, options)
    table.checkout_latest()
    return True


def compact(table: Any) -> None:
    """Inside the write lock: the fragments holding deleted rows compacted (no other
    writer commits meanwhile)."""
    table.checkout_latest()
    dataset = table.to_lance()
    options = _compaction(fragments_of(dataset))
    if options is not None:
        dataset.optimize.compact_files(**options)
        table.checkout_latest()


def catch_up(table: Any) -> int:
    """Beside the writers, inside the compaction exclusion (as the rewrite's compaction):
    the merges a writer's upkeep rounds would make now (``merge_run``), of the fragments the
    writes appended while the purge held their upkeep off. Else the first writes after the
    purge made them, in their answers (~0.3 s at 1M rows for ~60 fragments). Every stretch:
    the compaction's new fragments come after the ones appended while it ran, so the
    appends before and after its commit lie in two stretches (one round merges one).
    Returns how many fragments were merged."""
    merged = 0
    for _ in range(_CATCH_UP_ROUNDS):
        table.checkout_latest()
        dataset = table.to_lance()
        fragments = fragments_of(dataset)
        merge = merge_run(fragments)
        if not merge:
            break
        merged += merge_fragments(dataset, fragments, merge)
    table.checkout_latest()
    return merged


def _discard(dataset: Any, results: Sequence[Any]) -> None:
    """Remove the data files of a compaction that will not be committed (no version names
    them, so a cleanup would keep them for LanceDB's 7 days)."""
    root = os.path.join(dataset.uri, "data")
    for result in results:
        for fragment in result.new_fragments:
            for file in fragment.files:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(root, file.path))


def rebuild_indexes(table: Any, stale: bool) -> None:
    """Outside the write lock: the bitmap indexes built again, the B-tree and full-text
    ones too when ``stale``. Each replaced index is one commit, which Lance rebases over
    the appends, deletes and updates committed while it was built: rows appended meanwhile
    stay outside it, searched beside it, until the upkeep folds them in (measured on
    pylance 13, filters and full-text search both find them). The vector index follows
    (``prune_vectors``)."""
    table.checkout_latest()
    create_indexes(table, bitmaps_only=not stale)


class HereRewrite:
    """The rewrite's heavy steps run in this process, on ``table`` (a small table: its
    steps take milliseconds; ``purge_worker.ApartRewrite`` is the same steps in a child)."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def __enter__(self) -> HereRewrite:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def compact(self) -> bool:
        return compact_beside_writers(self._table)

    def indexes(self, stale: bool) -> None:
        rebuild_indexes(self._table, stale)

    def vectors(self) -> int:
        return prune_vectors(self._table)


def seal(table: Any, now_us: int) -> int:
    """The purge's own commit, last (a timestamp in the table's metadata): the latest
    version stays whatever its age, and its manifest and transaction file hold its
    operation (an erasing delete's where-clause names a store or a speaker). The version
    it made: cleanup removes every older one."""
    table.checkout_latest()
    dataset = table.to_lance()
    dataset.update_metadata({PURGED: str(now_us)})
    table.checkout_latest()
    return int(dataset.version)


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


def _is_vector(index_type: str) -> bool:
    return any(kind in index_type.upper() for kind in ("IVF", "HNSW"))
