"""The real server process over stdio, as an MCP host spawns it.

One test drives it with the SDK's stdio client; another writes raw JSON-RPC lines and
checks that stdout carries nothing but protocol messages, and prints how long the
process took from spawn to answering ``tools/list`` (printed, not asserted).
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
from support import REPO, TOOLS, server_env

pytestmark = pytest.mark.anyio


def _command(db: Path) -> list[str]:
    return [sys.executable, "-m", "wontopos_mcp", "--db", str(db)]


# Real processes (the stdio face): an MCP host spawns the server, so the SDK's stdio client
# and the raw lines below each need the real program, its stdin, stdout and exit code.
async def test_a_stdio_client_registers_a_speaker_adds_and_searches(tmp_path, model_cache) -> None:
    command, *args = _command(tmp_path / "db")
    params = StdioServerParameters(command=command, args=args, env=server_env(model_cache), cwd=str(REPO))
    with anyio.fail_after(180):
        async with Client(params, mode="legacy") as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            registered = await client.call_tool("speaker_register", {"speaker": "さくら"})
            assert not registered.is_error, registered.content
            assert registered.structured_content["status"] == "registered"
            added = await client.call_tool(
                "memory_add", {"content": "The launch moved to the second week of March.", "speaker": "さくら"}
            )
            assert not added.is_error, added.content
            assert added.structured_content["status"] == "stored"
            found = await client.call_tool("memory_search", {"query": "when is the launch?", "speaker": "さくら"})
            assert not found.is_error, found.content
            memories = found.structured_content["memories"]
            assert [m["id"] for m in memories] == [added.structured_content["id"]]
            assert memories[0]["speaker"] == "さくら"
            refused = await client.call_tool("memory_add", {"content": "x", "speaker": "Nobody"})
            assert refused.is_error and refused.structured_content["error"]["field"] == "speaker"


def _message(line: bytes) -> dict[str, Any]:
    message = json.loads(line)
    assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line
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
            assert process.stdin is not None and process.stdout is not None
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
    assert initialized["id"] == 1 and initialized["result"]["serverInfo"]["name"] == "wontopos-mcp"
    for line in lines:
        _message(line)
