"""The REST face: the hosted Wontopos API's routes, as its official SDK (2.2.48) speaks them.

Every route is one row of :data:`ENDPOINTS`, built from an operation of the contract
table (:mod:`wontopos_mcp.contract`): its method and path, the call of the service method
it makes (written in the row, by name), and the one mapping of the names the SDK sends onto the core's parameter names
(``max_results`` -> ``limit``, ``old_memory_id``/``new_content`` ->
``memory_id``/``content``, ``metadata.speaker`` -> ``speaker``, ...). The same mapping,
inverted, maps ``error.field`` back to the name the caller sent. What is REST's own (the
hosted options, the extra answer keys, calls that are more than a rename) is added here.

Request bodies are JSON objects; a key whose value is ``null`` counts as not given, so the
service's default applies. A key the route does not know is a 400 naming it, except under
``metadata`` on ``store``, where (as on the hosted service) unknown keys are dropped and
listed in the answer's ``ignored``. Options of the hosted service that this engine does
not offer (``verify``, ``max_images``, ``cache_control``, ``form``, ``tz``, ``image``) are
accepted when absent, ``0`` or ``null`` and are otherwise a 400 naming them.
``X-WOS-Model`` is accepted and ignored: there is one local engine.

Answers are the MCP answers plus the keys the SDK reads (``search`` adds ``self_memories``
and ``images``, both empty; ``list_stores`` reads ``collections``). Writes (``store``,
``supersede``, ``store-turn``, ``bulk-store``) take an ``Idempotency-Key``: its fingerprint is a
keyed hash (HMAC under the database's own secret, ``MemoryService.idempotency``) of the
route's path and the body's canonical JSON, secrets redacted first; a repeat answers the first
answer with ``replayed: true`` and the header ``Idempotent-Replayed: true``.

Refusals are raised as ``WontoposError``; ``http.app`` turns them into responses in its
one exception handler. Service calls run on a worker thread.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from wontopos_mcp.contract import Operation, operation, split_metadata
from wontopos_mcp.errors import InvalidRequestError, NotImplementedAPIError, WontoposError, internal_error
from wontopos_mcp.rules.conversation import turn_messages
from wontopos_mcp.rules.idempotency import KEY_FIELD, Idempotency
from wontopos_mcp.rules.json_values import lone_surrogate_error
from wontopos_mcp.verbs import speak

if TYPE_CHECKING:
    from typing import TypeAlias

    from wontopos_mcp.engine.service import MemoryService

    # A route's call of the service with its keyword arguments, ``lambda s, kw: s.<method>(**kw)``:
    # typed so that mypy checks the method's name (a lambda taking ``**kw`` would not be).
    ServiceCall: TypeAlias = Callable[[MemoryService, dict[str, Any]], Mapping[str, Any]]

__all__ = ["API_PREFIX", "ENDPOINTS", "HOSTED_ONLY", "rest_routes"]

logger = logging.getLogger(__name__)

API_PREFIX = "/api/v1"
REPLAYED_HEADER = "Idempotent-Replayed"

# Search options of the hosted service: accepted when absent, 0 or null.
SEARCH_OPTIONS = ("verify", "max_images", "cache_control", "form", "tz", "image")

# SDK endpoints of the hosted service that this engine does not serve: path -> the
# ``endpoint`` a 501 names.
HOSTED_ONLY: Mapping[str, str] = {
    "/memory/images": "images",
    "/memory/image": "image",
    "/engram": "engram",
    "/engram/run": "engram",
    "/models": "models",
    "/won/usage": "usage",
}


@dataclass(frozen=True)
class Call:
    """One service call: the call, its arguments (core names) and the field names to map back."""

    run: ServiceCall
    arguments: dict[str, Any]
    fields: dict[str, str] = field(default_factory=dict)  # core field -> the caller's name


@dataclass(frozen=True)
class Endpoint:
    """One REST route over one service method: ``name`` is the contract operation, ``call``
    the call of the service it makes.

    ``names`` maps the names a caller sends (``metadata.*`` flattened) to the core's;
    ``hosted`` lists hosted-only options accepted when absent, 0 or null; ``extra`` is
    merged into every answer; ``prepare`` reshapes a call that is not a plain rename;
    :func:`_endpoint` builds one from a contract operation.
    """

    name: str
    method: str
    path: str
    call: ServiceCall
    names: Mapping[str, str]
    write: bool = False
    hosted: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    query: bool = False
    metadata: bool = False
    required: tuple[str, ...] = ()  # core names the body must give (the contract's ``required``)
    prepare: Callable[[ServiceCall, dict[str, Any], dict[str, Any]], Call] | None = None
    reshape: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None

    def core_call(self, body: dict[str, Any]) -> tuple[Call, list[str]]:
        """The service call for a request body, and the metadata keys it ignored."""
        given, ignored = self._arguments(body)
        fields = {core: rest for rest, core in self.names.items() if rest != core}
        if self.prepare is not None:
            call = self.prepare(self.call, given, body)
            return Call(call.run, call.arguments, {**fields, **call.fields}), ignored
        arguments = {k: v for k, v in given.items() if v is not None}
        for name in self.required:
            if name not in arguments:  # absent or null: the core would be called without it
                raise InvalidRequestError(f"{fields.get(name, name)} is required", field=fields.get(name, name))
        return Call(self.call, arguments, fields), ignored

    def _arguments(self, body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        given: dict[str, Any] = {}
        items, ignored = _flattened(body, self.metadata)
        for key, value in items:
            if key in self.names:
                given[self.names[key]] = value
            elif key in self.hosted:
                _refuse_hosted_option(key, value)
            else:
                raise InvalidRequestError(f"unknown field {key!r} for {self.method} {API_PREFIX}{self.path}", field=key)
        return given, ignored


def _endpoint(name: str, call: ServiceCall, **behaviour: Any) -> Endpoint:
    """The endpoint of contract operation ``name``, making ``call`` (of the core method the
    table names, ``tests/test_contract.py`` checks): its route and names from the table,
    plus REST's own ``behaviour``."""
    op: Operation = operation(name)
    assert op.rest is not None, name
    required = tuple(p.name for p in op.params if p.required)
    return Endpoint(name, op.rest.method, op.rest.path, call, op.rest.names, required=required, **behaviour)


