"""Request bodies as ``http.app.Guard`` reads them: one at most ``max_body_bytes`` (413),
in by a deadline from its head (408), and all those being read at once within one
:class:`BodyBudget` (503 ``unavailable_error`` with ``retry_after_ms``).

A declared length over the limit is 413 on any route (:func:`declared_size`: nothing is
read to say so). Only a route that takes a body gets one read (:func:`takes_body`), and
only once the request has passed the Guard's checks, the API key's included: a client
without the key, or one calling a route that takes no body, cannot make the server hold
a byte of it
(uvicorn keeps at most its 64 KiB read-ahead, and discards the rest once the answer is
out; ``http.server`` closes the connection when that body is late).
"""

from __future__ import annotations

import math

import anyio
from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope

from wontopos_mcp.errors import InvalidRequestError, UnavailableError

__all__ = ["BodyBudget", "declared_size", "read_body", "takes_body"]

BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")
# REST calls and MCP messages: the paths whose bodies are read, and must be JSON (415).
BODY_PATHS = ("/api/", "/mcp", "/messages")
BUSY_RETRY_MS = 1000  # a full budget frees as reads end: within a body deadline at most
# The conversation import's route takes the export itself as its body: up to 32 MiB, this
# route's own limit (a chat export is bigger than any JSON call), inside the budget of the
# bodies read at once, in any type but the three a cross-site form may send unasked.
IMPORT_PATH = "/api/v1/memory/import"
IMPORT_MAX_BYTES = 32 * 1024 * 1024
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")


def body_limit(scope: Scope, default: int) -> int:
    """The largest body the route ``scope`` asks for may have."""
    return max(IMPORT_MAX_BYTES, default) if scope["path"] == IMPORT_PATH else default


def takes_body(scope: Scope) -> bool:
    """Whether the route ``scope`` asks for reads a body (the others read none)."""
    return scope["method"] in BODY_METHODS and str(scope["path"]).startswith(BODY_PATHS)


class BodyBudget:
    """Bytes held by the request bodies being read at once, over every connection. A body
    that declares its length takes it all before a byte is read; a chunked one takes each
    chunk as it comes. Used from the event loop only."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.held = 0

    def take(self, size: int) -> None:
        if self.held + size > self.total:
            raise UnavailableError(
                f"the server is reading {self.held} bytes of request bodies, its limit is {self.total}: "
                f"retry after {BUSY_RETRY_MS} ms",
                retry_after_ms=BUSY_RETRY_MS,
            )
        self.held += size

    def give(self, size: int) -> None:
        self.held -= size


def _too_big(limit: int) -> InvalidRequestError:
    return InvalidRequestError(f"the request body is larger than {limit} bytes", status=413, max_bytes=limit)


def declared_size(scope: Scope, limit: int) -> int | None:
    """The body's declared length (None: chunked, or none declared); 413 when it is over
    ``limit``, on any route: refusing it reads nothing."""
    headers = Headers(scope=scope)
    length = headers.get("content-length", "").strip()
    declared = int(length) if length.isdigit() and "transfer-encoding" not in headers else None
    if declared is not None and declared > limit:
        raise _too_big(limit)
    return declared


async def read_body(scope: Scope, receive: Receive, *, limit: int, budget: BodyBudget, timeout_s: float) -> Receive:
    """Read the request's body within ``limit`` bytes, ``timeout_s`` seconds and the
    budget, and return a ``receive`` that hands it to the app again as one message."""
    declared = declared_size(scope, limit)
    chunks: list[bytes] = []
    pending: list[Message] = []
    size = held = 0
    try:
        if declared:
            budget.take(declared)
            held = declared
        with anyio.fail_after(timeout_s):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    pending.append(message)  # a disconnect: the app sees it in turn
                    break
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise _too_big(limit)
                if declared is None:
                    budget.take(len(chunk))
                    held += len(chunk)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        raise InvalidRequestError(
            f"the request body did not arrive within {math.ceil(timeout_s * 1000)} ms of its headers",
            status=408,
            timeout_ms=math.ceil(timeout_s * 1000),
        ) from None
    finally:
        budget.give(held)
    queued: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}, *pending]

    async def replay() -> Message:
        return queued.pop(0) if queued else await receive()

    return replay
