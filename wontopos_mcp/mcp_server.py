"""The MCP face: ``build_server(service)`` returns an ``MCPServer`` whose tools are thin
adapters over :class:`~wontopos_mcp.service.MemoryService`.

Each tool is one decorated function: its signature is the input schema, its docstring the
description a model reads, and its body one call to the service on a worker thread. The
service owns every rule and returns JSON-ready dicts; a tool sends that dict back as
structured content (and the same JSON as text).

Refusals are mapped in exactly one place, :meth:`WontoposMCPServer.call_tool`, the
public method the SDK calls for every ``tools/call``:

- an unknown tool or an unknown argument: 400 ``invalid_request_error`` naming it;
- arguments the SDK's pydantic validation refuses (type, range, missing): the SDK raises
  ``ToolError`` with the ``ValidationError`` as ``__cause__``; it becomes a 400 whose
  ``field`` is the parameter name;
- a ``WontoposError`` from the service (the SDK wraps it, keeping it as ``__cause__``):
  its own envelope;
- anything else: the one 500 of :func:`errors.internal_error`, logged with its traceback.

Each answer is a ``CallToolResult`` with ``is_error=True``, the SPEC error body as
``structured_content`` and the same JSON as text. Every output schema is
``{"type": "object", "anyOf": [answer, ErrorEnvelope]}`` so strict clients accept both.

Nothing is built at import time, and this module imports no storage or model code: the
server receives a ready service object, and its lifespan only calls ``service.start()``
(which begins the model load in the background and returns at once), so ``initialize``
and ``tools/list`` never wait for the model.
"""

import functools
import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any

import anyio.to_thread
from annotated_types import Ge
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field, Strict, ValidationError, WrapValidator

from . import __version__
from .contract import MAX_CONTENT_CHARS, MAX_MESSAGES, Param, operation
from .errors import InvalidRequestError, WontoposError, internal_error
from .jsonrpc import field_path, lone_surrogate_error
from .models import (
    BySpeakerAnswer,
    MemoryAddAnswer,
    MemoryAddMessagesAnswer,
    MemoryDuplicateAnswer,
    MemoryForgetAnswer,
    MemoryGetAnswer,
    MemoryListAnswer,
    MemoryRecallAnswer,
    MemorySearchAnswer,
    MemorySupersedeAnswer,
    OrError,
    SpeakerRegisterAnswer,
    SpeakerRemoveAnswer,
    SpeakersListAnswer,
    StoreCreateAnswer,
    StoreDeleteAnswer,
    StoresListAnswer,
)

if TYPE_CHECKING:
    from .service import MemoryService

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

_ERRORS = (
    'Errors come back as JSON {"type": "error", "status", "error": {"type", "message", "field"}}: '
    "branch on status, error.type and error.field, never on the message."
)

# --- parameters: their schema is the documentation; the service checks them again --------


def _absent_is_none(value: Any, handler: Callable[[Any], Any]) -> Any:
    return None if value is None else handler(value)


def _drop_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def _optional(kind: Any, description: str, *constraints: Any) -> Any:
    """An optional parameter: omitted (or null) means "not given", so the service's
    default applies; any other value must be a ``kind``.

    The annotation is ``kind`` itself, not ``kind | None``, on purpose: the SDK
    JSON-decodes string arguments whose annotation is not exactly ``str`` (a workaround
    for clients that send objects as JSON text), which would turn a store or speaker
    literally named ``null`` into "not given". ``constraints`` (``Strict()``, ``Ge(0)``)
    apply to a given value, inside the null check.
    """
    metadata = (
        *constraints,
        WrapValidator(_absent_is_none),
        Field(description=description, json_schema_extra=_drop_default),
    )
    return Annotated[(kind, *metadata)]


def _optional_text(description: str) -> Any:
    return _optional(str, description)


