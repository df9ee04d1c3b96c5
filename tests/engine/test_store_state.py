"""The store's own state (the SDK's ``stats``, ``history``, ``lineage`` and ``revisions``),
in the core: memories counted never records, the turns recall reads, a supersede chain
walked forward, and revision pages that walk every memory once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support import SteppableClock, refused

from wontopos_mcp.engine.service import MemoryService

LONG = "First sentence here. Second sentence there. A third one too."  # three chunk records


def test_stats_counts_memories_never_records(service: MemoryService) -> None:
    service.memory_add(LONG)
    old = service.memory_add("The meeting is on Friday.")
    service.memory_supersede(old["id"], "The meeting is on Monday.")
    service.memory_add_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    assert service.stats() == {"user_id": "default", "total_memories": 5, "short_term_turns": 2}


def test_stats_of_an_unknown_store_is_404_naming_it(service: MemoryService) -> None:
    with refused(404, field="user_id", user_id="nobody"):
        service.stats(user_id="nobody")


def test_history_is_the_short_term_turns_recall_reads_oldest_first(service: MemoryService) -> None:
    service.speaker_register("Bob")
    service.memory_add("A note that is no turn.")
    messages = [{"role": "user", "content": f"turn {i}"} for i in range(12)]
    messages[3] = {"role": "assistant", "content": "turn 3", "name": "Bob"}
    messages[11] = {"role": "assistant", "content": "turn 11"}
    service.memory_add_messages(messages)
    turns = service.history()["turns"]
    recalled = service.memory_recall("turn")["short_term"]["turns"]
    assert [t["content"] for t in turns] == [t["content"] for t in recalled] == [f"turn {i}" for i in range(2, 12)]
    assert [(t["role"], t.get("speaker")) for t in turns][1:2] == [("assistant", "Bob")]
    assert (turns[-1]["role"], turns[-1]["speaker"]) == ("assistant", "me")
    assert "speaker" not in turns[0]
    assert [t["created_at"] for t in turns] == [t["timestamp"] for t in recalled]
    assert service.stats()["short_term_turns"] == len(turns)


def test_lineage_runs_from_the_id_forward_to_the_version_in_force(service: MemoryService) -> None:
    first = service.memory_add("Bob lives in Lisbon.")["id"]
    second = service.memory_supersede(first, "Bob lives in Porto.")["id"]
    third = service.memory_supersede(second, "Bob lives in Faro.")["id"]
    whole = service.lineage(first)
    assert whole["memory_id"] == first
    assert [(v["id"], v["content"], v["is_current"]) for v in whole["versions"]] == [
        (first, "Bob lives in Lisbon.", False),
        (second, "Bob lives in Porto.", False),
        (third, "Bob lives in Faro.", True),
    ]
    assert [v["id"] for v in service.lineage(second)["versions"]] == [second, third]
    assert [v["id"] for v in service.lineage(third)["versions"]] == [third]  # the current version alone


def test_lineage_skips_a_forgotten_middle_version_and_refuses_a_forgotten_id(service: MemoryService) -> None:
    first = service.memory_add("The code is 1234.")["id"]
    second = service.memory_supersede(first, "The code is 5678.")["id"]
    third = service.memory_supersede(second, "The code is 9012.")["id"]
    service.memory_forget(memory_id=second)
    assert [v["id"] for v in service.lineage(first)["versions"]] == [first, third]
    for gone in (second, "9b2d8c1e-0000-4000-8000-000000000000"):
        with refused(404, field="memory_id", memory_id=gone):
            service.lineage(gone)
    with refused(400, field="memory_id"):
        service.lineage("  ")


def test_revisions_counts_superseded_memories_and_a_forgotten_one_nowhere(service: MemoryService) -> None:
    kept = service.memory_add("Tea at four.")["id"]
    old = service.memory_add("Dinner at seven.")["id"]
    service.memory_supersede(old, "Dinner at eight.")
    gone = service.memory_add("Lunch at noon.")["id"]
    service.memory_supersede(gone, "Lunch at one.")
    service.memory_forget(memory_id=gone)
    counts = service.revisions()
    assert {k: counts[k] for k in ("revised", "unrevised", "total", "ordered_by")} == {
        "revised": 1, "unrevised": 3, "total": 4, "ordered_by": "stored",
    }  # fmt: skip
    assert "memories" not in counts
    assert counts["counts"]
    assert counts["excludes"]
    revised = service.revisions(include="revised")
    assert [m["id"] for m in revised["memories"]] == [old]
    assert (revised["has_more"], revised["next_before"], revised["next_skip_ids"]) == (False, None, [])
    assert kept in {m["id"] for m in service.revisions(include="unrevised")["memories"]}


@pytest.mark.parametrize("window_cap", [1024, 4])
def test_revision_pages_walk_every_memory_once_newest_first_through_ties(
    make_service: Callable[..., MemoryService], clock: SteppableClock, window_cap: int
) -> None:
    service = make_service(clock=clock, window_cap=window_cap)
    service.memory_add_batch([{"content": f"Fact {i} is true."} for i in range(17)])  # one timestamp
    clock.advance(seconds=1)
    later = [service.memory_add(f"Later fact {i}.")["id"] for i in range(4)]
    seen: list[str] = []
    before: Any = None
    skip: Any = None
    for _ in range(10):
        page = service.revisions(include="unrevised", limit=5, before=before, skip_ids=skip)
        seen += [m["id"] for m in page["memories"]]
        assert len(page["memories"]) <= 5
        if not page["has_more"]:
            break
        before, skip = page["next_before"], page["next_skip_ids"]
    assert len(seen) == len(set(seen)) == 21
    assert seen[:4] == later[::-1]


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"include": "both"}, "include"),
        ({"include": "revised", "limit": 4}, "limit"),
        ({"include": "revised", "limit": 21}, "limit"),
        ({"include": "revised", "before": "yesterday"}, "before"),
        ({"include": "revised", "skip_ids": "x"}, "skip_ids"),
        ({"before": "2026-01-01"}, "before"),
        ({"skip_ids": []}, "skip_ids"),
    ],
)
def test_revisions_refuses_bad_paging_naming_the_field(
    service: MemoryService, arguments: dict[str, Any], field: str
) -> None:
    with refused(400, field=field):
        service.revisions(**arguments)
