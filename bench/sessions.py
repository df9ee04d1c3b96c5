"""N concurrent stdio sessions, as several agent hosts on one machine start them: each
spawned at once, its spawn -> ``tools/list`` and spawn -> first ``memory_add`` answer, and
the resident memory of every process while all N are open (the relays and the shared
engine, or the N in-process servers).

Targets: the resident memory of 5 concurrent sessions within 1.3x of 1 with the shared
engine (in-process it is about 5x); with ``--commands 3``, three command-line commands
(``search``, ``add``, ``speakers list``) run at once while the sessions are open, and every
process's memory together (the commands' at their peak, ``ru_maxrss``) within 1.3x of one
session's engine. Each case starts with no engine running (the
first session of the day starts it) on a warm model cache; engines live in a runtime
directory of this run's own and are stopped after each case. Linux (``/proc``).

    python bench/sessions.py [--sessions 5] [--commands 3] [--model-cache DIR] [--engine shared|inprocess|both]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from wontopos_mcp.cli import engines  # noqa: E402

REQUESTS = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_add", "arguments": {"content": "CONTENT"}}},
]  # fmt: skip


class Timing(NamedTuple):
    listed: float
    added: float
    status: str


def _proc_mb(pid: int | str, name: str, field: str) -> float:
    """The kilobytes figure ``field`` of ``/proc/<pid>/<name>``, in MB (0 for a process gone)."""
    try:
        for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def rss_mb(pid: int | str = "self") -> float:
    return _proc_mb(pid, "status", "VmRSS:")


def pss_mb(pid: int) -> float:
    """Proportional set size: each page shared by several processes (the interpreter, its
    libraries) counted once in all, split among them; what the processes cost the machine."""
    return _proc_mb(pid, "smaps_rollup", "Pss:")


def session(argv: list[str], env: dict[str, str], out: list[Any], ready: threading.Barrier) -> None:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin
    assert proc.stdout
    text = json.dumps(REQUESTS).replace("CONTENT", f"A first memory, {uuid.uuid4()}.")
    proc.stdin.write("".join(json.dumps(r) + "\n" for r in json.loads(text)).encode())
    proc.stdin.flush()
    listed = 0.0
    for line in proc.stdout:
        message = json.loads(line)
        if message.get("id") == 2:
            listed = time.perf_counter() - start
        elif message.get("id") == 3:
            result = message["result"]["structuredContent"]
            out.append((proc, Timing(listed, time.perf_counter() - start, str(result["status"]))))
            break
    ready.wait()  # every session is open while the memory is measured
    ready.wait()
    proc.stdin.close()
    proc.wait(timeout=120)


COMMANDS = (
    ["search", "what was the first memory?"],
    ["add", "A memory the command line added."],
    ["speakers", "list"],
)


def commands_peak(argv: list[str], env: dict[str, str], count: int) -> list[float]:
    """Run ``count`` command-line commands at once; each one's peak resident memory (MB)."""
    procs = [
        subprocess.Popen([*argv, *COMMANDS[i % len(COMMANDS)]], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        for i in range(count)
    ]  # fmt: skip
    peaks = []
    for proc in procs:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        assert proc.returncode == 0, (proc.args, proc.returncode)
        peaks.append(usage.ru_maxrss / 1024)
    return peaks


def one_case(
    engine: str, n: int, model_cache: str, runtime: Path, commands: int = 0
) -> tuple[list[Timing], float, int, list[float], float]:
    db = tempfile.mkdtemp(prefix="wontopos-sessions-")
    argv = [sys.executable, "-m", "wontopos_mcp", "--db", db, "--model-cache", model_cache, "--engine", engine]
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "PYTHONPATH": str(HERE)}
    out: list[Any] = []
    ready = threading.Barrier(n + 1)
    threads = [threading.Thread(target=session, args=(argv, env, out, ready)) for _ in range(n)]
    try:
        for thread in threads:
            thread.start()
        ready.wait(timeout=600)
        pids = [proc.pid for proc, _ in out] + [e["pid"] for e in engines.running([runtime / "wontopos-mcp"])]
        total = sum(rss_mb(pid) for pid in pids)
        cli = [sys.executable, "-m", "wontopos_mcp", "--db", db, "--model-cache", model_cache, "--engine", engine]
        peaks = commands_peak(cli, env, commands) if commands else []
        total = max(total, sum(rss_mb(pid) for pid in pids)) + sum(peaks)
        shared = sum(pss_mb(pid) for pid in pids) + sum(peaks)
        print(f"  {engine}, {n} session(s){f' and {commands} commands' if commands else ''}: RSS {total:.0f} MB, "
              f"PSS {shared:.0f} MB (the commands at their peak RSS)")  # fmt: skip
        ready.wait()
        for thread in threads:
            thread.join()
    finally:
        engines.stop([runtime / "wontopos-mcp"])
        shutil.rmtree(db, ignore_errors=True)
    return [timing for _, timing in out], total, len(pids), peaks, shared


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--model-cache", default=os.path.expanduser("~/.cache/wontopos-mcp/models"))
    parser.add_argument("--engine", choices=("shared", "inprocess", "both"), default="both")
    parser.add_argument("--commands", type=int, default=0, help="command-line commands run while the sessions are open")
    args = parser.parse_args()
    compileall.compile_dir(str(HERE / "wontopos_mcp"), quiet=1)  # as an install leaves it
    runtime = Path(tempfile.mkdtemp(prefix="wos-bench-"))
    try:
        for engine in ("shared", "inprocess") if args.engine == "both" else (args.engine,):
            memory, proportional = {}, {}
            for n in (1, args.sessions):
                commands = args.commands if n == args.sessions else 0
                timings, total, processes, peaks, shared = one_case(engine, n, args.model_cache, runtime, commands)
                memory[n] = total
                proportional[n] = shared
                if peaks:
                    print(
                        f"{engine}: {len(peaks)} commands at once, peak RSS each "
                        + ", ".join(f"{p:.0f}" for p in peaks)
                        + " MB"
                    )
                listed = sorted(t.listed for t in timings)
                added = sorted(t.added for t in timings)
                print(
                    f"{engine}, {n} session(s): tools/list {listed[0] * 1000:.0f}-{listed[-1] * 1000:.0f} ms, "
                    f"first memory_add {added[0] * 1000:.0f}-{added[-1] * 1000:.0f} ms "
                    f"(answers {sorted({t.status for t in timings})}); RSS of {processes} processes {total:.0f} MB"
                )
            with_commands = f" and {args.commands} commands" if args.commands else ""
            print(
                f"{engine}: RSS {args.sessions} sessions{with_commands} / 1 session = "
                f"{memory[args.sessions] / memory[1]:.2f} (target <= 1.30 shared); PSS "
                f"{proportional[args.sessions] / proportional[1]:.2f}"
            )
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


if __name__ == "__main__":
    main()
