"""The WhatsApp reader: every layout and quirk of "Export chat", from small files we wrote."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from wontopos_mcp.imports import whatsapp
from wontopos_mcp.imports.messages import BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import BytesSource, FileSource

DATA = Path(__file__).parent / "data" / "whatsapp"
PARIS = ZoneInfo("Europe/Paris")
NNBSP = "\u202f"


def read_file(name: str, tz: ZoneInfo = PARIS) -> list[Message | Skipped]:
    return list(whatsapp.read(FileSource(DATA / name), ReadOptions(tz=tz)))


def read_text(text: str | bytes, tz: ZoneInfo = PARIS) -> list[Message | Skipped]:
    data = text.encode() if isinstance(text, str) else text
    return list(whatsapp.read(BytesSource("chat.txt", data), ReadOptions(tz=tz)))


def messages(items: list[Message | Skipped]) -> list[Message]:
    return [item for item in items if isinstance(item, Message)]


def kinds(items: list[Message | Skipped]) -> list[str]:
    return [item.kind if isinstance(item, Skipped) else "message" for item in items]


def refusal(text: str | bytes) -> BadExport:
    with pytest.raises(BadExport) as caught:
        read_text(text)
    return caught.value


# Layouts and locales


def test_android_us_export_reads_month_first_with_the_narrow_space_before_pm() -> None:
    found = messages(read_file("android_us.txt"))
    assert found[0].author == "Alice"
    assert found[0].text == "Who's in for Lisbon? 🇵🇹"
    assert found[0].time == datetime(2021, 12, 30, 21, 43, tzinfo=PARIS)
    assert found[0].place == "line 4"
    assert all(item.conversation == "android_us.txt" and item.message_id is None for item in found)


def test_a_multi_line_message_is_one_message_blank_lines_included() -> None:
    second = messages(read_file("android_us.txt"))[1]
    assert second.text == "Me!\nBooking flights tonight.\n\nSeat by the window please"
    assert second.place == "line 5"


def test_the_marks_around_a_phone_number_are_not_part_of_the_name() -> None:
    assert messages(read_file("android_us.txt"))[1].author == "+1 555 0100"


def test_system_lines_media_deleted_and_edited_messages_of_an_android_export() -> None:
    items = read_file("android_us.txt")
    assert kinds(items) == [
        "system",  # end-to-end encryption
        "system",  # created group "Trip: Lisbon" (a colon inside the quoted name)
        "system",  # added
        "message",
        "message",
        "media",  # <Media omitted>
        "deleted",  # This message was deleted
        "deleted",  # You deleted this message
        "message",  # edited: the text kept
        "system",  # security code changed
        "system",  # left
        "message",  # a photo with a caption
        "media",  # a photo alone
    ]
    edited = messages(items)[2]
    assert edited.text == "Happy new year everyone"


def test_an_attachment_with_a_caption_keeps_the_caption_and_names_the_file() -> None:
    photo = messages(read_file("android_us.txt"))[-1]
    assert photo.author == "Carol"
    assert photo.text == "The view from the hotel\n[attachment: IMG-20211231-WA0001.jpg]"


def test_android_day_first_export_in_russian() -> None:
    found = messages(read_file("android_ru.txt"))
    assert [m.author for m in found] == ["Анна", "Борис", "Анна"]
    assert found[0].time == datetime(2022, 1, 3, 8, 15, tzinfo=PARIS)
    assert found[1].text == "Привет, Анна. Как дела?\nВсё хорошо?"
    assert found[2].time == datetime(2022, 1, 13, 21, 40, tzinfo=PARIS)


def test_android_german_export_with_dots_and_two_digit_years() -> None:
    found = messages(read_file("android_de.txt"))
    assert found[0].time == datetime(2021, 12, 31, 23, 59, tzinfo=PARIS)
    assert found[1].time == datetime(2022, 1, 1, 0, 0, tzinfo=PARIS)
    assert found[1].author == "Grüße"


def test_ios_export_skips_the_apps_lines_written_under_the_chats_name() -> None:
    items = read_file("ios_gb.txt")
    assert kinds(items) == [
        "system",  # end-to-end encryption, under "Book club"
        "system",  # created this group
        "message",
        "message",
        "media",  # image omitted
        "media",  # <attached: ...> alone
        "message",  # <attached: ...> with a caption
        "message",  # edited
        "deleted",
        "call",  # Missed voice call
        "system",  # added
    ]
    assert not any(isinstance(item, Message) and item.author == "Book club" for item in items)


def test_ios_export_reads_seconds_the_tilde_of_non_contacts_and_captions() -> None:
    found = messages(read_file("ios_gb.txt"))
    assert found[0].time == datetime(2022, 2, 14, 10, 1, 30, tzinfo=PARIS)
    assert found[1].author == "Maya"
    assert found[2].text == "The cover\n[attachment: 00000013-PHOTO-2022-02-14-10-05-00.jpg]"
    assert found[3].text == "Lovely"


def test_ios_us_export_reads_twelve_hour_times_around_midnight() -> None:
    found = messages(read_file("ios_us.txt"))
    assert [m.time for m in found] == [
        datetime(2021, 12, 31, 21, 41, 5, tzinfo=PARIS),
        datetime(2021, 12, 31, 23, 59, 59, tzinfo=PARIS),
        datetime(2022, 1, 1, 0, 0, 1, tzinfo=PARIS),
    ]
    assert found[2].text == "🎉🎉🎉"


def test_korean_export_puts_the_marker_before_the_time_and_the_year_first() -> None:
    found = messages(read_file("android_ko.txt"))
    assert [(m.author, m.time) for m in found] == [
        ("서연", datetime(2022, 3, 5, 11, 30, tzinfo=PARIS)),
        ("민준", datetime(2022, 3, 5, 12, 15, tzinfo=PARIS)),
        ("서연", datetime(2022, 3, 5, 15, 4, tzinfo=PARIS)),
    ]
    assert found[1].text == "네, 반가워요"


def test_japanese_export_reads_the_marker_glued_to_the_time() -> None:
    found = messages(read_file("android_ja.txt"))
    assert [(m.author, m.text, m.time.hour if m.time else None) for m in found] == [
        ("太郎", "おはようございます", 9),
        ("花子", "こんにちは", 13),
    ]


def test_spanish_export_reads_p_m_with_no_break_spaces_and_a_localized_deletion() -> None:
    items = read_file("android_es.txt")
    assert kinds(items) == ["message", "message", "deleted"]
    first, second = messages(items)
    assert first.author == "María José"
    assert first.time == datetime(2017, 6, 20, 20, 28, tzinfo=PARIS)
    assert second.time == datetime(2017, 6, 21, 9, 2, tzinfo=PARIS)


def test_hebrew_and_arabic_names_lose_their_direction_marks() -> None:
    found = messages(read_file("android_rtl.txt"))
    assert [(m.author, m.text) for m in found] == [("נועה", "שלום לכולם"), ("سارة", "مرحبا")]


def test_a_utf8_bom_and_windows_line_ends_are_read_away() -> None:
    found = messages(read_file("bom_crlf.txt"))
    assert [(m.author, m.text) for m in found] == [
        ("Zoë", "Merry Christmas\nand a happy new year"),
        ("Léa", "Joyeux Noël"),
    ]


def test_times_are_local_to_the_zone_given() -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    found = messages(read_file("android_ru.txt", tz=tokyo))
    assert found[0].time == datetime(2022, 1, 2, 23, 15, tzinfo=timezone.utc)


# The order of day and month, decided from the whole file


def test_a_day_over_twelve_late_in_the_file_makes_the_whole_file_day_first() -> None:
    found = messages(read_text("03/01/2022, 08:00 - A: one\n14/01/2022, 09:00 - B: two\n"))
    assert found[0].time == datetime(2022, 1, 3, 8, 0, tzinfo=PARIS)


def test_a_second_field_over_twelve_makes_the_file_month_first() -> None:
    found = messages(read_text("03/01/22, 8:00 AM - A: one\n03/14/22, 9:00 AM - B: two\n"))
    assert found[0].time == datetime(2022, 3, 1, 8, 0, tzinfo=PARIS)


def test_an_ambiguous_file_takes_the_order_under_which_dates_do_not_go_back() -> None:
    text = "1/2/22, 10:00 - A: a\n1/3/22, 10:00 - A: b\n2/1/22, 10:00 - A: c\n"
    found = messages(read_text(text))
    assert [m.time.date().isoformat() if m.time else "" for m in found] == ["2022-01-02", "2022-01-03", "2022-02-01"]


def test_an_ambiguous_short_file_is_month_first_only_with_a_us_clock() -> None:
    us = messages(read_text(f"[05/04/22, 10:00:00{NNBSP}AM] A: a\n"))
    elsewhere = messages(read_text("05/04/22, 10:00 - A: a\n"))
    assert us[0].time == datetime(2022, 5, 4, 10, 0, tzinfo=PARIS)
    assert elsewhere[0].time == datetime(2022, 4, 5, 10, 0, tzinfo=PARIS)


# Lines that look like something else


def test_a_message_mentioning_leaving_is_still_a_message() -> None:
    items = read_text("03/01/2022, 08:00 - Alice: I left\n03/01/2022, 08:01 - Alice: Voice call tomorrow?\n")
    assert [m.text for m in messages(items)] == ["I left", "Voice call tomorrow?"]


def test_a_message_with_a_colon_and_one_without_a_space_after_the_name() -> None:
    found = messages(read_text("03/01/2022, 08:00 - Alice: note: bring food\n03/01/2022, 08:01 - Bob:ok\n"))
    assert [(m.author, m.text) for m in found] == [("Alice", "note: bring food"), ("Bob", "ok")]


def test_a_continuation_line_that_starts_with_a_number_is_not_a_new_message() -> None:
    found = messages(read_text("03/01/2022, 08:00 - Alice: list\n1/2 cup of flour\n12.5 grams\n"))
    assert found[0].text == "list\n1/2 cup of flour\n12.5 grams"


def test_an_empty_message_is_skipped_as_empty() -> None:
    assert kinds(read_text("03/01/2022, 08:00 - Alice: \n03/01/2022, 08:01 - Bob: hi\n")) == ["empty", "message"]


# Files that are not valid


def test_an_empty_file_is_refused() -> None:
    error = refusal(b"")
    assert error.place == "byte 0"
    assert "empty" in error.reason


def test_a_utf16_export_is_refused_naming_the_encoding_and_the_fix() -> None:
    data = "31/12/2021, 21:41 - Alice: hi\n".encode("utf-16")
    error = refusal(data)
    assert error.place == "byte 0"
    assert "UTF-16" in error.reason
    assert "UTF-8" in error.reason


def test_a_utf16_export_without_a_mark_is_refused_too() -> None:
    error = refusal("31/12/2021, 21:41 - Alice: hi\n".encode("utf-16-le"))
    assert "UTF-16" in error.reason


def test_bytes_that_are_not_utf8_are_refused_at_their_line() -> None:
    error = refusal("31/12/2021, 21:41 - Zoë: hi\n31/12/2021, 21:42 - Zoë: ça va\n".encode("latin-1"))
    assert error.place == "line 1"
    assert "UTF-8" in error.reason


def test_a_file_that_does_not_start_with_a_date_is_not_an_export() -> None:
    error = refusal("Alice: hello\n31/12/2021, 21:41 - Alice: hi\n")
    assert error.place == "line 1"
    assert "date" in error.reason


def test_dates_proving_both_orders_are_refused() -> None:
    error = refusal("13/01/2022, 08:00 - A: a\n01/13/2022, 08:00 - A: b\n")
    assert error.place == "line 2"
    assert "disagree" in error.reason


def test_a_date_that_does_not_exist_is_refused_at_its_line() -> None:
    error = refusal("13/01/2022, 08:00 - A: a\n31/02/2022, 08:00 - A: b\n")
    assert error.place == "line 2"
    assert "date" in error.reason


def test_a_twelve_hour_time_past_twelve_is_refused() -> None:
    error = refusal("13/01/2022, 13:00 PM - A: a\n")
    assert error.place == "line 1"
    assert "12" in error.reason


def test_a_message_past_the_size_limit_is_refused_at_its_first_line() -> None:
    line = ("x" * (1 << 20) + "\n").encode()
    data = b"13/01/2022, 08:00 - A: start\n" + line * 5
    with pytest.raises(BadExport) as caught:
        read_text(data)
    assert caught.value.place == "line 1"
    assert "longer" in caught.value.reason


# Sniffing


@pytest.mark.parametrize("name", sorted(path.name for path in DATA.iterdir()))
def test_sniff_claims_every_sample_export(name: str) -> None:
    assert whatsapp.sniff((DATA / name).read_bytes())


def test_sniff_claims_a_utf16_export_so_that_reading_it_explains() -> None:
    assert whatsapp.sniff("[31/12/2021, 21:41:05] Alice: hi\n".encode("utf-16"))


@pytest.mark.parametrize(
    "head",
    [
        b'{"name": "chat", "messages": []}',
        b"Alice: hello\nBob: hi there\n",
        b"WEBVTT\n\n00:00:01.000 --> 00:00:02.000\n<v Alice>hi\n",
        b"1\n00:00:01,000 --> 00:00:02,000\nAlice: hi\n",
        b"Speaker 1  0:05\nHello everyone.\n",
        b"2021-12-31 21:41:05,123 INFO server started\n",
        b"",
        b"\x89PNG\r\n\x1a\n\x00\x00",
    ],
)
def test_sniff_rejects_other_formats(head: bytes) -> None:
    assert not whatsapp.sniff(head)
