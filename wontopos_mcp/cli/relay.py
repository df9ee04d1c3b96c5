"""The stdio server as agent hosts launch it: a relay between stdin/stdout and the shared
engine's socket (stdio sessions share one engine per database).

It moves lines (one JSON-RPC message each) and reads only what it must to keep its
promises, with the standard library only (no ``mcp``, pydantic or LanceDB: spawn ->
``tools/list`` is a fraction of a bare MCP server's):

- stdout carries nothing but the engine's answers (and the relay's own, below).
- It remembers the client's ``initialize`` request and whether ``notifications/initialized``
  followed, and the requests it forwarded that have no answer yet (ids compared as the
  SDK correlates them: ``"7"`` and ``7`` are one; a ``notifications/cancelled`` forgets one).
- When the engine goes (killed, stopped, its database removed), every request in flight
  is answered at once: a ``tools/call`` with a tool result, ``isError: true``, whose
  structured content and text are the error body of a 503 ``unavailable_error`` with
  ``retry_after_ms``; any other request with a JSON-RPC error carrying the same body as
  ``data``. A write in flight may or may not have been applied; every acknowledged one was
  committed first. The result has the shape of the protocol version the request was sent
  under: a stateless (2026-07-28 and later) request names its version in
  ``params._meta``, and its result carries ``resultType``, which those versions require;
  a handshake-era one (the version its ``initialize`` asked for) has none.
- The next message gets a new engine (started when none runs): the relay replays the
  client's ``initialize`` under an id of its own and waits for its answer (which the client
  never sees), replays ``notifications/initialized``, then forwards the message. A
  stateless client (2026-07-28) sent no ``initialize``: the relay greets the new engine
  with ``server/discover`` in the envelope of the client's last request instead, which
  opens the connection in that protocol, and waits for its answer just the same. Either
  way the message goes to an engine that answered: one still going down (a killed
  process's socket accepts for a moment) answers nothing, and the next one is tried.
- At ``--log-level debug`` it logs the method and id of each request it relayed (stderr).
- At the end of stdin it closes its half of the connection; the engine answers what it
  read (as an in-process server does, within its grace), and the relay leaves when the
  engine closes the connection.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

logger = logging.getLogger(__name__)

ENGINE_LOST = -32000
"""The JSON-RPC code of a non-tool request whose engine went before answering it."""

RETRY_AFTER_MS = 1000

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
"""Where a stateless request's ``params._meta`` names its protocol version."""
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The versions reached through ``initialize``, whose results have no ``resultType``."""

_HELLO_WAIT = 60.0
_ATTEMPTS = 3


def _unavailable() -> dict[str, Any]:
    return {
        "type": "error",
        "status": 503,
        "error": {
            "type": "unavailable_error",
            "message": "the memory engine stopped before answering this call; a write in it may or may not "
            "have been stored (check before repeating it); retry after retry_after_ms, the next call "
            "starts a new engine",
            "retry_after_ms": RETRY_AFTER_MS,
        },
    }


def lost_answer(request_id: Any, method: str, version: str | None = None) -> bytes:
    """The answer to a request whose engine went: the 503 error body in the shape ``method``
    takes under protocol ``version`` (None: a handshake-era session)."""
    body = _unavailable()
    if method == "tools/call":
        text = json.dumps(body, ensure_ascii=False)
        content = [{"type": "text", "text": text}]
        result: dict[str, Any] = {"content": content, "structuredContent": body, "isError": True}
        if version is not None and version not in HANDSHAKE_VERSIONS:
            result["resultType"] = "complete"
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": result}
    else:
        error = {"code": ENGINE_LOST, "message": body["error"]["message"], "data": body}
        answer = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return json.dumps(answer, ensure_ascii=False).encode() + b"\n"


def _key(request_id: Any) -> Any:
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            return request_id
    return request_id


def _parsed(line: bytes) -> dict[str, Any] | None:
    if not line.lstrip().startswith(b"{"):
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # the engine answers what it cannot parse
        return None
    return value if isinstance(value, dict) else None


def _version(message: dict[str, Any] | None) -> str | None:
    """The protocol version a stateless request names in ``params._meta``, if any."""
    params = message.get("params") if message is not None else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(VERSION_KEY) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def _request_id(message: dict[str, Any]) -> Any:
    request_id = message.get("id")
    valid = isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool))
    return request_id if valid else None


class Unavailable(Exception):
    """No engine could be reached or started; the message says why."""


class Relay:
    """stdin <-> the engine, answering in its stead when it goes.

    ``connect`` returns a connected socket to a running engine (starting one when none
    runs) or raises :class:`Unavailable`; ``on_lost`` is called once the requests an
    engine left are answered (it may end the process: an engine that stopped for good).
    """

    def __init__(
        self,
        connect: Callable[[], socket.socket],
        stdin: IO[bytes],
        stdout: IO[bytes],
        on_lost: Callable[[], None] = lambda: None,
    ) -> None:
        self._connect = connect
        self._on_lost = on_lost
        self._stdin = stdin
        self._stdout = stdout
        self._state = threading.RLock()  # the replay's send may find the engine gone
        self._out = threading.Lock()
        self._sock: socket.socket | None = None
        self._reader: threading.Thread | None = None
        self._pending: dict[Any, tuple[Any, str, str | None]] = {}
        self._hello: dict[str, Any] | None = None
        self._initialized = False
        self._envelope: dict[str, Any] | None = None  # a stateless client's last ``params._meta``
        self._replays = 0
        self._replay_id: str | None = None
        # The connection whose greeting is awaited: only its reader ends the wait (the
        # reader of the engine that went may still be leaving while the next is greeted).
        self._replay_sock: socket.socket | None = None
        self._replayed = threading.Event()
        self._replay_answered = False
        self._ending = False

    def run(self, first: socket.socket) -> int:
        """Relay until stdin ends and the engine has answered what it read."""
        self._attach(first)
        for line in self._stdin:
            if line.strip():
                self._forward(line if line.endswith(b"\n") else line + b"\n")
        with self._state:
            sock, reader = self._sock, self._reader
            self._ending = True  # the engine closing the connection now is the end, not a loss
        if sock is not None and reader is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            reader.join()
        return 0

    def _forward(self, line: bytes) -> None:
        message = _parsed(line)
        method = message.get("method") if message is not None else None
        request_id = _request_id(message) if message is not None and isinstance(method, str) else None
        with self._state:
            if method == "initialize":
                self._hello = message
            elif method == "notifications/initialized":
                self._initialized = True
            elif method == "notifications/cancelled" and message is not None:
                params = message.get("params")
                cancelled = _request_id({"id": params.get("requestId")}) if isinstance(params, dict) else None
                if cancelled is not None:
                    self._pending.pop(_key(cancelled), None)
        version = _version(message)
        if version is not None and version not in HANDSHAKE_VERSIONS:
            with self._state:
                self._envelope = message["params"]["_meta"]  # type: ignore[index]  # _version found it there
        self._deliver(line, method, request_id, version, again=True)

    def _deliver(self, line: bytes, method: Any, request_id: Any, version: str | None, *, again: bool) -> None:
        """Send ``line`` to the engine, starting one first when there is none; a line the
        engine was gone before it could read goes to the next engine (``again``, once)."""
        with self._state:
            sock = self._sock
            if sock is None:
                try:
                    sock = self._reconnect(replay=method != "initialize")
                except Unavailable as exc:
                    print(f"wontopos-mcp: {exc}", file=sys.stderr, flush=True)
                    sock = None
                if sock is None or sock is not self._sock:  # none could start, or it went in the replay
                    if request_id is not None:
                        self._write(lost_answer(request_id, str(method), version))
                    return
            if request_id is not None:
                self._pending[_key(request_id)] = (request_id, str(method), version)
        try:
            sock.sendall(line)
        except OSError:  # closed before a byte of it was read: no engine saw it
            if again:
                with self._state:
                    if request_id is not None:
                        self._pending.pop(_key(request_id), None)
            self._lost(sock)
            if again:
                self._deliver(line, method, request_id, version, again=False)
            return
        if request_id is not None:
            logger.debug("relayed %s id=%r", method, request_id)

    def _send(self, sock: socket.socket, line: bytes) -> None:
        try:
            sock.sendall(line)
        except OSError:
            self._lost(sock)

    def _reconnect(self, *, replay: bool) -> socket.socket:
        """A new engine (called with the state lock held), greeted as the client greeted the
        last. A connection that ends before the greeting is answered (an engine still going
        down accepts for a moment) is tried again, :data:`_ATTEMPTS` times in all."""
        for _ in range(_ATTEMPTS):
            sock = self._connect()
            self._attach(sock)
            greeting = self._greeting()
            if not replay or greeting is None:
                return sock
            self._replays += 1
            self._replay_id = f"wontopos-relay-replay-{self._replays}"
            self._replay_answered = False
            self._replay_sock = sock
            self._replayed.clear()
            self._send(sock, json.dumps({**greeting, "id": self._replay_id}).encode() + b"\n")
            self._replayed.wait(_HELLO_WAIT)
            if self._replay_answered:
                if self._hello is not None and self._initialized:
                    self._send(sock, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
                return sock
            self._sock = None  # its reader, still to leave, finds nothing of its own to answer
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # close() alone waits for its reader's file
            sock.close()
        raise Unavailable(f"the shared engine closed {_ATTEMPTS} new connections before answering")

    def _greeting(self) -> dict[str, Any] | None:
        """What a new engine is greeted with before the client's next message: the client's
        ``initialize``, or for a stateless client a ``server/discover`` in its envelope."""
        if self._hello is not None:
            return self._hello
        if self._envelope is not None:
            return {"jsonrpc": "2.0", "method": "server/discover", "params": {"_meta": self._envelope}}
        return None

    def _attach(self, sock: socket.socket) -> None:
        self._sock = sock
        self._reader = threading.Thread(target=self._read, args=(sock,), name="wontopos-relay-engine", daemon=True)
        self._reader.start()

    def _read(self, sock: socket.socket) -> None:
        try:
            with sock.makefile("rb") as answers:
                for line in answers:
                    message = _parsed(line) if b'"id"' in line else None
                    request_id = _request_id(message) if message is not None and "method" not in message else None
                    if request_id is not None and request_id == self._replay_id:  # sent to this engine alone
                        self._replay_answered = True
                        self._replayed.set()
                        continue
                    if request_id is not None:
                        with self._state:
                            self._pending.pop(_key(request_id), None)
                    self._write(line)
        except OSError:
            pass
        if self._replay_sock is sock:
            self._replayed.set()  # a replay waiting for this engine waits no longer
        self._lost(sock)

    def _lost(self, sock: socket.socket) -> None:
        """The engine behind ``sock`` went: answer what it left, forget it."""
        with self._state:
            if self._sock is not sock:
                return
            self._sock = None
            lost = list(self._pending.values())
            self._pending.clear()
        if self._replay_sock is sock:
            self._replayed.set()
        sock.close()
        logger.info("the shared engine went; %d request(s) in flight answered 503", len(lost))
        for request_id, method, version in lost:
            self._write(lost_answer(request_id, method, version))
        if lost or not self._ending:
            self._on_lost()

    def _write(self, line: bytes) -> None:
        with self._out:
            self._stdout.write(line)
            self._stdout.flush()
