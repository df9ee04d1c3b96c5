"""The MCP tools: every MCP operation of the contract table, made a tool.

The table gives each tool its parameters (types, ranges, defaults and descriptions: the
input schema) and its answer models (the output schema); this module adds one function per
tool: what a model reads (its docstring), its title and hints, and its body, the one call
of the service method it makes, by name, which :func:`_call` runs on a worker thread. The
service owns every rule and returns JSON-ready dicts; a tool sends that dict back as
structured content and the same JSON as text (:func:`mcp.results.json_result`). Refusals
are mapped once, in :meth:`mcp.server.WontoposMCPServer.call_tool`, which turns them into
:func:`mcp.results.error_result`. ``tools/list`` is answered from the listing shipped
with the package (:mod:`mcp.listing`); these are built at the first call.
"""

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Union

import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations

from wontopos_mcp.contract import Operation, operation

from .answers import OrError, answer_models
from .params import parameter
from .results import json_result

if TYPE_CHECKING:
    from wontopos_mcp.engine.service import MemoryService

__all__ = ["tools"]

WAITING_FOR_MODEL = "waiting for the embedding model to load"


Answer = Mapping[str, Any]
# A tool's function: ``service.<method>(**arguments)``, the call its docstring describes.
ToolCall = Callable[..., Answer]


async def _call(
    service: "MemoryService", call: ToolCall, context: Context[Any, Any], **arguments: Any
) -> CallToolResult:
    """Run one tool's call on a worker thread; an argument left as ``None`` is not sent,
    so the service's own default applies. While the call waits for the model (a cold
    start), a caller that sent a ``progressToken`` gets a progress notification about
    once a second (seconds waited, of the wait's bound); the SDK sends nothing to one
    that did not."""

    def report(waited: float, bound: float) -> None:  # on the worker thread
        anyio.from_thread.run(context.report_progress, round(waited, 1), bound, WAITING_FOR_MODEL)

    given = {name: value for name, value in arguments.items() if value is not None}
    with service.reporting_model_waits(report):
        answer = await anyio.to_thread.run_sync(functools.partial(call, service, **given))
    return json_result(answer)


# --- the tools --------------------------------------------------------------------------------


