"""What the server's log may hold: never a memory's text, a query or a key (SPEC
"Transports and HTTP"), at any level, third-party loggers included.

This package logs ids, counts, sizes and timings only. Other libraries are not so
careful at ``debug``: the MCP SDK logs every JSON-RPC message of an SSE session in full
(``mcp.server.sse``: "Received JSON", "Sending message via SSE") and sse-starlette every
event it streams (``sse_starlette.sse``: "chunk: ..."), so a memory's text and a search's
query reach the log; the SDK logs SSE session ids (which address a session) on the root
logger, filelock and asyncio add noise. A list of known loggers would miss the next
one, so :class:`PrivateRecords` keeps by origin instead:

- records of this package (``wontopos_mcp.*``) and of uvicorn (``uvicorn.*``: start-up,
  shutdown, protocol warnings) pass at the configured level;
- uvicorn's access lines (``uvicorn.access``) pass with the method, the path without its
  query string (``?user_id=...``, an SSE ``?session_id=...``) and the status;
- any other logger's records pass from ``warning`` up (failures worth seeing); below
  that they are dropped, whatever ``--log-level`` says.

The filter sits on the root handler the CLI installs (:func:`configure`), so every
record that reaches stderr goes through it. The ``Memory`` library configures no logging:
its host application's own logging decides, and neither the MCP SDK's transports nor
uvicorn run inside it.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["PrivateRecords", "configure"]

logger = logging.getLogger(__name__)

OURS = ("wontopos_mcp", "uvicorn")
ACCESS = "uvicorn.access"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _within(name: str, roots: tuple[str, ...]) -> bool:
    return any(name == root or name.startswith(root + ".") for root in roots)


class PrivateRecords(logging.Filter):
    """Drop the records that may carry what a log must not (see the module)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == ACCESS:
            _without_query(record)
            return True
        return _within(record.name, OURS) or record.levelno >= logging.WARNING


def _without_query(record: logging.LogRecord) -> None:
    """uvicorn's access line is ``'%s - "%s %s HTTP/%s" %d'`` (client, method, path with
    its query string, version, status): the path loses its query string."""
    args = record.args
    if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
        record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])


def configure(level: str) -> None:
    """Log to stderr at ``level`` (stdout is the protocol's), through :class:`PrivateRecords`."""
    logging.basicConfig(stream=sys.stderr, level=level.upper(), format=FORMAT)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, PrivateRecords) for f in handler.filters):
            handler.addFilter(PrivateRecords())
    # Says, to whoever turned debug on, why the MCP SDK's own debug lines are missing.
    logger.debug("logging at %s; other libraries' records below warning are dropped (they carry message bodies)", level)
