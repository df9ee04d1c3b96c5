"""Hostile text in every place a value reaches a LanceDB filter (STYLE "Do not": filter
strings from user input go through one escaping function; a test with quotes,
backslashes and Unicode in names).

Each odd speaker name is an ordinary person: registered, stored, searched, read, forgotten
and removed like ``Bob``, and it never matches anyone else. Store ids that are not ids
are refused before they reach a filter; memory ids, categories and skip ids that look
like SQL are plain text that matches nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support import all_memories, changes_nothing, refused, refused_by_every_store_call

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader
from wontopos_mcp.storage.adapter import Store

ODD_NAMES = [
    "Bob' OR '1'='1",
    "O'Brien",
    "back\\slash",
    "trailing\\",
    "100%",
    "%",
    "under_score",
    "_",
    '"quoted"',
    "a;DROP TABLE chunks;--",
    ")",
    "') OR speaker IS NOT NULL OR ('",
    "‘curly’ “quotes”",
    "''",
    "x' --",
    "*",
    "Bob\\' OR 1=1 --",
]


NEIGHBOURS = ("Bob", "Alice", "Bobby")
BEES = "I keep 3 bees in the garden."


@pytest.fixture(scope="module")
def crowd(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[tuple[MemoryService, dict[Any, str]]]:
    """One store where Bob, Alice, Bobby, every odd name and an untagged memory all say
    the same sentence, so only the speaker filter can tell them apart. Read-only tests
    share it; tests that change things build their own."""
    svc = MemoryService(Store(str(tmp_path_factory.mktemp("crowd") / "db")), ModelLoader.of(embedder))
    said: dict[Any, str] = {}
    for name in NEIGHBOURS + tuple(ODD_NAMES):
        assert svc.speaker_register(name)["speaker"] == name
        said[name] = svc.memory_add(BEES, speaker=name)["id"]
    said[None] = svc.memory_add(BEES)["id"]
    yield svc, said
    svc.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", ODD_NAMES)
def test_an_odd_name_reads_only_its_own_words(crowd: tuple[MemoryService, dict[Any, str]], name: str) -> None:
    svc, said = crowd
    assert svc.speaker_register(name)["status"] == "exists"
    hits = svc.memory_search("who keeps bees?", speaker=name, limit=20)
    assert (hits["speaker"], [(m["id"], m["speaker"]) for m in hits["memories"]]) == (name, [(said[name], name)])
    page = svc.by_speaker(name)
    assert [m["id"] for m in page["memories"]] == [said[name]]
    assert page["records_to_delete"] == 1
    assert {s["speaker"]: s["memories"] for s in svc.speakers_list()["speakers"]}[name] == 1
    again = svc.memory_add(BEES, speaker=name)
    assert (again["status"], again["duplicate_of"]) == ("duplicate", said[name])


@pytest.mark.slow
def test_odd_names_are_forgotten_and_removed_without_touching_anyone_else(service: MemoryService) -> None:
    said: dict[Any, str] = {}
    for name in NEIGHBOURS + tuple(ODD_NAMES):
        service.speaker_register(name)
        said[name] = service.memory_add(BEES, speaker=name)["id"]
    remaining = {memory_id: name for name, memory_id in said.items()}
    registered = set(said)
    for i, name in enumerate(ODD_NAMES):
        if i % 2:  # forget what they said; the registration stays
            assert service.memory_forget(speaker=name, confirm_records=1)["deleted"] == 1, name
            del remaining[said[name]]
        else:  # unregister them; what they said stays, untagged
            assert service.speaker_remove(name)["memories_untagged"] == 1, name
            registered.discard(name)
            remaining[said[name]] = None
        assert {m["id"]: m.get("speaker") for m in all_memories(service)} == remaining, name
        assert {s["speaker"] for s in service.speakers_list()["speakers"]} == registered, name
    for neighbour in NEIGHBOURS:
        assert [m["id"] for m in service.by_speaker(neighbour)["memories"]] == [said[neighbour]]


@pytest.mark.parametrize("name", ["Bob' OR 'a'='a", "') OR ('1'='1", "Bob%", "Bob_", "B%", "Bob\\"])
def test_an_unregistered_odd_name_is_simply_unknown(crowd: tuple[MemoryService, dict[Any, str]], name: str) -> None:
    service = crowd[0]
    with changes_nothing(service):
        with refused(404, speaker=name):
            service.memory_search("bees", speaker=name)
        with refused(404, speaker=name):
            service.by_speaker(name)
        with refused(404, speaker=name):
            service.memory_forget(speaker=name, confirm_records=0)
        with refused(404, speaker=name):
            service.speaker_remove(name)
        with refused(400, speaker=name):
            service.memory_add("Injected words.", speaker=name)


@pytest.mark.slow
@pytest.mark.parametrize("store_id", ["x' OR '1'='1", "default' --", "a;DROP TABLE registry", "default%", "de'fault"])
def test_a_store_id_that_is_not_an_id_is_refused_before_any_lookup(service: MemoryService, store_id: str) -> None:
    service.memory_add("The default store has this.")
    with changes_nothing(service):
        refused_by_every_store_call(service, store_id)


@pytest.mark.parametrize(
    "memory_id", ["' OR '1'='1", "x' OR memory_id IS NOT NULL OR 'x", "%", "*", "') OR ('a'='a", "\\'"]
)
def test_a_memory_id_that_looks_like_sql_is_404_with_that_id_and_deletes_nothing(
    crowd: tuple[MemoryService, dict[Any, str]], memory_id: str
) -> None:
    service = crowd[0]
    with changes_nothing(service):
        for call in (
            lambda: service.memory_get(memory_id),
            lambda: service.memory_forget(memory_id=memory_id),
            lambda: service.memory_supersede(memory_id, "Replaced by an injection."),
        ):
            with refused(404, memory_id=memory_id):
                call()


def test_a_real_id_with_sql_appended_is_not_that_memory(crowd: tuple[MemoryService, dict[Any, str]]) -> None:
    service, said = crowd
    real = said["Bob"]
    for suffix in ("' OR '1'='1", "' --", "%"):
        with changes_nothing(service), refused(404, memory_id=real + suffix):
            service.memory_forget(memory_id=real + suffix)


@pytest.mark.slow
def test_a_category_with_quotes_is_stored_and_filtered_as_plain_text(service: MemoryService) -> None:
    quoted = service.memory_add("Dad's recipes are in the red book.", category='it\'s "family"')["id"]
    plain = service.memory_add("The red book is on the shelf.", category="books")["id"]
    assert service.memory_get(quoted)["memory"]["category"] == 'it\'s "family"'
    assert [
        m["id"] for m in service.memory_search("red book", filters={"categories": ['it\'s "family"']})["memories"]
    ] == [quoted]
    for hostile in ("books' OR '1'='1", "') OR ('1'='1", "%", "book_"):
        assert service.memory_search("red book", filters={"categories": [hostile]})["memories"] == []
    assert [m["id"] for m in service.memory_search("red book", filters={"categories": ["books"]})["memories"]] == [
        plain
    ]


@pytest.mark.slow
def test_skip_ids_with_quotes_skip_only_the_ids_they_name(service: MemoryService) -> None:
    service.speaker_register("Bob")
    written = [service.memory_add(f"Bob's note {i}.", speaker="Bob")["id"] for i in range(6)]
    skip = [written[-1], "x') OR ('1'='1", "' OR memory_id IS NOT NULL --", "\\"]
    page = service.by_speaker("Bob", skip_ids=skip)
    assert {m["id"] for m in page["memories"]} == set(written[:-1])


@pytest.mark.slow
def test_a_conversation_id_with_quotes_is_matched_exactly(service: MemoryService) -> None:
    first = service.memory_add("OK.", speaker="me", conversation_id="c' OR '1'='1")
    same = service.memory_add("OK.", speaker="me", conversation_id="c' OR '1'='1")
    other = service.memory_add("OK.", speaker="me", conversation_id="c")
    assert (first["status"], same["status"]) == ("stored", "stored")
    assert other["status"] == "duplicate"
    assert service.memory_get(first["id"])["memory"]["conversation_id"] == "c' OR '1'='1"


@pytest.mark.slow
@pytest.mark.parametrize(
    "cursor", ["1 OR 1=1", "0; DROP TABLE chunks", "-1", "abc", "1e3", " 1", "²", "9" * 20, "0x10", "1.0"]
)
def test_a_garbage_cursor_is_400_naming_the_cursor(service: MemoryService, cursor: str) -> None:
    service.memory_add("Something to list.")
    with refused(400, field="cursor"):
        service.memory_list(cursor=cursor)


@pytest.mark.parametrize("before", ["2026-07-10T00:00:00Z' OR '1'='1", "0 OR 1=1", "2026-07-10; DROP TABLE chunks"])
def test_a_garbage_before_is_400_naming_it(service: MemoryService, before: str) -> None:
    with refused(400, field="before"):
        service.by_speaker("me", before=before)


@pytest.mark.parametrize("bad", ["2026-07-10' OR '1'='1", "1 OR 1=1"])
def test_a_garbage_date_filter_is_400_naming_it(service: MemoryService, bad: str) -> None:
    with refused(400, field="filters.event_from"):
        service.memory_search("x", filters={"event_from": bad})


def test_an_unknown_filter_key_that_looks_like_sql_is_named_and_refused(service: MemoryService) -> None:
    with refused(400) as info:
        service.memory_search("x", filters={"1=1 OR speaker": "x"})
    assert "1=1 OR speaker" in info.value.field


def test_a_query_that_looks_like_sql_is_just_a_query(crowd: tuple[MemoryService, dict[Any, str]]) -> None:
    service, said = crowd
    for query in ("' OR '1'='1", "Bob' OR '1'='1 bees", "\\'; DROP TABLE chunks; --"):
        found = service.memory_search(query, speaker="Bob", limit=5)["memories"]
        assert [m["id"] for m in found] == [said["Bob"]]
    assert len(all_memories(service)) == len(said)


def test_ids_are_uuids_so_no_stored_id_needs_escaping(service: MemoryService) -> None:
    memory_id = service.memory_add("Plain.")["id"]
    assert str(uuid.UUID(memory_id)) == memory_id


LONE = "tea \ud800 time"  # a lone surrogate, as JSON's "\ud800" decodes: no UTF-8 can hold it


def _lone_surrogate_calls(svc: MemoryService, memory_id: str) -> list[tuple[str, Any]]:
    """(the field named, a call with a lone surrogate there) for every text a caller sends."""
    return [
        ("content", lambda: svc.memory_add(LONE)),
        ("category", lambda: svc.memory_add("Bob likes tea", category=LONE)),
        ("conversation_id", lambda: svc.memory_add("Bob likes tea", conversation_id=LONE)),
        ("query", lambda: svc.memory_search(LONE)),
        ("query", lambda: svc.memory_recall(LONE)),
        ("filters.categories", lambda: svc.memory_search("tea", filters={"categories": [LONE]})),
        ("memory_id", lambda: svc.memory_get(LONE)),
        ("memory_id", lambda: svc.memory_forget(memory_id=LONE)),
        ("content", lambda: svc.memory_supersede(memory_id, LONE)),
        ("messages[1].content", lambda: svc.memory_add_messages(
            [{"role": "user", "content": "fine"}, {"role": "user", "content": LONE}])),
        ("skip_ids", lambda: svc.by_speaker("me", skip_ids=[LONE])),
    ]  # fmt: skip


@pytest.mark.slow
def test_a_lone_surrogate_in_any_text_is_400_naming_its_field_and_changes_nothing(service: MemoryService) -> None:
    """The core refuses it itself (the library passes raw strings; MCP and REST refuse it
    on the wire too): never the tokenizer's TypeError or the database's UnicodeEncodeError,
    whose message would carry the filter text."""
    stored = service.memory_add("Bob likes green tea")["id"]
    for field, call in _lone_surrogate_calls(service, stored):
        with changes_nothing(service), refused(400, field=field) as info:
            call()
        assert "lone surrogate" in info.value.message, field
        assert "user_id" not in info.value.message, field
