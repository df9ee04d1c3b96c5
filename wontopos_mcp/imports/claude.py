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

Streaming: as the ``chatgpt`` reader (:func:`wontopos_mcp.imports.histories.conversations`),
one conversation in memory at a time.

Left out: the export's other files (``users.json``, ``projects.json``), artifacts (tool
blocks), and branch structure: an export that lists edited-away turns lists them here too.

Relied on: the export's layout as Sinity/polylogue ``docs/providers/claude-ai.md`` and
public JSON schemas of ``conversations.json`` describe it (``sender``, ``content`` blocks
``text``/``tool_use``/``tool_result``/``thinking``, ``attachments`` and ``files``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from wontopos_mcp.imports.histories import (
    Conversation,
    bounded,
    conversations,
    iso_time,
    sniff_list,
    text_blocks,
    turn,
)
from wontopos_mcp.imports.messages import BadExport, Message, ReadOptions, Role, SkipKind, Skipped
from wontopos_mcp.imports.sources import Source

NAME = "claude"

_ROLES: dict[str, Role] = {"human": "user", "assistant": "assistant"}


def sniff(head: bytes) -> bool:
    """A JSON list whose first object has ``chat_messages`` (and a ``uuid``)."""
    return sniff_list(head) and b'"chat_messages"' in head and b'"uuid"' in head


def read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]:
    """Every conversation's messages, in the export's order."""
    for conversation in conversations(source, ("uuid",), "name"):
        yield from _conversation(conversation)


def _conversation(conversation: Conversation) -> Iterator[Message | Skipped]:
    where, cid, title = conversation.where, conversation.id, conversation.title
    chat = conversation.fields.get("chat_messages")
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
        time = iso_time(message.get("created_at"), place, "created_at")
        yield turn(cid, role, text, time, message.get("uuid"), place, title)


def _text(message: dict[str, Any], place: str) -> tuple[SkipKind | None, str]:
    """(the skip kind, or None with the turn's text and attachment lines)."""
    blocks = message.get("content")
    paragraphs, kinds = text_blocks(blocks)
    if not isinstance(blocks, list) or not blocks:
        said = message.get("text")
        if isinstance(said, str) and said.strip():
            paragraphs.append(said.strip())
    lines = ["\n\n".join(paragraphs)] if paragraphs else []
    lines.extend(f"[attachment: {name}]" for name in _attachment_names(message))
    if not lines:
        if kinds & {"tool_use", "tool_result"}:
            return "tool", ""
        return ("thinking" if "thinking" in kinds else "empty"), ""
    return None, bounded("\n".join(lines), place)


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
