"""uvicorn as every HTTP run of wontopos-mcp uses it: ``--transport http`` (:func:`serve`) and
the tests' live servers build their ``uvicorn.Config`` here, so what is tested is what runs.

What is not uvicorn's default, all in :class:`BoundedH11` (h11's protocol, whatever else
is installed: ``httptools`` would be uvicorn's ``auto`` pick, so the bounds hold on every
install):

- **A deadline for a request's head** (``Settings.header_timeout_ms``, 10 s). uvicorn
  (0.55) bounds only the idle time *between* requests (``timeout_keep_alive``, armed once
  an answer is complete and cancelled by every byte that arrives) and has no option for
  the time a head may take (its issue #157 has asked for one since 2018); a connection
  that sends nothing, or trickles a header line every few seconds (slowloris), would be
  kept open for ever, one file descriptor and one buffer each. The connection is closed
  when its head is not complete that long after it opened, or after its last answer.
- **A deadline for a request's body** (``Settings.body_timeout_ms``, 30 s from its head).
  ``http.app.Guard`` answers 408 when a body it reads is late; what no route reads (a
  refusal sent before the body, a route that takes none) uvicorn discards as it comes,
  and the connection is closed once the body is that late. An answer that goes out
  before its body is in does not close the connection at once: the client may still be
  sending, and a close with unread bytes would reset the connection under the answer.
- **The parser's own 400 carries the headers of every answer** (``http.app``: nosniff,
  no-referrer, no-store) and the error body every refusal has; uvicorn's has neither.
- **No WebSocket upgrades** (``ws="none"``): with ``websockets`` installed uvicorn would
  answer a handshake itself, without those headers; here an upgrade request is an
  ordinary request, refused by the app like any other unknown route.
- **No proxy headers.** uvicorn trusts ``X-Forwarded-For`` from 127.0.0.1 by default;
  here the client is the TCP peer; behind a reverse proxy every client is the proxy.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol

from wontopos_mcp.errors import InvalidRequestError

from .app import DATA_ANSWERS, EVERY_ANSWER, build_app

if TYPE_CHECKING:
    import socket

    from wontopos_mcp.config import Settings
    from wontopos_mcp.engine.service import MemoryService

__all__ = ["BoundedH11", "serve", "server_config"]

logger = logging.getLogger(__name__)

_NOT_HTTP = InvalidRequestError("the request is not valid HTTP/1.1").envelope()


class BoundedH11(H11Protocol):
    """h11's protocol with a deadline for each request's head and body, and a parser 400
    in the error body with the common headers (see the module).

    h11 says where the client is: ``IDLE`` until a whole head has been parsed, then
    ``SEND_BODY`` while a body is due, then ``DONE``. :meth:`_watch` runs after every
    batch of events and every answer and keeps one deadline armed for the state: the
    head's while ``IDLE``, the body's while ``SEND_BODY``; bytes arriving do not move it.
    """

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    _head_due: asyncio.TimerHandle | None = None
    _body_due: asyncio.TimerHandle | None = None
    _body_late = False  # this request's body missed its deadline

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch()

    def handle_events(self) -> None:
        super().handle_events()
        self._watch()

    def on_response_complete(self) -> None:
        if self._body_late and self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            self._close(f"its body was not in {self.body_timeout:.1f} s after its head")
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head()
        self._cancel_body()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 cannot parse, as the error body with the
        headers every answer carries (uvicorn's own is text/plain with neither)."""
        body = json.dumps(_NOT_HTTP).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *((name.lower().encode(), value.encode()) for name, value in (*EVERY_ANSWER, *DATA_ANSWERS)),
            (b"connection", b"close"),
        ]
        for event in (h11.Response(status_code=400, headers=headers, reason=STATUS_PHRASES[400]), h11.Data(data=body)):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
        self.transport.close()

    # -- the deadlines ------------------------------------------------------------------------

    def _watch(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is not h11.IDLE:
            self._cancel_head()
        elif self._head_due is None:
            self._body_late = False  # a new request
            self._head_due = self.loop.call_later(self.header_timeout, self._head_missed)
        if state is not h11.SEND_BODY:
            self._cancel_body()
        elif self._body_due is None and not self._body_late:
            self._body_due = self.loop.call_later(self.body_timeout, self._body_missed)

    def _head_missed(self) -> None:
        self._head_due = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._close(f"it sent no complete request head in {self.header_timeout:.1f} s")

    def _body_missed(self) -> None:
        self._body_due = None
        if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
            return
        self._body_late = True
        if self.cycle is not None and self.cycle.response_complete:
            self._close(f"its body was not in {self.body_timeout:.1f} s after its head")
        # else a route is still reading it: ``Guard`` answers 408, then the answer closes it

    def _cancel_head(self) -> None:
        if self._head_due is not None:
            self._head_due.cancel()
            self._head_due = None

    def _cancel_body(self) -> None:
        if self._body_due is not None:
            self._body_due.cancel()
            self._body_due = None

    def _close(self, why: str) -> None:
        logger.debug("closed a connection: %s", why)
        self.transport.close()


def _protocol(settings: Settings) -> type[BoundedH11]:
    """:class:`BoundedH11` with these bounds (uvicorn builds one protocol per connection
    from the class it is given, with no room for arguments of ours)."""
    bounds = {"header_timeout": settings.header_timeout_ms / 1000, "body_timeout": settings.body_timeout_ms / 1000}
    return type("Bounded", (BoundedH11,), bounds)


def server_config(app: Any, settings: Settings, **overrides: Any) -> uvicorn.Config:
    """The ``uvicorn.Config`` serving ``app`` (``overrides`` win, e.g. a test's log level)."""
    options: dict[str, Any] = {
        "http": _protocol(settings),
        "ws": "none",
        "proxy_headers": False,
        "log_level": settings.log_level,
        "log_config": None,  # uvicorn's loggers go to the root logger: stderr, through ``logs``
        "timeout_graceful_shutdown": 5,
        "lifespan": "on",
        **overrides,
    }
    return uvicorn.Config(app, **options)


def serve(service: MemoryService, settings: Settings, listener: socket.socket) -> None:
    """``--transport http`` (and ``sse``): the one app over ``service`` on ``listener``, a
    socket bound beforehand (so a port in use is the CLI's one line, not a traceback here),
    until uvicorn stops (SIGINT, SIGTERM)."""
    uvicorn.Server(server_config(build_app(service, settings), settings)).run(sockets=[listener])
