"""The HTTP face: one Starlette app serving MCP over Streamable HTTP (``/mcp``) and SSE
(``/sse`` + ``/messages/``), the REST API of the hosted service (``/api/v1/...``, see
``rest``), ``/healthz``, and the memory browser's static files at ``/ui/`` (the page
calls the REST API like any other client).

One engine per process: every MCP session, SSE connection and REST request uses the one
``MemoryService`` given to :func:`build_app`. The app's lifespan runs the Streamable HTTP
session manager and calls ``service.start()`` (model load in the background); the SSE
transport runs the MCP server's lifespan once per connection, which only calls
``service.start()`` again (a no-op once started), never builds another engine.

One pure-ASGI middleware, :class:`Guard`, applies to every route, in this order:

1. Host (DNS rebinding): loopback names, the bind address and ``allowed_hosts`` pass;
   any other ``Host`` is 421. A request without ``Host`` (HTTP/1.0) cannot be a
   rebinding and passes.
2. Origin: absent is fine (not a browser: SDKs, curl, agent hosts). A browser's must be
   this server's own origin, the scheme, host and port the request was sent to (the memory
   browser at ``/ui/`` is served from it), or name a host of ``allowed_hosts`` (with its
   port, when the entry gives one); any other is 403, other ports of localhost included
   (another local web app is another origin).
3. ``/.well-known/*`` answers 404 without authentication (OAuth-probing clients get a
   clean "no" rather than a 401 they would try to log in through).
4. API key, when ``WONTOPOS_API_KEY`` is set: ``X-API-Key`` or ``Authorization: Bearer``,
   compared in constant time, on every route but ``/healthz`` and the memory browser's
   static files under ``/ui`` (a browser cannot send a header when it opens a page; the
   files hold no data, and the page sends the key on every REST call); else 401. With no
   key configured a sent key is ignored. A right key always passes. Wrong keys share one
   budget over every client (``wrong_keys.KeyFailures``; any local process can send from
   any loopback address): once 10 came in a minute, a wrong key is 429
   ``rate_limit_error`` with ``retry_after_ms`` (and ``Retry-After``) instead of 401, until
   the oldest of those ten is a minute old.
5. Content type: a POST to the REST API, ``/mcp`` or ``/messages/`` (and any request there
   that declares a body) must say ``Content-Type: application/json`` (parameters such as
   ``charset`` allowed), else 415 with ``field: "content-type"``. A page elsewhere can
   send a cross-site form or ``text/plain`` POST without asking first; it cannot send
   ``application/json`` so. The conversation import (``IMPORT_PATH``) takes the export
   itself: any type but those three (``application/octet-stream`` is what the page sends).
6. The body (``bodies``): a declared length over ``max_body_bytes`` (32 MiB on the
   import route) is 413 with
   ``max_bytes`` on any route; the body itself is read before the route runs, only for a
   route that takes one (a POST, PUT, PATCH or DELETE to the REST API or MCP), so only
   after every check above: counted as it arrives, 413 past the limit; not in by
   ``body_timeout_ms`` 408; past the budget of the bodies being read at once
   (``body_budget_bytes``) 503 with ``retry_after_ms``.

Every answer, refusals and the 500 of a crash included (the HTTP parser's own 400 too,
see ``server``), then carries ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy:
no-referrer``; the memory browser's also ``X-Frame-Options: DENY`` and its Content-Security-Policy (``frame-ancestors
'none'``: no page may frame it, which only a header can say), and every other answer
``Cache-Control: no-store`` (they hold memories; an SSE stream included). These are set by
:class:`SecurityHeaders`, outside Starlette's error middleware so that its 500 has them too.

The MCP SDK's own transport security is turned off for the mounted transports, since
every request reaching them has passed the same checks here; a second copy with its own
matching rules could only refuse what the settings allow (e.g. ``allowed_hosts``).

Every refusal is the error body (:meth:`WontoposError.envelope`) with the HTTP status of
its ``status``, built by :func:`error_response`, the one place a ``WontoposError`` becomes
HTTP (the middleware's refusals, the app's exception handler, routing's 404/405 and the
500 of a crash alike).
"""

