"""Telegram Desktop's JSON export (``result.json``): one chat, or a whole account.

Two layouts, as Telegram Desktop writes them (``export_output_json.cpp`` in
telegramdesktop/tdesktop: ``writeDialogStart``, ``SerializeMessage``, ``SerializeText``):
one chat, ``{name, type, id, messages: [...]}``; or a whole account, ``{about,
personal_information, ..., chats: {about, list: [chat, ...]}, left_chats: {...}}`` whose
chats have that same shape. Every chat is a conversation keyed by its ``id``, titled by its
``name`` (a saved-messages chat has none: "Saved Messages", as the app shows it). The file is streamed with ``ijson``;
a chat's ``name``, ``type`` and ``id`` come before its ``messages`` in what Telegram Desktop
writes, and a file whose messages come before the chat's ``id`` is refused rather than held
in memory until the id turns up.

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

from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import Source

NAME = "telegram"

_BUF = 64 * 1024
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
# Where chats sit in either layout (ijson prefixes), and where their messages are.
_CHAT_PREFIXES = ("", "chats.list.item", "left_chats.list.item")
_MESSAGES = {(p + "." if p else "") + "messages.item": p for p in _CHAT_PREFIXES}
_FIELDS = {(p + "." if p else "") + key: (p, key) for p in _CHAT_PREFIXES for key in ("name", "type", "id")}
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
    head = head.removeprefix(b"\xef\xbb\xbf")
    return bool(_CHAT_HEAD.match(head) or _ACCOUNT_HEAD.match(head))


def read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]:
    """Every message of every chat, in the file's order (Telegram writes a chat oldest first)."""
    import ijson

    with source.open() as raw:
        stream = _Stream(raw)
        chats: dict[str, dict[str, Any]] = {}
        chat: dict[str, Any] = {}
        builder: Any = None
        ordinal = 0
        seen_chat = account = False
        events = ijson.parse(stream, buf_size=_BUF)
        try:
            for prefix, event, value in events:
                if builder is not None:
                    builder.event(event, value)
                    if prefix in _MESSAGES and event == "end_map":
                        yield _message(builder.value, chat, ordinal, options)
                        stream.place = f"after {stream.place}"
                        builder = None
                        stream.reset()
                    continue
                stream.reset()
                if prefix in _MESSAGES and event == "start_map":
                    chat = chats[_MESSAGES[prefix]]
                    if "id" not in chat:
                        raise BadExport(
                            stream.place, "the chat's messages come before its id: not a Telegram Desktop export"
                        )
                    ordinal += 1
                    stream.place = f"chat {chat['id']}, message {ordinal}"
                    builder = ijson.ObjectBuilder()
                    builder.event(event, value)
                elif prefix in _CHAT_PREFIXES and event == "start_map":
                    chats[prefix] = {}
                    ordinal = 0
                elif prefix in _FIELDS and event in ("string", "number", "null"):
                    where, key = _FIELDS[prefix]
                    chats.setdefault(where, {})[key] = value
                elif event == "start_array" and (prefix + ".item") in _MESSAGES:
                    seen_chat = True
                elif prefix == "" and event == "map_key" and value == "about":
                    account = True
        except ijson.JSONError as exc:
            raise BadExport(stream.place, f"not valid JSON ({_first_line(exc)})") from None
    if not seen_chat and not account:
        raise BadExport("end of file", "no chat in it (a chat has name, type, id and messages): not a Telegram export")


def _message(raw: Any, chat: dict[str, Any], ordinal: int, options: ReadOptions) -> Message | Skipped:
    conversation = str(chat["id"])
    name = chat.get("name")
    title = name if isinstance(name, str) and name else _UNNAMED.get(str(chat.get("type")))
    place = f"chat {conversation}, message {ordinal}"
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


def _first_line(exc: Exception) -> str:
    """The first line of yajl's message (the rest draws the bytes around the fault)."""
    reason = exc.args[0] if exc.args else str(exc)
    text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    return text.split("\n", 1)[0].strip()


class _Stream:
    """The file as ijson reads it: a UTF-8 BOM dropped, Telegram's ``\\xHH`` escapes made
    JSON's ``\\u00HH``, and a bound on one message: more than ``MAX_MESSAGE_BYTES`` read
    since the current message began (or since the last event outside one) refuses the file
    before a giant string is held whole."""

    _ESCAPES = re.compile(rb"\\\\|\\x")

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.total = 0
        self.mark = 0
        self.place = "the start of the file"
        self.first = True

    def reset(self) -> None:
        self.mark = self.total

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson asks for nothing first, to learn bytes from text
            return b""
        if self.total - self.mark > MAX_MESSAGE_BYTES + 2 * _BUF:
            raise BadExport(self.place, f"a value longer than {MAX_MESSAGE_BYTES:,} bytes: not a chat export")
        chunk = self.raw.read(size)
        self.total += len(chunk)
        if self.first:
            self.first = False
            if not chunk:
                raise BadExport("byte 0", "an empty file")
            if chunk[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in chunk[:4]:
                raise BadExport("byte 0", "UTF-16 text; Telegram Desktop writes UTF-8")
            chunk = chunk.removeprefix(b"\xef\xbb\xbf")
        while chunk.endswith(b"\\"):
            more = self.raw.read(1)
            if not more:
                break
            self.total += 1
            chunk += more
        if b"\\x" in chunk:
            chunk = self._ESCAPES.sub(lambda m: m.group() if m.group() == b"\\\\" else b"\\u00", chunk)
        return chunk
