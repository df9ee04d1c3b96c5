"""Pydantic models of what the engine answers: the output schemas of the MCP tools.

The service returns plain JSON-ready dicts; these models only *describe* them (and the
MCP SDK checks each successful answer against them before it leaves the server). Two
rules of SPEC shape every model here:

- Optional fields are **omitted** when they have no value, never ``null``: such a field
  is declared with :func:`_absent`, which makes it non-required in the JSON schema while
  its type stays non-nullable, so an explicit ``null`` is refused just as a client's
  validator would refuse it.
- Answers allow extra keys (``extra="allow"``): the REST face adds the keys the official
  SDK reads, and a later version may add more, without breaking strict clients.

Every tool's output schema is ``{"type": "object", "anyOf": [answer, ErrorEnvelope]}``
(:class:`OrError`): a refusal is a result with ``isError: true`` whose structured content
is the SPEC error body, and strict clients (the TypeScript SDK, MCP Inspector) validate
even error payloads against the declared schema.

The memory record is :class:`MemoryRecord`; the name ``Memory`` belongs to the library
class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, RootModel

if TYPE_CHECKING:
    from wontopos_mcp.contract import Operation

__all__ = [
    "BySpeakerAnswer",
    "ErrorBody",
    "ErrorEnvelope",
    "HistoryAnswer",
    "HistoryTurn",
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
    "OrError",
    "RecallContext",
    "RecallLongTerm",
    "RecallShortTerm",
    "RecallTurn",
    "Redaction",
    "RevisionsAnswer",
    "SpeakerInfo",
    "SpeakerRegisterAnswer",
    "SpeakerRemoveAnswer",
    "SpeakersListAnswer",
    "StatsAnswer",
    "StoreCreateAnswer",
    "StoreDeleteAnswer",
    "StoreInfo",
    "StoresListAnswer",
    "Version",
]


def _drop_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def _absent(description: str) -> Any:
    """An optional field that is omitted when it has no value: not required, never null.

    The Python default ``None`` only means "not sent"; the declared type has no ``None``,
    so an explicit ``null`` fails validation, and the schema shows neither a default nor
    a ``null`` type.
    """
    return Field(default=None, description=description, json_schema_extra=_drop_default)


class _Answer(BaseModel):
    """Base of every answer: extra keys are allowed (REST adds some; later versions may)."""

    model_config = ConfigDict(extra="allow")


# --- memories ---------------------------------------------------------------------


class Redaction(_Answer):
    """One kind of secret replaced by ``[redacted:<kind>]`` in a write's text (the
    ``redact`` setting), and how often; never the secret itself."""

    kind: str = Field(
        description='What was redacted: "password", "api_key", "github_token", "private_key", "url_password", ... '
        "(README lists the kinds)."
    )
    count: int = Field(ge=1, description="How many of that kind.")


_REDACTED = (
    "Present when the server redacts secrets and this write's text, category or conversation_id held "
    "some: each kind and how many were stored as [redacted:<kind>]."
)


class MemoryRecord(_Answer):
    """A memory as every read returns it."""

    id: str = Field(description="The memory's id (a UUID).")
    content: str = Field(description="The text stored, exactly.")
    speaker: str = _absent('"me" (the assistant) or the registered name; absent when untagged.')
    category: str = Field(description='The category; "general" by default.')
    importance: float = Field(ge=0, le=1, description="0-1, from a documented heuristic.")
    similarity: float = _absent(
        "Search results only: cosine closeness to the query, 0-1. Results arrive best-first; "
        "this is not the ranking key."
    )
    time_bucket: str = Field(description='Month, "2026-07": of event_date when given, else of created_at.')
    created_at: str = Field(description="When stored, RFC 3339 UTC with microseconds.")
    event_date: str = _absent("When it happened, if given.")
    conversation_id: str = _absent("The conversation it was said in, if given.")
    is_superseded: bool = Field(description="True once a later memory superseded this one.")
    superseded_by: str = _absent("The id of the memory that superseded this one.")
    superseded_at: str = _absent("When it was superseded (its successor's created_at), on superseded memories.")


class MemoryAddAnswer(_Answer):
    """``memory_add`` when the memory was stored."""

    user_id: str
    id: str = Field(description="The new memory's id.")
    status: Literal["stored"]
    speaker: str = _absent("The speaker the memory was stored under; absent when untagged.")
    chunks: int = Field(ge=0, description="How many sentence-level chunks were indexed.")
    redacted: list[Redaction] = _absent(_REDACTED)


class MemoryDuplicateAnswer(_Answer):
    """``memory_add`` when the text restates a current memory: nothing was stored."""

    user_id: str = _absent("The store.")
    status: Literal["duplicate"]
    id: Literal[""] = Field(description="Always empty: nothing was stored.")
    duplicate_of: str = Field(description="The id of the memory this restates.")
    note: str
    redacted: list[Redaction] = _absent(_REDACTED)


class MemoryAddMessagesAnswer(_Answer):
    """``memory_add_messages``: one answer per stored message, in order (system and tool
    messages have none)."""

    user_id: str
    conversation_id: str = Field(description="The conversation the messages were stored under (fresh if none given).")
    results: list[Union[MemoryAddAnswer, MemoryDuplicateAnswer]] = Field(  # noqa: UP007 - pydantic union
        description='One per user/assistant message: status "stored" with its id, or "duplicate" with duplicate_of.'
    )
    redacted: list[Redaction] = _absent(_REDACTED + " Summed over the messages.")


class MemoryBatchAnswer(_Answer):
    """``add_bulk`` / ``add_many`` (REST ``bulk-store``, the library): many memories in one commit."""

    user_id: str
    status: Literal["stored"]
    ids: list[str] = Field(description="The ids of the memories stored, in order.")
    count: int = Field(ge=0, description="How many were stored.")
    duplicates: int = Field(ge=0, description="How many restated a current memory and were not stored.")
    redacted: list[Redaction] = _absent(_REDACTED + " Summed over the items.")


class MemorySearchAnswer(_Answer):
    user_id: str
    query: str
    speaker: str = _absent("The speaker the search was limited to, when given.")
    memories: list[MemoryRecord] = Field(description="Best first.")
    truncated: bool = _absent("True when `max_chars` left memories out (absent otherwise).")


class BySpeakerAnswer(_Answer):
    """One page of what one person said, newest first."""

    user_id: str
    speaker: str
    memories: list[MemoryRecord]
    returned: int = Field(ge=0, description="Memories on this page.")
    chunks: int = Field(ge=0, description="Chunk records a delete of all this speaker's memories would remove.")
    records_to_delete: int = Field(ge=0, description="Same as chunks: pass it to memory_forget as confirm_records.")
    points_to_delete: int = Field(ge=0, description="Deprecated alias of records_to_delete.")
    memories_to_delete: int = Field(
        ge=0, description="Memories a delete of all this speaker's memories would remove (what a person recognises)."
    )
    has_more: bool
    next_before: str | None = Field(description="Pass as `before` for the next page; null on the last page.")
    next_skip_ids: list[str] = Field(description="Pass as `skip_ids` for the next page; empty on the last page.")


class _Turn(_Answer):
    role: Literal["user", "assistant"]
    content: str
    speaker: str = _absent('"me" or the registered name; absent when untagged.')


class RecallTurn(_Turn):
    """One conversation turn, as ``memory_add_messages`` stored it."""

    timestamp: str = Field(description="When it was stored, RFC 3339 UTC with microseconds.")


class RecallShortTerm(_Answer):
    turns: list[RecallTurn] = Field(description="The store's last conversation turns, oldest first.")


class RecallLongTerm(_Answer):
    memories: list[MemoryRecord] = Field(description="What memory_search answers for the query: best first.")


class RecallContext(_Answer):
    around_top_memory: list[str] = Field(
        description='Lines around the best memory, in order: "[before] ", "[match] " or "[after] ", '
        'then "[<speaker>] " when tagged, then the text.'
    )


class MemoryRecallAnswer(_Answer):
    """``memory_recall``: recent turns, the best memories, and the conversation around the best."""

    user_id: str
    short_term: RecallShortTerm
    long_term: RecallLongTerm
    context: RecallContext
    truncated: bool = _absent("True when `max_chars` left memories or context lines out (absent otherwise).")


class MemoryGetAnswer(_Answer):
    memory: MemoryRecord


class MemoryListAnswer(_Answer):
    user_id: str
    memories: list[MemoryRecord] = Field(description="Oldest first, superseded ones included (flagged).")
    count: int = Field(ge=0, description="Memories on this page.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class MemoryForgetAnswer(_Answer):
    user_id: str
    status: Literal["deleted"]
    deleted: int = Field(ge=0, description="How many memories were deleted.")


class MemorySupersedeAnswer(_Answer):
    user_id: str
    id: str = Field(description="The new memory's id.")
    status: Literal["stored"]
    superseded: str = Field(description="The id of the memory it replaced.")
    redacted: list[Redaction] = _absent(_REDACTED)


# --- the store's own state (REST and the library: engine.store_state) -----------------


class StatsAnswer(_Answer):
    user_id: str
    total_memories: int = Field(ge=0, description="Memories stored, superseded versions included (never records).")
    short_term_turns: int = Field(ge=0, description="The short-term turns `history` gives.")


class HistoryTurn(_Turn):
    """One short-term turn, as the SDK's ``history`` reads it."""

    created_at: str = Field(description="When it was stored, RFC 3339 UTC with microseconds.")


