"""Telegram Desktop's JSON export (``result.json``): one chat, or a whole account.

Two layouts, as Telegram Desktop writes them (``export_output_json.cpp`` in
telegramdesktop/tdesktop: ``writeDialogStart``, ``SerializeMessage``, ``SerializeText``):
one chat, ``{name, type, id, messages: [...]}``; or a whole account, ``{about,
personal_information, ..., chats: {about, list: [chat, ...]}, left_chats: {...}}`` whose
chats have that same shape. Every chat is a conversation keyed by its ``id``, titled by its
``name`` (a saved-messages chat has none: "Saved Messages", as the app shows it). The file is
streamed (``jsonstream``: one message in memory at a time, each at most
``MAX_MESSAGE_BYTES``, nesting bounded); a chat's ``name``, ``type`` and ``id`` come before
its ``messages`` in what Telegram Desktop writes, and a file whose messages come before the
chat's ``id`` is refused rather than held in memory until the id turns up.

Handled: ``text`` as a string or a list of pieces (strings and ``{type, text}`` objects,
concatenated; a ``text_link`` keeps its address as ``label (href)``), ``text_entities`` when
``text`` is missing; a captioned photo or file as its text plus ``[attachment: name]``;
media without a caption, polls, locations, contacts and ``unsupported`` messages skipped as
media; service messages (joins, pins, renames...) skipped as service, ``phone_call`` and
``group_call`` as calls; an edited message's ``text`` is already its final text. The speaker
is ``from``; a deleted account's ``from`` is ``null`` and is read as "Deleted Account", the
name Telegram shows for it (so the person sees and maps those messages instead of losing
them). Time: ``date_unixtime`` (UTC), else ``date`` (local, read in ``options.tz``).
Telegram Desktop writes control characters as ``\\xHH``, which JSON does not allow: they are
read as ``\\u00HH``. Left out: reactions, forwarded-from and reply links, the account's
contacts, sessions and profile data.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any, BinaryIO

from wontopos_mcp.imports.jsonstream import BOM, CheckedStream, JsonEvents
from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import Source

NAME = "telegram"

_STR = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_CHAT_HEAD = re.compile(
    rb'\A\s*\{\s*(?:"name"\s*:\s*(?:null|' + _STR + rb")\s*,\s*)?"
    rb'"type"\s*:\s*(?:null|"[a-z_]*")\s*,\s*"id"\s*:\s*-?\d+\s*,\s*"messages"\s*:\s*\[',
    re.DOTALL,
)
_ACCOUNT_HEAD = re.compile(
    rb'\A\s*\{\s*"about"\s*:\s*' + _STR + rb'\s*,\s*"(?:personal_information|profile_pictures|stories|contacts|'
    rb'frequent_contacts|sessions|web_sessions|other_data|chats|left_chats)"\s*:',
    re.DOTALL,
)
_CALLS = {"phone_call", "group_call"}
# Keys a media message carries (SerializeMessage's media branch): without text it is media-only.
_MEDIA_KEYS = (
    "photo",
    "file",
    "media_type",
    "sticker_emoji",
    "poll",
    "location_information",
    "contact_information",
    "place_name",
    "game_title",
    "invoice_information",
)
DELETED_ACCOUNT = "Deleted Account"
# Chats Telegram Desktop writes without a name, titled as the app shows them.
_UNNAMED = {"saved_messages": "Saved Messages", "replies": "Replies"}


def sniff(head: bytes) -> bool:
    """A chat's opening keys in Telegram Desktop's order, or an account export's ``about``
    followed by one of its own sections."""
    head = head.removeprefix(BOM)
    return bool(_CHAT_HEAD.match(head) or _ACCOUNT_HEAD.match(head))


def read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]:
    """Every message of every chat, in the file's order (Telegram writes a chat oldest first)."""
    found = _Found()
    with source.open() as raw:
        events = JsonEvents(CheckedStream(_Escapes(raw), limit=MAX_MESSAGE_BYTES))
        yield from _chat(events, options, found, top=True)
        events.finish()
    if not found.chat and not found.account:
        raise BadExport("end of file", "no chat in it (a chat has name, type, id and messages): not a Telegram export")


class _Found:
    """What the walk met: a chat's messages, an account export's ``about``."""

    chat = account = False


def _chat(events: JsonEvents, options: ReadOptions, found: _Found, top: bool) -> Iterator[Message | Skipped]:
    """One chat object (at the ``top``, the file itself: a chat in the one-chat layout, else
    an account holding ``chats`` and ``left_chats``): its ``name``, ``type`` and ``id``, then
    its messages. A value that is not an object holds no chat."""
    chat: dict[str, Any] = {}
    for key in events.members():
        if key in ("name", "type", "id"):
            chat[key] = events.value()
        elif key == "messages" and events.peek() == "start_array":
            found.chat = True
            if "id" not in chat:
                raise BadExport(events.place, "the chat's messages come before its id: not a Telegram Desktop export")
            for number in events.items(f"chat {chat['id']}, message"):
                yield _message(events.value(), chat, number, options)
        elif top and key == "about":
            found.account = True
        elif top and key in ("chats", "left_chats"):
            for part in events.members():
                if part == "list" and events.peek() == "start_array":
                    for _ in events.items("chat"):
                        yield from _chat(events, options, found, top=False)


