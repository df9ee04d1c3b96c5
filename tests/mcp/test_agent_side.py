"""What an agent is shown and can reach, as the official Python client sees it over real
processes: the listing's budget (every character a host shows the model of a tool, on
every turn), the profiles, the prompts and resources, and every protocol version the
SDK serves (the 2025-11-25 handshake and the stateless 2026-07-28) through every path:
stdio through the shared engine's relay, stdio in-process, Streamable HTTP and SSE. The
relay's own answer for a call its engine left unanswered is one the client accepts, and
the session goes on with a new engine.

One seeded database per path (a copy each, so no two processes share one), made once
for the module with the session's model.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from support import REPO, TOOLS, engines_serving, open_service, serve, server_env, settings_for

from wontopos_mcp.cli import relay
from wontopos_mcp.contract import CORE_TOOLS, PROMPTS
from wontopos_mcp.mcp.prompts import MAX_PROMPT_CHARS

pytestmark = [pytest.mark.anyio, pytest.mark.process]

MODES = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}
"""The protocol version -> how the SDK client is told to speak it (``Client(mode=...)``)."""
PERSON = "Ana María"
LISTING_BUDGET, TOOL_BUDGET, CORE_BUDGET, INSTRUCTIONS_BUDGET = 12_000, 1_200, 5_000, 2_000


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    """A database whose default store knows Ana María and two things she said."""
    folder = tmp_path_factory.mktemp("agent-side")
    service = open_service(settings_for(folder), embedder)
    service.speaker_register(speaker=PERSON)
    service.memory_add(content="I moved to Porto in May.", speaker=PERSON)
    service.memory_add(content="My sister runs a bakery in Braga.", speaker=PERSON)
    service.close()
    return folder / "db"


def _copy(seeded: Path, name: str) -> Path:
    target = seeded.parent / name
    if not target.exists():
        shutil.copytree(seeded, target)
    return target


@pytest.fixture(scope="module")
def http_url(seeded: Path, tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("agent-http")
    shutil.copytree(seeded, folder / "db")
    service = open_service(settings_for(folder), embedder)
    with serve(service, settings_for(folder)) as server:
        yield f"{server.url}/mcp"
    service.close()


def _stdio(db: Path, model_cache: Path, *args: str, errlog: Any = None) -> Any:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "wontopos_mcp", "--db", str(db), *args],
        env=server_env(model_cache),
        cwd=str(REPO),
    )
    return stdio_client(params, errlog=errlog) if errlog is not None else params


@asynccontextmanager
async def _client(path: str, version: str, seeded: Path, model_cache: Path, http_url: str) -> AsyncIterator[Client]:
    if path == "http":
        server: Any = http_url
    elif path == "sse":
        server = sse_client(http_url.removesuffix("/mcp") + "/sse")
    elif path == "relay":
        server = _stdio(_copy(seeded, "relay-db"), model_cache)
    else:
        server = _stdio(_copy(seeded, "inprocess-db"), model_cache, "--engine", "inprocess")
    with anyio.fail_after(120):
        async with Client(server, mode=MODES[version]) as client:
            assert client.protocol_version == version
            yield client


def _shown(tool: Any) -> int:
    """What a host shows the model of one tool: its name, title, description and input
    schema, as compact JSON (the output schema is for the client, not the model)."""
    dumped = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    shown = {key: dumped[key] for key in ("name", "title", "description", "inputSchema") if key in dumped}
    return len(json.dumps(shown, separators=(",", ":"), ensure_ascii=False))


# --- what the model is shown ---------------------------------------------------------------------


async def test_the_listing_a_host_shows_stays_within_its_budget_and_core_within_its_own(
    seeded: Path, model_cache: Path
) -> None:
    sizes: dict[str, dict[str, int]] = {}
    for profile in ("full", "core"):
        server = _stdio(_copy(seeded, "relay-db"), model_cache, "--tools", profile)
        with anyio.fail_after(120):
            async with Client(server, mode="legacy") as client:
                sizes[profile] = {tool.name: _shown(tool) for tool in (await client.list_tools()).tools}
                instructions = client.instructions or ""
        print(f"\n{profile}: {sum(sizes[profile].values())} chars", sizes[profile])
    assert set(sizes["full"]) == TOOLS
    assert sum(sizes["full"].values()) <= LISTING_BUDGET
    assert max(sizes["full"].values()) <= TOOL_BUDGET, sizes["full"]
    assert set(sizes["core"]) == set(CORE_TOOLS)
    assert sum(sizes["core"].values()) <= CORE_BUDGET
    assert sizes["core"] == {name: sizes["full"][name] for name in CORE_TOOLS}
    assert 0 < len(instructions) <= INSTRUCTIONS_BUDGET


async def test_a_tool_outside_the_sessions_profile_is_an_unknown_tool(seeded: Path, model_cache: Path) -> None:
    server = _stdio(_copy(seeded, "inprocess-db"), model_cache, "--engine", "inprocess", "--tools", "core")
    with anyio.fail_after(120):
        async with Client(server, mode="legacy") as client:
            refused = await client.call_tool("memory_list", {})
    assert refused.is_error
    error = refused.structured_content["error"]
    assert (refused.structured_content["status"], error["field"], error["tool"]) == (400, "name", "memory_list")
    assert "memory_add" in error["message"]
    assert "memory_list" not in error["message"].split(":", 1)[1]


def test_the_relay_knows_which_versions_have_no_result_type() -> None:
    """The relay names the handshake versions itself (it imports no MCP): they are the SDK's."""
    assert relay.HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    assert set(MODES) == {HANDSHAKE_PROTOCOL_VERSIONS[-1], *MODERN_PROTOCOL_VERSIONS}


