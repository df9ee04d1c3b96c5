"""Upkeep keeps a database small and fast whatever the number or lifetime of the processes
writing it (``upkeep_policy``): tiered compaction, index updates, old versions removed.

The policy is checked on its own (pure functions over fragment sizes), then on real
databases: one written by 20 short-lived processes of 30 writes each must stay within
3x its compacted size (the issue's disk target) with every memory there exactly once,
and rows not yet in the indexes must still be found by every kind of read.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from support import all_memories, server_env

from wontopos_mcp.storage import upkeep_policy as maintenance
from wontopos_mcp.storage.upkeep_policy import (
    CATCH_UP_FRAGMENTS,
    FAN_IN,
    FINAL_TIER,
    FRAGMENT_ROWS,
    TIER_BASE,
    Fragment,
    index_due,
    merge_beside,
    merge_run,
    merged_size,
    tier,
)


def simulate(appends: list[int]) -> tuple[list[int], int]:
    """Fragment sizes after appending ``appends`` rows one commit at a time, running the
    policy after each commit as the store does; and the rows rewritten in all."""
    sizes: list[int] = []
    rewritten = 0
    for rows in appends:
        sizes.append(rows)
        merge = merge_run([Fragment(i, n, 0) for i, n in enumerate(sizes)])
        if merge:
            start, end = merge[0], merge[-1] + 1
            assert merge == list(range(start, end)), "a merge is one contiguous stretch"
            rewritten += sum(sizes[start:end])
            sizes[start:end] = [sum(sizes[start:end])]
    return sizes, rewritten


def test_tiers_grow_by_the_fan_in():
    assert [tier(n) for n in (0, 1, TIER_BASE - 1, TIER_BASE, TIER_BASE * FAN_IN - 1, TIER_BASE * FAN_IN)] == [
        0, 0, 0, 1, 1, 2
    ]  # fmt: skip


@pytest.mark.slow
def test_single_row_commits_rewrite_each_row_a_logarithmic_number_of_times():
    n = 20_000
    sizes, rewritten = simulate([1] * n)
    assert sum(sizes) == n
    levels = tier(n) + 1
    # Tier 0 merges its own output again until it passes TIER_BASE (at most
    # TIER_BASE / FAN_IN times per row); every higher tier rewrites a row once.
    assert rewritten <= n * (TIER_BASE // FAN_IN + levels)
    # A full compaction per 20 writes (the old policy) would have rewritten ~n²/40 rows.
    assert rewritten < n * n / 40 / 50


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 7, 100, 1000])
def test_the_fragment_count_stays_bounded_by_tiers(batch: int):
    sizes, _ = simulate([batch] * (30_000 // batch))
    levels = tier(30_000) + 1
    assert len(sizes) <= 2 * FAN_IN * levels, sizes


def test_a_large_fragment_is_never_rewritten_for_a_few_small_ones():
    big = TIER_BASE * FAN_IN**3
    fragments = [Fragment(0, big, 0), *(Fragment(i, 1, 0) for i in range(1, FAN_IN + 1))]
    assert merge_run(fragments) == list(range(1, FAN_IN + 1))


def test_small_fragments_piled_up_while_upkeep_waited_are_merged_in_one_round():
    """Writes during a purge append a fragment each and skip upkeep: the first round after
    merges the whole stretch (one write waits once), up to ``CATCH_UP_FRAGMENTS``."""
    big = TIER_BASE * FAN_IN**3
    piled = [Fragment(0, big, 0), *(Fragment(i, 1, 0) for i in range(1, 97))]
    assert merge_run(piled) == list(range(1, 97))
    many = [Fragment(0, big, 0), *(Fragment(i, 2, 0) for i in range(1, 2 * CATCH_UP_FRAGMENTS))]
    assert merge_run(many) == list(range(1, CATCH_UP_FRAGMENTS + 1))
    # The stretch ends at a fragment of a higher tier; the ones after it wait their turn.
    split = [*(Fragment(i, 1, 0) for i in range(12)), Fragment(12, big, 0), *(Fragment(i, 1, 0) for i in range(13, 20))]
    assert merge_run(split) == list(range(12))
    # Writes with upkeep running after each: FAN_IN fragments of the merge's tier, and fewer
    # than FAN_IN smaller ones among or after them (nothing piled up to catch).
    sizes: list[int] = []
    for _ in range(2000):
        sizes.append(1)
        merge = merge_run([Fragment(i, n, 0) for i, n in enumerate(sizes)])
        if merge:
            level = max(tier(sizes[i]) for i in merge)
            assert sum(tier(sizes[i]) == level for i in merge) == FAN_IN
            assert len(merge) < 2 * FAN_IN
            sizes[merge[0] : merge[-1] + 1] = [sum(sizes[merge[0] : merge[-1] + 1])]


def test_fragments_of_the_final_tier_are_never_merged_again():
    # A purge rewrites each fragment holding a forgotten row whole: its size is a forget's cost.
    assert tier(FRAGMENT_ROWS) == FINAL_TIER
    assert tier(FRAGMENT_ROWS - 1) == FINAL_TIER - 1
    assert merge_run([Fragment(i, FRAGMENT_ROWS, 0) for i in range(FAN_IN * 2)]) == []
    assert merge_run([Fragment(i, 10 * FRAGMENT_ROWS, 0) for i in range(FAN_IN)]) == []
    # Below it, merging goes on as before, the final fragments standing between stretches.
    below = FRAGMENT_ROWS // FAN_IN
    fragments = [
        Fragment(0, below, 0),
        Fragment(1, FRAGMENT_ROWS, 0),
        *(Fragment(i, below, 0) for i in range(2, 2 + FAN_IN)),
    ]
    assert merge_run(fragments) == list(range(2, 2 + FAN_IN))


def test_a_merge_past_the_bound_is_written_as_pieces_of_it():
    assert merged_size(FRAGMENT_ROWS - 2) == FRAGMENT_ROWS - 1  # one fragment, as large as needed
    assert merged_size(FRAGMENT_ROWS) == FRAGMENT_ROWS
    assert merged_size(8 * FRAGMENT_ROWS) == FRAGMENT_ROWS


def test_a_fragment_with_many_deleted_rows_is_rewritten_alone():
    fragments = [Fragment(0, 5000, 0), Fragment(1, 800, 200), Fragment(2, 3, 0)]
    assert merge_run(fragments) == [1]
    assert merge_run([Fragment(0, 5000, 10)]) == []


def test_beside_a_purge_only_fragments_no_index_covers_and_no_delete_touched_are_merged():
    """``merge_beside``: an indexed fragment or one holding deleted rows (which the purge
    may be compacting, or whose index it rebuilds) stands between stretches and is never
    merged, whatever its tier."""
    appended = [Fragment(i, 1, 0) for i in range(10, 10 + FAN_IN)]
    indexed_small = [Fragment(i, 1, 0) for i in range(1, 5)]
    fragments = [Fragment(0, 5000, 3), *indexed_small, *appended]
    assert merge_run(fragments) == list(range(1, 5)) + [f.id for f in appended]
    assert merge_beside(fragments, indexed={0, 1, 2, 3, 4}) == [f.id for f in appended]
    deleted = [Fragment(20, 1, 0), Fragment(21, 1, 1), *[Fragment(i, 1, 0) for i in range(22, 22 + FAN_IN - 2)]]
    assert merge_beside(deleted, indexed=set()) == []  # one holds a deleted row: two stretches too short
    assert merge_beside(appended, indexed={f.id for f in appended}) == []


def test_indexes_fold_new_rows_in_by_share_of_the_table_within_bounds():
    assert not index_due(maintenance.INDEX_LAG_MIN - 1, 0)
    assert index_due(maintenance.INDEX_LAG_MIN, 0)
    assert not index_due(1000, 100_000)  # 1/16 of 100k is 6,250, capped at INDEX_LAG_MAX
    assert index_due(maintenance.INDEX_LAG_MAX, 10**8)


# -- real databases -------------------------------------------------------------------------

WRITER = """
import sys
from wontopos_mcp import Memory
proc = int(sys.argv[1])
with Memory(db=sys.argv[2]) as mem:
    for i in range(int(sys.argv[3])):
        mem.add(f"Process {proc} noted item {i}: the parcel for flat {proc * 100 + i} arrives on day {i}.",
                user_id="many")