def _flattened(body: dict[str, Any], metadata: bool) -> tuple[list[tuple[str, Any]], list[str]]:
    """(the body's keys, those inside ``metadata`` as ``metadata.<key>``; the metadata keys
    ``contract.split_metadata`` drops, for the answer's ``ignored``)."""
    items: list[tuple[str, Any]] = []
    dropped: list[str] = []
    for key, value in body.items():
        if metadata and key == "metadata":
            if value is None:
                continue
            if not isinstance(value, dict):
                raise InvalidRequestError("metadata must be an object", field="metadata")
            kept, unknown = split_metadata(value)
            items += [(f"metadata.{k}", v) for k, v in kept.items()]
            dropped += unknown
        else:
            items.append((key, value))
    return items, dropped


def _refuse_hosted_option(key: str, value: Any) -> None:
    if value is None or (not isinstance(value, str) and value == 0):
        return
    raise InvalidRequestError(
        f"{key!r} is an option of the hosted Wontopos service that this local server does not offer; "
        "omit it (or send 0 or null)",
        field=key,
    )


# -- calls that are more than a rename -----------------------------------------------------------


def _forget(forget: ServiceCall, given: dict[str, Any], body: dict[str, Any]) -> Call:
    """``{user_id}`` alone erases the store's memories (the SDK's ``delete_all``); any
    other body forgets by ``memory_id`` or by ``speaker`` + ``confirm_records``."""
    if set(body) == {"user_id"}:
        return Call(lambda s, kw: s.delete_all(**kw), {"user_id": body["user_id"]})
    return Call(forget, {k: v for k, v in given.items() if v is not None})


def _turn(add_messages: ServiceCall, given: dict[str, Any], body: dict[str, Any]) -> Call:
    """One exchange as messages (:func:`conversation.turn_messages`: an empty side is
    left out, as the library's ``add_turn`` does)."""
    messages, fields = turn_messages(given.get("user_msg"), given.get("assistant_msg"))
    arguments = {"messages": messages, "user_id": given.get("user_id"), "conversation_id": given.get("conversation_id")}
    return Call(add_messages, {k: v for k, v in arguments.items() if v is not None}, fields)


def _collections(answer: Mapping[str, Any]) -> dict[str, Any]:
    return {**answer, "collections": answer["stores"]}


# -- the table ------------------------------------------------------------------------------------

