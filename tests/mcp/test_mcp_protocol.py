"""The MCP face as clients see it: the SDK's in-memory ``Client`` (both the modern
protocol and the ``initialize`` handshake today's hosts speak) against a real service on
a fresh LanceDB with the real model. Every answer, success or refusal, is checked against
the output schema its tool declares (see ``support.Session``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from mcp import Client
from support import (
    DESTRUCTIVE,
    READ_ONLY,
    TOOLS,
    Session,
    mcp_session,
    open_loading_service,
    open_service,
    settings_for,
)

from wontopos_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["auto", "legacy"])
async def mcp(request, service) -> AsyncIterator[Session]:
    async with mcp_session(service, request.param) as session:
        yield session


async def _register(mcp: Session, *names: str, user_id: str | None = None) -> None:
    for name in names:
        args: dict[str, Any] = {"speaker": name}
        if user_id is not None:
            args["user_id"] = user_id
        await mcp.ok("speaker_register", **args)


# --- the surface ---------------------------------------------------------------------------


async def test_tools_list_names_exactly_the_contract_tools(mcp: Session) -> None:
    assert set(mcp.tools) == TOOLS


@pytest.mark.slow
async def test_reads_are_marked_read_only_and_deletes_destructive(mcp: Session) -> None:
    for name, tool in mcp.tools.items():
        hints = tool.annotations
        assert hints is not None, name
        assert hints.read_only_hint is (name in READ_ONLY), name
        if name not in READ_ONLY:
            assert hints.destructive_hint is (name in DESTRUCTIVE), name
        assert hints.open_world_hint is False, name


async def test_every_output_schema_is_an_object_offering_the_answer_or_the_error(mcp: Session) -> None:
    for name, tool in mcp.tools.items():
        schema = tool.output_schema
        assert schema["type"] == "object", name
        arms = [arm["$ref"].rsplit("/", 1)[-1] for arm in schema["anyOf"]]
        assert arms[-1] == "ErrorEnvelope", (name, arms)
        assert len(arms) >= 2, (name, arms)
    add_arms = [arm["$ref"] for arm in mcp.tools["memory_add"].output_schema["anyOf"]]
    assert add_arms == ["#/$defs/MemoryAddAnswer", "#/$defs/MemoryDuplicateAnswer", "#/$defs/ErrorEnvelope"]


async def test_optional_record_fields_are_not_required_and_never_null(mcp: Session) -> None:
    record = mcp.tools["memory_get"].output_schema["$defs"]["MemoryRecord"]
    optional = {"speaker", "similarity", "event_date", "conversation_id", "superseded_by"}
    assert optional.isdisjoint(record["required"])
    assert {"id", "content", "category", "importance", "time_bucket", "created_at", "is_superseded"} <= set(
        record["required"]
    )
    for name in optional:
        prop = record["properties"][name]
        assert "anyOf" not in prop, (name, prop)
        assert prop["type"] != "null", (name, prop)
        assert "default" not in prop, (name, prop)


async def test_paging_cursors_are_always_present_and_may_be_null(mcp: Session) -> None:
    page = mcp.tools["by_speaker"].output_schema["$defs"]["BySpeakerAnswer"]
    assert "next_before" in page["required"]
    assert "next_skip_ids" in page["required"]
    assert {"type": "null"} in page["properties"]["next_before"]["anyOf"]
    listing = mcp.tools["memory_list"].output_schema["$defs"]["MemoryListAnswer"]
    assert "next_cursor" in listing["required"]


async def test_input_schemas_carry_the_contract_parameters_and_ranges(mcp: Session) -> None:
    def props(name: str) -> dict[str, Any]:
        return mcp.tools[name].input_schema.get("properties", {})

    for name in TOOLS - {"stores_list"}:
        assert "user_id" in props(name), name
    assert props("stores_list") == {}
    assert mcp.tools["store_delete"].input_schema["required"] == ["user_id"]
    for name in TOOLS - {"store_delete"}:
        assert "user_id" not in mcp.tools[name].input_schema.get("required", []), name
    for name, low, high, default in [
        ("memory_search", 1, 20, 10),
        ("by_speaker", 1, 20, 20),
        ("memory_list", 1, 500, 100),
        ("memory_recall", 1, 20, 10),
    ]:
        limit = props(name)["limit"]
        assert (limit["type"], limit["minimum"], limit["maximum"], limit["default"]) == ("integer", low, high, default)
    assert set(props("memory_add")) == {"content", "speaker", "category", "event_date", "conversation_id", "user_id"}
    assert set(props("memory_search")) == {
        "query", "speaker", "limit", "filters", "include_superseded", "as_of", "max_chars", "user_id",
    }  # fmt: skip
    budget = props("memory_search")["max_chars"]
    assert (budget["type"], budget["minimum"], budget["maximum"]) == ("integer", 1, 200_000)
    assert props("memory_search")["filters"]["type"] == "object"
    superseded = props("memory_search")["include_superseded"]
    assert (superseded["type"], superseded["default"]) == ("boolean", False)
    assert set(props("by_speaker")) == {"speaker", "limit", "before", "skip_ids", "user_id"}
    assert (props("by_speaker")["skip_ids"]["type"], props("by_speaker")["skip_ids"]["items"]) == (
        "array",
        {"type": "string"},
    )
    assert props("memory_forget")["confirm_records"]["type"] == "integer"
    assert set(props("memory_forget")) == {"memory_id", "speaker", "confirm_records", "user_id"}
    assert set(props("memory_supersede")) == {"memory_id", "content", "user_id"}
    assert set(props("memory_list")) == {"limit", "cursor", "speaker", "user_id"}
    assert set(props("speaker_rename")) == {"speaker", "new_name", "user_id"}
    assert mcp.tools["speaker_rename"].input_schema["required"] == ["speaker", "new_name"]
    assert set(props("speaker_merge")) == {"speaker", "into", "confirm_records", "user_id"}
    assert mcp.tools["speaker_merge"].input_schema["required"] == ["speaker", "into", "confirm_records"]
    merge_confirm = props("speaker_merge")["confirm_records"]
    assert (merge_confirm["type"], merge_confirm["minimum"]) == ("integer", 0)
    assert set(props("memory_recall")) == {"query", "limit", "context_limit", "as_of", "max_chars", "user_id"}
    context_limit = props("memory_recall")["context_limit"]
    assert (context_limit["minimum"], context_limit["maximum"], context_limit["default"]) == (0, 20, 10)
    assert set(props("memory_add_messages")) == {"messages", "conversation_id", "user_id"}
    assert mcp.tools["memory_add_messages"].input_schema["required"] == ["messages"]
    messages = props("memory_add_messages")["messages"]
    assert (messages["type"], messages["minItems"], messages["maxItems"]) == ("array", 1, 100)
    item = messages["items"]
    assert item["required"] == ["role", "content"]
    assert item["additionalProperties"] is False
    assert item["properties"]["role"]["enum"] == ["user", "assistant", "system", "tool"]
    assert set(item["properties"]) == {"role", "name", "content"}


async def test_descriptions_tell_a_model_when_to_call_and_the_rules(mcp: Session) -> None:
    for name, tool in mcp.tools.items():
        first = tool.description.splitlines()[0]
        assert "call it" in first, (name, first)
    add = mcp.tools["memory_add"].description
    assert "speaker_register" in add
    assert '"me"' in add
    assert '"duplicate"' in add
    assert "status" in add
    assert "never register" in mcp.tools["speaker_register"].description


async def test_server_instructions_explain_stores_and_speakers(mcp: Session) -> None:
    text = mcp.client.instructions if mcp.client.instructions is not None else ""
    for needle in ("store_create", '"default"', "speaker_register", '"me"', '"duplicate"', "error.type"):
        assert needle in text, needle


# --- answers ----------------------------------------------------------------------------------


async def test_speaker_register_answers_registered_then_exists(mcp: Session) -> None:
    first = await mcp.ok("speaker_register", speaker="  Bob ")
    assert first["status"] == "registered"
    assert first["speaker"] == "Bob"
    assert first["user_id"] == "default"
    assert (first["count"], first["limit"]) == (1, 50)
    again = await mcp.ok("speaker_register", speaker="Bob")
    assert again["status"] == "exists"
    assert again["count"] == 1
    assert again["created_at"] == first["created_at"]
    listed = await mcp.ok("speakers_list")
    assert [s["speaker"] for s in listed["speakers"]] == ["Bob"]
    assert listed["count"] == 1


@pytest.mark.slow
async def test_search_with_speaker_returns_only_that_speakers_words(mcp: Session) -> None:
    await _register(mcp, "Bob", "Alice")
    bob = await mcp.ok("memory_add", content="The deadline moved to Tuesday.", speaker="Bob")
    assert bob["status"] == "stored"
    assert bob["speaker"] == "Bob"
    assert bob["chunks"] == 1
    assert bob["id"]
    await mcp.ok("memory_add", content="The deadline moved to Friday.", speaker="Alice")
    mine = await mcp.ok("memory_add", content="I promised the summary by Friday.", speaker="me")
    untagged = await mcp.ok("memory_add", content="The office is closed on Mondays.")
    assert "speaker" not in untagged
    assert mine["speaker"] == "me"

    found = await mcp.ok("memory_search", query="when is the deadline?", speaker="Bob")
    assert found["speaker"] == "Bob"
    assert found["query"] == "when is the deadline?"
    assert [m["id"] for m in found["memories"]] == [bob["id"]]
    memory = found["memories"][0]
    assert memory["content"] == "The deadline moved to Tuesday."
    assert memory["speaker"] == "Bob"
    assert 0 <= memory["similarity"] <= 1
    assert memory["is_superseded"] is False

    everything = await mcp.ok("memory_search", query="deadline", limit=5)
    assert "speaker" not in everything
    assert len(everything["memories"]) == 4
    untagged_record = next(m for m in everything["memories"] if m["id"] == untagged["id"])
    assert "speaker" not in untagged_record
    assert "superseded_by" not in untagged_record


@pytest.mark.slow
async def test_notes_stored_one_by_one_are_not_a_conversation(mcp: Session) -> None:
    """The budget note before Bob's plants memory lends it nothing: Bob's own budget
    answer comes first (with store order as a conversation, the plants memory won)."""
    await _register(mcp, "Bob")
    await mcp.ok("memory_add", content="The Q3 budget is due on Friday.")
    await mcp.ok("memory_add", content="I never water the plants before 9am.", speaker="Bob")
    await mcp.ok("memory_add", content="My sister lives in Porto.", speaker="Bob")
    budget = await mcp.ok("memory_add", content="The Q3 budget review moved to the 14th.", speaker="Bob")
    found = await mcp.ok("memory_search", query="when is the budget due?", speaker="Bob")
    assert [m["id"] for m in found["memories"]][0] == budget["id"]
    assert {m["speaker"] for m in found["memories"]} == {"Bob"}
    assert len(found["memories"]) == 3


async def test_restating_a_memory_answers_duplicate_and_stores_nothing(mcp: Session) -> None:
    await _register(mcp, "Bob")
    first = await mcp.ok("memory_add", content="Bob is allergic to peanuts.", speaker="Bob")
    again = await mcp.ok("memory_add", content="bob is allergic to peanuts", speaker="Bob")
    assert again["status"] == "duplicate"
    assert again["id"] == ""
    assert again["duplicate_of"] == first["id"]
    assert again["note"]
    listed = await mcp.ok("memory_list")
    assert listed["count"] == 1
    assert listed["next_cursor"] is None


@pytest.mark.slow
async def test_memory_add_keeps_event_date_category_and_conversation(mcp: Session) -> None:
    added = await mcp.ok(
        "memory_add",
        content="We shipped version two.",
        category="milestone",
        event_date="2026-07-10",
        conversation_id="standup-0412",
    )
    memory = (await mcp.ok("memory_get", memory_id=added["id"]))["memory"]
    assert memory["category"] == "milestone"
    assert memory["time_bucket"] == "2026-07"
    assert memory["event_date"].startswith("2026-07-10")
    assert memory["conversation_id"] == "standup-0412"


@pytest.mark.slow
async def test_by_speaker_pages_newest_first_and_forget_needs_the_current_count(mcp: Session) -> None:
    await _register(mcp, "Bob")
    ids = []
    for i in range(7):
        ids.append(
            (await mcp.ok("memory_add", content=f"Bob's note number {i} is about topic {i * 7}.", speaker="Bob"))["id"]
        )
    first = await mcp.ok("by_speaker", speaker="Bob", limit=5)
    assert first["returned"] == 5
    assert first["has_more"] is True
    assert first["next_before"]
    assert first["records_to_delete"] == first["chunks"] == first["points_to_delete"] >= 7
    second = await mcp.ok(
        "by_speaker", speaker="Bob", limit=5, before=first["next_before"], skip_ids=first["next_skip_ids"]
    )
    assert second["has_more"] is False
    assert second["next_before"] is None
    assert second["next_skip_ids"] == []
    walked = [m["id"] for m in first["memories"] + second["memories"]]
    assert walked == list(reversed(ids))

    wrong = await mcp.refused(
        "memory_forget",
        {"speaker": "Bob", "confirm_records": first["records_to_delete"] + 1},
        status=409,
        type="conflict_error",
    )
    assert wrong["records_to_delete"] == first["records_to_delete"]
    assert (await mcp.ok("memory_list"))["count"] == 7
    gone = await mcp.ok("memory_forget", speaker="Bob", confirm_records=first["records_to_delete"])
    assert gone == {"user_id": "default", "status": "deleted", "deleted": 7}
    assert (await mcp.ok("speakers_list"))["speakers"][0]["memories"] == 0


@pytest.mark.slow
async def test_get_list_supersede_and_forget_one_memory(mcp: Session) -> None:
    old = await mcp.ok("memory_add", content="The team meets on Fridays.", category="schedule")
    new = await mcp.ok("memory_supersede", memory_id=old["id"], content="The team meets on Thursdays.")
    assert new["status"] == "stored"
    assert new["superseded"] == old["id"]
    assert new["id"] != old["id"]
    previous = (await mcp.ok("memory_get", memory_id=old["id"]))["memory"]
    assert previous["is_superseded"] is True
    assert previous["superseded_by"] == new["id"]
    current = (await mcp.ok("memory_get", memory_id=new["id"]))["memory"]
    assert current["category"] == "schedule"
    assert current["is_superseded"] is False

    again = await mcp.refused(
        "memory_supersede", {"memory_id": old["id"], "content": "Wednesdays."}, status=409, type="conflict_error"
    )
    assert again["superseded_by"] == new["id"]

    found = await mcp.ok("memory_search", query="when does the team meet?")
    assert [m["id"] for m in found["memories"]] == [new["id"]]
    both = await mcp.ok("memory_search", query="when does the team meet?", include_superseded=True)
    assert {m["id"] for m in both["memories"]} == {old["id"], new["id"]}

    page = await mcp.ok("memory_list", limit=1)
    assert page["count"] == 1
    assert page["memories"][0]["id"] == old["id"]
    assert page["next_cursor"]
    rest = await mcp.ok("memory_list", limit=1, cursor=page["next_cursor"])
    assert rest["memories"][0]["id"] == new["id"]
    assert rest["next_cursor"] is None

    assert await mcp.ok("memory_forget", memory_id=new["id"]) == {
        "user_id": "default",
        "status": "deleted",
        "deleted": 1,
    }
    restored = (await mcp.ok("memory_get", memory_id=old["id"]))["memory"]
    assert restored["is_superseded"] is False
    assert "superseded_by" not in restored


async def test_speaker_remove_untags_the_memories_it_leaves(mcp: Session) -> None:
    await _register(mcp, "Bob")
    added = await mcp.ok("memory_add", content="Bob likes green tea.", speaker="Bob")
    removed = await mcp.ok("speaker_remove", speaker="Bob")
    assert removed == {"user_id": "default", "speaker": "Bob", "status": "removed", "memories_untagged": 1}
    memory = (await mcp.ok("memory_get", memory_id=added["id"]))["memory"]
    assert "speaker" not in memory
    assert (await mcp.ok("speakers_list"))["speakers"] == []


@pytest.mark.slow
async def test_stores_are_created_listed_isolated_and_deleted(mcp: Session) -> None:
    assert await mcp.ok("store_create", user_id="Alice") == {"user_id": "Alice", "status": "created"}
    assert (await mcp.ok("store_create", user_id="alice"))["status"] == "exists"
    assert (await mcp.ok("store_create"))["status"] == "exists"  # omitted: the default store
    stores = (await mcp.ok("stores_list"))["stores"]
    assert [s["user_id"] for s in stores] == ["default", "Alice"]

    await _register(mcp, "Bob", user_id="alice")
    await mcp.ok("memory_add", content="Alice's cat is called Miso.", speaker="Bob", user_id="alice")
    assert (await mcp.ok("memory_list"))["count"] == 0
    assert (await mcp.ok("memory_list", user_id="ALICE"))["count"] == 1
    await mcp.refused(
        "memory_search", {"query": "cat", "speaker": "Bob"}, status=404, type="not_found_error", field="speaker"
    )

    assert await mcp.ok("store_delete", user_id="alice") == {"user_id": "Alice", "status": "deleted"}
    await mcp.refused("memory_list", {"user_id": "alice"}, status=404, type="not_found_error")


@pytest.mark.slow
async def test_memory_add_messages_stores_each_message_under_its_speaker(mcp: Session) -> None:
    await _register(mcp, "Bob")
    answer = await mcp.ok(
        "memory_add_messages",
        messages=[
            {"role": "system", "content": "Meeting notes."},
            {"role": "user", "content": "Where do we meet?"},
            {"role": "assistant", "content": "At the library on Elm Street."},
            {"role": "user", "name": "Bob", "content": "I'll be ten minutes late."},
            {"role": "tool", "name": "maps", "content": "12 minutes away."},
        ],
        conversation_id="meet-1",
    )
    assert answer["user_id"] == "default"
    assert answer["conversation_id"] == "meet-1"
    results = answer["results"]
    assert [(r["status"], r.get("speaker")) for r in results] == [("stored", None), ("stored", "me"), ("stored", "Bob")]
    listed = (await mcp.ok("memory_list"))["memories"]
    assert [m["id"] for m in listed] == [r["id"] for r in results]
    assert {m["conversation_id"] for m in listed} == {"meet-1"}
    assert [m["id"] for m in (await mcp.ok("by_speaker", speaker="Bob"))["memories"]] == [results[2]["id"]]

    again = await mcp.ok(
        "memory_add_messages", messages=[{"role": "user", "name": "Bob", "content": "I'll be ten minutes late"}]
    )
    assert again["conversation_id"] not in ("", "meet-1")  # a fresh one
    assert again["results"][0]["status"] == "duplicate"
    assert again["results"][0]["duplicate_of"] == results[2]["id"]
    assert (await mcp.ok("memory_list"))["count"] == 3


@pytest.mark.slow
async def test_memory_recall_answers_turns_memories_and_the_lines_around_the_best(mcp: Session) -> None:
    await _register(mcp, "Bob")
    said = [
        {"role": "user", "content": "Are you free tonight?"},
        {"role": "user", "name": "Bob", "content": "Dinner is at 8 pm at the Thai place."},
        {"role": "assistant", "content": "I booked a table for four."},
    ]
    await mcp.ok("memory_add_messages", messages=said, conversation_id="dinner")
    await mcp.ok("memory_add", content="The car needs new tyres.")
    recalled = await mcp.ok("memory_recall", query="what time is dinner?", limit=5, context_limit=3)
    assert set(recalled) == {"user_id", "short_term", "long_term", "context"}
    searched = await mcp.ok("memory_search", query="what time is dinner?", limit=5)
    assert recalled["long_term"]["memories"] == searched["memories"]
    top = searched["memories"][0]
    assert top["conversation_id"] == "dinner"

    around = recalled["context"]["around_top_memory"]
    texts = ["Are you free tonight?", "[Bob] Dinner is at 8 pm at the Thai place.", "[me] I booked a table for four."]
    assert [line.split("] ", 1)[1] for line in around] == texts
    match = [line for line in around if line.startswith("[match] ")]
    assert len(match) == 1
    assert match[0].endswith(top["content"])
    at = around.index(match[0])
    assert all(line.startswith("[before] ") for line in around[:at])
    assert all(line.startswith("[after] ") for line in around[at + 1 :])

    turns = recalled["short_term"]["turns"]
    assert [(t["role"], t["content"], t.get("speaker")) for t in turns] == [
        ("user", "Are you free tonight?", None),
        ("user", "Dinner is at 8 pm at the Thai place.", "Bob"),
        ("assistant", "I booked a table for four.", "me"),
    ]
    assert all(t["timestamp"].endswith("Z") for t in turns)

    one = await mcp.ok("memory_recall", query="what time is dinner?", context_limit=1)
    assert one["context"]["around_top_memory"] == [f"[match] {match[0].split('] ', 1)[1]}"]
    assert [t["content"] for t in one["short_term"]["turns"]] == ["I booked a table for four."]
    none = await mcp.ok("memory_recall", query="what time is dinner?", context_limit=0)
    assert none["context"]["around_top_memory"] == []
    assert none["short_term"]["turns"] == []


# --- refusals the MCP face answers: 400, 404, 409 -------------------------------------------


async def test_storing_an_unregistered_speaker_is_400_naming_it_and_stores_nothing(mcp: Session) -> None:
    error = await mcp.refused(
        "memory_add", {"content": "Hi.", "speaker": "Bob"}, status=400, type="invalid_request_error", field="speaker"
    )
    assert error["speaker"] == "Bob"
    assert "speaker_register" in error["message"]
    assert (await mcp.ok("memory_list"))["count"] == 0


async def test_reserved_spellings_of_me_are_400(mcp: Session) -> None:
    await mcp.refused("speaker_register", {"speaker": "me"}, status=400, type="invalid_request_error", field="speaker")
    await mcp.refused("speaker_register", {"speaker": "Me"}, status=400, type="invalid_request_error", field="speaker")
    await mcp.refused(
        "memory_add", {"content": "x", "speaker": "ME"}, status=400, type="invalid_request_error", field="speaker"
    )
    await mcp.refused("speaker_remove", {"speaker": "me"}, status=400, type="invalid_request_error", field="speaker")


async def test_speaker_limit_is_400_with_speaker_limit(make_service) -> None:
    async with mcp_session(make_service(speaker_limit=2)) as mcp:
        await _register(mcp, "Ann", "Ben")
        error = await mcp.refused(
            "speaker_register", {"speaker": "Cid"}, status=400, type="invalid_request_error", field="speaker"
        )
        assert error["speaker_limit"] == 2
        assert (await mcp.ok("speaker_register", speaker="Ann"))["status"] == "exists"


async def test_bad_values_the_service_checks_are_400_naming_the_field(mcp: Session) -> None:
    await mcp.refused("memory_add", {"content": "   "}, status=400, type="invalid_request_error", field="content")
    error = await mcp.refused(
        "memory_add", {"content": "x" * 32_001}, status=400, type="invalid_request_error", field="content"
    )
    assert error["max_chars"] == 32_000
    await mcp.refused(
        "memory_add",
        {"content": "x", "event_date": "2026-07-10T10:00:00"},
        status=400,
        type="invalid_request_error",
        field="event_date",
    )
    await mcp.refused(
        "memory_search", {"query": "x", "filters": {"colour": "red"}}, status=400, type="invalid_request_error"
    )
    await mcp.refused("store_create", {"user_id": "-bad"}, status=400, type="invalid_request_error", field="user_id")
    await mcp.refused(
        "speaker_register", {"speaker": "Bo\nb"}, status=400, type="invalid_request_error", field="speaker"
    )
    await mcp.refused("memory_forget", {}, status=400, type="invalid_request_error")
    await mcp.refused("memory_forget", {"memory_id": "a", "speaker": "Bob"}, status=400, type="invalid_request_error")


async def test_unknown_store_speaker_and_memory_are_404(mcp: Session) -> None:
    error = await mcp.refused("speakers_list", {"user_id": "nobody"}, status=404, type="not_found_error")
    assert error["user_id"] == "nobody"
    assert "store_create" in error["message"]
    error = await mcp.refused("by_speaker", {"speaker": "Zed"}, status=404, type="not_found_error", field="speaker")
    assert error["speaker"] == "Zed"
    await mcp.refused("speaker_remove", {"speaker": "Zed"}, status=404, type="not_found_error")
    error = await mcp.refused("memory_get", {"memory_id": "no-such-id"}, status=404, type="not_found_error")
    assert error["memory_id"] == "no-such-id"
    await mcp.refused("memory_forget", {"memory_id": "no-such-id"}, status=404, type="not_found_error")
    await mcp.refused("store_delete", {"user_id": "nobody"}, status=404, type="not_found_error")


async def test_colliding_store_ids_are_409_with_conflicts_with(mcp: Session) -> None:
    await mcp.ok("store_create", user_id="alice-smith")
    error = await mcp.refused("store_create", {"user_id": "alice.smith"}, status=409, type="conflict_error")
    assert error["conflicts_with"] == "alice-smith"
    assert error["field"] == "user_id"


# --- names that look like code are just names ------------------------------------------------

TRICKY_NAMES = [
    "Bob' OR '1'='1",
    "back\\slash",
    "100%",
    "%",
    "_",
    "under_score",
    'say "hi"',
    "O'Brien",
    "null",
]


@pytest.mark.slow
async def test_injection_like_speaker_names_work_as_plain_names(mcp: Session) -> None:
    await _register(mcp, "Bob", *TRICKY_NAMES)
    ids = {}
    for i, name in enumerate(["Bob", *TRICKY_NAMES]):
        ids[name] = (
            await mcp.ok("memory_add", content=f"Harbour note {i}: the ferry leaves at {i + 6} am.", speaker=name)
        )["id"]
    listed = (await mcp.ok("speakers_list"))["speakers"]
    assert {s["speaker"]: s["memories"] for s in listed} == {name: 1 for name in ids}
    for name, memory_id in ids.items():
        found = await mcp.ok("memory_search", query="when does the ferry leave?", speaker=name)
        assert [m["id"] for m in found["memories"]] == [memory_id], name
        assert found["memories"][0]["speaker"] == name
        said = await mcp.ok("by_speaker", speaker=name)
        assert [m["id"] for m in said["memories"]] == [memory_id], name
    await mcp.refused("by_speaker", {"speaker": "' OR ''='"}, status=404, type="not_found_error", field="speaker")


async def test_a_store_named_null_is_a_name_not_an_omitted_argument(mcp: Session) -> None:
    assert (await mcp.ok("store_create", user_id="null"))["user_id"] == "null"
    await mcp.ok("memory_add", content="Only in the null store.", user_id="null")
    assert (await mcp.ok("memory_list", user_id="null"))["count"] == 1
    assert (await mcp.ok("memory_list"))["count"] == 0


# --- the model loads in the background -------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_initialize_and_tools_list_never_wait_for_the_model(tmp_path, gate, mode) -> None:
    service = open_loading_service(tmp_path, gate)
    try:
        with anyio.fail_after(10):
            async with Client(build_server(service), mode=mode) as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        assert not gate.event.is_set()
    finally:
        gate.event.set()
        service.close()


@pytest.mark.slow
async def test_while_the_model_loads_embedding_calls_answer_503_and_the_rest_answer(tmp_path, gate) -> None:
    service = open_loading_service(tmp_path, gate, model_wait=0.2)
    try:
        async with mcp_session(service) as mcp:
            with anyio.fail_after(30):
                await _register(mcp, "Bob")
                error = await mcp.refused(
                    "memory_add", {"content": "Bob said hi.", "speaker": "Bob"}, status=503, type="unavailable_error"
                )
                assert error["retry_after_ms"] > 0
                await mcp.refused("memory_search", {"query": "hi"}, status=503, type="unavailable_error")
                # Calls that need no embedding answer at once.
                assert (await mcp.ok("speakers_list"))["count"] == 1
                assert (await mcp.ok("by_speaker", speaker="Bob"))["memories"] == []
                assert (await mcp.ok("store_create", user_id="later"))["status"] == "created"
                assert [s["user_id"] for s in (await mcp.ok("stores_list"))["stores"]] == ["default", "later"]
                assert (await mcp.ok("memory_list"))["count"] == 0
                assert await mcp.ok("store_delete", user_id="later") == {"user_id": "later", "status": "deleted"}
                # An earlier check still wins over the model: the unregistered speaker's 400, no 503.
                await mcp.refused(
                    "memory_add", {"content": "x", "speaker": "Zed"}, status=400, type="invalid_request_error"
                )
                gate.event.set()
                while (result := await mcp.call("memory_add", {"content": "Bob said hi.", "speaker": "Bob"})).is_error:
                    assert result.structured_content["status"] == 503  # until the load finishes
                assert result.structured_content["status"] == "stored"
    finally:
        gate.event.set()
        service.close()


@pytest.mark.slow
async def test_a_call_waiting_for_the_model_reports_progress_to_a_caller_who_asked(tmp_path, gate) -> None:
    """A cold start: a write waits for the model (at most ``model_wait``), and a caller who
    sent a progressToken hears about once a second that the call is alive, then gets the
    answer; a call that needs no model reports nothing."""
    service = open_loading_service(tmp_path, gate, model_wait=4.0)
    heard: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        heard.append((value, total, message))

    try:
        async with Client(build_server(service)) as client:
            with anyio.fail_after(30):
                listed = await client.call_tool("speakers_list", {}, progress_callback=progress)
                assert not listed.is_error
                assert heard == []

                async def open_the_gate_later() -> None:
                    while len(heard) < 2:
                        await anyio.sleep(0.05)
                    gate.event.set()

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(open_the_gate_later)
                    added = await client.call_tool("memory_add", {"content": "Cold start."}, progress_callback=progress)
        assert added.structured_content["status"] == "stored"
        values = [value for value, _, _ in heard]
        assert len(values) >= 2
        assert values == sorted(values)
        assert 0.5 < values[0] < values[-1] < 4.0
        assert {(total, message) for _, total, message in heard} == {(4.0, "waiting for the embedding model to load")}
    finally:
        gate.event.set()
        service.close()


@pytest.mark.slow
async def test_by_default_a_call_waits_60_s_for_the_model_and_says_so_in_its_progress(tmp_path, gate) -> None:
    """A call waits at most 60 s for the model (issue 31: a busy machine's cold conversion
    took 19.7 s of the old 20): the first notification already gives it as the ``total``."""
    service = open_service(settings_for(tmp_path), models=gate.loader())
    assert service.model_wait == 60.0
    totals: list[float | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        totals.append(total)
        gate.event.set()

    try:
        async with Client(build_server(service)) as client:
            with anyio.fail_after(30):
                added = await client.call_tool("memory_add", {"content": "Cold start."}, progress_callback=progress)
        assert added.structured_content["status"] == "stored"
        assert totals[:1] == [60.0]
    finally:
        gate.event.set()
        service.close()


async def test_superseding_an_old_version_is_409_naming_memory_id(mcp: Session) -> None:
    old = (await mcp.ok("memory_add", content="The kickoff is at 9"))["id"]
    new = (await mcp.ok("memory_supersede", memory_id=old, content="The kickoff is at 10"))["id"]
    error = await mcp.refused(
        "memory_supersede", {"memory_id": old, "content": "The kickoff is at 11"}, status=409, type="conflict_error"
    )
    assert (error["field"], error["memory_id"], error["superseded_by"]) == ("memory_id", old, new)
