"""What the engine answers: one ``TypedDict`` per answer of every ``MemoryService`` call.

These are the shapes, written once. The engine builds them, ``Memory`` (the library) and
the CLI read them with their keys checked by mypy, and the MCP face derives its pydantic
output models and schemas from them (``mcp.answers``), so a key added here is in the
tools' schemas too. Plain ``typing`` only: no pydantic below the faces.

Three rules shape every type here:

- A key that has no value is **omitted**, never ``null``: such a key is ``NotRequired``
  and its type has no ``None`` (a ``... | None`` key, such as ``next_cursor``, is always
  present and ``null`` on purpose).
- ``Doc`` (in ``Annotated``) says what a key means and bounds a number: the copy the MCP
  schemas carry and a reader of these types sees, with no behaviour of its own.
- Answers may carry extra keys (the REST face adds the keys the official SDK reads, a
  later version may add more); a reader reads the keys declared here.

Parameters are the other edge, typed in ``MemoryService`` with :data:`JSON`: the faces
pass their callers' values through unchecked (an MCP tool's arguments and a REST body as
JSON decoded them; ``Memory``'s as its caller gave them) and the core checks each one,
refusing a wrong type with an ``InvalidRequestError`` naming the field. So a parameter's
type is what a client may send, a JSON value, not what the core accepts after its checks;
a narrower type (``str``) would be a promise the faces cannot keep and would hide the
checks that make a wrong type a structured refusal. ``JSON`` is built of ``Sequence`` and
``Mapping`` so a typed caller's ``list[str]`` or ``dict[str, str]`` is one, as httpx's
``_types.py`` builds its request types. The checkers below the service (``validation``,
``names``, ``dates``, ``conversation``, ``batch_items``) take ``object``: a checker is
what turns any value into a typed one or a refusal, so it promises nothing about its input.
"""

# No ``from __future__ import annotations``: a TypedDict reads ``NotRequired`` when its class
# is created (``__optional_keys__``, what pydantic and the faces read), not from strings.
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal, TypeAlias, Union

from typing_extensions import NotRequired, TypedDict

__all__ = [
    "JSON",
    "BySpeakerAnswer",
    "Doc",
    "HistoryAnswer",
    "HistoryTurn",
    "ImportResult",
    "LineageAnswer",
    "MemoryAddAnswer",
    "MemoryAddMessagesAnswer",
    "MemoryBatchAnswer",
    "MemoryDuplicateAnswer",
    "MemoryForgetAnswer",
    "MemoryGetAnswer",
    "MemoryListAnswer",
    "MemoryRecallAnswer",
    "MemoryRecord",
    "MemorySearchAnswer",
    "MemorySupersedeAnswer",
    "RecallContext",
    "RecallLongTerm",
    "RecallShortTerm",
    "RecallTurn",
    "Redaction",
    "ReindexAnswer",
    "RevisionsAnswer",
    "Role",
    "Side",
    "SpeakerInfo",
    "SpeakerMergeAnswer",
    "SpeakerRegisterAnswer",
    "SpeakerRemoveAnswer",
    "SpeakerRenameAnswer",
    "SpeakersListAnswer",
    "StatsAnswer",
    "StoreCreateAnswer",
    "StoreDeleteAnswer",
    "StoreInfo",
    "StoresListAnswer",
    "Version",
]

JSON: TypeAlias = Union[None, bool, int, float, str, Sequence["JSON"], Mapping[str, "JSON"]]  # noqa: UP007 - evaluated
"""A value as a client sent it, before the core checked it (the module's last section)."""


@dataclass(frozen=True)
class Doc:
    """What a key means (``text``) and, for a number, its bounds (``ge`` <= value <= ``le``)."""

    text: str | None = None
    ge: int | None = None
    le: int | None = None


Count = Annotated[int, Doc(ge=0)]
Role = Literal["user", "assistant"]  # a conversation turn's: who said it
Side = Literal["revised", "unrevised"]  # the memories a page of ``revisions`` lists

# --- memories ---------------------------------------------------------------------


