"""Every rule of stores, speakers and memories, on the core and on the ``Memory`` face.

Tests that take ``face`` run twice: once on ``MemoryService`` (the names MCP and REST map
onto) and once on the ``Memory`` library class (the SDK's names and argument order), so
the library is proven to re-implement nothing. Tests that take ``service`` or
``clocked_service`` check what only the core needs to show once (semantics of search,
the duplicate rule, "a failed call changes nothing"). Everything is real: LanceDB on disk
and the session's multilingual-e5-small.
"""

from __future__ import annotations

import math
import shutil
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from support import (
    RFC3339_MICROS,
    LibraryFace,
    ServiceFace,
    SteppableClock,
    changes_nothing,
    ids,
    refused,
    walk_by_speaker,
)

from wontopos_mcp import (
    BadRequestError,
    ConflictError,
    InvalidRequestError,
    Memory,
    NotFoundError,
    WontoposError,
    WosError,
)
from wontopos_mcp.engine import memories
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader
from wontopos_mcp.storage.adapter import Store

# -- stores ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_default_store_always_exists_and_is_used_when_no_store_is_named(face: ServiceFace) -> None:
    assert [s["user_id"] for s in face.stores()] == ["default"]
    added = face.add("The wifi password is on the fridge.")
    assert added["user_id"] == "default"
    assert ids(face.list(user_id="default")["memories"]) == [added["id"]]


@pytest.mark.slow
def test_deleting_the_default_store_empties_it_and_it_goes_on_existing(face: ServiceFace) -> None:
    face.register("Bob")
    face.add("Bob likes jazz.", speaker="Bob")
    face.add("I like silence.", speaker="me")
    assert face.delete_store("default") == {"user_id": "default", "status": "deleted"}
    assert [s["user_id"] for s in face.stores()] == ["default"]
    assert face.list()["memories"] == []
    assert face.speakers()["speakers"] == []
    with refused(404, speaker="Bob"):
        face.by_speaker("Bob")
    assert face.add("A fresh start.")["status"] == "stored"


@pytest.mark.slow
def test_deleting_a_store_removes_it_with_its_memories_and_speakers(face: ServiceFace) -> None:
    face.create_store("Team")
    face.register("Bob", user_id="team")
    face.add("Bob owns the release.", user_id="team", speaker="Bob")
    assert face.delete_store("TEAM") == {"user_id": "Team", "status": "deleted"}
    assert [s["user_id"] for s in face.stores()] == ["default"]
    with refused(404, user_id="team"):
        face.speakers(user_id="team")
    assert face.create_store("team")["status"] == "created"
    assert face.speakers(user_id="team")["speakers"] == []
    assert face.list(user_id="team")["memories"] == []


@pytest.mark.slow
@pytest.mark.parametrize("each_store_max", [memories.COUNT_EACH_STORE_MAX, 0], ids=["count-each", "one-scan"])
def test_stores_list_counts_each_stores_memories_superseded_included_after_add_forget_and_delete(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch, each_store_max: int
) -> None:
    # Both ways of counting (one count per store; one scan of the store column past the cap).
    monkeypatch.setattr(memories, "COUNT_EACH_STORE_MAX", each_store_max)

    def counts() -> dict[str, int]:
        return {s["user_id"]: s["memories"] for s in service.stores_list()["stores"]}

    assert counts() == {"default": 0}
    service.store_create("Team")
    service.speaker_register("Bob", user_id="team")
    first = service.memory_add("Bob owns the release. He ships on Friday.", speaker="Bob", user_id="team")["id"]
    service.memory_add("Nobody said this.", user_id="team")
    service.memory_add("The wifi password is on the fridge.")
    assert counts() == {"default": 1, "Team": 2}  # memories, not their sentence records
    service.memory_supersede(first, "Bob owns the release. He ships on Monday.", user_id="team")
    assert counts() == {"default": 1, "Team": 3}  # the superseded version still counts
    service.memory_forget(first, user_id="team")
    assert counts() == {"default": 1, "Team": 2}
    service.store_delete("team")
    assert counts() == {"default": 1}
    service.store_create("team")
    service.store_delete("default")  # emptied, and listed on
    assert counts() == {"default": 0, "team": 0}


def test_store_delete_requires_a_user_id(service: MemoryService) -> None:
    with refused(400, field="user_id"):
        service.store_delete(None)


STORE_CALLS: dict[str, Callable[[ServiceFace], Any]] = {
    "register": lambda f: f.register("Bob", user_id="ghost"),
    "speakers": lambda f: f.speakers(user_id="ghost"),
    "remove": lambda f: f.remove("Bob", user_id="ghost"),
    "add": lambda f: f.add("hello", user_id="ghost"),
    "search": lambda f: f.search("hello", user_id="ghost"),
    "by_speaker": lambda f: f.by_speaker("me", user_id="ghost"),
    "get": lambda f: f.get(str(uuid.uuid4()), user_id="ghost"),
    "list": lambda f: f.list(user_id="ghost"),
    "forget": lambda f: f.forget(str(uuid.uuid4()), user_id="ghost"),
    "forget_speaker": lambda f: f.forget_speaker("me", 0, user_id="ghost"),
    "supersede": lambda f: f.supersede(str(uuid.uuid4()), "new", user_id="ghost"),
    "delete_store": lambda f: f.delete_store("ghost"),
}


@pytest.mark.parametrize("call", STORE_CALLS.values(), ids=STORE_CALLS.keys())
def test_a_store_that_does_not_exist_is_404_saying_how_to_create_it(
    face: ServiceFace, call: Callable[..., Any]
) -> None:
    with refused(404, field="user_id", user_id="ghost") as info:
        call(face)
    # The fix in the caller's verbs: the core speaks the tools' names, the library the SDK's.
    verb = "create_store" if isinstance(face, LibraryFace) else "store_create"
    assert f"create it first with {verb}(user_id='ghost')" in info.value.message
    assert [s["user_id"] for s in face.stores()] == ["default"]


@pytest.mark.slow
def test_nothing_crosses_from_one_store_to_another(face: ServiceFace) -> None:
    for store in ("home", "work"):
        face.create_store(store)
        face.register("Bob", user_id=store)
    at_home = face.add("Bob keeps the spare key under the mat.", user_id="home", speaker="Bob")["id"]
    assert face.search("where is the spare key?", user_id="work", speaker="Bob") == []
    assert face.search("where is the spare key?", user_id="work") == []
    assert face.by_speaker("Bob", user_id="work")["memories"] == []
    assert face.list(user_id="work")["memories"] == []
    assert face.speakers(user_id="work")["speakers"][0]["memories"] == 0
    for call in (
        lambda: face.get(at_home, user_id="work"),
        lambda: face.forget(at_home, user_id="work"),
        lambda: face.supersede(at_home, "Bob moved the key.", user_id="work"),
    ):
        with refused(404, memory_id=at_home):
            call()
    assert ids(face.list(user_id="home")["memories"]) == [at_home]
    assert face.get(at_home, user_id="home")["is_superseded"] is False


