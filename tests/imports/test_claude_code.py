"""The Claude Code reader: what the person typed and the assistant's text, every other line skipped.

``data/claude_code/session.jsonl`` was written for these tests from public descriptions of
the transcript format (no real session): a resumed session's copied lines of an earlier
session (Arabic, Hebrew), a slash command's caveat, wrapper and output, a typed request
(Japanese, two lines), thinking, text and a tool call of one API message, the tool's
result, two text lines of one message (Russian, emoji), a pasted screenshot (Korean), a
system reminder, an interruption, a subagent's sidechain, a compaction, a synthetic answer,
an empty answer and a blank line.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from wontopos_mcp.imports import claude_code
from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, SNIFF_BYTES, BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import BytesSource, FileSource

DATA = Path(__file__).parent / "data" / "claude_code"
SAMPLE = DATA / "session.jsonl"
OPTIONS = ReadOptions(tz=timezone.utc)
OLD = "5d0f0a00-0000-4000-8000-0000000000a0"
NEW = "5d0f0a00-0000-4000-8000-0000000000a1"


def read_sample() -> list[Message | Skipped]:
    return list(claude_code.read(FileSource(SAMPLE), OPTIONS))


def read_bytes(data: bytes) -> list[Message | Skipped]:
    return list(claude_code.read(BytesSource("session.jsonl", data), OPTIONS))


def messages(items: list[Message | Skipped]) -> list[Message]:
    return [item for item in items if isinstance(item, Message)]


def line(**record: object) -> bytes:
    base: dict[str, object] = {"type": "user", "sessionId": "s-1", "uuid": "u-1", "timestamp": "2025-01-01T00:00:00Z"}
    base.update(record)
    base.setdefault("message", {"role": "user", "content": "hi"})
    return json.dumps(base, ensure_ascii=False).encode() + b"\n"


def test_what_the_person_typed_and_the_assistant_wrote_are_the_messages() -> None:
    assert [(m.role, m.text) for m in messages(read_sample())] == [
        ("user", "مرحبا، هل أنت هنا؟"),
        ("assistant", "כן, אני כאן."),
        ("user", "ログイン画面のバグを直してください。\nエラーは500です。"),
        ("assistant", "Let me look at the login handler."),
        ("assistant", "Нашёл: токен не проверялся. Исправил. ✅"),
        ("assistant", "Запустите тесты ещё раз."),
        ("user", "이 스크린샷도 봐 주세요 [Image #1]\n[attachment: image]"),
        ("user", "Thanks! 🎉"),
    ]


def test_the_person_has_no_name_and_each_line_keeps_its_uuid() -> None:
    found = messages(read_sample())
    assert [(m.author, m.message_id, m.place) for m in found[2:4]] == [
        (None, "u-0003", "line 8"),
        (None, "a-0002", "line 10"),
    ]


def test_every_other_line_is_skipped_by_kind_at_its_line() -> None:
    found = [(s.place, s.kind) for s in read_sample() if isinstance(s, Skipped)]
    assert found == [
        ("line 1", "meta"),  # summary
        ("line 2", "meta"),  # file-history-snapshot
        ("line 5", "meta"),  # isMeta caveat
        ("line 6", "meta"),  # <command-name>
        ("line 7", "meta"),  # <local-command-stdout>
        ("line 9", "thinking"),
        ("line 11", "tool"),  # tool_use
        ("line 12", "tool"),  # tool_result
        ("line 17", "meta"),  # <system-reminder>
        ("line 18", "meta"),  # [Request interrupted by user for tool use]
        ("line 19", "meta"),  # sidechain prompt
        ("line 20", "meta"),  # sidechain answer
        ("line 21", "meta"),  # compact boundary (system)
        ("line 22", "meta"),  # compaction summary
        ("line 23", "meta"),  # <synthetic> answer
        ("line 24", "empty"),
    ]


def test_lines_of_one_api_message_stay_separate_messages() -> None:
    found = messages(read_sample())
    assert [m.message_id for m in found[4:6]] == ["a-0004", "a-0005"]


def test_each_line_belongs_to_its_own_session_and_sessionless_lines_to_the_file() -> None:
    found = read_sample()
    assert [item.conversation for item in found[:4]] == ["session.jsonl", "session.jsonl", OLD, OLD]
    assert {item.conversation for item in found[4:]} == {NEW}


def test_times_are_the_utc_timestamps() -> None:
    typed = messages(read_sample())[2]
    assert typed.time == datetime(2025, 8, 1, 9, 1, 0, 250000, tzinfo=timezone.utc)


def test_reading_the_file_as_it_grows_gives_each_line_the_same_message() -> None:
    whole = SAMPLE.read_bytes()
    cut = whole[: whole.index(b"\n", len(whole) // 2) + 1]
    early = messages(read_bytes(cut))
    assert early == messages(read_bytes(whole))[: len(early)]


def test_a_bom_at_the_start_is_ignored() -> None:
    assert [m.text for m in messages(read_bytes(b"\xef\xbb\xbf" + line()))] == ["hi"]


def test_a_line_without_a_timestamp_has_no_time() -> None:
    record = json.loads(line())
    del record["timestamp"]
    assert messages(read_bytes(json.dumps(record).encode()))[0].time is None


def test_a_user_line_of_text_blocks_that_are_only_whitespace_is_empty() -> None:
    found = read_bytes(line(message={"role": "user", "content": [{"type": "text", "text": "  "}]}))
    assert found == [Skipped("s-1", "empty", "line 1")]


def test_an_assistant_line_of_only_redacted_thinking_is_thinking() -> None:
    found = read_bytes(
        line(type="assistant", message={"role": "assistant", "content": [{"type": "redacted_thinking"}]})
    )
    assert found == [Skipped("s-1", "thinking", "line 1")]


@pytest.mark.parametrize(
    ("data", "place", "reason"),
    [
        (b"", "byte 0", "empty"),
        (b"\n\n  \n", "byte 0", "empty"),
        (line().decode().encode("utf-16"), "line 1", "UTF-16"),
        (line() + b'{"type":"user","sessionId":"s-1","mess', "line 2", "not JSON"),
        (line() + b"this is not json\n", "line 2", "not JSON"),
        (line() + b'["type", "user"]\n', "line 2", "not a JSON object"),
        (line() + b'{"type": "user", "x": "\xff"}\n', "line 2", "not UTF-8"),
        (line() + b"[" * 100_000 + b"]" * 100_000 + b"\n", "line 2", "nested more than 256"),
        (line(timestamp="yesterday"), "line 1", "not an ISO 8601 time"),
        (line(timestamp="30000-01-01T00:00:00Z"), "line 1", "not an ISO 8601 time"),
        (line() + b'{"type": "user", "m": "' + b"x" * MAX_MESSAGE_BYTES + b'"}\n', "line 2", "longer than"),
    ],
)
def test_a_file_that_is_not_a_transcript_is_refused_at_its_line(data: bytes, place: str, reason: str) -> None:
    with pytest.raises(BadExport) as refused:
        read_bytes(data)
    assert (refused.value.place, reason in refused.value.reason) == (place, True)


def test_sniff_accepts_a_session_starting_with_a_summary_line() -> None:
    assert claude_code.sniff(SAMPLE.read_bytes()[:SNIFF_BYTES])


def test_sniff_accepts_a_head_that_cuts_a_line() -> None:
    head = SAMPLE.read_bytes().split(b"\n", 2)[2][:300]
    assert claude_code.sniff(head)


@pytest.mark.parametrize(
    "head",
    [
        (DATA.parent / "chatgpt" / "branches.json").read_bytes()[:SNIFF_BYTES],
        (DATA.parent / "claude" / "conversations.json").read_bytes()[:SNIFF_BYTES],
        b'{"content": "a memory", "created_at": "2025-01-01T00:00:00Z", "is_superseded": false}\n',
        b'{"type": "info", "time": "2025-01-01T00:00:00Z", "msg": "server started"}\n',
        b'{"name": "Alice", "type": "personal_chat", "id": 1, "messages": [{"id": 1, "type": "message"}]}',
        b"Alice: hello\nBob: hi\n",
        b"",
    ],
)
def test_sniff_rejects_other_formats(head: bytes) -> None:
    assert not claude_code.sniff(head)
