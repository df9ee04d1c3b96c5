"""DiscordChatExporter's JSON: one channel (or thread, or DM) a file.

The layout is DiscordChatExporter's ``JsonMessageWriter`` (Tyrrrz/DiscordChatExporter):
``{guild: {id, name, iconUrl}, channel: {id, type, categoryId, category, name, topic},
dateRange, exportedAt, messages: [...], messageCount}``, the guild and channel written
before the messages, so the file streams (``jsonstream``: one message in memory at a time,
each at most ``MAX_MESSAGE_BYTES``, nesting bounded). A message: ``{id, type,
timestamp, timestampEdited, content, author: {id, name, nickname, isBot}, attachments:
[{fileName}], stickers, embeds, reactions, mentions: [{id, name, nickname}], reference,
forwardedMessage}``. The conversation is the channel's id, titled ``guild / channel``.

Handled: the speaker is ``author.nickname`` (the server name the exporter resolved), else
``author.name``; ``content`` is already the final text of an edited message and already
shows mentions as ``@name`` (the exporter's plain-text markdown pass); an export made with
markdown formatting off keeps Discord's raw ``<@id>``, shown here as ``@name`` from the
message's ``mentions``, and custom emoji ``<:name:id>`` as ``:name:``. Attachments are
lines ``[attachment: fileName]``; a forwarded message with no text of its own reads the
forwarded text. Types ``Default`` and ``Reply`` (and the bots' answers to slash and
context-menu commands, ``ChatInputCommand``/``ContextMenuCommand``) are messages; ``Call``
is skipped as a call; every other type (joins, pins, renames, boosts, thread starts...)
as service. A message with attachments, stickers or embeds but no text is media.
Left out: reactions, embeds' text, stickers' names, replies' links, threads' messages
(the exporter writes each thread as its own file).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

from wontopos_mcp.imports.jsonstream import BOM, CheckedStream, JsonEvents
from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, BadExport, Message, ReadOptions, Skipped, export_id
from wontopos_mcp.imports.sources import Source

NAME = "discord"

_HEAD = re.compile(rb'\A\s*\{\s*"guild"\s*:\s*\{')
_CHANNEL = re.compile(rb'"channel"\s*:\s*\{\s*"id"\s*:')
_MESSAGES = re.compile(rb'"messages"\s*:\s*\[')
# Message kinds people wrote: Discord's types 0, 19, 20, 23 by DiscordChatExporter's names
# (an exporter that does not know a type writes its number).
_SPOKEN = {"Default", "Reply", "ChatInputCommand", "ContextMenuCommand", "0", "19", "20", "23"}
_CALLS = {"Call", "3"}
_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)\Z")
_RAW_MENTION = re.compile(r"<@!?(\d+)>")
_CUSTOM_EMOJI = re.compile(r"<a?:(\w+):\d+>")


def sniff(head: bytes) -> bool:
    """A JSON object opening with ``guild``, with a ``channel`` and a ``messages`` array."""
    head = head.removeprefix(BOM)
    return bool(_HEAD.match(head) and _CHANNEL.search(head) and _MESSAGES.search(head))


def read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]:
    """The channel's messages in the file's order (the exporter writes oldest first)."""
    header: dict[str, dict[str, Any]] = {}
    seen_messages = False
    with source.open() as raw:
        events = JsonEvents(CheckedStream(raw, limit=MAX_MESSAGE_BYTES))
        for key in events.members():
            if key in ("guild", "channel"):
                value = events.value()
                header[key] = value if isinstance(value, dict) else {}
            elif key == "messages" and events.peek() == "start_array":
                seen_messages = True
                if not isinstance(header.get("channel", {}).get("id"), str):
                    raise BadExport(events.place, "messages before the channel's id: not a DiscordChatExporter file")
                for number in events.items("message"):
                    yield _message(events.value(), header, number)
        events.finish()
    if not seen_messages:
        raise BadExport("end of file", "no guild, channel and messages: not a DiscordChatExporter file")


def _message(raw: Any, header: dict[str, dict[str, Any]], ordinal: int) -> Message | Skipped:
    conversation = header["channel"]["id"]
    names = (header.get(key, {}).get("name") for key in ("guild", "channel"))
    title = " / ".join(str(name) for name in names if name) or None
    place = f"message {ordinal}"
    if not isinstance(raw, dict):
        raise BadExport(place, "a message that is not a JSON object")
    message_id = export_id(raw.get("id"))
    if message_id is None:
        raise BadExport(place, "a message without its id")
    place = f"{place} (id {message_id})"
    kind = raw.get("type")
    if not isinstance(kind, str):
        raise BadExport(place, "a message without its type")
    if kind in _CALLS:
        return Skipped(conversation, "call", place, title)
    if kind not in _SPOKEN:
        return Skipped(conversation, "service", place, title)
    author = raw.get("author")
    if not isinstance(author, dict):
        raise BadExport(place, "a message without its author")
    speaker = author.get("nickname") or author.get("name")
    if not isinstance(speaker, str):
        raise BadExport(place, "its author has no name")
    text = _content(raw, place)
    if not text:
        forwarded = raw.get("forwardedMessage")
        if isinstance(forwarded, dict):
            text = _content(forwarded, place)
    files = _attachments(raw, place)
    if not text:
        media = files or raw.get("stickers") or raw.get("embeds")
        return Skipped(conversation, "media" if media else "empty", place, title)
    text = "\n".join([text, *(f"[attachment: {name}]" for name in files)])
    return Message(
        conversation=conversation,
        role="person",
        author=speaker,
        text=text,
        time=_time(raw.get("timestamp"), place),
        message_id=message_id,
        place=place,
        title=title,
    )


def _content(raw: dict[str, Any], place: str) -> str:
    """The text, with raw ``<@id>`` mentions named from ``mentions`` and custom emoji by name."""
    content = raw.get("content", "")
    if content is None:
        return ""
    if not isinstance(content, str):
        raise BadExport(place, "its content is not text")
    if "<" in content:
        names: dict[str, str] = {}
        for person in raw.get("mentions") or []:
            if isinstance(person, dict) and isinstance(person.get("id"), str):
                name = person.get("nickname") or person.get("name")
                if isinstance(name, str):
                    names[person["id"]] = name
        content = _RAW_MENTION.sub(lambda m: f"@{names[m.group(1)]}" if m.group(1) in names else m.group(), content)
        content = _CUSTOM_EMOJI.sub(r":\1:", content)
    return content.strip()


def _attachments(raw: dict[str, Any], place: str) -> list[str]:
    found = raw.get("attachments") or []
    if not isinstance(found, list):
        raise BadExport(place, "its attachments are not a list")
    names: list[str] = []
    for attachment in found:
        name = attachment.get("fileName") if isinstance(attachment, dict) else None
        names.append(name if isinstance(name, str) and name else "file")
    return names


def _time(value: Any, place: str) -> datetime:
    """An ISO 8601 time with its offset, as .NET writes it (fractions of 1 to 7 digits)."""
    match = _TIME.match(value) if isinstance(value, str) else None
    if match is None:
        raise BadExport(place, f"timestamp {value!r} is not a time")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        offset = timezone.utc
        if zone != "Z":
            sign = -1 if zone[0] == "-" else 1
            offset = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
        micro = int((fraction or "0")[:6].ljust(6, "0"))
        return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro, offset)
    except ValueError:
        raise BadExport(place, f"timestamp {value!r} is not a time") from None
