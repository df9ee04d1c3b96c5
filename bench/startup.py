"""Spawn -> tools/list: wontopos-mcp over stdio against a bare MCPServer hello-world; and a
human command (``wontopos-mcp search``, ``add``, ``stats``) through the shared engine
against the relay's spawn -> tools/list (target: search <= 3x), with ``--engine
inprocess search`` (a command loading the model itself) for scale.

Targets: ratio <= 1.2 in-process (the stdio server lists its tools within 1.2x of a bare
server); <= 0.5 through the relay with the shared engine already running (issue 32). Runs the three interleaved (the relay, the in-process
server, the hello-world), medians of N runs, with a warm file cache and a warm model cache
(the model loads in the background and must not delay tools/list either way). The shared
engine lives in a runtime directory of this run's own and is stopped at the end.

    python bench/startup.py [--runs 10] [--db DIR] [--model-cache DIR]

The package is byte-compiled first (``compileall``), as an install leaves it: the MCP SDK
the hello-world imports was compiled by pip, and a machine with
``PYTHONDONTWRITEBYTECODE=1`` (this one) would otherwise compile every module of ours
from source at every start, about 45 ms that no installed copy pays.
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
from pathlib import Path

HELLO = """
from mcp.server import MCPServer
server = MCPServer("hello")
@server.tool()
def hello(name: str) -> str:
    return "hello " + name
server.run("stdio")
"""

REQUESTS = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]  # fmt: skip


def time_to_tools_list(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin
    assert proc.stdout
    proc.stdin.write("".join(json.dumps(r) + "\n" for r in REQUESTS).encode())
    proc.stdin.flush()
    tools = 0
    for line in proc.stdout:
        message = json.loads(line)
        if message.get("id") == 2:
            tools = len(message["result"]["tools"])
            break
    elapsed = time.perf_counter() - start
    proc.kill()
    proc.wait()
    return elapsed, tools


def time_command(argv: list[str], env: dict[str, str]) -> float:
    """Seconds a command takes from spawn to exit (it must succeed)."""
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--db", default=None)
    parser.add_argument("--model-cache", default=None)
    args = parser.parse_args()
    import wontopos_mcp

    compileall.compile_dir(os.path.dirname(wontopos_mcp.__file__), quiet=1)
    from wontopos_mcp.cli import engines

    runtime = tempfile.mkdtemp(prefix="wos-bench-")
    env = {**os.environ, "XDG_RUNTIME_DIR": runtime}
    db = args.db or tempfile.mkdtemp(prefix="wontopos-bench-")
    ours = [sys.executable, "-m", "wontopos_mcp", "--db", db]
    if args.model_cache:
        ours += ["--model-cache", args.model_cache]
    commands = {
        "relay, engine running": ours,
        "in-process": [*ours, "--engine", "inprocess"],
        "bare MCPServer hello-world": [sys.executable, "-c", HELLO],
    }
    try:
        for argv in commands.values():  # warm the file cache (the model conversion; the engine)
            time_to_tools_list(argv, env)
        human = {
            "search, engine running": [*ours, "search", "when does the ferry leave?"],
            "add, engine running": [*ours, "add", "The ferry leaves at seven."],
            "stats, engine running": [*ours, "stats"],
        }
        for argv in human.values():
            time_command(argv, env)  # the first also loads the model in the engine
        times: dict[str, list[float]] = {name: [] for name in [*commands, *human]}
        tools = {}
        for _ in range(args.runs):
            for name, argv in commands.items():
                t, tools[name] = time_to_tools_list(argv, env)
                times[name].append(t)
            for name, argv in human.items():
                times[name].append(time_command(argv, env))
        alone = [
            time_command([*ours, "--engine", "inprocess", "search", "when does the ferry leave?"], env)
            for _ in range(min(3, args.runs))
        ]
    finally:
        engines.stop([Path(runtime) / "wontopos-mcp"])
        shutil.rmtree(runtime, ignore_errors=True)
    hello = statistics.median(times["bare MCPServer hello-world"])
    for name, targets in (
        ("relay, engine running", "0.50"),
        ("in-process", "1.20"),
        ("bare MCPServer hello-world", ""),
    ):
        a = times[name]
        ratio = f"; ratio {statistics.median(a) / hello:.2f} (target <= {targets})" if targets else ""
        print(
            f"{name + ':':28} spawn->tools/list median {statistics.median(a) * 1000:.0f} ms "
            f"(min {min(a) * 1000:.0f}, max {max(a) * 1000:.0f}; {tools[name]} tools){ratio}"
        )
    relay = statistics.median(times["relay, engine running"])
    for name in human:
        a = times[name]
        target = " (target <= 3)" if name.startswith("search") else ""
        print(
            f"{name + ':':28} spawn->exit median {statistics.median(a) * 1000:.0f} ms (min {min(a) * 1000:.0f}, "
            f"max {max(a) * 1000:.0f}); ratio to the relay's spawn->tools/list {statistics.median(a) / relay:.2f}{target}"
        )
    print(
        f"{'search, --engine inprocess:':28} spawn->exit median {statistics.median(alone) * 1000:.0f} ms "
        f"({len(alone)} runs); ratio {statistics.median(alone) / relay:.1f}"
    )


if __name__ == "__main__":
    main()
