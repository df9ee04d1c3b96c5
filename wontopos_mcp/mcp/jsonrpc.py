"""One inbound JSON-RPC message, decoded the way every transport needs it: into a message
the MCP SDK can dispatch, or into the refusal that answers it.

Why this exists: the SDK (mcp 2.3.0) parses with pydantic-core's JSON parser, which
refuses a lone surrogate escape (``"\\ud800"``) and any value inside more than 200 nested
arrays/objects, and over stdio and SSE a message it cannot parse or validate is handed on
as an exception that the dispatcher drops (``JSONRPCDispatcher._dispatch`` logs it at
debug and returns; the server sets no ``on_stream_exception``). The client then waits
forever. :func:`decode` answers every such message instead:

- not UTF-8, or not JSON: ``-32700`` parse error, ``id`` null (a line that is not
  UTF-8 but parses once repaired gets its request's ``id``, so its caller stops waiting);
- a JSON array (a batch; MCP has had none since 2025-06-18): refused whole, nothing in it
  runs: ``-32600`` once per element that carries a request ``id`` on a stream transport
  (stdio, SSE), so each waiting call ends; over Streamable HTTP one POST gets one answer,
  with ``id`` null unless the batch held exactly one request (as the SDK's own 2026 path
  answers a batch);
- a value inside more than ``MAX_NESTING`` arrays/objects (:mod:`rules.json_values`,
  where the tool arguments' rules live, shared with REST): ``-32602`` with the request's
  ``id`` (recovered from a shallow copy when even the standard library cannot parse that
  deep);
- not a JSON-RPC message (``{}``, ``"params": 5``): ``-32600`` with the ``id`` when it has one;
- a ``tools/call`` whose ``name`` is not a string or whose ``arguments`` is not an object
  (``[1, 2]``): ``-32602`` with the request's ``id``, naming what is wrong (the SDK's own
  answer names nothing: ``data: ""``);
- a ``method`` with an ``id`` that is neither a string nor an integer (null, ``1.5``,
  ``1e2``, ``true``, an array, an object): ``-32600`` with ``id`` null, since that id
  cannot be echoed. The SDK would validate it as a notification (its notification model
  ignores the extra key) and never answer; a real notification has no ``id`` key at all;
- a lone surrogate: in a ``tools/call``'s arguments (or tool name) the call's normal
  result, a 400 ``invalid_request_error`` naming the argument in ``field``
  (:class:`ToolRefusal`); anywhere else ``-32602`` (inside ``params``) or ``-32600`` (the
  envelope).

Only a request's ``id`` is ever echoed (never a response's, whose ``id`` is ours); every
other refusal carries ``id`` null. A message pydantic-core parses is decoded exactly as
the SDK would decode it, so the fast path costs one parse; the standard library's parser
only looks at what pydantic-core refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pydantic_core
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from wontopos_mcp.errors import InvalidRequestError
from wontopos_mcp.rules.json_values import MAX_NESTING, field_path, lone_surrogate_error, scan
from wontopos_mcp.rules.validation import SURROGATE, not_unicode

__all__ = ["Decoded", "Refusal", "ToolRefusal", "decode"]

# A JSON string token or one bracket: enough to cut a message down to its top levels.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


@dataclass(frozen=True)
class Refusal:
    """A message that cannot be dispatched, and the JSON-RPC error that answers it:
    one per entry of ``ids`` on a stream, one in all over HTTP."""

    code: int
    message: str
    ids: tuple[RequestId | None, ...] = (None,)
    data: Any = None  # ``ErrorData.data`` when set: ``{"field": ...}`` naming the parameter at fault

    def answers(self) -> list[JSONRPCError]:
        """What a stream transport (stdio, SSE) writes back."""
        return [self._error(request_id) for request_id in self.ids]

    def answer(self) -> JSONRPCError:
        """What one HTTP response carries: the request's ``id`` if there is exactly one."""
        return self._error(self.ids[0] if len(self.ids) == 1 else None)

    def _error(self, request_id: RequestId | None) -> JSONRPCError:
        error = ErrorData(code=self.code, message=self.message, data=self.data)
        return JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


@dataclass(frozen=True)
class ToolRefusal:
    """A ``tools/call`` refused before it runs: answered as the tool's own error result."""

    id: RequestId
    error: InvalidRequestError


Decoded = SessionMessage | Refusal | ToolRefusal