# -- speakers ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_speaker_limit_is_counted_at_registration_only(make_face: Callable[..., ServiceFace]) -> None:
    face = make_face(speaker_limit=3)
    for count, name in enumerate(["Ann", "Ben", "Cid"], start=1):
        answer = face.register(name)
        assert (answer["status"], answer["count"], answer["limit"]) == ("registered", count, 3)
        assert RFC3339_MICROS.fullmatch(answer["created_at"])
    with refused(400, field="speaker", speaker_limit=3):
        face.register("Dee")
    again = face.register("Ben")
    assert (again["status"], again["count"]) == ("exists", 3)
    assert face.speakers()["count"] == 3
    # Storing and searching never answer a limit error.
    for name in ("Ann", "Ben", "Cid", "me"):
        assert face.add(f"{name} brought 3 apples to the picnic.", speaker=name)["status"] == "stored"
        assert len(face.search("who brought apples?", speaker=name)) == 1
    assert face.add("Nobody in particular said this.")["status"] == "stored"


def test_removing_a_speaker_frees_a_place_under_the_limit(make_face: Callable[..., ServiceFace]) -> None:
    face = make_face(speaker_limit=3)
    for name in ("Ann", "Ben", "Cid"):
        face.register(name)
    face.remove("Ann")
    assert face.register("Dee")["count"] == 3
    with refused(400, speaker_limit=3):
        face.register("Ann")


@pytest.mark.slow
def test_a_lower_limit_on_reopening_never_refuses_storing_or_searching(
    make_service: Callable[..., MemoryService],
) -> None:
    wide = make_service(speaker_limit=3)
    for name in ("Ann", "Ben", "Cid"):
        wide.speaker_register(name)
    narrow = make_service(speaker_limit=2)
    for name in ("Ann", "Ben", "Cid"):
        assert narrow.memory_add(f"{name} likes 2 sugars in coffee.", speaker=name)["status"] == "stored"
        assert len(narrow.memory_search("how many sugars?", speaker=name)["memories"]) == 1
        assert narrow.by_speaker(name)["returned"] == 1
    assert narrow.speaker_register("Ann")["status"] == "exists"
    with refused(400, speaker_limit=2):
        narrow.speaker_register("Dee")


def test_storing_with_an_unregistered_name_is_400_and_stores_nothing(face: ServiceFace) -> None:
    face.register("Alice")
    with changes_nothing(face.svc), refused(400, field="speaker", speaker="Bob") as info:
        face.add("Bob said the deadline moved to Tuesday.", speaker="Bob")
    assert "register" in info.value.message.lower()


@pytest.mark.parametrize("read", ["search", "by_speaker"])
def test_reading_by_an_unregistered_name_is_404_with_the_speaker(face: ServiceFace, read: str) -> None:
    face.add("Something untagged.")
    with refused(404, speaker="Bob"):
        face.search("anything", speaker="Bob") if read == "search" else face.by_speaker("Bob")


@pytest.mark.slow
def test_removing_a_speaker_keeps_its_memories_and_untags_them(face: ServiceFace) -> None:
    face.register("Bob")
    kept = face.add("Bob walks to work.", speaker="Bob")["id"]
    old = face.add("Bob drives a blue car.", speaker="Bob")["id"]
    new = face.supersede(old, "Bob drives a red car.")["id"]
    other = face.add("I walk to work too.", speaker="me")["id"]
    assert face.remove(" Bob ") == {"user_id": "default", "speaker": "Bob", "status": "removed", "memories_untagged": 3}
    memories = {m["id"]: m for m in face.list()["memories"]}
    assert set(memories) == {kept, old, new, other}
    assert all("speaker" not in memories[i] for i in (kept, old, new))
    assert memories[other]["speaker"] == "me"
    assert face.speakers()["speakers"] == []
    with refused(404, speaker="Bob"):
        face.by_speaker("Bob")
    face.register("Bob")
    assert face.by_speaker("Bob")["memories"] == []
    assert {m["id"] for m in face.search("how does Bob get to work?", limit=5)} >= {kept}


def test_removing_an_unregistered_name_is_404(face: ServiceFace) -> None:
    with refused(404, speaker="Bob"):
        face.remove("Bob")


@pytest.mark.slow
def test_speakers_list_counts_memories_superseded_included_and_never_lists_me(clocked_face: ServiceFace) -> None:
    clocked_face.register("Bob")
    clocked_face.register("Alice")
    first = clocked_face.add("Bob prefers aisle seats.", speaker="Bob")["id"]
    clocked_face.supersede(first, "Bob prefers window seats.")
    clocked_face.add("I prefer the train.", speaker="me")
    listed = clocked_face.speakers()
    assert listed["count"] == 2
    assert listed["limit"] == 50
    assert listed["user_id"] == "default"
    assert {s["speaker"]: s["memories"] for s in listed["speakers"]} == {"Bob": 2, "Alice": 0}
    assert all(RFC3339_MICROS.fullmatch(s["created_at"]) for s in listed["speakers"])


# -- the memory record --------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_memory_has_every_field_spec_names_and_omits_the_empty_ones(
    clocked_face: ServiceFace, clock: SteppableClock
) -> None:
    clocked_face.register("Bob")
    full = clocked_face.add(
        " Bob moved to Porto in March.\n",
        speaker="Bob",
        category="life",
        event_date="2026-03-15",
        conversation_id="call-7",
    )
    assert full == {"user_id": "default", "id": full["id"], "status": "stored", "speaker": "Bob", "chunks": 1}
    assert str(uuid.UUID(full["id"])) == full["id"]
    record = clocked_face.get(full["id"])
    assert record == {
        "id": full["id"],
        "content": " Bob moved to Porto in March.\n",
        "speaker": "Bob",
        "category": "life",
        "importance": record["importance"],
        "time_bucket": "2026-03",
        "created_at": "2026-07-10T04:20:39.123456Z",
        "event_date": "2026-03-15",
        "conversation_id": "call-7",
        "is_superseded": False,
    }
    assert 0.0 <= record["importance"] <= 1.0

    clock.set(datetime(2026, 8, 1, 0, 0, 0, 5, tzinfo=timezone.utc))
    bare = clocked_face.add("The cat sleeps a lot")
    assert "speaker" not in bare
    assert clocked_face.get(bare["id"]) == {
        "id": bare["id"],
        "content": "The cat sleeps a lot",
        "category": "general",
        "importance": clocked_face.get(bare["id"])["importance"],
        "time_bucket": "2026-08",
        "created_at": "2026-08-01T00:00:00.000005Z",
        "is_superseded": False,
    }


