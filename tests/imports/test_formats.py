"""Detection: a file by its content; a folder or zip as Slack, else by the one entry that is the export.

The archives are built here with ``zipfile`` the way the apps hand them out: ChatGPT's and
Claude's data exports (``conversations.json`` among other files), WhatsApp's iOS export
(``_chat.txt`` and the media) and Android's (``WhatsApp Chat with X.txt`` and the media),
Telegram Desktop's folder (``result.json``, ``photos/``). The entries' contents are the
readers' own sample files.
"""

from __future__ import annotations

import io
import zipfile
from datetime import timezone
from pathlib import Path

import pytest

from wontopos_mcp.imports.formats import detect, reader
from wontopos_mcp.imports.messages import BadExport, Message, ReadOptions
from wontopos_mcp.imports.sources import BytesSource, EntrySource, FolderSource, Source, bytes_source

DATA = Path(__file__).parent / "data"
OPTIONS = ReadOptions(tz=timezone.utc)
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(range(256)) * 4


def zipped(name: str, files: dict[str, bytes]) -> Source:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for entry, data in files.items():
            archive.writestr(entry, data)
    return bytes_source(name, buffer.getvalue())


def messages(fmt: str, source: Source) -> list[Message]:
    return [item for item in reader(fmt).read(source, OPTIONS) if isinstance(item, Message)]


def chatgpt_zip() -> Source:
    return zipped(
        "chatgpt-export.zip",
        {
            "conversations.json": (DATA / "chatgpt" / "branches.json").read_bytes(),
            "chat.html": b"<html><body>exported chats</body></html>",
            "user.json": b'{"id": "user-1", "email": "me@example.com"}',
            "message_feedback.json": b"[]",
            "file-abc123-photo.png": b"\x89PNG\r\n\x1a\n" + bytes(64),
        },
    )


def whatsapp_ios_zip(name: str = "WhatsApp Chat - Book club.zip") -> Source:
    return zipped(
        name,
        {
            "_chat.txt": (DATA / "whatsapp" / "ios_gb.txt").read_bytes(),
            "00000012-PHOTO-2022-02-14-10-03-00.jpg": JPEG,
        },
    )


def test_a_chatgpt_zip_is_read_from_its_conversations_json() -> None:
    fmt, source = detect(chatgpt_zip())
    assert (fmt, isinstance(source, EntrySource) and source.entry) == ("chatgpt", "conversations.json")
    alone = BytesSource("conversations.json", (DATA / "chatgpt" / "branches.json").read_bytes())
    assert messages(fmt, source) == messages("chatgpt", alone)


def test_a_claude_zip_is_read_from_its_conversations_json() -> None:
    archive = zipped(
        "data-2025-01-01.zip",
        {
            "conversations.json": (DATA / "claude" / "conversations.json").read_bytes(),
            "users.json": b'[{"uuid": "u-1", "full_name": "Me"}]',
            "projects.json": b"[]",
        },
    )
    fmt, source = detect(archive)
    assert fmt == "claude"
    assert len(messages(fmt, source)) > 0


def test_a_whatsapp_ios_zip_is_its_chat_named_by_the_zip_and_the_photo_is_ignored() -> None:
    fmt, source = detect(whatsapp_ios_zip())
    assert (fmt, source.name) == ("whatsapp", "WhatsApp Chat - Book club.txt")
    found = messages(fmt, source)
    assert found
    assert {m.conversation for m in found} == {"WhatsApp Chat - Book club.txt"}
    assert [m.text for m in found][:2] == ["Next book?", "I vote for Kafka on the Shore"]


def test_an_android_zip_is_the_same_conversation_as_its_txt_imported_alone() -> None:
    chat = (DATA / "whatsapp" / "android_us.txt").read_bytes()
    files = {"WhatsApp Chat with Sam.txt": chat, "IMG-20240101-WA0001.jpg": JPEG}
    archive = zipped("WhatsApp Chat with Sam.zip", files)
    fmt, source = detect(archive)
    alone = BytesSource("WhatsApp Chat with Sam.txt", chat)
    assert (fmt, messages(fmt, source)) == ("whatsapp", messages("whatsapp", alone))


