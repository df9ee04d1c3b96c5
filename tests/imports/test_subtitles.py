"""The subtitle readers, ``vtt`` and ``srt``: speakers from voices or prefixes, cues glued into turns."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType

import pytest

from wontopos_mcp.imports import srt, vtt
from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import BytesSource, FileSource

DATA = Path(__file__).parent / "data"
START = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)
WITH_START = ReadOptions(tz=timezone.utc, start=START)


def read_file(reader: ModuleType, name: str, options: ReadOptions = WITH_START) -> list[Message | Skipped]:
    return list(reader.read(FileSource(DATA / reader.NAME / name), options))


def read_text(reader: ModuleType, text: str | bytes, options: ReadOptions = WITH_START) -> list[Message | Skipped]:
    data = text.encode() if isinstance(text, str) else text
    return list(reader.read(BytesSource(f"call.{reader.NAME}", data), options))


def turns(items: list[Message | Skipped]) -> list[tuple[str | None, str]]:
    return [(item.author, item.text) for item in items if isinstance(item, Message)]


def refusal(reader: ModuleType, text: str | bytes) -> BadExport:
    with pytest.raises(BadExport) as caught:
        read_text(reader, text)
    return caught.value


# WebVTT


def test_teams_voices_make_turns_and_consecutive_cues_of_one_voice_are_one_turn() -> None:
    items = read_file(vtt, "teams.vtt")
    assert turns(items) == [
        ("Alice Smith", "Good morning, everyone. Let's start with Q&A."),
        ("佐藤 健", "おはようございます。"),
        ("Alice Smith", "Thanks, Ken."),
    ]
    first = items[0]
    assert isinstance(first, Message)
    assert first.place == "line 3"
    assert first.conversation == "teams.vtt"
    assert first.message_id is None


def test_a_turns_time_is_the_start_plus_its_first_cues_start() -> None:
    found = [item for item in read_file(vtt, "teams.vtt") if isinstance(item, Message)]
    assert found[0].time == START + timedelta(seconds=3.12)
    assert found[2].time == START + timedelta(seconds=9)


def test_without_a_start_turns_have_no_time() -> None:
    found = [item for item in read_file(vtt, "teams.vtt", ReadOptions(tz=timezone.utc)) if isinstance(item, Message)]
    assert [item.time for item in found] == [None, None, None]


def test_zoom_name_prefixes_and_an_unnamed_cue_continuing_the_speaker() -> None:
    assert turns(read_file(vtt, "zoom.vtt")) == [
        ("Bob Lee", "Morning! Can you hear me? I think the mic is working now."),
        ("Мария Иванова", "Да, слышно хорошо."),
        ("Bob Lee", "Great."),
    ]


def test_vtt_quirks_voices_without_end_classes_tags_entities_notes_and_hours() -> None:
    items = read_file(vtt, "quirks.vtt")
    assert turns(items) == [
        ("Dana", "Stop right there <please> and listen & wait. Yes?"),
        ("Eitan", "לא, תודה 🙂"),
        ("Noor", "مرحبا بالجميع"),
    ]
    times = [item.time for item in items if isinstance(item, Message)]
    assert times == [START + timedelta(seconds=1), START + timedelta(seconds=4), START + timedelta(hours=1)]


def test_a_cue_before_anyone_speaks_is_skipped_as_the_recordings_own_line() -> None:
    items = read_file(vtt, "title_first.vtt")
    assert isinstance(items[0], Skipped)
    assert items[0].kind == "system"
    assert items[0].place == "line 3"
    assert turns(items) == [("Host", "Welcome back.")]


def test_a_cue_with_only_tags_is_skipped_as_empty() -> None:
    items = read_text(vtt, "WEBVTT\n\n00:01.000 --> 00:02.000\n<v A>hi\n\n00:02.000 --> 00:03.000\n<i></i>\n")
    assert [item.kind for item in items if isinstance(item, Skipped)] == ["empty"]


def test_a_voice_annotation_may_hold_an_entity() -> None:
    assert turns(read_text(vtt, "WEBVTT\n\n00:01.000 --> 00:02.000\n<v Tom &amp; Jerry>hi</v>\n")) == [
        ("Tom & Jerry", "hi")
    ]


def test_vtt_refuses_a_file_where_no_cue_names_anyone() -> None:
    error = refusal(vtt, "WEBVTT\n\n00:01.000 --> 00:02.000\nJust a film.\n\n00:02.000 --> 00:03.000\nNo names.\n")
    assert error.reason.startswith("no speaker names")


def test_vtt_refuses_a_file_without_the_signature() -> None:
    error = refusal(vtt, "WEBVTX\n\n00:01.000 --> 00:02.000\n<v A>hi\n")
    assert error.place == "line 1"
    assert "WEBVTT" in error.reason


def test_vtt_refuses_a_bad_timestamp_at_its_line() -> None:
    error = refusal(vtt, "WEBVTT\n\n00:01.000 --> 00:02.000\n<v A>hi\n\n00:61.000 --> 00:62.000\n<v A>hi\n")
    assert error.place == "line 6"


def test_vtt_refuses_a_block_without_a_timing_line() -> None:
    error = refusal(vtt, "WEBVTT\n\nid\nnot a timing\ntext\n")
    assert error.place == "line 3"
    assert "timing" in error.reason


def test_vtt_refuses_an_empty_file_and_one_without_cues() -> None:
    assert refusal(vtt, b"").reason == "an empty file"
    assert "no cues" in refusal(vtt, "WEBVTT\n\nNOTE nothing here\n").reason


def test_vtt_refuses_utf16_naming_the_fix() -> None:
    error = refusal(vtt, "WEBVTT\n\n00:01.000 --> 00:02.000\n<v A>hi\n".encode("utf-16"))
    assert "UTF-16" in error.reason
    assert "UTF-8" in error.reason


def test_a_turn_past_the_size_limit_is_cut_into_two_messages_of_the_same_speaker() -> None:
    line = "word " * 200_000  # ~1 MB a cue
    cues = "".join(f"\n00:0{n}.000 --> 00:0{n + 1}.000\n<v A>{line}\n" for n in range(5))
    found = [item for item in read_text(vtt, "WEBVTT\n" + cues) if isinstance(item, Message)]
    assert len(found) == 2
    assert {item.author for item in found} == {"A"}
    assert all(len(item.text.encode()) <= MAX_MESSAGE_BYTES for item in found)


# SubRip


def test_srt_prefixes_continuations_and_consecutive_cues_of_one_speaker() -> None:
    items = read_file(srt, "otter.srt")
    assert turns(items) == [
        ("Alice", "Shall we start? Let's go through the agenda."),
        ("김민준", "좋아요, 시작하죠."),
        ("Alice", "Great, thanks. First item."),
    ]
    times = [item.time for item in items if isinstance(item, Message)]
    assert times == [START + timedelta(seconds=1), START + timedelta(seconds=6.1), START + timedelta(seconds=8)]


def test_srt_quirks_no_counter_dots_bom_tags_spaced_colon_and_a_blank_line_in_a_cue() -> None:
    assert turns(read_file(srt, "quirks.srt")) == [
        ("Omar", "Hello there"),
        ("Zoë", "Bonjour à tous\nand a second paragraph"),
        ("Omar", "Bye"),
    ]


def test_srt_refuses_a_file_where_no_cue_names_anyone() -> None:
    error = refusal(srt, "1\n00:00:01,000 --> 00:00:02,000\nHello.\n\n2\n00:00:02,000 --> 00:00:03,000\nWorld.\n")
    assert error.reason.startswith("no speaker names")


def test_srt_refuses_text_that_is_no_cue() -> None:
    error = refusal(srt, "Alice: hello\nBob: hi\n")
    assert error.place == "line 1"


def test_srt_refuses_a_bad_timestamp_and_an_empty_file() -> None:
    error = refusal(srt, "1\n00:00:01,000 --> 00:00:02,000\nA: hi\n\n2\n00:00:75,000 --> 00:00:76,000\nA: hi\n")
    assert error.place == "line 6"
    assert refusal(srt, b"\n\n").reason == "an empty file"


def test_srt_refuses_bytes_that_are_not_utf8() -> None:
    error = refusal(srt, "1\n00:00:01,000 --> 00:00:02,000\nZoë: salut\n".encode("latin-1"))
    assert error.place == "line 3"
    assert "UTF-8" in error.reason


# Sniffing


@pytest.mark.parametrize(("reader", "name"), [(vtt, path.name) for path in (DATA / "vtt").iterdir()])
def test_vtt_sniff_claims_every_sample(reader: ModuleType, name: str) -> None:
    assert reader.sniff((DATA / "vtt" / name).read_bytes())
    assert not srt.sniff((DATA / "vtt" / name).read_bytes())


@pytest.mark.parametrize("name", [path.name for path in (DATA / "srt").iterdir()])
def test_srt_sniff_claims_every_sample(name: str) -> None:
    assert srt.sniff((DATA / "srt" / name).read_bytes())
    assert not vtt.sniff((DATA / "srt" / name).read_bytes())


@pytest.mark.parametrize(
    "head",
    [
        b'{"messages": [{"text": "WEBVTT"}]}',
        b"Alice: hello\nBob: hi\n",
        b"31/12/2021, 21:41 - Alice: hi\n",
        b"Speaker 1  0:05\nHello everyone.\n",
        b"12\nthirteen\n",
        b"",
    ],
)
def test_subtitle_sniffs_reject_other_formats(head: bytes) -> None:
    assert not vtt.sniff(head)
    assert not srt.sniff(head)
