"""``Memory``: the Python face, with the official ``wontopos`` SDK ``Client``'s method
names, argument order and answers, so code written for the hosted API ports by changing
one import. Synchronous and thread-safe; errors are raised as ``WontoposError``
subclasses (``InvalidRequestError``, ``NotFoundError``, ...).

Defaults and renamed parameters come from the contract table
(:mod:`wontopos_mcp.contract`), as on the other faces: a default shown in a signature
is the table's, an argument left as ``None`` is not sent (the core's default applies),
and ``error.field`` names a parameter as the caller passed it (``old_memory_id``,
``metadata.speaker``, ``user_msg``).

Errors are mapped in one place, :func:`_speaks_the_sdk`, which wraps every public
method: a fix in a message names the SDK's methods (``add_speaker(speaker='Bob')``,
``create_store(user_id='alice')``), never an MCP tool.

A database directory ``Memory`` creates is 0700, so nobody else can list or read what is
inside; the files LanceDB writes there take the host process's umask. Unlike the CLI,
which sets the umask to ``0o077`` (files 0600), a library does not change that
process-wide setting under the application that imported it.
"""

from __future__ import annotations

import enum
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from typing_extensions import NotRequired

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.rules.answers import (
    JSON,
    BySpeakerAnswer,
    HistoryTurn,
    ImportSummaryAnswer,
    LineageAnswer,
    MemoryAddAnswer,
    MemoryAddMessagesAnswer,
    MemoryBatchAnswer,
    MemoryDuplicateAnswer,
    MemoryForgetAnswer,
    MemoryListAnswer,
    MemoryRecallAnswer,
    MemoryRecord,
    MemorySupersedeAnswer,
    RevisionsAnswer,
    SpeakerMergeAnswer,
    SpeakerRegisterAnswer,
    SpeakerRemoveAnswer,
    SpeakerRenameAnswer,
    SpeakersListAnswer,
    StatsAnswer,
    StoreCreateAnswer,
    StoreDeleteAnswer,
    StoreInfo,
)
from wontopos_mcp.rules.conversation import turn_messages
from wontopos_mcp.rules.import_options import import_options
from wontopos_mcp.verbs import speak

from .config import Settings, machine_zone
from .contract import METADATA_NAMES, operation, split_metadata
from .errors import InvalidRequestError, WontoposError


class _Omitted(enum.Enum):
    """A ``memory_id`` left out: ``get(memory_id)`` passes the id where the store goes. An
    enum member rather than ``object()``, so a signature can say ``JSON | _Omitted`` and
    mypy tells the two apart (``_split_id_args``)."""

    ID = "no memory_id"

    def __repr__(self) -> str:
        return "<memory_id left out>"


_NO_ID = _Omitted.ID
_SEARCH, _LIST, _BULK = operation("memory_search"), operation("memory_list"), operation("add_bulk")
_C = TypeVar("_C", bound=type)


class Added(MemoryAddAnswer):
    """``add`` when the memory was stored, with the keys it dropped (as REST answers them)."""

    ignored: NotRequired[list[str]]  # keys outside the four metadata fields, sorted; absent when none


class NotAdded(MemoryDuplicateAnswer):
    """``add`` when the text restates a current memory, with the keys it dropped."""

    ignored: NotRequired[list[str]]


