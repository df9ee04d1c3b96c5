"""Bulk ingest: memories per second through ``memory_add_batch`` (one embedding pass, one
commit), beside the embedder's own batch rate on the same texts in the same run, which
is the ceiling (target: >= 200 memories/s).

    python bench/ingest.py [--n 2000] [--model-cache DIR]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

from wontopos_mcp.config import DEFAULT_MODEL, default_model_cache
from wontopos_mcp.embeddings import ModelLoader, load_embedder
from wontopos_mcp.service import MemoryService
from wontopos_mcp.store import Store

SUBJECTS = ["Bob", "The team", "My sister", "Alice", "The landlord", "Our client", "The doctor", "Grandma"]
VERBS = ["moved", "booked", "cancelled", "asked about", "paid for", "forgot", "planned", "liked"]
OBJECTS = ["the flight", "the dinner", "the deadline", "the meeting", "the rent", "the trip", "the gift", "the report"]
WHEN = ["on Monday", "last week", "at 8 pm", "in March", "yesterday", "for Friday", "next month", "at noon"]


def texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(WHEN)} (note {i})."
        for i in range(n)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model-cache", default=default_model_cache())
    args = parser.parse_args()
    embedder = load_embedder(DEFAULT_MODEL, args.model_cache)
    service = MemoryService(Store(tempfile.mkdtemp(prefix="wontopos-ingest-")), ModelLoader.of(embedder))
    ingest, embed = [], []
    for run in range(args.runs):  # interleaved: the embedder alone, then the whole batch write
        batch = texts(args.n, seed=run)
        start = time.perf_counter()
        embedder.embed_passages(batch)
        embed.append(args.n / (time.perf_counter() - start))
        service.store_create(f"run{run}")
        start = time.perf_counter()
        answer = service.memory_add_batch([{"content": t} for t in batch], f"run{run}")
        ingest.append(answer["count"] / (time.perf_counter() - start))
    rate, ceiling = statistics.median(ingest), statistics.median(embed)
    print(f"memory_add_batch: {rate:.0f} memories/s (median of {args.runs} runs of {args.n}; target >= 200)")
    print(f"embedder alone:   {ceiling:.0f} texts/s on the same texts")
    print(f"ingest / embedder: {rate / ceiling:.2f}")


if __name__ == "__main__":
    main()
