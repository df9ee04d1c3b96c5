"""``POST /api/v1/memory/import`` over real HTTP: the export file as the body, the options in
the query string, the import's summary as the answer, and the one error body for every
refusal (a bad file, unresolved names, an unknown option, a form's content type, a body
over the route's 32 MiB, a missing key). One keyed server for the module; each test its
own store.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support import KEY, TRIP_CHAT, TRIP_NAME, LiveServer, error_body, served

IMPORT = "/api/v1/memory/import"
OCTETS = {"Content-Type": "application/octet-stream"}
IMPORT_MAX_BYTES = 32 * 1024 * 1024


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[LiveServer]:
    with served(tmp_path_factory.mktemp("import"), embedder, api_key=KEY) as server:
        yield server


@pytest.fixture
def api(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, headers={"X-API-Key": KEY}, timeout=120) as client:
        yield client


def _import(api: httpx.Client, body: bytes, params: list[tuple[str, Any]], **headers: str) -> httpx.Response:
    return api.post(IMPORT, params=params, content=body, headers={**OCTETS, **headers})


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _refused(response: httpx.Response, status: int, **fields: Any) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = error_body(response.json(), status, "invalid_request_error", **fields)
    return error


def _trip(store: str, *extra: tuple[str, str]) -> list[tuple[str, Any]]:
    return [("user_id", store), ("format", "whatsapp"), ("tz", "Europe/Athens"), ("name", TRIP_NAME), *extra]


def _memories(api: httpx.Client, store: str) -> list[dict[str, Any]]:
    listed = _ok(api.post("/api/v1/memory/list", json={"user_id": store, "limit": 500}))
    memories: list[dict[str, Any]] = listed["memories"]
    return memories


def _stores(api: httpx.Client) -> set[str]:
    return {c["user_id"] for c in _ok(api.get("/api/v1/memory/collections"))["collections"]}


@pytest.mark.slow
def test_a_dry_run_answers_each_conversations_people_and_how_each_resolves_and_stores_nothing(
    api: httpx.Client,
) -> None:
    _ok(api.post("/api/v1/memory/collection", json={"user_id": "trip-dry"}))
    _ok(api.post("/api/v1/memory/speakers", json={"user_id": "trip-dry", "speaker": "Lena"}))
    params = _trip("trip-dry", ("dry_run", "true"), ("register", "true"), ("as", "陽菜=me"))
    summary = _ok(_import(api, TRIP_CHAT.encode(), params))

    assert (summary["dry_run"], summary["stored"], summary["tz"]) == (True, 0, "Europe/Athens")
    assert summary["file"] == TRIP_NAME
    (conversation,) = summary["conversations"]
    assert conversation["conversation_id"] == f"whatsapp:{TRIP_NAME}"
    people = {p["name"]: (p["messages"], p["resolves"], p.get("speaker")) for p in conversation["people"]}
    assert people == {"Νίκος": (2, "register", "Νίκος"), "Lena": (2, "registered", "Lena"), "陽菜": (1, "me", "me")}
    assert conversation["skipped"] == {"media": 1, "system": 1}
    assert conversation["first"] == "2026-04-12T06:01:00.000000Z"  # 09:01 in Athens
    assert conversation["last"] == "2026-04-13T15:20:00.000000Z"
    assert _memories(api, "trip-dry") == []
    # Without register or as, a dry run still answers: the names no one is yet, unresolved.
    (conversation,) = _ok(_import(api, TRIP_CHAT.encode(), _trip("trip-dry", ("dry_run", "true"))))["conversations"]
    people = {p["name"]: p["resolves"] for p in conversation["people"]}
    assert people == {"Νίκος": "unresolved", "Lena": "registered", "陽菜": "unresolved"}
    speakers = _ok(api.get("/api/v1/memory/speakers", params={"user_id": "trip-dry"}))["speakers"]
    assert [s["speaker"] for s in speakers] == ["Lena"]  # a dry run registers no one


@pytest.mark.slow
def test_unresolved_names_refuse_then_register_stores_and_the_same_file_again_stores_nothing(
    api: httpx.Client,
) -> None:
    refused = _refused(_import(api, TRIP_CHAT.encode(), _trip("trip")), 400, field="speaker")
    assert {e["name"]: e["messages"] for e in refused["unresolved"]} == {"Νίκος": 2, "Lena": 2, "陽菜": 1}
    assert "trip" not in _stores(api)  # nothing stored: not even the store

    summary = _ok(_import(api, TRIP_CHAT.encode(), _trip("trip", ("register", "true"))))
    assert (summary["dry_run"], summary["stored"], summary["already_imported"]) == (False, 5, 0)
    assert sorted(summary["registered"]) == ["Lena", "Νίκος", "陽菜"]
    assert summary["speakers"] == {"Lena": 2, "Νίκος": 2, "陽菜": 1}
    said = [(m["speaker"], m["content"]) for m in _memories(api, "trip")]
    assert said[0] == ("Νίκος", "Κλείνω το πλοίο για Νάξο την Παρασκευή.")
    assert said[-1] == ("Lena", "Rooms booked: Harbour View,\ntwo nights, breakfast included.")
    lena = _ok(api.post("/api/v1/memory/by-speaker", json={"user_id": "trip", "speaker": "Lena"}))
    assert {m["speaker"] for m in lena["memories"]} == {"Lena"}
    assert lena["returned"] == 2

    again = _ok(_import(api, TRIP_CHAT.encode(), _trip("trip")))  # registered now: no flag needed
    assert (again["stored"], again["already_imported"]) == (0, 5)
    assert len(_memories(api, "trip")) == 5


@pytest.mark.slow
def test_a_bad_file_or_query_is_400_naming_it_and_stores_nothing(api: httpx.Client) -> None:
    chat = {"name": "Team", "type": "private_group", "id": 7, "messages": [
        {"id": 1, "type": "message", "date_unixtime": "1767225600", "from": "Ana", "text": "hello"}]}  # fmt: skip
    cut = json.dumps(chat).encode()[:-30]
    params = [("user_id", "bad"), ("format", "telegram"), ("register", "true"), ("name", "result.json")]
    error = _refused(_import(api, cut, params), 400, field="file", file="result.json")
    assert error["place"]
    assert error["message"].startswith("result.json: ")

    _refused(_import(api, TRIP_CHAT.encode(), [*_trip("bad"), ("dryrun", "true")]), 400, field="dryrun")
    _refused(_import(api, TRIP_CHAT.encode(), [*_trip("bad"), ("register", "yes")]), 400, field="register")
    _refused(_import(api, b"  \n", _trip("bad")), 400, field="body")
    assert "bad" not in _stores(api)


@pytest.mark.slow
def test_a_form_or_text_body_is_415_and_a_body_over_32_mib_is_413(api: httpx.Client, live: LiveServer) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        sent = _import(api, TRIP_CHAT.encode(), _trip("typed", ("register", "true")), **{"Content-Type": content_type})
        _refused(sent, 415, field="content-type")
    assert "typed" not in _stores(api)

    # Only the length is declared: the server answers before a byte of the body is sent.
    connection = http.client.HTTPConnection("127.0.0.1", live.port, timeout=30)
    try:
        connection.putrequest("POST", f"{IMPORT}?user_id=big&format=whatsapp")
        for header, value in (("X-API-Key", KEY), ("Content-Type", "application/octet-stream"),
                              ("Content-Length", str(IMPORT_MAX_BYTES + 1))):  # fmt: skip
            connection.putheader(header, value)
        connection.endheaders()
        answer = connection.getresponse()
        body = json.loads(answer.read())
    finally:
        connection.close()
    assert answer.status == 413, body
    error_body(body, 413, "invalid_request_error", max_bytes=IMPORT_MAX_BYTES)


@pytest.mark.slow
def test_the_key_is_required_when_configured(live: LiveServer, api: httpx.Client) -> None:
    with httpx.Client(base_url=live.url, timeout=30) as bare:
        for headers in ({}, {"X-API-Key": "not-the-key-0123456789"}):
            sent = _import(bare, TRIP_CHAT.encode(), _trip("keyed", ("register", "true")), **headers)
            assert sent.status_code == 401, sent.text
            error_body(sent.json(), 401, "authentication_error")
    assert "keyed" not in _stores(api)
