"""What a ``tools/call`` answers: the same JSON as text and as structured content.

Apart from the tools, because the server maps refusals to results before the tools
exist (they are built at the first call: :mod:`mcp.listing`).
"""

import json
from collections.abc import Mapping
from typing import Any

from mcp.types import CallToolResult, TextContent

from wontopos_mcp.errors import WontoposError

__all__ = ["error_result", "json_result"]


def json_result(payload: Mapping[str, Any], *, is_error: bool = False) -> CallToolResult:
    """The same JSON as text (what the model reads) and as structured content (what the
    host reads)."""
    text = json.dumps(payload, ensure_ascii=False, default=str)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=json.loads(text),
        is_error=is_error,
    )


def error_result(exc: WontoposError) -> CallToolResult:
    """A refusal as MCP carries it: ``isError`` and ``exc.envelope()``, structured and as text."""
    return json_result(exc.envelope(), is_error=True)
