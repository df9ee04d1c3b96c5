"""As-of recall: search and recall answer as the store stood at a moment, each memory in
the version current then, across supersede chains and forgets; ``superseded_at`` on every
superseded memory."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from support import SteppableClock, error_body, mcp_session, refused

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.rules.dates import format_us, to_us


def _at(clock: SteppableClock, **delta: float) -> str:
    return format_us(to_us(clock.now + timedelta(**delta)))


def _contents(answer: dict[str, Any]) -> list[str]:
    return [m["content"] for m in answer["memories"]]


@pytest.fixture
def budget(clocked_service: MemoryService, clock: SteppableClock) -> dict[str, Any]:
    """Bob's budget over three days: 10k on day 1, 12k on day 2, 15k on day 3 (each
    superseding the last), and an unrelated note on day 2. The moments between are kept."""
    svc = clocked_service
    svc.speaker_register("Bob")
    moments: dict[str, Any] = {"svc": svc}
    first = svc.memory_add("The marketing budget is 10k", speaker="Bob")["id"]
    moments["day1"] = _at(clock, hours=1)
    clock.advance(days=1)
    second = svc.memory_supersede(first, "The marketing budget is 12k")["id"]
    svc.memory_add("The office plants need water on Mondays", speaker="Bob")
    moments["day2"] = _at(clock, hours=1)
    clock.advance(days=1)
    third = svc.memory_supersede(second, "The marketing budget is 15k")["id"]
    moments.update(first=first, second=second, third=third, day3=_at(clock, hours=1))
    clock.advance(days=1)
    return moments


@pytest.mark.slow
def test_each_moment_answers_the_version_current_then(budget: dict[str, Any]) -> None:
    svc = budget["svc"]
    for day, expected in [("day1", "10k"), ("day2", "12k"), ("day3", "15k")]:
        answer = svc.memory_search("marketing budget", speaker="Bob", as_of=budget[day])
        budgets = [m for m in answer["memories"] if "budget" in m["content"]]
        assert [m["content"] for m in budgets] == [f"The marketing budget is {expected}"], day
        assert budgets[0]["is_superseded"] is False
        assert "superseded_by" not in budgets[0]
    first_day = svc.memory_search("office plants", as_of=budget["day1"])
    assert "The office plants need water on Mondays" not in _contents(first_day)  # stored later: not there


@pytest.mark.slow
def test_include_superseded_at_a_moment_shows_the_versions_replaced_by_then(budget: dict[str, Any]) -> None:
    svc = budget["svc"]
    answer = svc.memory_search("marketing budget", include_superseded=True, as_of=budget["day2"])
    states = {m["content"]: m for m in answer["memories"] if "budget" in m["content"]}
    assert set(states) == {"The marketing budget is 10k", "The marketing budget is 12k"}
    old = states["The marketing budget is 10k"]
    assert old["is_superseded"] is True
    assert old["superseded_by"] == budget["second"]
    assert old["superseded_at"] == svc.memory_get(budget["second"])["memory"]["created_at"]
    assert states["The marketing budget is 12k"]["is_superseded"] is False  # superseded only on day 3


@pytest.mark.slow
def test_a_forget_in_the_middle_of_the_chain(budget: dict[str, Any]) -> None:
    """Forgetting day 2's version relinks day 1's to day 3's: at day 2 the store now
    answers day 1's (the forgotten one is not there), at day 3 day 3's."""
    svc = budget["svc"]
    svc.memory_forget(memory_id=budget["second"])
    at_day2 = svc.memory_search("marketing budget", speaker="Bob", as_of=budget["day2"])
    assert [c for c in _contents(at_day2) if "budget" in c] == ["The marketing budget is 10k"]
    at_day3 = svc.memory_search("marketing budget", speaker="Bob", as_of=budget["day3"])
    assert [c for c in _contents(at_day3) if "budget" in c] == ["The marketing budget is 15k"]
    assert svc.memory_get(budget["first"])["memory"]["superseded_by"] == budget["third"]


@pytest.mark.slow
def test_superseded_at_is_on_every_read_of_a_superseded_memory(budget: dict[str, Any]) -> None:
    svc = budget["svc"]
    stamp = svc.memory_get(budget["second"])["memory"]["created_at"]
    assert svc.memory_get(budget["first"])["memory"]["superseded_at"] == stamp
    listed = {m["id"]: m for m in svc.memory_list()["memories"]}
    assert listed[budget["first"]]["superseded_at"] == stamp
    assert "superseded_at" not in listed[budget["third"]]
    said = {m["id"]: m for m in svc.by_speaker("Bob")["memories"]}
    assert said[budget["first"]]["superseded_at"] == stamp


@pytest.mark.slow
def test_recall_as_of_answers_memories_context_and_turns_as_they_stood(
    clocked_service: MemoryService, clock: SteppableClock
) -> None:
    svc = clocked_service
    svc.speaker_register("Bob")
    svc.memory_add_messages([{"role": "user", "name": "Bob", "content": "We fly to Oslo in May"}], conversation_id="c")
    moment = _at(clock, minutes=1)
    clock.advance(days=1)
    svc.memory_add_messages(
        [{"role": "user", "name": "Bob", "content": "Oslo is off, we fly to Rome"}], conversation_id="c"
    )
    then = svc.memory_recall("where do we fly?", context_limit=5, as_of=moment)
    assert [m["content"] for m in then["long_term"]["memories"]] == ["We fly to Oslo in May"]
    assert [t["content"] for t in then["short_term"]["turns"]] == ["We fly to Oslo in May"]
    assert all("Rome" not in line for line in then["context"]["around_top_memory"])
    now = svc.memory_recall("where do we fly?", context_limit=5)
    assert len(now["long_term"]["memories"]) == 2


@pytest.mark.slow
def test_dates_as_of_understands_and_refuses(budget: dict[str, Any], clock: SteppableClock) -> None:
    svc = budget["svc"]
    today = clock.now.date().isoformat()
    assert svc.memory_search("marketing budget", as_of=today)["memories"]  # today's plain date: now
    day1 = (clock.now - timedelta(days=3)).date().isoformat()  # a plain day: its end
    assert "The marketing budget is 10k" in _contents(svc.memory_search("marketing budget", as_of=day1))
    before = (clock.now - timedelta(days=30)).date().isoformat()
    assert svc.memory_search("marketing budget", as_of=before)["memories"] == []  # before the store had anything
    tomorrow = (clock.now + timedelta(days=1)).date().isoformat()
    for bad in [tomorrow, _at(clock, minutes=5), "yesterday", "2026-02-30", 20260101, "Bob' OR '1'='1"]:
        with refused(400, field="as_of"):
            svc.memory_search("marketing budget", as_of=bad)
        with refused(400, field="as_of"):
            svc.memory_recall("marketing budget", as_of=bad, user_id="no-such-store")  # before the 404


@pytest.mark.slow
@pytest.mark.anyio
async def test_mcp_search_and_recall_take_as_of(budget: dict[str, Any]) -> None:
    async with mcp_session(budget["svc"]) as session:
        found = await session.call(
            "memory_search", {"query": "marketing budget", "speaker": "Bob", "as_of": budget["day1"]}
        )
        assert not found.is_error
        assert "The marketing budget is 10k" in [m["content"] for m in found.structured_content["memories"]]
        recalled = await session.call("memory_recall", {"query": "budget", "as_of": budget["day1"]})
        assert not recalled.is_error
        future = await session.call("memory_search", {"query": "budget", "as_of": "2999-01-01"})
        assert future.is_error
        error_body(future.structured_content, 400, "invalid_request_error", field="as_of")


@pytest.mark.slow
def test_a_search_as_of_a_moment_ranks_as_a_search_made_then(
    clocked_service: MemoryService, clock: SteppableClock
) -> None:
    """The order too is the store's at that moment: memories stored later lend no score
    (neighbours, their conversation's best match, replies to them), as they lent none then."""
    svc = clocked_service
    for name in ("Bob", "Carol"):
        svc.speaker_register(name)
    said = [
        ("trip", "Bob", "I watered the tomatoes in the garden this morning"),
        ("trip", "Carol", "Did the train leave on time?"),
        ("shed", "Bob", "The shed by the fence needs a new coat of paint"),
        ("work", "Bob", "The quarterly report is due on Friday"),
        ("work", "Carol", "I booked the meeting room for Monday"),
    ]
    for conversation, speaker, content in said:
        svc.memory_add(content, speaker=speaker, conversation_id=conversation)
    moment = _at(clock, minutes=1)
    queries = [("what did Bob say about the garden?", "Bob"), ("the garden", None)]
    then = {q: _contents(svc.memory_search(q, speaker=s, limit=5)) for q, s in queries}
    clock.advance(days=1)
    later = [
        ("shed", "Carol", "Your garden is lovely: the garden roses, the garden path, the whole garden!"),
        ("shed", "Bob", "Thanks, I dug the vegetable beds last week"),
    ]
    for conversation, speaker, content in later:
        svc.memory_add(content, speaker=speaker, conversation_id=conversation)
    for q, s in queries:
        assert _contents(svc.memory_search(q, speaker=s, limit=5, as_of=moment)) == then[q], q
    now = _contents(svc.memory_search(queries[0][0], speaker="Bob", limit=5))
    assert now != then[queries[0][0]]  # the later memories do move today's order