# --- every version, every path -------------------------------------------------------------------


@pytest.mark.parametrize("version", list(MODES))
@pytest.mark.parametrize("path", ["relay", "inprocess", "http", "sse"])
async def test_every_version_on_every_path_gets_the_tools_prompts_resources_and_errors(
    path: str, version: str, seeded: Path, model_cache: Path, http_url: str
) -> None:
    async with _client(path, version, seeded, model_cache, http_url) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        refused = await client.call_tool("memory_add", {"content": "hi", "speaker": "Nobody"})
        assert refused.is_error
        assert refused.structured_content["error"]["field"] == "speaker"

        assert [p.name for p in (await client.list_prompts()).prompts] == [p.name for p in PROMPTS]
        about = await client.get_prompt("about_person", {"speaker": PERSON})
        text = about.messages[0].content.text  # type: ignore[union-attr]
        assert "Porto" in text
        assert "Braga" in text
        assert len(text) <= MAX_PROMPT_CHARS
        recall_first = (await client.get_prompt("recall_first")).messages[0].content.text  # type: ignore[union-attr]
        assert "speaker_register" in recall_first
        assert len(recall_first) <= MAX_PROMPT_CHARS

        assert [r.uri for r in (await client.list_resources()).resources] == ["memory://stores"]
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert templates == {
            "memory://{user_id}/speakers", "memory://{user_id}/speakers/{speaker}", "memory://{user_id}/stats",
        }  # fmt: skip
        read = await client.read_resource("memory://default/speakers/Ana%20Mar%C3%ADa")
        assert read.contents[0].mime_type == "application/json"
        tool = await client.call_tool("by_speaker", {"speaker": PERSON})
        assert json.loads(read.contents[0].text) == tool.structured_content  # type: ignore[union-attr]
        stores = json.loads((await client.read_resource("memory://stores")).contents[0].text)  # type: ignore[union-attr]
        assert stores == (await client.call_tool("stores_list", {})).structured_content

        with pytest.raises(MCPError) as missing:
            await client.read_resource("memory://default/speakers/Nobody")
        assert missing.value.error.code == INVALID_PARAMS
        body = missing.value.error.data
        assert (body["status"], body["error"]["type"], body["error"]["speaker"]) == (404, "not_found_error", "Nobody")


# --- the engine killed mid-call --------------------------------------------------------------------


@pytest.mark.parametrize("version", list(MODES))
async def test_a_call_left_by_a_killed_engine_is_a_503_the_client_accepts_and_the_session_goes_on(
    version: str, seeded: Path, model_cache: Path, tmp_path: Path
) -> None:
    db = tmp_path / "db"
    shutil.copytree(seeded, db)
    log = tmp_path / "relay.log"
    chat = [
        {"role": "user", "content": f"Message {i}: a long turn about the quarterly plan. " * 40} for i in range(100)
    ]
    with anyio.fail_after(180), open(log, "w+", encoding="utf-8") as errlog:
        async with Client(
            _stdio(db, model_cache, "--log-level", "debug", errlog=errlog), mode=MODES[version]
        ) as client:
            assert (await client.call_tool("speakers_list", {})).structured_content["count"] == 1
            (engine,) = engines_serving(db)
            answers: list[Any] = []

            async def slow() -> None:
                answers.append(await client.call_tool("memory_add_messages", {"messages": chat}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(slow)
                while log.read_text(encoding="utf-8").count("relayed tools/call") < 2:  # the engine has it
                    await anyio.sleep(0.05)
                os.kill(engine["pid"], signal.SIGKILL)
            (lost,) = answers
            assert lost.is_error
            assert lost.structured_content["status"] == 503
            assert lost.structured_content["error"]["retry_after_ms"] > 0

            after = await client.call_tool("speakers_list", {})  # the same session, a new engine
            assert not after.is_error
            assert after.structured_content["count"] == 1
    (new,) = engines_serving(db)
    assert new["pid"] != engine["pid"]
