"""What a forget that reaches the disk costs, at 10k and 100k memories.

One fresh database per size, filled as ``bench/scale.py`` fills it (rows with every field
``memory_add`` writes, clustered e5 vectors, the production thresholds: IVF_SQ from
50,000 rows), then ``store.maintain()``: one large fragment, every index built, as a
database looks after long use. A few marked memories are added through the service. Then:

* **bound**: forget the oldest memory (in the large fragment) and wait, with the default
  timing (SPEC's 60 s), until the purge's marker is gone;
* **cost**: forget another old one, a recent one (in a small fragment) and one speaker's
  3 memories, each purged at once (``store.purge()``): the time its rewrite holds the
  write lock (every write waits that long at worst) and its cleanup's; a write made while
  the purge runs is timed too; then a byte search of every file for the recent memory's
  text, and the index rebuild alone (median of 3).

    PYTHONPATH=. python bench/purge.py [--sizes 10000,100000] [--model-cache DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.scale import Topics, bulk_load
from wontopos_mcp.config import DEFAULT_MODEL, default_model_cache
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader, load_embedder
from wontopos_mcp.storage.adapter import Store
from wontopos_mcp.storage.purge import MARKERS
from wontopos_mcp.storage.schema import create_indexes

TOKEN = "zqxjurple"


def holders(db: Path, needle: str) -> list[str]:
    """Files under ``db`` whose raw bytes hold ``needle`` (lower-cased)."""
    found = []
    for path in db.rglob("*"):
        if path.is_file() and needle.encode() in path.read_bytes().lower():
            found.append(str(path.relative_to(db)))
    return found


def mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def marked(svc: MemoryService, n: int) -> list[str]:
    return [
        svc.memory_add(f"Note {i}: the {TOKEN}{i} vault code is behind the blue door.", user_id="u0", category="zcat")[
            "id"
        ]
        for i in range(n)
    ]


def run_size(n: int, embedder: Any, topics: Topics, parent: Path) -> None:
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

    start = time.perf_counter()
    svc.memory_forget(memory_id=oldest(), user_id="u0")
    while svc.store.registry_rows(MARKERS):
        time.sleep(0.1)
    bound = time.perf_counter() - start
    versions = len(svc.store.existing_chunks().to_lance().versions())
    print(f"  forget -> purge done: {bound:.1f} s (SPEC: 60 s); chunks versions kept: {versions}")

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
        print(f"  purge of {label}: rewrite {took['rewrite_s']:.2f} s in the write lock, cleanup "
              f"{took['cleanup_s']:.2f} s ({took['versions_removed']:.0f} old versions); a write made meanwhile "
              f"took {waited[0]:.2f} s")  # fmt: skip
    left = holders(db, f"{TOKEN}0")
    print(f"  files holding the recent memory's text after its purge: {len(left)}")

    # The rewrite's parts: compaction alone, and the index rebuild alone (the latter with
    # nothing to compact, as it runs after a compaction).
    table = svc.store.existing_chunks()
    rebuild = []
    for _ in range(3):
        begun = time.perf_counter()
        with svc.store.write_lock():
            create_indexes(table)
        rebuild.append(time.perf_counter() - begun)
    print(f"  of which the scalar and full-text index rebuild: {statistics.median(rebuild):.2f} s (median of 3); "
          f"disk after: {mb(db):.0f} MB")  # fmt: skip
    svc.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--model-cache", default=str(default_model_cache()))
    args = parser.parse_args()
    embedder = load_embedder(DEFAULT_MODEL, args.model_cache)
    topics = Topics(embedder)
    parent = Path(tempfile.mkdtemp(prefix="wontopos-purge-"))
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            run_size(n, embedder, topics, parent)
    finally:
        shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()