def test_a_zip_of_two_chats_is_refused_as_ambiguous_naming_both() -> None:
    archive = zipped(
        "chats.zip",
        {
            "family/_chat.txt": (DATA / "whatsapp" / "ios_gb.txt").read_bytes(),
            "work/_chat.txt": (DATA / "whatsapp" / "ios_us.txt").read_bytes(),
        },
    )
    with pytest.raises(BadExport) as refused:
        detect(archive)
    assert refused.value.place == "the archive"
    assert "2 entries could be the whatsapp export (family/_chat.txt, work/_chat.txt)" in refused.value.reason


def test_macos_shadow_files_beside_the_chat_are_not_a_second_chat() -> None:
    archive = zipped(
        "WhatsApp Chat - Book club.zip",
        {
            "_chat.txt": (DATA / "whatsapp" / "ios_gb.txt").read_bytes(),
            "__MACOSX/._chat.txt": b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X",
            "._00000012-PHOTO.jpg": b"\x00\x05\x16\x07",
        },
    )
    assert detect(archive)[0] == "whatsapp"


def test_a_telegram_folder_is_read_from_its_result_json(tmp_path: Path) -> None:
    folder = tmp_path / "ChatExport_2024-01-01"
    (folder / "photos").mkdir(parents=True)
    (folder / "photos" / "photo_1.jpg").write_bytes(JPEG)
    (folder / "messages.html").write_text("<html></html>")
    (folder / "result.json").write_bytes((DATA / "telegram" / "personal_chat.json").read_bytes())
    fmt, source = detect(FolderSource(folder))
    assert (fmt, source.name) == ("telegram", "ChatExport_2024-01-01.json")
    alone = BytesSource("result.json", (folder / "result.json").read_bytes())
    assert messages(fmt, source) == messages("telegram", alone)


@pytest.mark.parametrize(
    ("entry", "fmt"),
    [("vtt/zoom.vtt", "vtt"), ("srt/otter.srt", "srt"), ("claude_code/session.jsonl", "claude-code")],
)
def test_a_zip_of_one_subtitle_or_session_file_is_that_file(entry: str, fmt: str) -> None:
    name = Path(entry).name
    found, source = detect(zipped("meeting.zip", {name: (DATA / entry).read_bytes(), "notes.md": b"# notes"}))
    assert (found, source.name) == (fmt, "meeting" + Path(entry).suffix)


def test_a_slack_workspace_is_read_whole() -> None:
    archive = zipped("slack.zip", {"users.json": b"[]", "channels.json": b"[]", "general/2026-01-02.json": b"[]"})
    fmt, source = detect(archive)
    assert (fmt, source) == ("slack", archive)


def test_a_named_format_reads_the_same_entry() -> None:
    fmt, source = detect(chatgpt_zip(), "chatgpt")
    assert (fmt, isinstance(source, EntrySource) and source.entry) == ("chatgpt", "conversations.json")


def test_a_named_format_takes_the_one_entry_of_its_kind_even_when_it_does_not_sniff() -> None:
    archive = zipped("call.zip", {"call.txt": b"we talked about the trip\nand then the hotel\n", "a.jpg": JPEG})
    with pytest.raises(BadExport):
        detect(archive)
    fmt, source = detect(archive, "transcript")
    assert (fmt, isinstance(source, EntrySource) and source.entry) == ("transcript", "call.txt")


def test_a_named_format_with_no_entry_of_its_kind_is_refused() -> None:
    with pytest.raises(BadExport) as refused:
        detect(whatsapp_ios_zip(), "chatgpt")
    assert refused.value.reason == "no conversations.json in it, where a chatgpt export is"


def test_an_archive_with_nothing_recognised_names_what_was_looked_for() -> None:
    with pytest.raises(BadExport) as refused:
        detect(zipped("photos.zip", {"a.jpg": JPEG, "notes.txt": b"\n\n", "data.json": b"{}"}))
    assert refused.value.place == "the archive"
    for looked_for in ("users.json and channels.json", "conversations.json", "result.json", ".txt", ".vtt"):
        assert looked_for in refused.value.reason


def test_a_single_file_is_itself_with_its_format_sniffed_or_named() -> None:
    chat = BytesSource("chat.txt", (DATA / "whatsapp" / "ios_us.txt").read_bytes())
    assert detect(chat) == ("whatsapp", chat)
    assert detect(chat, "transcript") == ("transcript", chat)