@pytest.mark.slow
def test_no_read_ever_answers_null(clocked_face: ServiceFace) -> None:
    clocked_face.register("Bob")
    old = clocked_face.add("Bob's bike is green.", speaker="Bob")["id"]
    clocked_face.supersede(old, "Bob's bike is black.")
    clocked_face.add("It might rain.")
    reads = (
        clocked_face.list()["memories"]
        + clocked_face.by_speaker("Bob")["memories"]
        + clocked_face.search("bike colour", include_superseded=True)
        + [clocked_face.get(old)]
    )
    for record in reads:
        assert None not in record.values(), record
        assert isinstance(record["is_superseded"], bool)
    assert all(0.0 <= m["similarity"] <= 1.0 for m in clocked_face.search("bike colour"))
    assert "score" not in clocked_face.search("bike colour")[0]


@pytest.mark.parametrize("empty", ["", "   ", "\n\t ", None, 42])
def test_content_must_be_non_empty_text(face: ServiceFace, empty: Any) -> None:
    with refused(400, field="content"):
        face.add(empty)
    assert face.list()["count"] == 0


@pytest.mark.slow
def test_content_of_32000_characters_is_stored_and_32001_is_refused_with_max_chars(service: MemoryService) -> None:
    longest = "The longest memory." + " " * (32_000 - len("The longest memory."))
    stored = service.memory_add(longest)
    assert service.memory_get(stored["id"])["memory"]["content"] == longest
    with refused(400, field="content", max_chars=32_000):
        service.memory_add(longest + " ")
    assert service.memory_list()["count"] == 1


@pytest.mark.slow
def test_a_sentence_too_long_for_the_model_is_split_again(service: MemoryService, embedder: Any) -> None:
    words = " ".join(f"word{i}" for i in range(embedder.max_chars))  # several model budgets, no sentence end
    stored = service.memory_add(words)
    assert stored["chunks"] >= math.ceil(len(words) / embedder.max_chars)
    assert [m["content"] for m in service.memory_list()["memories"]] == [words]  # one memory, many chunks
    assert service.by_speaker("me")["records_to_delete"] == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content", "chunks"),
    [
        ("The deadline moved. Bob is upset! Is it Tuesday?", 3),
        ("今日は晴れ。明日は雨！本当？", 3),
        ("오늘은 맑아요. 내일은 비가 와요.", 2),
        ("Это первое. Это второе.", 2),
        ("第一句。第二句？", 2),
        ("line one\nline two\r\nline three", 3),
        ("One sentence that never ends", 1),
    ],
)
def test_each_sentence_in_any_script_is_its_own_chunk(service: MemoryService, content: str, chunks: int) -> None:
    service.speaker_register("Bob")
    assert service.memory_add(content, speaker="Bob")["chunks"] == chunks
    assert service.by_speaker("Bob")["chunks"] == chunks


# -- search ---------------------------------------------------------------------------------------------

FACTS = [
    "My cat is called Miso.",
    "The boiler was serviced in January.",
    "Our flight to Oslo leaves at 7:40.",
    "The spare key is in the blue vase.",
    "Grandma's birthday is on the 3rd of May.",
    "The car needs new tyres before winter.",
    "The dentist appointment is next Thursday.",
]


@pytest.mark.slow
def test_search_returns_exactly_min_of_limit_and_scope_each_memory_once(face: ServiceFace) -> None:
    for fact in FACTS:
        face.add(fact)
    for limit, expected in ((5, 5), (6, 6), (7, 7), (10, 7), (20, 7)):
        found = face.search("anything at all", limit=limit)
        assert len(found) == expected, limit
        assert len(set(ids(found))) == expected, limit
    assert face.search("anything at all")
    assert len(face.search("anything at all")) == 7


@pytest.mark.slow
def test_search_counts_memories_not_chunks(service: MemoryService) -> None:
    """One long memory whose every chunk matches must not crowd the others out of the answer."""
    long_one = " ".join(f"Miso the cat did trick number {i}." for i in range(30))
    many = service.memory_add(long_one)
    assert many["chunks"] == 30
    others = {service.memory_add(fact)["id"] for fact in FACTS}
    found = ids(service.memory_search("What tricks does Miso the cat do?", limit=5)["memories"])
    assert len(found) == len(set(found)) == 5
    assert many["id"] in found
    assert set(found) - {many["id"]} <= others


@pytest.mark.slow
def test_search_puts_the_best_match_first(face: ServiceFace) -> None:
    added = {fact: face.add(fact)["id"] for fact in FACTS}
    assert face.search("What is the name of my cat?", limit=5)[0]["id"] == added["My cat is called Miso."]
    assert face.search("Where is the spare key?", limit=5)[0]["id"] == added["The spare key is in the blue vase."]
    assert (
        face.search("Wann ist der Zahnarzttermin?", limit=5)[0]["id"]
        == added["The dentist appointment is next Thursday."]
    )


@pytest.mark.slow
def test_a_speaker_filter_returns_only_that_speakers_words_even_when_another_is_closer(
    service: MemoryService,
) -> None:
    service.speaker_register("Bob")
    service.speaker_register("Alice")
    bob = service.memory_add("Die Abgabe wurde auf Dienstag verschoben.", speaker="Bob")["id"]
    bob_ja = service.memory_add("締め切りは金曜日に延びました。", speaker="Bob")["id"]
    alice = service.memory_add("The project deadline moved to Tuesday.", speaker="Alice")["id"]
    service.memory_add("La date limite du projet est mardi.", speaker="Alice")
    service.memory_add("The project deadline is next Tuesday.")
    query = "When is the project deadline?"
    unfiltered = service.memory_search(query, limit=5)["memories"]
    assert unfiltered[0]["id"] != bob
    assert ids(unfiltered).index(alice) < ids(unfiltered).index(bob)
    said = service.memory_search(query, speaker="Bob", limit=5)
    assert said["speaker"] == "Bob"
    assert set(ids(said["memories"])) == {bob, bob_ja}
    assert {m["speaker"] for m in said["memories"]} == {"Bob"}


