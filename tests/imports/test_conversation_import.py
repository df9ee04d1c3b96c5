"""Importing a conversation export end to end: real readers, a real database, the real model.

Names resolve before anything is stored (an unresolved one refuses the whole import, with
counts); every message lands under the person who wrote it and a speaker filter returns
theirs only; a re-run, or a later export of the same chat, stores nothing twice; an import
stopped between batches completes when run again; a bad file changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import all_memories, changes_nothing, refused

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.imports.sources import BytesSource, FileSource
from wontopos_mcp.rules.import_options import import_options

# A family chat as WhatsApp's Android export writes it (day first, 24 h), three scripts.
FAMILY = """\
05/03/2026, 18:01 - Messages and calls are end-to-end encrypted. No one outside of this chat can read them.
05/03/2026, 18:02 - Анна: Я куплю билеты на поезд до Казани в пятницу.
05/03/2026, 18:03 - Bob: I'll book the hotel near the river, two nights.
05/03/2026, 18:04 - さくら: 駅で待ち合わせしましょう。
05/03/2026, 18:05 - Bob: <Media omitted>
05/03/2026, 18:06 - Анна: ok
05/03/2026, 18:07 - Анна: ok
06/03/2026, 09:15 - Bob: The hotel is booked: Riverside Inn,
confirmation number 4471.
"""
LATER = FAMILY + "07/03/2026, 10:00 - さくら: 新幹線の時間を送ります。\n"


def whatsapp(text: str, name: str = "WhatsApp Chat with Family.txt") -> BytesSource:
    return BytesSource(name, text.encode("utf-8"))


def run(svc: MemoryService, source: Any, user_id: str | None = "family", **options: Any) -> Any:
    return svc.import_conversations(source, import_options(tz="Europe/Berlin", **options), user_id)


def test_unregistered_names_refuse_the_import_with_their_counts_and_nothing_is_stored(service: MemoryService) -> None:
    with changes_nothing(service), refused(400, field="speaker", speaker="Анна") as info:
        run(service, whatsapp(FAMILY))
    unresolved = {e["name"]: e["messages"] for e in info.value.details["unresolved"]}
    assert unresolved == {"Анна": 3, "Bob": 2, "さくら": 1}
    assert "register" in info.value.message
    assert "family" not in [s["user_id"] for s in service.stores_list()["stores"]]


def test_register_stores_every_message_under_its_author_and_the_filter_is_exact(service: MemoryService) -> None:
    summary = run(service, whatsapp(FAMILY), register=True)

    assert summary["stored"] == 6
    assert summary["skipped"] == {"media": 1, "system": 1}
    assert sorted(summary["registered"]) == ["Bob", "Анна", "さくら"]
    assert summary["speakers"] == {"Bob": 2, "Анна": 3, "さくら": 1}
    memories = all_memories(service, "family")
    said = [(m.get("speaker"), m["content"]) for m in memories]
    assert said[0] == ("Анна", "Я куплю билеты на поезд до Казани в пятницу.")
    assert said[-1] == ("Bob", "The hotel is booked: Riverside Inn,\nconfirmation number 4471.")
    assert said.count(("Анна", "ok")) == 2  # a repeated "ok" in one conversation is two turns
    assert {m["conversation_id"] for m in memories} == {"whatsapp:WhatsApp Chat with Family.txt"}
    assert memories[0]["event_date"] == "2026-03-05T17:02:00.000000Z"  # 18:02 in Berlin
    for person in ("Анна", "Bob", "さくら"):
        found = service.memory_search("train tickets hotel station", speaker=person, limit=20, user_id="family")
        assert found["memories"]
        assert {m["speaker"] for m in found["memories"]} == {person}


def test_the_same_export_imported_again_stores_nothing_and_a_later_one_only_what_is_new(
    service: MemoryService,
) -> None:
    run(service, whatsapp(FAMILY), register=True)
    again = run(service, whatsapp(FAMILY))
    assert (again["stored"], again["already_imported"]) == (0, 6)

    later = run(service, whatsapp(LATER))
    assert (later["stored"], later["already_imported"]) == (1, 6)
    assert len(all_memories(service, "family")) == 7


def test_an_import_stopped_between_batches_completes_when_run_again(make_service: Callable[..., Any]) -> None:
    svc = make_service()
    lines = [f"0{1 + i // 60}/04/2026, 10:{i % 60:02d} - Bob: Note number {i} about the garden." for i in range(9)]
    text = "\n".join(lines) + "\n"

    class Stop(Exception):
        pass

    def stop_after_first_batch(done: int, total: int, counts: Any) -> None:
        raise Stop

    with pytest.raises(Stop):
        svc.import_conversations(
            whatsapp(text), import_options(register=True), "garden", progress=stop_after_first_batch, batch=4
        )
    assert len(all_memories(svc, "garden")) == 4

    summary = run(svc, whatsapp(text), user_id="garden")
    assert (summary["stored"], summary["already_imported"]) == (5, 4)
    assert sorted(m["content"] for m in all_memories(svc, "garden")) == sorted(line.split(": ", 1)[1] for line in lines)


def test_as_maps_names_to_me_untagged_or_a_speaker_and_skip_leaves_a_person_out(service: MemoryService) -> None:
    service.store_create("family")
    service.speaker_register("Anna", user_id="family")
    summary = run(service, whatsapp(FAMILY), as_=["Анна=Anna", "Bob=me", "さくら=-"])
    assert summary["speakers"] == {"(untagged)": 1, "Anna": 3, "me": 2}
    people = {p["name"]: (p["resolves"], p.get("speaker")) for p in summary["conversations"][0]["people"]}
    assert people == {"Анна": ("mapped", "Anna"), "Bob": ("me", "me"), "さくら": ("untagged", None)}

    service.store_create("skipped")
    service.speaker_register("Bob", user_id="skipped")
    summary = run(service, whatsapp(FAMILY), user_id="skipped", skip=["Анна", "さくら"])
    assert summary["speakers"] == {"Bob": 2}
    assert summary["skipped"]["person_skipped"] == 4


def test_a_dry_run_shows_the_people_and_how_each_resolves_and_stores_nothing(service: MemoryService) -> None:
    service.store_create("family")
    service.speaker_register("Bob", user_id="family")
    with changes_nothing(service):
        summary = run(service, whatsapp(FAMILY), dry_run=True, register=True, as_={"さくら": "me"})
    (conversation,) = summary["conversations"]
    people = {p["name"]: (p["messages"], p["resolves"]) for p in conversation["people"]}
    assert people == {"Анна": (3, "register"), "Bob": (2, "registered"), "さくら": (1, "me")}
    assert conversation["first"] == "2026-03-05T17:02:00.000000Z"
    assert conversation["last"] == "2026-03-06T08:15:00.000000Z"
    assert conversation["skipped"] == {"media": 1, "system": 1}
    assert summary["stored"] == 0
    assert summary["dry_run"] is True


def test_registering_past_the_speaker_limit_refuses_the_import_up_front(make_service: Callable[..., Any]) -> None:
    svc = make_service(speaker_limit=2)
    with changes_nothing(svc), refused(400, field="register", speaker_limit=2, would_register=3):
        run(svc, whatsapp(FAMILY), register=True)


@pytest.mark.parametrize(
    ("name", "reason"),
    [("me", "reserved"), ("Bob\u0007", "not usable"), ("x" * 200, "not usable")],
)
def test_a_name_the_rules_refuse_is_unresolved_until_mapped(service: MemoryService, name: str, reason: str) -> None:
    text = f"05/03/2026, 18:02 - {name}: the plan is fine\n05/03/2026, 18:03 - Bob: good\n"
    with changes_nothing(service), refused(400, field="speaker") as info:
        run(service, whatsapp(text), register=True)
    (entry,) = info.value.details["unresolved"]
    assert reason in entry["reason"]
    summary = run(service, whatsapp(text), register=True, as_={name: "Someone"})
    assert summary["speakers"] == {"Bob": 1, "Someone": 1}


def test_a_bad_file_names_the_file_and_the_place_and_changes_nothing(service: MemoryService, tmp_path: Path) -> None:
    cut = tmp_path / "result.json"
    chat = {"name": "Team", "type": "private_group", "id": 7, "messages": [
        {"id": 1, "type": "message", "date_unixtime": "1767225600", "from": "Ana", "text": "hello"}]}  # fmt: skip
    cut.write_text(json.dumps(chat)[:-30])
    with changes_nothing(service), refused(400, field="file", file="result.json") as info:
        run(service, FileSource(cut), format="telegram", register=True)
    assert info.value.message.startswith("result.json: ")
    assert "nothing was imported" in info.value.message


def test_two_messages_with_one_id_refuse_the_file(service: MemoryService, tmp_path: Path) -> None:
    chat = {"name": "Team", "type": "private_group", "id": 7, "messages": [
        {"id": 1, "type": "message", "date_unixtime": "1767225600", "from": "Ana", "text": "hello"},
        {"id": 1, "type": "message", "date_unixtime": "1767225660", "from": "Ana", "text": "again"}]}  # fmt: skip
    path = tmp_path / "result.json"
    path.write_text(json.dumps(chat))
    with changes_nothing(service), refused(400, field="file") as info:
        run(service, FileSource(path), register=True)
    assert "a second message with the id '1'" in info.value.message


def test_importing_again_in_another_time_zone_finds_the_same_messages(service: MemoryService) -> None:
    run(service, whatsapp(FAMILY), register=True)
    again = service.import_conversations(whatsapp(FAMILY), import_options(tz="Asia/Tokyo"), "family")
    assert (again["stored"], again["already_imported"]) == (0, 6)


def test_a_forgotten_imported_message_comes_back_with_the_next_import(service: MemoryService) -> None:
    run(service, whatsapp(FAMILY), register=True)
    first = all_memories(service, "family")[0]
    service.memory_forget(memory_id=first["id"], user_id="family")
    summary = run(service, whatsapp(FAMILY))
    assert (summary["stored"], summary["already_imported"]) == (1, 5)


def test_the_library_imports_a_file_and_raises_the_refusal_with_its_details(
    service: MemoryService, tmp_path: Path
) -> None:
    from wontopos_mcp import InvalidRequestError, Memory

    path = tmp_path / "WhatsApp Chat with Family.txt"
    path.write_text(FAMILY, encoding="utf-8")
    mem = Memory(service=service)
    with pytest.raises(InvalidRequestError) as info:
        mem.import_conversations(path, user_id="family")
    assert info.value.details["field"] == "speaker"
    assert {e["name"] for e in info.value.details["unresolved"]} == {"Анна", "Bob", "さくら"}
    summary = mem.import_conversations(path, user_id="family", register=True, tz="Europe/Berlin", skip=["さくら"])
    assert summary["speakers"] == {"Bob": 2, "Анна": 3}
    assert mem.import_conversations(path, user_id="family", dry_run=True)["stored"] == 0
    with pytest.raises(InvalidRequestError) as info:
        mem.import_conversations(tmp_path / "missing.txt", user_id="family")
    assert info.value.details["field"] == "path"


def test_a_message_longer_than_a_memory_is_stored_in_pieces_and_counted_once_in_the_progress(
    service: MemoryService,
) -> None:
    long_text = "Ich plane die Reise nach Kasan sehr genau. " * 900  # about 39,000 characters
    text = f"05/03/2026, 18:02 - Bob: {long_text}\n05/03/2026, 18:03 - Bob: Gut.\n"
    seen: list[tuple[int, int]] = []
    summary = service.import_conversations(
        whatsapp(text), import_options(register=True), "family", progress=lambda d, t, c: seen.append((d, t))
    )
    assert summary["stored"] == 3  # the long message in two pieces, and "Gut."
    assert seen[-1] == (2, 2)  # messages, not pieces
    pieces = [m["content"] for m in all_memories(service, "family")][:2]
    assert all(len(p) <= 32_000 for p in pieces)
    assert " ".join(pieces) == long_text.strip()
