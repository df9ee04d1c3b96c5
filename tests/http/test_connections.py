"""Connections as an attacker on the same machine holds them, over raw sockets to a real
uvicorn (``http.server``): a request head that never completes, a body that is late, bodies
that would fill the memory, a route that takes no body, and what the HTTP parser answers
itself. The server's deadlines are lowered (half a second for a head, one for a body) so
each path is reached in seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support import KEY, LiveServer, error_body, served

HEAD_DEADLINE_MS = 500
BODY_DEADLINE_MS = 1000
SLACK_S = 1.5  # what a loaded 2-core machine may add to a deadline
FOUR_MB = 4_000_000  # under the default 4 MiB body limit; 16 of them fill the 64 MiB budget


@pytest.fixture(scope="module")
def hurried(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[LiveServer]:
    """A server that needs the key, with its head and body deadlines lowered; the body
    limit and the budget of bodies being read at once are the defaults (4 MiB, 64 MiB)."""
    with served(tmp_path_factory.mktemp("hurried"), embedder, api_key=KEY, header_timeout_ms=HEAD_DEADLINE_MS,
                body_timeout_ms=BODY_DEADLINE_MS) as live:  # fmt: skip
        yield live


def _head(method: str, path: str, length: int | None = None, *, key: str | None = KEY, expect: bool = False) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [] if key is None else [f"X-API-Key: {key}"]
    lines += [] if length is None else [f"Content-Length: {length}"]
    lines += ["Expect: 100-continue"] if expect else []
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class _Answer:
    """One HTTP answer read off a raw socket: status, headers (lower-case names), body."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def error(self, status: int, type: str, **fields: Any) -> dict[str, Any]:
        assert self.status == status, (self.status, self.body)
        assert self.headers["content-type"].startswith("application/json")
        return error_body(json.loads(self.body), status, type, **fields)


def _read_answer(connection: socket.socket, timeout: float = 10.0) -> _Answer:
    """The next answer on ``connection`` (a ``100 Continue`` is an answer of its own)."""
    connection.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        assert chunk, f"the connection closed before an answer: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (h.partition(":") for h in header_lines)}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = connection.recv(65536)
        assert chunk, "the connection closed inside an answer"
        rest += chunk
    return _Answer(int(status_line.split()[1]), headers, rest[:length])


def _hung_up_by(connection: socket.socket, due: float) -> bool:
    """Whether the server closes ``connection`` before ``due`` (``time.monotonic``),
    reading (and dropping) whatever it still sends."""
    while (left := due - time.monotonic()) > 0:
        connection.settimeout(left)
        try:
            if connection.recv(65536) == b"":
                return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    return False