@pytest.mark.slow
def test_a_three_memory_speaker_among_sixty_gets_all_three(service: MemoryService) -> None:
    colours = ["red", "green", "blue", "yellow", "purple", "orange"]
    service.speaker_register("Alice")
    service.speaker_register("Carol")
    for i in range(57):
        speaker = "Alice" if i % 2 else None
        answer = service.memory_add(
            f"Box {i} on shelf {i % 9} holds {i * 7} {colours[i % 6]} marbles.", speaker=speaker
        )
        assert answer["status"] == "stored"
    carol = {
        service.memory_add("I counted the marbles twice.", speaker="Carol")["id"],
        service.memory_add("The shelves are too full.", speaker="Carol")["id"],
        service.memory_add("Ich mag keine Murmeln.", speaker="Carol")["id"],
    }
    found = service.memory_search("how many marbles are in box 12?", speaker="Carol", limit=5)["memories"]
    assert set(ids(found)) == carol
    assert len(found) == 3


@pytest.mark.slow
def test_me_memories_are_separate_from_untagged_ones(face: ServiceFace) -> None:
    mine = face.add("I will send the report on Monday.", speaker="me")["id"]
    untagged = face.add("I will send the report on Monday.")["id"]
    assert mine != untagged
    assert ids(face.search("who sends the report?", speaker="me")) == [mine]
    assert ids(face.by_speaker("me")["memories"]) == [mine]
    assert set(ids(face.search("who sends the report?"))) == {mine, untagged}


@pytest.mark.slow
def test_attribution_comes_from_the_speaker_record_not_the_text(service: MemoryService) -> None:
    service.speaker_register("Bob")
    service.speaker_register("Alice")
    bobs = service.memory_add("Alice is always late to meetings.", speaker="Bob")["id"]
    assert service.memory_search("Alice late meetings", speaker="Alice")["memories"] == []
    assert ids(service.memory_search("who is late?", speaker="Bob")["memories"]) == [bobs]


@pytest.mark.slow
def test_superseded_memories_leave_default_search_but_can_be_asked_for(face: ServiceFace) -> None:
    old = face.add("The office is on the 3rd floor.")["id"]
    new = face.supersede(old, "The office is on the 5th floor.")["id"]
    assert ids(face.search("which floor is the office on?")) == [new]
    everything = face.search("which floor is the office on?", include_superseded=True)
    assert set(ids(everything)) == {old, new}
    assert {m["id"]: m["is_superseded"] for m in everything} == {old: True, new: False}


# -- search filters -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_filter_by_categories(face: ServiceFace) -> None:
    work = face.add("Ship the release on Friday.", category="work")["id"]
    face.add("Take vitamins every morning.", category="health")
    chores = face.add("Buy light bulbs.")["id"]
    assert ids(face.search("what to do", filters={"categories": ["work"]})) == [work]
    assert set(ids(face.search("what to do", filters={"categories": ["work", "general"]}))) == {work, chores}
    assert face.search("what to do", filters={"categories": ["nothing-here"]}) == []


@pytest.mark.slow
def test_filter_by_when_it_happened_falls_back_to_when_it_was_stored(
    clocked_face: ServiceFace, clock: SteppableClock
) -> None:
    january = clocked_face.add("We skied in the Alps.", event_date="2026-01-15")["id"]
    march = clocked_face.add("We planted tomatoes.", event_date="2026-03-10T18:00:00+01:00")["id"]
    undated = clocked_face.add("We bought a tent.")["id"]  # stored 2026-07-10
    assert ids(
        clocked_face.search("what did we do?", filters={"event_from": "2026-03-01", "event_to": "2026-03-31"})
    ) == [march]
    assert ids(clocked_face.search("what did we do?", filters={"event_to": "2026-01-15"})) == [january]
    assert ids(clocked_face.search("what did we do?", filters={"event_from": "2026-07-01"})) == [undated]
    assert set(ids(clocked_face.search("what did we do?", filters={"event_from": "2026-01-15T00:00:00Z"}))) == {
        january,
        march,
        undated,
    }


@pytest.mark.slow
def test_filter_by_when_it_was_stored_with_a_plain_day_as_the_whole_day(
    clocked_face: ServiceFace, clock: SteppableClock
) -> None:
    clock.set(datetime(2026, 7, 1, 23, 59, 59, 999999, tzinfo=timezone.utc))
    first = clocked_face.add("The garden was watered.")["id"]
    clock.set(datetime(2026, 7, 2, 0, 0, 0, tzinfo=timezone.utc))
    second = clocked_face.add("The fence was painted.")["id"]
    assert ids(clocked_face.search("what happened?", filters={"time_to": "2026-07-01"})) == [first]
    assert ids(clocked_face.search("what happened?", filters={"time_from": "2026-07-02"})) == [second]
    assert ids(
        clocked_face.search(
            "what happened?", filters={"time_from": "2026-07-01T23:59:59.999999Z", "time_to": "2026-07-01"}
        )
    ) == [first]


@pytest.mark.slow
def test_filter_by_minimum_importance_includes_a_memory_at_exactly_that_importance(face: ServiceFace) -> None:
    texts = [
        "ok",
        "I always need my allergy pills!",
        "The deadline is on 5 May and it is important!",
        "Meeting at 10.",
        "I love tea.",
    ]
    added = [face.add(text)["id"] for text in texts]
    importance = {i: face.get(i)["importance"] for i in added}
    for floor in sorted(set(importance.values())):
        found = face.search("anything", filters={"min_importance": floor})
        assert set(ids(found)) == {i for i, value in importance.items() if value >= floor}, floor


@pytest.mark.slow
@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"colour": "red"}, "colour"),
        ({"speaker": "Bob"}, "speaker"),
        ({"event_from": "last week"}, "event_from"),
        ({"event_to": "2026-07-10T10:00:00"}, "event_to"),
        ({"time_from": 20260710}, "time_from"),
        ({"time_to": "2026-02-30"}, "time_to"),
        ({"event_from": "2026-07-02", "event_to": "2026-07-01"}, "event_from"),
        ({"time_from": "2026-07-02T00:00:00Z", "time_to": "2026-07-01"}, "time_from"),
        ({"min_importance": 1.5}, "min_importance"),
        ({"min_importance": "high"}, "min_importance"),
        ({"min_importance": True}, "min_importance"),
        ({"categories": "work' OR '1'='1"}, None),
        ({"categories": [1, 2]}, "categories"),
    ],
)
def test_a_bad_filter_is_400_naming_it(face: ServiceFace, filters: dict[str, Any], field: str | None) -> None:
    if field is None:  # a well-formed but odd value: no error, and nothing matches
        face.add("Some memory.", category="work")
        assert face.search("memory", filters=filters) == []
        return
    with refused(400) as info:
        face.search("memory", filters=filters)
    assert field in info.value.field
    assert field in info.value.message