class Redaction(TypedDict):
    """One kind of secret replaced by ``[redacted:<kind>]`` in a write's text (the
    ``redact`` setting), and how often; never the secret itself."""

    kind: Annotated[
        str,
        Doc(
            'What was redacted: "password", "api_key", "github_token", "private_key", "url_password", ... '
            "(README lists the kinds)."
        ),
    ]
    count: Annotated[int, Doc("How many of that kind.", ge=1)]


_REDACTED = (
    "Present when the server redacts secrets and this write's text, category or conversation_id held "
    "some: each kind and how many were stored as [redacted:<kind>]."
)


class MemoryRecord(TypedDict):
    """A memory as every read returns it."""

    id: Annotated[str, Doc("The memory's id (a UUID).")]
    content: Annotated[str, Doc("The text stored, exactly.")]
    speaker: NotRequired[Annotated[str, Doc('"me" (the assistant) or the registered name; absent when untagged.')]]
    category: Annotated[str, Doc('The category; "general" by default.')]
    importance: Annotated[float, Doc("0-1, from a documented heuristic.", ge=0, le=1)]
    similarity: NotRequired[
        Annotated[
            float,
            Doc(
                "Search results only: cosine closeness to the query, 0-1. Results arrive best-first; "
                "this is not the ranking key."
            ),
        ]
    ]
    time_bucket: Annotated[str, Doc('Month, "2026-07": of event_date when given, else of created_at.')]
    created_at: Annotated[str, Doc("When stored, RFC 3339 UTC with microseconds.")]
    event_date: NotRequired[Annotated[str, Doc("When it happened, if given.")]]
    conversation_id: NotRequired[Annotated[str, Doc("The conversation it was said in, if given.")]]
    is_superseded: Annotated[bool, Doc("True once a later memory superseded this one.")]
    superseded_by: NotRequired[Annotated[str, Doc("The id of the memory that superseded this one.")]]
    superseded_at: NotRequired[
        Annotated[str, Doc("When it was superseded (its successor's created_at), on superseded memories.")]
    ]


class MemoryAddAnswer(TypedDict):
    """``memory_add`` when the memory was stored."""

    user_id: str
    id: Annotated[str, Doc("The new memory's id.")]
    status: Literal["stored"]
    speaker: NotRequired[Annotated[str, Doc("The speaker the memory was stored under; absent when untagged.")]]
    chunks: Annotated[int, Doc("How many sentence-level chunks were indexed.", ge=0)]
    redacted: NotRequired[Annotated[list[Redaction], Doc(_REDACTED)]]


class MemoryDuplicateAnswer(TypedDict):
    """``memory_add`` when the text restates a current memory: nothing was stored."""

    user_id: NotRequired[Annotated[str, Doc("The store.")]]
    status: Literal["duplicate"]
    id: Annotated[Literal[""], Doc("Always empty: nothing was stored.")]
    duplicate_of: Annotated[str, Doc("The id of the memory this restates.")]
    note: str
    redacted: NotRequired[Annotated[list[Redaction], Doc(_REDACTED)]]


class MemoryAddMessagesAnswer(TypedDict):
    """``memory_add_messages``: one answer per stored message, in order (system and tool
    messages have none)."""

    user_id: str
    conversation_id: Annotated[str, Doc("The conversation the messages were stored under (fresh if none given).")]
    results: Annotated[
        list[MemoryAddAnswer | MemoryDuplicateAnswer],
        Doc('One per user/assistant message: status "stored" with its id, or "duplicate" with duplicate_of.'),
    ]
    redacted: NotRequired[Annotated[list[Redaction], Doc(_REDACTED + " Summed over the messages.")]]


class ImportResult(TypedDict):
    """One item of an import batch (the CLI's ``import``), in the items' order."""

    status: Literal["stored", "exists", "duplicate", "refused"]
    id: NotRequired[Annotated[str, Doc("stored, exists: the memory's id in this store.")]]
    duplicate_of: NotRequired[Annotated[str, Doc("duplicate: the current memory it restates.")]]
    reason: NotRequired[Annotated[str, Doc("refused: why, for a human.")]]


