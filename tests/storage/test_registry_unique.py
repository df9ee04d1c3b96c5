"""Uniqueness in the data as a second line (issue 11): registry rows go in with one
``merge_insert`` on the primary key, and "created" / "registered" is decided by the row
actually inserted. So even when two writers both decided a key was absent (replicas on
object storage, where the write lock is only in-process) one row exists and exactly one
caller hears "created" or "registered"; the other hears "exists".

The race is made deterministic: ``RacingStore`` takes its write lock in-process only (as
on object storage) and holds every registry insert at a barrier shared by two handles on
one database directory, so both have checked "absent" before either inserts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader
from wontopos_mcp.storage.adapter import Store
from wontopos_mcp.storage.rows import RegistryRow

BARRIER_TIMEOUT = 60  # generous: both threads only need to reach the insert


class RacingStore(Store):
    """A handle whose write lock excludes only this handle's threads, and whose registry
    inserts wait at ``gate`` (when set) so two handles insert after both decided."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.gate: threading.Barrier | None = None
        self._own_lock = threading.RLock()
        insert = self.registry.insert

        def gated(rows: Sequence[RegistryRow]) -> int:
            if self.gate is not None:
                self.gate.wait(BARRIER_TIMEOUT)
            return insert(rows)

        self.registry.insert = gated  # type: ignore[method-assign]

    @contextmanager
    def write_lock(self, scope: str | None = None) -> Iterator[None]:
        with self._own_lock:
            yield


@pytest.fixture
def pair(tmp_path: Path, embedder: Any) -> Iterator[tuple[MemoryService, MemoryService]]:
    """Two services on one database, each through its own racing handle, both opened."""
    services = [MemoryService(RacingStore(str(tmp_path / "db")), ModelLoader.of(embedder)) for _ in range(2)]
    for svc in services:
        svc.stores_list()  # opens the database (and makes "default") before the race
    yield services[0], services[1]
    for svc in services:
        svc.close()


def race(pair: tuple[MemoryService, MemoryService], call: Callable[[MemoryService], Any]) -> list[Any]:
    """``call`` on both services at once, their registry inserts released together."""
    gate = threading.Barrier(2)
    for svc in pair:
        assert isinstance(svc.store, RacingStore)
        svc.store.gate = gate
    try:
        with ThreadPoolExecutor(2) as pool:
            return [future.result() for future in [pool.submit(call, svc) for svc in pair]]
    finally:
        for svc in pair:
            assert isinstance(svc.store, RacingStore)
            svc.store.gate = None


def test_the_same_new_store_from_two_writers_is_created_once(pair: tuple[MemoryService, MemoryService]) -> None:
    answers = race(pair, lambda svc: svc.store_create("team-x"))
    assert sorted(answer["status"] for answer in answers) == ["created", "exists"]
    assert {answer["user_id"] for answer in answers} == {"team-x"}
    for svc in pair:
        assert [s["user_id"] for s in svc.stores_list()["stores"]].count("team-x") == 1
    assert len(pair[0].store.registry.rows("kind = 'store' AND name = 'team-x'")) == 1


def test_the_same_name_from_two_writers_is_registered_once(pair: tuple[MemoryService, MemoryService]) -> None:
    answers = race(pair, lambda svc: svc.speaker_register("Alice"))
    assert sorted(answer["status"] for answer in answers) == ["exists", "registered"]
    registered = next(answer for answer in answers if answer["status"] == "registered")
    existing = next(answer for answer in answers if answer["status"] == "exists")
    assert existing["created_at"] == registered["created_at"]  # the kept row, not the refused one
    assert existing["count"] == registered["count"] == 1
    for svc in pair:
        assert [s["speaker"] for s in svc.speakers_list()["speakers"]] == ["Alice"]
    assert len(pair[1].store.registry.rows("kind = 'speaker'")) == 1


def test_distinct_names_from_two_writers_are_both_registered(pair: tuple[MemoryService, MemoryService]) -> None:
    names = iter(["Bob", "Carol"])
    lock = threading.Lock()

    def register(svc: MemoryService) -> dict[str, Any]:
        with lock:
            name = next(names)
        return svc.speaker_register(name)

    answers = race(pair, register)
    assert [answer["status"] for answer in answers] == ["registered", "registered"]
    assert sorted(s["speaker"] for s in pair[0].speakers_list()["speakers"]) == ["Bob", "Carol"]


def test_an_insert_through_a_stale_handle_inserts_nothing(tmp_path: Path) -> None:
    """The handle that opened the table before the other's commit still sees the key."""
    first, second = Store(str(tmp_path / "db")), Store(str(tmp_path / "db"))
    try:
        first.connect()
        second.connect()
        row = {"key": "meta", "kind": "meta", "user_id": "", "name": "model-a", "created_us": 0, "value": "384"}
        assert first.registry.insert([row]) == 1
        assert second.registry.insert([{**row, "name": "model-b"}]) == 0
        assert [r["name"] for r in second.registry.rows("kind = 'meta'")] == ["model-a"]
        assert first.registry.insert([row, {**row, "key": "other"}]) == 1  # only the absent key goes in
    finally:
        first.close()
        second.close()


def test_kept_idempotency_records_stay_one_per_key(pair: tuple[MemoryService, MemoryService]) -> None:
    """Kept records replace those under the same key in one commit, from either handle,
    and several memories carrying one key leave one record: the latest."""
    a, b = pair
    key = a.registry.resolve(None).key
    a.registry.keep_idempotency_records(key, [("k1", "fp-old", '{"n": 1}', 10), ("k1", "fp", '{"n": 2}', 20)])
    assert a.registry.idempotency_record(key, "k1", 0) == ("fp", '{"n": 2}')
    b.registry.keep_idempotency_records(key, [("k1", "fp-new", '{"n": 3}', 30), ("k2", "fp", "{}", 30)])
    rows = a.store.registry.rows("kind = 'idem'")
    assert sorted(row["name"] for row in rows) == ["k1", "k2"]
    assert a.registry.idempotency_record(key, "k1", 0) == ("fp-new", '{"n": 3}')
    assert a.registry.idempotency_record(key, "k1", 30) == ("fp-new", '{"n": 3}')  # kept with its own time
    assert a.registry.idempotency_record(key, "k1", 31) is None
