"""Sustained writing: what thousands of writes do to disk, files and latency.

A user writes for months; a benchmark of a few hundred rows hides what ten thousand do.
This writes ``--n`` memories through the library (``Memory``), one ``add`` at a time and
then through ``add_many`` in batches, into fresh databases, and prints per ``--every``
writes: p50 / p95 / max latency, the database's size on disk and file count, and the
floor: the size of a copy compacted with every old version removed. After each run it
compares a search on the database as left with a search on a freshly compacted copy.

Targets (issue 9): size ≤ 3× the floor at every point; p95 of the last block ≤ 1.5× the
p95 of the first; no write over 1 s; search after the run within 1.5× of the compacted
copy.

    python bench/sustained.py [--n 10000] [--every 1000] [--batch 100] [--mode single|batch|both]
                              [--model-cache DIR]
    python bench/sustained.py --quick      # 2,000 writes, every 250: a minute or two
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from wontopos_mcp import Memory
from wontopos_mcp.config import default_model_cache

SUBJECTS = ["Bob", "The team", "My sister", "Alice", "The landlord", "Our client", "The doctor", "Grandma"]
VERBS = ["moved", "booked", "cancelled", "asked about", "paid for", "forgot", "planned", "liked"]
OBJECTS = ["the flight", "the dinner", "the deadline", "the meeting", "the rent", "the trip", "the gift", "the report"]
PLACES = ["near the station", "in Lisbon", "at the office", "downtown", "by the river", "in the old town"]
QUERIES = ["when is the deadline?", "who paid for the dinner?", "what about the flight to Lisbon?",
           "did anyone cancel the meeting?", "what did the doctor say?"]  # fmt: skip


def text(i: int) -> str:
    """About 100 characters, every one distinct (no write is a duplicate)."""
    s, v, o, p = (SUBJECTS[i % 8], VERBS[i // 8 % 8], OBJECTS[i // 64 % 8], PLACES[i // 512 % 6])
    return f"{s} {v} {o} {p}, note {i}; it was settled after a long talk about costs and dates."


def disk(path: Path) -> tuple[int, int]:
    """(bytes, files) under ``path``."""
    size = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                size += os.stat(os.path.join(root, name)).st_size
                files += 1
            except FileNotFoundError:  # removed by maintenance while we walk
                pass
    return size, files


def compacted_copy(path: Path) -> Path:
    """A copy of the database with every table compacted and every old version gone."""
    import lancedb

    copy = Path(tempfile.mkdtemp(prefix="wontopos-floor-")) / "db"
    shutil.copytree(path, copy)
    db = lancedb.connect(str(copy))
    for name in db.list_tables().tables:
        db.open_table(name).optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
    return copy


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def search_ms(db: Path, model_cache: str, rounds: int = 15) -> float:
    """Median search latency on ``db`` (model warm, one warm-up round first)."""
    with Memory(db=str(db), model_cache=model_cache) as mem:
        mem.search("warm up", user_id="bench")
        times = []
        for r in range(rounds):
            start = time.perf_counter()
            mem.search(QUERIES[r % len(QUERIES)], user_id="bench")
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def run(mode: str, n: int, every: int, batch: int, model_cache: str) -> dict[str, bool]:
    db = Path(tempfile.mkdtemp(prefix=f"wontopos-sustained-{mode}-")) / "db"
    print(f"\n== {mode}: {n} writes{'' if mode == 'single' else f' in batches of {batch}'} -> {db}")
    print(f"{'writes':>7} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'disk MB':>8} {'files':>6} "
          f"{'floor MB':>8} {'ratio':>6}")  # fmt: skip
    ratios: list[float] = []
    p95s: list[float] = []
    worst = 0.0
    with Memory(db=str(db), model_cache=model_cache) as mem:
        mem.create_store("bench")
        mem.add("warm up the model", user_id="bench")
        done = 0
        while done < n:
            times: list[float] = []
            block_end = min(n, done + every)
            while done < block_end:
                if mode == "single":
                    start = time.perf_counter()
                    mem.add(text(done), user_id="bench")
                    times.append((time.perf_counter() - start) * 1000)
                    done += 1
                else:
                    size = min(batch, block_end - done)
                    items = [{"content": text(done + k)} for k in range(size)]
                    start = time.perf_counter()
                    mem.add_many(items, user_id="bench")
                    times.append((time.perf_counter() - start) * 1000)
                    done += size
            size_b, files = disk(db)
            floor_copy = compacted_copy(db)
            floor_b, _ = disk(floor_copy)
            shutil.rmtree(floor_copy.parent, ignore_errors=True)
            ratio = size_b / floor_b
            ratios.append(ratio)
            p95s.append(pct(times, 0.95))
            worst = max(worst, max(times))
            print(f"{done:>7} {statistics.median(times):>8.1f} {pct(times, 0.95):>8.1f} {max(times):>8.1f} "
                  f"{size_b / 1e6:>8.1f} {files:>6} {floor_b / 1e6:>8.1f} {ratio:>6.2f}")  # fmt: skip
    after = search_ms(db, model_cache)
    fresh = compacted_copy(db)
    compacted = search_ms(fresh, model_cache)
    shutil.rmtree(fresh.parent, ignore_errors=True)
    shutil.rmtree(db.parent, ignore_errors=True)
    unit = "write" if mode == "single" else f"batch of {batch}"
    checks = {
        f"disk <= 3x floor at every point (max {max(ratios):.2f}x)": max(ratios) <= 3.0,
        f"p95 last block <= 1.5x p95 first ({p95s[-1]:.1f} / {p95s[0]:.1f} ms = {p95s[-1] / p95s[0]:.2f}x)": p95s[-1]
        <= 1.5 * p95s[0],
        (
            f"no write over 1 s (max {worst:.0f} ms)"
            if mode == "single"
            else f"(single writes only) slowest {unit}: {worst:.0f} ms"
        ): worst <= 1000 or mode != "single",
        f"search after the run <= 1.5x compacted copy ({after:.1f} / {compacted:.1f} ms = {after / compacted:.2f}x)": after
        <= 1.5 * compacted,
    }
    for name, ok in checks.items():
        print(f"  {'met   ' if ok else 'MISSED'} {name}")
    return checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--mode", choices=("single", "batch", "both"), default="both")
    parser.add_argument("--model-cache", default=default_model_cache())
    parser.add_argument("--quick", action="store_true", help="2,000 writes, a block every 250")
    args = parser.parse_args()
    if args.quick:
        args.n, args.every = 2000, 250
    modes = ("single", "batch") if args.mode == "both" else (args.mode,)
    results = {mode: run(mode, args.n, args.every, args.batch, args.model_cache) for mode in modes}
    missed = [f"{mode}: {name}" for mode, checks in results.items() for name, ok in checks.items() if not ok]
    print("\nall targets met" if not missed else "\nmissed:\n  " + "\n  ".join(missed))


if __name__ == "__main__":
    main()
