"""Properties of reading by speaker, with hypothesis.

Random sequences of memories by a few speakers, written under a clock that often stands
still (so many memories share a timestamp and only the write order tells them apart):

* walking ``by_speaker`` pages returns every memory of that speaker exactly once, newest
  first, and never another speaker's words;
* the walk stays exact while new memories arrive between pages;
* search with ``speaker=X`` only ever returns X's memories, exactly min(limit, X's).

Embedding costs milliseconds per text, so each test uses one service and each example
a fresh store of its own (``store_create`` with a unique id), and examples are few.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import SteppableClock, walk_by_speaker

from wontopos_mcp.engine.service import MemoryService

PEOPLE = ("Ann", "Ben")
# Ann speaks most, so her walks cross several pages; None is an untagged memory.
WHO = st.sampled_from(["Ann", "Ann", "Ann", "Ben", "me", None])
# Mostly no time at all between writes: timestamps repeat.
STEP_US = st.sampled_from([0, 0, 0, 1, 250_000])
WRITES = st.lists(st.tuples(WHO, STEP_US), min_size=6, max_size=16)
TOPICS = ("the garden", "a budget", "the trip", "dinner plans", "a book", "the car")
QUERIES = ("what about the garden?", "money", "where are we travelling?", "food", "reading", "vehicle repairs")
STORE_NUMBERS = itertools.count()


def fresh_store(svc: MemoryService) -> str:
    store = f"paging-{next(STORE_NUMBERS)}"
    svc.store_create(store)
    for person in PEOPLE:
        svc.speaker_register(person, user_id=store)
    return store


def write(svc: MemoryService, clock: SteppableClock, store: str, who: str | None, step_us: int, n: int) -> str:
    clock.advance(microseconds=step_us)
    # The number makes each text a distinct fact, never a duplicate of another.
    text = f"{who or 'Someone'} talked about {TOPICS[n % len(TOPICS)]} for the {n}th time, {n * 17} minutes."
    answer = svc.memory_add(text, speaker=who, user_id=store)
    assert answer["status"] == "stored", answer
    return answer["id"]


def populate(
    svc: MemoryService, clock: SteppableClock, store: str, writes: list[tuple[str | None, int]]
) -> dict[Any, list[str]]:
    said: dict[Any, list[str]] = defaultdict(list)
    for n, (who, step) in enumerate(writes):
        said[who].append(write(svc, clock, store, who, step, n))
    return said


def assert_newest_first(memories: list[dict[str, Any]]) -> None:
    stamps = [m["created_at"] for m in memories]  # fixed-width RFC 3339 UTC: text order is time order
    assert stamps == sorted(stamps, reverse=True)


@pytest.mark.slow
@settings(max_examples=5)
@given(writes=WRITES, limits=st.lists(st.integers(min_value=5, max_value=20), min_size=3, max_size=3))
def test_walking_by_speaker_returns_each_memory_of_that_speaker_once_newest_first(
    clocked_service: MemoryService, clock: SteppableClock, writes: list[tuple[str | None, int]], limits: list[int]
) -> None:
    store = fresh_store(clocked_service)
    said = populate(clocked_service, clock, store, writes)
    for speaker, limit in zip(("Ann", "Ben", "me"), limits):
        walked = walk_by_speaker(clocked_service, speaker, limit=limit, user_id=store)
        walked_ids = [m["id"] for m in walked]
        assert len(walked_ids) == len(set(walked_ids)), "a memory came back twice"
        assert set(walked_ids) == set(said[speaker])
        assert {m.get("speaker") for m in walked} <= {speaker}
        assert_newest_first(walked)
        # Among equal timestamps, the later write is newer: the walk is the reverse write order.
        assert walked_ids == list(reversed(said[speaker]))


@pytest.mark.slow
@settings(max_examples=5)
@given(
    writes=WRITES,
    limit=st.integers(min_value=5, max_value=20),
    arrivals=st.lists(st.lists(st.tuples(WHO, STEP_US), max_size=3), min_size=1, max_size=6),
)
def test_a_walk_stays_exact_while_new_memories_arrive_between_pages(
    clocked_service: MemoryService,
    clock: SteppableClock,
    writes: list[tuple[str | None, int]],
    limit: int,
    arrivals: list[list[tuple[str | None, int]]],
) -> None:
    store = fresh_store(clocked_service)
    existing = populate(clocked_service, clock, store, writes)["Ann"]
    pending = iter(arrivals)
    arrived: list[str] = []
    counter = itertools.count(len(writes))

    def new_memories_arrive() -> None:
        for who, step in next(pending, []):
            memory_id = write(clocked_service, clock, store, who, step, next(counter))
            if who == "Ann":
                arrived.append(memory_id)

    walked = walk_by_speaker(clocked_service, "Ann", limit=limit, user_id=store, between_pages=new_memories_arrive)
    walked_ids = [m["id"] for m in walked]
    assert len(walked_ids) == len(set(walked_ids)), "a memory came back twice"
    assert set(existing) <= set(walked_ids), "a memory that existed when the walk began was missed"
    assert set(walked_ids) <= set(existing) | set(arrived)
    assert {m["speaker"] for m in walked} <= {"Ann"}
    assert_newest_first(walked)


@pytest.mark.slow
@settings(max_examples=5)
@given(
    writes=WRITES,
    searches=st.lists(
        st.tuples(st.sampled_from(["Ann", "Ben", "me", None]), st.integers(5, 20), st.sampled_from(QUERIES)),
        min_size=2,
        max_size=4,
    ),
)
def test_search_with_a_speaker_only_ever_returns_that_speakers_memories(
    clocked_service: MemoryService,
    clock: SteppableClock,
    writes: list[tuple[str | None, int]],
    searches: list[tuple[str | None, int, str]],
) -> None:
    store = fresh_store(clocked_service)
    said = populate(clocked_service, clock, store, writes)
    everything = [i for ids in said.values() for i in ids]
    for speaker, limit, query in searches:
        answer = clocked_service.memory_search(query, speaker=speaker, limit=limit, user_id=store)
        found = [m["id"] for m in answer["memories"]]
        scope = everything if speaker is None else said[speaker]
        assert len(found) == len(set(found)) == min(limit, len(scope))
        assert set(found) <= set(scope)
        if speaker is not None:
            assert {m["speaker"] for m in answer["memories"]} <= {speaker}