class ImportPersonAnswer(TypedDict):
    """One person of an imported conversation and what their name resolves to."""

    name: Annotated[str, Doc("The name as the export writes it; for an assistant history's roles, the role.")]
    role: Annotated[str, Doc("person (a named participant), assistant (stored as me) or user (the history's owner).")]
    messages: Annotated[int, Doc("Messages of this person in the conversation.", ge=0)]
    resolves: Annotated[
        str,
        Doc(
            "registered (the speaker of that name), mapped (as / user_name), register (registered by this "
            "import), me, untagged, or unresolved (refuses the import)."
        ),
    ]
    speaker: NotRequired[Annotated[str, Doc("The speaker the messages are stored under; absent: untagged.")]]
    reason: NotRequired[Annotated[str, Doc("unresolved: why, for a human.")]]


class ImportConversationAnswer(TypedDict):
    """One conversation of an import: its people, time span and skips."""

    conversation_id: Annotated[str, Doc("<format>:<the export's own id or name>, as the memories carry it.")]
    title: NotRequired[Annotated[str, Doc("The conversation's name in the export, when it has one.")]]
    messages: Annotated[int, Doc("Messages kept (to store).", ge=0)]
    people: list[ImportPersonAnswer]
    first: NotRequired[Annotated[str, Doc("The earliest message time (UTC).")]]
    last: NotRequired[Annotated[str, Doc("The latest message time (UTC).")]]
    skipped: Annotated[dict[str, int], Doc("Messages left out, by kind (system, media, deleted, tool...).")]


class ImportSummaryAnswer(TypedDict):
    """``import`` of a conversation export (CLI, library, REST): what was read and stored."""

    user_id: str
    file: Annotated[str, Doc("The file's name.")]
    format: Annotated[str, Doc("The format read (auto: the one detected).")]
    dry_run: Annotated[bool, Doc("true: read and resolved, nothing stored.")]
    tz: Annotated[str, Doc("The zone local times were read in.")]
    messages: Annotated[int, Doc("Messages kept, over every conversation.", ge=0)]
    stored: Annotated[int, Doc("Memories stored by this run.", ge=0)]
    duplicates: Annotated[int, Doc("Messages that restated a current memory and were not stored.", ge=0)]
    already_imported: Annotated[int, Doc("Messages an earlier import stored already.", ge=0)]
    refused: Annotated[int, Doc("Messages the store refused (their speaker removed meanwhile...).", ge=0)]
    skipped: Annotated[dict[str, int], Doc("Messages left out, by kind.")]
    speakers: Annotated[dict[str, int], Doc("Memories stored by this run, per speaker ((untagged) for none).")]
    registered: NotRequired[Annotated[list[str], Doc("Speakers this import registered.")]]
    conversations: list[ImportConversationAnswer]


class MemoryBatchAnswer(TypedDict):
    """``add_bulk`` / ``add_many`` (REST ``bulk-store``, the library): many memories in one commit."""

    user_id: str
    status: Literal["stored"]
    ids: Annotated[list[str], Doc("The ids of the memories stored, in order.")]
    count: Annotated[int, Doc("How many were stored.", ge=0)]
    duplicates: Annotated[int, Doc("How many restated a current memory and were not stored.", ge=0)]
    redacted: NotRequired[Annotated[list[Redaction], Doc(_REDACTED + " Summed over the items.")]]
    results: NotRequired[Annotated[list[ImportResult], Doc("An import batch's only: one per item, in order.")]]


class MemorySearchAnswer(TypedDict):
    user_id: str
    query: str
    speaker: NotRequired[Annotated[str, Doc("The speaker the search was limited to, when given.")]]
    memories: Annotated[list[MemoryRecord], Doc("Best first.")]
    truncated: NotRequired[Annotated[bool, Doc("True when `max_chars` left memories out (absent otherwise).")]]


