"""The MCP transports, wrapped so that every message gets an answer.

The SDK's transports drop what its parser refuses (see :mod:`jsonrpc` for why and
where); each face here runs :func:`jsonrpc.decode` on the raw message first and answers
a refusal itself, handing the SDK only what it would have accepted unchanged:

- stdio (:func:`run_stdio`): the SDK's ``stdio_server`` still owns stdout (fd 1 points
  at stderr while serving, so nothing but protocol reaches the wire) and writes every
  answer; stdin is read here, as bytes, one line per message. Blank lines are skipped.
  At the end of stdin every request already read is answered before the process exits
  (:class:`Unanswered`), for at most :data:`EOF_GRACE` seconds.
- the shared engine's local socket (:func:`serve_engine`, :func:`serve_connection`): each
  connection is one session framed as stdio is, with the same end-of-input wait; the
  engine leaves after its idle time without a connection, or when told it is gone.
- Streamable HTTP (:func:`answering_routes` for ``/mcp``): a refused POST body is
  answered at once with its JSON-RPC error and the HTTP status the SDK gives that code
  (``mcp.shared.inbound.ERROR_CODE_HTTP_STATUS``: 400), or, for a ``tools/call`` with
  a lone surrogate, 200 with the tool's error result; the SDK sees every other request.
- SSE (:func:`sse_routes`): answers travel on the event stream, so a refused body is
  passed on to the SDK as a notification only this process can write (it carries a
  per-app secret), which the SDK checks against the session like any message and
  answers 202; the connection's read stream turns it back into the answers before the
  server sees it. A 202 rather than the SDK's 400 on purpose: the SDK's SSE client
  stops sending (``mcp/client/sse.py`` ``post_writer``) on any non-2xx status.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import secrets
import socket
import sys
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from anyio.abc import ByteReceiveStream, ByteStream, SocketListener
from mcp.server.sse import SseServerTransport
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp.shared.message import SessionMessage
from mcp.types import (
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .jsonrpc import Decoded, Refusal, ToolRefusal, decode
from .results import error_result

if TYPE_CHECKING:
    from .server import WontoposMCPServer

__all__ = [
    "EOF_GRACE",
    "Unanswered",
    "answering_routes",
    "run_stdio",
    "serve_connection",
    "serve_engine",
    "sse_routes",
]

logger = logging.getLogger(__name__)

Answer = JSONRPCError | JSONRPCResponse
Answerer = Callable[[Refusal | ToolRefusal, Scope, Receive, Send], Awaitable[None]]
"""What answers a refused POST: over HTTP at once, over SSE on the event stream."""


def _answers(refused: Refusal | ToolRefusal, *, stream: bool) -> list[Answer]:
    """What a refused message is answered with: on a stream, one error per request id of a
    batch; over one HTTP response, one in all."""
    if isinstance(refused, ToolRefusal):
        result = error_result(refused.error).model_dump(by_alias=True, mode="json", exclude_none=True)
        return [JSONRPCResponse(jsonrpc="2.0", id=refused.id, result=result)]
    answers: list[Answer] = [*refused.answers()] if stream else [refused.answer()]
    return answers


def _refused(decoded: Decoded) -> Refusal | ToolRefusal | None:
    if isinstance(decoded, SessionMessage):
        return None
    logger.warning("answered a message the MCP SDK would have dropped: %s", _describe(decoded))
    return decoded


def _describe(refused: Refusal | ToolRefusal) -> str:
    if isinstance(refused, ToolRefusal):
        return f"tools/call id={refused.id!r}: {refused.error.message}"
    return f"{refused.code} ids={list(refused.ids)}: {refused.message}"


def _wire(answer: Answer) -> dict[str, Any]:
    body = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    # JSON-RPC wants `id: null` on the wire when the id is unknown; exclude_none drops it.
    return {"jsonrpc": body.pop("jsonrpc"), "id": answer.id, **{k: v for k, v in body.items() if k != "id"}}


# --- stdio ---------------------------------------------------------------------------------


EOF_GRACE = 60.0
"""The most seconds the requests read before stdin ended may take to be answered; past
it the SDK cancels what is left, so a hung call cannot keep the process alive."""


def run_stdio(server: WontoposMCPServer) -> None:
    """Serve MCP on stdin/stdout until stdin ends and every request read is answered."""
    anyio.run(_serve_stdio, server)


class Unanswered:
    """The requests handed to the SDK that it has not answered yet (public: its bookkeeping
    is tested alone, without a process).

    Why: when its read stream ends, the SDK's dispatcher (``JSONRPCDispatcher.run``)
    cancels every handler still running, so a client that writes its requests and closes
    stdin (a script, ``echo ... | wontopos-mcp``) lost every answer but the inline
    ``initialize``, though a cancelled write may already have been applied. So the read
    stream handed to the SDK stays open past stdin's end until each request read has had
    its answer written (seen on the way to stdout, which the SDK's writer then flushes
    before ``stdio_server`` exits), or :data:`EOF_GRACE` seconds have passed. This waits
    on the requests themselves rather than patching the SDK; a request the client
    cancelled (``notifications/cancelled``) gets no answer, so it is not waited for.
    Ids are compared as the SDK correlates them (``"7"`` and ``7`` are one).
    """

    def __init__(self) -> None:
        self._ids: Counter[RequestId] = Counter()
        self._settled = anyio.Event()
        self._settled.set()

    def read(self, message: JSONRPCMessage) -> None:
        """Note a message on its way to the SDK."""
        if isinstance(message, JSONRPCRequest):
            self._ids[coerce_request_id(message.id)] += 1
            if self._settled.is_set():
                self._settled = anyio.Event()
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            cancelled = (message.params or {}).get("requestId")
            if isinstance(cancelled, (int, str)):
                self._settle(cancelled, all_of_them=True)

    def written(self, message: JSONRPCMessage) -> None:
        """Note a message the SDK wrote: an answer settles its request."""
        if isinstance(message, (JSONRPCResponse, JSONRPCError)) and message.id is not None:
            self._settle(message.id)

    def _settle(self, request_id: RequestId, *, all_of_them: bool = False) -> None:
        key = coerce_request_id(request_id)
        if key not in self._ids:
            return
        if all_of_them or self._ids[key] == 1:
            del self._ids[key]
        else:
            self._ids[key] -= 1
        if not self._ids:
            self._settled.set()

    async def wait(self, grace: float) -> None:
        """Until every request read is answered, or ``grace`` seconds have passed."""
        with anyio.move_on_after(grace):
            await self._settled.wait()
        if self._ids:
            logger.warning(
                "stdin ended; %d request(s) still unanswered after %.0f s are cancelled: ids %s",
                self._ids.total(),
                grace,
                sorted(map(str, self._ids)),
            )


_W = TypeVar("_W", bound="_Wrapped")


class _Wrapped:
    """A stream around another, closed with it (as ``async with`` or ``aclose``)."""

    _inner: Any

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self: _W) -> _W:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _WatchedWrites(_Wrapped):
    """The SDK's write stream, telling :class:`Unanswered` what it has written."""

    def __init__(self, inner: Any, unanswered: Unanswered) -> None:
        self._inner = inner
        self._unanswered = unanswered

    async def send(self, item: SessionMessage) -> None:
        await self._inner.send(item)
        self._unanswered.written(item.message)


