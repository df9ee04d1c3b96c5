"""ChatGPT's ``conversations.json`` (Settings, Data controls, Export data): one JSON list of conversations.

Each conversation is ``{id, conversation_id, title, create_time, update_time, mapping,
current_node, ...}``; ``mapping`` is a tree of nodes ``{id, message, parent, children}``,
because every edit and every regenerated answer starts a branch. The app shows one branch,
the one ending at ``current_node``: this reader walks ``parent`` up from there to the root
and yields that path root first, so an answer the person regenerated away never becomes a
memory. (A conversation without ``current_node``: the branch ending at its latest leaf.)

Who: ``author.role`` ``user`` is the history's owner (role ``user``, no name), ``assistant``
the AI (role ``assistant``). Skipped, by kind: ``hidden`` for ``system`` messages and what
the app hides (``metadata.is_visually_hidden_from_conversation``, custom instructions'
``is_user_system_message``, ``is_contextual_answers_system_message``, the
``user_editable_context`` and ``model_editable_context`` contents); ``tool`` for the ``tool``
role, an assistant message addressed to a tool (``recipient`` not ``all``) and the contents
that are not prose (``code``, ``execution_output``, ``tether_browsing_display``,
``tether_quote``, ``system_error``...); ``thinking`` for ``thoughts``, ``reasoning_recap``
and the ``analysis`` channel; ``empty`` for a message without text. Text: the string
``parts`` of ``text`` and ``multimodal_text``, one per line; an image part
(``image_asset_pointer``) and a file of ``metadata.attachments`` become ``[attachment:
name]`` (the uploaded file's name when the message lists it, else the pointer's file id); a
voice message's ``audio_transcription`` is its text.

Time: ``create_time``, Unix seconds (UTC). A message whose ``create_time`` is null has no
time: borrowing the conversation's start would date a reply written a week later to its
first minute. Ids: the message's ``id`` and the conversation's ``id`` (else
``conversation_id``); the title is ``title``.

Streaming: the list is read through :func:`wontopos_mcp.imports.histories.conversations`, one
conversation in memory at a time (a conversation's tree has to be whole to find its
branch), nesting deeper than ``jsonstream.MAX_DEPTH`` refused.

Left out: branches the app does not show, DALL-E and code-interpreter images (tool
messages), canvases (``textdocs/``), feedback and the other files of the export's zip.

Relied on: the export layout as described by mohamed-chs/convoviz ``docs/dev/chatgpt-spec.md``
(the unofficial specification: content types, hidden flags, asset pointers, the
current_node walk) and mitkury/chatgpt-export-parser ``docs/chatgpt-data-export-format.md``
(branches, custom instructions).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from wontopos_mcp.imports.histories import Conversation, bounded, conversations, sniff_list, turn
from wontopos_mcp.imports.messages import BadExport, Message, ReadOptions, Role, SkipKind, Skipped
from wontopos_mcp.imports.sources import Source

NAME = "chatgpt"

_HIDDEN_FLAGS = (
    "is_visually_hidden_from_conversation",
    "is_user_system_message",
    "is_contextual_answers_system_message",
)
_HIDDEN_CONTENT = frozenset({"user_editable_context", "model_editable_context"})
_THINKING_CONTENT = frozenset({"thoughts", "reasoning_recap"})
_PROSE_CONTENT = frozenset({"text", "multimodal_text"})


def sniff(head: bytes) -> bool:
    """A JSON list whose first object has ``mapping`` and ``current_node``.

    ``current_node`` comes after the whole ``mapping`` in ChatGPT's key order, so when the
    first conversation is longer than the head, a mapping node's own keys (``children``,
    ``author``, ``content_type``) stand in for it."""
    if not sniff_list(head) or b'"mapping"' not in head:
        return False
    return b'"current_node"' in head or all(key in head for key in (b'"children"', b'"author"', b'"content_type"'))


def read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]:
    """The messages of every conversation's visible branch, conversation by conversation."""
    for conversation in conversations(source, ("id", "conversation_id"), "title"):
        yield from _conversation(conversation)


def _conversation(conversation: Conversation) -> Iterator[Message | Skipped]:
    where, cid, title = conversation.where, conversation.id, conversation.title
    mapping = conversation.fields.get("mapping")
    if mapping is None:
        return
    if not isinstance(mapping, dict):
        raise BadExport(where, "its mapping is not a JSON object")
    ordinal = 0
    for node in _visible_branch(mapping, conversation.fields.get("current_node"), where):
        message = node.get("message")
        if message is None:  # the tree's placeholder root: no message at all
            continue
        ordinal += 1
        place = f"{where}, message {ordinal}"
        if not isinstance(message, dict):
            raise BadExport(place, "not a JSON object")
        kind, role, text = _classify(message, place)
        if kind is not None:
            yield Skipped(cid, kind, place, title)
            continue
        mid = message.get("id") or node.get("id")
        yield turn(cid, role, text, _time(message.get("create_time"), place), mid, place, title)


