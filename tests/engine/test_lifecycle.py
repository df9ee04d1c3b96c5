"""A memory's life, through the core and the library face: conversations stored as
messages, recall, supersede chains, forgetting, idempotent writes, search filters and
importance.

Every service is real (LanceDB on disk under ``tmp_path``, the session's real model); the
one thing a test controls is time, through the service's ``clock``, and the model load,
through a loader that blocks on an event (``support.Gate``).
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from support import (
    RFC3339_MICROS,
    Gate,
    LibraryFace,
    ServiceFace,
    SteppableClock,
    all_memories,
    changes_nothing,
    ids,
    refused,
)

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.errors import WontoposError
from wontopos_mcp.model.embeddings import ModelLoader
from wontopos_mcp.rules.idempotency import Idempotency
from wontopos_mcp.rules.names import DEFAULT_STORE, store_key
from wontopos_mcp.rules.text import importance
from wontopos_mcp.storage.adapter import Store
from wontopos_mcp.storage.where import memory_is


def contents(memories: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in memories]


# -- memory_add_messages: who said each message ------------------------------------------------------


@pytest.mark.slow
def test_each_role_and_name_becomes_the_right_speaker_and_system_and_tool_are_skipped(face: ServiceFace) -> None:
    face.svc.speaker_register("Bob")
    face.svc.speaker_register("Carol")
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "My sister's wedding is on 12 September."},
        {"role": "assistant", "content": "I will remind you a week before."},
        {"role": "user", "name": "Bob", "content": "I can drive everyone to the venue."},
        {"role": "assistant", "name": "Carol", "content": "I will bring the flowers."},
        # A tool's name is not a person: never checked against the registry, never stored.
        {"role": "tool", "name": "calendar", "content": "Event created."},
    ]
    answer = face.add_messages(messages)
    results = answer["results"]
    assert [r["status"] for r in results] == ["stored"] * 4
    assert [r.get("speaker") for r in results] == [None, "me", "Bob", "Carol"]
    assert all(r["user_id"] == "default" and r["chunks"] == 1 and r["id"] for r in results)

    stored = all_memories(face.svc)
    assert ids(stored) == ids(results)  # in order, and nothing else: no system or tool message
    assert contents(stored) == [m["content"] for m in messages[1:5]]
    assert [m.get("speaker") for m in stored] == [None, "me", "Bob", "Carol"]
    assert "speaker" not in stored[0]

    assert ids(face.by_speaker("Bob")["memories"]) == [results[2]["id"]]
    assert ids(face.by_speaker("Carol")["memories"]) == [results[3]["id"]]
    assert ids(face.by_speaker("me")["memories"]) == [results[1]["id"]]  # untagged never under "me"
    assert {s["speaker"] for s in face.svc.speakers_list()["speakers"]} == {"Bob", "Carol"}  # "calendar" not added


@pytest.mark.slow
def test_each_message_is_an_atomic_memory_found_under_its_speaker(face: ServiceFace) -> None:
    face.svc.speaker_register("Bob")
    answer = face.add_messages(
        [
            {"role": "user", "name": "Bob", "content": "I moved to Lisbon in March."},
            {"role": "assistant", "content": "I will send the parcel to Lisbon then."},
        ]
    )
    bob_id, my_id = ids(answer["results"])
    assert ids(face.search("where does he live now?", speaker="Bob")) == [bob_id]
    assert ids(face.search("where does he live now?", speaker="me")) == [my_id]
    assert face.get(bob_id)["content"] == "I moved to Lisbon in March."


@pytest.mark.slow
def test_a_given_conversation_id_is_kept_on_every_memory(face: ServiceFace) -> None:
    answer = face.add_messages(
        [{"role": "user", "content": "Where shall we eat?"}, {"role": "assistant", "content": "The noodle bar."}],
        conversation_id="dinner-0710",
    )
    assert answer["conversation_id"] == "dinner-0710"
    assert answer["user_id"] == "default"
    assert {face.get(r["id"])["conversation_id"] for r in answer["results"]} == {"dinner-0710"}


@pytest.mark.slow
def test_without_a_conversation_id_each_call_gets_a_fresh_one(service: MemoryService) -> None:
    first = service.memory_add_messages([{"role": "user", "content": "Hello there."}])
    second = service.memory_add_messages([{"role": "user", "content": "Good morning."}])
    assert uuid.UUID(first["conversation_id"])
    assert uuid.UUID(second["conversation_id"])
    assert first["conversation_id"] != second["conversation_id"]
    memory = service.memory_get(first["results"][0]["id"])["memory"]
    assert memory["conversation_id"] == first["conversation_id"]


def test_only_system_and_tool_messages_store_nothing_and_answer_no_results(service: MemoryService) -> None:
    with changes_nothing(service):
        answer = service.memory_add_messages(
            [{"role": "system", "content": "Be brief."}, {"role": "tool", "name": "me", "content": "42"}]
        )
    assert answer["results"] == []
    assert answer["conversation_id"]


@pytest.mark.slow
def test_one_unregistered_name_anywhere_refuses_the_whole_call_and_stores_nothing(face: ServiceFace) -> None:
    face.svc.speaker_register("Bob")
    face.svc.memory_add("Something stored before.")
    messages = [
        {"role": "system", "content": "Transcript of the call."},
        {"role": "user", "content": "Let's begin."},
        {"role": "user", "name": "Bob", "content": "I have the numbers."},
        {"role": "assistant", "content": "Thanks, Bob."},
        {"role": "assistant", "name": "Dave", "content": "I disagree with the numbers."},
        {"role": "user", "name": "Bob", "content": "Let's discuss tomorrow."},
    ]
    with changes_nothing(face.svc), refused(400, field="messages[4].name", speaker="Dave") as info:
        face.add_messages(messages)
    verb = "add_speaker" if isinstance(face, LibraryFace) else "speaker_register"  # the caller's own verb
    assert f"Register it first: {verb}(speaker='Dave')" in info.value.message
    with changes_nothing(face.svc), refused(400, field="messages[0].name", speaker="bob"):
        face.add_messages([{"role": "user", "name": "bob", "content": "Names match exactly."}])


@pytest.mark.parametrize(
    ("messages", "field", "details"),
    [
        ([{"role": "user", "content": f"Turn {i}."} for i in range(101)], "messages", {"max_items": 100}),
        ([{"role": "user", "content": "x" * 30_000} for _ in range(7)], "messages", {"max_chars": 200_000}),
        ([], "messages", {}),
        ("hello", "messages", {}),
        ({"role": "user", "content": "hi"}, "messages", {}),
        ([{"role": "user", "content": "hi"}, {"role": "narrator", "content": "hi"}], "messages[1].role", {}),
        ([{"content": "hi"}], "messages[0].role", {}),
        ([{"role": "user", "content": "hi", "speaker": "Bob"}], "messages[0].speaker", {}),
        ([{"role": "user", "content": "hi"}, "hello"], "messages[1]", {}),
        ([{"role": "user", "content": "   "}], "messages[0].content", {}),
        ([{"role": "user"}], "messages[0].content", {}),
        ([{"role": "user", "content": "x" * 32_001}], "messages[0].content", {"max_chars": 32_000}),
        ([{"role": "user", "name": "Me", "content": "hi"}], "messages[0].name", {}),
        ([{"role": "assistant", "name": 7, "content": "hi"}], "messages[0].name", {}),
        ([{"role": "assistant", "content": "hi"}, {"role": "user", "name": " me ", "content": "ok"}],
         "messages[1].name", {"speaker": "me"}),
        ([{"role": "user", "content": "\u200b\u0000\u202e"}], "messages[0].content", {}),
    ],
    ids=[
        "101-messages", "over-200000-chars", "empty", "a-string", "an-object", "bad-role", "no-role",
        "unknown-key", "not-an-object", "blank-content", "no-content", "content-too-long", "reserved-name",
        "name-not-text", "a-user-named-me", "invisible-content",
    ],
)  # fmt: skip
def test_malformed_messages_are_400_naming_the_message_and_store_nothing(
    service: MemoryService, messages: Any, field: str, details: dict[str, Any]
) -> None:
    with changes_nothing(service), refused(400, field=field, **details):
        service.memory_add_messages(messages)


@pytest.mark.slow
def test_exactly_100_messages_and_200000_characters_are_accepted(service: MemoryService) -> None:
    # Limits are inclusive; system messages count toward the characters but are not stored.
    messages = [{"role": "system", "content": "s" * 2_000} for _ in range(99)]
    messages.append({"role": "user", "content": ("The plan is long. " * 112)[:2_000]})
    assert len(messages) == 100
    assert sum(len(m["content"]) for m in messages) == 200_000
    answer = service.memory_add_messages(messages)
    assert [r["status"] for r in answer["results"]] == ["stored"]
    assert service.memory_list()["count"] == 1


def test_bad_messages_are_refused_before_the_store_is_looked_up(service: MemoryService) -> None:
    with refused(400, field="messages[0].role"):
        service.memory_add_messages([{"role": "robot", "content": "hi"}], user_id="nobody")
    with refused(404, user_id="nobody"):
        service.memory_add_messages([{"role": "user", "content": "hi"}], user_id="nobody")


@pytest.mark.slow
def test_a_person_repeating_themselves_in_one_conversation_stores_every_turn(face: ServiceFace) -> None:
    face.svc.speaker_register("Bob")
    first = face.add_messages(
        [
            {"role": "user", "name": "Bob", "content": "OK."},
            {"role": "assistant", "content": "Shall I book it?"},
            {"role": "user", "name": "Bob", "content": "OK."},
        ],
        conversation_id="standup",
    )
    assert [r["status"] for r in first["results"]] == ["stored"] * 3
    later = face.add_messages([{"role": "user", "name": "Bob", "content": "ok"}], conversation_id="standup")
    assert later["results"][0]["status"] == "stored"
    assert len(face.by_speaker("Bob")["memories"]) == 3


@pytest.mark.slow
def test_the_same_message_restated_in_another_conversation_answers_duplicate(face: ServiceFace) -> None:
    face.svc.speaker_register("Bob")
    first = face.add_messages(
        [{"role": "user", "name": "Bob", "content": "The invoice total is 420 euros."}], conversation_id="a"
    )
    original = first["results"][0]["id"]
    with changes_nothing(face.svc):
        again = face.add_messages(
            [{"role": "user", "name": "Bob", "content": "the invoice total is 420 euros"}], conversation_id="b"
        )
    assert again["conversation_id"] == "b"
    assert again["results"] == [
        {
            "user_id": "default",
            "status": "duplicate",
            "id": "",
            "duplicate_of": original,
            "note": again["results"][0]["note"],
        }
    ]
    # In the same call, the other messages are still stored; another speaker's words are theirs.
    mixed = face.add_messages(
        [
            {"role": "user", "name": "Bob", "content": "The invoice total is 420 euros!"},
            {"role": "assistant", "content": "The invoice total is 420 euros."},
            {"role": "user", "name": "Bob", "content": "The invoice total is 430 euros."},
        ]
    )
    assert [r["status"] for r in mixed["results"]] == ["duplicate", "stored", "stored"]
    assert mixed["results"][0]["duplicate_of"] == original
    assert mixed["results"][1]["speaker"] == "me"


# -- memory_recall -------------------------------------------------------------------------------------------

TRIP_1 = [
    {"role": "user", "content": "Let's plan the weekend trip."},
    {"role": "assistant", "content": "Happy to help with the plan."},
    {"role": "user", "name": "Bob", "content": "My sister can feed the cat."},
    {"role": "user", "name": "Bob", "content": "The ferry to the island leaves at 7:40 from pier 4."},
]
WORK = [
    {"role": "user", "name": "Bob", "content": "The quarterly report is due next Monday."},
    {"role": "assistant", "content": "I will draft the slides."},
]
TRIP_2 = [
    {"role": "assistant", "content": "I will buy the tickets tonight."},
    {"role": "user", "content": "Sounds good."},
    {"role": "assistant", "name": "Carol", "content": "I can bring sandwiches for everyone."},
]


@pytest.fixture(scope="module", params=["service", "library"])
def conversations(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, embedder: Any
) -> Iterator[ServiceFace]:
    """Two conversations interleaved (trip, work, trip again), then a memory with none.

    Built once per face for the module: the recall tests only read it.
    """
    svc = MemoryService(Store(str(tmp_path_factory.mktemp("recall") / "db")), ModelLoader.of(embedder))
    svc.stores_list()
    face = ServiceFace(svc) if request.param == "service" else LibraryFace(svc)
    svc.speaker_register("Bob")
    svc.speaker_register("Carol")
    face.add_messages(TRIP_1, conversation_id="trip")
    face.add_messages(WORK, conversation_id="work")
    face.add_messages(TRIP_2, conversation_id="trip")
    svc.memory_add("The office coffee machine is broken.")
    yield face
    svc.close()


FERRY = "[Bob] The ferry to the island leaves at 7:40 from pier 4."


@pytest.mark.slow
def test_recall_long_term_is_the_search_answer_for_the_query(conversations: ServiceFace) -> None:
    recalled = conversations.recall("When does the ferry leave?", limit=5, context_limit=5)
    searched = conversations.svc.memory_search("When does the ferry leave?", limit=5)
    assert recalled["long_term"]["memories"] == searched["memories"]
    assert len(searched["memories"]) == 5
    assert searched["memories"][0]["content"] == FERRY[6:]
    assert recalled["user_id"] == "default"
    assert set(recalled) == {"user_id", "short_term", "long_term", "context"}


@pytest.mark.slow
def test_recall_shows_the_best_memorys_conversation_centred_on_it(conversations: ServiceFace) -> None:
    around = conversations.recall("When does the ferry leave?", context_limit=5)["context"]["around_top_memory"]
    # The work conversation stored in between is not part of it; untagged lines carry no name.
    assert around == [
        "[before] [me] Happy to help with the plan.",
        "[before] [Bob] My sister can feed the cat.",
        f"[match] {FERRY}",
        "[after] [me] I will buy the tickets tonight.",
        "[after] Sounds good.",
    ]
    assert conversations.recall("When does the ferry leave?", context_limit=1)["context"]["around_top_memory"] == [
        f"[match] {FERRY}"
    ]
    full = conversations.recall("When does the ferry leave?", context_limit=20)["context"]["around_top_memory"]
    assert len(full) == 7
    assert full[3] == f"[match] {FERRY}"
    assert full[0] == "[before] Let's plan the weekend trip."


def test_recall_gives_the_lines_one_side_cannot_use_to_the_other(conversations: ServiceFace) -> None:
    around = conversations.recall("Who is bringing sandwiches?", context_limit=3)["context"]["around_top_memory"]
    assert around == [
        "[before] [me] I will buy the tickets tonight.",
        "[before] Sounds good.",
        "[match] [Carol] I can bring sandwiches for everyone.",
    ]


def test_recall_around_a_memory_without_conversation_uses_store_order(conversations: ServiceFace) -> None:
    around = conversations.recall("Is the coffee machine working?", context_limit=3)["context"]["around_top_memory"]
    assert around == [
        "[before] Sounds good.",
        "[before] [Carol] I can bring sandwiches for everyone.",
        "[match] The office coffee machine is broken.",
    ]


def test_recall_short_term_is_the_last_turns_oldest_first(conversations: ServiceFace) -> None:
    turns = conversations.recall("anything", context_limit=4)["short_term"]["turns"]
    assert [{k: v for k, v in t.items() if k != "timestamp"} for t in turns] == [
        {"role": "assistant", "content": "I will draft the slides.", "speaker": "me"},
        {"role": "assistant", "content": "I will buy the tickets tonight.", "speaker": "me"},
        {"role": "user", "content": "Sounds good."},
        {"role": "assistant", "content": "I can bring sandwiches for everyone.", "speaker": "Carol"},
    ]  # the memory_add (no role) is not a turn
    stamps = [t["timestamp"] for t in turns]
    assert all(RFC3339_MICROS.fullmatch(s) for s in stamps)
    assert stamps == sorted(stamps)
    all_turns = conversations.recall("anything", context_limit=20)["short_term"]["turns"]
    assert [t["content"] for t in all_turns] == [m["content"] for m in TRIP_1 + WORK + TRIP_2]


def test_recall_with_context_limit_0_has_no_turns_and_no_lines(conversations: ServiceFace) -> None:
    recalled = conversations.recall("When does the ferry leave?", context_limit=0)
    assert recalled["short_term"] == {"turns": []}
    assert recalled["context"] == {"around_top_memory": []}
    assert recalled["long_term"]["memories"][0]["content"] == FERRY[6:]


def test_recall_on_an_empty_store_answers_empty_parts(service: MemoryService) -> None:
    assert service.memory_recall("anything at all") == {
        "user_id": "default",
        "short_term": {"turns": []},
        "long_term": {"memories": []},
        "context": {"around_top_memory": []},
    }


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 21}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": "10"}, "limit"),
        ({"context_limit": -1}, "context_limit"),
        ({"context_limit": 21}, "context_limit"),
        ({"context_limit": 2.0}, "context_limit"),
    ],
)
def test_recall_limits_out_of_range_are_400_naming_them(
    service: MemoryService, options: dict[str, Any], field: str
) -> None:
    with refused(400, field=field):
        service.memory_recall("anything", **options)


# -- supersede and forget ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_supersede_chain_stays_consistent_in_every_read(face: ServiceFace) -> None:
    face.svc.speaker_register("Bob")
    a = face.svc.memory_add("Bob lives in Leeds.", speaker="Bob", category="address", conversation_id="c-1")["id"]
    b = face.supersede(a, "Bob lives in York.")["id"]
    c_answer = face.supersede(b, "Bob lives in Bath.")
    c = c_answer["id"]
    assert c_answer == {"user_id": "default", "id": c, "status": "stored", "superseded": b}

    got = {m: face.get(m) for m in (a, b, c)}
    assert [(got[m]["is_superseded"], got[m].get("superseded_by")) for m in (a, b, c)] == [
        (True, b),
        (True, c),
        (False, None),
    ]
    for m in (b, c):  # each new version keeps the old one's speaker, category and conversation
        assert (got[m]["speaker"], got[m]["category"], got[m]["conversation_id"]) == ("Bob", "address", "c-1")

    said = face.by_speaker("Bob")
    assert ids(said["memories"]) == [c, b, a]
    assert [m["is_superseded"] for m in said["memories"]] == [False, True, True]
    assert ids(face.search("where does Bob live?")) == [c]
    assert set(ids(face.search("where does Bob live?", include_superseded=True))) == {a, b, c}

    with changes_nothing(face.svc), refused(409, superseded_by=b):
        face.supersede(a, "Bob lives in Hull.")
    with changes_nothing(face.svc), refused(409, superseded_by=c):
        face.supersede(b, "Bob lives in Hull.")


@pytest.mark.slow
def test_forgetting_the_newest_version_makes_its_predecessor_current_again(face: ServiceFace) -> None:
    a = face.svc.memory_add("The gate code is 1111.")["id"]
    b = face.supersede(a, "The gate code is 2222.")["id"]
    c = face.supersede(b, "The gate code is 3333.")["id"]
    face.forget(c)
    current = face.get(b)
    assert current["is_superseded"] is False
    assert "superseded_by" not in current
    assert face.get(a)["superseded_by"] == b
    assert ids(face.search("what is the gate code?")) == [b]
    assert face.supersede(b, "The gate code is 4444.")["superseded"] == b


@pytest.mark.slow
def test_forgetting_a_speaker_needs_the_current_count_and_deletes_every_version(face: ServiceFace) -> None:
    face.svc.speaker_register("Bob")
    face.svc.speaker_register("Alice")
    first = face.svc.memory_add("Bob is vegan. He cooks well.", speaker="Bob")["id"]  # two chunks
    face.supersede(first, "Bob is vegetarian.")
    face.add_messages([{"role": "user", "name": "Bob", "content": "I hate mornings."}])
    alice = face.svc.memory_add("Alice is vegan too.", speaker="Alice")["id"]
    seen = face.by_speaker("Bob")["records_to_delete"]
    assert seen == 4
    face.svc.memory_add("Bob plays chess.", speaker="Bob")  # said after the count was read

    with changes_nothing(face.svc), refused(409, records_to_delete=5, field="confirm_records"):
        face.forget_speaker("Bob", seen)
    assert face.forget_speaker("Bob", 5) == {"user_id": "default", "status": "deleted", "deleted": 4}
    assert face.by_speaker("Bob")["memories"] == []  # the registration stays
    assert {s["speaker"]: s["memories"] for s in face.svc.speakers_list()["speakers"]} == {"Bob": 0, "Alice": 1}
    assert ids(all_memories(face.svc)) == [alice]
    assert ids(face.search("what does Bob eat?", include_superseded=True)) == [alice]


# -- idempotent writes ---------------------------------------------------------------------------------------------


def idem(key: str, fingerprint: str = "body-1") -> Idempotency:
    return Idempotency.of(key, fingerprint)


@pytest.mark.slow
def test_a_repeated_write_with_the_same_key_and_body_replays_the_first_answer(service: MemoryService) -> None:
    first = service.memory_add("The boiler was serviced.", idempotency=idem("k-1"))
    assert first["status"] == "stored"
    assert "replayed" not in first
    with changes_nothing(service):
        again = service.memory_add("The boiler was serviced.", idempotency=idem("k-1"))
    assert again == {**first, "replayed": True}
    assert service.memory_list()["count"] == 1


def test_the_same_key_with_another_body_is_422_and_stores_nothing(service: MemoryService) -> None:
    service.memory_add("The boiler was serviced.", idempotency=idem("k-1", "body-1"))
    with changes_nothing(service), pytest.raises(WontoposError) as info:
        service.memory_add("The roof was repaired.", idempotency=idem("k-1", "body-2"))
    error = info.value.envelope()
    assert error["status"] == 422
    assert error["error"]["type"] == "invalid_request_error"
    assert error["error"]["field"] == "Idempotency-Key"


@pytest.mark.slow
def test_a_duplicate_outcome_replays_too_until_the_memory_it_names_is_forgotten(service: MemoryService) -> None:
    original = service.memory_add("The spare key is under the mat.")["id"]
    first = service.memory_add("the spare key is under the mat", idempotency=idem("k-dup"))
    assert first["status"] == "duplicate"
    assert first["duplicate_of"] == original
    again = service.memory_add("the spare key is under the mat", idempotency=idem("k-dup"))
    assert again == {**first, "replayed": True}
    service.memory_forget(memory_id=original)  # every idempotency record naming it goes with it
    fresh = service.memory_add("the spare key is under the mat", idempotency=idem("k-dup"))
    assert (fresh["status"], "replayed" in fresh) == ("stored", False)
    assert service.memory_list()["count"] == 1


@pytest.mark.slow
def test_a_record_naming_the_memory_written_after_the_look_up_outside_the_lock_goes_too(
    service: MemoryService,
) -> None:
    """A forget scans for the answers naming the memory before it takes the write lock (the
    scan is long; writers need not wait for it); inside, the rows written since (above the
    look-up's ``seq``) are read too, and memories it was not asked about get the full scan."""
    key = store_key(DEFAULT_STORE)
    kept = service.memory_add("The spare key is under the mat.")["id"]
    before = service.memories.naming(key, {kept})  # as the forget makes it, before the lock
    newer = service.memory_supersede(memory_id=kept, content="The spare key is in the drawer.", idempotency=idem("k"))
    assert newer["superseded"] == kept  # the new version's kept answer names the old one
    assert before.ids == frozenset()  # written after the look-up: only the seq range finds it
    assert {row["memory_id"] for row in service.memories.answering_for(key, {kept}, before)} == {newer["id"]}
    other = service.memory_add("The gate code is 4521.")["id"]
    again = service.memory_supersede(memory_id=other, content="The gate code is 7788.", idempotency=idem("k2"))
    late = service.memories.naming(key, {kept})  # asked about ``kept`` only, after both were written
    found = service.memories.answering_for(key, {kept, other}, late)
    assert {row["memory_id"] for row in found} == {newer["id"], again["id"]}
    service.memory_forget(memory_id=kept)
    answers = service.memories.store.chunks.rows(memory_is(key, newer["id"]), columns=("idem_answer",))
    assert answers
    assert all(row["idem_answer"] is None for row in answers)
    replay = service.memory_supersede(
        memory_id=newer["id"], content="The spare key is in the drawer.", idempotency=idem("k")
    )
    assert "replayed" not in replay  # the record went with the memory it named


@pytest.mark.slow
def test_keys_are_kept_per_store(service: MemoryService) -> None:
    service.store_create("alice")
    home = service.memory_add("The boiler was serviced.", idempotency=idem("k-1"))
    elsewhere = service.memory_add("The boiler was serviced.", user_id="alice", idempotency=idem("k-1"))
    assert elsewhere["status"] == "stored"
    assert "replayed" not in elsewhere
    assert elsewhere["id"] != home["id"]
    assert elsewhere["user_id"] == "alice"
    assert service.memory_list(user_id="alice")["count"] == 1


@pytest.mark.slow
def test_a_repeat_through_another_service_on_the_same_database_replays(
    make_service: Callable[..., MemoryService],
) -> None:
    one, two = make_service(), make_service()
    one.speaker_register("Bob")
    first = one.memory_add("Bob's flight lands at 9.", speaker="Bob", idempotency=idem("k-1"))
    assert two.memory_add("Bob's flight lands at 9.", speaker="Bob", idempotency=idem("k-1")) == {
        **first,
        "replayed": True,
    }
    messages = [{"role": "user", "name": "Bob", "content": "Pick me up at gate B."}]
    stored = one.memory_add_messages(messages, conversation_id="c", idempotency=idem("k-2"))
    assert two.memory_add_messages(messages, conversation_id="c", idempotency=idem("k-2")) == {
        **stored,
        "replayed": True,
    }
    assert two.memory_list()["count"] == 2


@pytest.mark.slow
def test_a_repeated_supersede_replays_instead_of_answering_409(service: MemoryService) -> None:
    old = service.memory_add("The meeting room is A1.")["id"]
    first = service.memory_supersede(old, "The meeting room is B2.", idempotency=idem("k-sup"))
    again = service.memory_supersede(old, "The meeting room is B2.", idempotency=idem("k-sup"))
    assert again == {**first, "replayed": True}
    assert service.memory_list()["count"] == 2


@pytest.mark.slow
def test_a_refused_write_records_no_key(service: MemoryService) -> None:
    with refused(400, speaker="Bob"):
        service.memory_add("Bob's flight lands at 9.", speaker="Bob", idempotency=idem("k-1"))
    service.speaker_register("Bob")
    stored = service.memory_add("Bob's flight lands at 9.", speaker="Bob", idempotency=idem("k-1"))
    assert stored["status"] == "stored"
    assert "replayed" not in stored


@pytest.mark.slow
def test_a_forgotten_memory_takes_its_idempotency_record_with_it(service: MemoryService) -> None:
    """The idempotency record is removed with the memory it stored, so nothing of the
    forgotten write is kept; the same key and body afterwards is a new write."""
    first = service.memory_add("My PIN is 4321.", idempotency=idem("k-1"))
    service.memory_forget(memory_id=first["id"])
    again = service.memory_add("My PIN is 4321.", idempotency=idem("k-1"))
    assert again["status"] == "stored"
    assert "replayed" not in again
    assert again["id"] != first["id"]
    assert ids(all_memories(service)) == [again["id"]]


@pytest.mark.slow
def test_fingerprints_are_keyed_by_a_secret_the_database_keeps(make_service: Callable[..., MemoryService]) -> None:
    one, two = make_service(), make_service()  # two processes on one database
    keyed = one.idempotency("k-1", "POST /api/v1/memory/store\n{}")
    plain = hashlib.sha256(b"POST /api/v1/memory/store\n{}").hexdigest()
    assert keyed.fingerprint.startswith("hmac-sha256:")
    assert plain not in keyed.fingerprint
    assert two.idempotency("k-1", "POST /api/v1/memory/store\n{}") == keyed
    assert one.idempotency("k-1", "another body").fingerprint != keyed.fingerprint
    first = one.memory_add("The boiler was serviced.", idempotency=keyed)
    assert two.memory_add("The boiler was serviced.", idempotency=keyed) == {**first, "replayed": True}
    kept = one.store.chunks.rows("idem_key = 'k-1'", columns=("idem_fp",))
    assert [row["idem_fp"] for row in kept] == [keyed.fingerprint]
    assert len(one.store.registry.rows("kind = 'secret'")) == 1


@pytest.mark.slow
def test_a_record_an_older_version_kept_as_a_plain_digest_still_matches_its_body(service: MemoryService) -> None:
    """Decision: a record of before keyed hashes (a plain SHA-256 of the same message) is
    honoured until it ages out: the same body replays, another is 422."""
    message = "POST /api/v1/memory/store\nthe body"
    old = Idempotency.of("k-old", hashlib.sha256(message.encode()).hexdigest())
    first = service.memory_add("The boiler was serviced.", idempotency=old)
    assert service.memory_add("The boiler was serviced.", idempotency=service.idempotency("k-old", message)) == {
        **first,
        "replayed": True,
    }
    with changes_nothing(service), refused(422, field="Idempotency-Key"):
        service.memory_add("The roof was repaired.", idempotency=service.idempotency("k-old", "another body"))


def test_a_repeated_call_of_only_skipped_messages_replays_the_first_answer(service: MemoryService) -> None:
    messages = [{"role": "system", "content": "Be brief."}]
    first = service.memory_add_messages(messages, idempotency=idem("k-sys"))
    again = service.memory_add_messages(messages, idempotency=idem("k-sys"))
    assert again == {**first, "replayed": True}


def test_a_key_is_free_again_after_24_hours(clocked_service: MemoryService, clock: SteppableClock) -> None:
    clocked_service.memory_add("The boiler was serviced.", idempotency=idem("k-1", "body-1"))
    clock.advance(hours=23, minutes=59)
    with refused(422, field="Idempotency-Key"):
        clocked_service.memory_add("The roof was repaired.", idempotency=idem("k-1", "body-2"))
    clock.advance(minutes=2)
    later = clocked_service.memory_add("The roof was repaired.", idempotency=idem("k-1", "body-2"))
    assert later["status"] == "stored"
    assert "replayed" not in later


@pytest.mark.slow
def test_a_repeat_while_the_first_is_still_running_is_409_with_retry_after_ms(tmp_path, gate: Gate) -> None:
    svc = MemoryService(Store(str(tmp_path / "db")), gate.loader(), model_wait=30)
    outcome: list[Any] = []

    def first_call() -> None:
        try:
            outcome.append(svc.memory_add("The boiler was serviced.", idempotency=idem("k-1")))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            outcome.append(exc)

    worker = threading.Thread(target=first_call, daemon=True)
    try:
        worker.start()
        assert gate.entered.wait(timeout=30), "the first call never reached the model"
        with refused(409, field="Idempotency-Key", retry_after_ms=500):
            svc.memory_add("The boiler was serviced.", idempotency=idem("k-1"))
        assert svc.memory_list()["count"] == 0
    finally:
        gate.event.set()
        worker.join(timeout=60)
    assert not worker.is_alive()
    first = outcome[0]
    assert isinstance(first, dict), first
    assert first["status"] == "stored", first
    assert svc.memory_add("The boiler was serviced.", idempotency=idem("k-1")) == {**first, "replayed": True}
    assert svc.memory_list()["count"] == 1
    svc.close()


# -- search filters -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_search_filters_narrow_the_scope(clocked_service: MemoryService, clock: SteppableClock) -> None:
    svc = clocked_service
    clock.set(datetime(2026, 7, 1, 23, 59, 59, 999999, tzinfo=timezone.utc))
    ski = svc.memory_add("We skied in the Alps.", category="trips", event_date="2026-01-15")["id"]
    late = svc.memory_add("We watched the late film.", category="fun", event_date="2026-03-10T23:30:00Z")["id"]
    undated = svc.memory_add("We bought a tent.", category="trips")["id"]  # happened = stored 2026-07-01
    clock.set(datetime(2026, 7, 2, 0, 0, tzinfo=timezone.utc))
    allergy = svc.memory_add("I am allergic to 2 kinds of nuts!", category="health")["id"]

    def found(**filters: Any) -> set[str]:
        return set(ids(svc.memory_search("what happened?", filters=filters)["memories"]))

    assert found(categories=["trips"]) == {ski, undated}
    assert found(categories="fun") == {late}
    assert found(categories=["trips", "health"]) == {ski, undated, allergy}
    assert found(event_from="2026-03-01", event_to="2026-03-10") == {late}  # a plain end day is the whole day
    assert found(event_to="2026-03-10T23:00:00Z") == {ski}
    assert found(event_from="2026-07-01") == {undated, allergy}  # no event_date: when it was stored
    assert found(time_to="2026-07-01") == {ski, late, undated}
    assert found(time_from="2026-07-02") == {allergy}
    assert found(time_from="2026-07-01T23:59:59.999999Z", time_to="2026-07-01") == {ski, late, undated}
    assert found(min_importance=0.6) == {allergy}
    assert found(categories=["trips"], event_from="2026-02-01") == {undated}
    assert found() == {ski, late, undated, allergy}


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"colour": "red"}, "filters.colour"),
        ({"categories": ["x"], "speaker": "Bob"}, "filters.speaker"),
        ({"event_from": "2026-07-02", "event_to": "2026-07-01"}, "filters.event_from"),
        ({"time_from": "2026-07-02T00:00:00+02:00", "time_to": "2026-07-01T12:00:00Z"}, "filters.time_from"),
        ({"event_to": "2026-07-10T10:00:00"}, "filters.event_to"),
        ({"min_importance": 1.01}, "filters.min_importance"),
    ],
)
def test_a_bad_filter_is_400_with_field_filters_key(
    service: MemoryService, filters: dict[str, Any], field: str
) -> None:
    with refused(400, field=field):
        service.memory_search("anything", filters=filters)


