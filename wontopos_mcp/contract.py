"""The contract table: every operation the engine offers, defined once for every face.

One :class:`Operation` per call (the 17 MCP tools, and the REST/library-only
``delete_all``, ``add_turn``, ``add_bulk``, ``add_many`` and the store's own state:
``stats``, ``history``, ``lineage``, ``revisions``) gives its parameters with
their defaults, ranges and size limits, the REST route and the one table that maps the
REST names onto the core's (``max_results`` -> ``limit``, ``old_memory_id``/
``new_content`` -> ``memory_id``/``content``, ``metadata.*`` -> the memory fields), the
``Memory`` method, and the answer types (names of :mod:`wontopos_mcp.rules.answers`, the
``TypedDict``s the service returns, whose pydantic models ``mcp.answers.answer_models``
derives).

Beside the operations: the tool profiles a session may list (``PROFILES``), and the MCP
resources (``RESOURCES``) and prompts (``PROMPTS``), each served by an operation of the
table, so no rule is written twice.

The faces read it: ``mcp.server`` builds each tool parameter's ``Field(ge, le,
description)`` and Python default from it, ``rest`` its endpoint names, ``library`` its
defaults and renamed fields, ``cli.commands`` the CLI's help and defaults. It is pure data:
it imports nothing of ``mcp``, ``starlette`` or ``uvicorn``, and no storage or model.

Size limits are the core's own constants, imported from the modules that check them (one
literal each). The ranges and defaults (``limit`` 1-20, default 10 ...) are written only
here: the core checks integers with :meth:`Param.integer` and takes its signature
defaults from the table, so this module sits in the core, below the operations that use
it; ``tests/test_contract.py`` proves each face and the core agree with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from wontopos_mcp.rules import validation as v
from wontopos_mcp.rules.batch_items import MAX_BATCH_ITEMS, MAX_BULK_CHARS
from wontopos_mcp.rules.conversation import MAX_MESSAGES, MAX_MESSAGES_CHARS
from wontopos_mcp.rules.names import DEFAULT_STORE, MAX_SPEAKER_CHARS
from wontopos_mcp.rules.validation import MAX_CONTENT_CHARS, MAX_LABEL_CHARS, MAX_QUERY_CHARS, MAX_SKIP_IDS

__all__ = [
    "DEFAULT_CATEGORY",
    "DEFAULT_STORE",
    "MAX_BATCH_ITEMS",
    "MAX_BULK_CHARS",
    "MAX_CONTENT_CHARS",
    "MAX_LABEL_CHARS",
    "MAX_MESSAGES",
    "MAX_MESSAGES_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_SKIP_IDS",
    "MAX_SPEAKER_CHARS",
    "OPERATIONS",
    "PROFILES",
    "PROMPTS",
    "RESOURCES",
    "Operation",
    "Param",
    "Prompt",
    "Reading",
    "Rest",
    "operation",
]

Kind = Literal["text", "integer", "flag", "names", "object", "messages"]
DEFAULT_CATEGORY = "general"  # the category of a memory stored without one


@dataclass(frozen=True)
class Param:
    """One parameter as the core names it.

    ``default`` is the value the core uses when the parameter is omitted (``None``: no
    value, "not given"); ``low``/``high`` bound an integer; ``max_chars``/``max_items``
    bound text and lists. ``description`` is the copy a model (MCP) or a human (CLI)
    reads; :attr:`span` adds the range. ``kind`` is the JSON type a face declares:
    ``text``, ``integer`` (any parameter with a ``low`` bound), ``flag``, ``names`` (a
    list of strings), ``object`` or ``messages`` (conversation messages).
    """

    name: str
    description: str
    required: bool = False
    default: Any = None
    low: int | None = None
    high: int | None = None
    max_chars: int | None = None
    max_items: int | None = None
    kind: Kind = "text"

    def __post_init__(self) -> None:
        if self.low is not None:
            object.__setattr__(self, "kind", "integer")

    def integer(self, value: object) -> int:
        """``value`` checked against this parameter's range: the core's one check of it."""
        assert self.low is not None, f"{self.name} is not an integer parameter"
        return v.integer(value, field=self.name, low=self.low, high=self.high)

    @property
    def span(self) -> str:
        """``1-20, default 10``: the range and default as every face's help writes them."""
        bounds = f"{self.low}-{self.high}" if self.high is not None else f"at least {self.low}"
        return bounds if self.default is None else f"{bounds}, default {self.default}"


