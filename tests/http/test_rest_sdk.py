"""The REST face driven by the official ``wontopos`` SDK (2.2.48), unchanged, pointed at a
local server: real uvicorn on a loopback port, a real service on LanceDB under a temporary
folder, the session's real model. Errors must arrive as the SDK's typed exceptions with
the fields agents branch on.

One server serves the whole module (with an API key and a speaker limit of 3); each test
works in stores of its own, which nothing crosses.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import wontopos
from support import KEY, served

from wontopos_mcp.http.rest import API_PREFIX as API

SPEAKER_LIMIT = 3
_ids = itertools.count()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Any]:
    with served(tmp_path_factory.mktemp("rest-sdk"), embedder, api_key=KEY, speaker_limit=SPEAKER_LIMIT) as live:
        yield live


@pytest.fixture
def mem(live: Any) -> Iterator[wontopos.Client]:
    with wontopos.Client(api_key=KEY, base_url=live.url, deadline=60) as client:
        yield client


@pytest.fixture
def store(mem: wontopos.Client) -> str:
    """A fresh store for one test (ids without '-' or '.', so the SDK has nothing to warn about)."""
    user_id = f"store_{next(_ids)}"
    assert mem.create_store(user_id) == {"user_id": user_id, "status": "created"}
    return user_id


# --- the SDK's own speaker example ---------------------------------------------------------------


@pytest.mark.slow
def test_the_sdks_speaker_example_works_unchanged(mem: wontopos.Client, store: str) -> None:
    registered = mem.add_speaker("Bob", user_id=store)
    assert registered["status"] == "registered"
    assert registered["speaker"] == "Bob"
    bobs = mem.add("Bob said the deadline moved to Tuesday", user_id=store, speaker="Bob")
    assert bobs["status"] == "stored"
    assert bobs["speaker"] == "Bob"
    mine = mem.add("I promised the summary by Friday", user_id=store, speaker="me", conversation_id="standup-0412")
    assert mine["status"] == "stored"
    assert mine["speaker"] == "me"
    mem.add("The office is closed on public holidays", user_id=store)

    hits = mem.search("what did Bob say about the deadline?", user_id=store, speaker="Bob")
    assert [h["id"] for h in hits] == [bobs["id"]]
    assert hits[0]["speaker"] == "Bob"
    assert 0 <= hits[0]["similarity"] <= 1
    everything = mem.search("deadline summary office", user_id=store)
    assert {h["id"] for h in everything} >= {bobs["id"], mine["id"]}

    listed = mem.list_speakers(user_id=store)
    assert [(s["speaker"], s["memories"]) for s in listed["speakers"]] == [("Bob", 1)]
    assert listed["limit"] == SPEAKER_LIMIT

    removed = mem.remove_speaker("Bob", user_id=store)
    assert removed == {"user_id": store, "speaker": "Bob", "status": "removed", "memories_untagged": 1}
    assert "speaker" not in mem.get(store, bobs["id"])
    assert mem.list_speakers(user_id=store)["speakers"] == []


@pytest.mark.slow
def test_add_speaker_names_the_look_alikes_and_refuses_an_invisible_character(mem: wontopos.Client, store: str) -> None:
    mem.add_speaker("Bob", user_id=store)
    alike = mem.add_speaker("\u0412\u043eb", user_id=store)  # Cyrillic Во, Latin b
    assert (alike["status"], alike["similar_to"]) == ("registered", ["Bob"])
    with pytest.raises(wontopos.BadRequestError) as hidden:
        mem.add_speaker("Bo\u200bb", user_id=store)
    assert hidden.value.details == {"field": "speaker", "speaker": "Bo\u200bb"}
    assert mem.list_speakers(user_id=store)["count"] == 2


@pytest.mark.slow
def test_search_answers_what_the_sdk_reads_and_never_another_speakers_words(mem: wontopos.Client, store: str) -> None:
    mem.add_speaker("Ana", user_id=store)
    mem.add_speaker("Ben", user_id=store)
    ana = mem.add("Ana keeps bees on the roof", user_id=store, speaker="Ana")
    mem.add("Ben keeps bees on the roof too", user_id=store, speaker="Ben")
    full = mem.search_full("who keeps bees?", user_id=store, speaker="Ana", limit=5)
    assert [m["id"] for m in full["memories"]] == [ana["id"]]
    assert full["self_memories"] == []
    assert full["images"] == []
    assert full["speaker"] == "Ana"
    assert full["user_id"] == store
    # The hosted service's options are accepted when off, and refused when asked for.
    assert len(mem.search("bees", user_id=store, verify=0, max_images=0)) == 2
    with pytest.raises(wontopos.BadRequestError) as refused:
        mem.search("bees", user_id=store, verify=2)
    assert refused.value.details["field"] == "verify"


@pytest.mark.slow
def test_by_speaker_pages_with_before_and_skip_ids_return_every_memory_once(mem: wontopos.Client, store: str) -> None:
    mem.add_speaker("Chen", user_id=store)
    facts = [
        "Chen moved the standup to nine",
        "Chen owns the billing migration",
        "Chen prefers tea to coffee",
        "Chen is on leave the first week of May",
        "Chen reviewed the onboarding guide",
        "Chen's team ships on Thursdays",
        "Chen asked for a bigger monitor",
    ]
    ids = {mem.add(text, user_id=store, speaker="Chen")["id"] for text in facts}
    mem.add("Somebody else entirely said this", user_id=store)
    seen: list[str] = []
    before, skip = None, None
    for _ in range(5):
        page = mem.by_speaker("Chen", user_id=store, limit=5, before=before, skip_ids=skip)
        seen += [m["id"] for m in page["memories"]]
        assert page["records_to_delete"] == page["points_to_delete"] == page["chunks"] >= len(facts)
        if not page["has_more"]:
            assert page["next_before"] is None
            assert page["next_skip_ids"] == []
            break
        before, skip = page["next_before"], page["next_skip_ids"]
    assert sorted(seen) == sorted(ids)


# --- stores and memories --------------------------------------------------------------------------


@pytest.mark.slow
def test_stores_are_created_listed_and_deleted(mem: wontopos.Client) -> None:
    user_id = f"garden_{next(_ids)}"
    assert mem.create_store(user_id)["status"] == "created"
    assert mem.create_store(user_id)["status"] == "exists"
    listed = {s["user_id"]: s for s in mem.list_stores()}
    assert "default" in listed
    assert user_id in listed
    assert listed[user_id]["created_at"].endswith("Z")
    assert listed[user_id]["memories"] == 0
    mem.add("The shed key is under the pot.", user_id=user_id)
    assert {s["user_id"]: s for s in mem.list_stores()}[user_id]["memories"] == 1  # the REST answer carries it too
    assert mem.ping() is True
    assert mem.delete_store(user_id) == {"user_id": user_id, "status": "deleted"}
    assert user_id not in {s["user_id"] for s in mem.list_stores()}
    with pytest.raises(wontopos.NotFoundError) as missing:
        mem.add("anything", user_id=user_id)
    assert missing.value.details["user_id"] == user_id
    assert missing.value.type == "not_found_error"


@pytest.mark.slow
def test_get_list_update_delete_and_delete_all(mem: wontopos.Client, store: str) -> None:
    mem.add_speaker("Dana", user_id=store)
    first = mem.add("Dana's flight lands at 10 pm", user_id=store, speaker="Dana", category="travel")
    other = mem.add("The hotel has no parking", user_id=store)
    memory = mem.get(store, first["id"])
    assert memory["content"] == "Dana's flight lands at 10 pm"
    assert memory["category"] == "travel"
    assert memory["is_superseded"] is False
    assert mem.get(memory_id=first["id"], user_id=store)["id"] == first["id"]

    updated = mem.update(first["id"], "Dana's flight lands at 11 pm", user_id=store)
    assert updated["status"] == "stored"
    assert updated["superseded"] == first["id"]
    old = mem.get(store, first["id"])
    assert old["is_superseded"] is True
    assert old["superseded_by"] == updated["id"]
    assert mem.get(store, updated["id"])["speaker"] == "Dana"

    page = mem.list_memories(store, limit=2)
    assert page["count"] == 2
    assert page["next_cursor"] is not None
    assert [m["id"] for m in mem.export_memories(store)] == [first["id"], other["id"], updated["id"]]

    assert mem.delete(store, other["id"]) == {"user_id": store, "status": "deleted", "deleted": 1}
    with pytest.raises(wontopos.NotFoundError) as gone:
        mem.get(store, other["id"])
    assert gone.value.details["memory_id"] == other["id"]

    erased = mem.delete_all(store)
    assert erased == {"user_id": store, "status": "deleted", "deleted": 2}
    assert mem.list_memories(store)["memories"] == []
    # The store and its speakers stay.
    assert [s["speaker"] for s in mem.list_speakers(user_id=store)["speakers"]] == ["Dana"]


def test_add_turn_and_recall(mem: wontopos.Client, store: str) -> None:
    turn = mem.add_turn("I moved to Lisbon last spring", "Noted: you live in Lisbon now", user_id=store)
    results = turn["results"]
    assert [r["status"] for r in results] == ["stored", "stored"]
    assert "speaker" not in results[0]
    assert results[1]["speaker"] == "me"
    only_user = mem.add_turn("My sister is called Marta", user_id=store)
    assert len(only_user["results"]) == 1

    recalled = mem.recall("where do I live?", user_id=store, limit=5, context_limit=4)
    assert "Lisbon" in recalled["long_term"]["memories"][0]["content"]
    turns = recalled["short_term"]["turns"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    around = recalled["context"]["around_top_memory"]
    assert [line for line in around if line.startswith("[match] ")] == [
        "[match] "
        + ("[me] " if recalled["long_term"]["memories"][0].get("speaker") == "me" else "")
        + recalled["long_term"]["memories"][0]["content"]
    ]


# --- errors as the SDK's typed exceptions --------------------------------------------------------


@pytest.mark.slow
def test_errors_arrive_as_the_sdks_typed_exceptions_with_their_fields(mem: wontopos.Client, store: str) -> None:
    for name in ("P1", "P2", "P3"):
        mem.add_speaker(name, user_id=store)
    with pytest.raises(wontopos.BadRequestError) as limit:
        mem.add_speaker("P4", user_id=store)
    assert limit.value.status == 400
    assert limit.value.type == "invalid_request_error"
    assert limit.value.details["speaker_limit"] == SPEAKER_LIMIT

    with pytest.raises(wontopos.NotFoundError) as unknown:
        mem.search("anything", user_id=store, speaker="Nobody")
    assert unknown.value.details["speaker"] == "Nobody"

    with pytest.raises(wontopos.BadRequestError) as unregistered:
        mem.add("Carol says hi", user_id=store, speaker="Carol")
    assert unregistered.value.details == {"field": "metadata.speaker", "speaker": "Carol"}

    with pytest.raises(wontopos.BadRequestError) as blank:
        mem.update("", "new text", user_id=store)
    assert blank.value.details["field"] == "old_memory_id"

    with pytest.raises(wontopos.BadRequestError) as reserved:
        mem.add_speaker("Me", user_id=store)
    assert reserved.value.details["field"] == "speaker"

    collide = f"team_{next(_ids)}"
    mem.create_store(collide)
    with pytest.raises(wontopos.ConflictError) as conflict:
        mem.create_store(collide.replace("_", "-"))
    assert conflict.value.conflicts_with == collide
    assert conflict.value.details["field"] == "user_id"

    old = mem.add("The kickoff is at 9", user_id=store)["id"]
    mem.update(old, "The kickoff is at 10", user_id=store)
    with pytest.raises(wontopos.ConflictError) as stale:
        mem.update(old, "The kickoff is at 11", user_id=store)
    assert stale.value.details["field"] == "old_memory_id"
    assert stale.value.details["memory_id"] == old

    with pytest.raises(wontopos.AuthenticationError):
        with wontopos.Client(api_key="not-the-key", base_url=mem._base) as stranger:
            stranger.list_stores()


def test_unknown_metadata_is_dropped_and_listed(mem: wontopos.Client, store: str) -> None:
    answer = mem.add("The printer is on the second floor", user_id=store, metadata={"room": "2F", "category": "office"})
    assert answer["status"] == "stored"
    assert answer["ignored"] == ["room"]
    assert mem.get(store, answer["id"])["category"] == "office"


# --- idempotency -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_idempotent_retry_stores_once_and_another_body_under_the_key_is_422(
    mem: wontopos.Client, store: str
) -> None:
    first = mem.add("Invoice 1042 was paid on 3 March", user_id=store, idempotency_key="import:row-1042")
    again = mem.add("Invoice 1042 was paid on 3 March", user_id=store, idempotency_key="import:row-1042")
    assert first["status"] == "stored"
    assert "replayed" not in first
    assert again["replayed"] is True
    assert again["id"] == first["id"]
    assert mem.list_memories(store)["count"] == 1
    with pytest.raises(wontopos.BadRequestError) as reused:
        mem.add("Invoice 1043 was paid on 4 March", user_id=store, idempotency_key="import:row-1042")
    assert reused.value.status == 422
    assert reused.value.details["field"] == "Idempotency-Key"
    turn = mem.add_turn("hello there", "hi!", user_id=store, idempotency_key="turn-1")
    assert mem.add_turn("hello there", "hi!", user_id=store, idempotency_key="turn-1") == {**turn, "replayed": True}


@pytest.mark.slow
def test_add_bulk_cuts_a_text_into_memories_stored_once(mem: wontopos.Client, store: str) -> None:
    text = (
        "The kitchen renovation starts on 2 June.\n\n"
        "The plumber comes on Mondays and Thursdays.\n\n"
        "The new fridge is delivered in the second week."
    )
    first = mem.add_bulk(text, store, category="house", idempotency_key="bulk:house-notes")
    assert first["status"] == "stored"
    assert first["count"] == len(first["ids"]) >= 1
    assert first["duplicates"] == 0
    again = mem.add_bulk(text, store, category="house", idempotency_key="bulk:house-notes")
    assert again == {**first, "replayed": True}
    stored = mem.export_memories(store)
    assert sorted(m["id"] for m in stored) == sorted(first["ids"])
    assert {m["category"] for m in stored} == {"house"}
    with pytest.raises(wontopos.BadRequestError) as bad:
        mem.add_bulk("more", store, timestamp="next tuesday")
    assert bad.value.details["field"] == "timestamp"
    with pytest.raises(wontopos.BadRequestError) as future:
        mem.add_bulk("The launch code is orange.", store, timestamp="2099-01-01T00:00:00Z")
    assert future.value.details["field"] == "timestamp"
    back = mem.add_bulk("The old launch code was green.", store, timestamp="2020-01-01")
    assert mem.get(store, back["ids"][0])["created_at"] == "2020-01-01T00:00:00.000000Z"
    assert sorted(m["id"] for m in mem.export_memories(store)) == sorted(first["ids"] + back["ids"])


# --- the store's own state: stats, history, lineage, revisions ------------------------------------


@pytest.mark.slow
def test_the_sdks_store_state_calls_see_a_superseded_memory_and_the_turns_recall_reads(
    mem: wontopos.Client, store: str
) -> None:
    first = mem.add("Bob's flight lands at 8. It is gate four.", user_id=store)["id"]  # two records
    second = mem.update(first, "Bob's flight lands at 9.", user_id=store)["id"]
    mem.add_turn("Where does Bob land?", "At gate four, at 9.", user_id=store)

    assert mem.stats(store) == {"user_id": store, "total_memories": 4, "short_term_turns": 2}
    lineage = mem.lineage(store, first)
    assert [(v["id"], v["is_current"]) for v in lineage["versions"]] == [(first, False), (second, True)]
    assert [v["id"] for v in mem.lineage(store, second)["versions"]] == [second]
    counts = mem.revisions(store)
    assert (counts["revised"], counts["unrevised"], counts["total"]) == (1, 3, 4)
    revised = mem.revisions(store, include="revised", limit=5)
    assert [m["id"] for m in revised["memories"]] == [first]
    assert revised["has_more"] is False

    turns = mem.history(store)
    assert [(t["role"], t["content"]) for t in turns] == [
        ("user", "Where does Bob land?"), ("assistant", "At gate four, at 9."),
    ]  # fmt: skip
    recalled = mem.recall("Bob's flight", user_id=store)["short_term"]["turns"]
    assert [t["content"] for t in turns] == [t["content"] for t in recalled]


@pytest.mark.slow
def test_revision_pages_walk_through_the_sdk_with_its_cursor(mem: wontopos.Client, store: str) -> None:
    mem.add_bulk("\n\n".join(f"Fact number {i} is true." for i in range(12)), store)
    seen: list[str] = []
    before = skip = None
    while True:
        page = mem.revisions(store, include="unrevised", limit=5, before=before, skip_ids=skip)
        seen += [m["id"] for m in page["memories"]]
        if not page["has_more"]:
            break
        before, skip = page["next_before"], page["next_skip_ids"]
    assert len(seen) == len(set(seen)) == 12


def test_the_sdks_store_state_calls_refuse_as_spec_says(live: Any, mem: wontopos.Client, store: str) -> None:
    with pytest.raises(wontopos.NotFoundError) as unknown:
        mem.lineage(store, "9b2d8c1e-0000-4000-8000-000000000000")
    assert unknown.value.details["field"] == "memory_id"
    for call in (lambda: mem.stats("nobody"), lambda: mem.history("nobody"), lambda: mem.revisions("nobody")):
        with pytest.raises(wontopos.NotFoundError) as missing:
            call()
        assert missing.value.details["field"] == "user_id"
    with httpx.Client(base_url=live.url, headers={"X-API-Key": KEY}) as http:
        for body, field in [
            ({"user_id": store, "include": "revised", "limit": 4}, "limit"),
            ({"user_id": store, "include": "everything"}, "include"),
            ({"user_id": store, "before": "2026-01-01"}, "before"),
        ]:
            answer = http.post(f"{API}/won/revisions", json=body)
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"]["field"] == field
        answer = http.post(f"{API}/memory/lineage", json={"user_id": store})
        assert (answer.status_code, answer.json()["error"]["field"]) == (400, "memory_id")


# --- what this server does not serve -------------------------------------------------------------


def test_a_hosted_only_endpoint_is_501_naming_it(mem: wontopos.Client) -> None:
    with pytest.raises(wontopos.ServerError) as refused:
        mem.list_models()
    assert refused.value.status == 501
    assert refused.value.type == "not_implemented_error"
    assert refused.value.details["endpoint"] == "models"


# A well-typed value for each required core parameter: the others are given, so the one left
# out is the only thing wrong (a missing field is refused before anything is looked up).
WELL_TYPED = {"content": "Bob likes tea", "query": "tea", "speaker": "Bob", "new_name": "Robert", "into": "Bob",
              "confirm_records": 0, "memory_id": "m-1", "user_id": "x"}  # fmt: skip


def _without_required() -> list[tuple[Any, str, str]]:
    """(endpoint, the required field as REST names it, how it is left out) for every route
    of the table whose core call needs a field the body may leave out."""
    from wontopos_mcp.http.rest import ENDPOINTS

    cases = []
    for endpoint in ENDPOINTS:
        rest_name = {core: rest for rest, core in endpoint.names.items()}
        for core in endpoint.required:
            if core != "user_id" or endpoint.name == "store_delete":
                cases += [(endpoint, rest_name.get(core, core), how) for how in ("absent", "null")]
    return cases


@pytest.mark.slow
@pytest.mark.parametrize(
    ("endpoint", "name", "how"), _without_required(), ids=lambda x: x if isinstance(x, str) else f"{x.method} {x.path}"
)
def test_a_required_field_left_out_or_null_is_400_naming_it(
    live: Any, mem: wontopos.Client, store: str, endpoint: Any, name: str, how: str
) -> None:
    """Every required field, as the caller names it, absent or null: a 400 naming it
    before anything is looked up, never the core called without it (a 500)."""
    mem.add_speaker("Bob", user_id=store)
    rest_name = {core: rest for rest, core in endpoint.names.items()}
    given = {"user_id": store, **{rest_name.get(core, core): WELL_TYPED[core] for core in endpoint.required}}
    body = {key: value for key, value in given.items() if key != name}
    if how == "null":
        body[name] = None
    before = mem.list_memories(user_id=store, limit=100)["memories"]
    with httpx.Client(base_url=live.url, headers={"X-API-Key": KEY}) as http:
        answer = http.request(endpoint.method, API + endpoint.path, json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["field"] == name
    assert mem.list_memories(user_id=store, limit=100)["memories"] == before
    assert [s["speaker"] for s in mem.list_speakers(user_id=store)["speakers"]] == ["Bob"]


@pytest.mark.slow
def test_sdk_calls_with_a_none_argument_are_400_not_500(mem: wontopos.Client, store: str) -> None:
    for call, field in [
        (lambda: mem.add(None, user_id=store), "content"),
        (lambda: mem.search(None, user_id=store), "query"),
        (lambda: mem.add_speaker(None, user_id=store), "speaker"),
        (lambda: mem.recall(None, user_id=store), "query"),
        (lambda: mem.add_bulk(None, user_id=store), "content"),
        (lambda: mem.remove_speaker(None, user_id=store), "speaker"),
    ]:
        with pytest.raises(wontopos.BadRequestError) as refused:
            call()
        assert refused.value.details["field"] == field