class BySpeakerAnswer(TypedDict):
    """One page of what one person said, newest first."""

    user_id: str
    speaker: str
    memories: list[MemoryRecord]
    returned: Annotated[int, Doc("Memories on this page.", ge=0)]
    chunks: Annotated[int, Doc("Chunk records a delete of all this speaker's memories would remove.", ge=0)]
    records_to_delete: Annotated[int, Doc("Same as chunks: pass it to memory_forget as confirm_records.", ge=0)]
    points_to_delete: Annotated[int, Doc("Deprecated alias of records_to_delete.", ge=0)]
    memories_to_delete: Annotated[
        int, Doc("Memories a delete of all this speaker's memories would remove (what a person recognises).", ge=0)
    ]
    has_more: bool
    next_before: Annotated[str | None, Doc("Pass as `before` for the next page; null on the last page.")]
    next_skip_ids: Annotated[list[str], Doc("Pass as `skip_ids` for the next page; empty on the last page.")]


class _Turn(TypedDict):
    role: Role
    content: str
    speaker: NotRequired[Annotated[str, Doc('"me" or the registered name; absent when untagged.')]]


class RecallTurn(_Turn):
    """One conversation turn, as ``memory_add_messages`` stored it."""

    timestamp: Annotated[str, Doc("When it was stored, RFC 3339 UTC with microseconds.")]


class RecallShortTerm(TypedDict):
    turns: Annotated[list[RecallTurn], Doc("The store's last conversation turns, oldest first.")]


class RecallLongTerm(TypedDict):
    memories: Annotated[list[MemoryRecord], Doc("What memory_search answers for the query: best first.")]


class RecallContext(TypedDict):
    around_top_memory: Annotated[
        list[str],
        Doc(
            'Lines around the best memory, in order: "[before] ", "[match] " or "[after] ", '
            'then "[<speaker>] " when tagged, then the text.'
        ),
    ]


class MemoryRecallAnswer(TypedDict):
    """``memory_recall``: recent turns, the best memories, and the conversation around the best."""

    user_id: str
    short_term: RecallShortTerm
    long_term: RecallLongTerm
    context: RecallContext
    truncated: NotRequired[
        Annotated[bool, Doc("True when `max_chars` left memories or context lines out (absent otherwise).")]
    ]


class MemoryGetAnswer(TypedDict):
    memory: MemoryRecord


class MemoryListAnswer(TypedDict):
    user_id: str
    memories: Annotated[list[MemoryRecord], Doc("Oldest first, superseded ones included (flagged).")]
    count: Annotated[int, Doc("Memories on this page.", ge=0)]
    next_cursor: Annotated[str | None, Doc("Pass as `cursor` for the next page; null on the last page.")]


class MemoryForgetAnswer(TypedDict):
    user_id: str
    status: Literal["deleted"]
    deleted: Annotated[int, Doc("How many memories were deleted.", ge=0)]


class MemorySupersedeAnswer(TypedDict):
    user_id: str
    id: Annotated[str, Doc("The new memory's id.")]
    status: Literal["stored"]
    superseded: Annotated[str, Doc("The id of the memory it replaced.")]
    redacted: NotRequired[Annotated[list[Redaction], Doc(_REDACTED)]]


# --- the store's own state (REST and the library: engine.store_state) -----------------


class StatsAnswer(TypedDict):
    user_id: str
    total_memories: Annotated[int, Doc("Memories stored, superseded versions included (never records).", ge=0)]
    short_term_turns: Annotated[int, Doc("The short-term turns `history` gives.", ge=0)]


class HistoryTurn(_Turn):
    """One short-term turn, as the SDK's ``history`` reads it."""

    created_at: Annotated[str, Doc("When it was stored, RFC 3339 UTC with microseconds.")]


class HistoryAnswer(TypedDict):
    user_id: str
    turns: Annotated[list[HistoryTurn], Doc("The short-term turns recall reads, oldest first.")]


class Version(TypedDict):
    id: str
    content: str
    created_at: str
    is_current: Annotated[bool, Doc("True for the version in force.")]


class LineageAnswer(TypedDict):
    user_id: str
    memory_id: str
    versions: Annotated[list[Version], Doc("From memory_id forward to the version in force, oldest first.")]


