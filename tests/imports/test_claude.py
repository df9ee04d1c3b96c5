"""The Claude reader: each conversation's turns, their text blocks and attachment names.

``data/claude/conversations.json`` was written for these tests from the export's public
descriptions (no real conversation): a conversation with content blocks (thinking, text
around a tool call, a turn of only tool blocks, one of only thinking, a blank one, files
and attachments, one pasted without a name; Russian, Japanese, emoji), and an older-style
one with only ``text`` and an empty name (Arabic, Hebrew, Korean).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from wontopos_mcp.imports import claude
from wontopos_mcp.imports.messages import SNIFF_BYTES, BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import BytesSource, FileSource

DATA = Path(__file__).parent / "data" / "claude"
OPTIONS = ReadOptions(tz=timezone.utc)


def read_sample() -> list[Message | Skipped]:
    return list(claude.read(FileSource(DATA / "conversations.json"), OPTIONS))


def read_bytes(data: bytes) -> list[Message | Skipped]:
    return list(claude.read(BytesSource("conversations.json", data), OPTIONS))


def messages(items: list[Message | Skipped]) -> list[Message]:
    return [item for item in items if isinstance(item, Message)]


def one_turn(**message: Any) -> bytes:
    turn = {"uuid": "m-1", "sender": "human", "text": "hi", "created_at": "2025-01-01T00:00:00Z"}
    turn.update(message)
    return json.dumps([{"uuid": "c-1", "name": "N", "chat_messages": [turn]}]).encode()


def test_turns_are_read_in_order_as_the_owner_and_the_ai() -> None:
    found = messages(read_sample())
    assert [m.role for m in found] == ["user", "assistant", "user", "user", "assistant"]
    assert {m.author for m in found} == {None}


def test_text_blocks_are_joined_and_thinking_and_tool_blocks_left_out() -> None:
    answer = messages(read_sample())[1]
    assert answer.text == "В мае хороши Португалия и Грузия.\n\nВ Лиссабоне около 22 °C. ☀️"


def test_attachments_and_files_are_named_once_each_without_their_contents() -> None:
    turn = messages(read_sample())[2]
    assert turn.text == (
        "この旅程を確認してください\n[attachment: itinerary.txt]\n[attachment: pasted text]\n[attachment: map.png]"
    )


def test_turns_without_text_are_skipped_as_tool_thinking_or_empty() -> None:
    found = [(s.kind, s.place) for s in read_sample() if isinstance(s, Skipped)]
    assert found == [
        ("tool", "conversation 1, message 4"),
        ("thinking", "conversation 1, message 5"),
        ("empty", "conversation 1, message 6"),
    ]


def test_ids_title_and_time_come_from_the_export() -> None:
    first = messages(read_sample())[0]
    assert (first.conversation, first.title, first.message_id, first.time, first.place) == (
        "0b9e5c1e-0000-4000-8000-0000000000c1",
        "Планирование отпуска",
        "msg-h-0001",
        datetime(2025, 3, 1, 10, 0, 1, 123456, tzinfo=timezone.utc),
        "conversation 1, message 1",
    )


def test_an_offset_time_is_read_as_utc() -> None:
    assert messages(read_sample())[1].time == datetime(2025, 3, 1, 10, 0, 9, tzinfo=timezone.utc)


def test_without_content_blocks_the_text_field_is_the_text_and_an_empty_name_no_title() -> None:
    older = messages(read_sample())[3:]
    assert [(m.conversation, m.title, m.text) for m in older] == [
        ("0b9e5c1e-0000-4000-8000-0000000000c2", None, "مرحبا، كيف حالك؟\nשלום!"),
        ("0b9e5c1e-0000-4000-8000-0000000000c2", None, "안녕하세요! 잘 지내요. 🙂"),
    ]


def test_a_turn_with_only_an_attachment_keeps_the_attachment_line() -> None:
    found = messages(read_bytes(one_turn(text="", content=[], files=[{"file_name": "scan.pdf"}])))
    assert found[0].text == "[attachment: scan.pdf]"


def test_a_sender_other_than_human_or_assistant_is_hidden() -> None:
    found = read_bytes(one_turn(sender="system"))
    assert found == [Skipped("c-1", "hidden", "conversation 1, message 1", "N")]


def test_a_turn_without_a_time_has_none() -> None:
    assert messages(read_bytes(one_turn(created_at=None)))[0].time is None


@pytest.mark.parametrize(
    ("data", "place", "reason"),
    [
        (b"", "byte 0", "empty"),
        ('[{"uuid": "c"}]'.encode("utf-16"), "byte 0", "UTF-16"),
        (b'{"conversations": []}', "byte 0", "not a JSON list"),
        (b'[{"uuid": "c-1", "chat_messages": [{"uuid": "m"', "conversation 1", "premature EOF"),
        (b'[{"uuid": "c-1", "chat_messages": []}]]', "after conversation 1", "trailing garbage"),
        (b'["c-1"]', "conversation 1", "not a JSON object"),
        (b'[{"name": "x", "chat_messages": []}]', "conversation 1", "has no uuid"),
        (b'[{"uuid": "c-1", "chat_messages": {}}]', "conversation 1", "not a list"),
        (b'[{"uuid": "c-1", "chat_messages": ["hi"]}]', "conversation 1, message 1", "not a JSON object"),
        (one_turn(created_at="2025-01-01 10:00"), "conversation 1, message 1", "not an ISO 8601 time"),
        (one_turn(created_at="30000-01-01T00:00:00Z"), "conversation 1, message 1", "not an ISO 8601 time"),
        (one_turn(created_at=1735689600), "conversation 1, message 1", "not an ISO 8601 time"),
    ],
)
def test_a_file_that_is_not_a_claude_export_is_refused_with_its_place(data: bytes, place: str, reason: str) -> None:
    with pytest.raises(BadExport) as refused:
        read_bytes(data)
    assert (refused.value.place, reason in refused.value.reason) == (place, True)


def test_sniff_accepts_a_claude_export() -> None:
    assert claude.sniff((DATA / "conversations.json").read_bytes()[:SNIFF_BYTES])


@pytest.mark.parametrize(
    "head",
    [
        (Path(__file__).parent / "data" / "chatgpt" / "branches.json").read_bytes()[:SNIFF_BYTES],
        b'{"type":"user","sessionId":"s","uuid":"u","parentUuid":null,"message":{"role":"user","content":"hi"}}\n',
        b'{"uuid": "c", "chat_messages": []}',
        b'{"name": "Alice", "type": "personal_chat", "id": 1, "messages": [{"id": 1, "type": "message"}]}',
        b'[{"id": "share-1", "conversation_id": "c-1", "title": "Shared", "is_anonymous": true}]',
        b"Alice: hello\nBob: hi\n",
        b"",
    ],
)
def test_sniff_rejects_other_formats(head: bytes) -> None:
    assert not claude.sniff(head)
