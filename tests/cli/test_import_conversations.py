"""``wontopos-mcp import`` of conversation exports, as a person at a terminal meets it.

Each refusal is one line on stderr naming the file, the place and the reason, exit code 2,
and the store unchanged; unresolved names come with their message counts and this
command's three ways out. Run in process through the CLI's own parser on a real database
with the session's real model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import all_memories, command_runner, snapshot

from wontopos_mcp.engine.service import MemoryService

MEETING = """\
WEBVTT

00:00:01.000 --> 00:00:04.000
<v Dr. Amara Okafor>Let's move the launch review to Thursday.

00:00:04.500 --> 00:00:07.000
<v 김민준>목요일 오후 세 시에 가능합니다.

00:00:07.500 --> 00:00:09.000
<v Dr. Amara Okafor>Good, three o'clock then.
"""


@pytest.fixture
def wontopos(service: MemoryService, capsys: pytest.CaptureFixture[str]) -> Any:
    return command_runner(service, capsys)


def write(tmp_path: Path, name: str, data: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return str(path)


def test_unresolved_names_are_one_line_with_their_counts_and_the_three_ways_out(
    wontopos: Any, service: MemoryService, tmp_path: Path
) -> None:
    before = snapshot(service)
    code, out, err = wontopos("import", write(tmp_path, "review.vtt", MEETING), "--user", "team")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "'Dr. Amara Okafor' (2 messages), '김민준' (1 messages)" in err
    assert "--register" in err
    assert "--as 'Dr. Amara Okafor=Name'" in err
    assert "--skip 'Dr. Amara Okafor'" in err
    assert snapshot(service) == before


def test_a_meeting_imported_with_register_puts_each_turn_under_its_voice(
    wontopos: Any, service: MemoryService, tmp_path: Path
) -> None:
    path = write(tmp_path, "review.vtt", MEETING)
    code, out, err = wontopos(
        "import", path, "--user", "team", "--register", "--start", "2026-11-30T09:00:00Z", "--json"
    )
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["format"], summary["stored"]) == ("vtt", 3)
    assert summary["speakers"] == {"Dr. Amara Okafor": 2, "김민준": 1}
    said = {(m["speaker"], m["content"], m["event_date"]) for m in all_memories(service, "team")}
    assert ("김민준", "목요일 오후 세 시에 가능합니다.", "2026-11-30T09:00:04.500000Z") in said
    assert "of 3 messages" in err  # the progress line of a run that is not on a terminal

    code, out, _ = wontopos("import", path, "--user", "team", "--json")
    assert (code, json.loads(out)["stored"], json.loads(out)["already_imported"]) == (0, 0, 3)


def test_a_dry_run_prints_the_people_and_how_each_resolves(
    wontopos: Any, service: MemoryService, tmp_path: Path
) -> None:
    service.store_create("team")
    service.speaker_register("Amara", user_id="team")
    path = write(tmp_path, "review.vtt", MEETING)
    code, out, _ = wontopos("import", path, "--user", "team", "--dry-run", "--as", "Dr. Amara Okafor=Amara")
    assert code == 0
    assert out.startswith("dry run: review.vtt (vtt, ")
    assert "Dr. Amara Okafor\t2\tmapped to Amara" in out
    assert "김민준\t1\tUNRESOLVED" in out
    assert all_memories(service, "team") == []


@pytest.mark.parametrize(
    ("name", "data", "flags", "said"),
    [
        ("empty.txt", b"", (), "the file is empty"),
        ("noise.bin", bytes(range(256)) * 40, (), "no format recognises it"),
        ("chat.txt", "05/03/2026, 18:02 - Ana: hello\n", ("--format", "telegram"), "chat.txt: "),
        ("utf16.txt", "05/03/2026, 18:02 - Ana: hello\n".encode("utf-16"), ("--format", "whatsapp"), "UTF-8"),
        ("result.json", '{"name": "T", "type": "personal_chat", "id": 1, "messages": [{"id": 1, "ty', (), ": "),
        ("year.json", json.dumps({"name": "T", "type": "personal_chat", "id": 1, "messages": [
            {"id": 1, "type": "message", "date_unixtime": "884541340800", "from": "Ana", "text": "hi"}]}),
         (), "not a time"),
    ],
)  # fmt: skip
def test_a_file_invalid_for_its_format_is_one_line_naming_it_exit_2_and_nothing_stored(
    wontopos: Any, service: MemoryService, tmp_path: Path, name: str, data: Any, flags: tuple[str, ...], said: str
) -> None:
    before = snapshot(service)
    path = write(tmp_path, name, data)
    code, out, err = wontopos("import", path, "--user", "team", "--register", *flags)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith(f"wontopos-mcp: import: {path}: ")
    assert said in err
    assert snapshot(service) == before


def test_a_bad_option_is_one_line_naming_the_flag(wontopos: Any, tmp_path: Path) -> None:
    path = write(tmp_path, "review.vtt", MEETING)
    code, _, err = wontopos("import", path, "--tz", "Mars/Olympus", "--register")
    assert code == 2
    assert err.startswith(f"wontopos-mcp: import: {path}: --tz: tz 'Mars/Olympus' is not an IANA time zone")