@dataclass(frozen=True)
class Rest:
    """The REST route of an operation and the names it accepts: caller's name -> core name
    (``metadata.speaker`` for a key inside ``metadata``)."""

    method: str
    path: str
    names: Mapping[str, str]

    def caller_names(self) -> dict[str, str]:
        """Core name -> the caller's, for the names that differ (to map ``error.field`` back)."""
        return {core: rest for rest, core in self.names.items() if rest != core}


@dataclass(frozen=True)
class Operation:
    """One call of the engine: ``core`` is the service method the faces call (each face
    writes that call out by name, so mypy checks it; ``tests/test_contract.py`` checks it
    is this one).

    ``mcp`` says whether it is an MCP tool (of the same name); ``library`` is its
    ``Memory`` method (and the SDK ``Client``'s); ``cli.main`` its ``wontopos-mcp`` command,
    ``{name}`` standing for a positional argument (the others are ``--flags``);
    ``answers`` names its answer types in ``rules/answers.py``. Every default is the core's
    own (a face passes ``None`` through for a parameter its caller left out).
    """

    name: str
    core: str
    params: tuple[Param, ...]
    answers: tuple[str, ...]
    mcp: bool = True
    library: str | None = None
    rest: Rest | None = None
    cli: str | None = None

    def param(self, name: str) -> Param:
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(f"{self.name} has no parameter {name!r}")

    def default(self, name: str) -> Any:
        return self.param(name).default

    def caller_names(self) -> dict[str, str]:
        """Core name -> the name SDK callers use (REST body, library), where they differ."""
        return {} if self.rest is None else self.rest.caller_names()


def _names(*same: str, **renamed: str) -> dict[str, str]:
    """Caller's name -> core name: ``same`` names pass unchanged, ``renamed`` as given."""
    return {**{name: name for name in same}, **renamed}


MEMORY_FIELDS = ("speaker", "category", "event_date", "conversation_id")  # what ``metadata`` may carry
METADATA_NAMES = {f"metadata.{name}": name for name in MEMORY_FIELDS}