def test_filters_must_be_an_object(service: MemoryService) -> None:
    with refused(400, field="filters"):
        service.memory_search("x", filters=["categories"])


@pytest.mark.parametrize("limit", [21, 0, -1, True, 5.0, "10", None])
def test_a_search_limit_outside_1_to_20_or_not_an_integer_is_refused(face: ServiceFace, limit: Any) -> None:
    with refused(400, field="limit"):
        face.search("anything", limit=limit)


@pytest.mark.parametrize("limit", [0, 21, False, 7.5, "20"])
def test_a_by_speaker_limit_outside_1_to_20_or_not_an_integer_is_refused(face: ServiceFace, limit: Any) -> None:
    with refused(400, field="limit"):
        face.by_speaker("me", limit=limit)


@pytest.mark.parametrize("limit", [0, 501, True, 1.0, "100"])
def test_a_list_limit_outside_1_to_500_or_not_an_integer_is_refused(face: ServiceFace, limit: Any) -> None:
    with refused(400, field="limit"):
        face.list(limit=limit)


# -- duplicates -------------------------------------------------------------------------------------------


RESTATEMENTS = [
    "Bob said the deadline moved to Tuesday.",
    "bob said the deadline moved to tuesday",
    "BOB SAID THE DEADLINE MOVED TO TUESDAY!!!",
    "  Bob said   the deadline\tmoved to Tuesday .  ",
    "Ｂｏｂ said the deadline moved to Ｔｕｅｓｄａｙ.",
    "Bob said, the deadline moved to Tuesday...",
]


@pytest.mark.slow
def test_restating_a_memory_answers_duplicate_and_stores_nothing(face: ServiceFace) -> None:
    """Same text once case, spacing, punctuation and Unicode form (NFKC) are normalised."""
    face.register("Bob")
    first = face.add("Bob said the deadline moved to Tuesday.", speaker="Bob")["id"]
    with changes_nothing(face.svc):
        answers = {restated: face.add(restated, speaker="Bob") for restated in RESTATEMENTS}
    for restated, answer in answers.items():
        assert (answer["status"], answer["id"], answer["duplicate_of"]) == ("duplicate", "", first), restated
        assert answer["note"]
        assert answer["user_id"] == "default"


@pytest.mark.slow
def test_the_same_sentence_from_two_people_is_two_memories(service: MemoryService) -> None:
    service.speaker_register("Bob")
    service.speaker_register("Alice")
    bob = service.memory_add("I'm allergic to peanuts.", speaker="Bob")
    alice = service.memory_add("I'm allergic to peanuts.", speaker="Alice")
    mine = service.memory_add("I'm allergic to peanuts.", speaker="me")
    untagged = service.memory_add("I'm allergic to peanuts.")
    assert [a["status"] for a in (bob, alice, mine, untagged)] == ["stored"] * 4
    assert service.memory_list()["count"] == 4


@pytest.mark.slow
def test_a_person_repeating_themselves_in_one_conversation_is_two_turns(service: MemoryService) -> None:
    service.speaker_register("Bob")
    first = service.memory_add("OK.", speaker="Bob", conversation_id="standup")
    second = service.memory_add("OK.", speaker="Bob", conversation_id="standup")
    assert (first["status"], second["status"]) == ("stored", "stored")
    assert first["id"] != second["id"]
    elsewhere = service.memory_add("OK.", speaker="Bob", conversation_id="retro")
    assert elsewhere["status"] == "duplicate"
    assert elsewhere["duplicate_of"] in {first["id"], second["id"]}
    alone = service.memory_add("ok")
    assert service.memory_add("OK!")["duplicate_of"] == alone["id"]  # no conversation: shares none


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stored", "changed"),
    [
        ("I'm allergic to peanuts.", "I'm allergic to shellfish."),
        ("Dinner is at 8 pm.", "Dinner is at 10 pm."),
        ("The meeting is on Friday.", "The meeting is on Tuesday."),
        ("Bob paid Alice.", "Alice paid Bob."),
        ("I will come to the party.", "I will not come to the party."),
        ("Call Anna about the contract.", "Call Maria about the contract."),
        ("I owe you 20 dollars.", "You owe me 20 dollars."),
        ("She called me yesterday.", "He called me yesterday."),
        ("It was -5°C this morning.", "It was 5°C this morning."),
        ("The ticket costs $50.", "The ticket costs €50."),
        ("👍", "👎"),
    ],
)
def test_a_fact_that_differs_in_one_detail_is_stored(service: MemoryService, stored: str, changed: str) -> None:
    service.speaker_register("Bob")
    first = service.memory_add(stored, speaker="Bob")
    second = service.memory_add(changed, speaker="Bob")
    assert (first["status"], second["status"]) == ("stored", "stored"), second
    assert service.memory_list()["count"] == 2


@pytest.mark.slow
def test_restating_a_superseded_memory_stores_it_again(service: MemoryService) -> None:
    old = service.memory_add("The gym opens at 6.")["id"]
    service.memory_supersede(old, "The gym opens at 7.")
    again = service.memory_add("The gym opens at 6.")
    assert again["status"] == "stored"
    assert again["id"] not in {old}


# -- by_speaker ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_by_speaker_is_newest_first_and_counts_every_chunk_of_that_speaker(
    clocked_face: ServiceFace, clock: SteppableClock
) -> None:
    clocked_face.register("Bob")
    clocked_face.register("Alice")
    chunks, order = 0, []
    for text in (
        "Bob likes tea. And cake.",
        "Bob runs on Sundays.",
        "Bob's sister lives in Rome. She is a chef. Nice!",
    ):
        clock.advance(seconds=1)
        answer = clocked_face.add(text, speaker="Bob")
        chunks += answer["chunks"]
        order.insert(0, answer["id"])
    clock.advance(seconds=1)
    superseding = clocked_face.supersede(order[-1], "Bob likes coffee.")["id"]  # the old one stays Bob's
    chunks += 1
    order.insert(0, superseding)
    clocked_face.add("Alice likes tea. And cake.", speaker="Alice")
    clocked_face.add("Untagged words.")
    page = clocked_face.by_speaker("Bob")
    assert page["user_id"] == "default"
    assert page["speaker"] == "Bob"
    assert ids(page["memories"]) == order
    assert [m["is_superseded"] for m in page["memories"]] == [False, False, False, True]
    assert page["returned"] == 4
    assert page["chunks"] == page["records_to_delete"] == page["points_to_delete"] == chunks == 7
    # What a person recognises: 4 memories (the superseded one included), beside 7 records.
    assert page["memories_to_delete"] == 4
    assert (page["has_more"], page["next_before"], page["next_skip_ids"]) == (False, None, [])


