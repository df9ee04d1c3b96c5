"""Fixing who said it after the fact: rename a speaker (a typo at registration), merge
one person registered under two names.

Both re-tag the memories in one commit of the chunks table, inside the store's write
lock, so no write from this or another process slips a memory under the old name in
between. The registry is another table, so the registration changes in commits of its
own, ordered so that no memory ever carries an unregistered name and a call cut short by
a crash is finished by calling it again: a rename registers the new name first (marked
as a rename in progress), re-tags, then drops the old name; a merge re-tags, then drops
the merged name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wontopos_mcp.contract import operation
from wontopos_mcp.errors import ConflictError, Fix, InvalidRequestError
from wontopos_mcp.rules.answers import JSON, SpeakerMergeAnswer, SpeakerRenameAnswer
from wontopos_mcp.rules.names import check_person
from wontopos_mcp.storage.where import said_by

from .commits import require_confirmed
from .registry import store_in_fix

if TYPE_CHECKING:
    from .commits import Commits

CONFIRM_RECORDS = operation("speaker_merge").param("confirm_records")


class Retagging:
    def __init__(self, commits: Commits) -> None:
        self.redactor = commits.redactor
        self.registry = commits.registry
        self.memories = commits.memories
        self.store = commits.store

    def speaker_rename(self, speaker: JSON, new_name: JSON, user_id: JSON = None) -> SpeakerRenameAnswer:
        name = check_person(speaker)
        new = check_person(new_name, field="new_name")
        self.redactor.refuse_secret_name(new, field="new_name")  # the old name may be one: renaming it away is allowed
        handle = self.registry.resolve(user_id)
        self.registry.require_speaker(handle.key, name, writing=False)
        answer: SpeakerRenameAnswer = {
            "user_id": handle.display, "speaker": new, "previous": name, "status": "renamed", "memories_retagged": 0,
        }  # fmt: skip
        if new == name:
            return answer
        with self.store.write_lock(handle.key, rewriting=True):
            self.registry.require_speaker(handle.key, name, writing=False)
            row = self.registry.speaker(handle.key, name)
            assert row is not None  # just required
            if not self.registry.begin_rename(handle.key, row, new):
                raise ConflictError(
                    (
                        f"{new!r} is already registered in this store; to make {name!r} and {new!r} one person, "
                        "merge them with ",
                        Fix.of("speaker_merge", speaker=name, into=new, user_id=store_in_fix(handle.key)),
                    ),
                    field="new_name",
                    speaker=new,
                )
            with self.store.erasing():  # the old name leaves the disk too
                retagged = self.memories.retag(handle.key, name, new)
                self.registry.end_rename(handle.key, name, new)
        answer["memories_retagged"] = retagged
        return answer

    def speaker_merge(
        self, speaker: JSON, into: JSON, confirm_records: JSON = None, user_id: JSON = None
    ) -> SpeakerMergeAnswer:
        name = check_person(speaker)
        target = check_person(into, field="into")
        self.redactor.refuse_secret_name(target, field="into")
        if confirm_records is None:
            raise InvalidRequestError(
                "confirm_records is required: pass records_to_delete from by_speaker for the speaker merged",
                field="confirm_records",
            )
        confirm = CONFIRM_RECORDS.integer(confirm_records)
        if target == name:
            raise InvalidRequestError("into must name another speaker than speaker", field="into", speaker=name)
        handle = self.registry.resolve(user_id)
        self._require_both(handle.key, name, target)
        with self.store.write_lock(handle.key, rewriting=True):
            self._require_both(handle.key, name, target)
            require_confirmed(handle.key, name, self.memories.count(said_by(handle.key, name)), confirm)
            with self.store.erasing():
                retagged = self.memories.retag(handle.key, name, target)
                self.registry.forget_speaker(handle.key, name)
        return {"user_id": handle.display, "speaker": target, "merged": name, "status": "merged",
                "memories_retagged": retagged}  # fmt: skip

    def _require_both(self, key: str, name: str, target: str) -> None:
        self.registry.require_speaker(key, name, writing=False)
        self.registry.require_speaker(key, target, writing=False, field="into")
