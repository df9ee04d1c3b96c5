"""What the server's log may hold: never a memory's text, a query or a key, at any level,
third-party loggers included.

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

Whatever passes loses what may quote a memory, a query or a key though its origin is
trusted: an exception's message (``KeyError('<a speaker name>')``, a database error
quoting a filter) leaves every traceback, which keeps its frames and the exception's
type (``_traceback``); a Python warning, routed into logging (``logging.captureWarnings``:
``py.warnings``, at ``warning``), keeps where it was raised and its category, not its
text (pydantic's serialization warnings quote the value). An exception that ends a
thread or the process is logged too (``threading.excepthook``, ``sys.excepthook``)
instead of printed, so its traceback passes the same way.

The filter sits on the root handler the CLI installs (:func:`configure`), so every
record that reaches stderr goes through it. The ``Memory`` library configures no logging:
its host application's own logging decides, and neither the MCP SDK's transports nor
uvicorn run inside it.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import traceback
from types import TracebackType

__all__ = ["PrivateRecords", "configure"]

logger = logging.getLogger(__name__)

OURS = ("wontopos_mcp", "uvicorn")
ACCESS = "uvicorn.access"
WARNINGS = "py.warnings"  # where logging.captureWarnings sends Python warnings
WITHHELD = "(message withheld from the log)"
# warnings.formatwarning's "path:line: Category: message\n  source line"
_WARNING = re.compile(r"(?s)(?P<where>.*?:\d+): (?P<category>[A-Za-z_][\w.]*): ")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _within(name: str, roots: tuple[str, ...]) -> bool:
    return any(name == root or name.startswith(root + ".") for root in roots)


class PrivateRecords(logging.Filter):
    """Drop the records that may carry what a log must not (see the module)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == ACCESS:
            _without_query(record)
            return True
        if not (_within(record.name, OURS) or record.levelno >= logging.WARNING):
            return False
        if record.name == WARNINGS:
            _warning_without_text(record)
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = _traceback(record.exc_info[1])
        return True


def _warning_without_text(record: logging.LogRecord) -> None:
    """A captured warning (``"%s"`` of its formatted text) keeps where and what kind."""
    text = record.getMessage()
    found = _WARNING.match(text)
    record.msg, record.args = "%s", (f"{found['where']}: {found['category']} {WITHHELD}" if found else WITHHELD,)


def _traceback(exc: BaseException) -> str:
    """The traceback ``logging`` would print, each exception's message left out (its
    type, its frames and the chain of causes stay)."""
    lines: list[str] = []
    seen: set[int] = set()

    def add(error: BaseException) -> None:
        seen.add(id(error))
        chained = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
        if chained is not None and id(chained) not in seen:
            add(chained)
            lines.append(
                "\nThe above exception was the direct cause of the following exception:\n\n"
                if error.__cause__ is not None
                else "\nDuring handling of the above exception, another exception occurred:\n\n"
            )
        if error.__traceback__ is not None:
            lines.append("Traceback (most recent call last):\n")
            lines.extend(traceback.StackSummary.extract(traceback.walk_tb(error.__traceback__)).format())
        kind = type(error)
        lines.append(f"{kind.__module__}.{kind.__qualname__} {WITHHELD}\n")

    add(exc)
    return "".join(lines).rstrip("\n")


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    logger.critical("uncaught %s", kind.__qualname__, exc_info=(kind, exc, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None:
        return
    name = args.thread.name if args.thread is not None else "?"
    logger.error("thread %s ended by an uncaught %s", name, args.exc_type.__qualname__,
                 exc_info=(args.exc_type, args.exc_value, args.exc_traceback))  # fmt: skip


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
    logging.captureWarnings(True)  # warnings become py.warnings records, through the filter
    sys.excepthook, threading.excepthook = _log_uncaught, _log_uncaught_in_thread
    # Says, to whoever turned debug on, why the MCP SDK's own debug lines are missing.
    logger.debug("logging at %s; other libraries' records below warning are dropped (they carry message bodies)", level)
