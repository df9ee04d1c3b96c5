"""The relay's own promises, with the engine played by the test over a socket pair: what a
host sees when its engine goes (every request still owed an answer gets a 503
``unavailable_error`` in its own shape), and how the next engine is greeted.

The processes themselves (a real engine killed mid-write) are in
``tests/mcp/test_shared_engine.py``; here every step is in the test's hands, so the
answers the relay writes in the engine's stead are checked one by one, in milliseconds.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from support import error_body

from wontopos_mcp.cli.relay import ENGINE_LOST, Relay

WAIT = 10.0

HELLO = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class Engine:
    """The test's end of one relay connection."""

    def __init__(self, sock: socket.socket) -> None:
        sock.settimeout(WAIT)
        self.sock = sock
        self.lines = sock.makefile("rb")

    def receive(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.lines.readline())
        return message

    def answer(self, request_id: Any, result: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n")

    def go(self) -> None:
        self.lines.close()
        self.sock.close()


class Host:
    """The relay as a host runs it: its stdin and stdout are pipes the test holds."""

    def __init__(self) -> None:
        self.engines: list[Engine] = []
        self.connected: queue.Queue[Engine] = queue.Queue()
        first = self._connect()
        stdin_read, self._stdin = os.pipe()
        self._stdout, stdout_write = os.pipe()
        self.stdout = os.fdopen(self._stdout, "rb")
        self._relay_ends = (os.fdopen(stdin_read, "rb"), os.fdopen(stdout_write, "wb"))
        relay = Relay(self._connect, *self._relay_ends, on_lost=lambda: None)
        self.thread = threading.Thread(target=relay.run, args=(first,), daemon=True)
        self.thread.start()

    def _connect(self) -> socket.socket:
        ours, theirs = socket.socketpair()
        self.engines.append(Engine(theirs))
        self.connected.put(self.engines[-1])
        return ours

    def send(self, message: dict[str, Any]) -> None:
        os.write(self._stdin, json.dumps(message).encode() + b"\n")

    def receive(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.stdout.readline())
        return message

    def close(self) -> None:
        os.close(self._stdin)
        self.thread.join(WAIT)
        for end in (*self._relay_ends, self.stdout):
            end.close()


@pytest.fixture
def host() -> Iterator[Host]:
    opened = Host()
    yield opened
    for engine in opened.engines:
        engine.go()
    opened.close()


def test_requests_in_flight_when_the_engine_goes_are_answered_503_in_their_own_shape(host: Host) -> None:
    engine = host.connected.get(timeout=WAIT)
    host.send(HELLO)
    assert engine.receive()["id"] == 1
    engine.answer(1, {"serverInfo": {"name": "engine"}})
    assert host.receive()["result"]["serverInfo"]["name"] == "engine"
    host.send(INITIALIZED)
    host.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    host.send({"jsonrpc": "2.0", "id": "3", "method": "tools/call", "params": {"name": "memory_add"}})
    host.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "memory_list"}})
    host.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}})
    assert [engine.receive().get("id") for _ in range(5)] == [None, 2, "3", 4, None]
    engine.go()

    listed, added = host.receive(), host.receive()  # 4 was cancelled: no answer is owed
    assert listed["id"] == 2
    assert listed["error"]["code"] == ENGINE_LOST
    error_body(listed["error"]["data"], 503, "unavailable_error")
    assert added["id"] == "3"
    assert added["result"]["isError"] is True
    error_body(added["result"]["structuredContent"], 503, "unavailable_error")
    assert added["result"]["structuredContent"]["error"]["retry_after_ms"] > 0
    assert json.loads(added["result"]["content"][0]["text"]) == added["result"]["structuredContent"]


def test_the_next_message_goes_to_a_new_engine_greeted_as_the_client_greeted_the_last(host: Host) -> None:
    first = host.connected.get(timeout=WAIT)
    host.send(HELLO)
    first.answer(first.receive()["id"], {"serverInfo": {"name": "first"}})
    assert host.receive()["id"] == 1
    host.send(INITIALIZED)
    assert first.receive() == INITIALIZED
    first.go()

    host.send({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
    second = host.connected.get(timeout=WAIT)  # connected at the message's arrival
    replayed = second.receive()
    assert replayed["method"] == "initialize"
    assert replayed["params"] == HELLO["params"]
    assert replayed["id"] != 1
    second.answer(replayed["id"], {"serverInfo": {"name": "second"}})  # the host never sees it
    assert second.receive() == INITIALIZED
    assert second.receive()["id"] == 5
    second.answer(5, {"tools": []})
    assert host.receive() == {"jsonrpc": "2.0", "id": 5, "result": {"tools": []}}