@pytest.mark.slow
def test_by_speaker_counts_all_chunks_even_when_the_page_shows_few(
    clocked_face: ServiceFace, clock: SteppableClock
) -> None:
    clocked_face.register("Bob")
    total = 0
    for i in range(7):
        clock.advance(seconds=1)
        total += clocked_face.add(f"Fact {i} of Bob. It has a second sentence {i}.", speaker="Bob")["chunks"]
    page = clocked_face.by_speaker("Bob", limit=5)
    assert page["returned"] == 5
    assert page["has_more"] is True
    assert page["records_to_delete"] == total == 14
    assert page["next_before"] == page["memories"][-1]["created_at"]
    assert page["next_skip_ids"] == [page["memories"][-1]["id"]]


@pytest.mark.slow
def test_by_speaker_pages_through_memories_that_share_one_timestamp(clocked_face: ServiceFace) -> None:
    clocked_face.register("Bob")
    written = {clocked_face.add(f"Bob's note number {i}.", speaker="Bob")["id"] for i in range(12)}
    first = clocked_face.by_speaker("Bob", limit=5)
    second = clocked_face.by_speaker("Bob", limit=5, before=first["next_before"], skip_ids=first["next_skip_ids"])
    assert second["next_skip_ids"][:5] == first["next_skip_ids"]  # accumulated at the shared timestamp
    walked = walk_by_speaker(clocked_face.svc, "Bob", limit=5)
    assert len(walked) == 12
    assert set(ids(walked)) == written


@pytest.mark.slow
def test_untagged_memories_never_appear_under_me(face: ServiceFace) -> None:
    face.add("Untagged thought.")
    assert face.by_speaker("me")["memories"] == []
    assert face.by_speaker("me")["records_to_delete"] == 0


@pytest.mark.parametrize(
    ("options", "field"),
    [({"before": "yesterday"}, "before"), ({"skip_ids": "abc"}, "skip_ids"), ({"skip_ids": [1]}, "skip_ids")],
)
def test_a_bad_page_position_is_refused(face: ServiceFace, options: dict[str, Any], field: str) -> None:
    with refused(400, field=field):
        face.by_speaker("me", **options)


# -- get, list, forget, supersede -----------------------------------------------------------------------------


@pytest.mark.slow
def test_an_unknown_memory_is_404_with_its_id_for_get_forget_and_supersede(face: ServiceFace) -> None:
    face.add("Something real.")
    missing = str(uuid.uuid4())
    with changes_nothing(face.svc):
        for call in (lambda: face.get(missing), lambda: face.forget(missing), lambda: face.supersede(missing, "new")):
            with refused(404, memory_id=missing):
                call()


