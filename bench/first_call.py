"""Spawn -> tools/list, spawn -> the first speakers_list answer and spawn -> the first
memory_add answer, over real stdio.

Calls that need no embedding never wait for the model. Targets: the first
``speakers_list`` answer within 1.5x of spawn -> ``tools/list`` (issue 9); the first
``memory_add`` within 2x of it on a warm model cache (issue 24), and on a cold one
answered, not refused, when the model converts within the 60 s a call waits for it (the
add sends a ``progressToken``; the progress notifications it gets while it waits are
counted). Measured with a cold
model cache (a fresh folder per run: the model is converted while the calls are made,
the worst contention) and with a warm one (the model only loads). The requests are all
written at once, as a host that calls a tool right after listing them would.

What bounds the ratio (measured, 2 cores): the MCP stack's imports take ~0.6 s before
``tools/list``, and opening the database starts with LanceDB's import, ~1.0 s of CPU
that holds the GIL (about half of it the generated ``lance_namespace`` REST client that
lancedb imports eagerly). Both run on one interpreter lock, so the first
``speakers_list`` cannot come before ~1.6 s in whichever order they run: started before
the MCP imports, the open only delays ``tools/list``.

With the shared engine (issue 32, the default): ``warm`` runs find the engine of the
earlier run still up (target: the first ``memory_add`` within 1.5x of that session's
``tools/list``); ``no engine`` runs have a warm model cache but every engine stopped first
(the first session of the day: within 4x, never a 503); ``cold`` runs name a fresh model
cache, so they start a new engine that converts the model. ``--engine inprocess`` measures
the server without the relay (the figures before issue 32). The engines live in a runtime
directory of this run's own and are stopped at the end.

    python bench/first_call.py [--runs 5] [--model-cache DIR] [--fresh-db] [--src DIR ...]
                               [--engine shared|inprocess]

``--model-cache`` is the warm cache to use (default: one converted by a first run here).
``--fresh-db`` gives every run a new database (its first open creates the tables);
otherwise every run opens the database an earlier run created. ``--src`` (repeatable)
runs the server from these source trees, interleaved, to compare two versions on a
machine whose load drifts (default: the tree this script is in).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import NamedTuple

HERE = str(Path(__file__).resolve().parent.parent)

REQUESTS = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "speakers_list", "arguments": {}}},
    {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "memory_add", "arguments": {"content": "CONTENT"},
        "_meta": {"progressToken": "first-add"}}},
]  # fmt: skip


class Run(NamedTuple):
    listed: float  # seconds from spawn to the tools/list answer
    answered: float  # ... to the speakers_list answer
    added: float  # ... to the memory_add answer
    add_status: str  # "stored", or the refusal's status (503 on a wait past 60 s)
    progress: int  # progress notifications the add got while it waited


ENV: dict[str, str] = {}
ENGINE = ["--engine", "shared"]


def one_run(src: str, db: str, model_cache: str) -> Run:
    argv = [sys.executable, "-m", "wontopos_mcp", "--db", db, "--model-cache", model_cache, *ENGINE]
    env = {**os.environ, **ENV, "PYTHONPATH": src}
    requests = json.dumps(REQUESTS).replace("CONTENT", f"A first memory, {uuid.uuid4()}.")
    start = time.perf_counter()
    # cwd=src: ``python -m`` puts the working directory first on sys.path, before PYTHONPATH
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=src
    )
    assert proc.stdin
    assert proc.stdout
    proc.stdin.write("".join(json.dumps(r) + "\n" for r in json.loads(requests)).encode())
    proc.stdin.flush()
    listed = answered = 0.0
    progress = 0
    for line in proc.stdout:
        message = json.loads(line)
        if message.get("id") == 2:
            listed = time.perf_counter() - start
        elif message.get("id") == 3:
            answered = time.perf_counter() - start
            if message.get("result", {}).get("isError"):
                raise SystemExit(f"speakers_list failed: {message}")
        elif message.get("method") == "notifications/progress":
            progress += 1
        elif message.get("id") == 4:
            added = time.perf_counter() - start
            result = message["result"]["structuredContent"]
            break
    proc.kill()
    proc.wait()
    return Run(listed, answered, added, str(result["status"]), progress)


def report(label: str, runs: list[Run]) -> None:
    def median_ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.0f} ms"

    listing = [r.listed for r in runs]
    print(
        f"{label}: tools/list {median_ms(listing)}, speakers_list {median_ms([r.answered for r in runs])} "
        f"(ratio {statistics.median([r.answered / r.listed for r in runs]):.2f}, target <= 1.50), "
        f"memory_add {median_ms([r.added for r in runs])} (ratio {statistics.median([r.added / r.listed for r in runs]):.2f}, "
        f"max {max(r.added / r.listed for r in runs):.2f}; warm target <= 1.50 (shared engine), 2.00 (in-process), no engine <= 4; "
        f"min {min(r.added for r in runs):.1f} s, max {max(r.added for r in runs):.1f} s), "
        f"answers {sorted({r.add_status for r in runs})}, progress notifications {[r.progress for r in runs]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model-cache", default=None)
    parser.add_argument("--fresh-db", action="store_true")
    parser.add_argument("--src", action="append", default=None)
    parser.add_argument("--engine", choices=("shared", "inprocess"), default="shared")
    args = parser.parse_args()
    ENGINE[1] = args.engine
    from wontopos_mcp.cli import engines

    ENV["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="wos-bench-")
    place = [Path(ENV["XDG_RUNTIME_DIR"]) / "wontopos-mcp"]
    sources = [str(Path(s).resolve()) for s in args.src or [HERE]]
    for src in sources:  # as an install leaves it (see bench/startup.py)
        compileall.compile_dir(os.path.join(src, "wontopos_mcp"), quiet=1)
    work = tempfile.mkdtemp(prefix="wontopos-first-call-")
    try:
        warm = args.model_cache or os.path.join(work, "warm-models")
        db = os.path.join(work, "db")
        for src in sources:
            one_run(src, db, warm)  # the file cache, the database; the warm cache's conversion starts here
        _wait_for_model(sources[0], db, warm)

        def database(i: int, kind: str) -> str:
            return os.path.join(work, f"db-{kind}-{i}") if args.fresh_db else db

        runs: dict[tuple[str, str], list[Run]] = {}
        for i in range(args.runs):  # interleaved, so load drifts hit every case alike
            for n, src in enumerate(sources):
                cold = os.path.join(work, f"cold-models-{i}")
                runs.setdefault((src, "cold"), []).append(one_run(src, database(i, f"cold{n}"), cold))
                shutil.rmtree(cold, ignore_errors=True)
                if args.engine == "shared":  # the cold run's engine, and the warm one of the last round
                    engines.stop(place)
                    runs.setdefault((src, "no engine, warm"), []).append(one_run(src, database(i, f"warm{n}"), warm))
                runs.setdefault((src, "warm"), []).append(one_run(src, database(i, f"warm{n}"), warm))
        for (src, kind), timings in runs.items():
            report(f"{src} {kind} model cache" if len(sources) > 1 else f"{kind} model cache", timings)
    finally:
        engines.stop(place)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(ENV["XDG_RUNTIME_DIR"], ignore_errors=True)


def _wait_for_model(src: str, db: str, cache: str) -> None:
    """Convert the warm cache once (a search waits for the model) before timing anything."""
    argv = [sys.executable, "-m", "wontopos_mcp", "--db", db, "--model-cache", cache, "search", "warm-up"]
    env = {**os.environ, **ENV, "PYTHONPATH": src}
    subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=src, check=False, timeout=600
    )


if __name__ == "__main__":
    main()
