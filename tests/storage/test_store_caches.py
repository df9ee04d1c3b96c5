"""What one handle remembers never hides another's commits.

Two services on one database directory stand for two processes (each has its own
LanceDB handles and its own in-memory hints: the registry answers kept per registry
version, the per-store sequence floor, the table-version check that lets a write skip
its second round of reads, the by_speaker spans).
"""

from __future__ import annotations

from typing import Any

import pytest
from support import all_memories, refused


@pytest.fixture
def pair(make_service: Any) -> Any:
    """Two services on one database, as two processes would be."""
    a, b = make_service(), make_service()
    a.store_create("shared")
    return a, b


def test_a_speaker_registered_or_removed_elsewhere_is_seen_at_once(pair: Any) -> None:
    a, b = pair
    with refused(400, speaker="Bob"):  # b reads (and keeps) "Bob is not registered"
        b.memory_add("Bob likes tea.", speaker="Bob", user_id="shared")
    a.speaker_register("Bob", user_id="shared")
    assert b.memory_add("Bob likes tea.", speaker="Bob", user_id="shared")["status"] == "stored"
    assert [s["speaker"] for s in b.speakers_list(user_id="shared")["speakers"]] == ["Bob"]
    a.speaker_remove("Bob", user_id="shared")
    with refused(400, speaker="Bob"):
        b.memory_add("Bob likes coffee.", speaker="Bob", user_id="shared")
    with refused(404, speaker="Bob"):
        b.memory_search("tea", speaker="Bob", user_id="shared")


@pytest.mark.slow
def test_writes_from_two_handles_interleave_in_one_strict_order_and_see_each_others_duplicates(pair: Any) -> None:
    a, b = pair
    written = []
    for i in range(8):  # a, a, b, b, ...: a handle's second write in a row reads no seq (``seq_given``)
        service = (a, b)[i // 2 % 2]
        written.append(service.memory_add(f"Note {i}: the parcel comes on day {i}.", user_id="shared")["id"])
    for service in (a, b):
        assert [m["id"] for m in all_memories(service, "shared", page=4)] == written
    seqs = a.store.chunks.column("chunk_idx = 0", "seq")
    assert sorted(seqs) == list(range(min(seqs), min(seqs) + len(written)))  # each given once, none skipped
    again = b.memory_add("note 0 - the parcel comes on day 0", user_id="shared")
    assert again["status"] == "duplicate"
    assert again["duplicate_of"] == written[0]
    a.memory_forget(memory_id=written[0], user_id="shared")
    assert b.memory_add("Note 0: the parcel comes on day 0.", user_id="shared")["status"] == "stored"


def test_a_store_deleted_elsewhere_is_gone_for_every_handle(pair: Any) -> None:
    a, b = pair
    b.memory_add("Something to lose.", user_id="shared")
    a.store_delete("shared")
    with refused(404, user_id="shared"):
        b.memory_add("Something new.", user_id="shared")


def test_a_commit_landing_between_a_writes_checks_and_its_commit_makes_it_check_again(
    pair: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write decides before it takes the lock (while it embeds) and decides again only
    if a table version moved: here the other handle commits right after each decision."""
    a, b = pair
    a.speaker_register("Bob", user_id="shared")
    find = b.memories.find_duplicate
    armed: list[Any] = []  # at most one interloper, fired after a write's first decision

    def find_then_interlope(*args: Any) -> Any:
        found = find(*args)
        if armed:
            armed.pop()()
        return found

    monkeypatch.setattr(b.memories, "find_duplicate", find_then_interlope)
    armed.append(lambda: a.memory_add("Bob's flight lands at 9.", speaker="Bob", user_id="shared"))
    first = b.memory_add("Bob's flight lands at 9!", speaker="Bob", user_id="shared")
    stored = [m["id"] for m in all_memories(b, "shared")]
    assert first["status"] == "duplicate"
    assert stored == [first["duplicate_of"]]
    armed.append(lambda: a.speaker_remove("Bob", user_id="shared"))
    with refused(400, speaker="Bob"):  # removed after the first check passed
        b.memory_add("Bob's hotel is near the station.", speaker="Bob", user_id="shared")
    assert len(all_memories(b, "shared")) == 1
