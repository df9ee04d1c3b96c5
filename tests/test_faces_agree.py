"""The same call through all three faces answers the same, refusals included.

Each test runs one call through the ``Memory`` library, the REST face (the official
``wontopos`` SDK, or raw httpx where the SDK cannot send the body, against real uvicorn
on a loopback port) and the MCP face (the SDK's in-memory ``Client``), over one real
service, and compares the answers and the error fields. Each face writes into a store of
its own, so one face's memory is never another's duplicate. Successful answers are also
validated against the answer models the contract table names for the operation.

These pin the three drifts issue 10 found: ``add_turn`` with an empty side, the
``field`` of a bad speaker given in ``metadata``, and ``store_create`` without a
``user_id``.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import wontopos
from mcp import Client
from support import KEY, Session, open_service, serve, settings_for

from wontopos_mcp import Memory, WontoposError, contract
from wontopos_mcp.mcp.answers import answer_models
from wontopos_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio
_ids = itertools.count()


class Faces:
    """One service seen through the library, REST (SDK and httpx) and MCP."""

    def __init__(self, mem: Memory, sdk: wontopos.Client, http: httpx.Client, mcp: Session) -> None:
        self.mem, self.sdk, self.http, self.mcp = mem, sdk, http, mcp

    def stores(self) -> dict[str, str]:
        """A fresh store per face: {"library": id, "rest": id, "mcp": id}."""
        n = next(_ids)
        stores = {face: f"{face}_{n}" for face in ("library", "rest", "mcp")}
        for user_id in stores.values():
            assert self.mem.create_store(user_id)["status"] == "created"
        return stores

    def library_error(self, call: Any) -> dict[str, Any]:
        with pytest.raises(WontoposError) as refused:
            call()
        return refused.value.envelope()

    def rest_error(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post(f"/api/v1{path}", json=body)
        envelope = response.json()
        assert response.status_code == envelope["status"] >= 400, envelope
        return envelope

    async def mcp_error(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.mcp.call(tool, arguments)
        assert result.is_error, result.structured_content
        return result.structured_content


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[tuple[Any, Any]]:
    settings = settings_for(tmp_path_factory.mktemp("faces"), api_key=KEY)
    service = open_service(settings, embedder)
    with serve(service, settings) as server:
        yield service, server
    service.close()


@pytest.fixture
async def faces(live: tuple[Any, Any]) -> AsyncIterator[Faces]:
    service, server = live
    headers = {"X-API-Key": KEY}
    with (
        wontopos.Client(api_key=KEY, base_url=server.url, deadline=60) as sdk,
        httpx.Client(base_url=server.url, headers=headers, timeout=60) as http,
    ):
        async with Client(build_server(service)) as client:
            session = Session(client)
            await session.load_tools()
            yield Faces(Memory(service=service), sdk, http, session)


def _valid(op_name: str, answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` validated against the contract's answer models for ``op_name``."""
    errors = []
    models = answer_models(contract.operation(op_name))
    for model in models:
        try:
            model.model_validate(answer)
            return answer
        except ValueError as exc:
            errors.append(exc)
    raise AssertionError(f"{op_name}: {answer} matches none of {models}: {errors}")


def _shape(answer: dict[str, Any]) -> dict[str, Any]:
    """An add_messages answer without what differs between stores: ids and the store."""
    return {
        "keys": sorted(answer),
        "results": [{k: v for k, v in r.items() if k not in ("id", "user_id")} for r in answer["results"]],
    }


# --- 1. add_turn with an empty side: left out by every face -------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("user_msg", "assistant_msg", "messages"),
    [
        ("I moved to Porto in May", "", [{"role": "user", "content": "I moved to Porto in May"}]),
        ("", "Noted, Porto it is", [{"role": "assistant", "content": "Noted, Porto it is"}]),
        ("  ", "Noted, Porto again", [{"role": "assistant", "content": "Noted, Porto again"}]),
    ],
)
async def test_add_turn_with_an_empty_side_stores_the_other_side_in_every_face(
    faces: Faces, user_msg: str, assistant_msg: str, messages: list[dict[str, str]]
) -> None:
    stores = faces.stores()
    library = _valid("add_turn", faces.mem.add_turn(user_msg, assistant_msg, user_id=stores["library"]))
    rest = _valid("add_turn", faces.sdk.add_turn(user_msg, assistant_msg, user_id=stores["rest"]))
    mcp = _valid("memory_add_messages", await faces.mcp.ok(
        "memory_add_messages", messages=messages, user_id=stores["mcp"]))  # fmt: skip
    assert _shape(library) == _shape(rest) == _shape(mcp)
    assert [r["status"] for r in library["results"]] == ["stored"]
    said = messages[0]
    for user_id in stores.values():
        (stored,) = faces.mem.list_memories(user_id)["memories"]
        assert stored["content"] == said["content"]
        assert stored.get("speaker") == ("me" if said["role"] == "assistant" else None)