class HistoryAnswer(_Answer):
    user_id: str
    turns: list[HistoryTurn] = Field(description="The short-term turns recall reads, oldest first.")


class Version(_Answer):
    id: str
    content: str
    created_at: str
    is_current: bool = Field(description="True for the version in force.")


class LineageAnswer(_Answer):
    user_id: str
    memory_id: str
    versions: list[Version] = Field(description="From memory_id forward to the version in force, oldest first.")


class RevisionsAnswer(_Answer):
    user_id: str
    revised: int = Field(ge=0, description="Memories a later version superseded.")
    unrevised: int = Field(ge=0, description="Memories as first written.")
    total: int = Field(ge=0, description="Memories stored: revised + unrevised.")
    counts: str
    excludes: str
    ordered_by: Literal["stored"]
    include: Literal["revised", "unrevised"] = _absent("The side this page lists, when asked.")
    memories: list[MemoryRecord] = _absent("With include: one page of those memories, newest stored first.")
    has_more: bool = _absent("With include: whether another page follows.")
    next_before: str | None = _absent("With include: pass as `before` for the next page; null on the last page.")
    next_skip_ids: list[str] = _absent("With include: pass as `skip_ids` for the next page.")


# --- speakers ---------------------------------------------------------------------


class SpeakerRegisterAnswer(_Answer):
    user_id: str
    speaker: str
    status: Literal["registered", "exists"]
    created_at: str
    count: int = Field(ge=0, description="People registered in this store now.")
    limit: int = Field(ge=1, description="How many people this store may register.")
    similar_to: list[str] = _absent(
        "Present when registered names look like this one (equal after case-folding, or letters that look "
        "alike, as Cyrillic 'В' and Latin 'B'): they stay different people; check this is not one of them."
    )


