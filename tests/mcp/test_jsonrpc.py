"""The wire decoder: every message either becomes what the SDK would dispatch or gets its
answer (-32700 parse error; -32600/-32602 with the request's id when it has one; a 400
``invalid_request_error`` naming the field for a lone surrogate in a tool's arguments).
No service, no model: pure decoding, plus one in-process call through the real server for
the check inside ``call_tool``."""

from __future__ import annotations

import json
from typing import Any

import pydantic_core
import pytest
from mcp import Client
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    JSONRPCNotification,
    JSONRPCRequest,
    jsonrpc_message_adapter,
)

from wontopos_mcp.mcp.jsonrpc import Refusal, ToolRefusal, decode
from wontopos_mcp.mcp.server import build_server
from wontopos_mcp.rules.json_values import MAX_NESTING, lone_surrogate_error


def _call(tool: str, arguments: Any, request_id: int | str = 7) -> str:
    """A tools/call as raw JSON text: ``arguments`` is already JSON (so it may hold
    escapes, like a lone ``\\ud800``, that no Python object serialises to)."""
    return (
        f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"method":"tools/call",'
        f'"params":{{"name":"{tool}","arguments":{arguments}}}}}'
    )


def _nested(levels: int, inner: str = "1") -> str:
    return "[" * levels + inner + "]" * levels


def _refusal(data: bytes | str) -> Refusal:
    decoded = decode(data)
    assert isinstance(decoded, Refusal), decoded
    return decoded


def test_a_well_formed_request_decodes_as_the_sdk_decodes_it() -> None:
    line = '{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"a\\ud83d\\ude00"}}'
    decoded = decode(line.encode())
    assert isinstance(decoded, SessionMessage)
    assert decoded.message == jsonrpc_message_adapter.validate_json(line, by_name=False)
    assert isinstance(decoded.message, JSONRPCRequest)
    assert decoded.message.params == {"cursor": "a😀"}


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":10,"method":"tools/li',
        b"hello",
        b'{"jsonrpc":"2.0","id":1,"method":"x",}',
        b"",
    ],
    ids=["truncated", "not-json", "trailing-comma", "empty"],
)
def test_text_that_is_not_json_is_a_parse_error_with_id_null(line: bytes) -> None:
    refusal = _refusal(line)
    assert refusal.code == PARSE_ERROR
    assert refusal.message.startswith("Parse error")
    assert [a.id for a in refusal.answers()] == [None]
    assert refusal.answer().id is None


def test_bytes_that_are_not_utf8_are_a_parse_error_that_keeps_the_request_id() -> None:
    refusal = _refusal(b'{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"\xff"}}')
    assert refusal.code == PARSE_ERROR
    assert "not UTF-8" in refusal.message
    assert refusal.answer().id == 16


def test_a_batch_is_refused_whole_with_one_answer_per_request_id_on_a_stream() -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 11, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "b", "method": "ping"},
    ]
    refusal = _refusal(json.dumps(batch).encode())
    assert refusal.code == INVALID_REQUEST
    assert "batch" in refusal.message
    assert [a.id for a in refusal.answers()] == [11, "b"]
    assert refusal.answer().id is None  # one HTTP answer for two requests


@pytest.mark.parametrize("batch", ["[]", '[{"jsonrpc":"2.0","method":"notifications/initialized"}]', "[1,2]"])
def test_a_batch_without_a_request_id_gets_one_answer_with_id_null(batch: str) -> None:
    refusal = _refusal(batch)
    assert refusal.code == INVALID_REQUEST
    assert [a.id for a in refusal.answers()] == [None]


def test_a_batch_of_one_request_answers_with_its_id_over_http_too() -> None:
    refusal = _refusal('[{"jsonrpc":"2.0","id":4,"method":"tools/list"}]')
    assert refusal.answer().id == 4


def test_the_nesting_limit_is_the_sdk_parsers_own() -> None:
    # A value may sit inside MAX_NESTING containers: pydantic-core (what the SDK parses
    # with) takes exactly that, and refuses one more. If an upgrade moves its limit,
    # this fails, and MAX_NESTING must follow.
    pydantic_core.from_json(_nested(MAX_NESTING))
    pydantic_core.from_json(_nested(MAX_NESTING + 1, ""))  # the innermost [] holds nothing
    with pytest.raises(ValueError, match="recursion"):
        pydantic_core.from_json(_nested(MAX_NESTING + 1))
    # The whole message counts: the arguments sit inside the message, params, arguments.
    assert isinstance(decode(_call("memory_add", f'{{"content":{_nested(MAX_NESTING - 3)}}}')), SessionMessage)
    assert isinstance(decode(_call("memory_add", f'{{"content":{_nested(MAX_NESTING - 2)}}}')), Refusal)


