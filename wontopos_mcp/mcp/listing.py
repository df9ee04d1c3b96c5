"""The tools as ``tools/list`` shows them, shipped with the package in ``listing.json``.

Building the 17 tools (a pydantic model for each one's arguments and answers) costs about
40 ms of every start, more than the rest of the package's start-up together, and a host
lists the tools before it calls one. So the server answers ``tools/list`` from this file
and builds the tools themselves at the first call (:class:`mcp.server.WontoposMCPServer`).

The file is generated from the tools, never written by hand:
``python -m wontopos_mcp.mcp.listing`` rewrites it, and a test fails when it differs from
what the tools build. Settings that a description names (the speaker limit) are kept as
``{name}`` placeholders and filled in when the listing is read.
"""

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from mcp.types import Tool as MCPTool

if TYPE_CHECKING:
    from wontopos_mcp.engine.service import MemoryService

__all__ = ["described_speaker_limit", "generate", "listing"]

FILE = "listing.json"
PLACEHOLDERS = ("speaker_limit",)


@cache
def _text() -> str:
    return resources.files(__package__).joinpath(FILE).read_text(encoding="utf-8")


def described_speaker_limit(service: "MemoryService") -> str:
    """How many people a store may register, as the descriptions say it: the service's setting."""
    return str(service.speaker_limit)


def listing(**values: str) -> list[MCPTool]:
    """The tools' listing with each placeholder filled in (``speaker_limit="50"``)."""
    text = _text()
    for name in PLACEHOLDERS:
        text = text.replace("{" + name + "}", json.dumps(values[name])[1:-1])
    return [MCPTool.model_validate(tool) for tool in json.loads(text)]


def generate() -> list[dict[str, Any]]:
    """The listing as the tools build it and the SDK lists them, placeholders kept: what
    ``listing.json`` holds."""
    import anyio
    from mcp.server import MCPServer

    from .tools import tools

    built = tools(None, **{name: "{" + name + "}" for name in PLACEHOLDERS})  # type: ignore[arg-type]  # no calls are made
    listed = anyio.run(MCPServer(tools=built).list_tools)
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed]


def main() -> None:
    path = resources.files(__package__).joinpath(FILE)
    with resources.as_file(path) as target:
        target.write_text(json.dumps(generate(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
