"""What every reader yields: messages, skips, and the one error a reader raises.

A reader is a module with ``NAME`` (the ``--format`` value), ``sniff(head: bytes) ->
bool`` (cheap: the first ``SNIFF_BYTES`` of the file, or of a folder's or zip's telling
entry) and ``read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]``,
streaming: it never holds the whole export in memory, and it yields messages in
conversation order (the order people read them), so neighbours stay neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Literal

SNIFF_BYTES = 64 * 1024
# A single line or message bigger than this is not a chat message: the reader refuses the
# file (a 500 MB line would otherwise be read whole). Memories hold at most 32,000
# characters; the engine splits longer messages at sentence ends.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024

Role = Literal["person", "assistant", "user"]
"""Who wrote a message: ``person``, a named participant (``author`` is the name as the
export writes it); ``assistant``, the AI of an assistant history (stored as ``me``);
``user``, the person who owns an assistant history (``--user-name``, else untagged), whose
export carries no name."""

SkipKind = Literal[
    "empty",  # no text at all
    "media",  # media-only ("<Media omitted>", a sticker, a photo without caption)
    "deleted",  # "This message was deleted"
    "system",  # a chat's own lines: joins, leaves, "end-to-end encrypted", renames, pins
    "service",  # Telegram's service messages, Slack's channel_join..., Discord's non-default types
    "call",  # a voice or video call notice
    "tool",  # tool calls and tool results of an assistant history
    "thinking",  # an assistant's thinking blocks
    "meta",  # a coding agent's meta, summary, system and hook lines
    "hidden",  # a message the app does not show (ChatGPT's hidden system/context messages)
]


@dataclass(frozen=True, slots=True)
class Message:
    """One message as the export has it.

    ``conversation``: the export's own id for the conversation (a chat id, a channel id,
    a conversation uuid; for a one-conversation file such as a WhatsApp ``.txt`` or a
    transcript, the file's name); two conversations of one export never share it.
    ``title``: the conversation's name for people, when the export has one.
    ``text``: the final text (an edited message's last version), attachments as lines
    ``[attachment: name]``, mentions written as the person's name; never empty.
    ``time``: timezone-aware, or ``None`` when the export has no time for it.
    ``message_id``: the export's own id of the message, ``None`` when it has none (the
    engine then keys it by time, speaker, text and ordinal).
    ``place``: where it is in the file, for people ("line 12", "byte 4096",
    "channels/general/2026-01-02.json, message 3").
    """

    conversation: str
    role: Role
    author: str | None
    text: str
    time: datetime | None
    message_id: str | None
    place: str
    title: str | None = None


@dataclass(frozen=True, slots=True)
class Skipped:
    """A message left out, counted by kind in the summary (never stored)."""

    conversation: str
    kind: SkipKind
    place: str
    title: str | None = None


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """``tz``: the zone of local times (WhatsApp, transcripts); ``start``: when a recording
    began (aware), added to cue times of ``vtt``, ``srt`` and ``transcript`` (none: no times)."""

    tz: tzinfo
    start: datetime | None = None


class BadExport(Exception):
    """A file that is not valid for its format: ``place`` (line or byte, or entry and line)
    and ``reason``, both for people. The engine adds the file's name and refuses the
    import with nothing stored."""

    def __init__(self, place: str, reason: str) -> None:
        super().__init__(f"{place}: {reason}")
        self.place, self.reason = place, reason


def export_id(raw: object) -> str | None:
    """An export's string id as a reader keeps it (a message's, a conversation's): a
    non-empty string, else ``None`` (a number, a null or ``""`` is no id)."""
    return raw if isinstance(raw, str) and raw else None
