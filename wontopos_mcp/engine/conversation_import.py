"""Importing a conversation export: every message stored under the person who wrote it.

A reader (``imports``) turns the export into typed messages; this module decides who each
person is and stores the messages, in two streaming passes over the export:

1. **Check and resolve.** The whole export is read once and nothing is stored: each
   message is checked as a memory would be (a bad one refuses the file, naming the place),
   two messages with one id in a conversation refuse it, and the people are counted per
   conversation. Each name then resolves (``Resolution``): ``as`` maps it (``me``, ``-``
   for untagged, or a registered name), ``skip`` leaves it out, a registered name of the
   same spelling is that speaker, and ``register`` registers the rest. A name still
   unresolved, or registrations past the store's limit, refuse the whole import with the
   counts (400, ``field: "speaker"``, ``unresolved``); nothing is stored. A dry run ends
   before that refusal and answers what it found, the unresolved names marked so.
2. **Store.** The export is read again and its messages go to the batch write path
   (``BatchWrites.memory_add_batch``) in batches of ``IMPORT_BATCH``, in conversation
   order, each with its import key (``rules.import_options.import_key``): the export's
   message id, or, where a format has none, its time, speaker, text and ordinal among
   identical messages. A key already in the store is not embedded again (``exists``), so
   re-running an import, or a later export of the same chat, stores only what is new,
   and an import killed midway completes when run again: every batch is one commit.

The memory of one pass stays bounded by the number of messages (an 8-byte digest of each
message id or key), never by their text. A message's text is its ``content`` (cut at
sentence ends when longer than a memory holds), its time its ``event_date`` (UTC), its
conversation ``<format>:<the export's id>``. The import key stands for the message's own
id and source: memories have no free metadata, so the id is not shown on the memory. A
message without an id is keyed by its time as the export writes it (the wall clock, not
UTC: importing again with another ``tz`` finds the same messages), its author, its text
and its ordinal among identical ones; a message edited after an import keeps its key
(its id) and so its first text.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from wontopos_mcp.errors import InvalidRequestError, WontoposError
from wontopos_mcp.imports.formats import detect, reader
from wontopos_mcp.imports.messages import BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import Source
from wontopos_mcp.rules.answers import (
    ImportConversationAnswer,
    ImportPersonAnswer,
    ImportSummaryAnswer,
)
from wontopos_mcp.rules.batch_items import Origin, check_item
from wontopos_mcp.rules.dates import format_us, to_us
from wontopos_mcp.rules.import_options import (
    JSONL,
    ME,
    UNTAGGED,
    ImportOptions,
    conversation_label,
    cut_message,
    import_key,
    name_key,
)
from wontopos_mcp.rules.names import check_speaker

if TYPE_CHECKING:
    from wontopos_mcp.rules.idempotency import Idempotency

    from .batch_writes import BatchWrites
    from .stores import Stores

# Formats whose times are the --start given to the import plus a cue's offset, not the
# file's own: their messages are keyed without a time (speaker, text, ordinal), so a
# re-import with another or no --start still finds them.
START_TIMED = frozenset({"vtt", "srt", "transcript"})
IMPORT_BATCH = 256  # messages per batch write: one embedding pass and one commit each
Status = Literal["registered", "mapped", "register", "me", "untagged", "skipped", "unresolved"]
Progress = Callable[[int, int, "Counter[str]"], None]  # (messages done, messages in all, counts so far)


@dataclass
class Resolution:
    """What one export name (or role) becomes: ``speaker`` (``None``: untagged) and how."""

    status: Status
    speaker: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Piece:
    """One memory of the second pass: the batch item, its origin (import key), who said it
    for the summary, and whether it is the last piece of its message (progress counts messages)."""

    item: dict[str, str]
    origin: Origin
    who: str
    ends_message: bool


@dataclass
class _Conversation:
    """What the first pass learns of one conversation."""

    label: str
    title: str | None = None
    messages: int = 0
    people: Counter[tuple[str, str | None]] = field(default_factory=Counter)  # (role, name) -> messages
    skipped: Counter[str] = field(default_factory=Counter)
    first: datetime | None = None
    last: datetime | None = None
    ids: set[bytes] = field(default_factory=set)


def _digest(*parts: str) -> bytes:
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8).digest()


class ConversationImport:
    """One import of one export into one store (``run``)."""

    def __init__(
        self,
        stores: Stores,
        batches: BatchWrites,
        keyed: Callable[[str, str], Idempotency],
        now_us: Callable[[], int],
        *,
        batch: int = IMPORT_BATCH,
    ) -> None:
        self.stores, self.batches, self.keyed, self.now_us, self.batch = stores, batches, keyed, now_us, batch

    def run(
        self, source: Source, user_id: str | None, options: ImportOptions, progress: Progress | None = None
    ) -> ImportSummaryAnswer:
        """Import ``source`` into ``user_id`` (created when missing, except by a dry run)."""
        try:
            fmt, readable = detect(source, options.format)  # a zip's or folder's export: the entry to read
            if fmt == JSONL:
                raise InvalidRequestError(
                    f"{source.name} is this product's own JSON Lines export: import it with the command line's "
                    "import (wontopos-mcp import FILE), which keeps its categories and supersede chains",
                    field="format",
                )
            module = reader(fmt)
            read_options = ReadOptions(tz=options.tz, start=options.start)
            conversations, skipped = self._check(fmt, module.read(readable, read_options), options)
        except BadExport as exc:
            raise InvalidRequestError(
                f"{source.name}: {exc.place}: {exc.reason}; nothing was imported",
                field="file", file=source.name, place=exc.place,
            ) from None  # fmt: skip
        registered, limit = self._registered(user_id)
        people = self._resolve(conversations, registered, options)
        summary = self._summary(source.name, fmt, user_id, options, conversations, people, skipped)
        if options.dry_run:  # it shows the unresolved names rather than refusing them
            return summary
        self._refuse_unresolved(source.name, people, conversations, registered, limit)
        if user_id is not None:
            self.stores.store_create(user_id)
        for speaker in _to_register(people):
            if self.stores.speaker_register(speaker, user_id)["status"] == "registered":
                summary.setdefault("registered", []).append(speaker)
        total = sum(c.messages for c in conversations.values())
        counts: Counter[str] = Counter()
        per_speaker: Counter[str] = Counter()
        done = 0
        pending: list[Piece] = []
        items = self._items(fmt, module.read(readable, read_options), people, conversations)
        try:
            for piece in items:
                pending.append(piece)
                if len(pending) >= self.batch:
                    done += self._send(pending, user_id, counts, per_speaker)
                    pending = []
                    if progress is not None:
                        progress(done, total, counts)
        except (BadExport, KeyError) as exc:  # the file changed between the passes: the batches stored stay
            place = exc.place if isinstance(exc, BadExport) else "a conversation"
            raise InvalidRequestError(
                f"{source.name}: {place}: the file changed while it was imported; {done} messages were stored, "
                "import it again to complete it",
                field="file", file=source.name, place=place,
            ) from None  # fmt: skip
        done += self._send(pending, user_id, counts, per_speaker)
        if progress is not None:
            progress(done, total, counts)
        summary["stored"] = counts["stored"]
        summary["duplicates"] = counts["duplicate"]
        summary["already_imported"] = counts["exists"]
        summary["refused"] = counts["refused"]
        summary["speakers"] = dict(sorted(per_speaker.items()))
        return summary

    # -- the first pass ---------------------------------------------------------------------

    def _check(
        self, fmt: str, items: Iterator[Message | Skipped], options: ImportOptions
    ) -> tuple[dict[str, _Conversation], Counter[str]]:
        conversations: dict[str, _Conversation] = {}
        skipped: Counter[str] = Counter()
        now = self.now_us()
        for item in items:
            conversation = conversations.get(item.conversation)
            if conversation is None:
                conversation = conversations[item.conversation] = _Conversation(
                    conversation_label(fmt, item.conversation)
                )
            if item.title and not conversation.title:
                conversation.title = item.title
            if isinstance(item, Skipped):
                conversation.skipped[item.kind] += 1
                skipped[item.kind] += 1
                continue
            if item.role == "person" and item.author is not None and name_key(item.author) in options.skip:
                conversation.skipped["person_skipped"] += 1
                skipped["person_skipped"] += 1
                continue
            if item.message_id is not None:
                mark = _digest(item.message_id)
                if mark in conversation.ids:
                    raise BadExport(
                        item.place, f"a second message with the id {item.message_id[:60]!r} in one conversation"
                    )
                conversation.ids.add(mark)
            _check_message(item, conversation.label, now)
            conversation.messages += 1
            conversation.people[(item.role, item.author)] += 1
            if item.time is not None:
                conversation.first = item.time if conversation.first is None else min(conversation.first, item.time)
                conversation.last = item.time if conversation.last is None else max(conversation.last, item.time)
        return conversations, skipped

    def _registered(self, user_id: str | None) -> tuple[set[str], int]:
        """The store's registered names and its limit; a store that does not exist yet has none."""
        try:
            answer = self.stores.speakers_list(user_id)
        except WontoposError as exc:
            if exc.status != 404 or exc.field != "user_id":
                raise
            return set(), self.stores.registry.speaker_limit
        return {entry["speaker"] for entry in answer["speakers"]}, answer["limit"]

    def _resolve(
        self, conversations: dict[str, _Conversation], registered: set[str], options: ImportOptions
    ) -> dict[tuple[str, str | None], Resolution]:
        people: dict[tuple[str, str | None], Resolution] = {}
        for conversation in conversations.values():
            for role, name in conversation.people:
                if (role, name) not in people:
                    people[(role, name)] = _resolve_one(role, name, registered, options)
        return people

    def _refuse_unresolved(
        self,
        file: str,
        people: dict[tuple[str, str | None], Resolution],
        conversations: dict[str, _Conversation],
        registered: set[str],
        limit: int,
    ) -> None:
        counts: Counter[tuple[str, str | None]] = Counter()
        for conversation in conversations.values():
            counts.update(conversation.people)
        unresolved = [
            {"name": name or role, "messages": counts[(role, name)], **({"reason": r.reason} if r.reason else {})}
            for (role, name), r in people.items()
            if r.status == "unresolved"
        ]
        if unresolved:
            unresolved.sort(key=lambda entry: (-int(str(entry["messages"])), str(entry["name"])))
            listed = ", ".join(f"{str(e['name'])!r} ({e['messages']} messages)" for e in unresolved[:10])
            more = f" and {len(unresolved) - 10} more" if len(unresolved) > 10 else ""
            raise InvalidRequestError(
                f"{file}: {len(unresolved)} name(s) of the export are not registered speakers of this store: "
                f"{listed}{more}. Nothing was imported. Register them (register), map each to a speaker "
                "(as 'Name=Bob'; 'Name=me' for the assistant, 'Name=-' for untagged) or leave them out (skip 'Name')",
                field="speaker", speaker=unresolved[0]["name"], unresolved=unresolved,
            )  # fmt: skip
        new = _to_register(people)
        if len(registered) + len(new) > limit:
            raise InvalidRequestError(
                f"{file}: registering the import's {len(new)} new speaker(s) would pass the store's limit of {limit} "
                f"({len(registered)} registered). Nothing was imported. Map some with as, or leave them out with skip",
                field="register", speaker_limit=limit, registered=len(registered), would_register=len(new),
            )  # fmt: skip

    # -- the second pass --------------------------------------------------------------------

    def _items(
        self,
        fmt: str,
        items: Iterator[Message | Skipped],
        people: dict[tuple[str, str | None], Resolution],
        conversations: dict[str, _Conversation],
    ) -> Iterator[Piece]:
        """The memories of every message kept, in order (a long message is several)."""
        ordinals: Counter[bytes] = Counter()
        for message in items:
            if isinstance(message, Skipped):
                continue
            resolution = people.get((message.role, message.author))
            if resolution is None:  # a skipped person
                continue
            label = conversations[message.conversation].label
            when = None if message.time is None else _utc_text(message.time)
            if message.message_id is not None:
                identity = ["id", message.message_id]
            else:  # the time as the export wrote it, so another --tz finds the same messages
                wall = (
                    "" if message.time is None or fmt in START_TIMED else message.time.replace(tzinfo=None).isoformat()
                )
                who = f"{message.role}:{message.author or ''}"
                mark = _digest(message.conversation, wall, who, message.text)
                ordinals[mark] += 1
                identity = ["text", wall, who, message.text, str(ordinals[mark])]
            pieces = cut_message(message.text)
            for index, piece in enumerate(pieces):
                key = import_key(fmt, message.conversation, identity + ([f"#{index}"] if len(pieces) > 1 else []))
                item = {"content": piece, "conversation_id": label}
                if resolution.speaker is not None:
                    item["speaker"] = resolution.speaker
                if when is not None:
                    item["event_date"] = when
                last = index == len(pieces) - 1
                yield Piece(item, Origin(self.keyed(key, key)), resolution.speaker or "(untagged)", last)

    def _send(
        self,
        pending: list[Piece],
        user_id: str | None,
        counts: Counter[str],
        per_speaker: Counter[str],
    ) -> int:
        """Store one batch; the messages it completes (a long message's last piece ends it)."""
        if not pending:
            return 0
        answer = self.batches.memory_add_batch(
            [piece.item for piece in pending], user_id, origins=[piece.origin for piece in pending]
        )
        for piece, result in zip(pending, answer.get("results", [])):
            counts[result["status"]] += 1
            if result["status"] == "stored":
                per_speaker[piece.who] += 1
        return sum(piece.ends_message for piece in pending)

    # -- the answer -------------------------------------------------------------------------

    def _summary(
        self,
        file: str,
        fmt: str,
        user_id: str | None,
        options: ImportOptions,
        conversations: dict[str, _Conversation],
        people: dict[tuple[str, str | None], Resolution],
        skipped: Counter[str],
    ) -> ImportSummaryAnswer:
        listed: list[ImportConversationAnswer] = []
        for conversation in conversations.values():
            entry: ImportConversationAnswer = {
                "conversation_id": conversation.label,
                "messages": conversation.messages,
                "people": [_person(role, name, count, people[(role, name)])
                           for (role, name), count in conversation.people.most_common()],
                "skipped": dict(sorted(conversation.skipped.items())),
            }  # fmt: skip
            if conversation.title:
                entry["title"] = conversation.title
            if conversation.first is not None and conversation.last is not None:
                entry["first"] = _utc_text(conversation.first)
                entry["last"] = _utc_text(conversation.last)
            listed.append(entry)
        return {
            "user_id": user_id or "default",
            "file": file,
            "format": fmt,
            "dry_run": options.dry_run,
            "tz": options.tz_name,
            "messages": sum(c.messages for c in conversations.values()),
            "stored": 0,
            "duplicates": 0,
            "already_imported": 0,
            "refused": 0,
            "skipped": dict(sorted(skipped.items())),
            "speakers": {},
            "conversations": listed,
        }


