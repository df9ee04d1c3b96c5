"""The transcript reader: ``Name: text`` lines and Otter-style headers, and a sniff that claims little."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from wontopos_mcp.imports import transcript
from wontopos_mcp.imports.messages import BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import BytesSource, FileSource

DATA = Path(__file__).parent / "data"
START = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
WITH_START = ReadOptions(tz=timezone.utc, start=START)


def read_file(name: str, options: ReadOptions = WITH_START) -> list[Message | Skipped]:
    return list(transcript.read(FileSource(DATA / "transcript" / name), options))


def read_text(text: str | bytes, options: ReadOptions = WITH_START) -> list[Message | Skipped]:
    data = text.encode() if isinstance(text, str) else text
    return list(transcript.read(BytesSource("meeting.txt", data), options))


def turns(items: list[Message | Skipped]) -> list[tuple[str | None, str]]:
    return [(item.author, item.text) for item in items if isinstance(item, Message)]


def test_name_lines_are_turns_and_unnamed_lines_go_on_with_the_turn_before() -> None:
    items = read_file("names.txt")
    assert turns(items) == [
        ("Alice", "Shall we start?"),
        ("Bob", "Yes. First, the budget.\nIt went over by ten percent.\n\nThat was the hosting bill."),
        ("Алексей", "Понятно, спасибо."),
        ("Alice", "Next item 🙂"),
    ]
    bob = items[2]
    assert isinstance(bob, Message)
    assert bob.place == "line 4"
    assert bob.conversation == "names.txt"
    assert bob.message_id is None


def test_a_title_before_the_first_name_is_skipped_as_system() -> None:
    first = read_file("names.txt")[0]
    assert isinstance(first, Skipped)
    assert (first.kind, first.place) == ("system", "line 1")


def test_name_lines_without_timestamps_have_no_time() -> None:
    assert {item.time for item in read_file("names.txt") if isinstance(item, Message)} == {None}


def test_otter_headers_give_the_speaker_and_the_time_of_their_paragraphs() -> None:
    items = read_file("otter.txt")
    assert turns(items) == [
        ("Speaker 1", "Hello everyone, thanks for coming."),
        ("Yuki Tanaka", "ありがとうございます。\nGlad to be here."),
        ("Speaker 1", "Let's wrap up."),
    ]
    times = [item.time for item in items if isinstance(item, Message)]
    assert times == [
        START + timedelta(seconds=5),
        START + timedelta(seconds=12),
        START + timedelta(hours=1, seconds=153),
    ]
    assert [item.place for item in items if isinstance(item, Message)] == ["line 1", "line 4", "line 8"]


def test_otter_times_need_a_start() -> None:
    found = read_file("otter.txt", ReadOptions(tz=timezone.utc))
    assert {item.time for item in found if isinstance(item, Message)} == {None}


def test_an_otter_header_with_no_paragraph_is_skipped_as_empty() -> None:
    items = read_text("Ann  0:01\n\nBen  0:04\nHi.\n")
    assert isinstance(items[0], Skipped)
    assert (items[0].kind, items[0].place) == ("empty", "line 1")
    assert turns(items) == [("Ben", "Hi.")]


def test_timestamped_name_lines_in_several_scripts() -> None:
    items = read_file("stamped.txt")
    assert turns(items) == [("지수", "안녕하세요"), ("Omar", "مرحبا"), ("Dana", "שלום")]
    times = [item.time for item in items if isinstance(item, Message)]
    assert times == [START + timedelta(seconds=5), START + timedelta(seconds=70), START + timedelta(seconds=120)]


def test_a_sentence_with_a_colon_is_not_a_speaker() -> None:
    found = turns(read_text("Alice: the plan\nWe agreed, finally: ship it on Monday!\n"))
    assert found == [("Alice", "the plan\nWe agreed, finally: ship it on Monday!")]


def test_a_transcript_with_no_names_is_refused() -> None:
    with pytest.raises(BadExport) as caught:
        read_text("Just some notes.\nNothing attributed here.\n")
    assert caught.value.reason.startswith("no speaker names")


def test_an_empty_transcript_is_refused() -> None:
    with pytest.raises(BadExport) as caught:
        read_text(b"")
    assert caught.value.place == "byte 0"


def test_a_utf16_transcript_is_refused_naming_the_fix() -> None:
    with pytest.raises(BadExport) as caught:
        read_text("Alice: hi\nBob: hello\n".encode("utf-16"))
    assert "UTF-16" in caught.value.reason
    assert "UTF-8" in caught.value.reason


def test_a_bad_otter_timestamp_is_refused_at_its_line() -> None:
    with pytest.raises(BadExport) as caught:
        read_text("Ann  0:01\nHi.\nBen  0:75\nHello.\n")
    assert caught.value.place == "line 3"


@pytest.mark.parametrize("name", ["names.txt", "otter.txt", "stamped.txt"])
def test_sniff_claims_the_sample_transcripts(name: str) -> None:
    assert transcript.sniff((DATA / "transcript" / name).read_bytes())


@pytest.mark.parametrize(
    "path",
    [
        "whatsapp/android_us.txt",
        "whatsapp/ios_gb.txt",
        "whatsapp/android_ko.txt",
        "vtt/zoom.vtt",
        "srt/otter.srt",
    ],
)
def test_sniff_leaves_whatsapp_vtt_and_srt_to_their_readers(path: str) -> None:
    assert not transcript.sniff((DATA / path).read_bytes())


@pytest.mark.parametrize(
    "head",
    [
        b'{"messages": [{"from": "Alice", "text": "hi"}]}',
        b'[\n  {"title": "chat"}\n]',
        b"<html><body>Alice: hi</body></html>",
        b"From: alice@example.com\nTo: bob@example.com\nSubject: lunch\n\nBob: are you in?\n",
        b"name: wontopos\nversion: 1.0\nlicense: MIT\n",
        b"2024-05-01 09:00:01 ERROR: disk full\n2024-05-01 09:00:02 WARNING: retrying\n",
        b"Alice: a monologue\nstill Alice\n",
        b"Dear Bob,\nthanks for the call.\nI think we agree.\nNote: the deck is attached.\n",
        b"",
    ],
)
def test_sniff_rejects_what_is_not_a_transcript(head: bytes) -> None:
    assert not transcript.sniff(head)
