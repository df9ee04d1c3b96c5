"""What a ``tools/call`` answers: the same JSON as text and as structured content; and a
refusal where there is no result to carry it (resources, prompts).

Apart from the tools, because the server maps refusals to results before the tools
exist (they are built at the first call: :mod:`mcp.listing`).
"""

import json
from collections.abc import Mapping
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent

from wontopos_mcp.errors import WontoposError

__all__ = ["error_result", "json_result", "protocol_error"]


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


def protocol_error(exc: WontoposError, **data: Any) -> MCPError:
    """A refusal where MCP has no result to carry it (a resource read, a prompt): a JSON-RPC
    error whose ``data`` is the error body (and ``data``'s keys, the ``uri``). A refusal of
    the caller's input (a 4xx: an unknown store or speaker is the resource-not-found error)
    is ``-32602``, as the SDK answers an unknown resource; a 5xx is ``-32603``."""
    code = INVALID_PARAMS if exc.status < 500 else INTERNAL_ERROR
    return MCPError(code=code, message=exc.message, data={**data, **exc.envelope()})
