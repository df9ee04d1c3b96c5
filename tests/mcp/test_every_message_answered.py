"""Every message gets an answer, over a real stdio process and the real HTTP app on a
loopback port (Streamable HTTP and SSE): a truncated line, a batch, 300- and 5,000-deep
nesting, bytes that are not UTF-8, a lone surrogate in a tool argument, a request whose id
is neither a string nor an integer; and the session goes on answering afterwards, with
nothing stored, while a notification gets no answer.

Without the wrappers in ``wontopos_mcp.mcp.transport`` the stdio and SSE cases get no answer
at all (the MCP SDK drops them), so each wait here is bounded.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import httpx
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from support import REPO, LiveServer, served, server_env

pytestmark = pytest.mark.anyio

WAIT = 60  # seconds any one answer may take on a loaded 2-core machine
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
# No id key: never answered (it cancels a request that is not running).
NOTIFICATION = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "gone"}}


def _call(request_id: Any, tool: str, arguments: str) -> bytes:
    """A raw tools/call whose ``arguments`` is JSON text (it may hold a lone ``\\ud800``)."""
    return _call_raw_id(json.dumps(request_id), tool, arguments)


def _call_raw_id(request_id: str, tool: str, arguments: str) -> bytes:
    """The same with the ``id`` as JSON text too (``1e2``, which Python reads as a float)."""
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
        f'"params":{{"name":"{tool}","arguments":{arguments}}}}}'
    ).encode()


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@dataclass(frozen=True)
class Case:
    """One message; ``stream`` is what a stream transport answers, ``(id, code or field)``
    each; ``http`` the one answer of a POST: ``(HTTP status, id, code or field)``."""

    name: str
    body: bytes
    stream: tuple[tuple[Any, int | str], ...]
    http: tuple[int, Any, int | str]


CASES = [
    Case("truncated", b'{"jsonrpc":"2.0","id":10,"method":"tools/li', ((None, -32700),), (400, None, -32700)),
    Case(
        "batch",
        b'[{"jsonrpc":"2.0","id":11,"method":"tools/list"},{"jsonrpc":"2.0","id":12,"method":"stores_list"}]',
        ((11, -32600), (12, -32600)),
        (400, None, -32600),
    ),
    Case("deep-300", _call(13, "memory_add", f'{{"content":{_deep(300)}}}'), ((13, -32602),), (400, 13, -32602)),
    Case("deep-5000", _call(14, "memory_add", f'{{"content":{_deep(5000)}}}'), ((14, -32602),), (400, 14, -32602)),
    Case(
        "not-utf8",
        _call(15, "speaker_register", '{"speaker":"Bo@"}').replace(b"@", b"\xff"),  # a Latin-1 byte
        ((15, -32700),),
        (400, 15, -32700),
    ),
    Case(
        "surrogate-content",
        _call(16, "memory_add", '{"content":"a\\ud800b"}'),
        ((16, "content"),),
        (200, 16, "content"),
    ),
    Case(
        "surrogate-speaker",
        _call(17, "speaker_register", '{"speaker":"\\udc00"}'),
        ((17, "speaker"),),
        (200, 17, "speaker"),
    ),
    Case(
        "surrogate-nested",
        _call(18, "memory_add_messages", '{"messages":[{"role":"user","content":"\\ud83d"}]}'),
        ((18, "messages[0].content"),),
        (200, 18, "messages[0].content"),
    ),
    Case("not-a-message", b"{}", ((None, -32600),), (400, None, -32600)),
    # An id that is neither a string nor an integer: the SDK takes the request for a
    # notification and never answers; it is refused with id null, and nothing runs.
    *(
        Case(
            f"id-{name}",
            _call_raw_id(raw, "memory_add", '{"content":"odd id"}'),
            ((None, -32600),),
            (400, None, -32600),
        )
        for name, raw in [
            ("null", "null"),
            ("fraction", "1.5"),
            ("exponent", "1e2"),
            ("true", "true"),
            ("array", "[19]"),
            ("object", '{"n":20}'),
        ]
    ),
]


def _check(answer: dict[str, Any], request_id: Any, expected: int | str) -> None:
    assert answer.get("jsonrpc") == "2.0", answer
    assert "id" in answer, answer
    assert answer["id"] == request_id, answer
    if isinstance(expected, int):
        assert answer["error"]["code"] == expected, answer
        assert answer["error"]["message"], answer
        return
    result = answer["result"]  # a tool's own error result: a 400 invalid_request_error naming the argument
    body = result["structuredContent"]
    assert result["isError"] is True
    assert json.loads(result["content"][0]["text"]) == body
    assert body["type"] == "error", body
    assert body["status"] == 400, body
    assert body["error"]["type"] == "invalid_request_error", body
    assert body["error"]["field"] == expected, body


def _assert_nothing_stored(answers: dict[Any, dict[str, Any]]) -> None:
    assert answers["speakers"]["result"]["structuredContent"]["speakers"] == []
    assert answers["memories"]["result"]["structuredContent"]["memories"] == []


FOLLOW_UP = [
    {"jsonrpc": "2.0", "id": "list", "method": "tools/list"},
    {"jsonrpc": "2.0", "id": "speakers", "method": "tools/call", "params": {"name": "speakers_list", "arguments": {}}},
    {"jsonrpc": "2.0", "id": "memories", "method": "tools/call", "params": {"name": "memory_list", "arguments": {}}},
]


class Stream(Protocol):
    """A stream transport spoken to raw: stdio or SSE."""

    async def post(self, body: bytes | dict[str, Any]) -> None: ...

    async def receive(self) -> dict[str, Any]: ...


async def _every_case_answered_then_the_session_goes_on(stream: Stream) -> None:
    """Open the session, send every case, check each answer in turn, then check the
    session still answers and that none of the refused calls stored anything."""
    await stream.post(INITIALIZE)
    assert (await stream.receive())["id"] == "init"
    await stream.post(INITIALIZED)
    for case in CASES:
        await stream.post(case.body)
        for request_id, expected in case.stream:
            answer = await stream.receive()
            try:
                _check(answer, request_id, expected)
            except AssertionError as exc:
                raise AssertionError(f"{case.name}: {exc}") from None
    await stream.post(NOTIFICATION)  # no answer: the next one is the first follow-up's
    answers = {}
    for request in FOLLOW_UP:
        await stream.post(request)
        answer = await stream.receive()
        assert answer.get("id") == request["id"], answer
        answers[answer["id"]] = answer
    assert {t["name"] for t in answers["list"]["result"]["tools"]} >= {"memory_add", "speaker_register"}
    _assert_nothing_stored(answers)


# --- stdio -----------------------------------------------------------------------------------


class Stdio:
    """A real ``python -m wontopos_mcp`` on stdio, spoken to in raw lines."""

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.stdout = BufferedByteReceiveStream(process.stdout)

    async def post(self, body: bytes | dict[str, Any]) -> None:
        raw = json.dumps(body).encode() if isinstance(body, dict) else body
        assert self.process.stdin is not None
        await self.process.stdin.send(raw + b"\n")

    async def receive(self) -> dict[str, Any]:
        with anyio.fail_after(WAIT):
            line = await self.stdout.receive_until(b"\n", 16 * 1024 * 1024)
        message = json.loads(line)  # stdout carries nothing but JSON-RPC
        assert isinstance(message, dict), line
        assert message.get("jsonrpc") == "2.0", line
        return message


# A real process: only the server's own stdin reader and stdout show how stdio frames a
# malformed line; the HTTP and SSE cases below run in process.
@pytest.mark.slow
async def test_over_stdio_every_message_gets_an_answer_and_the_session_survives(
    tmp_path: Path, model_cache: Path
) -> None:
    command = [sys.executable, "-m", "wontopos_mcp", "--db", str(tmp_path / "db")]
    async with await anyio.open_process(command, env=server_env(model_cache), cwd=str(REPO), stderr=None) as process:
        await _every_case_answered_then_the_session_goes_on(Stdio(process))
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.fail_after(WAIT):
            assert await process.wait() == 0


# --- HTTP ------------------------------------------------------------------------------------

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[LiveServer]:
    with served(tmp_path_factory.mktemp("answered"), embedder) as server:
        yield server


def _posted(response: httpx.Response) -> dict[str, Any]:
    """A Streamable HTTP answer: a JSON body, or the one ``data:`` event of an SSE body."""
    if response.headers["content-type"].startswith("application/json"):
        return response.json()
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])


@pytest.fixture
async def session(live: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=live.url, headers=ACCEPT, timeout=WAIT) as client:
        opened = await client.post("/mcp", json=INITIALIZE)
        assert opened.status_code == 200, opened.text
        client.headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        client.headers["mcp-protocol-version"] = "2025-06-18"
        assert (await client.post("/mcp", json=INITIALIZED)).status_code == 202
        yield client


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_over_streamable_http_every_body_gets_its_json_rpc_answer(session: httpx.AsyncClient, case: Case) -> None:
    response = await session.post("/mcp", content=case.body)
    status, request_id, expected = case.http
    assert response.status_code == status, response.text
    _check(_posted(response), request_id, expected)
    listed = await session.post("/mcp", json=FOLLOW_UP[0])
    assert listed.status_code == 200
    assert _posted(listed)["id"] == "list"


async def test_over_streamable_http_a_notification_is_accepted_without_an_answer(session: httpx.AsyncClient) -> None:
    response = await session.post("/mcp", json=NOTIFICATION)
    assert (response.status_code, response.content) == (202, b"")


async def test_over_streamable_http_a_refused_body_stores_nothing(session: httpx.AsyncClient) -> None:
    for case in CASES:
        await session.post("/mcp", content=case.body)
    answers = {r["id"]: _posted(await session.post("/mcp", json=r)) for r in FOLLOW_UP[1:]}
    _assert_nothing_stored(answers)


class SSE:
    """One SSE connection, spoken to in raw POSTs; answers are read off the event stream."""

    def __init__(self, client: httpx.AsyncClient, events: AsyncIterator[str]) -> None:
        self.client = client
        self.events = events
        self.endpoint = ""

    async def post(self, body: bytes | dict[str, Any]) -> None:
        raw = json.dumps(body).encode() if isinstance(body, dict) else body
        response = await self.client.post(self.endpoint, content=raw, headers={"Content-Type": "application/json"})
        # Accepted: the answer travels on the stream, like every SSE answer.
        assert response.status_code == 202, response.text

    async def receive(self) -> dict[str, Any]:
        with anyio.fail_after(WAIT):
            return json.loads(await anext(self.events))


@asynccontextmanager
async def _sse(live: LiveServer) -> AsyncIterator[SSE]:
    async with httpx.AsyncClient(base_url=live.url, timeout=WAIT) as client, client.stream("GET", "/sse") as stream:
        sse = SSE(client, _data_lines(stream.aiter_lines()))
        with anyio.fail_after(WAIT):
            sse.endpoint = await anext(sse.events)
        assert sse.endpoint.startswith("/messages/?session_id=")
        yield sse


async def _data_lines(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    async for line in lines:
        if line.startswith("data:"):
            yield line[5:].strip()


@pytest.mark.slow
async def test_over_sse_every_message_is_answered_on_the_stream(live: LiveServer) -> None:
    async with _sse(live) as sse:
        await _every_case_answered_then_the_session_goes_on(sse)


async def test_over_sse_a_forged_refusal_notification_is_not_written_back(live: LiveServer) -> None:
    forged = {
        "jsonrpc": "2.0",
        "method": "notifications/wontopos/refused",
        "params": {"key": "guess", "answers": [{"jsonrpc": "2.0", "id": "forged", "result": {}}]},
    }
    async with _sse(live) as sse:
        for body in (INITIALIZE, INITIALIZED, forged, FOLLOW_UP[0]):
            await sse.post(body)
        assert [(await sse.receive())["id"] for _ in range(2)] == ["init", "list"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"user_id": "default", "content": "Bob\\ud800 said hi"}', "content"),
        (b'{"user_id": "default", "content": "hi", "metadata": {"speaker": "\\udfffBob"}}', "metadata.speaker"),
        (b'{"user_id": "default\\ud800", "content": "hi"}', "user_id"),
        (b'{"user_id": "default", "content": "hi", "\\ud800": 1}', "body"),  # a key: no field has its name
    ],
)
async def test_over_rest_a_lone_surrogate_is_the_400_envelope_naming_the_field(
    live: LiveServer, body: bytes, field: str
) -> None:
    """The REST body is parsed by the standard library, which lets ``\\ud800`` through;
    UTF-8 storage cannot hold it, so it is refused before any call, as a 400
    ``invalid_request_error`` naming the field."""
    async with httpx.AsyncClient(base_url=live.url, timeout=WAIT) as client:
        response = await client.post("/api/v1/memory/store", content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 400, response.text
        error = response.json()
        assert (error["type"], error["status"]) == ("error", 400)
        assert (error["error"]["type"], error["error"]["field"]) == ("invalid_request_error", field)
        listed = await client.post("/api/v1/memory/list", json={"user_id": "default", "limit": 100})
        assert listed.status_code == 200
        assert listed.json()["memories"] == []
