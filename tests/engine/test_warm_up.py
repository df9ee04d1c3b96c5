"""The background start of a service: the database opens first, then the model loads, and
every call that needs no embedding (stores, speakers, get, list, by_speaker, forget)
answers while the model is still loading, never waiting for it.

Real services (LanceDB under ``tmp_path``); the model load is the one thing controlled,
through a loader that blocks until the test opens its gate (``support.Gate``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from unittest.mock import ANY

import pytest
from support import Gate, open_loading_service, refused

from wontopos_mcp.engine.service import MemoryService


@pytest.fixture
def loading(tmp_path: Path, gate: Gate) -> Iterator[MemoryService]:
    """A started service whose model load is blocked until ``gate.event`` is set."""
    service = open_loading_service(tmp_path, gate, model_wait=0.2)
    service.start()
    yield service
    gate.event.set()
    service.close()


def test_the_model_load_begins_only_once_the_database_is_open(loading: MemoryService, gate: Gate) -> None:
    assert gate.entered.wait(60), "the model load never began"
    assert loading.database_state() == "ok"
    assert loading.models.state == "loading"


def test_calls_that_need_no_embedding_answer_while_the_model_loads(loading: MemoryService, gate: Gate) -> None:
    assert loading.speakers_list()["count"] == 0
    assert loading.speaker_register("Bob")["status"] == "registered"
    assert [s["speaker"] for s in loading.speakers_list()["speakers"]] == ["Bob"]
    assert loading.stores_list()["stores"] == [{"user_id": "default", "created_at": ANY, "memories": 0}]  # counted
    assert loading.memory_list()["count"] == 0
    assert loading.by_speaker("Bob")["memories"] == []
    with refused(404):
        loading.memory_get("no-such-memory")
    assert loading.memory_forget(speaker="Bob", confirm_records=0)["deleted"] == 0
    with refused(503):
        loading.memory_search("anything")
    assert not gate.event.is_set()
    assert loading.models.state == "loading"


def test_a_database_that_fails_to_open_still_lets_the_model_load(tmp_path: Path, gate: Gate) -> None:
    (tmp_path / "db").write_text("a file where the database should be")
    service = open_loading_service(tmp_path, gate)
    try:
        service.start()
        assert gate.entered.wait(60), "the model load never began"
        assert service.database_state() == "error"
        gate.event.set()
        assert service.models.get(timeout=30) is gate.embedder
        assert service.models.state == "ready"
    finally:
        gate.event.set()
        service.close()


def test_start_is_idempotent(loading: MemoryService, gate: Gate) -> None:
    assert gate.entered.wait(60)
    loading.start()  # e.g. an SSE connection's lifespan, after the HTTP app's own
    assert loading.database_state() == "ok"
    assert loading.models.state == "loading"
