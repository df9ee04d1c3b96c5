"""Memory writes: add, a conversation's messages, supersede, forget.

Each validates its arguments first, then resolves the store once, and commits through
``Commits``: embedded outside the write lock, then under it checked again (store,
speakers, the memory, duplicates) and committed. Batches and imports are ``batch_writes``.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING

from wontopos_mcp.contract import DEFAULT_CATEGORY, operation
from wontopos_mcp.errors import ConflictError, Fix, InvalidRequestError
from wontopos_mcp.rules import validation as v
from wontopos_mcp.rules.answers import (
    JSON,
    MemoryAddAnswer,
    MemoryAddMessagesAnswer,
    MemoryDuplicateAnswer,
    MemoryForgetAnswer,
    MemorySupersedeAnswer,
)
from wontopos_mcp.rules.conversation import parse_messages
from wontopos_mcp.rules.dates import parse_moment
from wontopos_mcp.rules.idempotency import Idempotency
from wontopos_mcp.rules.names import check_speaker
from wontopos_mcp.rules.redaction import tally, with_redactions
from wontopos_mcp.storage.rows import ChunkRow
from wontopos_mcp.storage.where import memory_is, said_by

from .commits import Embedded, Written, require_confirmed

if TYPE_CHECKING:
    from .commits import Commits
    from .registry import StoreHandle


CONFIRM_RECORDS = operation("memory_forget").param("confirm_records")  # its range: the contract table's


class Writes:
    def __init__(self, commits: Commits) -> None:
        self.commits = commits
        self.registry = commits.registry
        self.memories = commits.memories
        self.store = commits.store

    def memory_add(
        self,
        content: JSON,
        speaker: JSON = None,
        category: JSON = None,
        event_date: JSON = None,
        conversation_id: JSON = None,
        user_id: JSON = None,
        *,
        idempotency: Idempotency | None = None,
    ) -> MemoryAddAnswer | MemoryDuplicateAnswer:
        text = v.text(content, field="content", max_chars=v.MAX_CONTENT_CHARS)
        name = None if speaker is None else check_speaker(speaker)
        category = v.optional_label(category, field="category") or DEFAULT_CATEGORY
        event = None if event_date is None else parse_moment(event_date, field="event_date")
        conversation = v.optional_label(conversation_id, field="conversation_id")
        redactor = self.commits.redactor
        redactor.refuse_secret_name(name, field="speaker")
        handle = self.registry.resolve(user_id)
        key, display = handle.key, handle.display
        found = redactor.redact(text)
        (category, conversation), in_labels = redactor.redact_labels(category, conversation)
        text, redacted = found.text, tally([found.counts, in_labels])
        memory = {
            "content": text, "speaker": name, "category": category, "event": event,
            "conversation_id": conversation, "role": None,
        }  # fmt: skip

        def decide() -> tuple[str | None, int]:
            recorded = self.registry.confirm(handle, [(name, "speaker")]).recorded_seq
            return self.memories.find_duplicate(key, text, name, conversation), self.commits.last_seq(key, recorded)

        def write(
            embedded: Embedded, decided: tuple[str | None, int]
        ) -> Written[MemoryAddAnswer | MemoryDuplicateAnswer]:
            duplicate, last_seq = decided
            if duplicate is not None:
                return Written([], with_redactions(duplicate_answer(display, duplicate), redacted))
            memory_id, rows = self.memories.new_rows(
                key, memory, embedded.chunks[0], embedded.vectors[0], seq=last_seq + 1
            )
            return Written(rows, with_redactions(stored_answer(display, memory_id, name, len(rows)), redacted))

        return self.commits.write_once(key, idempotency, [text], decide, write)

    def memory_add_messages(
        self,
        messages: JSON,
        conversation_id: JSON = None,
        user_id: JSON = None,
        *,
        idempotency: Idempotency | None = None,
    ) -> MemoryAddMessagesAnswer:
        """Store a conversation: one labelled memory per message, all in one commit."""
        parsed = parse_messages(messages)
        redactor = self.commits.redactor
        for message in parsed:
            redactor.refuse_secret_name(message.speaker, field=f"messages[{message.index}].name")
        (given,), in_label = redactor.redact_labels(v.optional_label(conversation_id, field="conversation_id"))
        conversation = given or str(uuid.uuid4())
        handle = self.registry.resolve(user_id)
        key, display = handle.key, handle.display
        texts, in_texts = redactor.redact_each(m.content for m in parsed)
        redacted = tally([in_texts, in_label])
        parsed = [dataclasses.replace(m, content=text) for m, text in zip(parsed, texts)]

        def check() -> None:
            self.registry.confirm(handle, [(m.speaker, f"messages[{m.index}].name") for m in parsed])

        def write(embedded: Embedded, _: None) -> Written[MemoryAddMessagesAnswer]:
            seq = self.commits.last_seq(key)
            results: list[MemoryAddAnswer | MemoryDuplicateAnswer] = []
            rows: list[ChunkRow] = []
            for message, chunks, vectors in zip(parsed, embedded.chunks, embedded.vectors):
                duplicate = self.memories.find_duplicate(key, message.content, message.speaker, conversation)
                if duplicate is not None:
                    results.append(duplicate_answer(display, duplicate))
                    continue
                seq += 1
                memory = {
                    "content": message.content, "speaker": message.speaker, "category": DEFAULT_CATEGORY,
                    "event": None, "conversation_id": conversation, "role": message.role,
                }  # fmt: skip
                memory_id, new_rows = self.memories.new_rows(key, memory, chunks, vectors, seq=seq)
                rows += new_rows
                results.append(stored_answer(display, memory_id, message.speaker, len(chunks)))
            answer: MemoryAddMessagesAnswer = {"user_id": display, "conversation_id": conversation, "results": results}
            return Written(rows, with_redactions(answer, redacted))

        return self.commits.write_once(key, idempotency, [m.content for m in parsed], check, write)

    def memory_supersede(
        self, memory_id: JSON, content: JSON, user_id: JSON = None, *, idempotency: Idempotency | None = None
    ) -> MemorySupersedeAnswer:
        mid = v.label(memory_id, field="memory_id")
        text = v.text(content, field="content", max_chars=v.MAX_CONTENT_CHARS)
        handle = self.registry.resolve(user_id)
        key, display = handle.key, handle.display
        found = self.commits.redactor.redact(text)
        text, redacted = found.text, found.counts

        def check() -> ChunkRow:
            self.registry.confirm(handle)
            return _refuse_superseded(self.memories.memory_row(key, mid))

        def write(embedded: Embedded, old: ChunkRow) -> Written[MemorySupersedeAnswer]:
            memory = {
                "content": text, "speaker": old["speaker"], "category": old["category"], "event": None,
                "conversation_id": old["conversation_id"], "role": None,  # a correction, not a turn said
            }  # fmt: skip
            seq = self.commits.last_seq(key) + 1
            new_id, rows = self.memories.new_rows(key, memory, embedded.chunks[0], embedded.vectors[0], seq=seq)
            old_rows = self.memories.every_chunk(key, mid)
            marked: list[ChunkRow] = [{**r, "superseded": True, "superseded_by": new_id} for r in old_rows]
            answer: MemorySupersedeAnswer = {"user_id": display, "id": new_id, "status": "stored", "superseded": mid}
            return Written(rows, with_redactions(answer, redacted), updated=marked)

        return self.commits.write_once(key, idempotency, [text], check, write, rewrites=True)

    # -- forget ----------------------------------------------------------------------------------

    def memory_forget(
        self, memory_id: JSON = None, speaker: JSON = None, confirm_records: JSON = None, user_id: JSON = None
    ) -> MemoryForgetAnswer:
        if (memory_id is None) == (speaker is None):
            raise InvalidRequestError(
                "give exactly one of memory_id, or speaker with confirm_records", field="memory_id"
            )
        if memory_id is not None:
            if confirm_records is not None:
                raise InvalidRequestError("confirm_records goes with speaker, not memory_id", field="confirm_records")
            return self._forget_one(v.label(memory_id, field="memory_id"), self.registry.resolve(user_id))
        name = check_speaker(speaker)
        if confirm_records is None:
            raise InvalidRequestError(
                (
                    "confirm_records is required with speaker: pass records_to_delete from ",
                    Fix.of("by_speaker", speaker=name),
                ),
                field="confirm_records",
            )
        confirm = CONFIRM_RECORDS.integer(confirm_records)
        return self._forget_speaker(name, confirm, self.registry.resolve(user_id))

    def _forget_one(self, memory_id: str, handle: StoreHandle) -> MemoryForgetAnswer:
        key = handle.key
        self.memories.memory_row(key, memory_id)
        known = self.memories.naming(key, {memory_id})  # the long look-up, before writers wait
        with self.store.write_lock(key, rewriting=True):
            row = self.memories.memory_row(key, memory_id)
            # The versions it superseded are relinked in the same commit as the delete:
            # forgetting the newest version makes its predecessor current again; forgetting
            # a middle one links its predecessor to its successor (A -> B -> C becomes A -> C).
            successor = row["superseded_by"]
            relinked: list[ChunkRow] = [
                {**r, "superseded": successor is not None, "superseded_by": successor}
                for r in self.memories.superseded_by(key, memory_id)
            ]
            self.commits.delete_memories(key, memory_is(key, memory_id), {memory_id}, updated=relinked, known=known)
        return {"user_id": handle.display, "status": "deleted", "deleted": 1}

    def _forget_speaker(self, name: str, confirm: int, handle: StoreHandle) -> MemoryForgetAnswer:
        key = handle.key
        self.registry.require_speaker(key, name, writing=False)
        said = said_by(key, name)
        known = self.memories.naming(key, self.memories.ids(said))  # the long look-up, before writers wait
        with self.store.write_lock(key, rewriting=True):
            require_confirmed(key, name, self.memories.count(said), confirm)
            forgotten = self.memories.ids(said)
            self.commits.delete_memories(key, said, forgotten, known=known)
        return {"user_id": handle.display, "status": "deleted", "deleted": len(forgotten)}


def stored_answer(display: str, memory_id: str, speaker: str | None, chunks: int) -> MemoryAddAnswer:
    answer: MemoryAddAnswer = {"user_id": display, "id": memory_id, "status": "stored"}  # type: ignore[typeddict-item]
    if speaker is not None:
        answer["speaker"] = speaker  # before the chunks: the answer's order
    answer["chunks"] = chunks
    return answer


def duplicate_answer(display: str, duplicate_of: str) -> MemoryDuplicateAnswer:
    return {
        "user_id": display,
        "status": "duplicate",
        "id": "",
        "duplicate_of": duplicate_of,
        # No verb: each face names supersede its own way (memory_supersede, update, memories
        # supersede), and an answer, unlike an error, is not re-worded by the face.
        "note": "not stored: this restates a current memory of the same speaker (duplicate_of); "
        "to change that fact, supersede that memory",
    }


def _refuse_superseded(row: ChunkRow) -> ChunkRow:
    if row["superseded"]:
        raise ConflictError(
            f"memory '{row['memory_id']}' was already superseded; supersede its current version",
            field="memory_id",
            memory_id=row["memory_id"],
            superseded_by=row["superseded_by"],
        )
    return row