def test_the_same_plain_day_as_from_and_to_is_that_whole_day(service: MemoryService) -> None:
    kept = service.memory_add("The parade was at noon.", event_date="2026-05-01T12:00:00Z")["id"]
    service.memory_add("The fair was the day after.", event_date="2026-05-02T00:00:00Z")
    hits = service.memory_search("when?", filters={"event_from": "2026-05-01", "event_to": "2026-05-01"})
    assert ids(hits["memories"]) == [kept]


# -- importance ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_importance_is_between_0_and_1_and_follows_the_documented_heuristic(service: MemoryService) -> None:
    texts = {
        "ok": 0.3,
        "I am allergic to 2 kinds of nuts.": 0.6,  # a digit and "allergic"
        "Bob's birthday is on 3 May!": 0.75,  # a digit, "birthday", "!"
        "I always take the 7:15 train, it is important to me and I must never miss it; 大切です!": 1.0,
    }
    stored = {text: service.memory_add(text)["id"] for text in texts}
    got = {text: service.memory_get(i)["memory"]["importance"] for text, i in stored.items()}
    assert got == texts
    assert all(0 <= value <= 1 for value in got.values())
    assert got["I am allergic to 2 kinds of nuts."] > got["ok"]
    assert importance("x" * 80) == 0.4  # 80 characters or more adds 0.1


def test_a_batch_item_stored_in_the_future_refuses_the_batch_and_stores_nothing(service: MemoryService) -> None:
    """``as_of`` refuses a moment later than now, so no memory may claim to be stored then:
    the batch (an import's, the library's ``add_many``) is refused naming the item."""
    items = [{"content": "Stored yesterday.", "created_at": "2026-01-01"}, {"content": "Stored in 2999.",
             "created_at": "2999-01-01T00:00:00Z"}]  # fmt: skip
    with changes_nothing(service), refused(400, field="items[1].created_at"):
        service.memory_add_batch(items)