class SpeakerInfo(_Answer):
    speaker: str
    memories: int = Field(ge=0, description="Memories carrying this speaker, superseded included.")
    created_at: str


class SpeakersListAnswer(_Answer):
    user_id: str
    speakers: list[SpeakerInfo] = Field(description='Registered people; "me" is never listed.')
    count: int = Field(ge=0)
    limit: int = Field(ge=1)


class SpeakerRemoveAnswer(_Answer):
    user_id: str
    speaker: str
    status: Literal["removed"]
    memories_untagged: int = Field(ge=0, description="Memories that lost the tag (they stay stored).")


class SpeakerRenameAnswer(_Answer):
    user_id: str
    speaker: str = Field(description="The new name.")
    previous: str = Field(description="The name it replaced.")
    status: Literal["renamed"]
    memories_retagged: int = Field(ge=0, description="Memories now under the new name, superseded included.")


class SpeakerMergeAnswer(_Answer):
    user_id: str
    speaker: str = Field(description="The name that kept the memories (`into`).")
    merged: str = Field(description="The name merged away (no longer registered).")
    status: Literal["merged"]
    memories_retagged: int = Field(ge=0, description="Memories moved to `speaker`, superseded included.")


# --- stores -----------------------------------------------------------------------


class StoreCreateAnswer(_Answer):
    user_id: str = Field(description="The store id as it was created.")
    status: Literal["created", "exists"]


class StoreInfo(_Answer):
    user_id: str
    created_at: str
    memories: int = Field(ge=0, description="Memories in the store, superseded included.")


class StoresListAnswer(_Answer):
    stores: list[StoreInfo]


class StoreDeleteAnswer(_Answer):
    user_id: str
    status: Literal["deleted"]


# --- errors -----------------------------------------------------------------------


class ErrorBody(BaseModel):
    """``error`` of the error body: its type, a message for humans, and machine fields."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="invalid_request_error, not_found_error, conflict_error, api_error, ...")
    message: str = Field(description="For humans; branch on status, type and the fields, never on this.")
    field: str = _absent("The parameter at fault, as the caller named it.")


class ErrorEnvelope(BaseModel):
    """The one error body of SPEC: ``{"type": "error", "status", "error": {...}}``."""

    type: Literal["error"]
    status: int = Field(description="HTTP-like status: 400, 404, 409, 500, 503.")
    error: ErrorBody


T = TypeVar("T")


class OrError(RootModel[Union[T, ErrorEnvelope]], Generic[T]):  # noqa: UP007 - a TypeVar union
    """A tool's output: its answer, or the error body (``type: object`` at the root,
    which 2025-era clients require of an output schema)."""

    model_config = ConfigDict(json_schema_extra={"type": "object"})


def answer_models(op: Operation) -> tuple[type, ...]:
    """The pydantic models an operation's success answers validate against (the names
    its contract entry gives)."""
    return tuple(globals()[name] for name in op.answers)
