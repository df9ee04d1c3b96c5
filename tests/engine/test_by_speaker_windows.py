"""``by_speaker`` reads a time window, never the speaker's whole scope.

The service sorts only the rows of a window ``lower < created_at <= before`` that it sizes
by counting, widening and narrowing it; the answer must be exactly the unwindowed one:
newest first, ties by write order, every memory once. Each test walks the pages with
services whose windows may hold at most 8, 64 or 1,024 rows (the smallest forces every
page through narrowing and bisection; the default takes a small speaker's first page in
one sorted read), and compares each page with a reference computed from ``memory_list``
(every memory, in write order) sorted here in Python.

All services of a test share one database, as processes would; the clock is the test's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import SteppableClock, all_memories, walk_by_speaker

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader
from wontopos_mcp.storage.adapter import Store

CAPS = (8, 64, 1024)
TOPICS = ("the garden", "a budget", "the trip", "dinner plans", "a book", "the car")
NUMBERS = itertools.count(1)
STORES = itertools.count()


@pytest.fixture
def services(make_service: Callable[..., MemoryService], clock: SteppableClock) -> dict[int, MemoryService]:
    """One service per window cap, all on one database and one clock."""
    return {cap: make_service(clock=clock, window_cap=cap) for cap in CAPS}


def writer(services: dict[int, MemoryService]) -> MemoryService:
    return services[CAPS[-1]]


def fresh_store(svc: MemoryService, *speakers: str) -> str:
    store = f"windows-{next(STORES)}"
    svc.store_create(store)
    for name in speakers:
        svc.speaker_register(name, user_id=store)
    return store


def fact(who: str | None) -> str:
    """A distinct fact each time (its numbers differ), never a duplicate of another."""
    n = next(NUMBERS)
    return f"{who or 'Someone'} mentioned {TOPICS[n % len(TOPICS)]} for the {n}th time: {n * 17} minutes."


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def import_items(svc: MemoryService, store: str, items: list[tuple[str | None, datetime | None]]) -> list[str]:
    """Store (speaker, created_at) items in one batch; None keeps the clock's time."""
    batch = []
    for who, moment in items:
        item: dict[str, Any] = {"content": fact(who)}
        if who is not None:
            item["speaker"] = who
        if moment is not None:
            item["created_at"] = stamp(moment)
        batch.append(item)
    answer = svc.memory_add_batch(batch, user_id=store)
    assert answer["count"] == len(items), answer
    return answer["ids"]


def add(svc: MemoryService, store: str, who: str | None) -> str:
    answer = svc.memory_add(fact(who), speaker=who, user_id=store)
    assert answer["status"] == "stored", answer
    return answer["id"]


def reference(svc: MemoryService, store: str, speaker: str) -> list[dict[str, Any]]:
    """The unwindowed order: newest first, and among equal times the later write first."""
    everything = all_memories(svc, store)  # in write order
    mine = [(m["created_at"], n, m) for n, m in enumerate(everything) if m.get("speaker") == speaker]
    return [m for _, _, m in sorted(mine, key=lambda t: (t[0], t[1]), reverse=True)]


def assert_pages_match(svc: MemoryService, store: str, speaker: str, limit: int) -> None:
    """Every page, and each page's paging fields, exactly as the reference order says."""
    expected = reference(svc, store, speaker)
    chunks = svc.by_speaker(speaker, limit=limit, user_id=store)["chunks"]
    before, skip, start = None, None, 0
    while True:
        page = svc.by_speaker(speaker, limit=limit, before=before, skip_ids=skip, user_id=store)
        want = expected[start : start + limit]
        assert [m["id"] for m in page["memories"]] == [m["id"] for m in want], f"page from {start}"
        assert page["memories"] == want
        assert page["returned"] == len(want)
        assert page["chunks"] == page["records_to_delete"] == chunks
        start += len(want)
        assert page["has_more"] == (start < len(expected))
        if not page["has_more"]:
            assert page["next_before"] is None
            assert page["next_skip_ids"] == []
            return
        last = want[-1]["created_at"]
        assert page["next_before"] == last
        # next_skip_ids: every memory returned so far at that timestamp, in order.
        assert page["next_skip_ids"] == [m["id"] for m in expected[:start] if m["created_at"] == last]
        before, skip = page["next_before"], page["next_skip_ids"]


