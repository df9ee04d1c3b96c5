"""Stores and speakers: create, list, delete, register, remove. The registry keeps the
rows; this part adds what a store's or a speaker's memories need when it goes (deleted,
or untagged).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wontopos_mcp.errors import InvalidRequestError
from wontopos_mcp.rules.answers import (
    JSON,
    MemoryForgetAnswer,
    SpeakerInfo,
    SpeakerRegisterAnswer,
    SpeakerRemoveAnswer,
    SpeakersListAnswer,
    StoreCreateAnswer,
    StoreDeleteAnswer,
    StoreInfo,
    StoresListAnswer,
)
from wontopos_mcp.rules.dates import format_us
from wontopos_mcp.rules.names import check_person, named_store, similar_names
from wontopos_mcp.storage.where import in_store

if TYPE_CHECKING:
    from .commits import Commits


class Stores:
    def __init__(self, commits: Commits) -> None:
        self.commits = commits
        self.registry = commits.registry
        self.memories = commits.memories
        self.store = commits.store

    # -- stores ------------------------------------------------------------------------

    def store_create(self, user_id: JSON) -> StoreCreateAnswer:
        return self.registry.create_store(named_store(user_id))

    def stores_list(self) -> StoresListAnswer:
        rows = self.registry.stores()
        counts = self.memories.store_counts([r["user_id"] for r in rows])  # no model needed
        stores: list[StoreInfo] = [
            {"user_id": r["name"], "created_at": format_us(r["created_us"]), "memories": counts.get(r["user_id"], 0)}
            for r in rows
        ]
        return {"stores": stores}

    def store_delete(self, user_id: JSON) -> StoreDeleteAnswer:
        if user_id is None:
            raise InvalidRequestError("user_id is required to delete a store", field="user_id")
        handle = self.registry.resolve(user_id)
        # The store's lock, then the database's (store deletion is a database-wide change).
        with self.store.write_lock(handle.key, rewriting=True), self.store.erasing():
            # Memories first, then the registrations: a crash in between leaves a store
            # that a repeated call finishes deleting, never memories without their store.
            self.commits.remember_last_seq(handle.key)
            self.memories.delete(in_store(handle.key))
            # A deleted store's keys go with it (its speakers too; "default" is emptied).
            self.registry.forget_store(handle.key)
        return {"user_id": handle.display, "status": "deleted"}

    def delete_all(self, user_id: JSON) -> MemoryForgetAnswer:
        """Erase every memory of a store; the store and its speakers stay (REST/library)."""
        if user_id is None:
            raise InvalidRequestError("user_id is required to delete every memory", field="user_id")
        handle = self.registry.resolve(user_id)
        with self.store.write_lock(handle.key, rewriting=True):
            deleted = self.memories.count_memories(in_store(handle.key))
            self.commits.delete_memories(handle.key, in_store(handle.key), None)
        return {"user_id": handle.display, "status": "deleted", "deleted": deleted}

    # -- speakers --------------------------------------------------------------------------

    def speaker_register(self, speaker: JSON, user_id: JSON = None) -> SpeakerRegisterAnswer:
        name = check_person(speaker)
        self.commits.redactor.refuse_secret_name(name, field="speaker")
        handle = self.registry.resolve(user_id)
        row, status, count = self.registry.register_speaker(handle, name)
        answer: SpeakerRegisterAnswer = {
            "user_id": handle.display,
            "speaker": name,
            "status": status,
            "created_at": format_us(row["created_us"]),
            "count": count,
            "limit": self.registry.speaker_limit,
        }
        # Another person all the same (a look-alike name is never merged into one), but the
        # caller hears whom this name could be mistaken for.
        similar = similar_names(name, [r["name"] for r in self.registry.speakers(handle.key)])
        if similar:
            answer["similar_to"] = similar
        return answer

    def speakers_list(self, user_id: JSON = None) -> SpeakersListAnswer:
        handle = self.registry.resolve(user_id)
        rows = self.registry.speakers(handle.key)
        counts = self.memories.speaker_counts(handle.key)
        speakers: list[SpeakerInfo] = [
            {"speaker": r["name"], "memories": counts.get(r["name"], 0), "created_at": format_us(r["created_us"])}
            for r in rows
        ]
        limit = self.registry.speaker_limit
        return {"user_id": handle.display, "speakers": speakers, "count": len(speakers), "limit": limit}

    def speaker_remove(self, speaker: JSON, user_id: JSON = None) -> SpeakerRemoveAnswer:
        name = check_person(speaker)
        handle = self.registry.resolve(user_id)
        self.registry.require_speaker(handle.key, name, writing=False)
        with self.store.write_lock(handle.key, rewriting=True):
            self.registry.require_speaker(handle.key, name, writing=False)
            # Untag first: a crash before the registry delete leaves a registered name
            # with no memories, which a repeated call finishes removing.
            with self.store.erasing():
                untagged = self.memories.retag(handle.key, name, None)
                self.registry.forget_speaker(handle.key, name)
        return {"user_id": handle.display, "speaker": name, "status": "removed", "memories_untagged": untagged}