def _to_register(people: dict[tuple[str, str | None], Resolution]) -> list[str]:
    """The speakers the import registers (several export names may map to one), sorted."""
    return sorted({r.speaker for r in people.values() if r.status == "register" and r.speaker is not None})


def _person(role: str, name: str | None, count: int, resolution: Resolution) -> ImportPersonAnswer:
    person: ImportPersonAnswer = {"name": name if name is not None else role, "role": role, "messages": count,
                                  "resolves": resolution.status}  # fmt: skip
    if resolution.speaker is not None:
        person["speaker"] = resolution.speaker
    if resolution.reason:
        person["reason"] = resolution.reason
    return person


def _resolve_one(role: str, name: str | None, registered: set[str], options: ImportOptions) -> Resolution:
    """How one export name becomes a speaker (see the module's docstring)."""
    if role == "assistant":
        return Resolution("me", ME)
    if role == "user" or name is None:
        if options.user_name is None:
            return Resolution("untagged")
        target = options.user_name
        if target in registered:
            return Resolution("mapped", target)
        if options.register:
            return Resolution("register", target)
        return Resolution("unresolved", target, "user_name is not a registered speaker")
    key = name_key(name)
    if key in options.as_:
        target = options.as_[key]
        if target == ME:
            return Resolution("me", ME)
        if target == UNTAGGED:
            return Resolution("untagged")
        if target in registered:
            return Resolution("mapped", target)
        if options.register:
            return Resolution("register", target)
        return Resolution("unresolved", target, f"as maps it to {target!r}, which is not registered")
    try:
        speaker = check_speaker(name)
    except InvalidRequestError as exc:
        return Resolution("unresolved", None, f"not usable as a speaker name ({exc.message}); map it with as")
    if speaker == ME:
        return Resolution("unresolved", None, "'me' is the assistant's reserved name; map this person with as")
    if speaker in registered:
        return Resolution("registered", speaker)
    if options.register:
        return Resolution("register", speaker)
    return Resolution("unresolved", speaker)


def _check_message(message: Message, label: str, now_us: int) -> None:
    """The message checked as each memory it becomes will be: a refusal names its place."""
    item: dict[str, str] = {"conversation_id": label}
    if message.time is not None:
        if message.time.tzinfo is None:
            raise BadExport(message.place, "a time without a zone (a reader's bug)")
        item["event_date"] = _utc_text(message.time)
    for piece in cut_message(message.text):
        try:
            check_item({**item, "content": piece}, now_us)
        except InvalidRequestError as exc:
            raise BadExport(message.place, exc.message) from None


def _utc_text(moment: datetime) -> str:
    return format_us(to_us(moment))