async def _serve_stdio(server: WontoposMCPServer) -> None:
    # Given a stdin, the SDK claims only fd 1; its own reader gets an empty file and ends.
    async with stdio_server(stdin=anyio.wrap_file(io.StringIO())) as (unused, write_stream):
        await unused.aclose()
        await _serve_lines(server, anyio.wrap_file(sys.stdin.buffer), write_stream)


async def _serve_lines(server: WontoposMCPServer, lines: AsyncIterable[bytes], write_stream: Any) -> None:
    """One session over newline-delimited messages: ``lines`` in, ``write_stream`` out;
    at the end of ``lines`` every request read is answered before the session ends."""
    inbox, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    unanswered = Unanswered()

    async def read_lines() -> None:
        async with inbox:
            async for line in lines:
                line = line.strip()  # a cut-off line's error names its text, not the newline
                if not line:
                    continue
                decoded = decode(line)
                refused = _refused(decoded)
                if refused is None:
                    assert isinstance(decoded, SessionMessage)
                    unanswered.read(decoded.message)
                    await inbox.send(decoded)
                    continue
                for answer in _answers(refused, stream=True):
                    await write_stream.send(SessionMessage(answer))
            await unanswered.wait(EOF_GRACE)  # the input ended: answer what was read, then close

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_lines)
        await server.run_streams(read_stream, _WatchedWrites(write_stream, unanswered))
        tg.cancel_scope.cancel()


