"""The shared JSON stream: every JSON reader refuses a nesting bomb quickly, in bounded memory.

``ijson.parse`` and ``ijson.items`` build a prefix string per nesting level: 60 KB of
``[[[[`` took 2.2 GB through them. The bomb test runs each reader in a subprocess and
reads the process's peak resident size (``ru_maxrss``) before and after, so memory that
yajl allocates in C is counted too (``tracemalloc`` sees only Python's).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from wontopos_mcp.imports.jsonstream import MAX_DEPTH, CheckedStream, JsonEvents, list_items, loads_line
from wontopos_mcp.imports.messages import BadExport

BOMB_BYTES = 1_000_000

# Builds ``source`` (a megabyte of "[" where each reader reads JSON), then reads it.
_BOMB = textwrap.dedent(
    """
    import io, json, resource, sys, time, zipfile
    from datetime import timezone
    import ijson
    from wontopos_mcp.imports import formats
    from wontopos_mcp.imports.messages import BadExport, ReadOptions
    from wontopos_mcp.imports.sources import BytesSource, bytes_source

    name, size = sys.argv[1], int(sys.argv[2])
    bomb = b"[" * size
    if name == "slack":
        files = {"users.json": b"[]", "channels.json": b'[{"id": "C1", "name": "general"}]',
                 "general/2026-01-02.json": bomb}
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for entry, data in files.items():
                archive.writestr(entry, data)
        source = bytes_source("export.zip", buffer.getvalue())
    elif name == "claude-code":
        line = b'{"type":"user","sessionId":"s","uuid":"u","parentUuid":null,"message":{"role":"user","content":"hi"}}'
        source = BytesSource("session.jsonl", line + b"\\n" + bomb + b"\\n")
    else:
        source = BytesSource("export.json", bomb)
    reader = formats.reader(name)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    try:
        list(reader.read(source, ReadOptions(tz=timezone.utc)))
        outcome = {"refused": False}
    except BadExport as exc:
        outcome = {"refused": True, "place": exc.place, "reason": exc.reason}
    outcome["seconds"] = time.perf_counter() - started
    outcome["growth_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(json.dumps(outcome))
    """
)


def read_bomb(name: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _BOMB, name, str(BOMB_BYTES)], capture_output=True, text=True, timeout=60, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("name", ["chatgpt", "claude", "telegram", "discord", "slack", "claude-code"])
def test_a_megabyte_of_open_brackets_is_refused_quickly_in_bounded_memory(name: str) -> None:
    outcome = read_bomb(name)
    assert outcome["refused"], outcome
    assert f"nested more than {MAX_DEPTH} levels deep" in outcome["reason"]
    assert outcome["growth_kib"] < 100 * 1024, outcome
    assert outcome["seconds"] < 5, outcome


def events(data: bytes, limit: int | None = None) -> JsonEvents:
    return JsonEvents(CheckedStream(io.BytesIO(data), limit=limit))


def test_members_give_an_objects_keys_and_skip_the_values_not_read() -> None:
    walk = events(b'{"a": {"deep": [1, 2]}, "b": "kept", "c": [3]}')
    seen = {}
    for key in walk.members():
        if key == "b":
            seen[key] = walk.value()
    walk.finish()
    assert seen == {"b": "kept"}


def test_members_of_a_value_that_is_not_an_object_are_none() -> None:
    walk = events(b'[{"a": 1}, 2]')
    assert list(walk.members()) == []
    walk.finish()


def test_items_move_the_place_from_each_item_to_after_it() -> None:
    walk = events(b'{"messages": [{"n": 1}, {"n": 2}]')
    places: list[str] = []

    def read_all() -> None:
        for _ in walk.members():
            for _ in walk.items("message"):
                places.append(walk.place)
                walk.value()

    with pytest.raises(BadExport) as refused:
        read_all()
    assert places == ["message 1", "message 2"]
    assert refused.value.place == "after message 2"
    assert "premature EOF" in refused.value.reason


def test_a_value_longer_than_the_limit_is_refused_at_its_place_before_it_is_whole() -> None:
    data = json.dumps([{"text": "short"}, {"text": "x" * 2_000_000}]).encode()
    with pytest.raises(BadExport) as refused:
        list(list_items(io.BytesIO(data), "message", limit=100_000))
    assert refused.value.place == "message 2"
    assert "longer than 100,000 bytes" in refused.value.reason


def test_a_long_value_that_is_skipped_is_refused_too() -> None:
    walk = events(json.dumps({"ignored": "x" * 2_000_000, "kept": 1}).encode(), limit=100_000)
    with pytest.raises(BadExport, match="longer than"):
        list(walk.members())


def test_numbers_are_ints_and_floats() -> None:
    assert list(list_items(io.BytesIO(b"[1, 2.5, -3e2]"), "number")) == [(1, 1), (2, 2.5), (3, -300.0)]


def test_a_parse_error_names_the_bytes_the_parser_was_reading() -> None:
    with pytest.raises(BadExport) as refused:
        list(list_items(io.BytesIO(b'[{"a": 1}, {"b": ]'), "item"))
    assert refused.value.place == "item 2"
    assert refused.value.reason.startswith("not valid JSON (parse error: unallowed token")
    assert refused.value.reason.endswith("in bytes 0-18)")


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        ("[1]".encode("utf-16"), "UTF-16"),
        ("[1]".encode("utf-16-be"), "UTF-16"),
        ("[1]".encode("utf-32"), "UTF-32"),
        ("[1]".encode("utf-32-le"), "UTF-16"),  # no mark: the NULs say "not UTF-8", the fix is the same
    ],
)
def test_wide_text_is_refused_with_the_fix(data: bytes, encoding: str) -> None:
    with pytest.raises(BadExport) as refused:
        CheckedStream(io.BytesIO(data))
    assert (refused.value.place, encoding in refused.value.reason) == ("byte 0", True)
    assert "save it again as UTF-8" in refused.value.reason


def test_a_bom_is_skipped_and_counted_in_the_offset() -> None:
    stream = CheckedStream(io.BytesIO(b"\xef\xbb\xbf[1]"))
    assert stream.head == b"[1]"
    assert stream.read(64) == b"[1]"
    assert stream.span == (3, 6)


def test_a_json_line_nested_past_the_cap_is_refused_even_below_pythons_recursion_limit() -> None:
    assert loads_line(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH, "line 1") is not None
    deeper = MAX_DEPTH + 1
    with pytest.raises(BadExport, match=f"nested more than {MAX_DEPTH}"):
        loads_line(b"[" * deeper + b"]" * deeper, "line 1")
    with pytest.raises(BadExport, match=f"nested more than {MAX_DEPTH}"):
        loads_line(b'{"a": ' * deeper + b"1" + b"}" * deeper, "line 1")