def _description(doc: str | None, values: Mapping[str, str]) -> str:
    """A docstring as a model reads it: paragraphs re-flowed onto one line each, and each
    ``{name}`` of ``values`` replaced. Plain replacement, not ``str.format``: descriptions
    may hold JSON braces.

    Short on purpose: a host shows the model every tool's description on every turn. Each
    says what the tool is for, when to call it rather than its neighbours, and the rule an
    agent gets wrong; what all tools share (stores, the error body) is in the server's
    instructions, and each refusal's message says its own fix."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    text = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


def shown_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """An input schema as a model pays for it, without what says nothing: the ``title``
    pydantic gives the schema and each parameter (``"title": "User Id"``, the name again)
    and ``"additionalProperties": true`` (JSON Schema's default). The arguments are
    validated by the tool's own model, not by this schema."""
    shown = {key: value for key, value in schema.items() if key != "title"}
    properties = shown.get("properties")
    if isinstance(properties, dict):
        shown["properties"] = {
            name: {
                key: value
                for key, value in prop.items()
                if key != "title" and (key, value) != ("additionalProperties", True)
            }
            for name, prop in properties.items()
        }
    return shown


class _Tools:
    """Collects the tool adapters, each made from the contract table: ``@tool(title=...)``
    on a function named after an operation makes that operation a tool. Its input schema
    is the operation's parameters (``params.parameter``: types, ranges, defaults and
    descriptions from the table), its output schema the operation's answer models or the
    error body; the function is the description a model reads (its docstring) and the
    call of the service the tool makes (its body)."""

    def __init__(self, service: "MemoryService", values: Mapping[str, str]) -> None:
        self.service = service
        self.tools: list[Tool] = []
        self.values = values  # the ``{name}`` placeholders of the descriptions

    def __call__(
        self,
        *,
        title: str,
        read_only: bool = False,
        destructive: bool = False,
        idempotent: bool = False,
    ) -> Callable[[ToolCall], Callable[..., Any]]:
        def register(described: ToolCall) -> Callable[..., Any]:
            op = operation(described.__name__)
            assert op.mcp, op.name
            answers = answer_models(op)
            answer = answers[0] if len(answers) == 1 else Union[answers]  # noqa: UP007 - built at run time
            # What the SDK validates a success against and publishes as the output schema.
            adapter = _adapter(self.service, op, described, Annotated[CallToolResult, OrError[answer]])  # type: ignore[valid-type]  # a union built at run time
            built = Tool.from_function(
                adapter,
                name=op.name,
                title=title,
                description=_description(described.__doc__, self.values),
                annotations=ToolAnnotations(
                    title=title,
                    read_only_hint=read_only,
                    destructive_hint=None if read_only else destructive,
                    idempotent_hint=idempotent,
                    open_world_hint=False,
                ),
                structured_output=True,
            )
            built.parameters = shown_schema(built.parameters)
            self.tools.append(built)
            return adapter

        return register


def _adapter(service: "MemoryService", op: Operation, call: ToolCall, returns: Any) -> Callable[..., Any]:
    """The async function the SDK calls for ``op``: keyword arguments as the table lists
    them and ``returns`` (its ``__signature__``, which the SDK reads for the input and
    output schemas), one ``call`` of the service."""

    async def adapter(*, mcp_context: Context[Any, Any], **arguments: Any) -> CallToolResult:
        return await _call(service, call, mcp_context, **arguments)

    # The SDK passes the request's context to the parameter typed ``Context`` and leaves
    # it out of the input schema.
    context = inspect.Parameter("mcp_context", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    parameters = [*(parameter(param) for param in op.params), context]
    adapter.__name__ = adapter.__qualname__ = op.name
    adapter.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
    adapter.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": returns}
    return adapter


def tools(service: "MemoryService", *, speaker_limit: str) -> list[Tool]:
    """Every MCP operation of the contract table as a tool over ``service``;
    ``speaker_limit`` is what the descriptions say for it (the service's setting, or the
    placeholder :mod:`mcp.listing` keeps)."""
    tool = _Tools(service, {"speaker_limit": speaker_limit})

    # -- memories ----------------------------------------------------------------------------

    @tool(title="Add a memory")
    def memory_add(service: "MemoryService", **arguments: Any) -> Answer:
        """Store one memory (a fact, preference, decision or what someone said); call it
        whenever something is worth remembering later.

        `speaker`: "me" is you, the assistant (never registered); anyone else needs
        speaker_register first. Read `status`: "stored" or "duplicate". A changed fact:
        memory_supersede.
        """
        return service.memory_add(**arguments)

    @tool(title="Store a conversation")
    def memory_add_messages(service: "MemoryService", **arguments: Any) -> Answer:
        """Store a conversation, one memory per message under its speaker; call it
        to save a whole exchange instead of one memory_add per message.

        Role "assistant" is you ("me"), role "user" the store's user (untagged); a `name`
        is a registered person instead. One unregistered `name` refuses the whole call:
        speaker_register each person first. system and tool messages are skipped.
        """
        return service.memory_add_messages(**arguments)

    @tool(title="Search memories", read_only=True)
    def memory_search(service: "MemoryService", **arguments: Any) -> Answer:
        """Search memories by meaning; call it before answering anything that may
        depend on earlier conversations.

        Answers come best first: keep that order (`similarity` is not the ranking key). `speaker`: only
        that person's words.
        """
        return service.memory_search(**arguments)

    @tool(title="Recall context for a prompt", read_only=True)
    def memory_recall(service: "MemoryService", **arguments: Any) -> Answer:
        """The best memories for `query`, recent turns and the conversation around the
        best, in one call; call it at the start of a reply that may depend on the past.
        """
        return service.memory_recall(**arguments)

    @tool(title="Get a memory", read_only=True)
    def memory_get(service: "MemoryService", **arguments: Any) -> Answer:
        """Fetch one memory by id; call it to read a memory another answer named
        (duplicate_of, superseded_by).
        """
        return service.memory_get(**arguments)

    @tool(title="List memories", read_only=True)
    def memory_list(service: "MemoryService", **arguments: Any) -> Answer:
        """List every memory of a store, oldest first, replaced versions included; call
        it to review or export a store, not to answer a question (memory_search). While
        `next_cursor` is not null, pass it as cursor.
        """
        return service.memory_list(**arguments)

    @tool(title="Replace a changed fact")
    def memory_supersede(service: "MemoryService", **arguments: Any) -> Answer:
        """Replace a memory whose fact changed with its new version; call it instead
        of memory_add when something stored is no longer true. The old version stays,
        flagged, out of default search.
        """
        return service.memory_supersede(**arguments)

    @tool(title="Forget memories", destructive=True)
    def memory_forget(service: "MemoryService", **arguments: Any) -> Answer:
        """Delete memories permanently: one by `memory_id`, or all of a `speaker`'s with
        `confirm_records`; call it only when asked to forget. by_speaker gives the count to
        confirm; the registration stays (speaker_remove ends it).
        """
        return service.memory_forget(**arguments)

    # -- speakers ----------------------------------------------------------------------------

    @tool(title="Register a speaker", idempotent=True)
    def speaker_register(service: "MemoryService", **arguments: Any) -> Answer:
        """Register a person in a store; call it once per person before storing
        their words. "me" is you, the assistant: never register it. Names are exact ("Bob"
        and "bob" are two people); a store holds up to {speaker_limit} people.
        """
        return service.speaker_register(**arguments)

    @tool(title="List speakers", read_only=True)
    def speakers_list(service: "MemoryService", **arguments: Any) -> Answer:
        """List the people registered in a store with their memory counts; call it to
        check a name's exact spelling. "me" is never listed.
        """
        return service.speakers_list(**arguments)

    @tool(title="What one person said", read_only=True)
    def by_speaker(service: "MemoryService", **arguments: Any) -> Answer:
        """What one person said, newest first, no query; call it to review someone's
        record or before deleting it. While `has_more`, ask for the next page.
        """
        return service.by_speaker(**arguments)

    @tool(title="Unregister a speaker", destructive=True)
    def speaker_remove(service: "MemoryService", **arguments: Any) -> Answer:
        """Unregister a person from a store; call it when someone should no longer be a
        speaker. Their memories stay, untagged; memory_forget deletes them.
        """
        return service.speaker_remove(**arguments)

    # -- stores ------------------------------------------------------------------------------

    @tool(title="Create a store", idempotent=True)
    def store_create(service: "MemoryService", **arguments: Any) -> Answer:
        """Create a store, an isolated memory space for one user, agent or topic; call it
        once before using a new user_id. "default" always exists.
        """
        return service.store_create(**arguments)

    @tool(title="List stores", read_only=True)
    def stores_list(service: "MemoryService", **arguments: Any) -> Answer:
        """List every store; call it to find which user_id to use."""
        return service.stores_list(**arguments)

    @tool(title="Delete a store", destructive=True)
    def store_delete(service: "MemoryService", **arguments: Any) -> Answer:
        """Delete a store with all its memories and speakers, permanently; call it only
        when asked to erase that whole memory space.
        """
        return service.store_delete(**arguments)

    # -- fixing who said it ------------------------------------------------------------------

    @tool(title="Rename a speaker", idempotent=True)
    def speaker_rename(service: "MemoryService", **arguments: Any) -> Answer:
        """Change a registered person's name on every memory; call it to fix a
        misspelt registration. A name already registered: speaker_merge.
        """
        return service.speaker_rename(**arguments)

    @tool(title="Merge two speakers", destructive=True)
    def speaker_merge(service: "MemoryService", **arguments: Any) -> Answer:
        """Make one person of two registered names; call it when someone was
        registered twice ("Bob" and "Robert"): `speaker`'s memories move to `into`.
        """
        return service.speaker_merge(**arguments)

    return tool.tools
