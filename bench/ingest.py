"""Bulk ingest: memories per second through ``memory_add_batch`` (one embedding pass, one
commit), beside the embedder's own batch rate on the same texts in the same run, which
is the ceiling (target: >= 200 memories/s).

``--long``: a conversation of ``--n`` (default 550) long turns alternating between a
registered person and the assistant (``me``), several sentence chunks each
(``long_turns.py``), stored through ``Memory.add_many`` with speaker and conversation
set; the ceiling is ``embed_passages`` on exactly the chunks the product embeds for
those turns (``chunk_text`` at the model's ``max_chars``; the embedder adds the
passage prefix in both). Chunks/s and turns/s of both, interleaved per run (target:
ingest >= 0.8x the embedder).

    python bench/ingest.py [--n 2000] [--model-cache DIR]
    python bench/ingest.py --long [--n 550] [--runs 3] [--model-cache DIR]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from long_turns import PERSON, turns

from wontopos_mcp.config import DEFAULT_MODEL, default_model_cache
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.library import Memory
from wontopos_mcp.model.embeddings import Embedder, ModelLoader, load_embedder
from wontopos_mcp.rules.text import chunk_text
from wontopos_mcp.storage.adapter import Store

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


def timed(action: Callable[[], Any]) -> tuple[Any, float, float]:
    """``action()``'s result, wall seconds and CPU seconds of this process (every
    thread, onnxruntime's included: steadier than wall time on a shared machine)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = action()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def long_turns(embedder: Embedder, n: int, runs: int) -> None:
    """The long-turn mode: ``Memory.add_many`` against the embedder on the same chunks,
    interleaved, which goes first alternating per run (load on a shared machine drifts)."""
    db = Store(tempfile.mkdtemp(prefix="wontopos-ingest-long-"))
    memory = Memory(service=MemoryService(db, ModelLoader.of(embedder)))
    times: dict[str, list[tuple[float, float]]] = {"add_many": [], "embedder": []}
    chunk_counts = []
    for run in range(runs):
        conversation = turns(n, seed=run)
        chunks = [c for t in conversation for c in chunk_text(t.content, embedder.max_chars)]
        chunk_counts.append(len(chunks))
        store = f"long{run}"
        memory.create_store(store)
        memory.add_speaker(PERSON, store)
        items = [
            {"content": t.content, "speaker": t.speaker, "conversation_id": t.conversation_id} for t in conversation
        ]
        steps = [
            ("embedder", partial(embedder.embed_passages, chunks)),
            ("add_many", partial(memory.add_many, items, store)),
        ]
        for name, action in steps if run % 2 == 0 else steps[::-1]:
            answer, wall, cpu = timed(action)
            times[name].append((wall, cpu))
            if name == "add_many" and answer["count"] != n:
                raise SystemExit(
                    f"run {run}: {answer['count']} of {n} turns stored ({answer['duplicates']} duplicates)"
                )
        (ew, ec), (iw, ic) = times["embedder"][-1], times["add_many"][-1]
        print(
            f"run {run}: {len(chunks)} chunks; embedder {ew:.1f} s ({ec:.1f} s CPU), add_many {iw:.1f} s ({ic:.1f} s CPU)",
            flush=True,
        )
    per_run = statistics.median(chunk_counts)
    print(f"{n} long turns, {per_run:.0f} chunks per run; median of {runs} runs, wall / CPU seconds")
    for name, label in (("add_many", "add_many:      "), ("embedder", "embedder alone:")):
        wall, cpu = (statistics.median(t[k] for t in times[name]) for k in (0, 1))
        print(f"{label} {per_run / wall:.1f} / {per_run / cpu:.1f} chunks/s, {n / wall:.2f} / {n / cpu:.2f} turns/s")
    for k, kind in ((0, "wall"), (1, "CPU")):
        ratios = [e[k] / i[k] for e, i in zip(times["embedder"], times["add_many"])]
        print(
            f"add_many / embedder ({kind}): {statistics.median(ratios):.2f} median, runs {', '.join(f'{r:.2f}' for r in ratios)} (target >= 0.8)"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=None, help="memories (default 2000; --long: 550 turns)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--long", action="store_true", help="long conversation turns through Memory.add_many")
    parser.add_argument("--model-cache", default=default_model_cache())
    args = parser.parse_args()
    embedder = load_embedder(DEFAULT_MODEL, args.model_cache)
    if args.long:
        long_turns(embedder, args.n or 550, args.runs)
        return
    args.n = args.n or 2000
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