ENDPOINTS: tuple[Endpoint, ...] = (
    _endpoint("store_create", lambda s, kw: s.store_create(**kw)),
    _endpoint("stores_list", lambda s, kw: s.stores_list(**kw), query=True, reshape=_collections),
    _endpoint("store_delete", lambda s, kw: s.store_delete(**kw)),
    _endpoint("speaker_register", lambda s, kw: s.speaker_register(**kw)),
    _endpoint("speakers_list", lambda s, kw: s.speakers_list(**kw), query=True),
    _endpoint("speaker_remove", lambda s, kw: s.speaker_remove(**kw)),
    _endpoint("speaker_rename", lambda s, kw: s.speaker_rename(**kw)),
    _endpoint("speaker_merge", lambda s, kw: s.speaker_merge(**kw)),
    _endpoint("memory_add", lambda s, kw: s.memory_add(**kw), write=True, hosted=("image",), metadata=True),
    _endpoint("memory_supersede", lambda s, kw: s.memory_supersede(**kw), write=True),
    _endpoint(
        "memory_search", lambda s, kw: s.memory_search(**kw),
        hosted=SEARCH_OPTIONS, extra={"self_memories": [], "images": []},
    ),
    _endpoint("memory_recall", lambda s, kw: s.memory_recall(**kw), hosted=("form", "tz")),
    _endpoint("memory_get", lambda s, kw: s.memory_get(**kw)),
    _endpoint("memory_list", lambda s, kw: s.memory_list(**kw)),
    _endpoint("by_speaker", lambda s, kw: s.by_speaker(**kw)),
    _endpoint("memory_forget", lambda s, kw: s.memory_forget(**kw), prepare=_forget),  # and delete_all
    _endpoint("add_turn", lambda s, kw: s.memory_add_messages(**kw), write=True, prepare=_turn),
    _endpoint("add_bulk", lambda s, kw: s.memory_add_bulk(**kw), write=True),
    _endpoint("stats", lambda s, kw: s.stats(**kw)),
    _endpoint("history", lambda s, kw: s.history(**kw)),
    _endpoint("lineage", lambda s, kw: s.lineage(**kw)),
    _endpoint("revisions", lambda s, kw: s.revisions(**kw)),
)  # fmt: skip


# -- the request cycle ----------------------------------------------------------------------------


