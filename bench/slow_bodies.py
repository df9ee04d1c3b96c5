"""Sixty unfinished 4 MB bodies against the real ``wontopos-mcp --transport http`` process
(issue 30): how much the server grows, whether other calls are answered meanwhile, and
when each connection is hung up.

The bodies being read at once hold at most 64 MiB in all (503 past it), and a body
must arrive within 30 s of its head (408). Target: the server's RSS grows by < 150 MB and
every connection is hung up within the body deadline (+ a second) of its head.

Each client declares ``Content-Length: 4000000``, sends all of it but its last byte with
the right key, and waits. The server's RSS is its ``VmRSS`` (``/proc``, Linux), read once
the model is ready (the baseline), after the bodies are sent, and at the end.

    python bench/slow_bodies.py [--src DIR ...] [--body-timeout-ms 30000] [--clients 60]

``--src`` (repeatable) runs the server from these source trees, one after the other, to
compare two versions (default: the tree this script is in); a tree whose server has no
body deadline is given up on ``--give-up-s`` after the deadline.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = str(Path(__file__).resolve().parent.parent)
KEY = "bench-key-0123456789abcdef"
BODY = 4_000_000


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str, timeout: float = 10.0) -> tuple[int, float]:
    """(status, seconds) of a GET with the key."""
    started = time.monotonic()
    request = urllib.request.Request(url, headers={"X-API-Key": KEY})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            status = answer.status
    except urllib.error.HTTPError as refused:
        status = refused.code
    return status, time.monotonic() - started


def _status(connection: socket.socket) -> str:
    """The status of what the server answered on ``connection`` so far, "" for nothing."""
    connection.setblocking(False)
    try:
        data = connection.recv(65536, socket.MSG_PEEK)
    except (BlockingIOError, OSError):
        data = b""
    finally:
        connection.setblocking(True)
    return data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else ""


def one_run(src: str, args: argparse.Namespace, cache: str) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": src,
        "WONTOPOS_API_KEY": KEY,
        "WONTOPOS_BODY_TIMEOUT_MS": str(args.body_timeout_ms),
    }
    with tempfile.TemporaryDirectory() as db:
        argv = [sys.executable, "-m", "wontopos_mcp", "--transport", "http", "--port", str(port), "--db", db,
                "--model-cache", cache]  # fmt: skip
        proc = subprocess.Popen(argv, env=env, cwd=src, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/healthz", timeout=5) as health:
                    if json.load(health)["model"] == "ready":
                        break
                time.sleep(0.5)
            else:
                raise SystemExit(f"{src}: the server never got ready")
            before = _rss_mb(proc.pid)
            head = (f"POST /api/v1/memory/store HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {KEY}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {BODY}\r\n\r\n").encode()  # fmt: skip
            payload = b"x" * (BODY - 1)
            opened: list[tuple[socket.socket, float]] = []
            started = time.monotonic()
            for _ in range(args.clients):
                connection = socket.create_connection(("127.0.0.1", port))
                opened.append((connection, time.monotonic()))
                with contextlib.suppress(OSError):  # refused and hung up already
                    connection.sendall(head + payload)
            sent_s = time.monotonic() - started
            time.sleep(0.5)  # let the server take in what was sent
            held = _rss_mb(proc.pid)
            health, health_s = _get(f"{url}/healthz")
            listed, listed_s = _get(f"{url}/api/v1/memory/collections")
            answers: dict[str, int] = {}
            for connection, _ in opened:
                status = _status(connection) or "none yet"
                answers[status] = answers.get(status, 0) + 1
            # When each connection is hung up, from its head.
            hung: list[float] = []
            give_up = started + args.body_timeout_ms / 1000 + args.give_up_s
            for connection, at in opened:
                connection.settimeout(max(0.01, give_up - time.monotonic()))
                try:
                    while connection.recv(65536):
                        pass
                    hung.append(time.monotonic() - at)
                except ConnectionResetError:
                    hung.append(time.monotonic() - at)
                except TimeoutError:
                    pass
            after = _rss_mb(proc.pid)
            print(f"{src}")
            print(f"  {args.clients} clients x {BODY} bytes less one, sent in {sent_s:.2f} s")
            print(f"  RSS {before:.0f} MB ready -> {held:.0f} MB holding them (+{held - before:.0f}) "
                  f"-> {after:.0f} MB at the end (+{after - before:.0f})")  # fmt: skip
            print(f"  answered so far after sending: {dict(sorted(answers.items()))}")
            print(f"  meanwhile: /healthz {health} in {health_s * 1000:.0f} ms, "
                  f"GET collections {listed} in {listed_s * 1000:.0f} ms")  # fmt: skip
            if hung:
                print(f"  hung up: {len(hung)}/{len(opened)}, {min(hung):.2f}-{max(hung):.2f} s after their heads "
                      f"(deadline {args.body_timeout_ms / 1000:.1f} s)")  # fmt: skip
            else:
                print(f"  hung up: 0/{len(opened)}")
            if len(hung) < len(opened):
                print(f"  still open {args.give_up_s:.0f} s past the deadline: {len(opened) - len(hung)}")
            for connection, _ in opened:
                connection.close()
        finally:
            proc.terminate()
            proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", action="append", help="a source tree to run the server from (repeatable)")
    parser.add_argument("--body-timeout-ms", type=int, default=30_000)
    parser.add_argument("--clients", type=int, default=60)
    parser.add_argument("--give-up-s", type=float, default=10.0)
    parser.add_argument("--model-cache", default=os.path.join(tempfile.gettempdir(), "wontopos-bench-models"))
    args = parser.parse_args()
    for src in args.src or [HERE]:
        one_run(os.path.abspath(src), args, args.model_cache)


if __name__ == "__main__":
    main()