from __future__ import annotations

import hmac
import logging
import math
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio.to_thread
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wontopos_mcp.config import is_loopback, key_problem
from wontopos_mcp.errors import (
    APIError,
    AuthenticationError,
    ConfigError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    WontoposError,
    internal_error,
)
from wontopos_mcp.mcp.server import build_server
from wontopos_mcp.mcp.transport import answering_routes, sse_routes
from wontopos_mcp.version import __version__

from .bodies import (
    BODY_PATHS,
    FORM_TYPES,
    IMPORT_MAX_BYTES,
    IMPORT_PATH,
    BodyBudget,
    body_limit,
    declared_size,
    read_body,
    takes_body,
)
from .rest import rest_routes
from .wrong_keys import KeyFailures

if TYPE_CHECKING:
    from wontopos_mcp.config import Settings
    from wontopos_mcp.engine.service import MemoryService

__all__ = ["Guard", "SecurityHeaders", "build_app", "error_response"]

logger = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
OPEN_PATHS = ("/healthz", "/")  # "/" only redirects to the memory browser
UI_PATH = "/ui"  # the memory browser: static files in the package (``wontopos_mcp/ui``)
UI_FILES = Path(__file__).resolve().parent / "ui"
WELL_KNOWN = "/.well-known/"
DEFAULT_PORTS = {"http": 80, "https": 443}
# The memory browser's one policy: nothing but this server, and no page may frame it.
UI_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
EVERY_ANSWER = (("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"))
UI_ANSWERS = (("X-Frame-Options", "DENY"), ("Content-Security-Policy", UI_CSP))
DATA_ANSWERS = (("Cache-Control", "no-store"),)


# --- the one mapping from WontoposError to HTTP ----------------------------------------------


def error_response(exc: WontoposError) -> JSONResponse:
    """``exc.envelope()`` with HTTP status ``exc.status``; a wait the error asks for
    (``retry_after_ms``: a model still loading, a write still running) also goes out as
    ``Retry-After`` in whole seconds."""
    headers: dict[str, str] = {}
    wait_ms = exc.details.get("retry_after_ms")
    if isinstance(wait_ms, (int, float)) and not isinstance(wait_ms, bool) and wait_ms >= 0:
        headers["Retry-After"] = str(max(1, math.ceil(wait_ms / 1000)))
    if isinstance(exc, AuthenticationError):
        headers["WWW-Authenticate"] = 'Bearer realm="wontopos-mcp"'
    return JSONResponse(exc.envelope(), status_code=exc.status, headers=headers)


def no_route(method: str, path: str) -> NotFoundError:
    """Every 404 carries ``field``, so that a caller branches on it, never on the message;
    for a route the caller got wrong, that is its path."""
    return NotFoundError(f"no route {method} {path}", field="path", path=path)


async def _on_wontopos_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, WontoposError)
    return error_response(exc)


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    """Routing's refusals (no such path, wrong method) in the error body."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error_response(no_route(request.method, request.url.path))
    if exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        response = error_response(
            InvalidRequestError(
                f"{request.url.path} does not take {request.method}; it takes {allowed}",
                status=405,
                method=request.method,
            )
        )
        if allowed:
            response.headers["Allow"] = allowed
        return response
    kind = InvalidRequestError if exc.status_code < 500 else APIError
    return error_response(kind(str(exc.detail), status=exc.status_code))


async def _on_crash(request: Request, exc: Exception) -> Response:
    # Starlette logs the traceback when it re-raises after this answer.
    return error_response(internal_error())


# --- the guard --------------------------------------------------------------------------------


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a ``Host`` value or an allow-list entry; None if malformed."""
    value = value.strip().lower()
    if not value or any(c in value for c in "@/?#\\ "):
        return None
    try:
        parts = urlsplit(f"//{value}")
        name, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not name:
        return None
    return name.rstrip("."), port