@pytest.mark.parametrize("levels", [300, 5000], ids=["stdlib-parses-it", "too-deep-even-for-stdlib"])
def test_too_deep_a_request_is_invalid_params_with_its_id(levels: int) -> None:
    refusal = _refusal(_call("memory_add", f'{{"content":{_nested(levels)}}}', request_id="deep-1"))
    assert refusal.code == INVALID_PARAMS
    assert str(MAX_NESTING) in refusal.message
    assert refusal.answer().id == "deep-1"
    assert [a.id for a in refusal.answers()] == ["deep-1"]


def test_too_deep_a_notification_or_response_is_answered_with_id_null() -> None:
    notification = f'{{"jsonrpc":"2.0","method":"notifications/x","params":{{"a":{_nested(300)}}}}}'
    response = f'{{"jsonrpc":"2.0","id":5,"result":{{"a":{_nested(300)}}}}}'
    assert _refusal(notification).answer().id is None
    assert _refusal(response).answer().id is None  # a response's id is ours, never echoed


@pytest.mark.parametrize(
    ("line", "request_id"),
    [
        ("{}", None),
        ('{"jsonrpc":"2.0","id":15}', 15),
        ('{"jsonrpc":"2.0","id":17,"method":"tools/call","params":5}', 17),
        ('{"jsonrpc":"1.0","id":"x","method":"ping"}', "x"),
        ("42", None),
    ],
    ids=["empty-object", "no-method", "params-not-object", "wrong-version", "bare-number"],
)
def test_json_that_is_not_a_json_rpc_message_is_an_invalid_request(line: str, request_id: Any) -> None:
    refusal = _refusal(line)
    assert refusal.code == INVALID_REQUEST
    assert refusal.message.startswith("Invalid Request")
    assert refusal.answer().id == request_id


ODD_IDS = ["null", "1.5", "1e2", "1.0", "true", "false", "[1]", '{"a":1}']


@pytest.mark.parametrize("odd_id", ODD_IDS)
def test_a_request_whose_id_is_not_a_string_or_integer_is_invalid_with_id_null(odd_id: str) -> None:
    """The SDK would take it for a notification (whose model ignores the extra ``id``) and
    never answer; JSON-RPC answers it with ``id`` null, as that id cannot be echoed."""
    line = f'{{"jsonrpc":"2.0","id":{odd_id},"method":"ping"}}'
    assert isinstance(jsonrpc_message_adapter.validate_json(line, by_name=False), JSONRPCNotification)
    refusal = _refusal(line)
    assert refusal.code == INVALID_REQUEST
    assert "id must be a string or an integer" in refusal.message
    assert [a.id for a in refusal.answers()] == [None]
    assert refusal.answer().id is None


def test_an_odd_id_is_named_in_the_refusal() -> None:
    assert _refusal('{"jsonrpc":"2.0","id":1e2,"method":"ping"}').message.endswith("exponent (100.0)")
    assert _refusal('{"jsonrpc":"2.0","id":true,"method":"ping"}').message.endswith("a boolean (true)")


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc":"2.0","method":"notifications/initialized"}',  # a notification: no id key at all
        '{"jsonrpc":"2.0","id":0,"method":"ping"}',
        '{"jsonrpc":"2.0","id":"","method":"ping"}',
        '{"jsonrpc":"2.0","id":-12345678901234567890,"method":"ping"}',
        '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}',  # a client's error reply
    ],
    ids=["notification", "zero", "empty-string", "big-negative", "error-response"],
)
def test_a_notification_and_string_or_integer_ids_pass_through_unchanged(line: str) -> None:
    decoded = decode(line)
    assert isinstance(decoded, SessionMessage)
    assert decoded.message == jsonrpc_message_adapter.validate_json(line, by_name=False)


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("speaker_register", '{"speaker":"a\\ud800b"}', "speaker"),
        ("memory_add", '{"content":"x\\udfff","speaker":"Bob"}', "content"),
        ("memory_add_messages", '{"messages":[{"role":"user","content":"ok"},{"role":"user","content":"\\ud83d"}]}',
         "messages[1].content"),
        ("memory_search", '{"query":"q","filters":{"categories":["a","\\ude00"]}}', "filters.categories[1]"),
        ("memory_add", '{"content":"x","\\ud800":1}', "arguments"),
    ],
    ids=["speaker", "content", "nested-message", "nested-filter", "argument-name"],
)  # fmt: skip
def test_a_lone_surrogate_in_a_tools_arguments_is_the_tools_400_naming_the_field(
    tool: str, arguments: str, field: str
) -> None:
    decoded = decode(_call(tool, arguments).encode())
    assert isinstance(decoded, ToolRefusal)
    assert decoded.id == 7
    envelope = decoded.error.envelope()
    assert envelope["status"] == 400
    assert envelope["error"]["type"] == "invalid_request_error"
    assert envelope["error"]["field"] == field
    json.dumps(envelope).encode("utf-8")  # nothing of the bad text is echoed


