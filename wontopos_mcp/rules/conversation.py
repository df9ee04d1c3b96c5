"""Conversation messages in, prompt-ready context out.

``parse_messages`` applies the role/name rules to the chat-API input of
``memory_add_messages``; ``turn_messages`` makes that input of one exchange (``add_turn``,
for every face); ``context_window`` and ``context_line`` shape what
``memory_recall`` returns around its best memory; ``speaker_label`` is how every
prompt-ready line names who said it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from wontopos_mcp.errors import InvalidRequestError

from . import validation as v
from .names import ME, check_speaker

MAX_MESSAGES = 100
MAX_MESSAGES_CHARS = 200_000
ROLES = ("user", "assistant", "system", "tool")
SKIPPED_ROLES = ("system", "tool")


@dataclass(frozen=True)
class Message:
    """One message to store: its text, role and speaker (``None`` = untagged)."""

    index: int
    role: str
    content: str
    speaker: str | None


def parse_messages(messages: object) -> list[Message]:
    """The messages to store, in order; system and tool messages are left out.

    ``assistant`` without a name is the AI (``me``); with a name it is another person;
    ``user`` is the store's own user, untagged unless named. Names are checked here for
    form only; the caller checks that they are registered.
    """
    if not isinstance(messages, list):
        raise InvalidRequestError("messages must be a list of {role, content, name?} objects", field="messages")
    if not messages:
        raise InvalidRequestError("messages must not be empty", field="messages")
    if len(messages) > MAX_MESSAGES:
        raise InvalidRequestError(
            f"at most {MAX_MESSAGES} messages per call, got {len(messages)}", field="messages", max_items=MAX_MESSAGES
        )
    parsed = [_parse_one(i, message) for i, message in enumerate(messages)]
    total = sum(len(m.content) for m in parsed)
    if total > MAX_MESSAGES_CHARS:
        raise InvalidRequestError(
            f"messages hold {total} characters; at most {MAX_MESSAGES_CHARS} per call",
            field="messages",
            max_chars=MAX_MESSAGES_CHARS,
        )
    return [m for m in parsed if m.role not in SKIPPED_ROLES]


def turn_messages(user_msg: object, assistant_msg: object) -> tuple[list[dict[str, str]], dict[str, str]]:
    """One exchange (``add_turn``, REST ``store-turn``) as ``memory_add_messages`` input:
    the user's words untagged, the assistant's as ``me``; and the map from each
    message's field (``messages[0].content``) back to the caller's name (``user_msg``).

    A side that is absent or empty after trimming is left out, not refused: ``add_turn``
    answers as ``memory_add_messages`` does (user untagged, assistant ``me``), and the
    SDK's ``add_turn(user_msg="", assistant_msg="")`` sends ``""`` for a side it was not
    given (``add_turn("hi")`` stores one memory), so an empty side means "no message", on
    REST and in the library alike. A turn with neither side is a 400 naming
    ``user_msg``; a side that is not a string is a 400 naming it.
    """
    messages: list[dict[str, str]] = []
    fields: dict[str, str] = {}
    for name, role, text in (("user_msg", "user", user_msg), ("assistant_msg", "assistant", assistant_msg)):
        if text is None or (isinstance(text, str) and not text.strip()):
            continue
        if not isinstance(text, str):
            raise InvalidRequestError(f"{name} must be a string", field=name)
        fields[f"messages[{len(messages)}].content"] = name
        messages.append({"role": role, "content": text})
    if not messages:
        raise InvalidRequestError("user_msg and assistant_msg are both empty: nothing to store", field="user_msg")
    return messages, fields


def _parse_one(index: int, message: object) -> Message:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise InvalidRequestError(f"{where} must be an object with role and content", field=where)
    unknown = sorted(set(message) - {"role", "content", "name"})
    if unknown:
        raise InvalidRequestError(f"{where} has an unknown key {unknown[0]!r}", field=f"{where}.{unknown[0]}")
    role = message.get("role")
    if role not in ROLES:
        raise InvalidRequestError(f"{where}.role must be one of {', '.join(ROLES)}", field=f"{where}.role")
    content = v.text(message.get("content"), field=f"{where}.content", max_chars=v.MAX_CONTENT_CHARS)
    name = message.get("name")
    if role in SKIPPED_ROLES:
        return Message(index, role, content, None)  # a tool's name is not a person
    if name is None:
        return Message(index, role, content, ME if role == "assistant" else None)
    speaker = check_speaker(name, field=f"{where}.name")
    if speaker == ME and role == "user":
        # The store's user is never the assistant: "me" is no registered name, and
        # taking it would file the user's words as the assistant's.
        raise InvalidRequestError(
            f"{where}.name is 'me', the assistant itself: a user message is untagged (no name) or a registered "
            "person's; send the assistant's words with role 'assistant'",
            field=f"{where}.name",
            speaker=ME,
        )
    return Message(index, role, content, speaker)


R = TypeVar("R", bound=Mapping[str, Any])  # a stored row, as the caller types it


def context_window(rows: list[R], match_id: str, size: int) -> list[tuple[str, R]]:
    """Up to ``size`` rows around the match (in order), each tagged before/match/after.

    The window is centred on the match; when one side runs short the other side gets
    the lines it could not use.
    """
    if size <= 0:
        return []
    at = next(i for i, row in enumerate(rows) if row["memory_id"] == match_id)
    before = min(at, (size - 1) // 2)
    after = min(len(rows) - at - 1, size - 1 - before)
    before = min(at, size - 1 - after)
    window = rows[at - before : at + after + 1]
    return [("before" if i < before else "match" if i == before else "after", row) for i, row in enumerate(window)]


def speaker_label(memory: Mapping[str, Any]) -> str:
    """``[Bob] ``: who said it, as a prompt-ready line shows it (``[me] `` for the
    assistant; nothing when untagged)."""
    return f"[{memory['speaker']}] " if memory.get("speaker") is not None else ""


def context_line(position: str, row: Mapping[str, Any]) -> str:
    """``[match] [Bob] text``: where it sits, who said it (nothing when untagged), the text."""
    return f"[{position}] {speaker_label(row)}{row['content']}"
