"""The real server process over stdio, as an MCP host spawns it.

One test drives it with the SDK's stdio client; another writes raw JSON-RPC lines and
checks that stdout carries nothing but protocol messages, and prints how long the
process took from spawn to answering ``tools/list`` (printed, not asserted); a third
closes stdin right after its requests, and each is still answered before the exit.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import ErrorData, JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
from support import REPO, TOOLS, server_env

from wontopos_mcp.mcp.transport import EOF_GRACE, Unanswered

pytestmark = pytest.mark.process

pytestmark = pytest.mark.anyio


def _command(db: Path) -> list[str]:
    return [sys.executable, "-m", "wontopos_mcp", "--db", str(db)]


def _modes(root: Path) -> dict[str, set[str]]:
    """The permission bits of every directory and file under ``root`` (itself included)."""
    modes: dict[str, set[str]] = {"dirs": {oct(root.stat().st_mode & 0o777)}, "files": set()}
    for path in root.rglob("*"):
        modes["dirs" if path.is_dir() else "files"].add(oct(path.stat().st_mode & 0o777))
    return modes


# Real processes (the stdio face): an MCP host spawns the server, so the SDK's stdio client
# and the raw lines below each need the real program, its stdin, stdout and exit code.
async def test_a_stdio_client_registers_adds_and_searches_and_the_server_keeps_to_itself(tmp_path, model_cache) -> None:
    """... and, at ``--log-level debug``, its log holds neither the text nor the query, and
    the database it created is its user's alone (directories 0700, files 0600)."""
    text, query = "Wombat news: the launch moved to the second week of March.", "Wombatquery: when is the launch?"
    command, *args = [*_command(tmp_path / "db"), "--log-level", "debug"]
    params = StdioServerParameters(command=command, args=args, env=server_env(model_cache), cwd=str(REPO))
    with anyio.fail_after(180), open(tmp_path / "stderr.log", "w+", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            registered = await client.call_tool("speaker_register", {"speaker": "さくら"})
            assert not registered.is_error, registered.content
            assert registered.structured_content["status"] == "registered"
            added = await client.call_tool("memory_add", {"content": text, "speaker": "さくら"})
            assert not added.is_error, added.content
            assert added.structured_content["status"] == "stored"
            found = await client.call_tool("memory_search", {"query": query, "speaker": "さくら"})
            assert not found.is_error, found.content
            memories = found.structured_content["memories"]
            assert [m["id"] for m in memories] == [added.structured_content["id"]]
            assert memories[0]["speaker"] == "さくら"
            refused = await client.call_tool("memory_add", {"content": "x", "speaker": "Nobody"})
            assert refused.is_error
            assert refused.structured_content["error"]["field"] == "speaker"
        errlog.seek(0)
        log = errlog.read()
    assert " DEBUG wontopos_mcp.logs: logging at debug" in log, log
    assert "wombat" not in log.lower(), log
    assert _modes(tmp_path / "db") == {"dirs": {"0o700"}, "files": {"0o600"}}


def _message(line: bytes) -> dict[str, Any]:
    message = json.loads(line)
    assert isinstance(message, dict), line
    assert message.get("jsonrpc") == "2.0", line
    return message


async def test_stdout_carries_only_json_rpc_and_tools_list_answers_at_once(tmp_path, model_cache) -> None:
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    lines: list[bytes] = []
    started = time.perf_counter()
    with anyio.fail_after(120):
        async with await anyio.open_process(
            _command(tmp_path / "db"), env=server_env(model_cache), cwd=str(REPO), stderr=None
        ) as process:
            assert process.stdin is not None
            assert process.stdout is not None
            stdout = BufferedByteReceiveStream(process.stdout)
            await process.stdin.send(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
            listed = None
            while listed is None:
                line = await stdout.receive_until(b"\n", 16 * 1024 * 1024)
                lines.append(line)
                message = _message(line)
                if message.get("id") == 2:
                    listed = message
            elapsed = time.perf_counter() - started
            await process.stdin.aclose()  # end of input: the server exits
            while True:
                try:
                    line = await stdout.receive_until(b"\n", 16 * 1024 * 1024)
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    break
                lines.append(line)
            assert await process.wait() == 0
    print(f"\nspawn -> tools/list answered: {elapsed:.2f} s")
    assert {t["name"] for t in listed["result"]["tools"]} == TOOLS
    initialized = _message(lines[0])
    assert initialized["id"] == 1
    assert initialized["result"]["serverInfo"]["name"] == "wontopos-mcp"
    for line in lines:
        _message(line)


def _raw(request_id: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    return request if params is None else {**request, "params": params}


async def test_requests_written_just_before_stdin_closes_are_all_answered_then_it_exits(tmp_path, model_cache) -> None:
    """A script pipes its requests and closes stdin at once: the SDK would cancel every
    request still running at end of input (the write applied, its answer lost)."""
    requests = [
        _raw(
            "init",
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "eof", "version": "0"}},
        ),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        _raw("add", "tools/call", {"name": "memory_add", "arguments": {"content": "The dentist moved to Tuesday."}}),
        _raw("stores", "tools/call", {"name": "stores_list", "arguments": {}}),
    ]
    with anyio.fail_after(180):
        async with await anyio.open_process(
            _command(tmp_path / "db"), env=server_env(model_cache), cwd=str(REPO), stderr=None
        ) as process:
            assert process.stdin is not None
            assert process.stdout is not None
            await process.stdin.send(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
            await process.stdin.aclose()
            stdout = BufferedByteReceiveStream(process.stdout)
            lines: list[bytes] = []
            while True:
                try:
                    lines.append(await stdout.receive_until(b"\n", 16 * 1024 * 1024))
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    break
            assert await process.wait() == 0
    answers = [_message(line) for line in lines]
    assert sorted(a["id"] for a in answers) == ["add", "init", "stores"], answers
    by_id = {a["id"]: a for a in answers}
    added = by_id["add"]["result"]
    assert added["isError"] is False, added
    assert added["structuredContent"]["status"] == "stored", added
    stores = by_id["stores"]["result"]["structuredContent"]["stores"]
    assert [s["user_id"] for s in stores] == ["default"]


# The wait at end of input, on its own: what it waits for and that it is bounded.


def _request(request_id: int | str) -> JSONRPCRequest:
    return JSONRPCRequest(jsonrpc="2.0", id=request_id, method="tools/list")


def _result(request_id: int | str) -> JSONRPCResponse:
    return JSONRPCResponse(jsonrpc="2.0", id=request_id, result={})


async def test_the_end_of_input_wait_ends_when_each_request_read_is_answered() -> None:
    unanswered = Unanswered()
    for request_id in (1, 1, "x", "7"):  # a duplicate id is answered twice
        unanswered.read(_request(request_id))
    unanswered.written(JSONRPCNotification(jsonrpc="2.0", method="notifications/message"))
    for request_id in (1, "x", 7):  # the SDK correlates "7" and 7 as one id
        unanswered.written(_result(request_id))
    with anyio.move_on_after(0.01) as waited:
        await unanswered.wait(EOF_GRACE)
    assert waited.cancelled_caught  # one answer for id 1 is still owed
    unanswered.written(JSONRPCError(jsonrpc="2.0", id=1, error=ErrorData(code=-32601, message="no")))
    with anyio.fail_after(30):
        await unanswered.wait(EOF_GRACE)


async def test_a_request_the_client_cancelled_is_not_waited_for() -> None:
    unanswered = Unanswered()
    unanswered.read(_request(3))
    unanswered.read(JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": "3"}))
    with anyio.fail_after(30):
        await unanswered.wait(EOF_GRACE)


async def test_the_end_of_input_wait_is_bounded_and_names_what_it_gives_up_on(caplog) -> None:
    unanswered = Unanswered()
    unanswered.read(_request("hung"))
    with anyio.fail_after(30):
        await unanswered.wait(0.05)
    assert "still unanswered" in caplog.text
    assert "hung" in caplog.text
