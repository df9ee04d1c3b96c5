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

_ERRORS = (
    'Errors come back as JSON {"type": "error", "status", "error": {"type", "message", "field"}}: '
    "branch on status, error.type and error.field, never on the message."
)


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
    ``{name}`` of ``values`` (``{errors}``: the sentence on the error body every tool
    shares) replaced. Plain replacement, not ``str.format``: descriptions hold JSON braces."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    text = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
    for name, value in {"errors": _ERRORS, **values}.items():
        text = text.replace("{" + name + "}", value)
    return text


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
            self.tools.append(
                Tool.from_function(
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
            )
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
        If the answer has `redacted`, the server keeps secrets out: those API keys, tokens,
        private keys or passwords were stored as [redacted:<kind>], not as you sent them.

        {errors}
        """
        return service.memory_add(**arguments)

    @tool(title="Store a conversation")
    def memory_add_messages(service: "MemoryService", **arguments: Any) -> Answer:
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
        return service.memory_add_messages(**arguments)

    @tool(title="Search memories", read_only=True)
    def memory_search(service: "MemoryService", **arguments: Any) -> Answer:
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
        return service.memory_search(**arguments)

    @tool(title="Recall context for a prompt", read_only=True)
    def memory_recall(service: "MemoryService", **arguments: Any) -> Answer:
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
        return service.memory_recall(**arguments)

    @tool(title="Get a memory", read_only=True)
    def memory_get(service: "MemoryService", **arguments: Any) -> Answer:
        """Fetch one memory by its id; call it to read a memory another answer named
        (duplicate_of, superseded_by, an id from search).

        An unknown id answers 404 with `memory_id`.

        {errors}
        """
        return service.memory_get(**arguments)

    @tool(title="List memories", read_only=True)
    def memory_list(service: "MemoryService", **arguments: Any) -> Answer:
        """List every memory of a store, oldest first, a page at a time; call it to review or
        export a whole store.

        Superseded memories are included (flagged `is_superseded`). With `speaker`, only
        that person's memories (to export one person's data). While `next_cursor` is not
        null, call again with cursor=next_cursor.

        {errors}
        """
        return service.memory_list(**arguments)

    @tool(title="Replace a changed fact")
    def memory_supersede(service: "MemoryService", **arguments: Any) -> Answer:
        """Replace a memory whose fact has changed with its new version; call it instead of
        memory_add when something stored is no longer true.

        The new memory keeps the old one's speaker, category and conversation_id. The old one
        stays stored, flagged `is_superseded`, and leaves default search. Only the current
        version can be superseded: an old one answers 409 with `superseded_by` (supersede
        that id instead).

        {errors}
        """
        return service.memory_supersede(**arguments)

    @tool(title="Forget memories", destructive=True)
    def memory_forget(service: "MemoryService", **arguments: Any) -> Answer:
        """Delete memories permanently, one by id or all of one speaker's; call it only when
        asked to forget something.

        Give exactly one of: `memory_id`; or `speaker` with `confirm_records` set to the
        `records_to_delete` by_speaker reported. If that number changed since, the answer is
        409 with the current `records_to_delete` and nothing is deleted. Deleting a
        speaker's memories keeps the registration (speaker_remove ends it). Forgetting the
        newest version of a superseded fact makes the previous version current again.

        {errors}
        """
        return service.memory_forget(**arguments)

    # -- speakers ----------------------------------------------------------------------------

    @tool(title="Register a speaker", idempotent=True)
    def speaker_register(service: "MemoryService", **arguments: Any) -> Answer:
        """Register a person in a store; call it once per person before storing or searching
        their words.

        "me" is you, the assistant: never register it (any other spelling of "me", like
        "Me", is refused). Names are exact after trimming surrounding spaces: "Bob" and "bob"
        are two people. Registering an existing name answers status "exists" and changes
        nothing. A store holds up to {speaker_limit} people; past it the answer is 400 with
        `speaker_limit`. Names with invisible characters (zero-width space, variation
        selectors, ...) or a blank other than a plain space inside are refused.
        If the answer has `similar_to`, those registered names look like this one (another
        case, look-alike letters): it is still a new person; if it was meant to be one of
        them, speaker_remove it and use theirs.

        {errors}
        """
        return service.speaker_register(**arguments)

    @tool(title="List speakers", read_only=True)
    def speakers_list(service: "MemoryService", **arguments: Any) -> Answer:
        """List the people registered in a store, with how many memories each has; call it to
        check a name's exact spelling.

        "me" is never listed; it needs no registration.

        {errors}
        """
        return service.speakers_list(**arguments)

    @tool(title="What one person said", read_only=True)
    def by_speaker(service: "MemoryService", **arguments: Any) -> Answer:
        """List what one person said, newest first, without a query; call it to review
        someone's record or before deleting it.

        Untagged memories never appear; superseded ones do (flagged). `records_to_delete` is
        what memory_forget needs as confirm_records to delete all of this speaker's memories.
        While `has_more` is true, call again with before=next_before and
        skip_ids=next_skip_ids.

        {errors}
        """
        return service.by_speaker(**arguments)

    @tool(title="Unregister a speaker", destructive=True)
    def speaker_remove(service: "MemoryService", **arguments: Any) -> Answer:
        """Unregister a person from a store; call it when someone should no longer be a
        speaker there.

        Their memories stay but lose the tag (they become untagged; `memories_untagged`
        counts them). To delete their memories instead, first use memory_forget with speaker
        and confirm_records. Removing "me" or an unregistered name is refused.

        {errors}
        """
        return service.speaker_remove(**arguments)

    # -- stores ------------------------------------------------------------------------------

    @tool(title="Create a store", idempotent=True)
    def store_create(service: "MemoryService", **arguments: Any) -> Answer:
        """Create a store, an isolated memory space for one user, agent or topic; call it once
        before using a new user_id.

        Lookup ignores case ("Alice" is "alice"); ids differing only in ".", "_" or "-"
        cannot both exist (409 with `conflicts_with`). Creating an existing store answers
        status "exists". The "default" store always exists.

        {errors}
        """
        return service.store_create(**arguments)

    @tool(title="List stores", read_only=True)
    def stores_list(service: "MemoryService", **arguments: Any) -> Answer:
        """List every store with its creation time and memory count; call it to find which user_id to use.

        {errors}
        """
        return service.stores_list(**arguments)

    @tool(title="Delete a store", destructive=True)
    def store_delete(service: "MemoryService", **arguments: Any) -> Answer:
        """Delete a store with all its memories and speakers, permanently; call it only when
        asked to erase that whole memory space.

        `user_id` is required. The "default" store is emptied and goes on existing.

        {errors}
        """
        return service.store_delete(**arguments)

    # -- fixing who said it ------------------------------------------------------------------

    @tool(title="Rename a speaker", idempotent=True)
    def speaker_rename(service: "MemoryService", **arguments: Any) -> Answer:
        """Change a registered person's name everywhere; call it to fix a misspelt
        registration or when someone should go by another name.

        Every memory of `speaker` (superseded ones included) is re-tagged `new_name` and
        the registration renamed, at once. If `new_name` is already registered the answer
        is 409: use speaker_merge to make the two one person. "me" cannot be renamed.

        {errors}
        """
        return service.speaker_rename(**arguments)

    @tool(title="Merge two speakers", destructive=True)
    def speaker_merge(service: "MemoryService", **arguments: Any) -> Answer:
        """Make one person of two registered names; call it when someone was registered
        twice (say "Bob" and "Robert").

        `speaker`'s memories (superseded ones included) are re-tagged `into`, and
        `speaker`'s registration ends. Pass as confirm_records the `records_to_delete`
        by_speaker just reported for `speaker`; if it changed since, the answer is 409 with
        the current number and nothing changes. Memories that now restate each other stay
        two memories.

        {errors}
        """
        return service.speaker_merge(**arguments)

    return tool.tools