async def test_add_turn_with_both_sides_empty_is_the_same_400_in_library_and_rest(faces: Faces) -> None:
    stores = faces.stores()
    library = faces.library_error(lambda: faces.mem.add_turn("", " ", user_id=stores["library"]))
    rest = faces.rest_error("/memory/store-turn", {"user_id": stores["rest"], "user_msg": "", "assistant_msg": " "})
    assert library == rest
    assert library["status"] == 400
    assert library["error"]["field"] == "user_msg"
    # MCP has no add_turn; its twin, an empty conversation, names its own parameter.
    mcp = await faces.mcp_error("memory_add_messages", messages=[], user_id=stores["mcp"])
    assert mcp["status"] == 400
    assert mcp["error"]["field"] == "messages"
    for user_id in stores.values():
        assert faces.mem.list_memories(user_id)["memories"] == []


async def test_add_turn_errors_name_the_side_as_the_caller_sent_it(faces: Faces) -> None:
    stores = faces.stores()
    too_long = "x" * (contract.MAX_CONTENT_CHARS + 1)
    library = faces.library_error(lambda: faces.mem.add_turn("fine", too_long, user_id=stores["library"]))
    rest = faces.rest_error(
        "/memory/store-turn", {"user_id": stores["rest"], "user_msg": "fine", "assistant_msg": too_long}
    )
    assert library == rest
    assert library["error"]["field"] == "assistant_msg"
    assert library["error"]["max_chars"] == contract.MAX_CONTENT_CHARS
    mcp = await faces.mcp_error(
        "memory_add_messages",
        messages=[{"role": "user", "content": "fine"}, {"role": "assistant", "content": too_long}],
        user_id=stores["mcp"],
    )
    assert mcp["error"]["field"] == "messages[1].content"
    assert mcp["error"]["max_chars"] == contract.MAX_CONTENT_CHARS


# --- 2. a bad speaker: `field` is the name the caller used --------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"speaker": "Carol"}, {"field": "metadata.speaker", "speaker": "Carol"}),
        ({"speaker": "Me"}, {"field": "metadata.speaker"}),
        ({"event_date": "soon"}, {"field": "metadata.event_date"}),
        ({"category": ""}, {"field": "metadata.category"}),
    ],
)
async def test_a_bad_field_inside_metadata_is_named_metadata_field_by_library_and_rest(
    faces: Faces, metadata: dict[str, Any], expected: dict[str, Any]
) -> None:
    stores = faces.stores()
    content = "Carol said the garden gate sticks"
    library = faces.library_error(lambda: faces.mem.add(content, stores["library"], metadata=metadata))
    rest = faces.rest_error("/memory/store", {"user_id": stores["rest"], "content": content, "metadata": metadata})
    # The same body, the message too: a fix names the store it was asked about (its own store each).
    library["error"]["message"] = library["error"]["message"].replace(stores["library"], stores["rest"])
    assert library == rest
    assert library["status"] == 400
    assert expected.items() <= library["error"].items()
    for user_id in stores.values():
        assert faces.mem.list_memories(user_id)["memories"] == []


async def test_a_bad_speaker_keyword_is_named_speaker_by_library_and_mcp(faces: Faces) -> None:
    stores = faces.stores()
    content = "Carol said the garden gate sticks"
    library = faces.library_error(lambda: faces.mem.add(content, stores["library"], speaker="Carol"))
    mcp = await faces.mcp_error("memory_add", content=content, speaker="Carol", user_id=stores["mcp"])
    # The same body but for the fix in the message, which each face names with its own verbs.
    fixes = library["error"].pop("message"), mcp["error"].pop("message")
    assert library == mcp
    assert f"add_speaker(speaker='Carol', user_id='{stores['library']}')" in fixes[0]
    assert f"speaker_register(speaker='Carol', user_id='{stores['mcp']}')" in fixes[1]
    library["error"]["message"] = fixes[0]
    assert library["error"]["field"] == "speaker"
    assert library["error"]["speaker"] == "Carol"
    # The SDK sends its `speaker=` keyword inside metadata: that is the name the server saw.
    with pytest.raises(wontopos.BadRequestError) as sdk:
        faces.sdk.add(content, user_id=stores["rest"], speaker="Carol")
    assert sdk.value.details == {"field": "metadata.speaker", "speaker": "Carol"}
    assert sdk.value.message == library["error"]["message"].replace(stores["library"], stores["rest"])