def _limit(param: Param) -> Any:
    """An integer parameter with its range and default from the contract table."""
    return Annotated[
        int, Field(strict=True, ge=param.low, le=param.high, description=f"{param.description} ({param.span}).")
    ]


def _required_text(op: str, name: str) -> Any:
    return Annotated[str, Field(description=_given(op, name))]


def _given(op: str, name: str) -> str:
    """A parameter's description, from the contract table."""
    return operation(op).param(name).description


UserId = _optional_text(_given("speakers_list", "user_id"))


MESSAGE_ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {
            "type": "string",
            "enum": ["user", "assistant", "system", "tool"],
            "description": 'user: the store\'s own user (untagged) unless `name` is given; assistant: you ("me") '
            "unless `name` is given; system and tool messages are skipped.",
        },
        "name": {
            "type": "string",
            "description": "A person registered with speaker_register who said this (user or assistant role).",
        },
        "content": {"type": "string", "description": f"What was said (at most {MAX_CONTENT_CHARS:,} characters)."},
    },
    "required": ["role", "content"],
    "additionalProperties": False,
}


def _messages_schema(schema: dict[str, Any]) -> None:
    # The service checks each message (and names it: `messages[2].role`); the schema
    # documents the shape for the model.
    schema.update(items=MESSAGE_ITEM_SCHEMA, minItems=1, maxItems=MAX_MESSAGES)


Messages = Annotated[
    list[Any],
    Strict(),
    Field(description=_given("memory_add_messages", "messages"), json_schema_extra=_messages_schema),
]


# --- results ------------------------------------------------------------------------------


def _json_result(payload: Mapping[str, Any], *, is_error: bool = False) -> CallToolResult:
    """The same JSON as text (what the model reads) and as structured content (what the
    host reads)."""
    text = json.dumps(payload, ensure_ascii=False, default=str)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=json.loads(text),
        is_error=is_error,
    )


def error_result(exc: WontoposError) -> CallToolResult:
    """A refusal as MCP carries it: ``isError`` and the SPEC error body."""
    return _json_result(exc.envelope(), is_error=True)


async def _call(method: Callable[..., dict[str, Any]], **arguments: Any) -> CallToolResult:
    """Run one service call on a worker thread; an argument left as ``None`` is not sent,
    so the service's own default applies."""
    given = {name: value for name, value in arguments.items() if value is not None}
    answer = await anyio.to_thread.run_sync(functools.partial(method, **given))
    return _json_result(answer)


# --- the one error mapping ------------------------------------------------------------------

_TYPE_WORDS = {
    "int": "an integer",
    "string": "a string",
    "bool": "true or false",
    "dict": "an object",
    "list": "a list",
    "float": "a number",
}


def _argument_error(tool: Tool, exc: ValidationError) -> InvalidRequestError:
    """The first argument pydantic refused, as a 400 naming it (messages match the service's)."""
    error = exc.errors()[0]
    loc = error.get("loc") or ("arguments",)
    field = str(loc[0])
    where = field_path((field, *loc[1:]))
    kind = error["type"]
    if kind == "missing":
        return InvalidRequestError(f"{field} is required", field=field)
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        prop = tool.parameters.get("properties", {}).get(field, {})
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
    """``MCPServer`` whose every tool call answers SPEC's envelope on refusal.

    The override is the single point where refusals become results; the SDK's own
    validation, dispatch and output-schema checks run unchanged inside it.
    """

    def __init__(self, tools: list[Tool], **settings: Any) -> None:
        super().__init__(tools=tools, **settings)
        self._wontopos_tools = {tool.name: tool for tool in tools}

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
            return await super().call_tool(name, arguments, context)
        except MCPError:
            raise  # a protocol-level refusal stays one
        except Exception as exc:  # noqa: BLE001 - every failure becomes an answer; crashes are logged
            return error_result(self._as_wontopos_error(name, exc))

    async def run_streams(self, read_stream: Any, write_stream: Any) -> None:
        """Serve one connection over the given streams, as the SDK's own transports do;
        ``transport`` hands it streams on which every message gets an answer."""
        lowlevel = self._lowlevel_server  # the SDK's transports reach it the same way
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    def _check_names(self, name: str, arguments: Mapping[str, Any]) -> None:
        tool = self._wontopos_tools.get(name)
        if tool is None:
            raise InvalidRequestError(
                f"unknown tool {name!r}; the tools are: {', '.join(sorted(self._wontopos_tools))}",
                field="name",
                tool=name,
            )
        known = tool.parameters.get("properties", {})
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
            return _argument_error(self._wontopos_tools[name], cause)
        logger.error("tool %r failed unexpectedly", name, exc_info=exc)
        return internal_error()