def decode(data: bytes | str) -> Decoded:
    """One message off the wire (a stdio line or an HTTP body) into what answers it."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            repaired = _loads_or_none(data.decode("utf-8", errors="replace"))
            return Refusal(
                PARSE_ERROR,
                f"Parse error: the message is not UTF-8 ({exc.reason} at byte {exc.start})",
                (_request_id(repaired),),
            )
    else:
        text = data
    try:
        value = pydantic_core.from_json(text)
    except ValueError:
        return _lenient(text)
    return _message(value)


def _lenient(text: str) -> Decoded:
    """What pydantic-core refused, read by the standard library: a syntax error stays one;
    a lone surrogate or too deep a nesting gets its own answer."""
    try:
        value = json.loads(text)
    except RecursionError:
        return _too_deep(_loads_or_none(_top_levels(text)))
    except ValueError as exc:
        return Refusal(PARSE_ERROR, f"Parse error: {exc}")
    if isinstance(value, list):
        return _batch(value)
    flaw = scan(value)
    if flaw == "deep":
        return _too_deep(value)
    if isinstance(flaw, tuple):
        return _surrogate(value, flaw)
    return _message(value)


def _message(value: Any) -> Decoded:
    if isinstance(value, list):
        return _batch(value)
    odd_id = _odd_request_id(value)
    if odd_id is not None:
        return Refusal(
            INVALID_REQUEST,
            f"Invalid Request: a request's id must be a string or an integer, not {odd_id}",
        )
    try:
        message = jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"][1:]) or "message"
        return Refusal(
            INVALID_REQUEST,
            f"Invalid Request: not a JSON-RPC 2.0 request, notification or response ({where}: {first['msg']})",
            (_request_id(value),),
        )
    flaw = _tool_call_flaw(value)
    if flaw is not None:
        field, reason = flaw
        return Refusal(INVALID_PARAMS, f"Invalid params: {reason}", (_request_id(value),), {"field": field})
    return SessionMessage(message)


def _tool_call_flaw(value: Any) -> tuple[str, str] | None:
    """(the parameter, what is wrong with it) for a ``tools/call`` request whose ``name`` or
    ``arguments`` is malformed (the SDK answers these -32602 with ``data: ""``, naming nothing)."""
    if not isinstance(value, dict) or value.get("method") != "tools/call" or "id" not in value:
        return None
    params = value.get("params")
    if not isinstance(params, dict):
        return None  # absent: the SDK's own -32602 says the name is missing; not an object: -32600 above
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str):
        return "name", f"tools/call needs params.name, the tool's name as a string; got {_kind(name)}"
    if arguments is not None and not isinstance(arguments, dict):
        reason = (
            f"params.arguments of tools/call must be an object of the tool's arguments by name "
            f'(e.g. {{"query": "..."}}); got {_kind(arguments)}'
        )
        return "arguments", reason
    return None


def _kind(value: Any) -> str:
    """A JSON value's kind, as a message names it: ``an array``, ``a number``, ``nothing``."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else "an object"


def _batch(items: list[Any]) -> Refusal:
    ids = tuple(i for i in map(_request_id, items) if i is not None)
    return Refusal(
        INVALID_REQUEST,
        "Invalid Request: batches are not supported (MCP removed them in 2025-06-18); send one message at a time",
        ids or (None,),
    )


def _too_deep(value: Any) -> Refusal:
    return Refusal(
        INVALID_PARAMS,
        f"Invalid params: the message nests values inside more than {MAX_NESTING} arrays or objects",
        (_request_id(value),),
    )


def _surrogate(value: dict[str, Any], path: tuple[str | int, ...]) -> Decoded:
    request_id = _request_id(value)
    params = value.get("params")
    if (
        request_id is not None
        and value.get("jsonrpc") == "2.0"
        and value.get("method") == "tools/call"
        and isinstance(params, dict)
        and path[:1] == ("params",)
    ):
        error = lone_surrogate_error(params.get("name"), params.get("arguments"))
        if error is not None:
            return ToolRefusal(request_id, error)
    inside_params = path[:1] == ("params",)
    return Refusal(
        INVALID_PARAMS if inside_params else INVALID_REQUEST,
        f"{'Invalid params' if inside_params else 'Invalid Request'}: {not_unicode(field_path(path) or 'message')}",
        (request_id,),
    )


def _request_id(value: Any) -> RequestId | None:
    """The ``id`` an answer may carry: a request's (never a response's, whose id is ours),
    when it is an integer or a string of valid Unicode."""
    if not isinstance(value, dict) or "result" in value or "error" in value:
        return None
    request_id = value.get("id")
    if _is_request_id(request_id) and not (isinstance(request_id, str) and SURROGATE.search(request_id)):
        return request_id
    return None


def _is_request_id(value: Any) -> bool:
    """A string or an integer: what MCP (and the SDK's strict ``RequestId``) takes for an id."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _odd_request_id(value: Any) -> str | None:
    """What is wrong with a request's ``id`` (``"null"``, ``"a number with a fraction or
    exponent (1.5)"``), or None when it has none or a string or integer one."""
    if not isinstance(value, dict) or "method" not in value or "id" not in value:
        return None
    request_id = value["id"]
    if _is_request_id(request_id):
        return None
    if request_id is None:
        return "null"
    if isinstance(request_id, bool):
        return f"a boolean ({json.dumps(request_id)})"
    if isinstance(request_id, float):
        return f"a number with a fraction or exponent ({request_id!r})"
    return "an array" if isinstance(request_id, list) else "an object"


def _loads_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _top_levels(text: str) -> str:
    """``text`` with every array/object below the second level replaced by null: enough
    to read a message's ``id`` (or a batch's) when the whole is too deep to parse."""
    out: list[str] = []
    depth = 0
    kept = 0
    for token in _TOKEN.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            if depth == 3:
                out.append(text[kept : token.start()])
        elif bracket in "]}":
            if depth == 3:
                out.append("null")
                kept = token.end()
            depth -= 1
    if depth >= 3:
        return ""  # unbalanced: no id to recover
    out.append(text[kept:])
    return "".join(out)