def _host_entry(entry: str) -> tuple[str, int | None] | None:
    # A bare IPv6 address ("::1") is bracketed, as a Host header carries it.
    return _split_host(f"[{entry}]" if entry.count(":") > 1 and "[" not in entry else entry)


def _ui(path: str) -> bool:
    return path == UI_PATH or path.startswith(UI_PATH + "/")


def _open(path: str) -> bool:
    """Served without the API key: the health check, the browser's static files and the
    redirect of ``/`` to them (none of them holds data)."""
    return path in OPEN_PATHS or _ui(path)


def _is_json(content_type: str | None) -> bool:
    """``application/json``, with or without parameters (``; charset=utf-8``)."""
    return content_type is not None and content_type.split(";", 1)[0].strip().lower() == "application/json"


def _declares_body(headers: Headers) -> bool:
    length = headers.get("content-length", "").strip()
    return "transfer-encoding" in headers or (length != "" and length != "0")


class Guard:
    """Host, Origin, API key, wrong-key limit, content type and body limit for every HTTP
    request (see the module doc)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        api_key: str | None,
        allowed_hosts: Iterable[str] = (),
        bind_host: str | None = None,
        max_body_bytes: int,
        body_timeout_s: float,
        body_budget_bytes: int,
        key_failures: KeyFailures | None = None,
    ) -> None:
        problem = key_problem(api_key)
        if problem is not None:
            raise ConfigError(problem)
        self.app = app
        self.key = None if api_key is None else api_key.encode("utf-8")
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        # One body of the largest size allowed always fits (the default budget is 64 MiB).
        self.budget = BodyBudget(max(body_budget_bytes, max_body_bytes, IMPORT_MAX_BYTES))
        self.failures = key_failures if key_failures is not None else KeyFailures()
        # Names an Origin may carry besides this server's own: the allow-list only.
        self.origins = [parsed for entry in allowed_hosts if (parsed := _host_entry(entry)) is not None]
        # Names a Host may carry: loopback, the allow-list, the address bound.
        served = (*LOOPBACK_NAMES, *(() if bind_host is None else (bind_host,)))
        self.hosts = [parsed for entry in served if (parsed := _host_entry(entry)) is not None] + self.origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # no route speaks it: refuse the handshake
            await receive()
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            self._check(scope)
            limit = body_limit(scope, self.max_body_bytes)
            declared_size(scope, limit)  # 413 on any route, before a byte is read
            if takes_body(scope):
                receive = await read_body(
                    scope, receive, limit=limit, budget=self.budget, timeout_s=self.body_timeout_s
                )
        except WontoposError as exc:
            await error_response(exc)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _check(self, scope: Scope) -> None:
        headers = Headers(scope=scope)
        host = headers.get("host")
        target = None if host is None else _split_host(host)
        if host is not None and (target is None or not _listed(self.hosts, *target)):
            raise InvalidRequestError(
                f"Host {host!r} is not served here (DNS rebinding protection); "
                "add the name to --allowed-hosts / WONTOPOS_ALLOWED_HOSTS to serve it",
                status=421,
                host=host[:200],
            )
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin, scope, target):
            raise PermissionDeniedError(
                f"Origin {origin!r} may not call this server: only its own origin and the hosts "
                "of --allowed-hosts / WONTOPOS_ALLOWED_HOSTS may",
                origin=origin[:200],
            )
        path: str = scope["path"]
        if path.startswith(WELL_KNOWN):
            raise no_route(scope["method"], path)
        if self.key is not None and not _open(path):
            self._check_key(headers)
        if path.startswith(BODY_PATHS) and (scope["method"] == "POST" or _declares_body(headers)):
            sent = headers.get("content-type")
            if path == IMPORT_PATH:  # the export itself: any type a form cannot send unasked
                if sent is None or sent.split(";", 1)[0].strip().lower() in FORM_TYPES:
                    raise InvalidRequestError(
                        "send the export as the body with Content-Type: application/octet-stream"
                        + (f" (not {sent[:100]!r})" if sent else ""),
                        status=415,
                        field="content-type",
                    )
            elif not _is_json(sent):
                raise InvalidRequestError(
                    "the request body must be JSON: send Content-Type: application/json"
                    + (f" (not {sent[:100]!r})" if sent else ""),
                    status=415,
                    field="content-type",
                )

    def _check_key(self, headers: Headers) -> None:
        """The right key passes, whatever the wrong-key budget says; a wrong one spends it."""
        if self._authenticated(headers):
            return
        if "x-api-key" not in headers and "authorization" not in headers:
            raise AuthenticationError("an API key is required: send it as X-API-Key or Authorization: Bearer")
        wait_ms = self.failures.wait_ms()
        if wait_ms:
            raise RateLimitError(
                f"too many wrong API keys in the last minute: retry after {wait_ms} ms", retry_after_ms=wait_ms
            )
        self.failures.failed()
        if self.failures.wait_ms():  # that one filled the budget: say so once, without the keys
            logger.warning(
                "%d wrong API keys within %.0f s: further wrong keys are refused (429) for %d ms",
                self.failures.limit,
                self.failures.window_s,
                self.failures.wait_ms(),
            )
        raise AuthenticationError("wrong API key")

    def _origin_allowed(self, origin: str, scope: Scope, host: tuple[str, int | None] | None) -> bool:
        """This server's own origin (scheme, host and port the request was sent to) or an
        allowed host's; a default port counts as written (``http://x`` is ``http://x:80``)."""
        try:
            parts = urlsplit(origin.strip())
            name, port = parts.hostname, parts.port
        except ValueError:
            return False
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS or not name or parts.path or parts.query or parts.fragment:
            return False
        name, port = name.rstrip("."), port or DEFAULT_PORTS[scheme]
        return (scheme, name, port) == _own_origin(scope, host) or _listed(self.origins, name, port)

    def _authenticated(self, headers: Headers) -> bool:
        assert self.key is not None
        candidates = [headers.get("x-api-key", "")]
        scheme, _, token = headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() == "bearer":
            candidates.append(token.strip())
        ok = False
        for candidate in candidates:
            # Every candidate is compared, so the time taken says nothing about which matched.
            ok |= hmac.compare_digest(candidate.encode("latin-1", "replace"), self.key)
        return ok