@pytest.mark.slow
def test_memory_list_is_oldest_first_with_superseded_ones_flagged_and_pages_by_cursor(
    clocked_face: ServiceFace, clock: SteppableClock
) -> None:
    written = []
    for i in range(6):
        clock.advance(seconds=1)
        written.append(clocked_face.add(f"Entry {i} of the diary.")["id"])
    clock.advance(seconds=1)
    newest = clocked_face.supersede(written[2], "Entry 2 of the diary, corrected.")["id"]
    pages, cursor = [], None
    while True:
        page = clocked_face.list(limit=3, cursor=cursor)
        assert page["count"] == len(page["memories"])
        assert page["user_id"] == "default"
        pages.append(page["memories"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [3, 3, 1]
    walked = [m for p in pages for m in p]
    assert ids(walked) == written + [newest]
    assert [m["is_superseded"] for m in walked] == [False, False, True, False, False, False, False]
    assert walked[2]["superseded_by"] == newest


@pytest.mark.slow
def test_a_memory_stored_after_a_cursor_was_handed_out_is_reached_by_following_it(face: ServiceFace) -> None:
    """The cursor marks a place in the store's write order; what is written later comes later,
    even when the memories around the cursor were forgotten meanwhile."""
    first, second, third = (face.add(f"Diary line {i}.")["id"] for i in range(3))
    page = face.list(limit=2)
    assert ids(page["memories"]) == [first, second]
    assert page["next_cursor"] is not None
    face.forget(second)
    face.forget(third)
    later = face.add("Diary line written later.")["id"]
    assert ids(face.list(cursor=page["next_cursor"])["memories"]) == [later]


@pytest.mark.parametrize("cursor", ["abc", "-1", "1.5", "", 7, "1 OR 1=1"])
def test_a_bad_cursor_is_refused(face: ServiceFace, cursor: Any) -> None:
    with refused(400, field="cursor"):
        face.list(cursor=cursor)


@pytest.mark.slow
def test_forgetting_a_memory_removes_it_from_every_read(face: ServiceFace) -> None:
    face.register("Bob")
    gone = face.add("Bob's PIN is 4321.", speaker="Bob")["id"]
    kept = face.add("Bob's favourite colour is teal.", speaker="Bob")["id"]
    assert face.forget(gone) == {"user_id": "default", "status": "deleted", "deleted": 1}
    with refused(404, memory_id=gone):
        face.get(gone)
    assert ids(face.search("what is Bob's PIN?", speaker="Bob")) == [kept]
    assert ids(face.search("PIN 4321")) == [kept]
    assert ids(face.by_speaker("Bob")["memories"]) == [kept]
    assert ids(face.list()["memories"]) == [kept]
    assert face.speakers()["speakers"][0]["memories"] == 1


@pytest.mark.slow
def test_supersede_keeps_speaker_category_and_conversation_and_retires_the_old_version(face: ServiceFace) -> None:
    face.register("Bob")
    old = face.add("Bob lives in Leeds.", speaker="Bob", category="address", conversation_id="c-1")["id"]
    answer = face.supersede(old, "Bob lives in York.")
    assert answer["status"] == "stored"
    assert answer["superseded"] == old
    assert answer["user_id"] == "default"
    new = face.get(answer["id"])
    assert (new["speaker"], new["category"], new["conversation_id"], new["is_superseded"]) == (
        "Bob",
        "address",
        "c-1",
        False,
    )
    retired = face.get(old)
    assert (retired["is_superseded"], retired["superseded_by"]) == (True, answer["id"])
    assert ids(face.search("where does Bob live?", speaker="Bob")) == [answer["id"]]


@pytest.mark.slow
def test_only_the_current_version_can_be_superseded(face: ServiceFace) -> None:
    old = face.add("The wifi is called Home-1.")["id"]
    new = face.supersede(old, "The wifi is called Home-2.")["id"]
    with changes_nothing(face.svc), refused(409, superseded_by=new):
        face.supersede(old, "The wifi is called Home-3.")


@pytest.mark.slow
def test_forgetting_the_newest_version_makes_its_predecessor_current_again(face: ServiceFace) -> None:
    old = face.add("The gate code is 1111.")["id"]
    new = face.supersede(old, "The gate code is 2222.")["id"]
    face.forget(new)
    current = face.get(old)
    assert current["is_superseded"] is False
    assert "superseded_by" not in current
    assert ids(face.search("what is the gate code?")) == [old]
    assert face.supersede(old, "The gate code is 3333.")["status"] == "stored"


@pytest.mark.slow
def test_forgetting_a_middle_version_never_revives_an_older_one(face: ServiceFace) -> None:
    """A -> B -> C, then forget B: C is still the one current version, A stays retired."""
    a = face.add("The plan is version A.")["id"]
    b = face.supersede(a, "The plan is version B.")["id"]
    c = face.supersede(b, "The plan is version C.")["id"]
    face.forget(b)
    assert face.get(c)["is_superseded"] is False
    assert face.get(a)["is_superseded"] is True
    assert ids(face.search("what is the plan?")) == [c]


@pytest.mark.slow
def test_forgetting_by_speaker_needs_the_current_records_to_delete(face: ServiceFace) -> None:
    face.register("Bob")
    face.register("Alice")
    first = face.add("Bob is vegan. He cooks well.", speaker="Bob")["id"]
    face.supersede(first, "Bob is vegetarian.")
    face.add("Bob hates mornings.", speaker="Bob")
    alice = face.add("Alice is vegan too.", speaker="Alice")["id"]
    records = face.by_speaker("Bob")["records_to_delete"]
    assert records == 4
    with changes_nothing(face.svc), refused(409, records_to_delete=4):
        face.forget_speaker("Bob", records - 1)
    assert face.forget_speaker("Bob", records) == {"user_id": "default", "status": "deleted", "deleted": 3}
    assert face.by_speaker("Bob")["memories"] == []  # the registration stays
    assert {s["speaker"]: s["memories"] for s in face.speakers()["speakers"]} == {"Bob": 0, "Alice": 1}
    assert ids(face.list()["memories"]) == [alice]


def test_forgetting_by_an_unregistered_speaker_is_404(face: ServiceFace) -> None:
    with refused(404, speaker="Bob"):
        face.forget_speaker("Bob", 0)


@pytest.mark.slow
@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"memory_id": "x", "speaker": "me", "confirm_records": 0},
        {"speaker": "me"},
        {"memory_id": "x", "confirm_records": 1},
    ],
    ids=["neither", "both", "speaker-without-confirm", "id-with-confirm"],
)
def test_forget_takes_exactly_one_form(service: MemoryService, arguments: dict[str, Any]) -> None:
    service.memory_add("I keep this.", speaker="me")
    with changes_nothing(service), refused(400):
        service.memory_forget(**arguments)


@pytest.mark.slow
@pytest.mark.parametrize("confirm", [-1, True, 1.0, "1"])
def test_confirm_records_must_be_a_count(service: MemoryService, confirm: Any) -> None:
    service.memory_add("I keep this.", speaker="me")
    with refused(400, field="confirm_records"):
        service.memory_forget(speaker="me", confirm_records=confirm)


# -- a failed call changes nothing ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def populated_template(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> dict[str, Any]:
    """A small store with a bit of everything, built once; each test gets its own copy."""
    db = tmp_path_factory.mktemp("populated") / "db"
    svc = MemoryService(Store(str(db)), ModelLoader.of(embedder), speaker_limit=3)
    svc.store_create("alice-smith")
    for name in ("Bob", "Alice", "Carol"):
        svc.speaker_register(name)
    old = svc.memory_add("Bob's train is at 9.", speaker="Bob")["id"]
    new = svc.memory_supersede(old, "Bob's train is at 10.")["id"]
    svc.memory_add("Alice is in Paris.", speaker="Alice", conversation_id="trip")
    svc.memory_add("I will book the hotel.", speaker="me", event_date="2026-08-01")
    svc.memory_add("Untagged remark.", user_id="alice-smith")
    svc.close()
    return {"db": db, "old": old, "new": new}


@pytest.fixture
def populated(
    populated_template: dict[str, Any], tmp_path: Path, make_service: Callable[..., MemoryService]
) -> dict[str, Any]:
    db = tmp_path / "populated"
    shutil.copytree(populated_template["db"], db)
    return {**populated_template, "svc": make_service(speaker_limit=3, db=db)}


