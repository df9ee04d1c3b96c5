"""The contract table is what every face says and what the core enforces.

Each face reads its parameters, defaults, ranges and REST names from
``wontopos_mcp.contract``; these tests prove that what the faces publish (MCP schemas,
REST endpoints, library signatures, CLI help) is the table, and that the core refuses
exactly outside the table's ranges and limits (the core still restates the ranges).
"""

from __future__ import annotations

import argparse
import ast
import inspect
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import TOOLS, open_service, settings_for

from wontopos_mcp import Memory, contract
from wontopos_mcp.cli.commands import add_commands
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.errors import InvalidRequestError
from wontopos_mcp.http.rest import ENDPOINTS
from wontopos_mcp.mcp import answers as models
from wontopos_mcp.mcp.server import build_server

RANGED = [
    (op, param)
    for op in contract.OPERATIONS.values()
    for param in op.params
    if param.low is not None and param.high is not None
]


class _NoCalls:
    """A stand-in service for listing tools: listing never calls the service."""

    speaker_limit = 7

    def start(self) -> None:
        pass


class _Called:
    """A stand-in service whose every method answers its own name."""

    def __getattr__(self, name: str) -> Any:
        return lambda **arguments: {"called": name}


def _mcp_tools() -> dict[str, Any]:
    async def listed() -> dict[str, Any]:
        return {tool.name: tool for tool in await build_server(_NoCalls()).list_tools()}

    return anyio.run(listed)


# --- the table itself ------------------------------------------------------------------------------


def test_the_table_holds_every_mcp_tool_and_the_rest_and_library_only_operations() -> None:
    assert {op.name for op in contract.OPERATIONS.values() if op.mcp} == TOOLS
    assert {op.name for op in contract.OPERATIONS.values() if not op.mcp} == {
        "delete_all", "add_turn", "add_bulk", "add_many", "stats", "history", "lineage", "revisions",
    }  # fmt: skip
    for op in contract.OPERATIONS.values():
        assert hasattr(MemoryService, op.core), op.name
        assert op.answers, op.name
        assert all(isinstance(m, type) for m in models.answer_models(op)), op.name
        names = [p.name for p in op.params]
        assert len(names) == len(set(names)), op.name


def test_the_table_imports_nothing_of_the_protocols_or_storage() -> None:
    source = Path(contract.__file__).read_text(encoding="utf-8")
    imported = {node.module or "" for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)} | {
        alias.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import) for alias in node.names
    }
    ours = {name for name in imported if name.startswith("wontopos_mcp")}
    assert imported - ours <= {"__future__", "collections.abc", "dataclasses", "typing"}, imported
    assert ours, ours
    assert all(name.startswith("wontopos_mcp.rules") for name in ours), ours  # the rules' own limits


def test_the_size_limits_are_the_cores_own_constants() -> None:
    from wontopos_mcp.rules import batch_items as batch
    from wontopos_mcp.rules import conversation, names, validation

    assert contract.MAX_CONTENT_CHARS is validation.MAX_CONTENT_CHARS == 32_000
    assert contract.MAX_MESSAGES is conversation.MAX_MESSAGES == 100
    assert contract.MAX_MESSAGES_CHARS is conversation.MAX_MESSAGES_CHARS == 200_000
    assert contract.MAX_BULK_CHARS is batch.MAX_BULK_CHARS == 500_000
    assert contract.MAX_SPEAKER_CHARS is names.MAX_SPEAKER_CHARS == 80


def test_the_ranges_are_spec_s() -> None:
    spans = {(op.name, p.name): (p.low, p.high, p.default) for op, p in RANGED}
    assert spans == {
        ("memory_search", "limit"): (1, 20, 10),
        ("memory_recall", "limit"): (1, 20, 10),
        ("memory_recall", "context_limit"): (0, 20, 10),
        ("memory_list", "limit"): (1, 500, 100),
        ("by_speaker", "limit"): (1, 20, 20),
        ("revisions", "limit"): (5, 20, 20),
        ("memory_search", "max_chars"): (1, 200_000, None),
        ("memory_recall", "max_chars"): (1, 200_000, None),
    }


def test_every_default_is_the_cores_own_and_a_face_fills_none() -> None:
    create = contract.operation("store_create")
    assert create.default("user_id") == "default"  # applied by MemoryService.store_create itself
    with pytest.raises(KeyError):
        create.param("limit")


# --- the faces publish the table -------------------------------------------------------------------


def test_mcp_schemas_carry_the_tables_ranges_defaults_and_descriptions() -> None:
    tools = _mcp_tools()
    for op in contract.OPERATIONS.values():
        if not op.mcp:
            continue
        properties = tools[op.name].input_schema["properties"]
        assert set(properties) == {p.name for p in op.params}, op.name
        for param in op.params:
            schema = properties[param.name]
            assert schema["description"].startswith(param.description), (op.name, param.name)
            if param.high is not None:
                assert (schema["minimum"], schema["maximum"]) == (param.low, param.high), (op.name, param.name)
                assert param.span not in schema["description"]  # the schema says it once, as numbers
            if param.default is not None and not param.required and param.name != "user_id":
                assert schema["default"] == param.default, (op.name, param.name)
        required = set(tools[op.name].input_schema.get("required", []))
        assert required == {p.name for p in op.params if p.required}, op.name
    assert tools["memory_add_messages"].input_schema["properties"]["messages"]["maxItems"] == contract.MAX_MESSAGES


def test_the_speaker_register_description_gives_the_servers_limit() -> None:
    description = _mcp_tools()["speaker_register"].description
    assert "up to 7 people" in description
    assert "`limit`" not in description