def _listed(names: list[tuple[str, int | None]], name: str, port: int | None) -> bool:
    """Whether ``name`` (at ``port``) is one of ``names``: an entry without a port takes any."""
    return any(name == n and (p is None or p == port) for n, p in names)


def _own_origin(scope: Scope, host: tuple[str, int | None] | None) -> tuple[str, str, int]:
    """The origin the request was sent to: its scheme, and the ``Host`` it names (checked
    already), or the address it reached when it names none."""
    scheme = str(scope.get("scheme", "http")).lower()
    if host is not None:
        name, port = host
    else:
        server = scope.get("server") or ("", None)
        name, port = str(server[0]).lower(), server[1]
    return scheme, name, port or DEFAULT_PORTS.get(scheme, 80)


class SecurityHeaders:
    """The headers every answer carries (see the module doc), added to the start of each
    response, streamed ones too (the body passes untouched)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        added = (*EVERY_ANSWER, *(UI_ANSWERS if _ui(scope["path"]) else DATA_ANSWERS))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in added:
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


class _App(Starlette):
    """Starlette with :class:`SecurityHeaders` around its whole stack, error middleware
    included (a user middleware runs inside it, so the 500 of a crash would go without)."""

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack())


# --- the app -----------------------------------------------------------------------------------


_HEALTH_READ_S = 0.5  # longest /healthz waits for the database to answer a read


async def _health(service: MemoryService, limiter: anyio.CapacityLimiter, *, keyed: bool) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of /healthz, in under a second whatever is still starting.

    ``db``: "opening" while the background open runs, then what a read says: "ok",
    "error" (it failed; logged) or "busy" (no answer within ``_HEALTH_READ_S``; the read
    goes on alone, one at a time). ``model``: "loading", "ready" or "failed", never
    waited for. 503 when the database cannot be opened or the model failed;
    ``status`` is "ok" once both are ready, else "starting" or "error". ``api_key``:
    "required" when every other route needs the key (``keyed``), else "none": what any
    caller learns from one refused call anyway, said here so that the memory browser asks
    for the key before its first call instead of after a 401 (a console error).
    """
    db = service.database_state()
    if db != "opening":
        db = "busy"
        with anyio.move_on_after(_HEALTH_READ_S):
            try:
                await anyio.to_thread.run_sync(service.stores_list, abandon_on_cancel=True, limiter=limiter)
                db = "ok"
            except Exception:
                logger.exception("health check: the database did not answer")
                db = "error"
    model = service.model_state
    failed = db == "error" or model == "failed"
    status = "error" if failed else "ok" if (db, model) == ("ok", "ready") else "starting"
    body = {
        "status": status,
        "version": __version__,
        "db": db,
        "model": model,
        "api_key": "required" if keyed else "none",
    }
    return (503 if failed else 200), body