def _message(raw: Any, chat: dict[str, Any], ordinal: int, options: ReadOptions) -> Message | Skipped:
    conversation = str(chat["id"])
    name = chat.get("name")
    title = name if isinstance(name, str) and name else _UNNAMED.get(str(chat.get("type")))
    place = f"chat {conversation}, message {ordinal}"
    if not isinstance(raw, dict):
        raise BadExport(place, "a message that is not a JSON object")
    kind = raw.get("type")
    if kind == "service":
        return Skipped(conversation, "call" if raw.get("action") in _CALLS else "service", place, title)
    if kind == "unsupported":
        return Skipped(conversation, "media", place, title)
    if not isinstance(kind, str):
        raise BadExport(place, "a message without its type (message or service)")
    if kind != "message":  # a type this reader does not know: not something people wrote
        return Skipped(conversation, "service", place, title)
    message_id = raw.get("id")
    if not isinstance(message_id, int):
        raise BadExport(place, "a message without its id")
    place = f"{place} (id {message_id})"
    text = _text(raw.get("text", raw.get("text_entities", "")), place).strip()
    if not text:
        media = any(key in raw for key in _MEDIA_KEYS)
        return Skipped(conversation, "media" if media else "empty", place, title)
    attachment = _attachment(raw)
    if attachment:
        text = f"{text}\n[attachment: {attachment}]"
    author = raw.get("from", title)
    if author is None:
        author = DELETED_ACCOUNT
    if not isinstance(author, str):
        raise BadExport(place, "its sender ('from') is not a name")
    return Message(
        conversation=conversation,
        role="person",
        author=author,
        text=text,
        time=_time(raw, place, options),
        message_id=str(message_id),
        place=place,
        title=title,
    )


def _text(value: Any, place: str) -> str:
    """``text``: a string, or pieces (strings and ``{type, text}`` objects) to concatenate."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise BadExport(place, "its text is neither a string nor a list of pieces")
    parts: list[str] = []
    for piece in value:
        if isinstance(piece, str):
            parts.append(piece)
        elif isinstance(piece, dict) and isinstance(piece.get("text"), str):
            href = piece.get("href")
            if piece.get("type") == "text_link" and isinstance(href, str) and href and href != piece["text"]:
                parts.append(f"{piece['text']} ({href})")
            else:
                parts.append(piece["text"])
        else:
            raise BadExport(place, "a piece of its text is neither a string nor {type, text}")
    return "".join(parts)


def _attachment(raw: dict[str, Any]) -> str | None:
    """The attached file's name: ``file_name`` when the export has it, else the last part
    of the saved path; a file not downloaded ("(File not included...)") by its kind."""
    for key in ("file", "photo"):
        path = raw.get(key)
        if not isinstance(path, str):
            continue
        named = raw.get("file_name")
        if isinstance(named, str) and named:
            return named
        if path and not path.startswith("("):
            return path.rsplit("/", 1)[-1]
        kind = raw.get("media_type")
        return kind if isinstance(kind, str) and kind else key
    return None


def _time(raw: dict[str, Any], place: str, options: ReadOptions) -> datetime:
    unix = raw.get("date_unixtime")
    if unix is not None:
        try:
            return datetime.fromtimestamp(int(unix), timezone.utc)
        except (TypeError, ValueError, OverflowError, OSError):
            raise BadExport(place, f"date_unixtime {unix!r} is not a time") from None
    local = raw.get("date")
    if not isinstance(local, str):
        raise BadExport(place, "a message without a date")
    try:
        return datetime.strptime(local, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=options.tz)
    except ValueError:
        raise BadExport(place, f"date {local!r} is not a time") from None


class _Escapes:
    """The file with Telegram Desktop's ``\\xHH`` escapes made JSON's ``\\u00HH`` (a chunk
    never ends inside an escape: a trailing backslash reads on)."""

    _ESCAPES = re.compile(rb"\\\\|\\x")

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw

    def read(self, size: int = -1) -> bytes:
        chunk = self.raw.read(size)
        while chunk.endswith(b"\\"):
            more = self.raw.read(1)
            if not more:
                break
            chunk += more
        if b"\\x" in chunk:
            chunk = self._ESCAPES.sub(lambda m: m.group() if m.group() == b"\\\\" else b"\\u00", chunk)
        return chunk