def _visible_branch(mapping: dict[str, Any], current: Any, where: str) -> list[dict[str, Any]]:
    """The nodes from the root down to ``current`` (the branch the app shows)."""
    if current is None:
        current = _latest_leaf(mapping)
        if current is None:
            return []
    if not isinstance(current, str) or current not in mapping:
        raise BadExport(where, f"its current_node {current!r} is not in its mapping")
    branch: list[dict[str, Any]] = []
    seen: set[str] = set()
    node_id: Any = current
    while node_id is not None:
        if not isinstance(node_id, str) or node_id not in mapping:
            raise BadExport(where, f"a parent {node_id!r} is not in its mapping")
        if node_id in seen:
            raise BadExport(where, "its messages' parents form a loop")
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise BadExport(where, f"node {node_id!r} is not a JSON object")
        branch.append(node)
        node_id = node.get("parent")
    branch.reverse()
    return branch


def _latest_leaf(mapping: dict[str, Any]) -> str | None:
    """Without ``current_node``: the leaf whose message is newest (the last listed on a tie)."""
    parents = {node.get("parent") for node in mapping.values() if isinstance(node, dict)}
    best: tuple[float, int] | None = None
    found: str | None = None
    for index, (node_id, node) in enumerate(mapping.items()):
        if node_id in parents or not isinstance(node, dict):
            continue
        message = node.get("message")
        moment = message.get("create_time") if isinstance(message, dict) else None
        newest = float(moment) if isinstance(moment, (int, float)) and not isinstance(moment, bool) else float("-inf")
        key = (newest, index)
        if best is None or key > best:
            best, found = key, node_id
    return found


def _classify(message: dict[str, Any], place: str) -> tuple[SkipKind | None, Role, str]:
    """(the skip kind, or None with the role and text of a message to keep)."""
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    metadata = message.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    content = message.get("content")
    content = content if isinstance(content, dict) else {}
    content_type = content.get("content_type")
    kept: Role = "user" if role == "user" else "assistant"
    if role == "system" or content_type in _HIDDEN_CONTENT or any(metadata.get(flag) for flag in _HIDDEN_FLAGS):
        return "hidden", kept, ""
    if role == "tool":
        return "tool", kept, ""
    if role not in ("user", "assistant"):
        return "hidden", kept, ""
    if content_type in _THINKING_CONTENT or message.get("channel") == "analysis":
        return "thinking", kept, ""
    if role == "assistant" and message.get("recipient") not in (None, "all"):
        return "tool", kept, ""
    if content_type not in _PROSE_CONTENT:
        return "tool", kept, ""
    text = _text(content, metadata)
    if not text:
        return "empty", kept, ""
    return None, kept, bounded(text, place)


def _text(content: dict[str, Any], metadata: dict[str, Any]) -> str:
    """The parts one a line: strings as written, images and files as ``[attachment: name]``."""
    files = metadata.get("attachments")
    names: dict[str, str] = {}
    for file in files if isinstance(files, list) else []:
        if isinstance(file, dict) and isinstance(file.get("id"), str):
            name = file.get("name")
            names[file["id"]] = name if isinstance(name, str) and name.strip() else file["id"]
    lines: list[str] = []
    shown: set[str] = set()
    parts = content.get("parts")
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, str):
            if part.strip():
                lines.append(part.strip())
        elif isinstance(part, dict):
            kind = part.get("content_type")
            if kind == "image_asset_pointer":
                pointer = part.get("asset_pointer")
                file_id = pointer.split("://", 1)[-1] if isinstance(pointer, str) and pointer else "image"
                shown.add(file_id)
                lines.append(f"[attachment: {names.get(file_id, file_id)}]")
            elif kind == "audio_transcription" or "text" in part:
                said = part.get("text")
                if isinstance(said, str) and said.strip():
                    lines.append(said.strip())
    lines.extend(f"[attachment: {name}]" for file_id, name in names.items() if file_id not in shown)
    return "\n".join(lines)


def _time(raw: Any, place: str) -> datetime | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise BadExport(place, f"create_time {raw!r} is not a number of seconds")
    try:
        return datetime.fromtimestamp(raw, timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise BadExport(place, f"create_time {raw!r} is not a time (out of range)") from None
