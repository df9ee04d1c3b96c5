"""What a forget that reaches the disk costs, at 10k and 100k memories (1M if asked).

One fresh database per size, filled as ``bench/scale.py`` fills it (rows with every field
``memory_add`` writes, clustered e5 vectors, the production thresholds: IVF_SQ from
50,000 rows), then ``store.maintain()``: one large fragment, every index built, as a
database looks after long use. A few marked memories are added through the service. Then:

* **bound**: forget the oldest memory (in the large fragment) and wait, with the default
  timing (a forget is off the disk within 60 s), until the purge's marker is gone;
* **cost**: forget another old one, a recent one (in a small fragment) and one speaker's
  3 memories, each purged at once (``store.purge()``): how long its rewrite took, the part
  of it in the write lock (every write waits that long at worst; the compaction and the
  index rebuild run beside the writers) and its cleanup's; a write made while the purge
  runs is timed too; then a byte search of every file for the recent memory's text, and
  the index rebuild alone (median of 3);
* **writes**: the p50/p99 of back-to-back ``memory_add`` calls (embedding included) with
  no purge running (200: the upkeep rounds writes make on their own are part of usual),
  then while an old memory's forget is purged at once (the writes start before the
  forget and stop when the purge is done; those that started during the rewrite apart
  too); and how long the forget call itself took (it looks for the records naming the memory: issue 30). From
  ``PurgeTiming.apart_from_rows`` memories (100k), where the rewrite runs in a child
  process of lower priority by default, the same with the rewrite in this process first.

    PYTHONPATH=. python bench/purge.py [--sizes 10000,100000] [--model-cache DIR] [--writes-only] [--purges N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.scale import Topics, bulk_load
from wontopos_mcp.config import DEFAULT_MODEL, default_model_cache
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader, load_embedder
from wontopos_mcp.storage.adapter import Store
from wontopos_mcp.storage.purge import MARKERS, PurgeTiming
from wontopos_mcp.storage.purge_worker import NICENESS
from wontopos_mcp.storage.schema import create_indexes

TOKEN = "zqxjurple"


def files(db: Path) -> list[Path]:
    """Every file under ``db`` still there once listed (a purge the store's own thread
    runs meanwhile may remove an old version's files while they are read)."""
    return [Path(root, name) for root, _, names in os.walk(db) for name in names]


def holders(db: Path, needle: str) -> list[str]:
    """Files under ``db`` whose raw bytes hold ``needle`` (lower-cased)."""
    found = []
    for path in files(db):
        with contextlib.suppress(FileNotFoundError):
            if needle.encode() in path.read_bytes().lower():
                found.append(str(path.relative_to(db)))
    return found


def mb(path: Path) -> float:
    total = 0
    for file in files(path):
        with contextlib.suppress(FileNotFoundError):
            total += file.stat().st_size
    return total / 1e6


def marked(svc: MemoryService, n: int) -> list[str]:
    return [
        svc.memory_add(f"Note {i}: the {TOKEN}{i} vault code is behind the blue door.", user_id="u0", category="zcat")[
            "id"
        ]
        for i in range(n)
    ]


def run_size(n: int, embedder: Any, topics: Topics, parent: Path, writes_only: bool = False, purges: int = 1) -> None:
    db = parent / f"db-{n}"
    svc = MemoryService(Store(str(db)), ModelLoader.of(embedder))
    for store in ("u0", "u1", "u2", "u3", "u4"):
        svc.store_create(store)
    for name in ("Alice", "Tiny"):
        svc.speaker_register(name, user_id="u0")
    start = time.perf_counter()
    bulk_load(svc.store, embedder, topics, n, seed=n, no_conversation=0.3)
    ids = marked(svc, 3)
    with svc.store.write_lock():
        svc.store.maintain()
    print(f"\n== {n:,} memories: built in {time.perf_counter() - start:.0f} s, {mb(db):.0f} MB on disk")

    # Bound, with the default timing: the store's oldest memory, in the large fragment.
    def oldest() -> str:
        return str(svc.memory_list(user_id="u0", limit=1)["memories"][0]["id"])

    if not writes_only:
        bound_and_cost(svc, db, ids, oldest)
    apart_from = PurgeTiming().apart_from_rows
    if apart_from is not None and n >= apart_from:  # the default here is apart: the same in this process, beside it
        here = MemoryService(Store(str(db), purge=PurgeTiming(apart_from_rows=None)), ModelLoader.of(embedder))
        writes_during_a_purge(here, oldest, "the rewrite in this process", purges)
        here.close()
        writes_during_a_purge(
            svc, oldest, f"the rewrite in a child process at niceness {NICENESS} (the default)", purges
        )
    else:
        writes_during_a_purge(svc, oldest, "the rewrite in this process (the default)", purges)
    svc.close()


def bound_and_cost(svc: MemoryService, db: Path, ids: list[str], oldest: Any) -> None:
    """A forget with the default timing, then three purged at once, a byte search and the index rebuild."""
    start = time.perf_counter()
    svc.memory_forget(memory_id=oldest(), user_id="u0")
    while svc.store.registry.rows(MARKERS):
        time.sleep(0.1)
    bound = time.perf_counter() - start
    versions = len(svc.store.chunks.existing().to_lance().versions())
    print(f"  forget -> purge done: {bound:.1f} s (bound: 60 s); chunks versions kept: {versions}")

    # Cost, purged at once; a write made meanwhile waits for the rewrite.
    for label, forget in (
        ("an old memory (large fragment)", lambda: svc.memory_forget(memory_id=oldest(), user_id="u0")),
        ("a recent memory (small fragment)", lambda: svc.memory_forget(memory_id=ids[0], user_id="u0")),
        ("a speaker's 3 memories", lambda: svc.memory_forget(speaker="Tiny", confirm_records=3, user_id="u0")),
    ):
        forget()
        waited: list[float] = []

        def write(waited: list[float] = waited) -> None:
            time.sleep(0.2)
            begun = time.perf_counter()
            svc.memory_add(f"A write during the purge {time.time()}", user_id="u1")
            waited.append(time.perf_counter() - begun)

        writer = threading.Thread(target=write)
        writer.start()
        took = svc.store.purge()
        writer.join()
        assert took is not None
        print(f"  purge of {label}: rewrite {took['rewrite_s']:.2f} s, {took['locked_s']:.2f} s of it in the write lock, cleanup "
              f"{took['cleanup_s']:.2f} s ({took['versions_removed']:.0f} old versions); a write made meanwhile "
              f"took {waited[0]:.2f} s")  # fmt: skip
    left = holders(db, f"{TOKEN}0")
    print(f"  files holding the recent memory's text after its purge: {len(left)}")

    # The rewrite's parts: compaction alone, and the index rebuild alone (the latter with
    # nothing to compact, as it runs after a compaction).
    table = svc.store.chunks.existing()
    rebuild = []
    for _ in range(3):
        begun = time.perf_counter()
        with svc.store.write_lock():
            create_indexes(table)
        rebuild.append(time.perf_counter() - begun)
    print(f"  of which the scalar and full-text index rebuild: {statistics.median(rebuild):.2f} s (median of 3); "
          f"disk after: {mb(db):.0f} MB")  # fmt: skip


def settle(svc: MemoryService) -> None:
    """Every variant from the same state, as a database looks after long use: every index
    whole, the table compacted, the versions before that removed (a second round once they
    are ``retain`` old: else the first usual write's upkeep unlinks the ~2 GB of files the
    compaction replaced, at 1M memories), and what that left dirty written back (else the
    kernel throttles every writer while it flushes). The purge's own rewrite is measured
    with its writeback."""
    for _ in range(2):
        with svc.store.write_lock():
            svc.store.maintain()
        time.sleep(svc.store.retain.total_seconds() + 0.5)
    if hasattr(os, "sync"):
        os.sync()


USUAL_WRITES = 200  # enough for the upkeep rounds writes make on their own (the usual p99 holds some)


def _writes(
    svc: MemoryService, stop: threading.Event, took: list[tuple[float, float]], count: int | None = None
) -> None:
    """Back-to-back writes into "u2" until ``stop`` (or ``count`` of them): (start, seconds) each."""
    i = 0
    while not stop.is_set() and (count is None or i < count):
        begun = time.perf_counter()
        svc.memory_add(f"Write number {i} of the latency run, {time.time()}.", user_id="u2")
        took.append((begun, time.perf_counter() - begun))
        i += 1


def _p(took: list[float], q: int) -> float:
    return statistics.quantiles(took, n=100, method="inclusive")[q - 1] if len(took) > 1 else took[0]


def writes_during_a_purge(svc: MemoryService, oldest: Any, where: str, purges: int = 1) -> None:
    """The usual writes (``USUAL_WRITES`` of them, from a fully maintained table: their own
    upkeep rounds included), then writes from before a forget until its
    purge is done: all of them (the forget call holds the store's lock a moment, and the
    cleanup's wait for readers does nothing), and those that started during the rewrite.
    ``purges`` rounds of both, each from a settled table, pooled: a purge at 1M memories
    lasts ~10 s, ~150 writes, whose p99 is their second slowest; pooled, one stall of the
    disk moves it less."""
    usual_s: list[float] = []
    whole: list[float] = []
    rewrite: list[float] = []
    rounds, slowest = [], []
    for _ in range(purges):
        usual, took, forget_ms, during, phase = _one_purge(svc, oldest)
        usual_s += [t for _, t in usual]
        whole += [t for _, t in during]
        in_rewrite = [t for start, t in during if phase(start) == "during the rewrite"]
        rewrite += in_rewrite
        rounds.append(
            f"forget call {forget_ms:.0f} ms, purge rewrite {took['rewrite_s']:.2f} s ({took['locked_s']:.2f} s in the "
            f"write lock), p99 ratios {_p([t for _, t in during], 99) / _p([t for _, t in usual], 99):.2f} / "
            f"{_p(in_rewrite or [t for _, t in during], 99) / _p([t for _, t in usual], 99):.2f}"
        )
        slowest += [(t, phase(start)) for start, t in sorted(during, key=lambda write: -write[1])[:3]]
    rewrite = rewrite or whole
    print(f"  {where}: writes usual p50 {_p(usual_s, 50):.2f} s p99 {_p(usual_s, 99):.2f} s ({len(usual_s)}); from "
          f"before the forget to the purge's end p50 {_p(whole, 50):.2f} s p99 {_p(whole, 99):.2f} s ({len(whole)}); "
          f"started during the rewrite p50 {_p(rewrite, 50):.2f} s p99 {_p(rewrite, 99):.2f} s ({len(rewrite)}): "
          f"p99 ratios {_p(whole, 99) / _p(usual_s, 99):.2f} (all) and {_p(rewrite, 99) / _p(usual_s, 99):.2f} "
          f"(rewrite)")  # fmt: skip
    for number, line in enumerate(rounds, 1):
        print(f"    purge {number}: {line}")
    slowest = sorted(slowest, reverse=True)[:3]
    print("    the slowest writes: " + "; ".join(f"{t:.2f} s, started {phase}" for t, phase in slowest))


def _one_purge(
    svc: MemoryService, oldest: Any
) -> tuple[list[tuple[float, float]], dict[str, float], float, list[tuple[float, float]], Callable[[float], str]]:
    """One round of ``writes_during_a_purge``: the usual writes, what the purge took, the
    forget call's milliseconds, the writes beside it, and the phase a start time fell in."""
    settle(svc)
    usual: list[tuple[float, float]] = []
    _writes(svc, threading.Event(), usual, count=USUAL_WRITES)
    during: list[tuple[float, float]] = []
    stop = threading.Event()
    writer = threading.Thread(target=_writes, args=(svc, stop, during))
    writer.start()
    while len(during) < 3:  # writing has begun
        time.sleep(0.01)
    memory_id = oldest()
    begun = time.perf_counter()
    svc.memory_forget(memory_id=memory_id, user_id="u0")
    forgotten = time.perf_counter()
    took = svc.store.purge()
    stop.set()
    writer.join()
    assert took is not None
    rewritten = forgotten + took["rewrite_s"]

    def phase(start: float) -> str:
        if start < begun:
            return "before the forget"
        if start < forgotten:
            return "during the forget call"
        return "during the rewrite" if start <= rewritten else f"{start - rewritten:.2f} s after the rewrite"

    return usual, took, 1000 * (forgotten - begun), during, phase


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--model-cache", default=str(default_model_cache()))
    parser.add_argument("--writes-only", action="store_true", help="only the writes during a purge")
    parser.add_argument("--purges", type=int, default=1, help="purges whose writes are pooled, per variant")
    args = parser.parse_args()
    embedder = load_embedder(DEFAULT_MODEL, args.model_cache)
    topics = Topics(embedder)
    parent = Path(tempfile.mkdtemp(prefix="wontopos-purge-"))
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            run_size(n, embedder, topics, parent, args.writes_only, args.purges)
    finally:
        shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()
