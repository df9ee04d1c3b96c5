"""What the assistant-history readers share (``chatgpt``, ``claude``, ``claude_code``).

Written once so the three cannot drift apart on the same facts: ChatGPT's and Claude's
``conversations.json`` are both one JSON list of conversation objects, each with an id and
a title (:func:`sniff_list`, :func:`conversations`); a kept turn is the history's owner or
the AI, whom the export never names (:func:`turn`: no author); a turn's joined text is
bounded by ``MAX_MESSAGE_BYTES`` (:func:`bounded`); and Claude's and Claude Code's turns
are Anthropic content blocks (:func:`text_blocks`) with ISO 8601 times (:func:`iso_time`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wontopos_mcp.errors import InvalidRequestError
from wontopos_mcp.imports.jsonstream import BOM, list_items
from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, BadExport, Message, Role, export_id
from wontopos_mcp.imports.sources import Source
from wontopos_mcp.rules.dates import from_us, parse_moment


@dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation of the list, checked: ``where`` (``conversation N``) for refusals,
    its id, its title (``None`` when blank or missing) and the object itself."""

    where: str
    id: str
    title: str | None
    fields: dict[str, Any]


def sniff_list(head: bytes) -> bool:
    """Whether the head opens a JSON list whose first item is an object (a reader then looks for its keys)."""
    text = head.removeprefix(BOM).lstrip()
    return text.startswith(b"[") and text[1:].lstrip().startswith(b"{")


def conversations(source: Source, ids: tuple[str, ...], title: str) -> Iterator[Conversation]:
    """Each conversation of a file that is one JSON list of them, one in memory at a time
    (:func:`jsonstream.list_items`). Refused at ``conversation N``: an item that is not an
    object, or without an id (the first of ``ids`` that is set; the reason names ``ids[0]``)."""
    with source.open() as raw:
        for number, item in list_items(raw, "conversation"):
            where = f"conversation {number}"
            if not isinstance(item, dict):
                raise BadExport(where, "not a JSON object")
            found: Any = None
            for key in ids:
                found = found or item.get(key)
            cid = export_id(found)
            if cid is None:
                raise BadExport(where, f"has no {ids[0]}")
            name = item.get(title)
            yield Conversation(where, cid, name if isinstance(name, str) and name.strip() else None, item)


def turn(
    conversation: str, role: Role, text: str, time: datetime | None, message_id: Any, place: str, title: str | None
) -> Message:
    """A kept turn: the owner (``user``) or the AI (``assistant``), never named in the
    export, so no author; the export's id when it is one (:func:`messages.export_id`)."""
    return Message(
        conversation=conversation,
        role=role,
        author=None,
        text=text,
        time=time,
        message_id=export_id(message_id),
        place=place,
        title=title,
    )


def text_blocks(blocks: Any) -> tuple[list[str], set[Any]]:
    """(the stripped, non-blank texts of the ``text`` blocks, in order; the ``type`` of every
    block): an Anthropic message's ``content`` list, read alike in Claude's export and a
    Claude Code transcript. Nothing for a value that is not a list; items not objects passed over."""
    paragraphs: list[str] = []
    kinds: set[Any] = set()
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict):
            continue
        kinds.add(block.get("type"))
        said = block.get("text")
        if block.get("type") == "text" and isinstance(said, str) and said.strip():
            paragraphs.append(said.strip())
    return paragraphs, kinds


def bounded(text: str, place: str) -> str:
    """``text``, unless longer than ``MAX_MESSAGE_BYTES`` in UTF-8: then not a chat message, and the file is refused."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES:
        raise BadExport(place, f"a message longer than {MAX_MESSAGE_BYTES:,} bytes: not a chat message")
    return text


def iso_time(raw: Any, place: str, field: str) -> datetime | None:
    """``raw`` (the turn's ``field``) as an ISO 8601 time with an offset; ``None`` when missing."""
    if raw is None:
        return None
    try:
        us, _ = parse_moment(raw, field=field)
    except InvalidRequestError:
        raise BadExport(place, f"{field} {str(raw)[:60]!r} is not an ISO 8601 time with an offset") from None
    return from_us(us)