def build_app(service: MemoryService, settings: Settings, *, key_failures: KeyFailures | None = None) -> Starlette:
    """The whole HTTP face over ``service``. Build one per server run: the Streamable
    HTTP session manager inside can run only once. ``key_failures``: the wrong-key limit
    (a test's own clock and threshold; by default 10 a minute over every client)."""
    server = build_server(service, log_level=settings.log_level, tools=settings.tools)
    # Our Guard has checked every request first (see the module doc).
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    limit = settings.max_body_bytes
    streamable = server.streamable_http_app(
        streamable_http_path="/mcp", transport_security=security, max_request_body_size=limit, host=settings.host
    )
    # Every POSTed message answered, even those the SDK would drop (see ``transport``).
    mcp_routes = answering_routes(streamable.routes)
    sse = sse_routes(
        server, sse_path="/sse", message_path="/messages/", transport_security=security, max_request_body_size=limit
    )

    health_reads = anyio.CapacityLimiter(1)

    async def to_ui(request: Request) -> Response:
        return RedirectResponse(UI_PATH + "/", status_code=308)

    async def healthz(request: Request) -> JSONResponse:
        status, body = await _health(service, health_reads, keyed=bool(settings.api_key))
        return JSONResponse(body, status_code=status)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            service.start()
            yield

    # The address it was bound to names this server too (a wildcard names no one host).
    bound = settings.host if not is_loopback(settings.host) and settings.host not in ("0.0.0.0", "::", "") else None
    return _App(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/", to_ui, methods=["GET", "HEAD"]),  # a person who opens the address finds the page
            Route(UI_PATH, to_ui, methods=["GET", "HEAD"]),
            Mount(UI_PATH, app=StaticFiles(directory=UI_FILES, html=True), name="ui"),
            *rest_routes(service),
            *mcp_routes,
            *sse,
        ],
        middleware=[
            Middleware(
                Guard,
                api_key=settings.api_key,
                allowed_hosts=settings.allowed_hosts,
                bind_host=bound,
                max_body_bytes=limit,
                body_timeout_s=settings.body_timeout_ms / 1000,
                body_budget_bytes=settings.body_budget_bytes,
                key_failures=key_failures,
            ),
        ],
        exception_handlers={
            WontoposError: _on_wontopos_error,
            HTTPException: _on_http_exception,
            Exception: _on_crash,
        },
        lifespan=lifespan,
    )
