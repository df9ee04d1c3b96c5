"""The Telegram Desktop reader: ``result.json`` of one chat or a whole account, streamed."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from wontopos_mcp.imports import telegram
from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import BytesSource, FileSource

DATA = Path(__file__).parent / "data" / "telegram"
OPTIONS = ReadOptions(tz=ZoneInfo("Europe/Berlin"))


def read(name: str) -> list[Message | Skipped]:
    return list(telegram.read(FileSource(DATA / name), OPTIONS))


def read_bytes(data: bytes) -> list[Message | Skipped]:
    return list(telegram.read(BytesSource("result.json", data), OPTIONS))


def messages(items: list[Message | Skipped]) -> list[Message]:
    return [item for item in items if isinstance(item, Message)]


def chat(*items: dict[str, object]) -> bytes:
    body = {"name": "Chat", "type": "personal_chat", "id": 5, "messages": list(items)}
    return json.dumps(body, ensure_ascii=False, indent=1).encode()


def message(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {"id": 1, "type": "message", "date": "2026-01-02T10:00:00"}
    base.update({"date_unixtime": "1767348000", "from": "Ann", "from_id": "user1", "text": "hi"})
    base.update(fields)
    return base


def test_a_chat_in_several_scripts_is_read_with_speakers_ids_and_utc_times() -> None:
    found = read("personal_chat.json")
    assert [(m.author, m.message_id) for m in messages(found)] == [
        ("Алиса Иванова", "101"),
        ("Kenji 健二", "102"),
        ("민준", "103"),
    ]
    first = messages(found)[0]
    assert first.conversation == "4815162342"
    assert first.title == "Алиса Иванова"
    assert first.text == "Привет! Как дела?"
    assert first.time == datetime(2026, 1, 2, 12, 0, tzinfo=timezone.utc)
    assert first.role == "person"


def test_a_multi_line_message_in_korean_arabic_and_hebrew_is_one_message() -> None:
    last = messages(read("personal_chat.json"))[-1]
    assert last.text == "좋아요 👍 내일 봐요\nسأكون هناك أيضًا\nגם אני אגיע"


def test_text_pieces_are_concatenated_and_a_text_link_keeps_its_address() -> None:
    first = messages(read("rich_text.json"))[0]
    assert first.text == (
        "Thanks @carol_reads and Dmitri! The list is here (https://example.org/list), "
        "see https://example.org — vote by Friday"
    )


def test_an_edited_message_is_its_final_text() -> None:
    edited = messages(read("rich_text.json"))[1]
    assert edited.text == "I vote for the second book (edited: not the first)"
    assert edited.time == datetime(2026, 1, 3, 9, 5, tzinfo=timezone.utc)


def test_text_entities_are_read_when_text_is_missing() -> None:
    assert messages(read("rich_text.json"))[2].text == "Only entities here, still read"


def test_a_captioned_photo_or_file_is_its_text_and_an_attachment_line() -> None:
    texts = [m.text for m in messages(read("media.json"))]
    assert texts == [
        "Look at the snow ❄️\n[attachment: photo_1@04-01-2026_10-00-00.jpg]",
        "Grandma's recipe\n[attachment: recipe.pdf]",
        "The video from the hike\n[attachment: video_file]",
    ]


def test_media_without_a_caption_stickers_voice_and_polls_are_skipped_as_media() -> None:
    skipped = [(s.kind, s.place) for s in read("media.json") if isinstance(s, Skipped)]
    assert skipped == [
        ("media", "chat 555, message 2 (id 2)"),
        ("media", "chat 555, message 3 (id 3)"),
        ("media", "chat 555, message 4 (id 4)"),
        ("media", "chat 555, message 7 (id 7)"),
    ]


def test_service_messages_are_skipped_and_calls_counted_as_calls() -> None:
    found = read("service.json")
    kinds = [item.kind if isinstance(item, Skipped) else "kept" for item in found]
    assert kinds == ["service", "service", "kept", "service", "call", "call", "media"]
    assert all(item.title == "Project X" for item in found)


def test_a_deleted_account_is_named_as_telegram_shows_it() -> None:
    (only,) = messages(read("deleted_account.json"))
    assert only.author == "Deleted Account"


def test_an_old_export_without_unix_times_reads_local_dates_in_the_given_zone() -> None:
    (only,) = messages(read("old_export_local_dates.json"))
    assert only.time == datetime(2019, 7, 1, 18, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    assert only.time.utcoffset() is not None


def test_telegrams_control_character_escapes_are_read_and_an_escaped_backslash_is_kept() -> None:
    (only,) = messages(read("control_escape.json"))
    assert only.text == "a\x0bb and a backslash \\x41 kept"


def test_a_whole_account_yields_every_chat_and_left_channel_as_its_own_conversation() -> None:
    found = messages(read("account.json"))
    assert [(m.conversation, m.title, m.text) for m in found] == [
        ("100", "Saved Messages", "Note to self: buy milk"),
        ("101", "Ana", "¿Vienes mañana?"),
        ("101", "Ana", "Sí, claro"),
        ("777", "Tech News", "A new release is out"),
    ]
    assert found[2].author == "Sam Lee"


def test_a_bom_at_the_start_is_ignored() -> None:
    (only,) = messages(read_bytes(b"\xef\xbb\xbf" + chat(message())))
    assert only.text == "hi"


def test_an_empty_text_without_media_is_skipped_as_empty() -> None:
    (only,) = read_bytes(chat(message(text="   ")))
    assert isinstance(only, Skipped)
    assert only.kind == "empty"


def test_a_message_of_an_unknown_type_is_skipped_as_service() -> None:
    (only,) = read_bytes(chat(message(type="story_reply")))
    assert isinstance(only, Skipped)
    assert only.kind == "service"


def test_messages_are_read_in_the_files_order_with_places_counting_within_the_chat() -> None:
    found = read_bytes(chat(message(id=3, text="one"), message(id=4, text="two")))
    assert [m.place for m in messages(found)] == ["chat 5, message 1 (id 3)", "chat 5, message 2 (id 4)"]


def test_a_cut_file_is_refused_naming_the_last_message_begun() -> None:
    whole = chat(message(id=1), message(id=2, text="the second one is cut"))
    with pytest.raises(BadExport) as caught:
        read_bytes(whole[: whole.index(b"the second one") + 5])
    assert caught.value.place == "chat 5, message 2"
    assert "not valid JSON" in caught.value.reason


@pytest.mark.parametrize(
    ("data", "place", "reason"),
    [
        (b"", "byte 0", "empty"),
        ('{"name": "x"}'.encode("utf-16"), "byte 0", "UTF-16"),
        (b"\x89PNG\r\n\x1a\n\x00\x00garbage", "the start of the file", "not valid JSON"),
        (b"\x7fELF garbage \xff\xfe", "the start of the file", "not valid JSON"),
        (b'{"foo": [1, 2, 3]}', "end of file", "no chat"),
        (b'[{"id": 1}]', "end of file", "no chat"),
    ],
)
def test_files_that_are_not_a_telegram_export_are_refused(data: bytes, place: str, reason: str) -> None:
    with pytest.raises(BadExport) as caught:
        read_bytes(data)
    assert caught.value.place == place
    assert reason in caught.value.reason


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"date_unixtime": "883612800000"}, "not a time"),  # year 29970
        ({"date_unixtime": "soon"}, "not a time"),
        ({"date_unixtime": None, "date": "30000-01-01T00:00:00"}, "not a time"),
        ({"date_unixtime": None, "date": None}, "without a date"),
        ({"id": None}, "without its id"),
        ({"type": None}, "without its type"),
        ({"text": 42}, "neither a string nor a list"),
        ({"text": ["ok", 7]}, "neither a string nor {type, text}"),
        ({"from": 12}, "not a name"),
    ],
)
def test_a_broken_message_is_refused_with_its_place(fields: dict[str, object], reason: str) -> None:
    with pytest.raises(BadExport) as caught:
        read_bytes(chat(message(id=1), message(**{"id": 2, **fields})))
    assert caught.value.place.startswith("chat 5, message 2")
    assert reason in caught.value.reason


def test_a_file_cut_between_messages_is_refused_naming_the_message_before() -> None:
    whole = chat(message(id=1), message(id=2))
    with pytest.raises(BadExport) as caught:
        read_bytes(whole[: whole.rindex(b"{")])
    assert caught.value.place == "after chat 5, message 1"


def test_messages_before_the_chats_id_are_refused() -> None:
    data = json.dumps({"name": "x", "messages": [message()], "type": "personal_chat", "id": 5}).encode()
    with pytest.raises(BadExport) as caught:
        read_bytes(data)
    assert "before its id" in caught.value.reason


def test_a_message_longer_than_the_limit_is_refused_without_reading_it_whole() -> None:
    data = chat(message(id=1), message(id=2, text="x" * (MAX_MESSAGE_BYTES + 300_000)))
    with pytest.raises(BadExport) as caught:
        read_bytes(data)
    assert caught.value.place == "chat 5, message 2"
    assert "longer than" in caught.value.reason


@pytest.mark.parametrize(
    "name",
    [
        "personal_chat.json",
        "rich_text.json",
        "media.json",
        "service.json",
        "account.json",
        "old_export_local_dates.json",
        "control_escape.json",
    ],
)
def test_sniff_accepts_telegram_desktop_exports(name: str) -> None:
    assert telegram.sniff((DATA / name).read_bytes())


@pytest.mark.parametrize(
    "head",
    [
        b'{\n  "guild": {"id": "1", "name": "G"},\n  "channel": {"id": "2", "type": "GuildTextChat", "name": "c"},\n'
        b'  "messages": [',
        b'[\n    {\n        "type": "message",\n        "user": "U1",\n        "text": "hi",\n        "ts": "1.0"\n',
        b'[{"title": "Chat", "create_time": 1700000000.0, "mapping": {}}]',
        b'{"name": "my-package", "type": "module", "version": "1.0.0"}',
        b'{"name": "x", "type": "personal_chat", "id": "not a number", "messages": [',
        b"12/01/2026, 10:00 - Ann: hello\n",
        b"WEBVTT\n\n00:00.000 --> 00:01.000\n<v Ann>hello\n",
        b"",
    ],
)
def test_sniff_rejects_other_formats(head: bytes) -> None:
    assert not telegram.sniff(head)
