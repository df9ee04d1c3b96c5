"""The Slack reader: a workspace export as a folder or a zip, read through its entries."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from wontopos_mcp.imports import slack
from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import MAX_ZIP_ENTRIES, BytesSource, FolderSource, Source, bytes_source

WORKSPACE = Path(__file__).parent / "data" / "slack" / "workspace"
OPTIONS = ReadOptions(tz=timezone.utc)


def read(source: Source) -> list[Message | Skipped]:
    return list(slack.read(source, OPTIONS))


def messages(items: list[Message | Skipped]) -> list[Message]:
    return [item for item in items if isinstance(item, Message)]


def zipped(files: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def workspace_files(prefix: str = "") -> dict[str, bytes]:
    return {prefix + p.relative_to(WORKSPACE).as_posix(): p.read_bytes() for p in WORKSPACE.rglob("*") if p.is_file()}


def minimal(day: list[dict[str, object]], users: object = None) -> dict[str, bytes]:
    people = users if users is not None else [{"id": "U1", "name": "ann", "profile": {"display_name": "Ann"}}]
    return {
        "users.json": json.dumps(people).encode(),
        "channels.json": json.dumps([{"id": "C1", "name": "general"}]).encode(),
        "general/2026-01-02.json": json.dumps(day, ensure_ascii=False).encode(),
    }


def read_zip(files: dict[str, bytes]) -> list[Message | Skipped]:
    return read(bytes_source("export.zip", zipped(files)))


@pytest.fixture(scope="module")
def folder() -> list[Message | Skipped]:
    return read(FolderSource(WORKSPACE))


def in_conversation(items: list[Message | Skipped], conversation: str) -> list[Message]:
    return [m for m in messages(items) if m.conversation == conversation]


def test_channels_are_conversations_titled_by_name_and_read_in_ts_order(folder: list[Message | Skipped]) -> None:
    general = in_conversation(folder, "C01GENERAL")
    assert {m.title for m in general} == {"general"}
    assert [m.message_id for m in general] == sorted(m.message_id or "" for m in general)
    assert general[0].time == datetime(2026, 1, 2, 10, 1, 0, 100, tzinfo=timezone.utc)


def test_speakers_are_display_name_else_real_name_else_name(folder: list[Message | Skipped]) -> None:
    authors = {m.author for m in messages(folder)}
    assert {"Anna", "山田 太郎", "olga.p", "지호"} <= authors


def test_mentions_channels_links_and_entities_are_made_plain(folder: list[Message | Skipped]) -> None:
    first = in_conversation(folder, "C01GENERAL")[0]
    assert first.text == "Hi @山田 太郎, the plan is in #random & on the wiki (https://example.org/plan): 1 < 2 > 0"
    assert in_conversation(folder, "C01GENERAL")[1].text == "Привет всем! @here"
    assert in_conversation(folder, "C02RANDOM")[0].text == "ランチどこ行く？ 🍜 team@example.org"
    assert in_conversation(folder, "D01ANNATARO")[0].text == "Can you review my PR? https://example.org/pr/1"


def test_bots_are_named_by_username_or_bot_profile(folder: list[Message | Skipped]) -> None:
    by_text = {m.text: m.author for m in messages(folder)}
    assert by_text["Deploy finished ✅"] == "deploy-bot"
    assert by_text["Build is green"] == "CI"


def test_thread_replies_are_their_own_conversation_and_the_parent_stays_in_the_channel(
    folder: list[Message | Skipped],
) -> None:
    thread = in_conversation(folder, "C01GENERAL:1767348060.000100")
    assert [m.text for m in thread] == ["スレッドで返信します。", "Second reply, a day later"]
    assert thread[0].title is not None
    assert thread[0].title.startswith("general: Hi @山田 太郎, the plan")
    assert "1767348060.000100" in [m.message_id for m in in_conversation(folder, "C01GENERAL")]


def test_files_are_attachment_lines_and_a_file_alone_is_media(folder: list[Message | Skipped]) -> None:
    by_author = [m.text for m in messages(folder) if m.author == "지호" and m.conversation == "C01GENERAL"]
    assert by_author == ["회의록 첨부합니다\n[attachment: 회의록.pdf]"]


def test_subtypes_are_skipped_by_kind(folder: list[Message | Skipped]) -> None:
    kinds = {s.place: s.kind for s in folder if isinstance(s, Skipped)}
    assert kinds["general/2026-01-02.json, message 1"] == "service"  # channel_join
    assert kinds["general/2026-01-02.json, message 7"] == "deleted"  # tombstone
    assert kinds["general/2026-01-02.json, message 8"] == "media"
    assert kinds["general/2026-01-02.json, message 10"] == "service"  # channel_topic
    assert kinds["general/2026-01-02.json, message 11"] == "service"  # pinned_item
    assert kinds["general/2026-01-02.json, message 12"] == "call"  # huddle
    assert kinds["general/2026-01-03.json, message 4"] == "deleted"  # message_deleted


def test_a_message_changed_record_gives_the_final_text(folder: list[Message | Skipped]) -> None:
    texts = [m.text for m in in_conversation(folder, "C01GENERAL")]
    assert "Final text" in texts
    assert "Draft text" not in texts


def test_a_dm_is_titled_by_its_members(folder: list[Message | Skipped]) -> None:
    assert {m.title for m in in_conversation(folder, "D01ANNATARO")} == {"Anna, 山田 太郎"}


def test_a_zip_reads_like_the_folder_at_its_root_or_under_one_top_folder(folder: list[Message | Skipped]) -> None:
    assert read_zip(workspace_files()) == folder
    assert [m.text for m in messages(read_zip(workspace_files("Acme Slack export/")))] == [
        m.text for m in messages(folder)
    ]


def test_sniff_source_wants_users_and_channels() -> None:
    assert slack.sniff_source(FolderSource(WORKSPACE))
    assert slack.sniff_source(bytes_source("x.zip", zipped(workspace_files("top/"))))
    assert slack.sniff_source(bytes_source("x.zip", zipped({"org_users.json": b"[]", "channels.json": b"[]"})))
    assert not slack.sniff_source(bytes_source("x.zip", zipped({"channels.json": b"[]", "general/a.json": b"[]"})))
    assert not slack.sniff_source(BytesSource("users.json", b"[]"))


def test_sniff_never_claims_a_single_file() -> None:
    assert not slack.sniff((WORKSPACE / "general" / "2026-01-02.json").read_bytes())


def test_a_single_file_is_refused() -> None:
    with pytest.raises(BadExport) as caught:
        read(BytesSource("users.json", b"[]"))
    assert "single file" in caught.value.reason


def test_a_folder_without_users_and_channels_is_refused() -> None:
    with pytest.raises(BadExport) as caught:
        read_zip({"general/2026-01-02.json": b"[]"})
    assert "not a Slack workspace export" in caught.value.reason


@pytest.mark.parametrize(
    ("day", "place", "reason"),
    [
        (
            b'[{"type": "message", "user": "U1", "text": "ok", "ts": "1767348000.1"}, {"type": "mess',
            "general/2026-01-02.json, message 2",
            "JSON",
        ),
        (b"", "general/2026-01-02.json", "empty"),
        ("[]".encode("utf-16"), "general/2026-01-02.json", "UTF-16"),
        (b'{"not": "a list"}', "general/2026-01-02.json", "not a JSON list"),
        (b'[{"user": "U1", "text": "x", "ts": "yesterday"}]', "message 1", "not a Slack timestamp"),
        (b'[{"user": "U1", "text": "x", "ts": "999999999999.0"}]', "message 1", "not a time"),
        (b'[{"user": "U1", "text": 5, "ts": "1.0"}]', "message 1", "not a string"),
        (b'[{"text": "who?", "ts": "1.0"}]', "message 1", "without its user"),
        (b'[{"user": "U1", "text": "x", "ts": "1.0", "files": "a.png"}]', "message 1", "not a list"),
        (b"[7]", "message 1", "not a message object"),
    ],
)
def test_a_broken_day_file_is_refused_with_its_entry_and_place(day: bytes, place: str, reason: str) -> None:
    files = minimal([])
    files["general/2026-01-02.json"] = day
    with pytest.raises(BadExport) as caught:
        read_zip(files)
    assert place in caught.value.place
    assert reason in caught.value.reason


def test_a_broken_users_file_is_refused() -> None:
    files = minimal([])
    files["users.json"] = b'[{"id": "U1", "name": '
    with pytest.raises(BadExport) as caught:
        read_zip(files)
    assert caught.value.place.startswith("users.json")


def test_a_message_longer_than_the_limit_is_refused() -> None:
    day = [{"type": "message", "user": "U1", "text": "x" * (MAX_MESSAGE_BYTES + 300_000), "ts": "1.0"}]
    with pytest.raises(BadExport) as caught:
        read(bytes_source("export.zip", zipped(minimal(day), zipfile.ZIP_STORED)))
    assert caught.value.place == "general/2026-01-02.json, message 1"
    assert "longer than" in caught.value.reason


def test_an_unknown_user_is_named_by_the_messages_profile_else_its_id() -> None:
    day = [
        {"type": "message", "user": "U9", "text": "a", "ts": "1.0", "user_profile": {"real_name": "Zoë"}},
        {"type": "message", "user": "U8", "text": "b", "ts": "2.0"},
    ]
    assert [m.author for m in messages(read_zip(minimal(day)))] == ["Zoë", "U8"]


def test_a_zip_entry_that_climbs_out_is_refused() -> None:
    files = minimal([])
    files["../../x"] = b"[]"
    with pytest.raises(BadExport) as caught:
        read_zip(files)
    assert "climbs" in caught.value.reason


def test_a_zip_bomb_is_refused_before_inflating() -> None:
    files = minimal([])
    files["general/2026-01-03.json"] = b"\x00" * (10 * 1024 * 1024)
    with pytest.raises(BadExport) as caught:
        read_zip(files)
    assert "zip bomb" in caught.value.reason


def test_a_zip_with_too_many_entries_is_refused() -> None:
    files = minimal([])
    files.update({f"general/{n}.txt": b"" for n in range(MAX_ZIP_ENTRIES)})
    with pytest.raises(BadExport) as caught:
        read(bytes_source("export.zip", zipped(files, zipfile.ZIP_STORED)))
    assert caught.value.place == "zip directory"
