"""Fixing who said it: ``speaker_rename``, ``speaker_merge`` and ``memory_list`` by
speaker, in the core and through every face (library, MCP, REST), with a rename racing
another process's writes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import KEY, REPO, all_memories, error_body, mcp_session, refused, served

from wontopos_mcp import Memory
from wontopos_mcp.engine.service import MemoryService

INJECTION = "Bob' OR '1'='1"


def _said(svc: MemoryService, speaker: str) -> list[str]:
    return [m["content"] for m in all_memories(svc) if m.get("speaker") == speaker]


@pytest.fixture
def bob(service: MemoryService) -> MemoryService:
    """A store where Bob said three things, one of them superseded, and Carol one."""
    for name in ("Bob", "Carol"):
        service.speaker_register(name)
    first = service.memory_add("The deadline is Friday", speaker="Bob")["id"]
    service.memory_supersede(first, "The deadline moved to Monday")
    service.memory_add("I prefer tea over coffee", speaker="Bob")
    service.memory_add("Carol runs the budget review", speaker="Carol")
    return service


# --- rename ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_rename_retags_every_memory_superseded_included(bob: MemoryService) -> None:
    before = {s["speaker"]: s for s in bob.speakers_list()["speakers"]}
    answer = bob.speaker_rename("Bob", "Robert")
    assert answer == {
        "user_id": "default", "speaker": "Robert", "previous": "Bob", "status": "renamed", "memories_retagged": 3,
    }  # fmt: skip
    assert _said(bob, "Bob") == []
    assert sorted(_said(bob, "Robert")) == sorted(
        ["The deadline is Friday", "The deadline moved to Monday", "I prefer tea over coffee"]
    )
    after = {s["speaker"]: s for s in bob.speakers_list()["speakers"]}
    assert set(after) == {"Robert", "Carol"}
    assert after["Robert"]["memories"] == 3
    assert after["Robert"]["created_at"] == before["Bob"]["created_at"]
    found = bob.memory_search("deadline", speaker="Robert")["memories"]
    assert found
    assert {m["speaker"] for m in found} == {"Robert"}
    with refused(404, field="speaker"):
        bob.by_speaker("Bob")
    with refused(400, field="speaker"):  # the old name is no longer registered: writes refuse it
        bob.memory_add("Another thing", speaker="Bob")


@pytest.mark.slow
def test_renaming_to_a_registered_name_is_409_and_changes_nothing(bob: MemoryService) -> None:
    with refused(409, field="new_name", speaker="Carol") as info:
        bob.speaker_rename("Bob", "Carol")
    assert "speaker_merge" in str(info.value)
    assert len(_said(bob, "Bob")) == 3
    assert len(_said(bob, "Carol")) == 1


@pytest.mark.slow
def test_renaming_to_the_same_name_retags_nothing(bob: MemoryService) -> None:
    assert bob.speaker_rename("Bob", "Bob")["memories_retagged"] == 0
    assert len(_said(bob, "Bob")) == 3


@pytest.mark.slow
@pytest.mark.parametrize(
    ("speaker", "new_name", "status", "field"),
    [
        ("me", "Robert", 400, "speaker"),
        ("Bob", "me", 400, "new_name"),
        ("Bob", "ME", 400, "new_name"),
        ("Bob", "", 400, "new_name"),
        ("Bob", "Rob\x00ert", 400, "new_name"),
        ("Bob", "x" * 10_000, 400, "new_name"),
        ("Bob", 7, 400, "new_name"),
        ("Dave", "David", 404, "speaker"),
        (INJECTION, "Robert", 404, "speaker"),
    ],
)
def test_a_bad_rename_is_refused_and_changes_nothing(
    bob: MemoryService, speaker: Any, new_name: Any, status: int, field: str
) -> None:
    with refused(status, field=field):
        bob.speaker_rename(speaker, new_name)
    assert len(_said(bob, "Bob")) == 3
    assert {s["speaker"] for s in bob.speakers_list()["speakers"]} == {"Bob", "Carol"}


@pytest.mark.slow
def test_a_rename_and_a_merge_do_not_count_against_the_limit(make_service: Callable[..., MemoryService]) -> None:
    svc = make_service(speaker_limit=2)
    svc.speaker_register("Bob")
    svc.speaker_register("Carol")
    assert svc.speaker_rename("Bob", "Robert")["status"] == "renamed"
    svc.speaker_merge("Robert", "Carol", confirm_records=0)
    assert svc.speaker_register("Dave")["count"] == 2  # the merge freed a place


@pytest.mark.slow
def test_a_rename_cut_short_by_a_crash_is_finished_by_calling_it_again(bob: MemoryService) -> None:
    """The first of its commits done (the new name registered, marked), then the crash."""
    key = bob.registry.resolve(None).key
    row = bob.registry.speaker(key, "Bob")
    assert row is not None
    assert bob.registry.begin_rename(key, row, "Robert")
    assert {s["speaker"] for s in bob.speakers_list()["speakers"]} == {"Bob", "Robert", "Carol"}
    assert bob.speaker_rename("Bob", "Robert")["memories_retagged"] == 3
    assert {s["speaker"] for s in bob.speakers_list()["speakers"]} == {"Robert", "Carol"}
    bob.speaker_register("Bob")  # the mark is gone: Bob again is someone else
    with refused(409, field="new_name"):
        bob.speaker_rename("Bob", "Robert")


# --- merge -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_merge_needs_the_current_count_and_retags_into_the_target(bob: MemoryService) -> None:
    records = bob.by_speaker("Bob")["records_to_delete"]
    with refused(409, field="confirm_records", records_to_delete=records):
        bob.speaker_merge("Bob", "Carol", confirm_records=records + 1)
    assert len(_said(bob, "Bob")) == 3
    answer = bob.speaker_merge("Bob", "Carol", confirm_records=records)
    assert answer == {
        "user_id": "default", "speaker": "Carol", "merged": "Bob", "status": "merged", "memories_retagged": 3,
    }  # fmt: skip
    assert _said(bob, "Bob") == []
    assert len(_said(bob, "Carol")) == 4
    assert {s["speaker"] for s in bob.speakers_list()["speakers"]} == {"Carol"}


@pytest.mark.slow
def test_memories_that_restate_each_other_after_a_merge_stay_two(service: MemoryService) -> None:
    for name in ("Bob", "Robert"):
        service.speaker_register(name)
    service.memory_add("I will send the report on Thursday", speaker="Bob")
    service.memory_add("I will send the report on Thursday", speaker="Robert")
    service.speaker_merge("Bob", "Robert", confirm_records=service.by_speaker("Bob")["records_to_delete"])
    assert _said(service, "Robert") == ["I will send the report on Thursday"] * 2


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arguments", "status", "field"),
    [
        ({"speaker": "Bob", "into": "Bob", "confirm_records": 3}, 400, "into"),
        ({"speaker": "me", "into": "Carol", "confirm_records": 0}, 400, "speaker"),
        ({"speaker": "Bob", "into": "me", "confirm_records": 3}, 400, "into"),
        ({"speaker": "Bob", "into": "Carol"}, 400, "confirm_records"),
        ({"speaker": "Bob", "into": "Carol", "confirm_records": -1}, 400, "confirm_records"),
        ({"speaker": "Bob", "into": "Carol", "confirm_records": "3"}, 400, "confirm_records"),
        ({"speaker": "Bob", "into": "Dave", "confirm_records": 3}, 404, "into"),
        ({"speaker": "Dave", "into": "Carol", "confirm_records": 0}, 404, "speaker"),
        ({"speaker": "Bob", "into": INJECTION, "confirm_records": 3}, 404, "into"),
    ],
)
def test_a_bad_merge_is_refused_and_changes_nothing(
    bob: MemoryService, arguments: dict[str, Any], status: int, field: str
) -> None:
    with refused(status, field=field):
        bob.speaker_merge(**arguments)
    assert len(_said(bob, "Bob")) == 3
    assert len(_said(bob, "Carol")) == 1


# --- memory_list by speaker ----------------------------------------------------------------------


@pytest.mark.slow
def test_memory_list_by_speaker_lists_one_person_oldest_first_every_page(bob: MemoryService) -> None:
    bob.memory_add("Noted, I will remind you", speaker="me")
    walked, cursor = [], None
    while True:
        page = bob.memory_list(limit=1, cursor=cursor, speaker="Bob")
        walked += page["memories"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [m["content"] for m in walked] == [
        "The deadline is Friday", "The deadline moved to Monday", "I prefer tea over coffee",
    ]  # fmt: skip
    assert [m["content"] for m in bob.memory_list(speaker="me")["memories"]] == ["Noted, I will remind you"]
    with refused(404, field="speaker"):
        bob.memory_list(speaker=INJECTION)
    with refused(400, field="speaker"):
        bob.memory_list(speaker="Bo\x07b")


# --- the faces ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_library_renames_and_merges(make_service: Callable[..., MemoryService]) -> None:
    memory = Memory(service=make_service())
    try:
        memory.add_speaker("Bob")
        memory.add_speaker("Carol")
        memory.add("Lunch is at noon", speaker="Bob")
        assert memory.rename_speaker("Bob", "Robert")["memories_retagged"] == 1
        assert [m["speaker"] for m in memory.list_memories(speaker="Robert")["memories"]] == ["Robert"]
        records = memory.by_speaker("Robert")["records_to_delete"]
        assert memory.merge_speakers("Robert", "Carol", records)["speaker"] == "Carol"
    finally:
        memory.close()


@pytest.mark.slow
@pytest.mark.anyio
async def test_mcp_tools_rename_and_merge(bob: MemoryService) -> None:
    async with mcp_session(bob) as session:
        renamed = await session.call("speaker_rename", {"speaker": "Bob", "new_name": "Robert"})
        assert not renamed.is_error
        assert renamed.structured_content["memories_retagged"] == 3
        clash = await session.call("speaker_rename", {"speaker": "Robert", "new_name": "Carol"})
        assert clash.is_error
        error_body(clash.structured_content, 409, "conflict_error", field="new_name", speaker="Carol")
        stale = await session.call("speaker_merge", {"speaker": "Robert", "into": "Carol", "confirm_records": 99})
        assert stale.is_error
        records = error_body(stale.structured_content, 409, "conflict_error", field="confirm_records")
        merged = await session.call(
            "speaker_merge", {"speaker": "Robert", "into": "Carol", "confirm_records": records["records_to_delete"]}
        )
        assert not merged.is_error
        assert merged.structured_content["merged"] == "Robert"
        listed = await session.call("memory_list", {"speaker": "Carol"})
        assert {m["speaker"] for m in listed.structured_content["memories"]} == {"Carol"}


@pytest.mark.slow
def test_rest_extensions_rename_and_merge(tmp_path: Path, embedder: Any) -> None:
    with served(tmp_path, embedder, api_key=KEY) as live:
        with httpx.Client(base_url=f"{live.url}/api/v1", headers={"X-API-Key": KEY}, timeout=60) as client:
            for name in ("Bob", "Carol"):
                assert client.post("/memory/speakers", json={"speaker": name}).status_code == 200
            renamed = client.post("/memory/speakers/rename", json={"speaker": "Bob", "new_name": "Robert"})
            assert renamed.status_code == 200
            assert renamed.json()["status"] == "renamed"
            clash = client.post("/memory/speakers/rename", json={"speaker": "Robert", "new_name": "Carol"})
            assert clash.status_code == 409
            error_body(clash.json(), 409, "conflict_error", field="new_name")
            merged = client.post(
                "/memory/speakers/merge", json={"speaker": "Robert", "into": "Carol", "confirm_records": 0}
            )
            assert merged.status_code == 200
            assert merged.json()["memories_retagged"] == 0
            missing = client.post("/memory/list", json={"speaker": "Robert"})
            assert missing.status_code == 404
            error_body(missing.json(), 404, "not_found_error", field="speaker")


# --- a rename racing another process's writes ---------------------------------------------------

_WRITER = """
import json, sys
from wontopos_mcp import Memory
from wontopos_mcp.errors import WontoposError
memory = Memory(db=sys.argv[1], model_cache=sys.argv[2])
stored = []
print("ready", flush=True)
for i in range(400):
    try:
        stored.append(memory.add(f"Bob's note number {i} about the launch", speaker="Bob")["id"])
    except WontoposError as exc:
        assert exc.status == 400 and exc.field == "speaker", exc
        break