def _rss_bytes() -> int:
    """This process's resident memory (the server runs in it, in a thread); Linux."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# --- a request head that never completes -----------------------------------------------------------


def _closed_after(connection: socket.socket, *, trickle: bool = False) -> float:
    """Seconds until the server closes ``connection``; with ``trickle`` a header line goes
    out every 0.1 s meanwhile (slowloris), so the connection is never idle."""
    started = time.monotonic()
    connection.settimeout(0.1)
    if trickle:
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    for line in range(100):
        try:
            if connection.recv(1024) == b"":
                return time.monotonic() - started
        except TimeoutError:
            pass
        except ConnectionResetError:
            return time.monotonic() - started
        if trickle:
            try:
                connection.sendall(f"X-Slow-{line}: y\r\n".encode())
            except OSError:  # closed meanwhile
                return time.monotonic() - started
    raise AssertionError("the server kept the connection open for 10 s")


@pytest.mark.slow
def test_a_connection_that_sends_no_whole_request_in_time_is_closed(hurried: LiveServer) -> None:
    bound = HEAD_DEADLINE_MS / 1000
    for trickle in (False, True):
        with socket.create_connection(("127.0.0.1", hurried.port)) as connection:
            waited = _closed_after(connection, trickle=trickle)
            assert bound - 0.05 <= waited < bound + 2, (trickle, waited)


@pytest.mark.slow
def test_requests_that_arrive_in_time_are_answered_and_rearm_the_deadline(hurried: LiveServer) -> None:
    with socket.create_connection(("127.0.0.1", hurried.port)) as connection:
        reader = connection.makefile("rb")
        for _ in range(3):  # three requests on one connection, 0.3 s apart: each within its bound
            connection.sendall(b"GET /healthz HTTP/1.1\r\n")
            time.sleep(0.2)  # headers in two pieces
            connection.sendall(b"Host: 127.0.0.1\r\n\r\n")
            assert reader.readline().startswith(b"HTTP/1.1 200"), "not answered"
            length = 0
            while (header := reader.readline()) != b"\r\n":
                if header.lower().startswith(b"content-length:"):
                    length = int(header.split(b":")[1])
            assert json.loads(reader.read(length))["status"] == "ok"
            time.sleep(0.1)
        reader.close()


# --- bodies ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_body_not_in_within_its_deadline_is_408_and_the_connection_is_closed(hurried: LiveServer) -> None:
    with socket.create_connection(("127.0.0.1", hurried.port)) as connection:
        connection.sendall(_head("POST", "/api/v1/memory/store", 100) + b'{"content": "half a')
        started = time.monotonic()
        late = _read_answer(connection, timeout=BODY_DEADLINE_MS / 1000 + SLACK_S)
        waited = time.monotonic() - started
        late.error(408, "invalid_request_error", timeout_ms=BODY_DEADLINE_MS)
        assert waited >= BODY_DEADLINE_MS / 1000 - 0.1, waited
        assert late.headers["x-content-type-options"] == "nosniff"
        assert _hung_up_by(connection, time.monotonic() + SLACK_S)
    with httpx.Client(base_url=hurried.url, headers={"X-API-Key": KEY}, timeout=30) as client:
        listed = client.post("/api/v1/memory/list", json={"limit": 100}).json()["memories"]
        assert "half a" not in {m["content"] for m in listed}  # nothing was stored


@pytest.mark.slow
def test_an_answer_that_needs_no_body_goes_out_at_once_and_the_late_body_is_hung_up(hurried: LiveServer) -> None:
    """A route that takes no body answers without reading it; a keyed route refuses a
    missing or wrong key before it asks for a byte (no ``100 Continue``). Either way the
    connection is closed once the body is late, however it trickles meanwhile."""
    cases = [
        (_head("GET", "/healthz", FOUR_MB), 200),
        (_head("GET", "/api/v1/memory/collections", FOUR_MB), 200),
        (_head("POST", "/healthz", FOUR_MB), 405),
        (_head("POST", "/api/v1/memory/store", FOUR_MB, key=None, expect=True), 401),
        (_head("POST", "/api/v1/memory/store", FOUR_MB, key="a-wrong-key-of-some-length", expect=True), 401),
    ]
    opened: list[tuple[socket.socket, float]] = []
    try:
        for head, status in cases:
            connection = socket.create_connection(("127.0.0.1", hurried.port))
            opened.append((connection, time.monotonic()))
            connection.sendall(head + (b"" if status == 401 else b"x" * 1000))
            answer = _read_answer(connection, timeout=SLACK_S)  # without waiting for the body
            assert answer.status == status, (head, answer.body)
            connection.sendall(b"x" * 1000)  # more of it changes nothing: the deadline runs from the head
        for connection, sent in opened:
            assert _hung_up_by(connection, sent + BODY_DEADLINE_MS / 1000 + SLACK_S)
    finally:
        for connection, _ in opened:
            connection.close()


@pytest.mark.slow
def test_sixty_unfinished_4_mb_bodies_hold_the_budget_alone_and_are_all_hung_up_in_time(hurried: LiveServer) -> None:
    """Sixty clients each declare a 4 MB body and send all of it but its last byte.
    Sixteen fill the 64 MiB budget of bodies being read at once; the others are
    503 before a byte is read (and send theirs anyway: uvicorn drops it). Meanwhile the
    server grows by far less than the 240 MB sent, other calls are answered, and every
    connection is hung up within the body deadline of its head."""
    payload = b"x" * (FOUR_MB - 1)
    before = _rss_bytes()
    heads: list[tuple[socket.socket, float]] = []
    connections: list[tuple[socket.socket, float, int]] = []
    try:
        for _ in range(60):  # every head first, so all sixty reach the server within its deadline
            connection = socket.create_connection(("127.0.0.1", hurried.port))
            connection.sendall(_head("POST", "/api/v1/memory/store", FOUR_MB, expect=True))
            heads.append((connection, time.monotonic()))
        for connection, sent in heads:
            first = _read_answer(connection)  # 100 Continue once the budget holds the body
            connections.append((connection, sent, first.status))
            if first.status == 503:
                error = first.error(503, "unavailable_error", retry_after_ms=1000)
                assert first.headers["retry-after"] == "1"
                assert "bytes of request bodies" in error["message"]
        statuses = sorted(status for _, _, status in connections)
        assert statuses == [100] * 16 + [503] * 44
        unsent: set[int] = set()  # held ones whose deadline came while they were still sending
        for index, (connection, _, status) in enumerate(connections):  # the held ones first
            if status == 100:
                try:
                    connection.sendall(payload)
                except OSError:  # hung up under it: a machine loaded past the deadline
                    unsent.add(index)
        grown = _rss_bytes() - before
        for connection, _, status in connections:
            if status == 503:
                with contextlib.suppress(OSError):  # dropped as it comes, or hung up already
                    connection.sendall(payload)
        grown = max(grown, _rss_bytes() - before)
        with httpx.Client(base_url=hurried.url, headers={"X-API-Key": KEY}, timeout=30) as client:
            assert client.get("/healthz").status_code == 200  # other calls are answered meanwhile
            assert client.post("/api/v1/memory/list", json={"limit": 5}).status_code == 200  # a small body fits
        assert grown < 150_000_000, f"the server grew by {grown / 1e6:.0f} MB holding 60 unfinished bodies"
        assert len(unsent) < 16, "every held body was hung up before it was sent"
        for index, (connection, sent, status) in enumerate(connections):
            due = sent + BODY_DEADLINE_MS / 1000 + SLACK_S
            if status == 100 and index not in unsent:
                _read_answer(connection, timeout=due - time.monotonic()).error(408, "invalid_request_error")
            assert _hung_up_by(connection, due), status
    finally:
        for connection, _ in heads:
            connection.close()


# --- what the HTTP parser answers itself ----------------------------------------------------------


@pytest.mark.parametrize(
    "request_bytes",
    [b"NOT HTTP AT ALL\r\n\r\n", b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"y" * 20_000,
     b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n"],
    ids=["garbage", "head-too-large", "bad-length"],  # h11 holds 16 KiB of an unfinished head
)  # fmt: skip
def test_the_parsers_own_400_carries_the_headers_of_every_answer_and_the_error_body(
    hurried: LiveServer, request_bytes: bytes
) -> None:
    with socket.create_connection(("127.0.0.1", hurried.port)) as connection:
        connection.sendall(request_bytes)
        refused = _read_answer(connection)
        refused.error(400, "invalid_request_error")
        assert refused.headers["x-content-type-options"] == "nosniff"
        assert refused.headers["referrer-policy"] == "no-referrer"
        assert refused.headers["cache-control"] == "no-store"
        assert _hung_up_by(connection, time.monotonic() + SLACK_S)