def walk_every_way(services: dict[int, MemoryService], store: str, speaker: str, limits: tuple[int, ...]) -> None:
    for svc in services.values():
        for limit in limits:
            assert_pages_match(svc, store, speaker, limit)
            # Again, now that the service remembers the spans that served this speaker.
            assert_pages_match(svc, store, speaker, limit)


def days_ago(clock: SteppableClock, days: float) -> datetime:
    return clock.now - timedelta(days=days)


@pytest.mark.slow
def test_memories_spread_over_years_with_a_few_recent_page_as_unwindowed(
    services: dict[int, MemoryService], clock: SteppableClock
) -> None:
    svc = writer(services)
    store = fresh_store(svc, "Ann", "Ben")
    # Imported years of history, unevenly: dense bursts and long silences, Ben in between.
    days = [4000, 3999.5, 3650, 3000] + [2000 + d / 24 for d in range(40)] + [900, 400, 399, 30, 2]
    import_items(svc, store, [("Ann", days_ago(clock, d)) for d in days])
    import_items(svc, store, [("Ben", days_ago(clock, d + 0.25)) for d in days[::3]] + [(None, days_ago(clock, 5))])
    for who in ("Ann", "Ben", None, "Ann", "me", "Ann"):  # a few recent ones, a second apart
        clock.advance(seconds=1)
        add(svc, store, who)
    # A long silence, then one more import: a created_at is never later than now (an
    # as_of later than now is a 400, and so is a batch item's created_at).
    clock.advance(days=400)
    import_items(svc, store, [("Ann", clock.now)])
    walk_every_way(services, store, "Ann", (5, 7, 20))
    walk_every_way(services, store, "Ben", (5,))
    walk_every_way(services, store, "me", (5,))


@pytest.mark.slow
def test_equal_timestamps_across_page_boundaries_keep_write_order(
    services: dict[int, MemoryService], clock: SteppableClock
) -> None:
    svc = writer(services)
    store = fresh_store(svc, "Ann")
    import_items(svc, store, [("Ann", datetime(2020, 1, 1, tzinfo=timezone.utc))] * 23)  # an import of one date
    import_items(svc, store, [("Ann", None)] * 17 + [("me", None)] * 3)  # a batch under a still clock
    clock.advance(microseconds=1)
    for who in ("Ann", "Ann", None, "Ann"):
        add(svc, store, who)
    import_items(svc, store, [("Ann", datetime(2020, 1, 1, tzinfo=timezone.utc) - timedelta(microseconds=1))] * 6)
    walk_every_way(services, store, "Ann", (5, 6, 20))


@pytest.mark.slow
def test_a_speaker_whose_newest_memory_is_long_past_pages_as_unwindowed(
    services: dict[int, MemoryService], clock: SteppableClock
) -> None:
    svc = writer(services)
    store = fresh_store(svc, "Ann", "Ben")
    old = datetime(2003, 5, 17, 8, 30, tzinfo=timezone.utc)
    import_items(svc, store, [("Ann", old - timedelta(hours=7 * n)) for n in range(45)])
    import_items(svc, store, [("Ann", datetime(1950, 6, 1, tzinfo=timezone.utc))])  # before the epoch
    for who in ("Ben", "Ben", None):  # others keep talking today
        clock.advance(minutes=3)
        add(svc, store, who)
    walk_every_way(services, store, "Ann", (5, 20))


def arrivals(svc: MemoryService, store: str, clock: SteppableClock, arrived: list[str]) -> Callable[[], None]:
    """What happens between two pages: one of three kinds of new memory of Ann's, in turn."""
    steps = itertools.count()

    def arrive() -> None:
        step = next(steps) % 3
        if step == 0:  # at the clock's time, which may equal the newest memories' time
            arrived.append(add(svc, store, "Ann"))
        elif step == 1:  # later, and someone else too
            clock.advance(seconds=1)
            arrived.append(add(svc, store, "Ann"))
            add(svc, store, "Ben")
        else:  # an import dated in the middle of what the walk has yet to read
            arrived.extend(import_items(svc, store, [("Ann", days_ago(clock, 80))]))

    return arrive