async def test_a_keyword_wins_over_metadata_and_none_does_not_override_it(faces: Faces) -> None:
    stores = faces.stores()
    # The keyword is at fault, so the keyword is named.
    error = faces.library_error(
        lambda: faces.mem.add("x", stores["library"], metadata={"speaker": "me"}, speaker="Carol")
    )
    assert error["error"]["field"] == "speaker"
    # A keyword of None is "not given" (as in the SDK): metadata's speaker stands.
    stored = faces.mem.add("The gate was oiled", stores["library"], metadata={"speaker": "me"}, speaker=None)
    assert _valid("memory_add", stored)["speaker"] == "me"
    # One metadata rule (contract.split_metadata): a key outside the four memory fields is
    # dropped and listed, by the library as by REST, whether a keyword or inside metadata.
    dropped = faces.mem.add("The gate squeaked", stores["library"], metadata={"colour": "red"}, mood="calm")
    assert dropped["status"] == "stored"
    assert dropped["ignored"] == ["colour", "mood"]
    body = {"user_id": stores["rest"], "content": "The gate squeaked", "metadata": {"colour": "red", "mood": "calm"}}
    rest = faces.http.post("/api/v1/memory/store", json=body).json()
    assert rest["status"] == "stored"
    assert rest["ignored"] == dropped["ignored"]


# --- 3. store_create without a user_id: the "default" store in every face ------------------------------


async def test_store_create_without_a_user_id_answers_the_default_store_in_every_face(faces: Faces) -> None:
    library = faces.mem.create_store()
    response = faces.http.post("/api/v1/memory/collection", json={})
    assert response.status_code == 200
    mcp = await faces.mcp.ok("store_create")
    expected = {"user_id": contract.DEFAULT_STORE, "status": "exists"}
    assert _valid("store_create", library) == response.json() == mcp == expected


# --- 4. the store's own state: the library answers as the SDK over REST --------------------------------


@pytest.mark.slow
async def test_stats_history_lineage_and_revisions_answer_the_same_in_library_and_sdk(faces: Faces) -> None:
    stores = faces.stores()
    sides = {"library": faces.mem, "rest": faces.sdk}
    firsts = {}
    for face, client in sides.items():
        user_id = stores[face]
        firsts[face] = client.add("The pool opens at 7.", user_id=user_id)["id"]
        client.update(firsts[face], "The pool opens at 6.", user_id=user_id)
        client.add_turn("When does the pool open?", "At 6.", user_id=user_id)

    def answers(face: str) -> dict[str, Any]:
        client, user_id = sides[face], stores[face]
        lineage = _valid("lineage", client.lineage(user_id, firsts[face]))
        page = _valid("revisions", client.revisions(user_id, include="revised", limit=5))
        return {
            "stats": {**_valid("stats", client.stats(user_id)), "user_id": ""},
            "history": [(t["role"], t["content"], t.get("speaker")) for t in client.history(user_id)],
            "lineage": [(v["content"], v["is_current"]) for v in lineage["versions"]],
            "revisions": {k: v for k, v in page.items() if k not in ("user_id", "memories", "counts")},
            "revised": [m["content"] for m in page["memories"]],
        }

    library, rest = answers("library"), answers("rest")
    assert library == rest
    assert library["stats"] == {"user_id": "", "total_memories": 4, "short_term_turns": 2}
    assert library["lineage"] == [("The pool opens at 7.", False), ("The pool opens at 6.", True)]
    assert library["revised"] == ["The pool opens at 7."]
    assert faces.library_error(lambda: faces.mem.lineage(stores["library"], "no-such-id"))["error"]["field"] == (
        "memory_id"
    )


# --- 5. limit 1-20 for search, recall and by_speaker: the same on every face ----------------------------

# (operation, the MCP tool / REST path, the REST name of `limit`)
LIMITED = [("memory_search", "/memory/search", "max_results"), ("memory_recall", "/memory/recall", "limit"),
           ("by_speaker", "/memory/by-speaker", "limit")]  # fmt: skip


def _returned(op: str, answer: Any) -> int:
    if op == "memory_recall":
        return len(answer["long_term"]["memories"])
    return len(answer if isinstance(answer, list) else answer["memories"])


