"""The human commands (``wontopos-mcp speakers list``, ``search``, ``export``/``import``,
``stats``) run in-process (through the CLI's own parser) on a real database under ``tmp_path`` with
the session's real model; one subprocess checks that a refusal is one line on stderr and exit code 1."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import REPO, command_runner

from wontopos_mcp.engine.service import MemoryService


@pytest.fixture
def wontopos(service: MemoryService, capsys: pytest.CaptureFixture[str]) -> Any:
    """``wontopos("speakers", "list", "--user", "alice")`` -> (exit code, stdout, stderr)."""
    return command_runner(service, capsys)


def test_speakers_add_says_which_registered_names_look_alike(wontopos: Any) -> None:
    assert wontopos("speakers", "add", "Bob")[1] == "Bob: registered (1 of 50)\n"
    assert wontopos("speakers", "add", "bob")[1] == "bob: registered (2 of 50); looks like Bob (another person)\n"


def test_add_stores_a_memory_from_the_command_line_or_stdin(
    wontopos: Any, service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's CLI block can add what it then lists: `add TEXT` with the memory's
    fields as flags, `-` reads the text from stdin; a refusal names the CLI's own verb."""
    wontopos("stores", "create", "alice")
    wontopos("speakers", "add", "Bob", "--user", "alice")
    code, out, _ = wontopos(
        "add", "The deadline moved to Tuesday.", "--user", "alice", "--speaker", "Bob",
        "--category", "work", "--conversation", "standup-1", "--event-date", "2026-03-02",
    )  # fmt: skip
    assert code == 0
    memory_id = re.match(r"stored memory (\S+) \(Bob\) in 'alice'$", out.strip()).group(1)
    stored = service.memory_get(memory_id, user_id="alice")["memory"]
    assert (stored["speaker"], stored["category"], stored["conversation_id"]) == ("Bob", "work", "standup-1")
    assert stored["event_date"].startswith("2026-03-02")
    monkeypatch.setattr("sys.stdin", io.StringIO("Read from stdin, as a pipe gives it.\n"))
    code, out, _ = wontopos("add", "-", "--user", "alice", "--json")
    assert code == 0
    piped = json.loads(out)
    assert (
        service.memory_get(piped["id"], user_id="alice")["memory"]["content"] == "Read from stdin, as a pipe gives it."
    )
    code, out, _ = wontopos("add", "The deadline moved to Tuesday.", "--user", "alice", "--speaker", "Bob")
    assert code == 0
    assert out.strip() == f"not stored: it restates memory {memory_id}"
    code, out, err = wontopos("add", "Carol's words.", "--user", "alice", "--speaker", "Carol")
    assert code == 1
    assert out == ""
    assert "wontopos-mcp speakers add Carol --user alice" in err
    assert service.memory_list(user_id="alice")["count"] == 2


@pytest.mark.slow
def test_export_then_import_copies_a_store_with_speakers_and_supersede_chains(
    wontopos: Any, service: MemoryService, tmp_path: Path
) -> None:
    assert wontopos("stores", "create", "--user", "alice")[0] == 0
    assert wontopos("speakers", "add", "Bob", "--user", "alice")[1] == "Bob: registered (1 of 50)\n"
    first = service.memory_add("Bob's train leaves at 8", speaker="Bob", user_id="alice", category="travel")
    service.memory_supersede(first["id"], "Bob's train leaves at 9", user_id="alice")
    service.memory_add("I will book the taxi", speaker="me", user_id="alice")

    code, out, _ = wontopos("export", "--user", "alice")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [m["content"] for m in lines] == [
        "Bob's train leaves at 8",
        "Bob's train leaves at 9",
        "I will book the taxi",
    ]
    export = tmp_path / "alice.jsonl"
    assert wontopos("export", "--user", "alice", "--out", str(export))[0] == 0

    assert wontopos("stores", "create", "--user", "copy")[0] == 0
    code, out, _ = wontopos("import", str(export), "--user", "copy", "--json")
    assert code == 0
    assert json.loads(out) == {
        "user_id": "copy",
        "lines": 3,
        "stored": 3,
        "already_there": 0,
        "duplicates": 0,
        "skipped": [],
    }
    # Run again: every line's idempotency key is found, nothing is stored twice.
    rerun = json.loads(wontopos("import", str(export), "--user", "copy", "--json")[1])
    assert (rerun["stored"], rerun["already_there"]) == (0, 3)
    copied = [json.loads(line) for line in wontopos("export", "--user", "copy")[1].splitlines()]
    assert sorted((m["content"], m.get("speaker"), m["is_superseded"]) for m in copied) == sorted(
        (m["content"], m.get("speaker"), m["is_superseded"]) for m in lines
    )
    assert [m["created_at"] for m in copied if m["content"] == "I will book the taxi"] == [
        m["created_at"] for m in lines if m["content"] == "I will book the taxi"
    ]  # an import keeps when a memory was stored
    old = next(m for m in copied if m["content"].endswith("at 8"))
    new = next(m for m in copied if m["content"].endswith("at 9"))
    assert old["superseded_by"] == new["id"]
    assert new["category"] == "travel"

    code, out, _ = wontopos("speakers", "list", "--user", "copy")
    assert code == 0
    assert out.startswith("Bob\t2 memories\t")
    code, out, _ = wontopos("search", "when does the train leave?", "--user", "copy", "--speaker", "Bob")
    assert code == 0
    assert out.splitlines()[0].endswith("[Bob] Bob's train leaves at 9")
    stats = json.loads(wontopos("stats", "--user", "copy", "--json")[1])
    assert stats | {"user_id": "copy"} == {
        "user_id": "copy", "memories": 3, "current": 2, "superseded": 1, "short_term_turns": 0, "speakers": 1,
        "speaker_limit": 50, "by_speaker": {"Bob": 2, "me": 1},
    }  # fmt: skip


