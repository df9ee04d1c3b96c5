"""The HTTP face over real HTTP: the middleware (Host, Origin, API key, body limit) seen
with a raw client, the REST error cycle, and MCP over real Streamable HTTP and SSE with
the SDK's own clients; then the real ``wontopos-mcp --transport http`` process.

Servers are real uvicorn on a free loopback port (``support.LiveServer``) over a real service:
LanceDB under a temporary folder, the session's real model (or one that is still loading).
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from support import (
    KEY,
    REPO,
    Gate,
    LiveServer,
    error_body,
    open_service,
    serve,
    served,
    server_env,
    settings_for,
)

from wontopos_mcp.cli.exits import EXIT_BAD_SETTING
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.errors import ALL_ERRORS, ConfigError, UnavailableError, WontoposError
from wontopos_mcp.http.app import Guard, error_response
from wontopos_mcp.http.wrong_keys import KeyFailures
from wontopos_mcp.model.embeddings import ModelLoader

LIMIT = 4096
JSON = {"Content-Type": "application/json"}
ALLOWED = ("mcp.example.com", "app.example.com:8443")


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[LiveServer]:
    """A server that needs the API key, allows two extra host names and takes 4 KiB bodies."""
    with served(tmp_path_factory.mktemp("keyed"), embedder, api_key=KEY, allowed_hosts=ALLOWED,
                max_body_bytes=LIMIT) as live:  # fmt: skip
        yield live


@pytest.fixture(scope="module")
def keyless(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[LiveServer]:
    """A server with no API key configured (loopback)."""
    with served(tmp_path_factory.mktemp("keyless"), embedder) as live:
        yield live


@pytest.fixture
def http(keyed: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=keyed.url, headers={"X-API-Key": KEY}, timeout=30) as client:
        yield client


def _refused(response: httpx.Response, status: int, type: str, **fields: Any) -> dict[str, Any]:
    """``response`` is the structured error body with HTTP status ``status``; return ``error``."""
    assert response.status_code == status, response.text
    return error_body(response.json(), status, type, **fields)


# --- the one mapping ---------------------------------------------------------------------------------


@pytest.mark.parametrize("error_class", ALL_ERRORS, ids=lambda cls: cls.__name__)
def test_every_error_maps_to_its_status_and_the_spec_body(error_class: type[WontoposError]) -> None:
    response = error_response(error_class("what went wrong", field="speaker", speaker="Bob"))
    assert response.status_code == error_class.status
    assert json.loads(response.body) == {
        "type": "error", "status": error_class.status,
        "error": {"type": error_class.type, "message": "what went wrong", "field": "speaker", "speaker": "Bob"},
    }  # fmt: skip


# --- the API key ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_without_the_key_every_route_but_healthz_is_401(keyed: LiveServer) -> None:
    with httpx.Client(base_url=keyed.url, timeout=30) as bare:
        for method, path in [("GET", "/api/v1/memory/collections"), ("POST", "/mcp"), ("GET", "/sse"),
                             ("POST", "/messages/"), ("GET", "/nowhere")]:  # fmt: skip
            response = bare.request(method, path)
            error = _refused(response, 401, "authentication_error")
            assert "X-API-Key" in error["message"]
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
        wrong = bare.get("/api/v1/memory/collections", headers={"X-API-Key": "nope"})
        assert _refused(wrong, 401, "authentication_error")["message"] == "wrong API key"
        wrong_bearer = bare.get("/api/v1/memory/collections", headers={"Authorization": f"Basic {KEY}"})
        _refused(wrong_bearer, 401, "authentication_error")


def test_the_key_is_accepted_as_x_api_key_or_bearer(keyed: LiveServer) -> None:
    with httpx.Client(base_url=keyed.url, timeout=30) as bare:
        for headers in ({"X-API-Key": KEY}, {"Authorization": f"Bearer {KEY}"}, {"authorization": f"bearer  {KEY}"},
                        {"X-API-Key": "stale", "Authorization": f"Bearer {KEY}"}):  # fmt: skip
            response = bare.get("/api/v1/memory/collections", headers=headers)
            assert response.status_code == 200, (headers, response.text)
            assert "default" in {s["user_id"] for s in response.json()["collections"]}


def test_healthz_is_open_and_well_known_is_404_without_auth(keyed: LiveServer) -> None:
    with httpx.Client(base_url=keyed.url, timeout=30) as bare:
        health = bare.get("/healthz")
        assert health.status_code == 200
        expected = {"status": "ok", "version": "-", "db": "ok", "model": "ready", "api_key": "required"}
        assert health.json() | {"version": "-"} == expected
        for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server/mcp"):
            _refused(bare.get(path), 404, "not_found_error", field="path", path=path)


def test_healthz_says_whether_the_other_routes_need_a_key(keyed: LiveServer, keyless: LiveServer) -> None:
    """So that a page can ask for the key before its first call, not after a 401."""
    assert httpx.get(f"{keyed.url}/healthz", timeout=30).json()["api_key"] == "required"
    assert httpx.get(f"{keyless.url}/healthz", timeout=30).json()["api_key"] == "none"


def test_with_no_key_configured_a_sent_key_is_ignored(keyless: LiveServer) -> None:
    for headers in ({}, {"X-API-Key": "whatever"}, {"Authorization": "Bearer whatever"}):
        response = httpx.get(f"{keyless.url}/api/v1/memory/collections", headers=headers, timeout=30)
        assert response.status_code == 200, response.text


# --- Host and Origin -------------------------------------------------------------------------------


def test_a_foreign_host_is_421_and_configured_names_pass(http: httpx.Client) -> None:
    _refused(http.get("/healthz", headers={"Host": "evil.example"}), 421, "invalid_request_error", host="evil.example")
    _refused(http.get("/api/v1/memory/collections", headers={"Host": "evil.example:80"}), 421, "invalid_request_error")
    _refused(http.get("/healthz", headers={"Host": "app.example.com:9999"}), 421, "invalid_request_error")
    for host in ("localhost:1234", "127.0.0.1", "[::1]:8765", "mcp.example.com", "MCP.example.com:443",
                 "app.example.com:8443"):  # fmt: skip
        assert http.get("/healthz", headers={"Host": host}).status_code == 200, host


def test_the_sdks_own_transport_check_does_not_refuse_an_allowed_host(http: httpx.Client) -> None:
    """Our Guard decides; the MCP transport behind it must not refuse what the settings allow."""
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }  # fmt: skip
    response = http.post(
        "/mcp",
        json=initialize,
        headers={
            "Host": "mcp.example.com",
            "Origin": "https://mcp.example.com",
            "Accept": "application/json, text/event-stream",
        },  # fmt: skip
    )
    assert response.status_code == 200, response.text
    assert response.headers.get("mcp-session-id")


@pytest.mark.slow
def test_an_origin_must_be_this_servers_own_or_an_allowed_hosts(http: httpx.Client, keyed: LiveServer) -> None:
    own = f"http://127.0.0.1:{keyed.port}"
    for origin in ("http://evil.example", "https://localhost.evil.example", "null", "http://app.example.com:9999",
                   "https://app.example.com", "http://localhost:5173", "http://127.0.0.1", "http://[::1]:5173",
                   f"http://localhost:{keyed.port}", f"https://127.0.0.1:{keyed.port}", f"{own}/ui/",
                   f"ftp://127.0.0.1:{keyed.port}"):  # fmt: skip
        for method, path in (("GET", "/api/v1/memory/collections"), ("POST", "/mcp"), ("GET", "/ui/")):
            _refused(http.request(method, path, headers={"Origin": origin}), 403, "permission_error", origin=origin)
    for origin in (own, own.upper(), "https://app.example.com:8443", "http://mcp.example.com:1234"):
        assert http.get("/api/v1/memory/collections", headers={"Origin": origin}).status_code == 200, origin
    # What the memory browser at /ui/ sends: its own origin on every POST and DELETE.
    assert http.post("/api/v1/memory/list", json={}, headers={"Origin": own}).status_code == 200
    removed = http.request("DELETE", "/api/v1/memory/speakers", json={"speaker": "Nobody"}, headers={"Origin": own})
    _refused(removed, 404, "not_found_error", field="speaker")  # reached the route
    # The origin is the one the request was sent to: localhost's own page calls localhost.
    as_localhost = {"Host": f"localhost:{keyed.port}", "Origin": f"http://localhost:{keyed.port}"}
    assert http.get("/api/v1/memory/collections", headers=as_localhost).status_code == 200
    assert http.get("/api/v1/memory/collections").status_code == 200  # no Origin: not a browser


# --- the content type -------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_body_that_is_not_declared_json_is_415_before_any_route_runs(http: httpx.Client) -> None:
    body = json.dumps({"user_id": "default", "content": "The spare key is under the blue pot"})
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                         "application/jsonx", "text/json"):  # fmt: skip
        headers = {} if content_type is None else {"Content-Type": content_type}
        # /messages/ with no session: the SDK would refuse it with its own 400, were it reached.
        for method, path in (("POST", "/api/v1/memory/store"), ("POST", "/mcp"), ("POST", "/messages/?session_id=x"),
                             ("DELETE", "/api/v1/memory/speakers")):  # fmt: skip
            refused = http.request(method, path, content=body, headers=headers)
            error = _refused(refused, 415, "invalid_request_error", field="content-type")
            assert "application/json" in error["message"]
    listed = http.post("/api/v1/memory/list", json={"user_id": "default", "limit": 100}).json()["memories"]
    assert "The spare key is under the blue pot" not in {m["content"] for m in listed}  # nothing was stored
    for content_type, where in (("application/json; charset=utf-8", "blue pot"), ("Application/JSON", "doormat")):
        body = json.dumps({"user_id": "default", "content": f"The spare key is under the {where}"})
        stored = http.post("/api/v1/memory/store", content=body, headers={"Content-Type": content_type})
        assert stored.status_code == 200, stored.text
        assert stored.json()["status"] == "stored", stored.text
    assert http.get("/api/v1/memory/collections", headers={"Content-Type": "text/plain"}).status_code == 200


# --- the headers of every answer ------------------------------------------------------------------


def _carries_the_common_headers(response: httpx.Response) -> None:
    assert response.headers["X-Content-Type-Options"] == "nosniff", response.request.url
    assert response.headers["Referrer-Policy"] == "no-referrer", response.request.url


def test_every_answer_carries_nosniff_and_no_referrer_and_data_answers_no_store(http: httpx.Client) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    data = [
        http.get("/healthz"),
        http.get("/api/v1/memory/collections"),
        http.post("/api/v1/memory/search", json={"query": "x", "max_results": 99}),  # a refusal
        http.get("/api/v1/nothing"),  # routing's 404
        http.get("/api/v1/memory/collections", headers={"X-API-Key": "wrong"}),  # the guard's 401
        http.post("/mcp", json=initialize, headers={"Accept": "application/json, text/event-stream"}),
    ]
    for response in data:
        _carries_the_common_headers(response)
        assert response.headers["Cache-Control"] == "no-store", response.request.url
        assert "Content-Security-Policy" not in response.headers
    for path in ("/ui/", "/ui/app.js"):
        page = http.get(path)
        assert page.status_code == 200
        _carries_the_common_headers(page)
        assert page.headers["X-Frame-Options"] == "DENY"
        policy = [part.strip() for part in page.headers["Content-Security-Policy"].split(";")]
        assert "frame-ancestors 'none'" in policy
        assert "default-src 'none'" in policy
        assert "script-src 'self'" in policy
        assert "http-equiv" not in page.text  # one policy, in the header alone


def test_the_sse_stream_carries_the_headers_and_still_streams(keyed: LiveServer) -> None:
    with httpx.Client(base_url=keyed.url, headers={"X-API-Key": KEY}, timeout=30) as client:
        with client.stream("GET", "/sse") as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            _carries_the_common_headers(stream)
            assert stream.headers["Cache-Control"] == "no-store"
            lines = stream.iter_lines()
            assert next(lines) == "event: endpoint"
            assert next(lines).startswith("data: /messages/?session_id=")


# --- wrong keys ---------------------------------------------------------------------------------------


def _from(address: str, url: str, **headers: str) -> httpx.Client:
    """A client whose connections leave from ``address`` (any of 127.0.0.0/8 on Linux)."""
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=url, headers=headers, transport=transport, timeout=30)


@pytest.mark.slow
def test_fifty_wrong_keys_from_five_addresses_share_one_budget_and_the_right_key_still_gets_in(
    tmp_path: Path, embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    now = [1000.0]
    failures = KeyFailures(clock=lambda: now[0])  # the default policy, on a clock the test moves
    settings = settings_for(tmp_path, api_key=KEY)
    service = open_service(settings, embedder)
    collections = "/api/v1/memory/collections"
    addresses = [f"127.0.0.{n}" for n in range(2, 7)]
    try:
        with serve(service, settings, key_failures=failures) as live, caplog.at_level(logging.WARNING):
            clients = [_from(address, live.url) for address in addresses]
            try:
                answers = [
                    client.get(collections, headers={"X-API-Key": f"guess-{n}-{address}"})
                    for n in range(10)
                    for client, address in zip(clients, addresses, strict=True)
                ]
                statuses = [answer.status_code for answer in answers]
                assert statuses == [401] * 10 + [429] * 40  # ten wrong keys a minute, whoever sends them
                for client in clients:  # the right key gets in at once, from every address
                    started = time.monotonic()
                    assert client.get(collections, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
                    assert time.monotonic() - started < 5
                    limited = client.get(collections, headers={"X-API-Key": "one-more-guess"})
                    error = _refused(limited, 429, "rate_limit_error", retry_after_ms=60_000)
                    assert limited.headers["Retry-After"] == "60"
                    assert "60000 ms" in error["message"]
                    _refused(client.get(collections), 401, "authentication_error")  # no key guesses nothing
                    assert client.get("/healthz").status_code == 200  # open routes stay open
                _refused(clients[0].post("/mcp", json={}, headers={"X-API-Key": "guess"}), 429, "rate_limit_error")
                now[0] += 59.5
                _refused(clients[1].get(collections, headers={"X-API-Key": "guess"}), 429, "rate_limit_error",
                         retry_after_ms=500)  # fmt: skip
                now[0] += 0.5  # the first ten are a minute old: ten more tries, for everyone
                for client in clients * 2:
                    _refused(client.get(collections, headers={"X-API-Key": "guess"}), 401, "authentication_error")
                _refused(clients[2].get(collections, headers={"X-API-Key": "guess"}), 429, "rate_limit_error")
                warned = [r.getMessage() for r in caplog.records if "wrong API keys within" in r.getMessage()]
                assert len(warned) == 2, warned  # once each time the budget filled, never a key
                assert not any("guess" in message for message in warned)
            finally:
                for client in clients:
                    client.close()
    finally:
        service.close()


# --- the body limit ---------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_413_with_max_bytes_declared_or_streamed(http: httpx.Client) -> None:
    big = json.dumps({"content": "x" * LIMIT}).encode()
    _refused(http.post("/api/v1/memory/store", content=big, headers=JSON), 413, "invalid_request_error",
             max_bytes=LIMIT)  # fmt: skip

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer encoding
        for start in range(0, len(big), 1000):
            yield big[start : start + 1000]

    streamed = http.post("/api/v1/memory/store", content=chunks(), headers=JSON)
    assert "content-length" not in streamed.request.headers
    _refused(streamed, 413, "invalid_request_error", max_bytes=LIMIT)
    _refused(http.post("/mcp", content=big, headers=JSON), 413, "invalid_request_error", max_bytes=LIMIT)
    # Just under the limit reaches the route (which refuses the over-long id itself).
    fits = http.post("/api/v1/memory/get", json={"memory_id": "y" * (LIMIT - 100)})
    _refused(fits, 400, "invalid_request_error", field="memory_id")


# --- the REST cycle ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_malformed_requests_answer_the_error_body(http: httpx.Client) -> None:
    _refused(http.post("/api/v1/memory/search", content=b"{not json", headers=JSON), 400, "invalid_request_error")
    _refused(http.post("/api/v1/memory/search", content=b"NaN", headers=JSON), 400, "invalid_request_error")
    _refused(http.post("/api/v1/memory/search", json=["a list"]), 400, "invalid_request_error")
    _refused(http.post("/api/v1/memory/search", json={"query": "x", "max_result": 5}), 400, "invalid_request_error",
             field="max_result")  # fmt: skip
    _refused(http.post("/api/v1/memory/search", json={"query": "x", "max_results": 50}), 400, "invalid_request_error",
             field="max_results")  # fmt: skip
    _refused(http.post("/api/v1/memory/search", json={"query": "x", "form": "memoir"}), 400, "invalid_request_error",
             field="form")  # fmt: skip
    _refused(http.post("/api/v1/memory/store", json={"content": "x", "metadata": "Bob"}), 400,
             "invalid_request_error", field="metadata")  # fmt: skip
    _refused(http.post("/api/v1/memory/store", json={"content": "x", "metadata": {"event_date": "soon"}}), 400,
             "invalid_request_error", field="metadata.event_date")  # fmt: skip
    _refused(http.post("/api/v1/memory/supersede", json={"old_memory_id": "m", "new_content": " "}), 400,
             "invalid_request_error", field="new_content")  # fmt: skip
    _refused(http.post("/api/v1/memory/store-turn", json={"user_msg": "", "assistant_msg": ""}), 400,
             "invalid_request_error", field="user_msg")  # fmt: skip
    _refused(http.post("/api/v1/memory/store", json={"content": "x"}, headers={"Idempotency-Key": "no spaces"}), 400,
             "invalid_request_error", field="Idempotency-Key")  # fmt: skip
    _refused(http.get("/api/v1/memory/nothing"), 404, "not_found_error", field="path", path="/api/v1/memory/nothing")
    wrong_method = http.get("/api/v1/memory/store")
    _refused(wrong_method, 405, "invalid_request_error")
    assert "POST" in wrong_method.headers["Allow"]
    _refused(http.post("/api/v1/memory/images", json={}), 501, "not_implemented_error", endpoint="images")
    _refused(http.get("/api/v1/won/usage?days=7"), 501, "not_implemented_error", endpoint="usage")


@pytest.mark.slow
def test_forget_with_user_id_alone_erases_the_store_and_anything_else_is_checked(http: httpx.Client) -> None:
    http.post("/api/v1/memory/collection", json={"user_id": "forgetful"}).raise_for_status()
    http.post("/api/v1/memory/store", json={"user_id": "forgetful", "content": "one thing"}).raise_for_status()
    http.post("/api/v1/memory/store", json={"user_id": "forgetful", "content": "another thing"}).raise_for_status()
    for body, field in (({"user_id": ""}, "user_id"), ({"user_id": "  "}, "user_id"), ({"user_id": None}, "user_id"),
                        ({"user_id": "forgetful", "memory_id": None}, "memory_id"),
                        ({"user_id": "forgetful", "everything": True}, "everything")):  # fmt: skip
        _refused(http.post("/api/v1/memory/forget", json=body), 400, "invalid_request_error", field=field)
    assert http.post("/api/v1/memory/list", json={"user_id": "forgetful"}).json()["count"] == 2
    erased = http.post("/api/v1/memory/forget", json={"user_id": "forgetful"})
    assert erased.json() == {"user_id": "forgetful", "status": "deleted", "deleted": 2}


def test_a_replay_carries_replayed_in_the_body_and_the_header(http: httpx.Client) -> None:
    body = {"user_id": "default", "content": "The boiler was serviced in June", "metadata": {"category": "home"}}
    headers = {"Idempotency-Key": "boiler:2026-06"}
    first = http.post("/api/v1/memory/store", json=body, headers=headers)
    assert first.status_code == 200
    assert "idempotent-replayed" not in first.headers
    # The same JSON with its keys in another order is the same request.
    again = http.post("/api/v1/memory/store", content=json.dumps(dict(reversed(body.items()))),
                      headers={**headers, **JSON})  # fmt: skip
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == {**first.json(), "replayed": True}
    elsewhere = http.post("/api/v1/memory/supersede", json={"old_memory_id": first.json()["id"], "new_content": "z"},
                          headers=headers)  # fmt: skip
    _refused(elsewhere, 422, "invalid_request_error", field="Idempotency-Key")


@pytest.mark.slow
def test_a_model_still_loading_is_503_with_retry_after(tmp_path: Path, gate: Gate) -> None:
    settings = settings_for(tmp_path)
    service = open_service(settings, models=gate.loader(), model_wait=0.2)
    try:
        with serve(service, settings) as live, httpx.Client(base_url=live.url, timeout=30) as client:
            assert client.get("/healthz").json()["model"] == "loading"
            refused = client.post("/api/v1/memory/search", json={"query": "anything"})
            error = _refused(refused, 503, "unavailable_error")
            assert refused.headers["Retry-After"] == str(max(1, -(-error["retry_after_ms"] // 1000)))
            # Calls that need no model answer meanwhile.
            assert client.post("/api/v1/memory/speakers", json={"speaker": "Eve"}).status_code == 200
            gate.event.set()
            found = client.post("/api/v1/memory/search", json={"query": "anything"})
            assert found.status_code == 200
            assert found.json()["memories"] == []
    finally:
        gate.event.set()
        service.close()


# /healthz never waits, so each test below first waits for what it reports to happen, on the
# event that marks it: the model loader's own (``ModelLoader.get`` returns or raises once the
# load is over), or the model load beginning (the service starts it once its background
# database open has ended, see ``MemoryService.start``). One /healthz then says it.


def test_healthz_answers_within_a_second_while_the_model_loads(tmp_path: Path, gate: Gate) -> None:
    settings = settings_for(tmp_path)
    loader = gate.loader()
    service = open_service(settings, models=loader)
    try:
        with serve(service, settings) as live, httpx.Client(base_url=live.url, timeout=30) as client:
            started = time.monotonic()
            first = client.get("/healthz")
            assert time.monotonic() - started < 1.0
            assert first.status_code == 200
            assert first.json()["model"] == "loading"
            assert first.json()["status"] == "starting"
            assert gate.entered.wait(30)
            assert not gate.event.is_set()
            started = time.monotonic()
            loading = client.get("/healthz")
            assert time.monotonic() - started < 1.0
            assert loading.status_code == 200
            assert (loading.json()["db"], loading.json()["model"]) == ("ok", "loading"), loading.text
            gate.event.set()
            loader.get(timeout=60)  # the load is over
            ready = client.get("/healthz")
            assert ready.status_code == 200
            expected = {"status": "ok", "version": None, "db": "ok", "model": "ready", "api_key": "none"}
            assert ready.json() | {"version": None} == expected
    finally:
        gate.event.set()
        service.close()


class _NoModel:
    """A model load that fails at once; ``began`` is set when it is started."""

    def __init__(self) -> None:
        self.began = threading.Event()

    def __call__(self) -> Any:
        self.began.set()
        raise UnavailableError("the embedding model 'nowhere' cannot load: no such model; fix: pick another")


def test_healthz_is_503_once_the_model_failed(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    no_model = _NoModel()
    loader = ModelLoader(no_model, model="nowhere")
    service = open_service(settings, models=loader)
    try:
        with serve(service, settings) as live, httpx.Client(base_url=live.url, timeout=30) as client:
            assert no_model.began.wait(60), "the model load never began"  # so the open has ended
            with pytest.raises(UnavailableError):
                loader.get(timeout=60)  # the load is over, and failed
            failed = client.get("/healthz")
            assert failed.status_code == 503
            assert failed.json() | {"version": None} == {
                "status": "error",
                "version": None,
                "db": "ok",
                "model": "failed",
                "api_key": "none",
            }
    finally:
        service.close()


def test_healthz_is_503_when_the_database_cannot_be_opened(tmp_path: Path, gate: Gate) -> None:
    (tmp_path / "a-file").write_text("not a database")
    settings = settings_for(tmp_path, db=str(tmp_path / "a-file"))
    service = open_service(settings, models=gate.loader())
    try:
        with serve(service, settings) as live, httpx.Client(base_url=live.url, timeout=30) as client:
            assert gate.entered.wait(60), "the model load never began"  # so the open has ended
            broken = client.get("/healthz")
            assert broken.status_code == 503
            assert broken.json()["db"] == "error"
            assert broken.json()["status"] == "error"
    finally:
        gate.event.set()
        service.close()


class _Broken(MemoryService):
    """A service with a bug in one method."""

    def stores_list(self) -> dict[str, Any]:
        raise RuntimeError("secret internals /var/db/password")


def test_an_unexpected_exception_is_the_500_body_without_internals_and_is_logged(
    tmp_path: Path, embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(tmp_path)
    service = _Broken.open(settings, models=ModelLoader.of(embedder))
    try:
        with serve(service, settings) as live, caplog.at_level(logging.ERROR):
            response = httpx.get(f"{live.url}/api/v1/memory/collections", timeout=30)
            error = _refused(response, 500, "api_error")
            _carries_the_common_headers(response)  # set outside Starlette's error middleware
            assert response.headers["Cache-Control"] == "no-store"
            assert "secret" not in response.text
            assert "RuntimeError" not in response.text
            assert error["message"].startswith("internal error")
    finally:
        service.close()
    assert any(r.exc_info and "secret internals" in str(r.exc_info[1]) for r in caplog.records)


# --- MCP over Streamable HTTP and SSE ---------------------------------------------------------------


@pytest.mark.anyio
async def test_mcp_over_streamable_http_with_the_key(keyed: LiveServer) -> None:
    with anyio.fail_after(60):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as http:
            async with Client(streamable_http_client(f"{keyed.url}/mcp", http_client=http), mode="legacy") as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"memory_add", "memory_search", "speaker_register", "by_speaker"} <= names
                result = await client.call_tool("speaker_register", {"speaker": "Faye"})
                assert not result.is_error, result.content
                assert result.structured_content["status"] in ("registered", "exists")
                refused = await client.call_tool("memory_add", {"content": "x", "speaker": "Nobody"})
                assert refused.is_error
                assert refused.structured_content["error"]["field"] == "speaker"


def _leaves(exc: BaseException) -> list[BaseException]:
    inner = getattr(exc, "exceptions", None)  # an exception group (Python 3.11+, or anyio's backport)
    return [leaf for e in inner for leaf in _leaves(e)] if inner else [exc]


@pytest.mark.anyio
async def test_mcp_over_streamable_http_without_the_key_is_refused(keyed: LiveServer, keyless: LiveServer) -> None:
    with anyio.fail_after(60):
        # The SDK wraps its MCPError in task-group exceptions (ExceptionGroup, or the
        # backport's on Python 3.10): the leaves are checked below.
        with pytest.raises(Exception) as refused:  # noqa: PT011
            async with Client(f"{keyed.url}/mcp", mode="legacy") as client:
                await client.list_tools()
        assert _leaves(refused.value)
        assert all(isinstance(e, MCPError) for e in _leaves(refused.value))
        async with Client(f"{keyless.url}/mcp") as client:  # no key configured: none needed
            assert "memory_add" in {t.name for t in (await client.list_tools()).tools}


@pytest.mark.slow
@pytest.mark.anyio
async def test_mcp_over_sse_shares_the_one_engine(keyed: LiveServer) -> None:
    headers = {"X-API-Key": KEY}
    with anyio.fail_after(60):
        async with Client(sse_client(f"{keyed.url}/sse", headers=headers), mode="legacy") as first:
            assert "speakers_list" in {t.name for t in (await first.list_tools()).tools}
            registered = await first.call_tool("speaker_register", {"speaker": "Gus"})
            assert not registered.is_error, registered.content
            async with Client(sse_client(f"{keyed.url}/sse", headers=headers)) as second:
                listed = await second.call_tool("speakers_list", {})
                assert "Gus" in {s["speaker"] for s in listed.structured_content["speakers"]}
    async with httpx.AsyncClient(base_url=keyed.url, timeout=30) as bare:
        _refused(await bare.get("/sse"), 401, "authentication_error")
        speakers = await bare.get("/api/v1/memory/speakers", headers=headers)
        assert "Gus" in {s["speaker"] for s in speakers.json()["speakers"]}


# --- the real process ---------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# Markers a log must never show: a memory's text and a query over each way in, the key,
# and a store id sent in a query string (uvicorn's access line keeps the path alone).
MARKERS = {"rest": "Quokkarest saw the harbour", "rest_query": "Quokkaquery harbour",
           "mcp": "Quokkamcp kept a diary", "mcp_query": "Quokkamcpquery diary", "sse": "Quokkasse lost an umbrella",
           "store": "quokkastore"}  # fmt: skip


async def _speak_every_way_in(url: str) -> None:
    """Store and search a marker over REST, MCP Streamable HTTP and SSE."""
    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": KEY}, timeout=30) as rest:
        (await rest.post("/api/v1/memory/collection", json={"user_id": MARKERS["store"]})).raise_for_status()
        stored = await rest.post("/api/v1/memory/store", json={"user_id": MARKERS["store"], "content": MARKERS["rest"]})
        assert stored.json()["status"] == "stored", stored.text
        found = await rest.post(
            "/api/v1/memory/search", json={"user_id": MARKERS["store"], "query": MARKERS["rest_query"]}
        )
        assert found.json()["memories"][0]["content"] == MARKERS["rest"]
        listed = await rest.get("/api/v1/memory/speakers", params={"user_id": MARKERS["store"]})
        assert listed.status_code == 200
    async with httpx2.AsyncClient(headers={"X-API-Key": KEY}, timeout=30) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            added = await client.call_tool("memory_add", {"content": MARKERS["mcp"]})
            assert not added.is_error, added.content
            found = await client.call_tool("memory_search", {"query": MARKERS["mcp_query"]})
            assert MARKERS["mcp"] in {m["content"] for m in found.structured_content["memories"]}
    async with Client(sse_client(f"{url}/sse", headers={"X-API-Key": KEY})) as client:
        added = await client.call_tool("memory_add", {"content": MARKERS["sse"]})
        assert not added.is_error, added.content
        found = await client.call_tool("memory_search", {"query": MARKERS["sse"]})
        assert MARKERS["sse"] in {m["content"] for m in found.structured_content["memories"]}


async def _read_all(stream: Any) -> bytes:
    read = b""
    with anyio.fail_after(10):
        try:
            while True:
                read += await stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            pass
    return read


# The HTTP face's real process: the CLI's own listener and logging, SIGINT ending it with exit
# code 0, and a stdout that stays empty are the process's alone; the rest of this module runs in process.
@pytest.mark.slow
@pytest.mark.anyio
async def test_the_cli_serves_http_and_its_debug_log_holds_no_text_query_or_key(
    tmp_path: Path, model_cache: Path, embedder: Any
) -> None:
    port = _free_port()
    command = [sys.executable, "-m", "wontopos_mcp", "--transport", "http", "--port", str(port),
               "--db", str(tmp_path / "db"), "--log-level", "debug"]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    async with await anyio.open_process(
        command, env=server_env(model_cache, WONTOPOS_API_KEY=KEY), cwd=REPO
    ) as process:
        assert process.stderr is not None
        assert process.stdout is not None
        said = b""
        try:
            with anyio.fail_after(120):
                while b"serving MCP" not in said:  # the port is listening once this is said
                    said += await process.stderr.receive()
                async with httpx.AsyncClient(base_url=url, timeout=30) as bare:
                    health = await bare.get("/healthz")  # at once, whatever is still starting
                    assert health.status_code == 200, health.text
                    assert health.json()["db"] in ("opening", "ok"), health.text
                    _refused(await bare.get("/api/v1/memory/collections"), 401, "authentication_error")
                await _speak_every_way_in(url)
                async with httpx.AsyncClient(base_url=url, timeout=30) as bare:
                    health = await bare.get("/healthz")  # the database has answered a call by now
                    assert health.status_code == 200, health.text
                    assert health.json()["db"] == "ok", health.text
        finally:
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(20):
                code = await process.wait()
        assert code == 0
        printed = await _read_all(process.stdout)
        log = (said + await _read_all(process.stderr)).decode()
    assert printed == b"", printed  # stdout stays silent; logs go to stderr
    assert " DEBUG wontopos_mcp.logs: logging at debug" in log, log[:2000]  # debug was on
    assert '"POST /api/v1/memory/search HTTP/1.1" 200' in log
    assert '"GET /api/v1/memory/speakers HTTP/1.1" 200' in log
    for marker in (*MARKERS.values(), KEY):
        assert marker.lower() not in log.lower(), (marker, log[-3000:])


def test_a_non_loopback_bind_without_a_key_refuses_to_start(tmp_path: Path, model_cache: Path) -> None:
    command = [sys.executable, "-m", "wontopos_mcp", "--transport", "http", "--host", "0.0.0.0",
               "--port", str(_free_port()), "--db", str(tmp_path / "db")]  # fmt: skip
    done = subprocess.run(command, env=server_env(model_cache), cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("wontopos-mcp: refusing to serve on 0.0.0.0"), done.stderr
    assert "WONTOPOS_API_KEY" in lines[0]
    assert not (tmp_path / "db").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("transport", "key", "said"),
    [
        ("http", "fifteen-chars!!", "WONTOPOS_API_KEY is 15 characters"),
        ("sse", "fifteen-chars!!", "WONTOPOS_API_KEY is 15 characters"),
        ("http", "", "WONTOPOS_API_KEY is set but empty"),  # not "no key": it was asked for
    ],
)
def test_an_api_key_set_but_under_16_characters_stops_an_http_server_at_start(
    tmp_path: Path, model_cache: Path, transport: str, key: str, said: str
) -> None:
    command = [sys.executable, "-m", "wontopos_mcp", "--transport", transport, "--port", str(_free_port()),
               "--db", str(tmp_path / "db")]  # fmt: skip
    done = subprocess.run(command, env=server_env(model_cache, WONTOPOS_API_KEY=key), cwd=REPO,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == EXIT_BAD_SETTING
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"wontopos-mcp: {said}"), done.stderr
    assert "at least 16" in lines[0]
    assert not key or key not in lines[0]
    assert not (tmp_path / "db").exists()


def test_the_app_refuses_to_be_built_with_a_short_key() -> None:
    for key in ("", "fifteen-chars!!"):
        with pytest.raises(ConfigError, match="at least 16"):
            Guard(error_response, api_key=key, max_body_bytes=LIMIT, body_timeout_s=1, body_budget_bytes=LIMIT)