REFUSED_CALLS: dict[str, tuple[int, Callable[[MemoryService, dict[str, Any]], Any]]] = {
    "register-over-limit": (400, lambda s, p: s.speaker_register("Dave")),
    "register-Me": (400, lambda s, p: s.speaker_register("Me")),
    "add-unregistered": (400, lambda s, p: s.memory_add("Dave says hi.", speaker="Dave")),
    "add-too-long": (400, lambda s, p: s.memory_add("x" * 32_001, speaker="Bob")),
    "add-bad-event-date": (400, lambda s, p: s.memory_add("Bob flies.", speaker="Bob", event_date="tomorrow")),
    "add-empty-category": (400, lambda s, p: s.memory_add("Bob flies.", speaker="Bob", category="  ")),
    "add-unknown-store": (404, lambda s, p: s.memory_add("Hello.", user_id="nobody")),
    "supersede-old-version": (409, lambda s, p: s.memory_supersede(p["old"], "Bob's train is at 11.")),
    "supersede-unknown": (404, lambda s, p: s.memory_supersede(str(uuid.uuid4()), "Anything.")),
    "supersede-empty": (400, lambda s, p: s.memory_supersede(p["new"], "")),
    "forget-wrong-confirm": (409, lambda s, p: s.memory_forget(speaker="Bob", confirm_records=1)),
    "forget-unknown": (404, lambda s, p: s.memory_forget(memory_id=str(uuid.uuid4()))),
    "forget-both-forms": (400, lambda s, p: s.memory_forget(memory_id=p["new"], speaker="Bob", confirm_records=2)),
    "forget-unregistered": (404, lambda s, p: s.memory_forget(speaker="Dave", confirm_records=0)),
    "store-twin": (409, lambda s, p: s.store_create("alice.smith")),
    "store-bad-id": (400, lambda s, p: s.store_create("-bad")),
    "store-delete-unknown": (404, lambda s, p: s.store_delete("nobody")),
    "remove-unregistered": (404, lambda s, p: s.speaker_remove("Dave")),
    "remove-me": (400, lambda s, p: s.speaker_remove("me")),
    "search-unregistered": (404, lambda s, p: s.memory_search("train", speaker="Dave")),
    "search-bad-filter": (400, lambda s, p: s.memory_search("train", filters={"when": "now"})),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", REFUSED_CALLS.values(), ids=REFUSED_CALLS.keys())
def test_a_failed_call_changes_nothing(populated: dict[str, Any], case: tuple[int, Callable[..., Any]]) -> None:
    status, call = case
    svc = populated["svc"]
    with changes_nothing(svc), refused(status):
        call(svc, populated)


# -- the library face ----------------------------------------------------------------------------------------------


@pytest.fixture
def mem(service: MemoryService) -> Memory:
    service.stores_list()
    return Memory(service=service)


@pytest.mark.slow
def test_the_library_raises_the_sdk_exception_classes(mem: Memory) -> None:
    with pytest.raises(BadRequestError) as bad:
        mem.add("Dave says hi.", speaker="Dave")
    assert isinstance(bad.value, InvalidRequestError)
    assert isinstance(bad.value, WosError)
    assert (bad.value.status, bad.value.type, bad.value.details["speaker"]) == (400, "invalid_request_error", "Dave")
    with pytest.raises(NotFoundError):
        mem.get(str(uuid.uuid4()))
    old = mem.add("v1 of the note")["id"]
    mem.update(old, "v2 of the note")
    with pytest.raises(ConflictError) as conflict:
        mem.update(old, "v3 of the note")
    assert isinstance(conflict.value, WontoposError)
    assert conflict.value.status == 409


@pytest.mark.slow
def test_the_library_names_update_fields_as_the_sdk_does(mem: Memory) -> None:
    with refused(400, field="old_memory_id"):
        mem.update("  ", "new text")
    old = mem.add("Some fact.")["id"]
    with refused(400, field="new_content"):
        mem.update(old, "")


@pytest.mark.slow
def test_the_library_get_and_delete_take_an_id_alone_or_a_store_and_an_id(mem: Memory) -> None:
    mem.create_store("alice")
    here = mem.add("In the default store.")["id"]
    there = mem.add("In alice's store.", user_id="alice")["id"]
    assert mem.get(here)["id"] == here
    assert mem.get("alice", there)["content"] == "In alice's store."
    with refused(404, memory_id=there):
        mem.get(there)
    assert mem.delete("alice", there)["deleted"] == 1
    assert mem.delete(here)["deleted"] == 1
    assert mem.list_memories()["memories"] == []
    assert mem.list_memories("alice")["memories"] == []


def test_the_library_add_takes_metadata_or_keywords_and_drops_and_lists_unknown_ones(mem: Memory) -> None:
    mem.add_speaker("Bob")
    via_metadata = mem.add("Bob plays chess.", metadata={"speaker": "Bob", "category": "hobby"})
    assert via_metadata["speaker"] == "Bob"
    assert mem.get(via_metadata["id"])["category"] == "hobby"
    via_keywords = mem.add("Bob plays go.", metadata={"speaker": "me"}, speaker="Bob", event_date="2026-01-02")
    assert via_keywords["speaker"] == "Bob"
    dropped = mem.add("Bob likes red.", speaker="Bob", colour="red", metadata={"mood": "calm"})
    assert dropped["ignored"] == ["colour", "mood"]
    stored = mem.get(dropped["id"])
    assert stored["speaker"] == "Bob"
    assert "colour" not in stored
    assert "mood" not in stored
    assert "ignored" not in via_keywords  # only an answer that dropped something lists it


@pytest.mark.slow
def test_the_library_search_returns_a_list_best_first(mem: Memory) -> None:
    cat = mem.add("My cat is called Miso.")["id"]
    mem.add("The boiler was serviced in January.")
    hits = mem.search("what is my cat's name?", limit=5)
    assert isinstance(hits, list)
    assert hits[0]["id"] == cat


@pytest.mark.slow
def test_the_library_delete_all_erases_memories_and_keeps_store_and_speakers(mem: Memory) -> None:
    mem.create_store("alice")
    mem.add_speaker("Bob", user_id="alice")
    mem.add("One.", user_id="alice", speaker="Bob")
    mem.add("Two.", user_id="alice")
    assert mem.delete_all("alice") == {"user_id": "alice", "status": "deleted", "deleted": 2}
    assert mem.list_memories("alice")["memories"] == []
    assert [s["speaker"] for s in mem.list_speakers(user_id="alice")["speakers"]] == ["Bob"]
    assert "alice" in [s["user_id"] for s in mem.list_stores()]


# -- opening the database --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_call_made_while_the_database_is_opening_finds_the_default_store(
    make_service: Callable[..., MemoryService],
) -> None:
    """``start()`` (which ``Memory()`` calls) opens the database in the background; a call
    arriving meanwhile must wait for the open to finish, not see a half-open database.

    The clock is read while the background open creates the ``default`` store, so a clock
    that pauses there holds the open at that point, deterministically.
    """
    opening, release = threading.Event(), threading.Event()

    def pausing_clock() -> datetime:
        opening.set()
        release.wait(timeout=30)
        return datetime.now(timezone.utc)

    svc = make_service(clock=pausing_clock)
    svc.start()
    assert opening.wait(timeout=60), "the background open never created the default store"
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["answer"] = svc.speakers_list()
        except Exception as exc:  # noqa: BLE001 - the outcome is the assertion
            outcome["error"] = exc

    caller = threading.Thread(target=call)
    caller.start()
    caller.join(timeout=0.5)  # a correct engine holds the call here until the open is done
    release.set()
    caller.join(timeout=60)
    assert not caller.is_alive()
    assert "error" not in outcome, repr(outcome.get("error"))
    assert outcome["answer"]["user_id"] == "default"