def split_metadata(metadata: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The one ``metadata`` rule, for REST and the library alike: (the memory fields
    it carries, the other keys, dropped and listed in the answer's ``ignored``)."""
    kept = {name: value for name, value in metadata.items() if name in MEMORY_FIELDS}
    return kept, sorted(name for name in metadata if name not in MEMORY_FIELDS)


# -- parameters several operations share -----------------------------------------------------------

USER_ID = Param("user_id", 'The store; omit for "default".', default=DEFAULT_STORE)
QUERY = Param("query", "What to look for, any language.", required=True, max_chars=MAX_QUERY_CHARS)
MEMORY_ID = Param("memory_id", "The memory's id.", required=True, max_chars=MAX_LABEL_CHARS)
SPEAKER = Param(
    "speaker",
    '"me" (you) or a registered name, exact spelling.',
    required=True,
    max_chars=MAX_SPEAKER_CHARS,
)
CONTENT = Param(
    "content",
    "The text to remember.",
    required=True,
    max_chars=MAX_CONTENT_CHARS,
)
CATEGORY = Param("category", f'A label (default "{DEFAULT_CATEGORY}").', max_chars=MAX_LABEL_CHARS)
EVENT_DATE = Param("event_date", "When it happened: YYYY-MM-DD or RFC 3339.")
CONVERSATION_ID = Param("conversation_id", "Its conversation, if any.", max_chars=MAX_LABEL_CHARS)
MESSAGES = Param(
    "messages",
    "The conversation, oldest first.",
    required=True,
    max_items=MAX_MESSAGES,
    max_chars=MAX_MESSAGES_CHARS,
    kind="messages",
)
SEARCH_LIMIT = Param("limit", "How many memories", default=10, low=1, high=20)
RECALL_LIMIT = Param("limit", "How many long-term memories", default=10, low=1, high=20)
CONTEXT_LIMIT = Param(
    "context_limit", "How many recent turns and context lines",
    default=10, low=0, high=20,
)  # fmt: skip
LIST_LIMIT = Param("limit", "How many memories per page", default=100, low=1, high=500)
AS_OF = Param(
    "as_of",
    "The store as it was then: YYYY-MM-DD or RFC 3339.",
    max_chars=MAX_LABEL_CHARS,
)
MAX_CHARS = Param(
    "max_chars",
    "Most characters of memory text.",
    low=1,
    high=200_000,
)
BY_SPEAKER_LIMIT = Param("limit", "Page size", default=20, low=1, high=20)
REVISIONS_LIMIT = Param("limit", "How many memories per page", default=20, low=5, high=20)


def _op(name: str, params: tuple[Param, ...], answers: tuple[str, ...], **rest: Any) -> Operation:
    return Operation(name, rest.pop("core", name), params, answers, **rest)


# -- the table --------------------------------------------------------------------------------------

_TABLE: tuple[Operation, ...] = (
    # stores
    _op(
        "store_create",
        (
            Param(
                "user_id",
                'The new store id: 1-64 letters, digits, ".", "_", "-".',
                default=DEFAULT_STORE,
            ),
        ),
        ("StoreCreateAnswer",),
        library="create_store", cli="stores create {user_id}",
        rest=Rest("POST", "/memory/collection", _names("user_id")),
    ),
    _op("stores_list", (), ("StoresListAnswer",), library="list_stores", cli="stores list",
        rest=Rest("GET", "/memory/collections", _names())),
    _op(
        "store_delete", (Param("user_id", "The store to delete.", required=True),), ("StoreDeleteAnswer",),
        library="delete_store", cli="stores delete {user_id}",
        rest=Rest("DELETE", "/memory/collection", _names("user_id")),
    ),
    # speakers
    _op(
        "speaker_register",
        (Param("speaker", f"The person's name, 1-{MAX_SPEAKER_CHARS} characters.", required=True,
               max_chars=MAX_SPEAKER_CHARS), USER_ID),
        ("SpeakerRegisterAnswer",),
        library="add_speaker", cli="speakers add {speaker}",
        rest=Rest("POST", "/memory/speakers", _names("user_id", "speaker")),
    ),
    _op("speakers_list", (USER_ID,), ("SpeakersListAnswer",), library="list_speakers", cli="speakers list",
        rest=Rest("GET", "/memory/speakers", _names("user_id"))),
    _op(
        "speaker_remove",
        (Param("speaker", "The registered name to remove.", required=True, max_chars=MAX_SPEAKER_CHARS), USER_ID),
        ("SpeakerRemoveAnswer",),
        library="remove_speaker", cli="speakers remove {speaker}",
        rest=Rest("DELETE", "/memory/speakers", _names("user_id", "speaker")),
    ),
    _op(
        "speaker_rename",
        (
            Param("speaker", "The registered name to change.", required=True, max_chars=MAX_SPEAKER_CHARS),
            Param("new_name", "The new name (not registered yet).", required=True,
                  max_chars=MAX_SPEAKER_CHARS),
            USER_ID,
        ),
        ("SpeakerRenameAnswer",),
        library="rename_speaker", cli="speakers rename {speaker} {new_name}",
        rest=Rest("POST", "/memory/speakers/rename", _names("user_id", "speaker", "new_name")),
    ),
    _op(
        "speaker_merge",
        (
            Param("speaker", "The registered name to merge away.", required=True, max_chars=MAX_SPEAKER_CHARS),
            Param("into", "The registered name that keeps the memories.", required=True, max_chars=MAX_SPEAKER_CHARS),
            Param("confirm_records", "by_speaker's `records_to_delete` for `speaker`.",
                  required=True, low=0),
            USER_ID,
        ),
        ("SpeakerMergeAnswer",),
        library="merge_speakers", cli="speakers merge {speaker} {into}",
        rest=Rest("POST", "/memory/speakers/merge", _names("user_id", "speaker", "into", "confirm_records")),
    ),
    # memories: writes
    _op(
        "memory_add",
        (
            CONTENT,
            Param(
                "speaker",
                'Who said it: "me" or a registered name.',
                max_chars=MAX_SPEAKER_CHARS,
            ),
            CATEGORY, EVENT_DATE, CONVERSATION_ID, USER_ID,
        ),
        ("MemoryAddAnswer", "MemoryDuplicateAnswer"),
        library="add", cli="add {content}",
        rest=Rest("POST", "/memory/store", _names("user_id", "content", **METADATA_NAMES)),
    ),
    _op(
        "memory_add_messages",
        (
            MESSAGES,
            Param(
                "conversation_id",
                "Omit for a new one (the answer gives it).",
                max_chars=MAX_LABEL_CHARS,
            ),
            USER_ID,
        ),
        ("MemoryAddMessagesAnswer",),
        library="add_messages",
    ),
    _op(
        "memory_supersede",
        (
            Param("memory_id", "The memory whose fact changed.", required=True, max_chars=MAX_LABEL_CHARS),
            Param("content", "The fact's new version.", required=True, max_chars=MAX_CONTENT_CHARS),
            USER_ID,
        ),
        ("MemorySupersedeAnswer",),
        library="update",
        rest=Rest("POST", "/memory/supersede", _names("user_id", old_memory_id="memory_id", new_content="content")),
    ),
    _op(
        "memory_forget",
        (
            Param("memory_id", "Forget this one memory.", max_chars=MAX_LABEL_CHARS),
            Param("speaker", "Forget all of this speaker's memories.",
                  max_chars=MAX_SPEAKER_CHARS),
            Param("confirm_records",
                  "With speaker: by_speaker's `records_to_delete`.", low=0),
            USER_ID,
        ),
        ("MemoryForgetAnswer",),
        library="delete", cli="memories forget {memory_id}",  # by speaker: Memory.delete_speaker
        rest=Rest("POST", "/memory/forget", _names("user_id", "memory_id", "speaker", "confirm_records")),
    ),
    # memories: reads
    _op(
        "memory_search",
        (
            QUERY,
            Param("speaker", 'Only this speaker\'s words ("me" or a registered name).',
                  max_chars=MAX_SPEAKER_CHARS),
            SEARCH_LIMIT,
            Param(
                "filters",
                "Keys: categories, event_from, event_to (when it happened), time_from, time_to (when stored).",
                kind="object",
            ),
            Param("include_superseded", "Also return replaced versions.", default=False, kind="flag"),
            AS_OF,
            MAX_CHARS,
            USER_ID,
        ),
        ("MemorySearchAnswer",),
        library="search", cli="search {query}",
        rest=Rest(
            "POST", "/memory/search",
            _names(
                "user_id", "query", "speaker", "filters", "include_superseded", "as_of", "max_chars",
                max_results="limit",
            ),
        ),
    ),
    _op(
        "memory_recall",
        (
            Param("query", "What the conversation is about now.", required=True,
                  max_chars=MAX_QUERY_CHARS),
            RECALL_LIMIT, CONTEXT_LIMIT, AS_OF, MAX_CHARS, USER_ID,
        ),
        ("MemoryRecallAnswer",),
        library="recall",
        rest=Rest("POST", "/memory/recall", _names("user_id", "query", "limit", "context_limit", "as_of", "max_chars")),
    ),
    _op("memory_get", (MEMORY_ID, USER_ID), ("MemoryGetAnswer",), library="get", cli="memories get {memory_id}",
        rest=Rest("POST", "/memory/get", _names("user_id", "memory_id"))),
    _op(
        "memory_list",
        (
            LIST_LIMIT,
            Param("cursor", "`next_cursor` from the previous page."),
            Param("speaker", 'Only this speaker\'s memories.',
                  max_chars=MAX_SPEAKER_CHARS),
            USER_ID,
        ),
        ("MemoryListAnswer",),
        library="list_memories", cli="memories list",
        rest=Rest("POST", "/memory/list", _names("user_id", "limit", "cursor", "speaker")),
    ),
    _op(
        "by_speaker",
        (
            SPEAKER, BY_SPEAKER_LIMIT,
            Param("before", "The last page's `next_before`."),
            Param("skip_ids", "The last page's `next_skip_ids`.", max_items=MAX_SKIP_IDS, kind="names"),
            USER_ID,
        ),
        ("BySpeakerAnswer",),
        library="by_speaker", cli="memories list --speaker {speaker}",
        rest=Rest("POST", "/memory/by-speaker", _names("user_id", "speaker", "limit", "before", "skip_ids")),
    ),
    # REST and library only
    _op(
        "delete_all", (Param("user_id", "The store whose memories are all erased (required).", required=True),),
        ("MemoryForgetAnswer",), mcp=False, library="delete_all",
        rest=Rest("POST", "/memory/forget", _names("user_id")),  # {user_id} alone; shares memory_forget's route
    ),
    _op(
        "add_turn",
        (
            Param("user_msg", "What the store's user said (untagged); empty: not stored.", default="",
                  max_chars=MAX_CONTENT_CHARS),
            Param("assistant_msg", 'What the assistant said ("me"); empty: not stored.', default="",
                  max_chars=MAX_CONTENT_CHARS),
            CONVERSATION_ID, USER_ID,
        ),
        ("MemoryAddMessagesAnswer",), core="memory_add_messages", mcp=False, library="add_turn",
        rest=Rest("POST", "/memory/store-turn", _names("user_id", "user_msg", "assistant_msg", "conversation_id")),
    ),
    _op(
        "add_bulk",
        (
            Param("content", f"A long text (at most {MAX_BULK_CHARS:,} characters), cut into memories.", required=True,
                  max_chars=MAX_BULK_CHARS),
            Param("category", "The category of every memory cut from it.", default=DEFAULT_CATEGORY,
                  max_chars=MAX_LABEL_CHARS),
            Param("timestamp", "When it was written: YYYY-MM-DD or RFC 3339 with an offset."),
            USER_ID,
        ),
        ("MemoryBatchAnswer",), core="memory_add_bulk", mcp=False, library="add_bulk",
        rest=Rest("POST", "/memory/bulk-store", _names("user_id", "content", "category", "timestamp")),
    ),
    # the store's own state (REST and library only; an agent's tool listing stays short)
    _op("stats", (USER_ID,), ("StatsAnswer",), mcp=False, library="stats", cli="stats",
        rest=Rest("POST", "/memory/stats", _names("user_id"))),
    _op("history", (USER_ID,), ("HistoryAnswer",), mcp=False, library="history",
        rest=Rest("POST", "/memory/history", _names("user_id"))),
    _op("lineage", (MEMORY_ID, USER_ID), ("LineageAnswer",), mcp=False, library="lineage",
        rest=Rest("POST", "/memory/lineage", _names("user_id", "memory_id"))),
    _op(
        "revisions",
        (
            Param("include", 'One page of the memories behind a count: "revised" or "unrevised".'),
            REVISIONS_LIMIT,
            Param("before", "`next_before` from the previous page."),
            Param("skip_ids", "`next_skip_ids` from the previous page.", max_items=MAX_SKIP_IDS, kind="names"),
            USER_ID,
        ),
        ("RevisionsAnswer",), mcp=False, library="revisions",
        rest=Rest("POST", "/won/revisions", _names("user_id", "include", "limit", "before", "skip_ids")),
    ),
    _op(
        "add_many",
        (
            Param("items", "Memories {content, speaker?, category?, event_date?, conversation_id?, created_at?}.",
                  required=True, max_items=MAX_BATCH_ITEMS),
            USER_ID,
        ),
        ("MemoryBatchAnswer",), core="memory_add_batch", mcp=False, library="add_many",
    ),
)  # fmt: skip

OPERATIONS: Mapping[str, Operation] = {op.name: op for op in _TABLE}


def operation(name: str) -> Operation:
    return OPERATIONS[name]


# -- what an agent is shown besides the tools ---------------------------------------------------------
#
# A host shows the model every listed tool on every turn, so a session may list fewer:
# its profile (``--tools``). A tool outside the session's profile is unknown to it.

CORE_TOOLS = (
    "memory_add", "memory_search", "memory_recall", "speaker_register", "speakers_list", "by_speaker", "speaker_remove",
)  # fmt: skip
PROFILES: Mapping[str, tuple[str, ...]] = {
    "full": tuple(op.name for op in _TABLE if op.mcp),
    "core": CORE_TOOLS,
}


@dataclass(frozen=True)
class Reading:
    """One MCP resource: read-only, the JSON answer of ``operation`` (a tool that reads the
    same thing answers the same). ``uri`` is a template when it holds ``{user_id}`` or
    ``{speaker}``: those are the operation's arguments, the rest take its defaults."""

    uri: str
    name: str
    title: str
    description: str
    operation: str

    @property
    def arguments(self) -> tuple[str, ...]:
        """The operation's arguments the URI carries, in order (``("user_id", "speaker")``)."""
        return tuple(part[1:-1] for part in self.uri.split("/") if part.startswith("{"))


RESOURCES: tuple[Reading, ...] = (
    Reading("memory://stores", "stores", "Stores", "Every store (user_id) and when it was created.", "stores_list"),
    Reading("memory://{user_id}/speakers", "speakers", "People of a store",
            "The people registered in a store, with their memory counts.", "speakers_list"),
    Reading("memory://{user_id}/speakers/{speaker}", "person", "What one person said",
            "That person's latest memories, newest first (by_speaker's first page).", "by_speaker"),
    Reading("memory://{user_id}/stats", "stats", "Store statistics", "A store's counts and sizes.", "stats"),
)  # fmt: skip


@dataclass(frozen=True)
class Prompt:
    """One MCP prompt: its arguments, and the operation whose answer its text quotes
    (``None``: a fixed text)."""

    name: str
    title: str
    description: str
    params: tuple[Param, ...] = ()
    operation: str | None = None


PROMPTS: tuple[Prompt, ...] = (
    Prompt("recall_first", "Use the memory",
           "When to look in the memory before answering, when to store, who is who."),
    Prompt("about_person", "About a person", "What the memory holds from one person, their latest memories in it.",
           (Param("speaker", "The registered name.", required=True, max_chars=MAX_SPEAKER_CHARS), USER_ID),
           "by_speaker"),
    Prompt("remember_conversation", "Remember this conversation",
           "How to store the conversation so far, turn by turn, each under its speaker."),
)  # fmt: skip