@pytest.mark.slow
async def test_a_limit_from_1_to_20_is_served_and_0_or_21_refused_naming_it_on_every_face(faces: Faces) -> None:
    stores = faces.stores()
    items = [{"content": f"Bob's note {i} about the garden.", "speaker": "me"} for i in range(21)]
    for user_id in stores.values():
        faces.mem.add_many(items, user_id)
    library = {
        "memory_search": lambda n, s: faces.mem.search("garden", s, limit=n),
        "memory_recall": lambda n, s: faces.mem.recall("garden", s, limit=n),
        "by_speaker": lambda n, s: faces.mem.by_speaker("me", s, limit=n),
    }
    for op, path, rest_name in LIMITED:
        asked = {"speaker": "me"} if op == "by_speaker" else {"query": "garden"}
        for n in (1, 3, 20):
            mcp = await faces.mcp.ok(op, **asked, limit=n, user_id=stores["mcp"])
            rest = faces.http.post(f"/api/v1{path}", json={**asked, rest_name: n, "user_id": stores["rest"]})
            assert rest.status_code == 200, rest.text
            got = {_returned(op, library[op](n, stores["library"])), _returned(op, rest.json()), _returned(op, mcp)}
            assert got == {n}, (op, n, got)
        for n in (0, 21):
            refusal = faces.library_error(lambda: library[op](n, stores["library"]))  # noqa: B023 - called at once
            assert refusal["error"]["field"] == "limit"
            rest_error = faces.rest_error(path, {**asked, rest_name: n, "user_id": stores["rest"]})
            assert (rest_error["status"], rest_error["error"]["field"]) == (400, rest_name)
            mcp_error = await faces.mcp_error(op, **asked, limit=n, user_id=stores["mcp"])
            assert (mcp_error["status"], mcp_error["error"]["field"]) == (400, "limit")


# --- 6. a name that looks like Bob: refused by every face, naming the code point -------------------

# Issue 30: each of these inside "Bob" was registered as a new person with no hint.
LOOKS_LIKE_BOB = {
    "U+034F": "Bo\u034fb",
    "U+FE0F": "Bob\ufe0f",
    "U+E0100": "Bo\U000e0100b",
    "U+180B": "Bo\u180bb",
    "U+17B4": "B\u17b4ob",
    "U+2800": "Bo\u2800b",
    "U+200A": "Bo\u200ab",
    "U+1680": "Bo\u1680b",
    "U+3164": "Bo\u3164b",
    "U+00A0": "Bo\u00a0b",
}


@pytest.mark.parametrize("name", list(LOOKS_LIKE_BOB.values()), ids=list(LOOKS_LIKE_BOB))
async def test_a_name_that_looks_like_bob_is_refused_by_every_face_naming_its_code_point(
    faces: Faces, name: str
) -> None:
    """register, rename's ``new_name``, merge's ``into``, a message's ``name``: the library,
    REST (the SDK and raw HTTP) and MCP answer the same 400, ``field`` as each caller named
    it, the code point in the message; nobody is registered."""
    stores = faces.stores()
    code_point = next(k for k, v in LOOKS_LIKE_BOB.items() if v == name)
    for user_id in stores.values():
        faces.mem.add_speaker("Ann", user_id)
    library = [
        faces.library_error(lambda: faces.mem.add_speaker(name, stores["library"])),
        faces.library_error(lambda: faces.mem.rename_speaker("Ann", name, stores["library"])),
        faces.library_error(lambda: faces.mem.merge_speakers("Ann", name, 0, stores["library"])),
        faces.library_error(
            lambda: faces.mem.add_messages([{"role": "user", "name": name, "content": "hi"}], stores["library"])
        ),
    ]
    rest_user = stores["rest"]
    rest = [
        faces.rest_error("/memory/speakers", {"user_id": rest_user, "speaker": name}),
        faces.rest_error("/memory/speakers/rename", {"user_id": rest_user, "speaker": "Ann", "new_name": name}),
        faces.rest_error(
            "/memory/speakers/merge", {"user_id": rest_user, "speaker": "Ann", "into": name, "confirm_records": 0}
        ),
    ]
    with pytest.raises(wontopos.BadRequestError) as sdk:
        faces.sdk.add_speaker(name, user_id=rest_user)
    mcp_user = stores["mcp"]
    mcp = [
        await faces.mcp_error("speaker_register", speaker=name, user_id=mcp_user),
        await faces.mcp_error("speaker_rename", speaker="Ann", new_name=name, user_id=mcp_user),
        await faces.mcp_error("speaker_merge", speaker="Ann", into=name, confirm_records=0, user_id=mcp_user),
        await faces.mcp_error(
            "memory_add_messages", messages=[{"role": "user", "name": name, "content": "hi"}], user_id=mcp_user
        ),
    ]
    fields = ["speaker", "new_name", "into", "messages[0].name"]
    for answers in (library, rest, mcp):
        assert [a["error"]["field"] for a in answers] == fields[: len(answers)]
        for answer in answers:
            assert (answer["status"], answer["error"]["type"]) == (400, "invalid_request_error")
            assert f"({code_point})" in answer["error"]["message"], answer
    assert sdk.value.details["field"] == "speaker"
    assert f"({code_point})" in sdk.value.message
    for user_id in stores.values():
        assert [s["speaker"] for s in faces.mem.list_speakers(user_id)["speakers"]] == ["Ann"]
