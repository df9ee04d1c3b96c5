"""``tools/list`` comes from the listing shipped with the package (``mcp/listing.json``),
and the tools are built at the first call: the listing must be exactly what the tools
build, and listing must not build them."""

import json
import subprocess
import sys
from importlib import resources
from typing import Any

import anyio
from mcp.server import MCPServer

from wontopos_mcp.mcp import listing
from wontopos_mcp.mcp.server import build_server
from wontopos_mcp.mcp.tools import tools


def _dumped(listed: list[Any]) -> list[dict[str, Any]]:
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed]


def test_the_shipped_listing_is_what_the_tools_build() -> None:
    shipped = json.loads(resources.files("wontopos_mcp.mcp").joinpath(listing.FILE).read_text(encoding="utf-8"))
    assert shipped == listing.generate(), "listing.json is stale: run python -m wontopos_mcp.mcp.listing"


def test_the_server_lists_what_its_built_tools_list_with_its_own_speaker_limit(make_service: Any) -> None:
    service = make_service(speaker_limit=7)
    served = anyio.run(build_server(service).list_tools)
    built = anyio.run(MCPServer(tools=tools(service, speaker_limit="7")).list_tools)
    assert _dumped(served) == _dumped(built)
    register = next(tool for tool in served if tool.name == "speaker_register")
    assert "holds up to 7 people" in (register.description or "")
    assert "{speaker_limit}" not in json.dumps(_dumped(served))


def test_listing_the_tools_builds_none_of_them(tmp_path: Any) -> None:
    """What start-up saves: the answer models (pydantic) are not even imported until a
    tool is called; the first call builds them and is answered."""
    script = f"""
import anyio, sys
from wontopos_mcp.config import Settings
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.mcp.server import build_server
server = build_server(MemoryService.open(Settings(db={str(tmp_path / "db")!r})))
listed = anyio.run(server.list_tools)
print(len(listed), "wontopos_mcp.mcp.answers" in sys.modules)
result = anyio.run(server.call_tool, "stores_list", {{}})
print("wontopos_mcp.mcp.answers" in sys.modules, result.structured_content["stores"][0]["user_id"])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["17", "False", "True", "default"]