@pytest.mark.slow
def test_a_walk_returns_every_memory_that_existed_once_while_new_ones_arrive(
    services: dict[int, MemoryService], clock: SteppableClock
) -> None:
    svc = writer(services)
    store = fresh_store(svc, "Ann", "Ben")
    import_items(svc, store, [("Ann", days_ago(clock, 100 - d)) for d in range(0, 60, 2)])
    import_items(svc, store, [("Ann", None)] * 12)  # ties at the newest time
    for cap, reader in services.items():
        existing = [m["id"] for m in reference(svc, store, "Ann")]
        arrived: list[str] = []
        arrive = arrivals(svc, store, clock, arrived)
        walk = walk_by_speaker(reader, "Ann", limit=5, user_id=store, between_pages=arrive)
        walked = [m["id"] for m in walk]
        assert len(walked) == len(set(walked)), f"cap {cap}: a memory came back twice"
        assert set(existing) <= set(walked), f"cap {cap}: a memory that existed when the walk began was missed"
        assert set(walked) <= set(existing) | set(arrived)
        stamps = [m["created_at"] for m in walk]
        assert stamps == sorted(stamps, reverse=True)


@pytest.mark.slow
def test_a_speaker_with_no_memories_has_an_empty_last_page(
    services: dict[int, MemoryService], clock: SteppableClock
) -> None:
    svc = writer(services)
    store = fresh_store(svc, "Ann", "Ben", "Cid")
    import_items(svc, store, [("Ann", days_ago(clock, d)) for d in range(12)])
    gone = add(svc, store, "Cid")
    svc.memory_forget(memory_id=gone, user_id=store)
    for reader in services.values():
        for name in ("Ben", "Cid"):  # never said anything; said something, since forgotten
            for before, skip in ((None, None), (stamp(clock.now), [gone])):
                page = reader.by_speaker(name, limit=5, before=before, skip_ids=skip, user_id=store)
                assert page["memories"] == []
                assert page["returned"] == 0
                assert page["chunks"] == page["records_to_delete"] == 0
                assert page["has_more"] is False
                assert page["next_before"] is None
                assert page["next_skip_ids"] == []


@pytest.mark.slow
def test_what_a_service_remembers_of_a_speaker_never_changes_the_answer(
    services: dict[int, MemoryService], clock: SteppableClock, tmp_path: Path, embedder: Any
) -> None:
    """Another process writes and deletes between walks: the remembered spans are stale."""
    svc = writer(services)
    store = fresh_store(svc, "Ann")
    import_items(svc, store, [("Ann", days_ago(clock, 3000 - 10 * d)) for d in range(40)])
    walk_every_way(services, store, "Ann", (5,))  # every service now remembers sparse years
    other = MemoryService(Store(str(tmp_path / "db")), ModelLoader.of(embedder), clock=clock)
    try:
        # Dense now, where the spans said sparse; and the old ones thinned out.
        import_items(other, store, [("Ann", clock.now - timedelta(seconds=n)) for n in range(70)])
        for memory in reference(other, store, "Ann")[70::3]:
            other.memory_forget(memory_id=memory["id"], user_id=store)
    finally:
        other.close()
    walk_every_way(services, store, "Ann", (5, 20))


PLACES = st.sampled_from(["Ann", "Ann", "Ann", "Ben", None])
# Days back from a base moment: a few bursts (many equal or near times) spread over decades,
# and up to 30 days after it (the clock is then moved past them: nothing is stored in the future).
WHEN = st.one_of(
    st.sampled_from([0.0, 0.0, 1.0, 365.0, 7300.0, -30.0]),
    st.floats(min_value=-10, max_value=20000, allow_nan=False),
)


@pytest.mark.slow
@settings(max_examples=4)
@given(
    items=st.lists(st.tuples(PLACES, WHEN), min_size=8, max_size=45),
    limit=st.integers(min_value=5, max_value=20),
)
def test_any_history_pages_as_unwindowed(
    services: dict[int, MemoryService], clock: SteppableClock, items: list[tuple[str | None, float]], limit: int
) -> None:
    svc = writer(services)
    store = fresh_store(svc, "Ann", "Ben")
    base = clock.now
    clock.advance(days=31)
    import_items(svc, store, [(who, base - timedelta(days=d)) for who, d in items])
    for reader in services.values():
        assert_pages_match(reader, store, "Ann", limit)
