"""The MCP face: ``build_server(service)`` returns an ``MCPServer`` whose tools are thin
adapters over :class:`~wontopos_mcp.engine.service.MemoryService`.

The tools themselves are in :mod:`mcp.tools` (one decorated adapter each); this module
holds the server, its instructions and the one error mapping.

Refusals are mapped in exactly one place, :meth:`WontoposMCPServer.call_tool`, the
public method the SDK calls for every ``tools/call``:

- an unknown tool or an unknown argument: 400 ``invalid_request_error`` naming it;
- arguments the SDK's pydantic validation refuses (type, range, missing): the SDK raises
  ``ToolError`` with the ``ValidationError`` as ``__cause__``; it becomes a 400 whose
  ``field`` is the parameter name;
- a ``WontoposError`` from the service (the SDK wraps it, keeping it as ``__cause__``):
  its own envelope;
- anything else: the one 500 of :func:`errors.internal_error`, logged with its traceback.

A fix in the message is named with the tools' own names (:func:`verbs.speak`).

Each answer is a ``CallToolResult`` with ``is_error=True``, the error body as
``structured_content`` and the same JSON as text. Every output schema is
``{"type": "object", "anyOf": [answer, ErrorEnvelope]}`` so strict clients accept both.

Nothing is built at import time, and this module imports no storage or model code: the
server receives a ready service object, and its lifespan only calls ``service.start()``
(which begins the model load in the background and returns at once), so ``initialize``
and ``tools/list`` never wait for the model.
"""

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool, ToolManager
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, InputRequiredResult
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

from wontopos_mcp.errors import InvalidRequestError, WontoposError, internal_error
from wontopos_mcp.rules.json_values import field_path, lone_surrogate_error
from wontopos_mcp.verbs import speak
from wontopos_mcp.version import __version__

from .listing import described_speaker_limit, listing
from .results import error_result

if TYPE_CHECKING:
    from wontopos_mcp.engine.service import MemoryService

__all__ = ["WontoposMCPServer", "build_server", "error_result"]

logger = logging.getLogger(__name__)

SERVER_NAME = "wontopos-mcp"

INSTRUCTIONS = """\
Long-term memory that knows who said it. Use it to remember facts, preferences, decisions \
and what each person said, and to recall them later by meaning or by person.

Stores: `user_id` names a store, one isolated memory space (per end user, agent or topic). \
Omit it to use the built-in "default" store. Any other store must be created once with \
store_create before use; a call on a store that does not exist answers 404 saying how to \
create it. Nothing ever crosses from one store to another.

Speakers: every memory can carry who said it. "me" is you, the assistant: it is never \
registered and always usable. Register every other person once per store with \
speaker_register before storing their words; an unregistered name is refused, so a typo \
never becomes a new person. Names match exactly ("Bob" and "bob" are two people; \
speakers_list shows the exact spellings). Leave speaker out for a fact nobody in \
particular said.

Typical flow: speaker_register(speaker="Bob") once; memory_add(content=..., speaker="Bob") \
for what Bob said; memory_search(query=..., speaker="Bob") or by_speaker(speaker="Bob") to \
recall only Bob's words. When a stored fact changes, call memory_supersede on the old \
memory instead of adding a contradicting one. memory_add_messages stores a whole chat \
(role "assistant" is "me", role "user" is untagged, `name` a registered person); \
memory_recall gathers prompt-ready context (recent turns, best memories, and the \
conversation around the best) in one call.

After every write read `status`: "stored" means it was stored (with its `id`); \
"duplicate" means nothing was stored because a current memory by the same speaker \
already says this (`duplicate_of` names it).

Errors are results with isError true whose JSON is {"type": "error", "status": <int>, \
"error": {"type": ..., "message": ..., "field": ...}}. Branch on `status`, `error.type` \
and `error.field`, never on the message: 400 fix the argument named by `field`; 404 the \
store, speaker or memory does not exist; 409 re-read and retry (the error carries the \
current value, e.g. `records_to_delete`); 503 the embedding model is still loading: retry \
after `retry_after_ms`."""

# --- the one error mapping ------------------------------------------------------------------

_TYPE_WORDS = {
    "int": "an integer",
    "string": "a string",
    "bool": "true or false",
    "dict": "an object",
    "list": "a list",
    "float": "a number",
}


