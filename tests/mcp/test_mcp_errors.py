"""Every refusal of the MCP face is the structured error body (``{"type": "error", "status",
"error": {"type", "message", ...}}``, the ``structuredContent`` of an ``isError`` result),
including the argument errors the SDK's own validation would otherwise answer as plain text.

The argument tests call every tool raw (the client does not validate inputs) against a
real service. The mapping tests pass a small fake service to ``build_server``: they test
the adapter's one error mapping, not storage.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from mcp import Client
from support import REPO, TOOLS, Session, mcp_session

from wontopos_mcp import errors
from wontopos_mcp.mcp.server import build_server

pytestmark = pytest.mark.anyio

# A valid value for each required parameter, so exactly one thing is wrong per call.
VALID = {
    "content": "hello",
    "query": "hello",
    "speaker": "Bob",
    "memory_id": "some-id",
    "user_id": "default",
    "messages": [{"role": "user", "content": "hello"}],
    "new_name": "Robert",
    "into": "Carol",
    "confirm_records": 0,
}


@pytest.fixture
async def mcp(service) -> AsyncIterator[Session]:
    async with mcp_session(service) as session:
        yield session


def _required(mcp: Session, name: str) -> dict[str, Any]:
    schema = mcp.tools[name].input_schema
    return {param: VALID[param] for param in schema.get("required", [])}


def _kinds(prop: dict[str, Any]) -> set[str]:
    arms = prop.get("anyOf", [prop])
    return {arm["type"] for arm in arms if arm.get("type") not in (None, "null")}


def _wrong_values(prop: dict[str, Any]) -> list[Any]:
    """Values of the wrong JSON type for a parameter."""
    kinds = _kinds(prop)
    if kinds == {"string"}:
        return [12345, ["a"], {"a": 1}, True]
    if kinds == {"integer"}:
        return ["ten", "10", 10.5, True, [10]]
    if kinds == {"boolean"}:
        return ["yes", "true", 1]
    if kinds == {"object"}:
        return [[1, 2], 7, "not json"]
    if kinds == {"array"}:
        return [7, "a", ["a", 1], {"a": "b"}]
    raise AssertionError(f"no wrong values for {prop}")


def _field_of(prop: dict[str, Any], param: str, wrong: Any) -> str:
    """The field a wrong value is refused under: the parameter, or for a list of objects
    (checked item by item, as the core does) the first item that is not one."""
    if isinstance(wrong, list) and prop.get("items", {}).get("type") == "object":
        return f"{param}[0]"
    return param


# --- argument errors, raw, on every tool ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TOOLS))
async def test_unknown_arguments_are_400_naming_the_argument(mcp: Session, name: str) -> None:
    error = await mcp.refused(
        name, {**_required(mcp, name), "bogus_arg": 1}, status=400, type="invalid_request_error", field="bogus_arg"
    )
    assert "bogus_arg" in error["message"]


async def test_stores_list_takes_no_user_id(mcp: Session) -> None:
    await mcp.refused("stores_list", {"user_id": "default"}, status=400, type="invalid_request_error", field="user_id")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TOOLS))
async def test_missing_required_arguments_are_400_naming_them(mcp: Session, name: str) -> None:
    required = _required(mcp, name)
    for param in required:
        args = {k: v for k, v in required.items() if k != param}
        error = await mcp.refused(name, args, status=400, type="invalid_request_error", field=param)
        assert error["message"] == f"{param} is required"
        await mcp.refused(name, {**args, param: None}, status=400, type="invalid_request_error", field=param)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TOOLS))
async def test_wrongly_typed_arguments_are_400_naming_them(mcp: Session, name: str) -> None:
    base = _required(mcp, name)
    for param, prop in mcp.tools[name].input_schema.get("properties", {}).items():
        for wrong in _wrong_values(prop):
            error = await mcp.refused(
                name,
                {**base, param: wrong},
                status=400,
                type="invalid_request_error",
                field=_field_of(prop, param, wrong),
            )
            assert error["message"].startswith(param), error


@pytest.mark.parametrize("name", sorted(TOOLS))
async def test_out_of_range_numbers_are_400_naming_them(mcp: Session, name: str) -> None:
    base = _required(mcp, name)
    for param, prop in mcp.tools[name].input_schema.get("properties", {}).items():
        for bound, step in (("minimum", -1), ("maximum", 1)):
            if bound in prop:
                error = await mcp.refused(
                    name, {**base, param: prop[bound] + step}, status=400, type="invalid_request_error", field=param
                )
                assert "must be" in error["message"]


async def test_range_errors_read_like_the_services_own(mcp: Session) -> None:
    error = await mcp.refused("memory_search", {"query": "x", "limit": 21}, status=400, type="invalid_request_error")
    assert error == {
        "type": "invalid_request_error",
        "message": "limit must be between 1 and 20, got 21",
        "field": "limit",
    }
    error = await mcp.refused(
        "memory_forget", {"speaker": "Bob", "confirm_records": -1}, status=400, type="invalid_request_error"
    )
    assert error["field"] == "confirm_records"
    assert "at least 0" in error["message"]


@pytest.mark.slow
async def test_one_unregistered_name_refuses_memory_add_messages_and_stores_nothing(mcp: Session) -> None:
    await mcp.ok("speaker_register", speaker="Bob")
    await mcp.ok("memory_add", content="Already here.")
    before = await mcp.ok("memory_list")
    messages = [
        {"role": "user", "content": "Let's start."},
        {"role": "tool", "name": "calculator", "content": "4"},  # a tool's name is never checked
        {"role": "user", "name": "Bob", "content": "I have the figures."},
        {"role": "assistant", "name": "Zed", "content": "I disagree."},
    ]
    error = await mcp.refused(
        "memory_add_messages",
        {"messages": messages},
        status=400,
        type="invalid_request_error",
        field="messages[3].name",
    )
    assert error["speaker"] == "Zed"
    assert "speaker_register" in error["message"]
    assert await mcp.ok("memory_list") == before


@pytest.mark.slow
async def test_malformed_messages_are_400_naming_the_message(mcp: Session) -> None:
    cases: list[tuple[Any, str, dict[str, Any]]] = [
        ([{"role": "user", "content": f"Turn {i}."} for i in range(101)], "messages", {"max_items": 100}),
        ([{"role": "user", "content": "x" * 30_000} for _ in range(7)], "messages", {"max_chars": 200_000}),
        ([], "messages", {}),
        ([{"role": "user", "content": "hi"}, {"role": "narrator", "content": "hi"}], "messages[1].role", {}),
        ([{"role": "user", "content": "hi", "speaker": "Bob"}], "messages[0].speaker", {}),
        ([{"role": "user", "content": "hi"}, "hello"], "messages[1]", {}),
        ([{"role": "user", "content": ""}], "messages[0].content", {}),
        ("not a list", "messages", {}),
    ]
    for messages, field, details in cases:
        error = await mcp.refused(
            "memory_add_messages", {"messages": messages}, status=400, type="invalid_request_error", field=field
        )
        assert {key: error.get(key) for key in details} == details, error
    assert (await mcp.ok("memory_list"))["count"] == 0


async def test_memory_recall_limits_out_of_range_are_400_naming_them(mcp: Session) -> None:
    for arguments, field in [
        ({"limit": 0}, "limit"),
        ({"limit": 21}, "limit"),
        ({"context_limit": -1}, "context_limit"),
        ({"context_limit": 21}, "context_limit"),
        ({"context_limit": "5"}, "context_limit"),
    ]:
        error = await mcp.refused(
            "memory_recall", {"query": "x", **arguments}, status=400, type="invalid_request_error", field=field
        )
        assert error["message"].startswith(field), error


async def test_an_unknown_tool_is_400_naming_it(mcp: Session) -> None:
    result = await mcp.client.call_tool("memory_delete_everything", {})
    assert result.is_error
    assert result.structured_content["status"] == 400
    assert result.structured_content["error"]["field"] == "name"
    assert result.structured_content["error"]["tool"] == "memory_delete_everything"


@pytest.mark.slow
async def test_null_for_an_optional_argument_means_not_given(mcp: Session) -> None:
    stored = await mcp.ok("memory_add", content="Tea at five.", speaker=None, category=None, user_id=None)
    assert "speaker" not in stored
    assert stored["user_id"] == "default"
    listed = await mcp.ok("memory_list", cursor=None)
    assert listed["memories"][0]["category"] == "general"
    # Limits and flags too: clients that send null for every optional field get the defaults.
    found = await mcp.ok("memory_search", query="tea", limit=None, include_superseded=None, max_chars=None)
    assert [m["content"] for m in found["memories"]] == ["Tea at five."]
    assert (await mcp.ok("memory_list", limit=None))["count"] == 1
    recalled = await mcp.ok("memory_recall", query="tea", limit=None, context_limit=None)
    assert len(recalled["long_term"]["memories"]) == 1
    await mcp.ok("by_speaker", speaker="me", limit=None)
    await mcp.refused("memory_search", {"query": "tea", "limit": "10"}, status=400, type="invalid_request_error")


async def test_arguments_sent_as_json_text_are_accepted_where_clients_do_that(mcp: Session) -> None:
    await mcp.ok("speaker_register", speaker="Bob")
    page = await mcp.ok("by_speaker", speaker="Bob", skip_ids='["a", "b"]')
    assert page["memories"] == []
    await mcp.ok("memory_search", query="tea", filters='{"categories": ["general"]}')


async def test_a_legacy_client_gets_the_same_envelope(service) -> None:
    async with mcp_session(service, "legacy") as session:
        await session.refused(
            "memory_search", {"query": "x", "limit": 50}, status=400, type="invalid_request_error", field="limit"
        )
        await session.refused("memory_add", {}, status=400, type="invalid_request_error", field="content")
        await session.refused("speakers_list", {"user_id": "nobody"}, status=404, type="not_found_error")


# --- the one mapping, through a fake service ------------------------------------------------------


ANSWERS: dict[str, dict[str, Any]] = {
    "speakers_list": {"user_id": "default", "speakers": [], "count": 0, "limit": 50},
    "store_create": {"user_id": "default", "status": "exists"},
    "stores_list": {"stores": [{"user_id": "default", "created_at": "2026-07-10T04:20:39.123456Z", "memories": 0}]},
}


class FakeService:
    """Answers from ``ANSWERS`` or raises ``error``; records each call and its thread."""

    speaker_limit = 50

    def __init__(self, error: BaseException | None = None, answers: dict[str, Any] | None = None) -> None:
        self.error = error
        self.answers = ANSWERS if answers is None else answers
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.started = 0

    def start(self) -> None:
        self.started += 1

    @contextmanager
    def reporting_model_waits(self, observer: Any) -> Iterator[None]:
        yield  # this stand-in never waits for a model

    def __getattr__(self, name: str) -> Any:
        if name not in TOOLS:
            raise AttributeError(name)

        def method(**kwargs: Any) -> dict[str, Any]:
            self.calls.append((name, kwargs, threading.current_thread().name))
            if self.error is not None:
                raise self.error
            return self.answers[name]

        return method


def _valid_arguments(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {param: VALID[param] for param in schema.get("required", [])}


def _error_for(cls: type[errors.WontoposError]) -> errors.WontoposError:
    return cls(f"refused by a {cls.__name__} for the test", field="speaker", speaker="Bob", retry_after_ms=1500)


@pytest.mark.parametrize("cls", errors.ALL_ERRORS, ids=lambda c: c.__name__)
async def test_every_wontopos_error_reaches_the_client_as_its_envelope(cls: type[errors.WontoposError]) -> None:
    exc = _error_for(cls)
    async with Client(build_server(FakeService(exc))) as client:
        mcp = Session(client)
        await mcp.load_tools()
        for name, tool in mcp.tools.items():
            result = await mcp.call(name, _valid_arguments(name, tool.input_schema))
            assert result.is_error, name
            assert result.structured_content == exc.envelope(), name
            assert result.structured_content["status"] == cls.status
            assert result.structured_content["error"]["type"] == cls.type
            assert result.structured_content["error"]["field"] == "speaker"


async def test_an_unexpected_exception_is_a_logged_500_without_internals(caplog) -> None:
    caplog.set_level(logging.ERROR, logger="wontopos_mcp")
    async with Client(build_server(FakeService(RuntimeError("secret internals /etc/passwd")))) as client:
        mcp = Session(client)
        await mcp.load_tools()
        result = await mcp.call("speakers_list")
    assert result.is_error
    assert result.structured_content == errors.internal_error().envelope()
    assert "secret" not in result.content[0].text
    logged = [r for r in caplog.records if r.name.startswith("wontopos_mcp")]
    assert logged
    assert logged[0].exc_info is not None
    assert "secret internals" in caplog.text  # the traceback stays on the server


async def test_an_answer_that_breaks_its_own_schema_is_a_logged_500(caplog) -> None:
    caplog.set_level(logging.ERROR, logger="wontopos_mcp")
    broken = {**ANSWERS, "speakers_list": {"user_id": "default", "speakers": None, "count": 0, "limit": 50}}
    async with Client(build_server(FakeService(answers=broken))) as client:
        mcp = Session(client)
        await mcp.load_tools()
        result = await mcp.call("speakers_list")
    assert result.is_error
    assert result.structured_content["status"] == 500
    assert any(r.exc_info for r in caplog.records if r.name.startswith("wontopos_mcp"))


async def test_tools_call_the_service_off_the_event_loop_and_omit_absent_arguments() -> None:
    service = FakeService()
    async with Client(build_server(service)) as client:
        mcp = Session(client)
        await mcp.load_tools()
        assert service.started >= 1  # the lifespan started the model load
        await mcp.ok("speakers_list")
        await mcp.ok("speakers_list", user_id="Alice")
        await mcp.ok("store_create")
        await mcp.ok("stores_list")
    calls = [(name, kwargs) for name, kwargs, _ in service.calls]
    assert calls == [
        ("speakers_list", {}),
        ("speakers_list", {"user_id": "Alice"}),
        ("store_create", {}),  # the core defaults the store itself
        ("stores_list", {}),
    ]
    loop_thread = threading.current_thread().name
    assert all(thread != loop_thread for _, _, thread in service.calls)


async def test_each_tool_calls_the_service_method_of_its_own_name() -> None:
    service = FakeService()
    service.answers = {name: {} for name in TOOLS}  # the answers' shapes do not matter here
    async with Client(build_server(service)) as client:
        mcp = Session(client)
        await mcp.load_tools()
        for name, tool in sorted(mcp.tools.items()):
            await mcp.call(name, _valid_arguments(name, tool.input_schema))
    assert [name for name, _, _ in service.calls] == sorted(TOOLS)


# A fresh interpreter: what an import loads shows only in a process that loaded nothing before.
@pytest.mark.slow
def test_importing_the_mcp_face_loads_no_storage_or_model_code() -> None:
    code = (
        "import sys, wontopos_mcp.mcp.server\n"
        "heavy = [m for m in ('lancedb', 'pyarrow', 'fastembed', 'onnxruntime', 'wontopos_mcp.storage.adapter', "
        "'wontopos_mcp.engine.service') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
