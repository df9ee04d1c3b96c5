"""The ranking signals of ``engine.ranking`` beyond plain fusion (NOTES "Retrieval"), each with the
promise it must keep.

- Full text ranks memories: a memory is one BM25 document (its first chunk carries the
  whole text), so words spread over its sentences count together.
- A neighbour's fused score lends to the memory after it (propagation at
  query time): the answer right after a question that names the topic is found, even
  under a speaker filter that leaves the question out of scope; the question is never
  returned; a forgotten or superseded memory lends no words at all.
- The best match in a conversation lifts the rest of that conversation.
- Under a speaker filter, the reply to the best full-text match outside it becomes a
  candidate even when it is the farthest of the speaker's memories by cosine; it is in
  scope or not returned, and a forgotten match seeds nothing.
- A query naming a registered speaker, without a speaker filter, leans towards that
  speaker's memories; under a filter the filter alone decides who. Either way the names
  of registered speakers are not search words.

Everything is real: LanceDB on disk and the session's model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from support import ids

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader
from wontopos_mcp.rules.query_names import names_in, query_without_names
from wontopos_mcp.rules.text import full_text
from wontopos_mcp.storage.adapter import Store

# Two conversations whose last turns (Bob's) say nothing about their topic; only the
# question before each names it.
LISBON = [
    ("Alice", "Have you ever been to Lisbon?"),
    ("Bob", "Yes, twice, and it was great."),
]
AQUARIUM = [
    ("Alice", "Have you seen the new aquarium downtown?"),
    ("Bob", "Yes, once, and I loved it."),
]
OTHERS = [
    ("Bob", "My bike chain snapped on the way to work."),
    ("Bob", "The dentist moved my appointment to Friday."),
    ("Alice", "I am repainting the kitchen this weekend."),
]


def _people(service: MemoryService) -> None:
    for name in ("Alice", "Bob"):
        service.speaker_register(name)


def _say(service: MemoryService, conversation: str, turns: list[tuple[str, str]]) -> list[str]:
    return [service.memory_add(text, speaker=who, conversation_id=conversation)["id"] for who, text in turns]


# -- names in the query ---------------------------------------------------------------------------------


def test_names_in_finds_registered_names_as_whole_words_only() -> None:
    names = ["Bob", "Al", "me", "Jo.Ann", "Ken"]
    assert names_in("What did Bob's sister say to Jo.Ann?", names) == ["Bob", "Jo.Ann"]
    assert names_in("What did Alice tell me about Kenya?", names) == []  # no part of a word, never `me`
    assert names_in("what did bob say?", names) == []  # as written: "will", "may" stay words
    assert names_in("What did Bob say?", []) == []


def test_query_without_names_keeps_a_query_that_would_be_empty() -> None:
    assert query_without_names("What did Bob’s cat eat?", ["Bob"]).split() == ["What", "did", "cat", "eat?"]
    assert query_without_names("Bob?", ["Bob"]) == "Bob?"
    assert query_without_names("What did Bob say?", []) == "What did Bob say?"


def test_a_named_speaker_leads_without_a_filter_and_the_filter_alone_decides_with_one(
    flat: Callable[[str], MemoryService],
) -> None:
    service = flat("db")  # cosine says nothing: full text ties the two, the name decides
    alice = _say(service, "c1", [("Alice", "I adopted a grey cat last spring.")])[0]
    bob = _say(service, "c2", [("Bob", "I adopted a grey cat last winter.")])[0]
    untagged = service.memory_add("The shelter was closed on Monday.", conversation_id="c3")["id"]
    for query, first in (("When did Bob adopt a grey cat?", bob), ("When did Alice adopt a grey cat?", alice)):
        found = ids(service.memory_search(query, limit=5)["memories"])
        assert found[0] == first, query
        assert set(found) == {alice, bob, untagged}, query
    said = service.memory_search("When did Bob adopt a grey cat?", speaker="Alice", limit=5)["memories"]
    assert ids(said) == [alice]
    assert said[0]["speaker"] == "Alice"


def test_under_a_filter_another_registered_speakers_name_is_no_search_word(
    flat: Callable[[str], MemoryService],
) -> None:
    service = flat("db")  # full text decides: the name is in one memory three times
    thanks = service.memory_add("Alice, Alice, thanks Alice!", speaker="Bob", conversation_id="c1")["id"]
    dentist = service.memory_add("The dentist is on Friday.", speaker="Bob", conversation_id="c2")["id"]
    service.memory_add("Alice here: the dentist called.", speaker="Alice", conversation_id="c3")
    for query in ("What did Bob tell Alice about the dentist?", "what did bob tell Alice's dentist?"):
        said = service.memory_search(query, speaker="Bob", limit=5)["memories"]
        assert ids(said) == [dentist, thanks], query
        assert {m["speaker"] for m in said} == {"Bob"}, query
    unnamed = service.memory_search("Alice?", speaker="Bob", limit=5)["memories"]  # nothing else left
    assert ids(unnamed)[0] == thanks


# -- memories as full-text documents ----------------------------------------------------------------


def test_full_text_indexes_the_whole_memory_once() -> None:
    assert full_text("One. Two.", 0) == "One. Two."
    assert full_text("One. Two.", 1) == ""


@pytest.mark.slow
def test_words_from_different_sentences_of_one_memory_count_together(service: MemoryService) -> None:
    both = service.memory_add("We drove to the coast. The lighthouse was closed for repairs.")["id"]
    service.memory_add("The coast road was busy. Traffic was slow all day.")
    service.memory_add("The lighthouse museum sells postcards. Entry is free.")
    hits = service.store.chunks.text_search("coast lighthouse", "NOT superseded", 10, ("memory_id", "chunk_idx"))
    assert hits[0]["memory_id"] == both
    assert all(h["chunk_idx"] == 0 for h in hits)


# -- the previous memory's words --------------------------------------------------------------------


class FlatEmbedder:
    """One vector for every text: cosine says nothing, so only full text (and what the
    neighbours lend) orders the memories. Passed in like the real model."""

    model_id = "flat-test-model"
    dim = 8
    max_chars = 500

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return np.full((len(texts), self.dim), self.dim**-0.5, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return np.full(self.dim, self.dim**-0.5, dtype=np.float32)


@pytest.fixture
def flat(tmp_path: Path) -> Iterator[Callable[[str], MemoryService]]:
    """``flat(name)``: a real service on its own database, with ``FlatEmbedder``."""
    opened: list[MemoryService] = []

    def make(name: str) -> MemoryService:
        service = MemoryService(Store(str(tmp_path / name)), ModelLoader.of(FlatEmbedder()))
        _people(service)
        opened.append(service)
        return service

    yield make
    for service in opened:
        service.close()


def _ranked(service: MemoryService, query: str) -> list[str]:
    """Contents of Bob's memories, best first (ids differ between stores)."""
    return [m["content"] for m in service.memory_search(query, speaker="Bob", limit=20)["memories"]]