def _argument_error(schema: Mapping[str, Any], exc: ValidationError) -> InvalidRequestError:
    """The first argument pydantic refused, as a 400 naming it (messages match the service's)."""
    error = exc.errors()[0]
    loc = error.get("loc") or ("arguments",)
    field = str(loc[0])
    where = field_path((field, *loc[1:]))
    kind = error["type"]
    if kind == "missing":
        return InvalidRequestError(f"{field} is required", field=field)
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        prop = schema.get("properties", {}).get(field, {})
        bounds = error.get("ctx") or {}
        low = prop.get("minimum", bounds.get("ge", bounds.get("gt")))
        high = prop.get("maximum", bounds.get("le", bounds.get("lt")))
        span = (
            f"between {low} and {high}"
            if low is not None and high is not None
            else (f"at least {low}" if low is not None else f"at most {high}")
        )
        return InvalidRequestError(f"{field} must be {span}, got {error.get('input')!r}", field=field)
    noun = _TYPE_WORDS.get(kind.split("_")[0])
    if noun is not None and kind.endswith(("_type", "_parsing")):
        return InvalidRequestError(f"{where} must be {noun}", field=field)
    return InvalidRequestError(f"{where}: {error['msg']}", field=field)


class WontoposMCPServer(MCPServer):
    """``MCPServer`` whose every tool call answers the error body on refusal.

    The override is the single point where refusals become results; the SDK's own
    validation, dispatch and output-schema checks run unchanged inside it.
    """

    def __init__(self, listed: list[MCPTool], build_tools: Callable[[], list[Tool]], **settings: Any) -> None:
        """``listed``: what ``tools/list`` answers (:mod:`mcp.listing`); ``build_tools``
        makes the tools it lists, called once, at the first call that needs them."""
        super().__init__(**settings)
        self._listed = listed
        self._parameters = {tool.name: tool.input_schema for tool in listed}
        self._build_tools: Callable[[], list[Tool]] | None = build_tools

    def _tools(self) -> ToolManager:
        """The SDK's tool manager, holding the tools from their first use on."""
        if self._build_tools is not None:
            self._tool_manager = ToolManager(tools=self._build_tools())
            self._build_tools = None
        return self._tool_manager

    async def list_tools(self) -> list[MCPTool]:
        return self._listed

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        tool = self._tools().get_tool(name)
        return None if tool is None else tool.parameters

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            # The wire decoder answers these before dispatch; a call made in-process
            # (Python strings need no JSON) is checked here, before any name is echoed.
            unicode_error = lone_surrogate_error(name, arguments)
            if unicode_error is not None:
                raise unicode_error
            self._check_names(name, arguments)
            self._tools()
            return await super().call_tool(name, arguments, context)
        except MCPError:
            raise  # a protocol-level refusal stays one
        except Exception as exc:  # noqa: BLE001 - every failure becomes an answer; crashes are logged
            return error_result(speak(self._as_wontopos_error(name, exc), "mcp"))

    async def run_streams(self, read_stream: Any, write_stream: Any) -> None:
        """Serve one connection over the given streams, as the SDK's own transports do;
        ``transport`` hands it streams on which every message gets an answer."""
        lowlevel = self._lowlevel_server  # the SDK's transports reach it the same way
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    def _check_names(self, name: str, arguments: Mapping[str, Any]) -> None:
        schema = self._parameters.get(name)
        if schema is None:
            raise InvalidRequestError(
                f"unknown tool {name!r}; the tools are: {', '.join(sorted(self._parameters))}",
                field="name",
                tool=name,
            )
        known = schema.get("properties", {})
        for argument in arguments:
            if argument not in known:
                takes = ", ".join(known) or "no arguments"
                raise InvalidRequestError(f"unknown argument {argument!r}: {name} takes {takes}", field=str(argument))

    def _as_wontopos_error(self, name: str, exc: Exception) -> WontoposError:
        if isinstance(exc, WontoposError):
            return exc
        cause = exc.__cause__
        if isinstance(exc, ToolError) and isinstance(cause, WontoposError):
            return cause  # raised by the service; the SDK wrapped it
        if type(exc) is ToolError and isinstance(cause, ValidationError):
            # Only the arguments' validation is a plain ToolError: a failed check of our
            # own answer is an UnexpectedToolError, a bug that falls through to the 500.
            return _argument_error(self._parameters[name], cause)
        logger.error("tool %r failed unexpectedly", name, exc_info=exc)
        return internal_error()


def _lifespan(service: "MemoryService") -> Callable[[MCPServer], Any]:
    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[dict[str, Any]]:
        # Begins the model load in the background and returns at once: initialize and
        # tools/list answer while the model loads. The service belongs to whoever built
        # it (one per process, shared by every connection), so it is not closed here.
        service.start()
        yield {}

    return lifespan


def build_server(service: "MemoryService", *, log_level: str = "warning") -> WontoposMCPServer:
    """The MCP server over ``service``: its tools, instructions and lifespan."""
    speaker_limit = described_speaker_limit(service)

    def build_tools() -> list[Tool]:
        from .tools import tools

        return tools(service, speaker_limit=speaker_limit)

    return WontoposMCPServer(
        listing(speaker_limit=speaker_limit),
        build_tools,
        name=SERVER_NAME,
        title="Wontopos memory",
        description="Memory that knows who said it: offline, speaker-attributed long-term memory for agents.",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=_lifespan(service),
        log_level=log_level.upper(),
    )