# --- a local socket (the shared engine) ------------------------------------------------------


async def _socket_lines(stream: ByteReceiveStream) -> AsyncIterator[bytes]:
    pending = b""
    while True:
        try:
            chunk = await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            break
        pending += chunk
        *whole, pending = pending.split(b"\n")
        for line in whole:
            yield line
    if pending:
        yield pending


async def serve_connection(
    server: WontoposMCPServer, stream: ByteStream, lines: AsyncIterable[bytes] | None = None
) -> None:
    """One MCP session over a connection to the shared engine, framed as stdio is (one
    message a line, every message answered), until the peer ends its half and every
    request it sent is answered. ``lines``: the connection's lines, when some were read
    already (the first, to tell MCP from another face's protocol)."""
    write_stream, outbox = anyio.create_memory_object_stream[SessionMessage](0)

    async def write_lines() -> None:
        async with outbox:
            async for item in outbox:
                line = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                # the relay went: what is left has no one to read it
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.send(line.encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(write_lines)
        async with write_stream:
            await _serve_lines(server, _socket_lines(stream) if lines is None else lines, write_stream)


async def _again(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``rest`` with ``first`` put back in front of it."""
    yield first
    async for line in rest:
        yield line


SendLine = Callable[[bytes], Coroutine[Any, Any, None]]
LineFace = tuple[Callable[[bytes], bool], Callable[[AsyncIterator[bytes], SendLine], Awaitable[None]]]
"""Another protocol an engine serves on its socket: whether a connection's first line opens
it, and what serves such a connection (its lines after the first, and how to send one)."""


class Clients:
    """How many connections an engine serves, and since when it has had none."""

    def __init__(self, on_change: Callable[[int], None]) -> None:
        self.count = 0
        self.idle_since = anyio.current_time()
        self._on_change = on_change

    def joined(self) -> None:
        self.count += 1
        self._on_change(self.count)

    def left(self) -> None:
        self.count -= 1
        if not self.count:
            self.idle_since = anyio.current_time()
        self._on_change(self.count)


async def serve_engine(
    server: WontoposMCPServer,
    listener: socket.socket,
    *,
    idle: float,
    alive: Callable[[], bool],
    on_clients: Callable[[int], None],
    poll: float = 0.5,
    also: LineFace | None = None,
) -> None:
    """Serve every connection to ``listener`` as its own session of ``server`` until it
    has had no client for ``idle`` seconds or ``alive()`` (asked every ``poll`` seconds)
    says false: its database or its socket is gone. A connection whose first line ``also``
    claims (the command line's own protocol) is served by ``also`` instead."""
    accepting = await SocketListener.from_socket(listener)
    clients = Clients(on_clients)

    async def serve_one(stream: ByteStream) -> None:
        clients.joined()
        try:
            async with stream:
                if also is None:
                    await serve_connection(server, stream)
                    return
                lines = _socket_lines(stream)
                first = await anext(lines, None)
                if first is None:
                    return
                claims, serve_other = also
                if claims(first):
                    await serve_other(lines, stream.send)
                else:
                    await serve_connection(server, stream, _again(first, lines))
        except Exception:
            logger.warning("a shared-engine connection ended with an error", exc_info=True)
        finally:
            clients.left()

    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            while alive() and (clients.count or anyio.current_time() - clients.idle_since < idle):
                await anyio.sleep(poll)
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        await accepting.serve(serve_one, task_group=tg)


# --- Streamable HTTP -----------------------------------------------------------------------


async def _body(receive: Receive) -> tuple[bytes, list[Message]]:
    """The whole request body, and what came after it (a disconnect) for the next app."""
    chunks: list[bytes] = []
    pending: list[Message] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            pending.append(message)  # a disconnect: the next app sees it in turn
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks), pending


def _replaying(body: bytes, receive: Receive, pending: list[Message]) -> Receive:
    """A ``receive`` that hands ``body`` (and ``pending``) to the next app, then listens on."""
    queued: list[Message] = [{"type": "http.request", "body": body, "more_body": False}, *pending]

    async def replay() -> Message:
        return queued.pop(0) if queued else await receive()

    return replay


class _CheckedPosts:
    """An SDK app whose POSTed messages are decoded first: what it would accept reaches it
    unchanged, a refused one goes to ``answer`` (with the body still readable)."""

    def __init__(self, app: ASGIApp, answer: Answerer) -> None:
        self.app = app
        self.answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, pending = await _body(receive)
        replay = _replaying(body, receive, pending)
        refused = _refused(decode(body))
        if refused is None:
            await self.app(scope, replay, send)
        else:
            await self.answer(refused, scope, replay, send)


async def _answer_over_http(refused: Refusal | ToolRefusal, scope: Scope, receive: Receive, send: Send) -> None:
    """One POST, one answer: the JSON-RPC error with the status the SDK gives its code, or
    the tool's error result with 200."""
    (answer,) = _answers(refused, stream=False)
    status = ERROR_CODE_HTTP_STATUS.get(answer.error.code, 400) if isinstance(answer, JSONRPCError) else 200
    await Response(_json(_wire(answer)), status_code=status, media_type="application/json")(scope, receive, send)


def _json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def answering_routes(routes: Iterable[BaseRoute]) -> list[BaseRoute]:
    """The Streamable HTTP app's routes, each endpoint answering every POSTed message."""
    wrapped: list[BaseRoute] = []
    for route in routes:
        if isinstance(route, Route):
            endpoint = _CheckedPosts(route.endpoint, _answer_over_http)
            wrapped.append(Route(route.path, endpoint=endpoint, methods=route.methods))
        else:
            wrapped.append(route)
    return wrapped


# --- SSE -------------------------------------------------------------------------------------

_REFUSED = "notifications/wontopos/refused"


class _AnsweringReadStream(_Wrapped):
    """An SSE connection's read stream: a refusal notification from :func:`_answer_on_stream`
    is written back as its answers and never reaches the server."""

    def __init__(self, inner: Any, write_stream: Any, key: str) -> None:
        self._inner = inner
        self._write = write_stream
        self._key = key

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item: SessionMessage | Exception = await self._inner.receive()
            answers = self._answers_in(item)
            if answers is None:
                return item
            for answer in answers:
                await self._write.send(SessionMessage(answer))

    def _answers_in(self, item: SessionMessage | Exception) -> list[Any] | None:
        if not isinstance(item, SessionMessage):
            return None
        message = item.message
        if not isinstance(message, JSONRPCNotification) or message.method != _REFUSED:
            return None
        params = message.params or {}
        if not secrets.compare_digest(str(params.get("key", "")), self._key):
            return None  # not ours: the server sees (and ignores) it like any unknown notification
        return [jsonrpc_message_adapter.validate_python(answer, by_name=False) for answer in params["answers"]]

    def __aiter__(self) -> _AnsweringReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


def _answer_on_stream(app: ASGIApp, key: str) -> Answerer:
    """Pass a refused message to the SDK's ``/messages/`` app as the notification that
    carries its answers: the SDK checks the session as for any message, and the
    connection's :class:`_AnsweringReadStream` writes the answers."""

    async def answer(refused: Refusal | ToolRefusal, scope: Scope, receive: Receive, send: Send) -> None:
        _, pending = await _body(receive)  # the refused body, read and set aside
        answers = [_wire(answer) for answer in _answers(refused, stream=True)]
        notice = {"jsonrpc": "2.0", "method": _REFUSED, "params": {"key": key, "answers": answers}}
        await app(scope, _replaying(_json(notice), receive, pending), send)

    return answer


def sse_routes(
    server: WontoposMCPServer,
    *,
    sse_path: str,
    message_path: str,
    transport_security: TransportSecuritySettings,
    max_request_body_size: int,
) -> list[BaseRoute]:
    """``GET sse_path`` (the event stream) and ``POST message_path`` (messages), as the
    SDK's ``sse_app`` builds them, answering every message."""
    sse = SseServerTransport(
        message_path, security_settings=transport_security, max_request_body_size=max_request_body_size
    )
    key = secrets.token_urlsafe(24)
    messages = sse.handle_post_message

    async def stream(scope: Scope, receive: Receive, send: Send) -> None:
        async with sse.connect_sse(scope, receive, send) as (read_stream, write_stream):
            await server.run_streams(_AnsweringReadStream(read_stream, write_stream, key), write_stream)

    return [
        Route(sse_path, endpoint=_ASGI(stream), methods=["GET"]),
        Mount(message_path, app=_CheckedPosts(messages, _answer_on_stream(messages, key))),
    ]


class _ASGI:
    """A plain ASGI callable as a Starlette endpoint (a function would be taken for a
    request handler)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