@pytest.mark.slow
def test_the_reply_after_the_question_that_names_the_topic_comes_first_under_a_filter(
    flat: Callable[[str], MemoryService],
) -> None:
    service = flat("db")
    lisbon = _say(service, "c1", LISBON)
    aquarium = _say(service, "c2", AQUARIUM)
    others = _say(service, "c3", OTHERS)
    for query, reply, question in (("Lisbon", lisbon[1], lisbon[0]), ("aquarium downtown", aquarium[1], aquarium[0])):
        said = service.memory_search(query, speaker="Bob", limit=5)["memories"]
        assert ids(said)[0] == reply, query  # only Alice's question has the words
        assert question not in ids(said), query
        assert {m["speaker"] for m in said} == {"Bob"}, query
        assert set(ids(said)) == {lisbon[1], aquarium[1], others[0], others[1]}  # all four of Bob's, no more


@pytest.mark.slow
def test_a_forgotten_memory_lends_its_words_to_nothing(flat: Callable[[str], MemoryService]) -> None:
    forgot, never = flat("forgot"), flat("never")
    question = _say(forgot, "c1", LISBON)[0]
    _say(forgot, "c2", AQUARIUM)
    # The premise: the question's word leads its reply past the one that says "loved".
    assert _ranked(forgot, "Lisbon loved")[0] == LISBON[1][1]
    forgot.memory_forget(memory_id=question)
    _say(never, "c1", LISBON[1:])
    _say(never, "c2", AQUARIUM)
    for query in ("Lisbon loved", "Have you ever been to Lisbon?"):
        assert _ranked(forgot, query) == _ranked(never, query), query
    assert _ranked(forgot, "Lisbon loved")[0] == AQUARIUM[1][1]