class RevisionsAnswer(TypedDict):
    user_id: str
    revised: Annotated[int, Doc("Memories a later version superseded.", ge=0)]
    unrevised: Annotated[int, Doc("Memories as first written.", ge=0)]
    total: Annotated[int, Doc("Memories stored: revised + unrevised.", ge=0)]
    counts: str
    excludes: str
    ordered_by: Literal["stored"]
    include: NotRequired[Annotated[Side, Doc("The side this page lists, when asked.")]]
    memories: NotRequired[
        Annotated[list[MemoryRecord], Doc("With include: one page of those memories, newest stored first.")]
    ]
    has_more: NotRequired[Annotated[bool, Doc("With include: whether another page follows.")]]
    next_before: NotRequired[
        Annotated[
            str | None,
            Doc("With include: pass as `before` for the next page; null on the last page."),
        ]
    ]
    next_skip_ids: NotRequired[Annotated[list[str], Doc("With include: pass as `skip_ids` for the next page.")]]


# --- speakers ---------------------------------------------------------------------


class SpeakerRegisterAnswer(TypedDict):
    user_id: str
    speaker: str
    status: Literal["registered", "exists"]
    created_at: str
    count: Annotated[int, Doc("People registered in this store now.", ge=0)]
    limit: Annotated[int, Doc("How many people this store may register.", ge=1)]
    similar_to: NotRequired[
        Annotated[
            list[str],
            Doc(
                "Present when registered names look like this one (equal after case-folding, or letters that "
                "look alike, as Cyrillic 'В' and Latin 'B'): they stay different people; check this is not one "
                "of them."
            ),
        ]
    ]


class SpeakerInfo(TypedDict):
    speaker: str
    memories: Annotated[int, Doc("Memories carrying this speaker, superseded included.", ge=0)]
    created_at: str


class SpeakersListAnswer(TypedDict):
    user_id: str
    speakers: Annotated[list[SpeakerInfo], Doc('Registered people; "me" is never listed.')]
    count: Count
    limit: Annotated[int, Doc(ge=1)]


class SpeakerRemoveAnswer(TypedDict):
    user_id: str
    speaker: str
    status: Literal["removed"]
    memories_untagged: Annotated[int, Doc("Memories that lost the tag (they stay stored).", ge=0)]


class SpeakerRenameAnswer(TypedDict):
    user_id: str
    speaker: Annotated[str, Doc("The new name.")]
    previous: Annotated[str, Doc("The name it replaced.")]
    status: Literal["renamed"]
    memories_retagged: Annotated[int, Doc("Memories now under the new name, superseded included.", ge=0)]


class SpeakerMergeAnswer(TypedDict):
    user_id: str
    speaker: Annotated[str, Doc("The name that kept the memories (`into`).")]
    merged: Annotated[str, Doc("The name merged away (no longer registered).")]
    status: Literal["merged"]
    memories_retagged: Annotated[int, Doc("Memories moved to `speaker`, superseded included.", ge=0)]


# --- stores -----------------------------------------------------------------------


class StoreCreateAnswer(TypedDict):
    user_id: Annotated[str, Doc("The store id as it was created.")]
    status: Literal["created", "exists"]


class StoreInfo(TypedDict):
    user_id: str
    created_at: str
    memories: Annotated[int, Doc("Memories in the store, superseded included.", ge=0)]


class StoresListAnswer(TypedDict):
    stores: list[StoreInfo]


class StoreDeleteAnswer(TypedDict):
    user_id: str
    status: Literal["deleted"]


# --- the database (the CLI's ``reindex``; no MCP tool, no REST route) -------------------


class ReindexAnswer(TypedDict):
    """``reindex``: every chunk embedded again for ``model`` (``unchanged``: it already was)."""

    model: Annotated[str, Doc("The model the database is embedded with now.")]
    dim: Annotated[int, Doc("Its vectors' dimension.", ge=1)]
    previous: Annotated[str | None, Doc("The model it was embedded with before (null: none recorded).")]
    status: Literal["reindexed", "unchanged"]
    memories: Count
    chunks: Count
    seconds: Annotated[float, Doc("How long it took.", ge=0)]
