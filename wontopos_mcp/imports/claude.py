"""Claude's data export (claude.ai, Settings, Privacy, Export data): ``conversations.json``.

One JSON list of conversations ``{uuid, name, created_at, updated_at, account,
chat_messages: [...]}``; each message is ``{uuid, text, content: [blocks], sender,
created_at, updated_at, attachments: [{file_name, file_type, file_size,
extracted_content}], files: [{file_name}]}``. The messages are yielded in the export's
order, which is the conversation's.

Who: ``sender`` ``human`` is the history's owner (role ``user``, no name), ``assistant`` the
AI (role ``assistant``); any other sender is ``hidden``. Text: the ``text`` blocks of
``content``, joined by a blank line (blocks of one turn are paragraphs that tool calls
interrupted), or, in exports without ``content``, the ``text`` field. Attachments and files
become ``[attachment: file_name]`` lines after the text, each name once (a paste the app
turned into an attachment has no name: ``pasted text``); their ``extracted_content`` is
not kept, as the app shows a file's name, not its contents, in the conversation. A turn
with no text nor attachment is skipped as ``tool`` when it holds ``tool_use`` or
``tool_result`` blocks, ``thinking`` when it holds ``thinking`` blocks, else ``empty``.

Time: ``created_at`` (ISO 8601 with an offset, ``Z`` for UTC). Ids: the message's
``uuid``, the conversation's ``uuid``; the title is ``name``.

Streaming: as the ``chatgpt`` reader (:func:`wontopos_mcp.imports.jsonstream.list_items`),
one conversation in memory at a time.

Left out: the export's other files (``users.json``, ``projects.json``), artifacts (tool
blocks), and branch structure: an export that lists edited-away turns lists them here too.

Relied on: the export's layout as Sinity/polylogue ``docs/providers/claude-ai.md`` and
public JSON schemas of ``conversations.json`` describe it (``sender``, ``content`` blocks
``text``/``tool_use``/``tool_result``/``thinking``, ``attachments`` and ``files``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from wontopos_mcp.errors import InvalidRequestError
from wontopos_mcp.imports.jsonstream import BOM, list_items
from wontopos_mcp.imports.messages import (
    MAX_MESSAGE_BYTES,
    BadExport,
    Message,
    ReadOptions,
    Role,
    SkipKind,
    Skipped,
)
from wontopos_mcp.imports.sources import Source
from wontopos_mcp.rules.dates import from_us, parse_moment

NAME = "claude"

_ROLES: dict[str, Role] = {"human": "user", "assistant": "assistant"}


def sniff(head: bytes) -> bool:
    """A JSON list whose first object has ``chat_messages`` (and a ``uuid``)."""
    text = head.removeprefix(BOM).lstrip()
    if not text.startswith(b"[") or not text[1:].lstrip().startswith(b"{"):
        return False
    return b'"chat_messages"' in text and b'"uuid"' in text


def read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]:
    """Every conversation's messages, in the export's order."""
    with source.open() as raw:
        for number, conversation in list_items(raw, "conversation"):
            yield from _conversation(conversation, number)


def _conversation(conversation: Any, number: int) -> Iterator[Message | Skipped]:
    where = f"conversation {number}"
    if not isinstance(conversation, dict):
        raise BadExport(where, "not a JSON object")
    cid = conversation.get("uuid")
    if not isinstance(cid, str) or not cid:
        raise BadExport(where, "has no uuid")
    title = conversation.get("name")
    title = title if isinstance(title, str) and title.strip() else None
    chat = conversation.get("chat_messages")
    if chat is None:
        return
    if not isinstance(chat, list):
        raise BadExport(where, "its chat_messages is not a list")
    for ordinal, message in enumerate(chat, 1):
        place = f"{where}, message {ordinal}"
        if not isinstance(message, dict):
            raise BadExport(place, "not a JSON object")
        sender = message.get("sender")
        role = _ROLES.get(sender) if isinstance(sender, str) else None
        if role is None:
            yield Skipped(cid, "hidden", place, title)
            continue
        kind, text = _text(message, place)
        if kind is not None:
            yield Skipped(cid, kind, place, title)
            continue
        mid = message.get("uuid")
        yield Message(
            conversation=cid,
            role=role,
            author=None,
            text=text,
            time=_time(message.get("created_at"), place),
            message_id=mid if isinstance(mid, str) and mid else None,
            place=place,
            title=title,
        )


def _text(message: dict[str, Any], place: str) -> tuple[SkipKind | None, str]:
    """(the skip kind, or None with the turn's text and attachment lines)."""
    blocks = message.get("content")
    paragraphs: list[str] = []
    kinds: set[Any] = set()
    if isinstance(blocks, list) and blocks:
        for block in blocks:
            if not isinstance(block, dict):
                continue
            kinds.add(block.get("type"))
            said = block.get("text")
            if block.get("type") == "text" and isinstance(said, str) and said.strip():
                paragraphs.append(said.strip())
    else:
        said = message.get("text")
        if isinstance(said, str) and said.strip():
            paragraphs.append(said.strip())
    lines = ["\n\n".join(paragraphs)] if paragraphs else []
    lines.extend(f"[attachment: {name}]" for name in _attachment_names(message))
    if not lines:
        if kinds & {"tool_use", "tool_result"}:
            return "tool", ""
        return ("thinking" if "thinking" in kinds else "empty"), ""
    text = "\n".join(lines)
    if len(text.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES:
        raise BadExport(place, f"a message longer than {MAX_MESSAGE_BYTES:,} bytes: not a chat message")
    return None, text


def _attachment_names(message: dict[str, Any]) -> list[str]:
    """The names of the turn's attachments, then its files, each once."""
    names: list[str] = []
    for field, unnamed in (("attachments", "pasted text"), ("files", "file")):
        listed = message.get(field)
        for item in listed if isinstance(listed, list) else []:
            if not isinstance(item, dict):
                continue
            name = item.get("file_name")
            name = name.strip() if isinstance(name, str) and name.strip() else unnamed
            if name not in names:
                names.append(name)
    return names


def _time(raw: Any, place: str) -> datetime | None:
    if raw is None:
        return None
    try:
        us, _ = parse_moment(raw, field="created_at")
    except InvalidRequestError:
        raise BadExport(place, f"created_at {str(raw)[:60]!r} is not an ISO 8601 time with an offset") from None
    return from_us(us)