def test_the_memory_search_description_says_similarity_is_not_the_order() -> None:
    description = _mcp_tools()["memory_search"].description
    assert "not the ranking key" in description
    assert "best first" in description


def test_rest_endpoints_are_the_tables_routes_and_names() -> None:
    by_route = {(e.method, e.path): e for e in ENDPOINTS}
    for op in contract.OPERATIONS.values():
        if op.rest is None:
            continue
        endpoint = by_route[(op.rest.method, op.rest.path)]
        if op.name == "delete_all":  # {user_id} alone on memory_forget's route
            assert endpoint.name == "memory_forget"
            assert set(op.rest.names) <= set(endpoint.names)
            call, _ = endpoint.core_call({"user_id": "x"})
            assert call.run(_Called(), {}) == {"called": "delete_all"}
            continue
        assert endpoint.name == op.name
        assert endpoint.call(_Called(), {}) == {"called": op.core}, op.name
        if endpoint.prepare is not None:  # what the prepared call runs is still the route's own
            call, _ = endpoint.core_call({"memory_id": "m-1"} if op.name == "memory_forget" else {"user_msg": "hi"})
            assert call.run(_Called(), {}) == {"called": op.core}, op.name
        assert dict(endpoint.names) == dict(op.rest.names), op.name
    assert contract.operation("memory_search").rest.names["max_results"] == "limit"
    assert contract.operation("memory_supersede").caller_names() == {
        "memory_id": "old_memory_id", "content": "new_content",
    }  # fmt: skip
    assert contract.operation("memory_add").rest.names["metadata.speaker"] == "speaker"


def test_library_signatures_show_the_tables_defaults() -> None:
    for op in contract.OPERATIONS.values():
        if op.library is None:
            continue
        method = getattr(Memory, op.library)
        parameters = inspect.signature(method).parameters
        for param in op.params:
            shown = parameters.get(param.name)
            if shown is None or shown.default is inspect.Parameter.empty or param.default is None:
                continue  # required, renamed (SDK names), or without a default
            if shown.default is None:
                continue  # not sent: the core's default applies
            assert shown.default == param.default, (op.library, param.name)
    assert inspect.signature(Memory.search).parameters["limit"].default == 10
    assert inspect.signature(Memory.list_memories).parameters["limit"].default == 100


def test_cli_search_limit_is_the_tables() -> None:
    parser = argparse.ArgumentParser()
    add_commands(parser, lambda names: argparse.ArgumentParser(add_help=False))
    search = parser.parse_args(["search", "anything"])
    assert search.limit == contract.operation("memory_search").default("limit")
    help_text = parser._subparsers._group_actions[0].choices["search"].format_help()
    assert "1-20, default 10" in " ".join(help_text.split())


# --- the core enforces the table ---------------------------------------------------------------------


def test_the_cores_signature_defaults_are_the_tables() -> None:
    for op in contract.OPERATIONS.values():
        core = inspect.signature(getattr(MemoryService, op.core)).parameters
        for param in op.params:
            if param.name in core and param.low is not None and param.high is not None:
                assert core[param.name].default == param.default, (op.core, param.name)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Any:
    svc = open_service(settings_for(tmp_path_factory.mktemp("contract")), embedder)
    svc.memory_add("The lighthouse keeper feeds the gulls.", speaker="me")
    yield svc
    svc.close()


def _call(service: MemoryService, op: contract.Operation, **arguments: Any) -> dict[str, Any]:
    required = {"query": "gulls", "speaker": "me"}
    given = {name: value for name, value in required.items() if name in {p.name for p in op.params}}
    return getattr(service, op.core)(**given, **arguments)


@pytest.mark.slow
@pytest.mark.parametrize(("op", "param"), RANGED, ids=[f"{op.name}.{p.name}" for op, p in RANGED])
def test_the_core_refuses_exactly_outside_the_tables_range(
    service: MemoryService, op: contract.Operation, param: contract.Param
) -> None:
    for inside in (param.low, param.high):
        assert isinstance(_call(service, op, **{param.name: inside}), dict)
    for outside in (param.low - 1, param.high + 1):
        with pytest.raises(InvalidRequestError) as refused:
            _call(service, op, **{param.name: outside})
        assert refused.value.field == param.name


@pytest.mark.parametrize(
    ("core", "arguments", "field", "limit"),
    [
        ("memory_add", {"content": "x" * (contract.MAX_CONTENT_CHARS + 1)}, "content", contract.MAX_CONTENT_CHARS),
        ("memory_search", {"query": "x" * (contract.MAX_QUERY_CHARS + 1)}, "query", contract.MAX_QUERY_CHARS),
        (
            "memory_add_messages",
            {"messages": [{"role": "user", "content": "x" * 2_001}] * 100},
            "messages",
            contract.MAX_MESSAGES_CHARS,
        ),
        ("memory_add_bulk", {"content": "x" * (contract.MAX_BULK_CHARS + 1)}, "content", contract.MAX_BULK_CHARS),
    ],
)
def test_the_core_refuses_text_past_the_tables_size_limits(
    service: MemoryService, core: str, arguments: dict[str, Any], field: str, limit: int
) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        getattr(service, core)(**arguments)
    assert refused.value.field == field
    assert refused.value.details["max_chars"] == limit


def test_the_core_refuses_more_messages_than_the_table_allows(service: MemoryService) -> None:
    messages = [{"role": "user", "content": "hi"}] * (contract.MAX_MESSAGES + 1)
    with pytest.raises(InvalidRequestError) as refused:
        service.memory_add_messages(messages)
    assert refused.value.field == "messages"
    assert refused.value.details["max_items"] == contract.MAX_MESSAGES