@pytest.mark.slow
def test_a_superseded_memory_lends_its_words_to_nothing(flat: Callable[[str], MemoryService]) -> None:
    corrected, never = flat("corrected"), flat("never")
    question = _say(corrected, "c1", LISBON)[0]
    _say(corrected, "c2", AQUARIUM)
    assert _ranked(corrected, "Lisbon loved")[0] == LISBON[1][1]
    corrected.memory_supersede(memory_id=question, content="Have you ever been to Porto?")
    # The same store written without the old version: the correction comes last in c1.
    _say(never, "c1", LISBON[1:])
    _say(never, "c2", AQUARIUM)
    _say(never, "c1", [("Alice", "Have you ever been to Porto?")])
    for query in ("Lisbon loved", "Have you ever been to Lisbon?"):
        assert _ranked(corrected, query) == _ranked(never, query), query
    assert _ranked(corrected, "Lisbon loved")[0] == AQUARIUM[1][1]


@pytest.mark.slow
def test_a_memory_stored_without_a_conversation_borrows_nothing_from_the_one_before(
    flat: Callable[[str], MemoryService],
) -> None:
    noted, never = flat("noted"), flat("never")  # cosine ties everything: only full text could differ
    noted.memory_add("Have you ever been to Lisbon?", speaker="Alice")  # a note on its own, no conversation
    for service in (noted, never):
        for _, text in (LISBON[1], *OTHERS[:2]):
            service.memory_add(text, speaker="Bob")
    for query in ("Lisbon", "Have you ever been to Lisbon?"):
        assert _ranked(noted, query) == _ranked(never, query), query
    # The note's own words still find it, and nothing it was stored next to.
    assert [m["content"] for m in noted.memory_search("Lisbon", limit=5)["memories"]][0] == LISBON[0][1]


@pytest.mark.slow
def test_a_conversation_lends_nothing_to_a_memory_stored_between_its_turns(
    flat: Callable[[str], MemoryService],
) -> None:
    service = flat("db")
    question = _say(service, "c1", LISBON[:1])[0]
    alone = service.memory_add("Yes, twice, and it was great.", speaker="Bob")["id"]  # no conversation
    reply = _say(service, "c1", [("Bob", "Yes, once, and I loved it.")])[0]  # c1's next turn
    said = ids(service.memory_search("Lisbon", speaker="Bob", limit=5)["memories"])
    assert said == [reply, alone]
    assert question not in said


@pytest.mark.slow
def test_the_best_match_lifts_the_rest_of_its_conversation(flat: Callable[[str], MemoryService]) -> None:
    service = flat("db")  # cosine ties everything; the two picnics tie on full text and neighbours
    c1 = [("Bob", "The lighthouse trip was in June."), ("Alice", "Nice weather."), ("Bob", "A picnic with apples.")]
    lighthouse, _, apples = _say(service, "c1", c1)
    grapes = _say(service, "c2", [("Alice", "Sunny today."), ("Bob", "A picnic with grapes.")])[-1]  # later: wins a tie
    said = ids(service.memory_search("lighthouse picnic", speaker="Bob", limit=5)["memories"])
    assert said == [lighthouse, apples, grapes]


