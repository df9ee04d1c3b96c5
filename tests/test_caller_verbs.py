"""Errors speak the caller's language: the fix a message names is a call the caller can
make (MCP ``speaker_register``, SDK/REST/library ``add_speaker``, CLI
``wontopos-mcp speakers add``), rendered by each face from the one contract table (REST
and the library alike, as ``tests/test_faces_agree.py`` wants them); and every 404
carries ``field``, named as the caller named it.

The table is checked from the source: every ``Fix.of(...)`` the package raises names an
operation with a verb on every face, its library verb is a method of ``Memory`` and of
the official SDK's ``Client``, and its CLI spelling parses with the CLI's own parser.
Then each face is driven as its callers drive it: the MCP server through the SDK's
in-memory client, REST through the official ``wontopos`` SDK on a live loopback server,
the library through ``Memory``, the CLI through its parser and ``cli.commands.run``.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import wontopos
from support import KEY, command_runner, mcp_session, refused, served

from wontopos_mcp import Memory
from wontopos_mcp.cli.main import build_parser
from wontopos_mcp.contract import OPERATIONS, operation
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.errors import Fix, InvalidRequestError
from wontopos_mcp.verbs import FACES, render, speak, verb

PACKAGE = Path(__file__).resolve().parent.parent / "wontopos_mcp"
MCP_TOOLS = {op.name for op in OPERATIONS.values() if op.mcp}
SAMPLE = {"user_id": "alice", "speaker": "Bob O'Neil", "memory_id": "m-1", "cursor": "c1", "query": "trains"}


def _fixes_in_source() -> set[str]:
    """The operation of every ``Fix.of("op", ...)`` written anywhere in the package."""
    ops: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "of"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "Fix"
            ):
                assert isinstance(node.args[0], ast.Constant), f"{path.name}: a Fix names its operation literally"
                ops.add(node.args[0].value)
    return ops


FIXED = sorted(_fixes_in_source())
EXTENSIONS = {"speaker_rename", "speaker_merge"}  # REST routes of ours under /api/v1/memory/, not in the SDK


def _sample_fix(op: str) -> Fix:
    return Fix.of(op, **{p.name: SAMPLE[p.name] for p in operation(op).params if p.name in SAMPLE})


# -- the table ---------------------------------------------------------------------------------------


def test_the_source_reader_finds_the_fixes_the_core_raises() -> None:
    assert {"store_create", "speaker_register", "speaker_remove", "memory_list", "by_speaker"} <= set(FIXED)


@pytest.mark.parametrize("op", FIXED)
def test_every_fix_has_a_verb_on_every_face_that_the_face_really_has(op: str) -> None:
    assert all(verb(op, face) is not None for face in FACES), op
    method = verb(op, "sdk")
    assert callable(getattr(Memory, method, None)), method
    # The SDK's Client has it, or it is one of our documented REST extensions (a route of its own).
    assert callable(getattr(wontopos.Client, method, None)) or op in EXTENSIONS, method
    fix = _sample_fix(op)
    words = shlex.split(render(fix, "cli"))
    assert words[0] == "wontopos-mcp"
    parsed = vars(build_parser(words[1:]).parse_args(words[1:]))
    command = " ".join(w for w in (parsed["command"], parsed.get("action")) if w)
    assert operation(op).cli is not None
    assert operation(op).cli.startswith(command)
    assert {str(value) for _, value in fix.args} <= {str(v) for v in parsed.values()}, (words, parsed)


@pytest.mark.parametrize("face", ["sdk", "cli"])
def test_no_fix_on_the_sdk_or_cli_face_names_an_mcp_tool(face: str) -> None:
    for op in FIXED:
        text = render(_sample_fix(op), face)
        named = set(re.findall(r"[a-z_]+", text)) & MCP_TOOLS
        # by_speaker is the SDK's own name as well as a tool's.
        assert named <= {verb(op, face)}, (face, text)


def test_each_face_spells_the_same_fix_its_own_way() -> None:
    fix = Fix.of("speaker_register", speaker="Bob O'Neil", user_id="alice")
    assert render(fix, "mcp") == str(fix) == """speaker_register(speaker="Bob O'Neil", user_id='alice')"""
    assert render(fix, "sdk") == """add_speaker(speaker="Bob O'Neil", user_id='alice')"""
    assert shlex.split(render(fix, "cli")) == ["wontopos-mcp", "speakers", "add", "Bob O'Neil", "--user", "alice"]
    # Arguments are renamed as the SDK names them; a positional the fix leaves open is the CLI's metavar.
    assert render(Fix.of("memory_supersede", memory_id="m1"), "sdk") == "update(old_memory_id='m1')"
    assert render(Fix.of("speaker_remove"), "cli") == "wontopos-mcp speakers remove NAME"


def test_speaking_again_starts_from_the_parts_and_an_error_without_a_fix_is_untouched() -> None:
    exc = InvalidRequestError(("register ", Fix.of("speaker_register", speaker="Bob"), " first"), field="speaker")
    assert exc.message == "register speaker_register(speaker='Bob') first" == str(exc)
    assert speak(exc, "sdk").message == "register add_speaker(speaker='Bob') first" == str(exc)
    assert speak(exc, "mcp").message == "register speaker_register(speaker='Bob') first"
    assert exc.envelope()["error"] == {"type": "invalid_request_error", "message": exc.message, "field": "speaker"}
    plain = InvalidRequestError("speaker_register is the tool", field="x")
    assert speak(plain, "cli").message == "speaker_register is the tool"


# -- MCP ---------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.anyio
async def test_mcp_fixes_name_the_tools_and_every_404_carries_field(service: MemoryService) -> None:
    async with mcp_session(service) as mcp:
        await mcp.ok("store_create", user_id="alice")
        error = await mcp.refused(
            "memory_add", {"content": "Carol likes tea", "speaker": "Carol", "user_id": "alice"},
            status=400, type="invalid_request_error", field="speaker",
        )  # fmt: skip
        assert "Register it first: speaker_register(speaker='Carol', user_id='alice')" in error["message"]
        error = await mcp.refused("speakers_list", {"user_id": "nobody"}, status=404, type="not_found_error",
                                  field="user_id")  # fmt: skip
        assert error["user_id"] == "nobody"
        assert "store_create(user_id='nobody')" in error["message"]
        error = await mcp.refused("by_speaker", {"speaker": "Nobody", "user_id": "alice"}, status=404,
                                  type="not_found_error", field="speaker")  # fmt: skip
        assert error["speaker"] == "Nobody"
        for tool, arguments in [
            ("memory_get", {"memory_id": "nope"}),
            ("memory_forget", {"memory_id": "nope"}),
            ("memory_supersede", {"memory_id": "nope", "content": "new"}),
        ]:
            error = await mcp.refused(tool, arguments, status=404, type="not_found_error", field="memory_id")
            assert error["memory_id"] == "nope"


# -- REST, through the official SDK --------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Any]:
    with served(tmp_path_factory.mktemp("verbs"), embedder, api_key=KEY, speaker_limit=1) as live:
        yield live


@pytest.fixture
def sdk(live: Any) -> Iterator[wontopos.Client]:
    with wontopos.Client(api_key=KEY, base_url=live.url, deadline=60) as client:
        yield client


@pytest.mark.slow
def test_rest_fixes_name_the_sdk_methods_never_a_tool(sdk: wontopos.Client) -> None:
    with pytest.raises(wontopos.NotFoundError) as missing:
        sdk.list_speakers(user_id="nobody")
    assert missing.value.details["field"] == "user_id"
    assert missing.value.details["user_id"] == "nobody"
    assert "create it first with create_store(user_id='nobody')" in missing.value.message
    sdk.create_store("rest_store")
    with pytest.raises(wontopos.BadRequestError) as unregistered:
        sdk.add("Carol likes tea", user_id="rest_store", speaker="Carol")
    message = unregistered.value.message
    assert "Register it first: add_speaker(speaker='Carol', user_id='rest_store');" in message
    sdk.add_speaker("Ana", user_id="rest_store")
    with pytest.raises(wontopos.BadRequestError) as full:
        sdk.add_speaker("Ben", user_id="rest_store")
    assert "remove one with remove_speaker(user_id='rest_store') before" in full.value.message
    for error in (missing.value, unregistered.value, full.value):
        assert not set(re.findall(r"[a-z_]+", error.message)) & MCP_TOOLS, error.message


def test_every_rest_404_carries_field_as_the_sdk_sent_it(sdk: wontopos.Client) -> None:
    sdk.create_store("rest_404")
    with pytest.raises(wontopos.NotFoundError) as speaker:
        sdk.by_speaker("Nobody", user_id="rest_404")
    assert speaker.value.details == {"field": "speaker", "speaker": "Nobody"}
    with pytest.raises(wontopos.NotFoundError) as got:
        sdk.get("rest_404", "nope")
    assert got.value.details == {"field": "memory_id", "memory_id": "nope"}
    with pytest.raises(wontopos.NotFoundError) as forgotten:
        sdk.delete("rest_404", "nope")
    assert forgotten.value.details == {"field": "memory_id", "memory_id": "nope"}
    with pytest.raises(wontopos.NotFoundError) as updated:
        sdk.update("nope", "new content", user_id="rest_404")
    assert updated.value.details == {"field": "old_memory_id", "memory_id": "nope"}


# -- the library ---------------------------------------------------------------------------------------


def test_library_fixes_name_its_methods_and_every_404_carries_field(make_service: Any) -> None:
    mem = Memory(service=make_service(speaker_limit=1))
    with refused(404, field="user_id", user_id="nobody") as missing:
        mem.list_speakers(user_id="nobody")
    assert "create_store(user_id='nobody')" in missing.value.message
    mem.create_store("alice")
    with refused(400, field="speaker", speaker="Carol") as unregistered:
        mem.add("Carol likes tea", user_id="alice", speaker="Carol")
    assert "Register it first: add_speaker(speaker='Carol', user_id='alice')" in unregistered.value.message
    with refused(400, field="metadata.speaker") as in_metadata:
        mem.add("Carol likes tea", user_id="alice", metadata={"speaker": "Carol"})
    assert "add_speaker(speaker='Carol', user_id='alice')" in in_metadata.value.message
    mem.add_speaker("Ana", user_id="alice")
    with refused(400, speaker_limit=1) as full:
        mem.add_speaker("Ben", user_id="alice")
    assert "remove one with remove_speaker(user_id='alice')" in full.value.message
    with refused(404, field="speaker", speaker="Nobody"):
        mem.by_speaker("Nobody", user_id="alice")
    with refused(404, field="memory_id", memory_id="nope"):
        mem.get("alice", "nope")
    with refused(404, field="memory_id", memory_id="nope"):
        mem.delete("alice", "nope")
    with refused(404, field="old_memory_id", memory_id="nope"):
        mem.update("nope", "new content", user_id="alice")
    with refused(400, field="cursor") as cursor:
        mem.list_memories("alice", cursor="not-a-cursor")
    assert "from an earlier list_memories" in cursor.value.message
    for error in (missing, unregistered, in_metadata, full, cursor):
        assert not set(re.findall(r"[a-z_]+", error.value.message)) & MCP_TOOLS, error.value.message


# -- the CLI ---------------------------------------------------------------------------------------------


def test_cli_fixes_name_its_commands_never_a_tool(make_service: Any, capsys: pytest.CaptureFixture[str]) -> None:
    wontopos = command_runner(make_service(speaker_limit=1), capsys)
    code, out, err = wontopos("speakers", "list", "--user", "nobody")
    assert (code, out) == (1, "")
    assert err == (
        "wontopos-mcp: store 'nobody' does not exist; create it first with wontopos-mcp stores create nobody "
        "or use the built-in 'default' store (404 not_found_error)\n"
    )
    assert wontopos("stores", "create", "alice")[0] == 0
    assert wontopos("speakers", "add", "Ana", "--user", "alice")[0] == 0
    code, _, err = wontopos("speakers", "add", "Ben Ng", "--user", "alice")
    assert code == 1
    assert "remove one with wontopos-mcp speakers remove NAME --user alice before" in err
    code, _, err = wontopos("memories", "list", "--user", "alice", "--cursor", "not-a-cursor")
    assert code == 1
    assert "from an earlier wontopos-mcp memories list" in err
    code, _, err = wontopos("memories", "get", "nope", "--user", "alice")
    assert code == 1
    assert "memory 'nope' does not exist" in err