print(json.dumps(stored), flush=True)
memory.close()
"""


@pytest.mark.slow
def test_a_rename_racing_another_processes_writes_leaves_no_memory_under_the_old_name(
    make_service: Callable[..., MemoryService], tmp_path: Path, model_cache: Path
) -> None:
    svc = make_service()
    svc.speaker_register("Bob")
    svc.memory_add("Bob's first note", speaker="Bob")
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path / "db"), str(model_cache)],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "", "HOME": str(tmp_path)},
    )
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "ready"
    while len(_said(svc, "Bob")) < 4:  # the other process is writing
        pass
    renamed = svc.speaker_rename("Bob", "Robert")
    out, _ = writer.communicate(timeout=300)
    acknowledged = set(json.loads(out.strip().splitlines()[-1]))
    memories = all_memories(svc)
    assert not [m for m in memories if m.get("speaker") == "Bob"]
    robert = {m["id"] for m in memories if m.get("speaker") == "Robert"}
    assert acknowledged <= robert  # every write acknowledged before the rename was retagged
    assert renamed["memories_retagged"] >= 4
    assert len(robert) == 1 + len(acknowledged)


@pytest.mark.slow
def test_the_cli_renames_merges_after_asking_and_exports_one_person(
    bob: MemoryService, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from support import command_runner

    wontopos = command_runner(bob, capsys)
    assert wontopos("speakers", "rename", "Bob", "Robert") == (0, "Bob is now Robert; 3 memories retagged\n", "")
    code, _, err = wontopos("speakers", "rename", "Robert", "Carol")
    assert code == 1
    assert "wontopos-mcp speakers merge Robert Carol" in err
    assert "speaker_merge" not in err
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, out, err = wontopos("speakers", "merge", "Robert", "Carol")
    assert (code, out) == (1, "")
    records = bob.by_speaker("Robert")["records_to_delete"]
    assert f"3 memories ({records} records) move" in err  # memories first, what a person recognises
    assert "nothing merged" in err
    assert len(_said(bob, "Robert")) == 3
    code, out, _ = wontopos("export", "--speaker", "Robert")
    assert code == 0
    assert {json.loads(line)["speaker"] for line in out.splitlines()} == {"Robert"}
    assert len(out.splitlines()) == 3
    assert wontopos("speakers", "merge", "Robert", "Carol", "--yes")[:2] == (
        0,
        "Robert merged into Carol; 3 memories retagged\n",
    )
    assert _said(bob, "Robert") == []
    assert len(_said(bob, "Carol")) == 4
