"""The DiscordChatExporter reader: one channel's JSON, streamed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from wontopos_mcp.imports import discord
from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import BytesSource, FileSource

DATA = Path(__file__).parent / "data" / "discord"
OPTIONS = ReadOptions(tz=timezone.utc)


def read(name: str) -> list[Message | Skipped]:
    return list(discord.read(FileSource(DATA / name), OPTIONS))


def read_bytes(data: bytes) -> list[Message | Skipped]:
    return list(discord.read(BytesSource("channel.json", data), OPTIONS))


def messages(items: list[Message | Skipped]) -> list[Message]:
    return [item for item in items if isinstance(item, Message)]


def export(*items: dict[str, object]) -> bytes:
    body = {
        "guild": {"id": "1", "name": "Guild", "iconUrl": ""},
        "channel": {"id": "2", "type": "GuildTextChat", "categoryId": None, "category": None, "name": "chat"},
        "dateRange": {"after": None, "before": None},
        "exportedAt": "2026-01-10T00:00:00+00:00",
        "messages": list(items),
    }
    return json.dumps(body, ensure_ascii=False, indent=2).encode()


def message(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {"id": "10", "type": "Default", "timestamp": "2026-01-09T08:00:00+00:00"}
    base.update({"timestampEdited": None, "content": "hi", "author": {"id": "3", "name": "ann", "nickname": "Ann"}})
    base.update({"attachments": [], "embeds": [], "stickers": [], "reactions": [], "mentions": []})
    base.update(fields)
    return base


def test_a_channel_is_one_conversation_titled_by_guild_and_channel() -> None:
    found = read("general.json")
    assert {item.conversation for item in found} == {"901"}
    assert {item.title for item in found} == {"Gamers 🎮 / general"}


def test_the_speaker_is_the_nickname_else_the_name() -> None:
    authors = [m.author for m in messages(read("general.json"))]
    assert authors == ["Ann", "ゆき", "ivan", "ليلى", "Scorebot"]


def test_texts_in_several_scripts_keep_mentions_as_the_exporter_wrote_them() -> None:
    texts = [m.text for m in messages(read("general.json"))]
    assert texts[:2] == ["Welcome @ゆき! 👋", "ありがとうございます！よろしくお願いします。"]
    assert texts[3] == "سأنضم إلى المباراة الليلة"


def test_times_keep_their_offset_and_fractions() -> None:
    found = messages(read("general.json"))
    assert found[0].time == datetime(2026, 1, 9, 8, 1, 0, 123000, tzinfo=timezone.utc)
    assert found[1].time == datetime(2026, 1, 9, 8, 2, tzinfo=timezone.utc)
    assert found[1].time is not None
    assert found[1].time.utcoffset() == timedelta(hours=9)


def test_an_attachment_with_text_is_an_attachment_line() -> None:
    assert messages(read("general.json"))[2].text == "Вот карта уровня\n[attachment: map.png]"


def test_ids_are_the_messages_own() -> None:
    assert [m.message_id for m in messages(read("general.json"))] == ["5002", "5003", "5004", "5007", "5012"]


def test_joins_pins_thread_starts_are_service_calls_are_calls_and_bare_media_is_media() -> None:
    kinds = {item.place: item.kind for item in read("general.json") if isinstance(item, Skipped)}
    assert kinds == {
        "message 1 (id 5001)": "service",
        "message 5 (id 5005)": "media",
        "message 6 (id 5006)": "media",
        "message 8 (id 5008)": "service",
        "message 9 (id 5009)": "call",
        "message 10 (id 5010)": "service",
        "message 11 (id 5011)": "media",
    }


def test_raw_mentions_are_named_from_the_messages_mentions_and_custom_emoji_by_name() -> None:
    (only,) = messages(read("raw_markdown.json"))
    assert only.text == "@Иван 내일 만나요 :blobwave: @ゆき <@999>"
    assert only.title == "Gamers 🎮 / 모임"


def test_a_forward_reads_the_forwarded_text_and_a_blank_message_is_empty() -> None:
    found = read("direct_messages.json")
    first = found[0]
    assert isinstance(first, Message)
    assert first.text == "Happy new year everyone!"
    assert first.title == "Direct Messages / ann.k"
    assert [item.kind for item in found[1:] if isinstance(item, Skipped)] == ["service", "empty"]


def test_an_edited_message_is_its_content_at_its_first_time() -> None:
    edited = messages(read("general.json"))[3]
    assert edited.time == datetime(2026, 1, 9, 8, 6, tzinfo=timezone.utc)


def test_a_cut_file_is_refused_naming_the_message_begun() -> None:
    whole = export(message(id="1"), message(id="2", content="cut here"))
    with pytest.raises(BadExport) as caught:
        read_bytes(whole[: whole.index(b"cut here")])
    assert caught.value.place == "message 2"


@pytest.mark.parametrize(
    ("data", "place", "reason"),
    [
        (b"", "byte 0", "empty"),
        ('{"guild": {}}'.encode("utf-16"), "byte 0", "UTF-16"),
        (b"\x00\x01\x02binary", "byte 0", "UTF-16"),
        (b"GIF89a\x01\x00garbage", "the start of the file", "not valid JSON"),
        (b'{"guild": {"id": "1"}, "channel": {"id": "2"}}', "end of file", "no guild, channel and messages"),
        (b'{"messages": [{"id": "1"}]}', "the start of the file", "before the channel's id"),
    ],
)
def test_files_that_are_not_a_discord_export_are_refused(data: bytes, place: str, reason: str) -> None:
    with pytest.raises(BadExport) as caught:
        read_bytes(data)
    assert caught.value.place == place
    assert reason in caught.value.reason


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"timestamp": "30000-01-01T00:00:00+00:00"}, "not a time"),
        ({"timestamp": "2026-02-30T00:00:00+00:00"}, "not a time"),
        ({"timestamp": "yesterday"}, "not a time"),
        ({"id": None}, "without its id"),
        ({"type": 0}, "without its type"),
        ({"author": None}, "without its author"),
        ({"author": {"id": "3"}}, "no name"),
        ({"content": 5}, "not text"),
        ({"attachments": {"fileName": "a"}}, "not a list"),
    ],
)
def test_a_broken_message_is_refused_with_its_place(fields: dict[str, object], reason: str) -> None:
    with pytest.raises(BadExport) as caught:
        read_bytes(export(message(id="1"), message(**{"id": "2", **fields})))
    assert caught.value.place.startswith("message 2")
    assert reason in caught.value.reason


def test_a_message_longer_than_the_limit_is_refused() -> None:
    with pytest.raises(BadExport) as caught:
        read_bytes(export(message(content="x" * (MAX_MESSAGE_BYTES + 300_000))))
    assert caught.value.place == "message 1"
    assert "longer than" in caught.value.reason


@pytest.mark.parametrize("name", ["general.json", "raw_markdown.json", "direct_messages.json"])
def test_sniff_accepts_discord_chat_exporter_files(name: str) -> None:
    assert discord.sniff((DATA / name).read_bytes())


@pytest.mark.parametrize(
    "head",
    [
        b'{\n "name": "Chat",\n "type": "personal_chat",\n "id": 5,\n "messages": [',
        b'[{"type": "message", "user": "U1", "text": "hi", "ts": "1.0"}]',
        b'{"guild": "not an object", "channel": {"id": "2"}, "messages": [',
        b'{"channel": {"id": "2"}, "messages": []}',
        b'[{"uuid": "x", "name": "chat", "chat_messages": []}]',
        b"[12/01/2026, 10:00:00] Ann: hello\n",
        b"1\n00:00:00,000 --> 00:00:01,000\nAnn: hi\n",
    ],
)
def test_sniff_rejects_other_formats(head: bytes) -> None:
    assert not discord.sniff(head)