@pytest.mark.slow
def test_import_skips_bad_lines_with_their_reasons_and_reports_progress(
    wontopos: Any, service: MemoryService, tmp_path: Path
) -> None:
    good = [json.dumps({"id": f"m{i}", "content": f"Fact number {i}."}) for i in range(150)]
    bad = [
        "not json at all",
        json.dumps({"id": "x1", "content": "Hi", "speaker": "Me"}),
        json.dumps({"id": "x2", "content": "From the future.", "created_at": "2999-01-01T00:00:00Z"}),
    ]
    source = tmp_path / "mixed.jsonl"
    source.write_text("\n".join(good[:60] + bad + good[60:]) + "\n", encoding="utf-8")
    code, out, err = wontopos("import", str(source), "--json", "--batch", "100")
    summary = json.loads(out)
    assert code == 1
    assert summary["stored"] == 150
    assert summary["duplicates"] == 0
    assert [s["line"] for s in summary["skipped"]] == [61, 62, 63]
    assert "not valid JSON" in summary["skipped"][0]["reason"]
    assert "reserved" in summary["skipped"][1]["reason"]
    assert "created_at 2999-01-01T00:00:00Z is later than now" in summary["skipped"][2]["reason"]
    # The progress bar (tqdm, on stderr) after each batch: lines of the file's total, the rate, what was stored.
    assert re.search(r"import: +67%\|.*\| 103/153 \[[^]]* lines/s, stored=100, already_there=0, skipped=3", err)
    assert re.search(r"\| 153/153 \[[^]]* lines/s, stored=150, already_there=0, skipped=3\]", err)
    assert "skipped line 62" in err
    assert service.memory_list(limit=500)["count"] == 150


def test_import_takes_hand_written_lines_with_content_alone_and_a_rerun_adds_nothing(
    wontopos: Any, service: MemoryService, tmp_path: Path
) -> None:
    service.speaker_register("Bob")
    lines = [
        {"content": "Bob's sister lives in Porto."},
        {"content": "Bob waters the plants after 9am.", "speaker": "Bob", "category": "home"},
        {"content": "The review moved to the 14th.", "event_date": "2026-03-14"},
    ]
    source = tmp_path / "notes.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, out, _ = wontopos("import", str(source), "--json")
    assert code == 0
    assert json.loads(out)["stored"] == 3
    stored = {m["content"]: m for m in service.memory_list()["memories"]}
    assert set(stored) == {line["content"] for line in lines}
    assert stored["Bob waters the plants after 9am."]["speaker"] == "Bob"
    assert stored["Bob waters the plants after 9am."]["category"] == "home"
    again = json.loads(wontopos("import", str(source), "--json")[1])
    assert (again["stored"], again["already_there"]) == (0, 3)
    assert service.memory_list()["count"] == 3


# A real process (the CLI face's one): the exit code and what reaches stdout and stderr are
# the process's, and the commands end it with os._exit, which no in-process call survives.
@pytest.mark.slow
def test_a_refusal_is_one_line_on_stderr_and_exit_code_1(tmp_path: Path, model_cache: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "PYTHONPATH": str(REPO),
           "WONTOPOS_MODEL_CACHE": str(model_cache)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "wontopos_mcp", "speakers", "list", "--user", "nobody", "--db", str(tmp_path / "db")],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("wontopos-mcp: store 'nobody' does not exist")


@pytest.mark.parametrize("name", ["Bo\u034fb", "Bob\ufe0f", "Bo\U000e0100b", "Bo\u180bb", "Bo\u2800b", "Bo\u200ab"])
def test_speakers_add_and_rename_refuse_a_name_that_looks_like_another_naming_the_code_point(
    wontopos: Any, name: str
) -> None:
    bad = next(ch for ch in name if ch not in "Bob")
    assert wontopos("speakers", "add", "Ann")[0] == 0
    for command in (("speakers", "add", name), ("speakers", "rename", "Ann", name)):
        code, out, err = wontopos(*command)
        assert (code, out) == (1, ""), command
        assert f"(U+{ord(bad):04X})" in err, command
    assert wontopos("speakers", "list")[1].splitlines()[0].startswith("Ann")