def test_a_lone_surrogate_in_the_tool_name_names_name() -> None:
    decoded = decode('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x\\ud800","arguments":{}}}')
    assert isinstance(decoded, ToolRefusal)
    assert decoded.error.field == "name"


@pytest.mark.parametrize(
    ("line", "code", "request_id"),
    [
        ('{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"clientInfo":{"name":"\\ud800"}}}',
         INVALID_PARAMS, 2),
        ('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","_meta":{"k":"\\ud800"}}}',
         INVALID_PARAMS, 3),
        ('{"jsonrpc":"2.0","id":4,"method":"\\ud800"}', INVALID_REQUEST, 4),
        ('{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', INVALID_REQUEST, None),
        ('{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x","arguments":{"a":"\\ud800"}}}',
         INVALID_PARAMS, None),
    ],
    ids=["initialize-params", "tool-meta", "method", "id-itself", "tools-call-notification"],
)  # fmt: skip
def test_a_lone_surrogate_anywhere_else_is_a_json_rpc_error(line: str, code: int, request_id: Any) -> None:
    refusal = _refusal(line)
    assert refusal.code == code
    assert "lone surrogate" in refusal.message
    assert refusal.answer().id == request_id


def test_the_in_process_check_finds_nothing_in_well_formed_arguments() -> None:
    assert lone_surrogate_error("memory_add", {"content": "a😀", "nested": [{"k": ["v"]}]}) is None
    assert lone_surrogate_error("memory_add", None) is None


@pytest.mark.anyio
async def test_an_in_process_call_with_a_lone_surrogate_is_refused_before_the_service(service) -> None:
    server = build_server(service)
    async with Client(server) as client:
        result = await client.call_tool("memory_add", {"content": "bad \ud800 text"})
        assert result.is_error
        assert result.structured_content["error"]["field"] == "content"
    # The SDK's client cannot even send such a tool name; the method it calls can get one.
    unknown = await server.call_tool("no\udc00such", {})
    assert unknown.is_error
    assert unknown.structured_content["error"]["field"] == "name"
    json.dumps(unknown.structured_content).encode("utf-8")  # the bad name is not echoed
    assert service.memory_list()["memories"] == []


@pytest.mark.parametrize(
    ("params", "field", "said"),
    [
        ('{"name":"memory_add","arguments":[1,2]}', "arguments", "got an array"),
        ('{"name":"memory_add","arguments":"content=x"}', "arguments", "got a string"),
        ('{"name":"memory_add","arguments":5}', "arguments", "got a number"),
        ('{"name":5,"arguments":{}}', "name", "got a number"),
        ('{"arguments":{}}', "name", "got nothing"),
    ],
)
def test_a_tool_call_with_malformed_arguments_is_32602_naming_what_is_wrong(params: str, field: str, said: str) -> None:
    refusal = _refusal(f'{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{params}}}')
    assert (refusal.code, refusal.ids) == (INVALID_PARAMS, (9,))
    assert said in refusal.message
    assert f"params.{field}" in refusal.message
    wire = refusal.answer().model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["error"]["data"] == {"field": field}


def test_a_tool_call_without_arguments_or_with_null_ones_still_reaches_the_tool() -> None:
    for params in ('{"name":"stores_list"}', '{"name":"stores_list","arguments":null}'):
        decoded = decode(f'{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{params}}}')
        assert isinstance(decoded, SessionMessage), decoded