def _speaks_the_sdk(cls: _C) -> _C:
    """Wrap each public method of ``cls`` so a ``WontoposError`` leaves it with its fix
    named in the SDK's verbs: the library's one error mapping."""

    def wrapped(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except WontoposError as exc:
                raise speak(exc, "sdk") from None

        return call

    for name, value in list(vars(cls).items()):
        if callable(value) and not name.startswith("_"):
            setattr(cls, name, wrapped(value))
    return cls


@_speaks_the_sdk
class Memory:
    """A local memory: ``Memory(db="./memdb")``; ``Memory()`` reads ``WONTOPOS_*``.

    ``redact="secrets"`` keeps secrets out: API keys, tokens, private keys and passwords
    in written texts are stored as ``[redacted:<kind>]`` (``WONTOPOS_REDACT``).

    The embedding model starts loading in the background at construction; calls that
    need it wait for it (up to 60 s, then ``UnavailableError``), others never do. A
    database built with another embedding model raises ``errors.ModelMismatch`` (naming
    both) at construction, before anything is embedded into it.
    """

    def __init__(
        self,
        db: str | None = None,
        *,
        speaker_limit: int | None = None,
        embed_model: str | None = None,
        model_cache: str | None = None,
        redact: str | None = None,
        service: MemoryService | None = None,
    ) -> None:
        if service is None:
            given = {"db": db, "speaker_limit": speaker_limit, "embed_model": embed_model, "model_cache": model_cache}
            settings = Settings.load({**given, "redact": redact})
            service = MemoryService.open(settings)
            service.check_model(settings.embed_model)  # ModelMismatch, as the CLI's one line
        self._service = service
        self._service.start()

    # -- stores ---------------------------------------------------------------------------

    def create_store(self, user_id: str | None = None) -> StoreCreateAnswer:
        return self._service.store_create(user_id)

    def list_stores(self) -> list[StoreInfo]:
        return self._service.stores_list()["stores"]

    def delete_store(self, user_id: str) -> StoreDeleteAnswer:
        return self._service.store_delete(user_id=user_id)

    # -- speakers ---------------------------------------------------------------------------

    def add_speaker(self, speaker: str, user_id: str | None = None) -> SpeakerRegisterAnswer:
        return self._service.speaker_register(speaker, user_id=user_id)

    def list_speakers(self, user_id: str | None = None) -> SpeakersListAnswer:
        return self._service.speakers_list(user_id=user_id)

    def remove_speaker(self, speaker: str, user_id: str | None = None) -> SpeakerRemoveAnswer:
        return self._service.speaker_remove(speaker, user_id=user_id)

    def rename_speaker(self, speaker: str, new_name: str, user_id: str | None = None) -> SpeakerRenameAnswer:
        """Re-tag every memory of ``speaker`` and rename the registration (409 when
        ``new_name`` is registered: ``merge_speakers``)."""
        return self._service.speaker_rename(speaker, new_name, user_id=user_id)

    def merge_speakers(
        self, speaker: str, into: str, confirm_records: int, user_id: str | None = None
    ) -> SpeakerMergeAnswer:
        """Re-tag ``speaker``'s memories as ``into`` and end ``speaker``'s registration;
        ``confirm_records``: ``speaker``'s ``records_to_delete`` from ``by_speaker``."""
        return self._service.speaker_merge(speaker, into, confirm_records, user_id=user_id)

    # -- memories ----------------------------------------------------------------------------

    def add(
        self,
        content: str,
        user_id: str | None = None,
        *,
        metadata: Mapping[str, JSON] | None = None,
        **extra: JSON,
    ) -> Added | NotAdded:
        """Store one memory; ``speaker``, ``category``, ``event_date`` and
        ``conversation_id`` may come as keywords or in ``metadata``.

        As in the SDK, a keyword wins over ``metadata`` and a keyword of ``None`` counts
        as not given. ``error.field`` names the value as the caller passed it:
        ``speaker`` for the keyword, ``metadata.speaker`` for the key inside
        ``metadata``, which is also what REST answers for the SDK's ``add``. A key
        outside those four, as a keyword or in ``metadata``, is dropped and listed in the
        answer's ``ignored``, as the hosted service and REST do (``contract.split_metadata``).
        """
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidRequestError("metadata must be an object", field="metadata")
        keywords, ignored_keywords = split_metadata({k: v for k, v in extra.items() if v is not None})
        from_metadata, ignored = split_metadata({k: v for k, v in (metadata or {}).items() if k not in keywords})
        passed_as = {core: rest for rest, core in METADATA_NAMES.items() if core in from_metadata}
        try:
            answer = self._service.memory_add(content, user_id=user_id, **from_metadata, **keywords)
        except InvalidRequestError as exc:
            raise exc.renamed_field(passed_as) from None
        dropped = sorted({*ignored, *ignored_keywords})
        # A cast, not a check: TypedDicts are open, so mypy cannot know the answer has no other ``ignored``.
        return cast("Added | NotAdded", {**answer, "ignored": dropped} if dropped else answer)

    def add_messages(
        self, messages: Sequence[Mapping[str, JSON]], user_id: str | None = None, *, conversation_id: str | None = None
    ) -> MemoryAddMessagesAnswer:
        """Store a conversation ({role, name?, content} messages), one memory per message."""
        return self._service.memory_add_messages(messages, conversation_id=conversation_id, user_id=user_id)

    def add_turn(
        self, user_msg: str = "", assistant_msg: str = "", user_id: str | None = None
    ) -> MemoryAddMessagesAnswer:
        """One exchange: the user's words (untagged) and the assistant's (``me``).

        An empty side is left out, not refused, exactly as REST ``store-turn`` does it
        (one rule, :func:`conversation.turn_messages`, which says why); errors name
        ``user_msg`` / ``assistant_msg``.
        """
        messages, fields = turn_messages(user_msg, assistant_msg)
        try:
            return self._service.memory_add_messages(messages, user_id=user_id)
        except InvalidRequestError as exc:
            raise exc.renamed_field(fields) from None

    def add_bulk(
        self,
        content: str,
        user_id: str | None = None,
        category: str | None = _BULK.default("category"),
        timestamp: str | None = None,
    ) -> MemoryBatchAnswer:
        """A long text cut into memories (paragraphs) and stored in one batch."""
        return self._service.memory_add_bulk(content, category=category, timestamp=timestamp, user_id=user_id)

    def add_many(self, items: Sequence[Mapping[str, JSON]], user_id: str | None = None) -> MemoryBatchAnswer:
        """Many memories ({content, speaker?, category?, event_date?, conversation_id?,
        created_at?}) in one batch: one embedding pass, one commit (imports)."""
        return self._service.memory_add_batch(items, user_id)

    def import_conversations(
        self,
        path: str | os.PathLike[str],
        *,
        format: str = "auto",
        user_id: str | None = None,
        as_: Mapping[str, str] | Sequence[str] | None = None,
        skip: Sequence[str] | None = None,
        register: bool = False,
        user_name: str | None = None,
        tz: str | None = None,
        start: str | None = None,
        dry_run: bool = False,
    ) -> ImportSummaryAnswer:
        """Import a chat export, assistant history or transcript (a file, a folder or a
        ``.zip``), every message under the person who wrote it; the summary. Names resolve
        before anything is stored: ``as_`` maps an export's name to a speaker (``"me"``,
        ``"-"`` for untagged), ``skip`` leaves people out, ``register`` registers the rest;
        an unresolved name refuses the import (``InvalidRequestError``, ``unresolved`` in
        ``details``). ``dry_run`` stores nothing and says who is who."""
        from wontopos_mcp.imports.messages import BadExport
        from wontopos_mcp.imports.sources import open_source

        options = import_options(
            format=format, as_=as_, skip=skip, register=register, user_name=user_name, tz=tz, start=start,
            dry_run=dry_run, local_zone=machine_zone(),
        )  # fmt: skip
        if options.format == "jsonl":
            raise InvalidRequestError(
                "the JSON Lines export is imported with the command line (wontopos-mcp import FILE)", field="format"
            )
        try:
            source = open_source(path)
        except BadExport as exc:
            raise InvalidRequestError(
                f"{os.fspath(path)}: {exc.place}: {exc.reason}", field="path", place=exc.place
            ) from None
        except OSError as exc:
            raise InvalidRequestError(f"{os.fspath(path)}: {exc.strerror or exc}", field="path") from None
        return self._service.import_conversations(source, options, user_id)

    def update(self, old_memory_id: str, new_content: str, user_id: str | None = None) -> MemorySupersedeAnswer:
        """Supersede a memory whose fact changed."""
        try:
            return self._service.memory_supersede(old_memory_id, new_content, user_id=user_id)
        except WontoposError as exc:  # a 404 names old_memory_id too
            raise exc.renamed_field(operation("memory_supersede").caller_names()) from None

    def search(
        self,
        query: str,
        user_id: str | None = None,
        limit: int = _SEARCH.default("limit"),
        *,
        speaker: str | None = None,
        filters: Mapping[str, JSON] | None = None,
        include_superseded: bool = _SEARCH.default("include_superseded"),
        max_chars: int | None = None,
        as_of: str | None = None,
    ) -> list[MemoryRecord]:
        """The best memories for ``query``, best first (a list, as the SDK returns; with
        ``max_chars``, as many as fit, at least one; with ``as_of``, as the store stood then)."""
        answer = self._service.memory_search(
            query, speaker=speaker, limit=limit, filters=filters, include_superseded=include_superseded,
            user_id=user_id, **_given(max_chars=max_chars, as_of=as_of),
        )  # fmt: skip
        return answer["memories"]

    def recall(
        self,
        query: str,
        user_id: str | None = None,
        *,
        limit: int | None = None,
        context_limit: int | None = None,
        max_chars: int | None = None,
        as_of: str | None = None,
    ) -> MemoryRecallAnswer:
        """Prompt-ready context: recent turns, the best memories, the conversation around the best."""
        given = _given(limit=limit, context_limit=context_limit, max_chars=max_chars, as_of=as_of)
        return self._service.memory_recall(query, user_id=user_id, **given)

    def get(self, user_id: JSON = None, memory_id: JSON | _Omitted = _NO_ID) -> MemoryRecord:
        """The memory itself; ``get(memory_id)`` alone reads the default store."""
        user_id, memory_id = _split_id_args(user_id, memory_id)
        return self._service.memory_get(memory_id, user_id=user_id)["memory"]

    def list_memories(
        self,
        user_id: str | None = None,
        *,
        limit: int = _LIST.default("limit"),
        cursor: str | None = None,
        speaker: str | None = None,
    ) -> MemoryListAnswer:
        return self._service.memory_list(limit=limit, cursor=cursor, user_id=user_id, speaker=speaker)

    def by_speaker(
        self,
        speaker: str,
        user_id: str | None = None,
        *,
        limit: int | None = None,
        before: str | None = None,
        skip_ids: list[str] | None = None,
    ) -> BySpeakerAnswer:
        given = _given(limit=limit, before=before, skip_ids=skip_ids)
        return self._service.by_speaker(speaker, user_id=user_id, **given)

    def delete(self, user_id: JSON = None, memory_id: JSON | _Omitted = _NO_ID) -> MemoryForgetAnswer:
        """Forget one memory; ``delete(memory_id)`` alone uses the default store."""
        user_id, memory_id = _split_id_args(user_id, memory_id)
        return self._service.memory_forget(memory_id=memory_id, user_id=user_id)

    def delete_speaker(self, speaker: str, *, confirm_records: int, user_id: str | None = None) -> MemoryForgetAnswer:
        """Forget every memory of one speaker; ``confirm_records`` is ``records_to_delete``."""
        return self._service.memory_forget(speaker=speaker, confirm_records=confirm_records, user_id=user_id)

    def delete_all(self, user_id: str) -> MemoryForgetAnswer:
        """Erase every memory of a store (required ``user_id``); store and speakers stay."""
        return self._service.delete_all(user_id)

    # -- the store's own state ---------------------------------------------------------------------

    def stats(self, user_id: str | None = None) -> StatsAnswer:
        """``{user_id, total_memories, short_term_turns}``: memories, never records."""
        return self._service.stats(user_id)

    def history(self, user_id: str | None = None) -> list[HistoryTurn]:
        """The short-term turns ``recall`` reads, oldest first (a list, as the SDK returns)."""
        return self._service.history(user_id)["turns"]

    def lineage(self, user_id: JSON = None, memory_id: JSON | _Omitted = _NO_ID) -> LineageAnswer:
        """One memory's versions from ``memory_id`` forward to the one in force, oldest
        first; ``lineage(memory_id)`` alone reads the default store."""
        user_id, memory_id = _split_id_args(user_id, memory_id)
        return self._service.lineage(memory_id, user_id=user_id)

    def revisions(
        self,
        user_id: str | None = None,
        *,
        include: str | None = None,
        limit: int | None = None,
        before: str | None = None,
        skip_ids: list[str] | None = None,
    ) -> RevisionsAnswer:
        """How many memories were revised (superseded by a later version); with ``include``
        (``"revised"`` or ``"unrevised"``), one page of them, paged as ``by_speaker``."""
        given = _given(limit=limit, before=before, skip_ids=skip_ids)
        return self._service.revisions(include, user_id=user_id, **given)

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        self._service.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _given(**arguments: JSON) -> dict[str, JSON]:
    """The arguments that were given: one left as ``None`` is not sent, so the core's
    default (the contract table's) applies."""
    return {name: value for name, value in arguments.items() if value is not None}


def _split_id_args(user_id: JSON, memory_id: JSON | _Omitted) -> tuple[JSON, JSON]:
    """``get(id)`` and ``get(store, id)`` both work, as in the SDK: (store, memory id)."""
    if isinstance(memory_id, _Omitted):
        return None, user_id
    return user_id, memory_id