@pytest.mark.slow
@pytest.mark.parametrize("query", ["Lisbon", "aquarium", "When did Bob see the aquarium?", "kitchen"])
def test_a_three_memory_speaker_gets_exactly_its_three_whatever_the_context_says(
    service: MemoryService, query: str
) -> None:
    _people(service)
    service.speaker_register("Carol")
    _say(service, "c1", LISBON)
    _say(service, "c2", AQUARIUM)
    _say(service, "c3", OTHERS)
    carol = _say(service, "c1", [("Carol", "Lisbon is lovely in May."), ("Carol", "I prefer Porto.")])
    carol += _say(service, "c2", [("Carol", "Ich war noch nie dort.")])
    said = service.memory_search(query, speaker="Carol", limit=10)["memories"]
    assert sorted(ids(said)) == sorted(carol)
    assert {m["speaker"] for m in said} == {"Carol"}


@pytest.mark.slow
def test_a_category_filter_stays_exact_while_the_context_lends_score(flat: Callable[[str], MemoryService]) -> None:
    service = flat("db")
    service.memory_add(LISBON[0][1], speaker="Alice", conversation_id="c1")
    reply = service.memory_add(LISBON[1][1], speaker="Bob", conversation_id="c1", category="travel")["id"]
    _say(service, "c2", AQUARIUM)
    trips = {
        service.memory_add("Porto next spring, maybe.", speaker="Alice", conversation_id="c3", category="travel")["id"]
    }
    found = service.memory_search("Lisbon loved", filters={"categories": ["travel"]}, limit=5)["memories"]
    assert ids(found) == [reply, *trips]
    assert {m["category"] for m in found} == {"travel"}


# -- what a person said across several conversations ---------------------------------------------

# Elise's trips, each told in a conversation of its own among other things she said.
TRIPS = {
    "s1": [("Alice", "How was your vacation?"), ("Elise", "Hawaii was amazing, we swam with sea turtles."),
           ("Alice", "Did you try the food?"), ("Elise", "The poke bowls there were the best I ever had."),
           ("Elise", "Work has been hectic since I got back.")],
    "s2": [("Alice", "Any plans for the long weekend?"),
           ("Elise", "We drove down to Miami and walked along South Beach."),
           ("Elise", "My sister is starting college in the fall.")],
    "s3": [("Alice", "I heard you went to a conference."),
           ("Elise", "It was in Las Vegas, and I saw a show on the Strip."),
           ("Elise", "My car needs new tires before winter.")],
    "s4": [("Elise", "I have lived in Houston for ten years."), ("Elise", "My neighbour's dog barks all night."),
           ("Elise", "I am learning to play the cello."), ("Elise", "The dentist moved my appointment to Friday.")],
    "s5": [("Alice", "Did you find your keys?"), ("Elise", "Yes, they were in the pocket of my blue raincoat.")],
}  # fmt: skip


@pytest.fixture
def trips(service: MemoryService) -> dict[str, list[str]]:
    for name in ("Alice", "Elise"):
        service.speaker_register(name)
    return {conversation: _say(service, conversation, turns) for conversation, turns in TRIPS.items()}


@pytest.mark.slow
@pytest.mark.parametrize("query", ["What locations has Elise visited?", "Where has Elise travelled?"])
def test_a_speakers_trips_told_in_three_conversations_all_reach_the_top_five(
    service: MemoryService, trips: dict[str, list[str]], query: str
) -> None:
    """An answer spread over several conversations: every part of it within the first five.
    (Not every phrasing gets there yet: "Which places has Elise travelled to?" and "Which
    trips has Elise taken?" leave one trip out, a Houston or a food line taking its place.)"""
    said = service.memory_search(query, speaker="Elise", limit=5)["memories"]
    assert {m["speaker"] for m in said} == {"Elise"}
    found = set(ids(said))
    assert {trips["s1"][1], trips["s2"][1], trips["s3"][1]} <= found


