"""The ChatGPT reader: the visible branch of each conversation, and what it skips and refuses.

The sample files under ``data/chatgpt`` were written for these tests from the export's
public descriptions (no real conversation): ``branches.json`` (a regenerated answer, a
placeholder root, a hidden system message; Japanese and Russian), ``content_types.json``
(custom instructions, an uploaded photo and PDF, thoughts, a browser call and its result,
code and its output, an empty answer, a voice message; Korean, Hebrew, Arabic, emoji) and
``two_conversations.json`` (a conversation with only ``conversation_id``, no title and no
``current_node``).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from wontopos_mcp.imports import chatgpt
from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, SNIFF_BYTES, BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import BytesSource, FileSource

DATA = Path(__file__).parent / "data" / "chatgpt"
OPTIONS = ReadOptions(tz=timezone.utc)


def read_file(name: str) -> list[Message | Skipped]:
    return list(chatgpt.read(FileSource(DATA / name), OPTIONS))


def read_bytes(data: bytes) -> list[Message | Skipped]:
    return list(chatgpt.read(BytesSource("conversations.json", data), OPTIONS))


def messages(items: list[Message | Skipped]) -> list[Message]:
    return [item for item in items if isinstance(item, Message)]


def skips(items: list[Message | Skipped]) -> list[tuple[str, str]]:
    return [(item.kind, item.place) for item in items if isinstance(item, Skipped)]


def node(node_id: str, parent: str | None, role: str, text: str, **message: Any) -> tuple[str, dict[str, Any]]:
    body = {"id": node_id, "author": {"role": role}, "create_time": 1700000000.0}
    body["content"] = {"content_type": "text", "parts": [text]}
    body.update(message)
    return node_id, {"id": node_id, "parent": parent, "children": [], "message": body}


def export(*conversations: dict[str, Any]) -> bytes:
    return json.dumps(list(conversations), ensure_ascii=False).encode("utf-8")


def conversation(*nodes: tuple[str, dict[str, Any]], **fields: Any) -> dict[str, Any]:
    mapping = dict(nodes)
    base: dict[str, Any] = {
        "id": "c-1",
        "title": "T",
        "mapping": mapping,
        "current_node": nodes[-1][0] if nodes else None,
    }
    base.update(fields)
    return base


def test_the_visible_branch_is_read_root_first_without_the_regenerated_answer() -> None:
    texts = [m.text for m in messages(read_file("branches.json"))]
    assert texts == [
        "京都で三日間、何を見ればいいですか？",
        "一日目は東山、二日目は嵐山、三日目は伏見稲荷がおすすめです。",
        "А если пойдёт дождь?\nЧто тогда?",
        "Тогда музеи: Национальный музей Киото.",
    ]


def test_the_user_is_the_owner_without_a_name_and_the_assistant_is_the_ai() -> None:
    found = messages(read_file("branches.json"))
    assert [(m.role, m.author) for m in found] == [("user", None), ("assistant", None)] * 2


def test_messages_carry_their_own_ids_the_conversation_id_and_the_title() -> None:
    first = messages(read_file("branches.json"))[0]
    assert (first.message_id, first.conversation, first.title) == (
        "user-0001",
        "6f1c2a30-0000-4000-8000-000000000001",
        "旅行の計画",
    )


def test_times_are_unix_seconds_in_utc() -> None:
    first = messages(read_file("branches.json"))[0]
    assert first.time == datetime(2025, 1, 1, 9, 0, 1, 250000, tzinfo=timezone.utc)


def test_places_count_the_messages_of_the_branch() -> None:
    found = read_file("branches.json")
    assert [item.place for item in found] == [f"conversation 1, message {n}" for n in range(1, 6)]


def test_a_hidden_system_message_is_skipped_as_hidden() -> None:
    assert skips(read_file("branches.json")) == [("hidden", "conversation 1, message 1")]


def test_what_the_app_does_not_show_as_prose_is_skipped_by_kind() -> None:
    kinds = [kind for kind, _ in skips(read_file("content_types.json"))]
    # custom instructions; thoughts, recap; browser call, its result; code, its output; empty answer; system note
    assert kinds == ["hidden", "thinking", "thinking", "tool", "tool", "tool", "tool", "empty", "hidden"]


def test_an_uploaded_photo_and_file_are_attachment_lines_named_as_uploaded() -> None:
    photo = messages(read_file("content_types.json"))[0]
    assert photo.text == "[attachment: gyeongbokgung.jpg]\n이 사진에 있는 건물은 뭐예요? 🏯\n[attachment: 여행일정.pdf]"


def test_an_image_without_a_listed_upload_is_named_by_its_file_id() -> None:
    part = {"content_type": "image_asset_pointer", "asset_pointer": "sediment://file_00ab", "size_bytes": 1}
    found = messages(
        read_bytes(
            export(
                conversation(node("u", None, "user", "", content={"content_type": "multimodal_text", "parts": [part]}))
            )
        )
    )
    assert found[0].text == "[attachment: file_00ab]"


def test_a_voice_message_is_its_transcription() -> None:
    voice = messages(read_file("content_types.json"))[2]
    assert (voice.role, voice.text) == ("user", "שלום, ומה עם מחר?")


def test_a_message_without_create_time_has_no_time() -> None:
    answer = messages(read_file("content_types.json"))[1]
    assert (answer.text, answer.time) == ("경복궁입니다. 오전 9시부터 오후 6시까지 엽니다.", None)


def test_an_assistant_message_in_the_analysis_channel_is_thinking() -> None:
    found = read_bytes(export(conversation(node("a", None, "assistant", "weighing options", channel="analysis"))))
    assert skips(found) == [("thinking", "conversation 1, message 1")]


def test_several_conversations_are_read_in_order_each_under_its_own_id() -> None:
    found = messages(read_file("two_conversations.json"))
    assert [(m.conversation, m.text) for m in found] == [
        ("conv-aaaa", "Hello! 👋"),
        ("conv-aaaa", "Hi, how can I help?"),
        ("conv-bbbb", "Tell me a joke"),
        ("conv-bbbb", "The newer answer."),
    ]


def test_conversation_id_stands_in_for_a_missing_id_and_a_null_title_is_none() -> None:
    last = messages(read_file("two_conversations.json"))[-1]
    assert (last.conversation, last.title, last.place) == ("conv-bbbb", None, "conversation 2, message 2")


def test_a_conversation_without_mapping_yields_nothing() -> None:
    assert read_bytes(export({"id": "c-1", "title": "x", "mapping": None, "current_node": None})) == []


def test_a_bom_before_the_list_is_ignored() -> None:
    data = b"\xef\xbb\xbf" + export(conversation(node("u", None, "user", "hi")))
    assert [m.text for m in messages(read_bytes(data))] == ["hi"]


def test_conversations_are_yielded_before_the_rest_of_the_file_is_read() -> None:
    data = export(conversation(node("u", None, "user", "first")))[:-1] + b', {"id": '
    items = chatgpt.read(BytesSource("conversations.json", data), OPTIONS)
    assert isinstance(next(items), Message)
    with pytest.raises(BadExport) as refused:
        next(items)
    assert refused.value.place == "conversation 2"


@pytest.mark.parametrize(
    ("data", "place", "reason"),
    [
        (b"", "byte 0", "empty"),
        (b"  \n\t ", "byte 0", "empty"),
        ('[{"id": "c"}]'.encode("utf-16"), "byte 0", "UTF-16"),
        ('[{"id": "c"}]'.encode("utf-16-le"), "byte 0", "UTF-16"),
        (b'{"conversations": []}', "byte 0", "not a JSON list"),
        (b"Hello, this is a plain text file.", "byte 0", "not a JSON list"),
        (b'[{"id": "c-1", "mapping": {', "conversation 1", "premature EOF"),
        (b'[{"id": "c-1", "mapping": {}}] extra', "after conversation 1", "trailing garbage"),
        (b'[{"id": "c-1", "title": "\xff\xfe"}]', "conversation 1", "UTF8"),
        (b"[[" + b"[" * 300 + b"]" * 300 + b"]]", "conversation 1", "nested more than 256"),
        (b"[42]", "conversation 1", "not a JSON object"),
        (b'[{"title": "no id", "mapping": {}}]', "conversation 1", "has no id"),
        (b'[{"id": "c-1", "mapping": []}]', "conversation 1", "mapping is not a JSON object"),
        (b'[{"id": "c-1", "mapping": {}, "current_node": "gone"}]', "conversation 1", "current_node 'gone'"),
    ],
)
def test_a_file_that_is_not_a_chatgpt_export_is_refused_with_its_place(data: bytes, place: str, reason: str) -> None:
    with pytest.raises(BadExport) as refused:
        read_bytes(data)
    assert (refused.value.place, reason in refused.value.reason) == (place, True)


def test_a_parent_missing_from_the_mapping_is_refused() -> None:
    with pytest.raises(BadExport, match="a parent 'gone' is not in its mapping"):
        read_bytes(export(conversation(node("u", "gone", "user", "hi"))))


def test_parents_that_loop_are_refused() -> None:
    with pytest.raises(BadExport, match="parents form a loop"):
        read_bytes(export(conversation(node("a", "b", "user", "hi"), node("b", "a", "assistant", "hello"))))


@pytest.mark.parametrize(("raw", "reason"), [("yesterday", "not a number"), (1e15, "out of range")])
def test_a_create_time_that_is_not_a_time_is_refused_at_its_message(raw: object, reason: str) -> None:
    with pytest.raises(BadExport) as refused:
        read_bytes(export(conversation(node("u", None, "user", "hi", create_time=raw))))
    assert (refused.value.place, reason in refused.value.reason) == ("conversation 1, message 1", True)


def test_a_message_longer_than_the_limit_is_refused() -> None:
    with pytest.raises(BadExport, match="longer than"):
        read_bytes(export(conversation(node("u", None, "user", "x" * (MAX_MESSAGE_BYTES + 1)))))


@pytest.mark.parametrize("name", ["branches.json", "content_types.json", "two_conversations.json"])
def test_sniff_accepts_chatgpt_exports(name: str) -> None:
    assert chatgpt.sniff((DATA / name).read_bytes()[:SNIFF_BYTES])


def test_sniff_accepts_a_head_cut_before_the_first_current_node() -> None:
    head = (DATA / "branches.json").read_bytes().split(b'"current_node"')[0]
    assert chatgpt.sniff(head)


@pytest.mark.parametrize(
    "head",
    [
        b'[{"uuid": "c", "name": "Claude chat", "created_at": "2025-01-01T00:00:00Z", "chat_messages": []}]',
        b'{"type":"user","sessionId":"s","uuid":"u","parentUuid":null,"message":{"role":"user","content":"hi"}}\n',
        b'{"name": "Alice", "type": "personal_chat", "id": 1, "messages": [{"id": 1, "type": "message"}]}',
        b'{"guild": {"id": "1"}, "channel": {"id": "2"}, "messages": [{"id": "3", "content": "hi"}]}',
        b'[{"id": "share-1", "conversation_id": "c-1", "title": "Shared", "is_anonymous": true}]',
        b"12/31/24, 9:15 PM - Alice: Happy new year!\n",
        b"Alice: hello\nBob: hi\n",
        b"",
    ],
)
def test_sniff_rejects_other_formats(head: bytes) -> None:
    assert not chatgpt.sniff(head)
