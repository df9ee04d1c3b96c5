"""A context budget (``max_chars``, 1-200,000) on search and recall: the best-first
memories up to the first that would not fit, at least one, ``truncated`` when any were
left out; recall spends what is left on the context lines."""

from __future__ import annotations

from typing import Any

import pytest
from support import error_body, mcp_session, refused

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.rules.budget import fit

FACTS = [
    "Bob's flight to Lisbon leaves on Friday at nine",
    "Bob booked a hotel near the Lisbon old town",
    "Bob wants to visit the tile museum in Lisbon",
    "Bob will rent a car for the trip to Sintra",
    "Bob is flying back from Lisbon on the following Tuesday",
]


@pytest.fixture
def trip(service: MemoryService) -> MemoryService:
    service.speaker_register("Bob")
    messages = [{"role": "user", "name": "Bob", "content": fact} for fact in FACTS]
    service.memory_add_messages(messages, conversation_id="trip")
    return service


def _sizes(memories: list[dict[str, Any]]) -> list[int]:
    return [len(m["content"]) for m in memories]


def test_fit_keeps_a_prefix_and_at_least_one() -> None:
    assert fit(["aaa", "bb", "c"], len, 5) == (["aaa", "bb"], 0)
    assert fit(["aaa", "bb", "c"], len, 4) == (["aaa"], 1)  # stops at the first that does not fit
    assert fit(["aaaaaa", "b"], len, 2) == (["aaaaaa"], 0)  # never nothing
    assert fit(["aaaaaa", "b"], len, 2, at_least_one=False) == ([], 2)
    assert fit([], len, 10) == ([], 10)


@pytest.mark.slow
def test_a_budget_keeps_the_best_first_prefix_that_fits(trip: MemoryService) -> None:
    full = trip.memory_search("Bob's trip to Lisbon", limit=5)
    assert len(full["memories"]) == 5
    assert "truncated" not in full
    sizes = _sizes(full["memories"])
    budget = sizes[0] + sizes[1] + 1
    cut = trip.memory_search("Bob's trip to Lisbon", limit=5, max_chars=budget)
    assert [m["id"] for m in cut["memories"]] == [m["id"] for m in full["memories"][:2]]
    assert sum(_sizes(cut["memories"])) <= budget
    assert cut["truncated"] is True
    roomy = trip.memory_search("Bob's trip to Lisbon", limit=5, max_chars=sum(sizes))
    assert roomy["memories"] == full["memories"]
    assert "truncated" not in roomy


@pytest.mark.slow
def test_a_budget_smaller_than_one_memory_still_answers_the_best(trip: MemoryService) -> None:
    best = trip.memory_search("Bob's trip to Lisbon", limit=5)["memories"][0]
    cut = trip.memory_search("Bob's trip to Lisbon", limit=5, max_chars=1)
    assert cut["memories"] == [best]
    assert cut["truncated"] is True


@pytest.mark.slow
def test_recall_spends_the_budget_on_memories_then_context_lines(trip: MemoryService) -> None:
    full = trip.memory_recall("Bob's trip to Lisbon", limit=5, context_limit=10)
    memories, lines = full["long_term"]["memories"], full["context"]["around_top_memory"]
    assert len(memories) == 5
    assert len(lines) == 5
    assert "truncated" not in full
    budget = sum(_sizes(memories)) + len(lines[0]) + len(lines[1])
    cut = trip.memory_recall("Bob's trip to Lisbon", limit=5, context_limit=10, max_chars=budget)
    assert cut["long_term"]["memories"] == memories
    assert cut["context"]["around_top_memory"] == lines[:2]
    assert cut["truncated"] is True
    assert cut["short_term"]["turns"] == []  # nothing left for the recent turns
    tiny = trip.memory_recall("Bob's trip to Lisbon", limit=5, context_limit=10, max_chars=1)
    assert tiny["long_term"]["memories"] == memories[:1]
    assert tiny["context"]["around_top_memory"] == []
    assert tiny["short_term"]["turns"] == []


def test_recall_budgets_the_whole_answer_turns_last_and_newest_first(trip: MemoryService) -> None:
    """``max_chars`` bounds the whole answer's texts: memories, then context lines, then
    the short-term turns (the newest kept first, shown oldest first as always)."""
    full = trip.memory_recall("Bob's trip to Lisbon", limit=5, context_limit=10)
    memories, lines = full["long_term"]["memories"], full["context"]["around_top_memory"]
    turns = full["short_term"]["turns"]
    assert len(turns) == 5
    spent = sum(_sizes(memories)) + sum(len(line) for line in lines)
    two_newest = len(turns[-1]["content"]) + len(turns[-2]["content"])
    cut = trip.memory_recall("Bob's trip to Lisbon", limit=5, context_limit=10, max_chars=spent + two_newest)
    assert cut["long_term"]["memories"] == memories
    assert cut["context"]["around_top_memory"] == lines
    assert cut["short_term"]["turns"] == turns[-2:]
    assert cut["truncated"] is True
    whole = spent + sum(len(t["content"]) for t in turns)
    roomy = trip.memory_recall("Bob's trip to Lisbon", limit=5, context_limit=10, max_chars=whole)
    assert roomy["short_term"] == full["short_term"]
    assert "truncated" not in roomy


@pytest.mark.slow
@pytest.mark.parametrize("bad", [0, -5, 200_001, "100", True, 1.5, [10]])
def test_a_bad_budget_is_refused_before_anything_else(trip: MemoryService, bad: Any) -> None:
    with refused(400, field="max_chars"):
        trip.memory_search("trip", max_chars=bad)
    with refused(400, field="max_chars"):
        trip.memory_recall("trip", max_chars=bad, user_id="no-such-store")  # 400 before the 404


@pytest.mark.slow
@pytest.mark.anyio
async def test_mcp_search_and_recall_take_the_budget(trip: MemoryService) -> None:
    async with mcp_session(trip) as session:
        cut = await session.call("memory_search", {"query": "Bob's trip to Lisbon", "max_chars": 1})
        assert not cut.is_error
        assert len(cut.structured_content["memories"]) == 1
        assert cut.structured_content["truncated"] is True
        recalled = await session.call("memory_recall", {"query": "Lisbon", "max_chars": 1})
        assert not recalled.is_error
        assert recalled.structured_content["truncated"] is True
        refused_call = await session.call("memory_search", {"query": "trip", "max_chars": 0})
        assert refused_call.is_error
        error_body(refused_call.structured_content, 400, "invalid_request_error", field="max_chars")