@pytest.mark.slow
def test_a_question_about_one_fact_still_gets_it_first(service: MemoryService, trips: dict[str, list[str]]) -> None:
    said = service.memory_search("Where were Elise's keys?", speaker="Elise", limit=5)["memories"]
    assert ids(said)[0] == trips["s5"][1]
    assert {m["speaker"] for m in said} == {"Elise"}


@pytest.mark.slow
def test_a_forgotten_trip_seeds_nothing_and_is_never_returned(
    service: MemoryService, trips: dict[str, list[str]]
) -> None:
    service.memory_forget(memory_id=trips["s3"][1])
    said = ids(service.memory_search("Where has Elise travelled?", speaker="Elise", limit=10)["memories"])
    assert trips["s3"][1] not in said
    assert {trips["s1"][1], trips["s2"][1]} <= set(said)


# -- replies to the best matches outside the scope ------------------------------------------------


class TableEmbedder(FlatEmbedder):
    """Vectors from a table (any other text: the first axis), so a test says exactly how
    near each memory is to the query."""

    model_id = "table-test-model"

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def _vector(self, text: str) -> np.ndarray:
        vector = self.table.get(text, np.eye(self.dim, dtype=np.float32)[0])
        return (vector / np.linalg.norm(vector)).astype(np.float32)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._vector(text) for text in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)


PICNIC = "Which picnic games were played?"
ERRANDS = [f"Errand number {i} is done." for i in range(45)]  # Bob's, each a little nearer than his reply


RETIRE: dict[str, Callable[[MemoryService, str], object]] = {
    "forgotten": lambda service, mid: service.memory_forget(memory_id=mid),
    "superseded": lambda service, mid: service.memory_supersede(memory_id=mid, content="What time is it?"),
}


@pytest.mark.slow
@pytest.mark.parametrize("retired", RETIRE)
def test_under_a_filter_the_reply_to_the_best_match_outside_it_is_found(tmp_path: Path, retired: str) -> None:
    axis, topic = np.eye(8, dtype=np.float32)[:2]
    table = {PICNIC: topic, "What games did you play at the picnic?": topic, "What food came to the picnic?": topic}
    table |= {text: axis + (0.05 + 0.005 * i) * topic for i, text in enumerate(ERRANDS)}
    service = MemoryService(Store(str(tmp_path / "db")), ModelLoader.of(TableEmbedder(table)))
    try:
        _people(service)
        service.speaker_register("Carol")
        errands = [
            service.memory_add(text, speaker="Bob", conversation_id=f"e{i}")["id"] for i, text in enumerate(ERRANDS)
        ]
        question, reply = _say(service, "c1", [("Alice", "What games did you play at the picnic?"),
                                               ("Bob", "Charades and a scavenger hunt.")])  # fmt: skip
        sandwiches = _say(service, "c2", [("Alice", "What food came to the picnic?"), ("Carol", "Sandwiches.")])[1]
        said = service.memory_search(PICNIC, speaker="Bob", limit=5)["memories"]
        # The reply shares no word with the query and is the farthest of Bob's 46 by cosine.
        assert ids(said)[0] == reply
        assert set(ids(said)[1:]) <= set(errands)
        assert {m["speaker"] for m in said} == {"Bob"}  # never the question, nor Carol's reply to the other one
        assert ids(service.memory_search(PICNIC, speaker="Carol", limit=5)["memories"]) == [sandwiches]
        RETIRE[retired](service, question)  # a forgotten or superseded memory seeds nothing
        assert reply not in ids(service.memory_search(PICNIC, speaker="Bob", limit=5)["memories"])
    finally:
        service.close()
