"""Object storage against local disk: add, search and by_speaker latency, one process.

Replicas behind a load balancer put the database in object storage (issue 11); every call
then pays the store's round trips. This measures what that costs on a local S3 emulator
(``moto[server]``, started here on 127.0.0.1 and always stopped, see
``tests/s3_emulator.py``) next to a local directory: one process, one model shared by both
databases, the two interleaved call by call (the order alternating every iteration) so a
busy moment of the machine hits both alike. After ``--warm-up`` rounds, ``--n`` rounds of
``add`` (tagged ``Alice`` every other time), ``search`` and ``by_speaker`` on each; prints
p50 / p95 per backend and the ratios, and the emulator's ``add`` p50 over the first and
last quarter (latency grows as versions and fragments accumulate).

The emulator answers from memory on this machine, with no network between: a real
bucket adds its round-trip time to every request, so these ratios are a floor.

    python bench/object_store.py [--n 40] [--warm-up 5] [--writers single|leased] [--model-cache DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from s3_emulator import S3Emulator

from wontopos_mcp.config import Settings, default_model_cache
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import DEFAULT_MODEL, ModelLoader, load_embedder

STORE = "bench"
SPEAKER = "Alice"
SUBJECTS = ["Bob", "The team", "My sister", "The landlord", "Our client", "The doctor"]
OBJECTS = ["the flight", "the dinner", "the deadline", "the meeting", "the rent", "the report"]
QUERIES = ["when is the deadline?", "who paid for the dinner?", "what about the flight?",
           "did anyone cancel the meeting?", "what did the doctor say?"]  # fmt: skip
OPERATIONS = ("add", "search", "by_speaker")


def text(i: int) -> str:
    """Every one distinct, so no add is a duplicate."""
    return f"{SUBJECTS[i % 6]} talked about {OBJECTS[i // 6 % 6]} on day {i}; it was settled after a long call."


def open_service(
    db: str, embedder: Any, model_cache: str, storage: dict[str, str], writers: str | None
) -> MemoryService:
    # WONTOPOS_WRITERS is read only where this version knows the setting.
    environ = {} if writers is None else {"WONTOPOS_WRITERS": writers}
    settings = Settings.load(
        {"db": db, "model_cache": model_cache, "storage_options": storage or None}, environ=environ
    )
    svc = MemoryService.open(settings, models=ModelLoader.of(embedder))
    svc.store_create(STORE)
    svc.speaker_register(SPEAKER, user_id=STORE)
    return svc


def calls(svc: MemoryService, i: int) -> dict[str, Callable[[], Any]]:
    return {
        "add": lambda: svc.memory_add(text(i), speaker=SPEAKER if i % 2 else None, user_id=STORE),
        "search": lambda: svc.memory_search(QUERIES[i % len(QUERIES)], user_id=STORE),
        "by_speaker": lambda: svc.by_speaker(SPEAKER, limit=10, user_id=STORE),
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(services: dict[str, MemoryService], n: int, warm_up: int) -> dict[str, dict[str, list[float]]]:
    """Milliseconds per backend and operation, the backends interleaved call by call."""
    times: dict[str, dict[str, list[float]]] = {b: {op: [] for op in OPERATIONS} for b in services}
    order = list(services)
    for i in range(warm_up + n):
        order.reverse()
        for op in OPERATIONS:
            for backend in order:
                call = calls(services[backend], i)[op]
                started = time.perf_counter()
                call()
                if i >= warm_up:
                    times[backend][op].append((time.perf_counter() - started) * 1000)
    return times


def report(times: dict[str, dict[str, list[float]]], n: int) -> None:
    local, s3 = times["local"], times["s3"]
    print(f"\n{n} calls of each after warm-up, ms")
    print(f"{'operation':<11} {'local p50':>9} {'p95':>7} {'s3 p50':>8} {'p95':>7} {'ratio p50':>9} {'p95':>6}")
    for op in OPERATIONS:
        l50, l95, s50, s95 = pct(local[op], 0.5), pct(local[op], 0.95), pct(s3[op], 0.5), pct(s3[op], 0.95)
        print(f"{op:<11} {l50:9.1f} {l95:7.1f} {s50:8.1f} {s95:7.1f} {s50 / l50:8.1f}x {s95 / l95:5.1f}x")
    quarter = max(1, n // 4)
    first, last = statistics.median(s3["add"][:quarter]), statistics.median(s3["add"][-quarter:])
    print(f"s3 add p50, first {quarter} vs last {quarter}: {first:.0f} -> {last:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=40, help="measured calls of each operation per backend")
    parser.add_argument("--warm-up", type=int, default=5)
    parser.add_argument("--writers", choices=("single", "leased"), default=None,
                        help="the object store's --writers (default: the product's default)")  # fmt: skip
    parser.add_argument("--model-cache", default=default_model_cache())
    args = parser.parse_args()
    embedder = load_embedder(DEFAULT_MODEL, args.model_cache)
    with tempfile.TemporaryDirectory(prefix="wontopos-object-store-") as scratch, S3Emulator(Path(scratch)) as s3:
        services = {
            "local": open_service(str(Path(scratch) / "db"), embedder, args.model_cache, {}, None),
            "s3": open_service(
                f"s3://{s3.bucket('bench')}/db", embedder, args.model_cache, s3.storage_options(), args.writers
            ),
        }
        try:
            times = measure(services, args.n, args.warm_up)
        finally:
            for svc in services.values():
                svc.close()
    report(times, args.n)


if __name__ == "__main__":
    main()
