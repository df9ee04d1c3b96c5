"""``wontopos-mcp import``: batches through the bulk path, every ``created_at`` kept
(superseding versions included), bad lines skipped with their numbers (exit 1), the
target store created, re-runs and interrupted runs storing nothing twice.

Run in-process through the CLI's own parser on a real database with the session's real
model; the service's clock is moved a day past the export before importing, so a copy
stamped with the import time instead of its exported ``created_at`` cannot pass.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from support import SteppableClock, command_runner

from wontopos_mcp.cli import commands
from wontopos_mcp.cli.main import build_parser
from wontopos_mcp.config import Settings
from wontopos_mcp.engine.service import MemoryService


@pytest.fixture
def wontopos(clocked_service: MemoryService, capsys: pytest.CaptureFixture[str]) -> Any:
    """``wontopos("import", path, "--user", "copy")`` -> (exit code, stdout, stderr)."""
    return command_runner(clocked_service, capsys)


@pytest.fixture
def exported(clocked_service: MemoryService, clock: SteppableClock, wontopos: Any) -> list[bytes]:
    """The export lines of store 'alice': two plain memories around a chain A -> B -> C
    (B and C superseding, each stored a minute apart), Bob's and untagged. The clock is
    then a day later."""
    service = clocked_service
    service.store_create("alice")
    service.speaker_register("Bob", user_id="alice")
    service.memory_add_batch(
        [{"content": "Grandma's birthday is on 3 May", "created_at": "2021-03-04T05:06:07.123456Z"}], "alice"
    )
    clock.advance(minutes=1)
    a = service.memory_add("Bob's train leaves at 8", speaker="Bob", category="travel", user_id="alice")
    clock.advance(minutes=1)
    b = service.memory_supersede(a["id"], "Bob's train leaves at 9", user_id="alice")
    clock.advance(minutes=1)
    service.memory_supersede(b["id"], "Bob's train leaves at 10", user_id="alice")
    clock.advance(minutes=1)
    service.memory_add("I will book the taxi", speaker="me", conversation_id="c1", user_id="alice")
    code, out, _ = wontopos("export", "--user", "alice")
    assert code == 0
    clock.advance(days=1)
    return [line.encode() for line in out.splitlines()]


def _export(wontopos: Any, user: str) -> dict[str, dict[str, Any]]:
    code, out, _ = wontopos("export", "--user", user)
    assert code == 0
    return {m["content"]: m for m in map(json.loads, out.splitlines())}


def _same_memories(original: dict[str, dict[str, Any]], copy: dict[str, dict[str, Any]]) -> None:
    """Same contents, created_at, fields and supersede flags; superseded_by names the copy."""
    assert sorted(copy) == sorted(original)
    by_id = {m["id"]: content for content, m in original.items()}
    for content, old in original.items():
        new = copy[content]
        for field in ("created_at", "speaker", "category", "conversation_id", "is_superseded", "time_bucket"):
            assert new.get(field) == old.get(field), (content, field)
        if "superseded_by" in old:
            assert copy[by_id[old["superseded_by"]]]["id"] == new["superseded_by"], content


def _write(path: Path, lines: list[bytes]) -> str:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return str(path)


@pytest.mark.slow
def test_an_import_with_bad_lines_round_trips_every_created_at_and_reports_the_skipped_lines(
    wontopos: Any, exported: list[bytes], tmp_path: Path
) -> None:
    original = _export(wontopos, "alice")
    assert original["Bob's train leaves at 8"]["is_superseded"]  # the chain as exported
    first, a, b, c, taxi = exported
    latin1 = json.dumps({"id": "x-latin1", "content": "Café au lait"}, ensure_ascii=False).encode("latin-1")
    # With --batch 2, B follows A across a batch boundary and C follows B within one.
    lines = [first, a, b, latin1, b"", c, taxi[: taxi.index(b"book")], taxi]  # cut inside the content
    source = _write(tmp_path / "alice.jsonl", lines)

    code, out, err = wontopos("import", source, "--user", "copy", "--batch", "2", "--json")

    assert code == 1
    summary = json.loads(out)
    assert {k: summary[k] for k in ("user_id", "lines", "stored", "already_there", "duplicates")} == {
        "user_id": "copy", "lines": 8, "stored": 5, "already_there": 0, "duplicates": 0,
    }  # fmt: skip
    assert [s["line"] for s in summary["skipped"]] == [4, 7]
    assert summary["skipped"][0]["reason"].startswith("not UTF-8 text (byte 0xE9 at column ")
    assert summary["skipped"][1]["reason"].startswith("not valid JSON (Unterminated string starting at column ")
    assert "wontopos-mcp: import: created store 'copy'" in err
    assert "skipped line 4: not UTF-8" in err
    assert "skipped line 7: not valid JSON" in err
    assert "Traceback" not in err
    _same_memories(original, _export(wontopos, "copy"))


@pytest.mark.slow
def test_a_rerun_stores_nothing_and_reports_every_line_already_there(
    wontopos: Any, exported: list[bytes], tmp_path: Path
) -> None:
    source = _write(tmp_path / "alice.jsonl", exported)
    assert wontopos("import", source, "--user", "copy")[0] == 0

    code, out, err = wontopos("import", source, "--user", "copy")

    assert code == 0
    assert out == "imported 0 memories (5 already there, 0 duplicates, 0 lines skipped)\n"
    assert "created store" not in err  # it exists now
    _same_memories(_export(wontopos, "alice"), _export(wontopos, "copy"))


@pytest.mark.slow
def test_an_import_stopped_half_way_completes_on_a_rerun_without_duplicates(
    wontopos: Any, exported: list[bytes], tmp_path: Path
) -> None:
    # The first run stopped after A and B: C, which supersedes B, comes in the second run.
    half = _write(tmp_path / "half.jsonl", exported[:3])
    assert json.loads(wontopos("import", half, "--user", "copy", "--json")[1])["stored"] == 3
    source = _write(tmp_path / "alice.jsonl", exported)

    code, out, _ = wontopos("import", source, "--user", "copy", "--batch", "2", "--json")

    summary = json.loads(out)
    assert code == 0
    assert (summary["stored"], summary["already_there"]) == (2, 3)
    _same_memories(_export(wontopos, "alice"), _export(wontopos, "copy"))


@pytest.mark.slow
def test_one_memory_is_said_in_the_singular_with_progress_a_total_and_a_rate(
    wontopos: Any, exported: list[bytes], tmp_path: Path
) -> None:
    source = _write(tmp_path / "one.jsonl", [exported[0], b"   ", b""])
    code, out, err = wontopos("import", source, "--user", "copy")
    assert code == 0
    assert out == "imported 1 memory (0 already there, 0 duplicates, 0 lines skipped)\n"
    assert re.search(r"import: 100%\|.*\| 3/3 \[[^]]* lines/s, stored=1, already_there=0, skipped=0\]", err)


@pytest.mark.slow
def test_stdin_is_read_as_bytes_and_progress_has_no_total(
    wontopos: Any, exported: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b"\n".join([exported[0], b"\xff\xfe not text", exported[-1]]) + b"\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    code, out, err = wontopos("import", "-", "--json")
    summary = json.loads(out)
    assert code == 1
    assert summary["user_id"] == "default"
    assert summary["stored"] == 2
    assert summary["skipped"] == [
        {"line": 2, "reason": "not UTF-8 text (byte 0xFF at column 1); save the file as UTF-8"}
    ]
    assert re.search(r"wontopos-mcp: import: 3 lines \[[^]]* lines/s, stored=2, already_there=0, skipped=1\]", err)


@pytest.mark.slow
def test_lines_the_core_refuses_are_skipped_with_reasons_for_a_human(
    wontopos: Any, clocked_service: MemoryService, tmp_path: Path
) -> None:
    good = [json.dumps({"id": f"m{i}", "content": f"Fact number {i}."}).encode() for i in range(6)]
    bad = [
        json.dumps({"id": "b1", "content": "Hi", "speaker": "Me"}),
        json.dumps({"id": "b2", "content": "Lunch", "event_date": "next Tuesday"}),
        json.dumps({"id": "b3", "content": "   "}),
        json.dumps({"id": "b5"}),
        json.dumps(["a", "list"]),
        json.dumps({"id": "has a space", "content": "Odd id"}),
        '{"id": "b4", "content": "\\ud800"}',
    ]
    source = _write(tmp_path / "mixed.jsonl", good[:3] + [line.encode() for line in bad] + good[3:])

    code, out, _ = wontopos("import", source, "--json", "--batch", "4")

    summary = json.loads(out)
    assert code == 1
    assert summary["stored"] == 6
    reasons = {s["line"]: s["reason"] for s in summary["skipped"]}
    assert sorted(reasons) == [4, 5, 6, 7, 8, 9, 10]
    assert reasons[4].startswith("'Me' is reserved")
    assert reasons[5].startswith("event_date must be RFC 3339")
    assert reasons[6] == "content must not be empty"
    assert reasons[7] == reasons[8] == 'not a memory: it needs at least a "content"'
    assert reasons[9].startswith("its id 'has a space' is not")
    assert "lone surrogate" in reasons[10]
    assert not any("items[" in reason for reason in reasons.values())
    assert clocked_service.memory_list(limit=500)["count"] == 6


@pytest.mark.slow
def test_a_line_whose_id_was_imported_with_other_content_is_skipped(
    wontopos: Any, exported: list[bytes], tmp_path: Path
) -> None:
    source = _write(tmp_path / "alice.jsonl", exported)
    assert wontopos("import", source, "--user", "copy")[0] == 0
    changed = json.loads(exported[0]) | {"content": "Grandma's birthday is on 4 May"}
    edited = _write(tmp_path / "edited.jsonl", [json.dumps(changed).encode(), *exported[1:]])

    code, out, _ = wontopos("import", edited, "--user", "copy", "--json")

    summary = json.loads(out)
    assert code == 1
    assert (summary["stored"], summary["already_there"]) == (0, 4)
    assert summary["skipped"] == [
        {"line": 1, "reason": "a memory with this id was already imported into this store with other content"}
    ]


@pytest.mark.slow
def test_a_version_whose_predecessor_was_superseded_in_the_store_meanwhile_is_skipped(
    wontopos: Any, clocked_service: MemoryService, exported: list[bytes], tmp_path: Path
) -> None:
    # The first run stopped after A; someone then superseded A's copy by hand.
    assert wontopos("import", _write(tmp_path / "half.jsonl", exported[:2]), "--user", "copy")[0] == 0
    copy_of_a = _export(wontopos, "copy")["Bob's train leaves at 8"]["id"]
    clocked_service.memory_supersede(copy_of_a, "Bob's train leaves at 7", user_id="copy")

    code, out, _ = wontopos("import", _write(tmp_path / "alice.jsonl", exported), "--user", "copy", "--json")

    summary = json.loads(out)
    assert code == 1
    assert (summary["stored"], summary["already_there"]) == (2, 2)
    assert [s["line"] for s in summary["skipped"]] == [3]
    assert "already superseded in this store" in summary["skipped"][0]["reason"]
    copy = _export(wontopos, "copy")
    # C supersedes nothing (B was not imported), so it is stored as a current memory.
    assert not copy["Bob's train leaves at 10"]["is_superseded"]
    assert "Bob's train leaves at 9" not in copy


class _SpeakerRemovedAfterRegistration(MemoryService):
    """A real service on which another process removes 'Zed' right after the import registers him."""

    def speaker_register(self, speaker: Any, user_id: Any = None) -> dict[str, Any]:
        answer = super().speaker_register(speaker, user_id=user_id)
        if speaker == "Zed":
            self.speaker_remove("Zed", user_id=user_id)
        return answer


@pytest.mark.slow
def test_a_batch_refused_as_a_whole_is_written_line_by_line_skipping_only_the_line_at_fault(
    clocked_service: MemoryService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = _SpeakerRemovedAfterRegistration(clocked_service.store, clocked_service.models)
    lines = [
        json.dumps({"id": "z1", "content": "The cat is called Tom"}),
        json.dumps({"id": "z2", "content": "Zed owns a boat", "speaker": "Zed"}),
        json.dumps({"id": "z3", "content": "The dog is called Rex"}),
    ]
    source = _write(tmp_path / "zed.jsonl", [line.encode() for line in lines])
    code = commands.run(vars(build_parser().parse_args(["import", source, "--json"])), Settings(), service=service)
    summary = json.loads(capsys.readouterr().out)
    assert code == 1
    assert summary["stored"] == 2
    assert [s["line"] for s in summary["skipped"]] == [2]
    assert summary["skipped"][0]["reason"].startswith("speaker 'Zed' is not registered in this store")


def test_a_missing_file_is_one_line_and_creates_no_store(wontopos: Any, tmp_path: Path) -> None:
    code, out, err = wontopos("import", str(tmp_path / "nothing.jsonl"), "--user", "copy")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"wontopos-mcp: import: {tmp_path / 'nothing.jsonl'}: No such file or directory")
    assert "copy" not in [s["user_id"] for s in json.loads(wontopos("stores", "list", "--json")[1])["stores"]]


@pytest.mark.slow
def test_a_line_repeated_in_the_file_is_stored_once(wontopos: Any, exported: list[bytes], tmp_path: Path) -> None:
    changed = json.dumps(json.loads(exported[0]) | {"content": "Grandma's birthday is in June"}).encode()
    source = _write(tmp_path / "twice.jsonl", [exported[0], exported[0], changed])
    code, out, _ = wontopos("import", source, "--user", "copy", "--json")
    summary = json.loads(out)
    assert code == 1
    assert (summary["stored"], summary["already_there"]) == (1, 1)
    assert [s["line"] for s in summary["skipped"]] == [3]
    assert len(_export(wontopos, "copy")) == 1
