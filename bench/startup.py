"""Spawn -> tools/list: wontopos-mcp over stdio against a bare MCPServer hello-world.

Target (SPEC "Fast"): ratio <= 1.2. Runs the two interleaved, medians of N runs, with a
warm file cache and a warm model cache (the model loads in the background and must not
delay tools/list either way).

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
import statistics
import subprocess
import sys
import tempfile
import time

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--db", default=None)
    parser.add_argument("--model-cache", default=None)
    args = parser.parse_args()
    import wontopos_mcp

    compileall.compile_dir(os.path.dirname(wontopos_mcp.__file__), quiet=1)
    env = dict(os.environ)
    db = args.db or tempfile.mkdtemp(prefix="wontopos-bench-")
    ours = [sys.executable, "-m", "wontopos_mcp", "--db", db]
    if args.model_cache:
        ours += ["--model-cache", args.model_cache]
    hello = [sys.executable, "-c", HELLO]
    time_to_tools_list(ours, env)  # warm the file cache (and the model conversion)
    time_to_tools_list(hello, env)
    a: list[float] = []
    b: list[float] = []
    for _ in range(args.runs):
        t, n = time_to_tools_list(ours, env)
        a.append(t)
        t2, _ = time_to_tools_list(hello, env)
        b.append(t2)
    ma, mb = statistics.median(a), statistics.median(b)
    print(
        f"wontopos-mcp spawn->tools/list: median {ma * 1000:.0f} ms  (min {min(a) * 1000:.0f}, max {max(a) * 1000:.0f}; {n} tools)"
    )
    print(
        f"bare MCPServer hello-world:     median {mb * 1000:.0f} ms  (min {min(b) * 1000:.0f}, max {max(b) * 1000:.0f})"
    )
    print(f"ratio: {ma / mb:.2f}  (target <= 1.20)")


if __name__ == "__main__":
    main()