# --- the tools --------------------------------------------------------------------------------


def _description(doc: str | None, values: Mapping[str, str]) -> str:
    """A docstring as a model reads it: paragraphs re-flowed onto one line each, and each
    ``{name}`` of ``values`` (``{errors}``: the sentence on the error body every tool
    shares) replaced. Plain replacement, not ``str.format``: descriptions hold JSON braces."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    text = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
    for name, value in {"errors": _ERRORS, **values}.items():
        text = text.replace("{" + name + "}", value)
    return text


class _Tools:
    """Collects the tool adapters: ``@tool(Answer, title=...)`` on an async function makes
    it a tool. Its name is the function's, its input schema the signature, its
    description the docstring, and its output schema ``Answer`` or the error body."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.tools: list[Tool] = []
        self.values = values  # the ``{name}`` placeholders of the descriptions

    def __call__(
        self,
        answer: Any,
        *,
        title: str,
        read_only: bool = False,
        destructive: bool = False,
        idempotent: bool = False,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            # What the SDK validates a success against and publishes as the output schema.
            fn.__annotations__["return"] = Annotated[CallToolResult, OrError[answer]]
            self.tools.append(
                Tool.from_function(
                    fn,
                    title=title,
                    description=_description(fn.__doc__, self.values),
                    annotations=ToolAnnotations(
                        title=title,
                        read_only_hint=read_only,
                        destructive_hint=None if read_only else destructive,
                        idempotent_hint=idempotent,
                        open_world_hint=False,
                    ),
                    structured_output=True,
                )
            )
            return fn

        return register


def _speaker_limit(service: "MemoryService") -> str:
    """How many people a store may register, as the description says it: the service's
    setting (a stand-in service without one gets the setting's name)."""
    limit = getattr(service, "speaker_limit", None)
    return str(limit) if isinstance(limit, int) else "`speaker_limit` (the server's setting)"


def _tools(service: "MemoryService") -> list[Tool]:
    tool = _Tools({"speaker_limit": _speaker_limit(service)})
    # The operations whose defaults the signatures below repeat as Python defaults.
    search, recall = operation("memory_search"), operation("memory_recall")
    listing, paging = operation("memory_list"), operation("by_speaker")

    # -- memories ----------------------------------------------------------------------------

    @tool(MemoryAddAnswer | MemoryDuplicateAnswer, title="Add a memory")
    async def memory_add(
        content: _required_text("memory_add", "content"),
        speaker: _optional_text(_given("memory_add", "speaker")) = None,
        category: _optional_text(_given("memory_add", "category")) = None,
        event_date: _optional_text(_given("memory_add", "event_date")) = None,
        conversation_id: _optional_text(_given("memory_add", "conversation_id")) = None,
        user_id: UserId = None,
    ) -> CallToolResult:
        """Store one memory (a fact, preference, decision, or what someone said); call it
        whenever something is worth remembering later.

        Set `speaker` to who said it: "me" for yourself (never registered), or a person
        registered first with speaker_register; an unregistered name is refused (400, field
        "speaker") and nothing is stored. Omit speaker for an untagged fact. Store each
        person's words under their own name, one statement per memory.

        Read `status` in the answer: "stored" (with the new `id`), or "duplicate": nothing
        was stored because a current memory by the same speaker already says this
        (`duplicate_of` is its id). A statement that differs in any detail (another day,
        number, name) is stored. When a stored fact changed, use memory_supersede instead.

        {errors}
        """
        return await _call(
            service.memory_add,
            content=content,
            speaker=speaker,
            category=category,
            event_date=event_date,
            conversation_id=conversation_id,
            user_id=user_id,
        )

    @tool(MemoryAddMessagesAnswer, title="Store a conversation")
    async def memory_add_messages(
        messages: Messages,
        conversation_id: _optional_text(_given("memory_add_messages", "conversation_id")) = None,
        user_id: UserId = None,
    ) -> CallToolResult:
        """Store a conversation (chat messages), one memory per message under its speaker;
        call it to remember a whole exchange at once instead of one memory_add per message.

        Who said each message comes from its role and `name`: role "assistant" without
        a name is you ("me"); "assistant" with a name is that registered person; role
        "user" is the store's own user, untagged unless `name` gives a registered person.
        Every `name` must be registered first with speaker_register: one unregistered name
        anywhere refuses the whole call (400, field "messages[i].name", with `speaker`) and
        nothing is stored. "system" and "tool" messages are skipped: never stored, no entry
        in `results`, and their `name` is not checked.

        All messages share `conversation_id` (the answer gives it). `results` has one
        answer per stored message, in order: read each `status`: "stored" (with its `id`)
        or "duplicate" (a current memory of the same speaker from another conversation
        already says this; `duplicate_of` is its id). Repeating yourself within one
        conversation ("OK." twice) stores both turns.

        {errors}
        """
        return await _call(
            service.memory_add_messages, messages=messages, conversation_id=conversation_id, user_id=user_id
        )

    @tool(MemorySearchAnswer, title="Search memories", read_only=True)
    async def memory_search(
        query: _required_text("memory_search", "query"),
        speaker: _optional_text(_given("memory_search", "speaker")) = None,
        limit: _limit(search.param("limit")) = search.default("limit"),
        filters: _optional(dict[str, Any], _given("memory_search", "filters"), Strict()) = None,
        include_superseded: Annotated[
            bool, Field(strict=True, description=_given("memory_search", "include_superseded"))
        ] = search.default("include_superseded"),
        user_id: UserId = None,
    ) -> CallToolResult:
        """Search memories by meaning; call it before answering anything that may depend on
        what you or others said before.

        Returns the `limit` closest memories, best first: keep that order. Each memory's
        `similarity` is its cosine closeness to the query, not the ranking key; do not re-sort
        by it. With
        `speaker`, only that speaker's words come back, never another's ("me" for yours;
        another name must be registered, else 404). Memories a later version superseded are
        left out unless include_superseded is true.

        {errors}
        """
        return await _call(
            service.memory_search,
            query=query,
            speaker=speaker,
            limit=limit,
            filters=filters,
            include_superseded=include_superseded,
            user_id=user_id,
        )

    @tool(MemoryRecallAnswer, title="Recall context for a prompt", read_only=True)
    async def memory_recall(
        query: _required_text("memory_recall", "query"),
        limit: _limit(recall.param("limit")) = recall.default("limit"),
        context_limit: _limit(recall.param("context_limit")) = recall.default("context_limit"),
        user_id: UserId = None,
    ) -> CallToolResult:
        """Gather prompt-ready context in one call: recent conversation turns, the memories
        that best match `query`, and the conversation around the best one; call it at the
        start of a reply that may depend on earlier conversations.

        `long_term.memories` is what memory_search answers for `query` (best first,
        superseded ones left out). `context.around_top_memory` is up to `context_limit`
        lines from the best memory's conversation (or, when it has none, the memories
        stored just before and after it), in order, centred on it: each starts
        "[before] ", "[match] " or "[after] ", then "[Bob] " or "[me] " when the line has a
        speaker, then the text. `short_term.turns` is the store's last `context_limit`
        turns stored with memory_add_messages, oldest first. context_limit 0 returns no
        turns and no lines.

        {errors}
        """
        return await _call(
            service.memory_recall, query=query, limit=limit, context_limit=context_limit, user_id=user_id
        )

    @tool(MemoryGetAnswer, title="Get a memory", read_only=True)
    async def memory_get(
        memory_id: _required_text("memory_get", "memory_id"), user_id: UserId = None
    ) -> CallToolResult:
        """Fetch one memory by its id; call it to read a memory another answer named
        (duplicate_of, superseded_by, an id from search).

        An unknown id answers 404 with `memory_id`.

        {errors}
        """
        return await _call(service.memory_get, memory_id=memory_id, user_id=user_id)

    @tool(MemoryListAnswer, title="List memories", read_only=True)
    async def memory_list(
        limit: _limit(listing.param("limit")) = listing.default("limit"),
        cursor: _optional_text(_given("memory_list", "cursor")) = None,
        user_id: UserId = None,
    ) -> CallToolResult:
        """List every memory of a store, oldest first, a page at a time; call it to review or
        export a whole store.

        Superseded memories are included (flagged `is_superseded`). While `next_cursor` is
        not null, call again with cursor=next_cursor.

        {errors}
        """
        return await _call(service.memory_list, limit=limit, cursor=cursor, user_id=user_id)

    @tool(MemorySupersedeAnswer, title="Replace a changed fact")
    async def memory_supersede(
        memory_id: _required_text("memory_supersede", "memory_id"),
        content: _required_text("memory_supersede", "content"),
        user_id: UserId = None,
    ) -> CallToolResult:
        """Replace a memory whose fact has changed with its new version; call it instead of
        memory_add when something stored is no longer true.

        The new memory keeps the old one's speaker, category and conversation_id. The old one
        stays stored, flagged `is_superseded`, and leaves default search. Only the current
        version can be superseded: an old one answers 409 with `superseded_by` (supersede
        that id instead).

        {errors}
        """
        return await _call(service.memory_supersede, memory_id=memory_id, content=content, user_id=user_id)

    @tool(MemoryForgetAnswer, title="Forget memories", destructive=True)
    async def memory_forget(
        memory_id: _optional_text(_given("memory_forget", "memory_id")) = None,
        speaker: _optional_text(_given("memory_forget", "speaker")) = None,
        confirm_records: _optional(
            int,
            _given("memory_forget", "confirm_records"),
            Strict(),
            Ge(operation("memory_forget").param("confirm_records").low),
        ) = None,
        user_id: UserId = None,
    ) -> CallToolResult:
        """Delete memories permanently, one by id or all of one speaker's; call it only when
        asked to forget something.

        Give exactly one of: `memory_id`; or `speaker` with `confirm_records` set to the
        `records_to_delete` by_speaker reported. If that number changed since, the answer is
        409 with the current `records_to_delete` and nothing is deleted. Deleting a
        speaker's memories keeps the registration (speaker_remove ends it). Forgetting the
        newest version of a superseded fact makes the previous version current again.

        {errors}
        """
        return await _call(
            service.memory_forget,
            memory_id=memory_id,
            speaker=speaker,
            confirm_records=confirm_records,
            user_id=user_id,
        )

    # -- speakers ----------------------------------------------------------------------------

    @tool(SpeakerRegisterAnswer, title="Register a speaker", idempotent=True)
    async def speaker_register(
        speaker: _required_text("speaker_register", "speaker"),
        user_id: UserId = None,
    ) -> CallToolResult:
        """Register a person in a store; call it once per person before storing or searching
        their words.

        "me" is you, the assistant: never register it (any other spelling of "me", like
        "Me", is refused). Names are exact after trimming surrounding spaces: "Bob" and "bob"
        are two people. Registering an existing name answers status "exists" and changes
        nothing. A store holds up to {speaker_limit} people; past it the answer is 400 with
        `speaker_limit`.

        {errors}
        """
        return await _call(service.speaker_register, speaker=speaker, user_id=user_id)

    @tool(SpeakersListAnswer, title="List speakers", read_only=True)
    async def speakers_list(user_id: UserId = None) -> CallToolResult:
        """List the people registered in a store, with how many memories each has; call it to
        check a name's exact spelling.

        "me" is never listed; it needs no registration.

        {errors}
        """
        return await _call(service.speakers_list, user_id=user_id)

    @tool(BySpeakerAnswer, title="What one person said", read_only=True)
    async def by_speaker(
        speaker: _required_text("by_speaker", "speaker"),
        limit: _limit(paging.param("limit")) = paging.default("limit"),
        before: _optional_text(_given("by_speaker", "before")) = None,
        skip_ids: _optional(list[str], _given("by_speaker", "skip_ids"), Strict()) = None,
        user_id: UserId = None,
    ) -> CallToolResult:
        """List what one person said, newest first, without a query; call it to review
        someone's record or before deleting it.

        Untagged memories never appear; superseded ones do (flagged). `records_to_delete` is
        what memory_forget needs as confirm_records to delete all of this speaker's memories.
        While `has_more` is true, call again with before=next_before and
        skip_ids=next_skip_ids.

        {errors}
        """
        return await _call(
            service.by_speaker, speaker=speaker, limit=limit, before=before, skip_ids=skip_ids, user_id=user_id
        )

    @tool(SpeakerRemoveAnswer, title="Unregister a speaker", destructive=True)
    async def speaker_remove(
        speaker: _required_text("speaker_remove", "speaker"),
        user_id: UserId = None,
    ) -> CallToolResult:
        """Unregister a person from a store; call it when someone should no longer be a
        speaker there.

        Their memories stay but lose the tag (they become untagged; `memories_untagged`
        counts them). To delete their memories instead, first use memory_forget with speaker
        and confirm_records. Removing "me" or an unregistered name is refused.

        {errors}
        """
        return await _call(service.speaker_remove, speaker=speaker, user_id=user_id)

    # -- stores ------------------------------------------------------------------------------

    @tool(StoreCreateAnswer, title="Create a store", idempotent=True)
    async def store_create(
        user_id: _optional_text(_given("store_create", "user_id")) = None,
    ) -> CallToolResult:
        """Create a store, an isolated memory space for one user, agent or topic; call it once
        before using a new user_id.

        Lookup ignores case ("Alice" is "alice"); ids differing only in ".", "_" or "-"
        cannot both exist (409 with `conflicts_with`). Creating an existing store answers
        status "exists". The "default" store always exists.

        {errors}
        """
        arguments = operation("store_create").with_face_defaults({"user_id": user_id})
        return await _call(service.store_create, **arguments)

    @tool(StoresListAnswer, title="List stores", read_only=True)
    async def stores_list() -> CallToolResult:
        """List every store with when it was created; call it to find which user_id to use.

        {errors}
        """
        return await _call(service.stores_list)

    @tool(StoreDeleteAnswer, title="Delete a store", destructive=True)
    async def store_delete(
        user_id: _required_text("store_delete", "user_id"),
    ) -> CallToolResult:
        """Delete a store with all its memories and speakers, permanently; call it only when
        asked to erase that whole memory space.

        `user_id` is required. The "default" store is emptied and goes on existing.

        {errors}
        """
        return await _call(service.store_delete, user_id=user_id)

    return tool.tools


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
    return WontoposMCPServer(
        _tools(service),
        name=SERVER_NAME,
        title="Wontopos memory",
        description="Memory that knows who said it: offline, speaker-attributed long-term memory for agents.",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=_lifespan(service),
        log_level=log_level.upper(),
    )
