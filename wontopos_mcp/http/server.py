"""uvicorn as every HTTP run of wontopos-mcp uses it: the CLI's ``--transport http`` and
the tests' live servers build their ``uvicorn.Config`` here, so what is tested is what runs.

Two choices are not uvicorn's defaults:

- **A deadline for a request's headers** (``Settings.header_timeout_ms``, 10 s). uvicorn
  bounds only the idle time *between* requests (``timeout_keep_alive``, armed once an
  answer is complete and cancelled by the first byte that arrives); a connection that
  sends nothing, or trickles a header line every few seconds (slowloris), is kept open
  for ever, one file descriptor and one buffer each (measured with uvicorn 0.54: both
  still open after 20 s). :class:`HeaderDeadline` closes a connection whose headers are
  not complete that long after it opened, or after its last answer. It bounds the
  headers only; a body is read by the app under the body limit (``http.app.Guard``).
  The protocol is h11's, whatever else is installed (``httptools`` would be uvicorn's
  ``auto`` pick), so the bound holds on every install.
- **No proxy headers.** uvicorn trusts ``X-Forwarded-For`` from 127.0.0.1 by default,
  which would let any local process name the client address that the wrong-key limit
  (``http.app.KeyFailures``) counts by. Here the client is the TCP peer; behind a
  reverse proxy every client is the proxy.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    from wontopos_mcp.config import Settings

__all__ = ["HeaderDeadline", "server_config"]

logger = logging.getLogger(__name__)


class HeaderDeadline(H11Protocol):
    """h11's protocol, closing a connection whose request headers are not complete within
    ``header_timeout`` seconds of its opening or of its last answer (see the module).

    h11 reports the client's state as ``IDLE`` until a whole header block has been parsed
    (then ``SEND_BODY`` or ``DONE``), so the deadline is armed while the client is
    ``IDLE`` and disarmed as soon as it is not; bytes arriving do not move it.
    """

    header_timeout: float = 10.0
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm()  # the next request's headers get the same time

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _too_slow(self) -> None:
        self._header_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            logger.debug("closed a connection that sent no complete request within %.1f s", self.header_timeout)
            self.transport.close()


def _protocol(header_timeout: float) -> type[HeaderDeadline]:
    """:class:`HeaderDeadline` with this bound (uvicorn builds one protocol per connection
    from the class it is given, with no room for arguments of ours)."""
    return type("BoundedHeaders", (HeaderDeadline,), {"header_timeout": header_timeout})


def server_config(app: Any, settings: Settings, **overrides: Any) -> uvicorn.Config:
    """The ``uvicorn.Config`` serving ``app`` (``overrides`` win, e.g. a test's log level)."""
    options: dict[str, Any] = {
        "http": _protocol(settings.header_timeout_ms / 1000),
        "proxy_headers": False,
        "log_level": settings.log_level,
        "log_config": None,  # uvicorn's loggers go to the root logger: stderr, through ``logs``
        "timeout_graceful_shutdown": 5,
        "lifespan": "on",
        **overrides,
    }
    return uvicorn.Config(app, **options)
