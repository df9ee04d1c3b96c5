"""The shared engine's side of the command line's protocol (:mod:`cli.wire`): a connection
whose first line is the command line's hello is served here, not as an MCP session.

Each request names one operation of a fixed set (:data:`OPERATIONS`: what the human
commands call on ``MemoryService``, and the two imports, which read their file here, in
the engine: it runs as the same user on the same machine, and the command line sends
absolute paths) with its JSON arguments; the answer is the operation's answer, or the
refusal's error body with its parts. The call runs on a worker thread, as the MCP tools'
do; an import's progress and lines travel as messages while it runs, and a command line
that went away stops the import at its next batch (the message cannot be sent), as a
Ctrl-C would stop it in process. A failure that is not a refusal is logged and answered
with the one 500 every face sends.

May import what ``cli`` may; ``anyio`` for the engine's event loop (the engine imports
this, a command's own process never does).
"""

from __future__ import annotations

import functools
import logging
import os
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread

from wontopos_mcp.errors import InvalidRequestError, WontoposError, internal_error
from wontopos_mcp.version import __version__

from . import wire

if TYPE_CHECKING:
    from wontopos_mcp.engine.service import MemoryService

__all__ = ["OPERATIONS", "serve_commands"]

log = logging.getLogger(__name__)

Send = Callable[[bytes], Coroutine[Any, Any, None]]


class Remote:
    """An import's reports, sent to the command line from the worker thread running it
    (``wire.Report``, and ``progress`` as ``import_conversations`` calls it)."""

    def __init__(self, send: Send) -> None:
        self._send = send

    def said(self, text: str) -> None:
        anyio.from_thread.run(self._send, wire.line({"say": text}))

    def progress(self, *values: Any) -> None:
        anyio.from_thread.run(self._send, wire.line({"progress": list(values)}))


Operation = Callable[["MemoryService", dict[str, Any], Remote], Any]


def _import_lines(service: MemoryService, args: dict[str, Any], remote: Remote) -> Any:
    from .importing import import_lines

    with open(args["path"], "rb") as source:
        return import_lines(service, source, args["user_id"], batch=args["batch"], report=remote)


def _import_conversations(service: MemoryService, args: dict[str, Any], remote: Remote) -> Any:
    from .conversations import import_path

    def progress(done: int, total: int, counts: Counter[str]) -> None:
        remote.progress(done, total, dict(counts))

    return import_path(service, args["path"], args["options"], args["user_id"], progress)


OPERATIONS: dict[str, Operation] = {
    "stores_list": lambda s, a, r: s.stores_list(),
    "store_create": lambda s, a, r: s.store_create(**a),
    "store_delete": lambda s, a, r: s.store_delete(**a),
    "speakers_list": lambda s, a, r: s.speakers_list(**a),
    "speaker_register": lambda s, a, r: s.speaker_register(**a),
    "speaker_remove": lambda s, a, r: s.speaker_remove(**a),
    "speaker_rename": lambda s, a, r: s.speaker_rename(**a),
    "speaker_merge": lambda s, a, r: s.speaker_merge(**a),
    "memory_add": lambda s, a, r: s.memory_add(**a),
    "memory_search": lambda s, a, r: s.memory_search(**a),
    "memory_list": lambda s, a, r: s.memory_list(**a),
    "memory_get": lambda s, a, r: s.memory_get(**a),
    "memory_forget": lambda s, a, r: s.memory_forget(**a),
    "by_speaker": lambda s, a, r: s.by_speaker(**a),
    "stats": lambda s, a, r: s.stats(**a),
    "revisions": lambda s, a, r: s.revisions(**a),
    "import_lines": _import_lines,
    "import_conversations": _import_conversations,
}
"""What the command line may ask, by name: the service's operations it calls, and the imports."""


def answer(service: MemoryService, request: dict[str, Any], remote: Remote) -> bytes:
    """The last line of one request's answer (on the worker thread)."""
    operation = OPERATIONS.get(str(request.get("op")))
    if operation is None:
        return wire.error_line(InvalidRequestError(f"no operation {str(request.get('op'))[:60]!r}", field="op"))
    try:
        return wire.line({"answer": operation(service, dict(request.get("args") or {}), remote)})
    except WontoposError as exc:
        return wire.error_line(exc)
    except Exception:  # a bug: logged, and answered as every face answers one
        log.exception("a command's %s failed", request.get("op"))
        return wire.error_line(internal_error())


async def serve_commands(service: MemoryService, lines: AsyncIterator[bytes], send: Send) -> None:
    """Serve one command line's connection (its hello already read) until it closes."""
    import json

    await send(wire.line({"hello": {"pid": os.getpid(), "version": __version__}}))
    remote = Remote(send)
    async for raw in lines:
        if not raw.strip():
            continue
        try:
            request = json.loads(raw)
        except ValueError:
            request = None
        request = request if isinstance(request, dict) else {}
        last = await anyio.to_thread.run_sync(functools.partial(answer, service, request, remote))
        await send(last)
