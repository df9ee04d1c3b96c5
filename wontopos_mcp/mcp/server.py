"""The MCP face: ``build_server(service)`` returns an ``MCPServer`` whose tools are thin
adapters over :class:`~wontopos_mcp.engine.service.MemoryService`.

The tools themselves are in :mod:`mcp.tools` (one decorated adapter each), the prompts in
:mod:`mcp.prompts`, the resources in :mod:`mcp.resources`; this module holds the server,
its instructions, the tool profile a session lists (``contract.PROFILES``: a tool outside
it is an unknown tool) and the one error mapping.

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
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from mcp.server import MCPServer
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool, ToolManager
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, GetPromptResult, InputRequiredResult, Resource, ResourceTemplate
from mcp.types import Prompt as MCPPrompt
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

from wontopos_mcp.contract import PROFILES
from wontopos_mcp.errors import InvalidRequestError, WontoposError, internal_error
from wontopos_mcp.rules.json_values import field_path, lone_surrogate_error
from wontopos_mcp.verbs import speak
from wontopos_mcp.version import __version__

from . import prompts, resources
from .listing import described_speaker_limit, listing
from .results import error_result, protocol_error

if TYPE_CHECKING:
    from wontopos_mcp.engine.service import MemoryService

__all__ = ["WontoposMCPServer", "build_server", "error_result"]

logger = logging.getLogger(__name__)

SERVER_NAME = "wontopos-mcp"

INSTRUCTIONS = """\
Long-term memory that knows who said it: facts, preferences, decisions and each person's \
words, recalled by meaning or by person.

Before answering anything that may depend on earlier conversations, call memory_recall or \
memory_search. Store what is worth keeping with memory_add (one statement each), or a whole \
exchange with memory_add_messages.

Speakers: "me" is you, the assistant, never registered. Register every other person once per \
store with speaker_register before storing their words; an unregistered name is refused, so \
a typo never becomes a new person. Names are exact ("Bob" and "bob" are two people; \
speakers_list shows the spellings). Leave speaker out for a fact nobody in particular said.

Stores: `user_id` names an isolated memory space; omit it for "default". Any other store is \
made once with store_create. Nothing crosses between stores.

After a write read `status`: "stored" (with `id`) or "duplicate" (nothing stored: a current \
memory by the same speaker says this, `duplicate_of`). When a fact changes, call \
memory_supersede on the old memory. `redacted` in an answer: secrets were stored as \
[redacted:<kind>].

Errors are results with isError true and the JSON {"type": "error", "status", "error": \
{"type", "message", "field"}}. Branch on status, error.type and error.field, never on the \
message: 400 fix the argument `field` names; 404 the store, speaker or memory does not \
exist; 409 re-read the current value it carries (records_to_delete, superseded_by) and \
retry; 503 retry after retry_after_ms.

Prompts: recall_first, about_person, remember_conversation. Resources: memory://stores, \
memory://{user_id}/speakers, memory://{user_id}/speakers/{speaker}, memory://{user_id}/stats."""

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

    def __init__(
        self,
        listed: list[MCPTool],
        build_tools: Callable[[], list[Tool]],
        *,
        service: "MemoryService",
        **settings: Any,
    ) -> None:
        """``listed``: what ``tools/list`` answers (:mod:`mcp.listing`, the session's
        profile); ``build_tools`` makes the tools, called once, at the first call that
        needs them; ``service`` answers the prompts and resources."""
        super().__init__(**settings)
        self._service = service
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
        return self._parameters.get(name)  # what the tools build (a test keeps them equal)

    async def list_prompts(self) -> list[MCPPrompt]:
        return prompts.listed()

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> GetPromptResult:
        with self._refusals_as_errors():
            return await prompts.render(self._service, name, arguments)
        raise AssertionError("unreachable")

    async def list_resources(self) -> list[Resource]:
        return resources.listed()

    async def list_resource_templates(self) -> list[ResourceTemplate]:
        return resources.templates()

    async def read_resource(self, uri: Any, context: Context[Any, Any] | None = None) -> list[ReadResourceContents]:
        with self._refusals_as_errors(uri=str(uri)):
            return await resources.read(self._service, str(uri))
        raise AssertionError("unreachable")

    @contextmanager
    def _refusals_as_errors(self, **data: Any) -> Iterator[None]:
        """A refusal where MCP has no result to carry it: the JSON-RPC error with the body."""
        try:
            yield
        except WontoposError as exc:
            raise protocol_error(speak(exc, "mcp"), **data) from None

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


def build_server(service: "MemoryService", *, log_level: str = "warning", tools: str = "full") -> WontoposMCPServer:
    """The MCP server over ``service``: its tools (those of the ``tools`` profile),
    prompts, resources, instructions and lifespan."""
    speaker_limit = described_speaker_limit(service)
    profile = set(PROFILES[tools])

    def build_tools() -> list[Tool]:
        from .tools import tools

        return tools(service, speaker_limit=speaker_limit)

    return WontoposMCPServer(
        [tool for tool in listing(speaker_limit=speaker_limit) if tool.name in profile],
        build_tools,
        service=service,
        name=SERVER_NAME,
        title="Wontopos memory",
        description="Memory that knows who said it: offline, speaker-attributed long-term memory for agents.",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=_lifespan(service),
        log_level=log_level.upper(),
    )