"""


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def compacted_bytes(path: Path, scratch: Path) -> int:
    """The floor: a copy with every table compacted and every old version removed."""
    import lancedb

    copy = scratch / "floor"
    shutil.copytree(path, copy)
    db = lancedb.connect(str(copy))
    for name in db.list_tables().tables:
        with warnings.catch_warnings():
            # LanceDB warns that cleanup_older_than=0 breaks concurrent readers; this copy has none.
            warnings.filterwarnings("ignore", r"optimize\(cleanup_older_than=0\)", UserWarning)
            db.open_table(name).optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
    return disk_bytes(copy)


# Real processes: what is claimed is that many short lives, each too short for a counter
# inside it to reach a maintenance round, still keep the database small.
@pytest.mark.slow
def test_twenty_short_lived_processes_keep_the_database_within_three_times_its_floor(
    tmp_path: Path, model_cache: Any, embedder: Any, make_service: Any
) -> None:
    """Each process lives for 30 writes (a host's short stdio session, a CLI call): no
    counter inside a process could ever reach a maintenance round; the table's own state
    must. Two run at a time, sharing the database through its lock."""
    db = tmp_path / "db"
    make_service(db=db).store_create("many")
    env = {**server_env(model_cache), "WONTOPOS_LOG_LEVEL": "error"}
    processes, writes = 20, 30  # 600 rows; each start-up (~3 s of CPU) costs more than its writes

    def write(proc: int) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-c", WRITER, str(proc), str(db), str(writes)]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(write, range(processes)))
    assert [r.returncode for r in results] == [0] * processes, [r.stderr[-2000:] for r in results if r.returncode]
    size, floor = disk_bytes(db), compacted_bytes(db, tmp_path)
    assert size <= 3 * floor, f"{size / 1e6:.1f} MB on disk against a {floor / 1e6:.1f} MB floor"

    service = make_service(db=db)
    contents = [m["content"] for m in all_memories(service, "many")]
    assert len(contents) == processes * writes
    assert len(set(contents)) == processes * writes
    import lance

    fragments = lance.dataset(str(db / "chunks.lance")).get_fragments()
    assert len(fragments) <= 2 * FAN_IN * (tier(processes * writes) + 1)


@pytest.mark.slow
def test_rows_outside_the_indexes_are_found_by_every_read(service: Any) -> None:
    """Indexes lag the table by up to ``index_due``'s share; the newest rows are then
    read by a scan beside the index, and must be found as if indexed."""
    service.speaker_register("Bob")
    for i in range(maintenance.INDEX_LAG_MIN + 5):
        service.memory_add(f"Routine entry {i} about the garden hose and the tomatoes.")
    newest = service.memory_add("Bob said the zeppelin tickets are booked for Thursday.", speaker="Bob")
    import lance

    dataset = lance.dataset(str(Path(service.store.uri) / "chunks.lance"))
    outside, _ = maintenance.unindexed_rows(dataset, maintenance.fragments_of(dataset))
    assert outside > 0, "the newest rows should still be outside the indexes"
    found = service.memory_search("zeppelin tickets", speaker="Bob", limit=5)["memories"]
    assert [m["id"] for m in found] == [newest["id"]]
    assert service.by_speaker("Bob")["memories"][0]["id"] == newest["id"]
    assert service.memory_get(newest["id"])["memory"]["content"].startswith("Bob said")
    again = service.memory_add("Bob said the zeppelin tickets are booked for Thursday.", speaker="Bob")
    assert again["status"] == "duplicate"
    assert again["duplicate_of"] == newest["id"]


@pytest.mark.slow
def test_upkeep_removes_versions_older_than_the_retention(tmp_path: Path, embedder: Any) -> None:
    """With no retention (a store argument, so a test need not wait), each cleanup round
    leaves only the versions committed since the previous one."""
    from wontopos_mcp.engine.service import MemoryService
    from wontopos_mcp.model.embeddings import ModelLoader
    from wontopos_mcp.storage.adapter import Store

    service = MemoryService(Store(str(tmp_path / "db"), retain=timedelta(0)), ModelLoader.of(embedder))
    for i in range(3 * maintenance.CLEANUP_EVERY):
        service.memory_add(f"Entry number {i} in the long diary of the lighthouse keeper.")
    import lance

    versions = [v["version"] for v in lance.dataset(str(tmp_path / "db" / "chunks.lance")).versions()]
    assert len(versions) <= maintenance.CLEANUP_EVERY + 1, versions
    assert versions[-1] >= 3 * maintenance.CLEANUP_EVERY
    service.close()


def _numbers_table(path: Path, appends: list[int]) -> Any:
    """A LanceDB table of one int column on disk, one fragment per append."""
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(str(path))
    table, at = None, 0
    for rows in appends:
        batch = pa.table({"n": pa.array(range(at, at + rows), pa.int64())})
        table = db.create_table("numbers", batch) if table is None else table
        if at:
            table.add(batch)
        at += rows
    return table


def _fragment_rows(table: Any) -> list[int]:
    return [fragment.count_rows() for fragment in table.to_lance().get_fragments()]


def test_a_full_compaction_leaves_fragments_a_purge_can_rewrite_one_at_a_time(tmp_path: Path) -> None:
    """LanceDB's own ``optimize()`` would merge these into one fragment of 600k rows, which the
    next forget's purge would rewrite whole."""
    table = _numbers_table(tmp_path, [100_000] * 6)
    maintenance.compact_all(table, retain=timedelta(0))
    rows = _fragment_rows(table)
    assert sum(rows) == 600_000
    assert len(rows) > 1
    assert max(rows) < 2 * FRAGMENT_ROWS


def test_a_purge_writes_a_fragment_past_the_bound_as_pieces_of_it(tmp_path: Path) -> None:
    """A database compacted before the bound (or just reindexed) holds a larger fragment: the
    first purge that rewrites it leaves pieces, so the next one rewrites a piece."""
    from wontopos_mcp.storage.purge_steps import compact

    table = _numbers_table(tmp_path, [4 * FRAGMENT_ROWS])
    table.delete("n = 7")
    compact(table)
    rows = _fragment_rows(table)
    assert sum(rows) == 4 * FRAGMENT_ROWS - 1
    assert len(rows) >= 3  # Lance writes floor(rows / target) even pieces
    assert max(rows) < 2 * FRAGMENT_ROWS
    assert table.count_rows("n = 7") == 0