async def _body(request: Request, endpoint: Endpoint) -> dict[str, Any]:
    """The request's arguments: the query string of a GET, else the JSON object sent."""
    if endpoint.query:
        return dict(request.query_params)
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise InvalidRequestError("the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise InvalidRequestError(f"the request body must be a JSON object, not {type(body).__name__}")
    unpaired = lone_surrogate_error(None, body, whole="body")  # json.loads lets "\ud800" through; UTF-8 cannot
    if unpaired is not None:
        raise unpaired
    return body


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


async def _idempotency(
    request: Request, endpoint: Endpoint, body: dict[str, Any], service: MemoryService
) -> Idempotency | None:
    """The write's key and the fingerprint of its body as the write stores it: with the
    ``redact`` setting on, its secrets redacted first (``MemoryService.scrubbed``, off the
    event loop: a bulk text takes a while), so the database keeps no hash of a secret,
    which a guess at a weak password could match."""
    key = request.headers.get(KEY_FIELD)
    if key is None or not endpoint.write:
        return None
    if service.redact != "none":
        body = await anyio.to_thread.run_sync(service.scrubbed, body)
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    # Off the event loop: the first keyed write reads (or creates) the database's secret.
    return await anyio.to_thread.run_sync(service.idempotency, key, f"{request.url.path}\n{canonical}")


async def _run(service: MemoryService, call: Call, idempotency: Idempotency | None) -> Mapping[str, Any]:
    """The service call on a worker thread; ``error.field`` goes back to the caller's name."""
    kwargs = dict(call.arguments)
    if idempotency is not None:
        kwargs["idempotency"] = idempotency
    try:
        return await anyio.to_thread.run_sync(call.run, service, kwargs)
    except WontoposError as exc:
        raise speak(exc.renamed_field(call.fields), "sdk") from None


def _handler(service: MemoryService, endpoints: dict[str, Endpoint]) -> Callable[[Request], Any]:
    async def handle(request: Request) -> JSONResponse:
        endpoint = endpoints[request.method if request.method != "HEAD" else "GET"]
        try:
            body = await _body(request, endpoint)
            idempotency = await _idempotency(request, endpoint, body, service)
            call, ignored = endpoint.core_call(body)
            answer = await _run(service, call, idempotency)
        except WontoposError:
            raise
        except Exception:
            logger.exception("%s %s failed unexpectedly", request.method, request.url.path)
            raise internal_error() from None
        if endpoint.reshape is not None:
            answer = endpoint.reshape(answer)
        answer = {**answer, **endpoint.extra}
        if ignored:
            answer["ignored"] = ignored
        headers = {REPLAYED_HEADER: "true"} if answer.get("replayed") is True else None
        return JSONResponse(answer, headers=headers)

    return handle


def _not_implemented(endpoint: str) -> Callable[[Request], Any]:
    async def refuse(request: Request) -> JSONResponse:
        raise NotImplementedAPIError(
            f"{request.method} {request.url.path} ({endpoint}) is an endpoint of the hosted Wontopos service "
            "that this local server does not serve",
            endpoint=endpoint,
        )

    return refuse


_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def rest_routes(service: MemoryService) -> list[Route]:
    """The ``/api/v1`` routes over ``service``: the table's, then the hosted-only 501s."""
    by_path: dict[str, dict[str, Endpoint]] = {}
    for endpoint in ENDPOINTS:
        by_path.setdefault(endpoint.path, {})[endpoint.method] = endpoint
    routes = [
        Route(API_PREFIX + path, _handler(service, endpoints), methods=list(endpoints))
        for path, endpoints in by_path.items()
    ]
    routes.append(Route(API_PREFIX + "/memory/import", _import_handler(service), methods=["POST"]))
    routes += [
        Route(API_PREFIX + path, _not_implemented(name), methods=_ALL_METHODS) for path, name in HOSTED_ONLY.items()
    ]
    return routes


# The import route's query string: its options by the engine's names; ``as`` and ``skip``
# repeat; ``name`` is the file's name (what a one-conversation file's conversation is
# called, and what refusals name); ``register`` and ``dry_run`` are ``true``/``false``.
IMPORT_QUERY = ("user_id", "format", "as", "skip", "register", "user_name", "tz", "start", "dry_run", "name")


def _import_handler(service: MemoryService) -> Callable[[Request], Any]:
    """``POST /api/v1/memory/import``: the export as the body, options in the query string,
    the import's summary as the answer (a dry run first is how the page shows the people)."""
    from wontopos_mcp.config import machine_zone
    from wontopos_mcp.imports.messages import BadExport
    from wontopos_mcp.imports.sources import bytes_source
    from wontopos_mcp.rules.import_options import import_options

    def flag(value: str | None) -> object:
        """``true``/``false`` (absent: false); any other text goes on, for the 400 naming it."""
        if value is None:
            return False
        return {"true": True, "false": False}.get(value, value)

    async def handle(request: Request) -> JSONResponse:
        query = request.query_params
        unknown = sorted(set(query.keys()) - set(IMPORT_QUERY))
        if unknown:
            raise InvalidRequestError(f"unknown query parameter {unknown[0][:60]!r}", field=unknown[0][:60])
        for key in ("user_id", "format", "user_name", "tz", "start", "name"):
            if len(query.getlist(key)) > 1:
                raise InvalidRequestError(f"{key} is given more than once", field=key)
        options = import_options(
            format=query.get("format", "auto"), as_=query.getlist("as"), skip=query.getlist("skip"),
            register=flag(query.get("register")), user_name=query.get("user_name"), tz=query.get("tz"),
            start=query.get("start"), dry_run=flag(query.get("dry_run")), local_zone=machine_zone(),
        )  # fmt: skip
        name = query.get("name") or "upload"
        body = await request.body()
        if not body.strip():
            raise InvalidRequestError(f"{name}: the body is empty: send the export file as the body", field="body")
        try:
            source = bytes_source(name, body)
        except BadExport as exc:
            raise InvalidRequestError(
                f"{name}: {exc.place}: {exc.reason}", field="file", file=name, place=exc.place
            ) from None
        user_id = query.get("user_id")
        answer = await anyio.to_thread.run_sync(lambda: service.import_conversations(source, options, user_id))
        return JSONResponse(answer)

    return handle
