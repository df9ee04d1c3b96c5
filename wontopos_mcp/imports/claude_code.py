"""A Claude Code session transcript: ``~/.claude/projects/<project>/<session>.jsonl``.

One JSON object a line: ``{type, uuid, parentUuid, sessionId, timestamp, isMeta,
isSidechain, message: {role, content: string | [blocks]}, ...}``. ``type`` is ``user`` or
``assistant`` for the conversation's turns; ``summary``, ``system``,
``file-history-snapshot``, ``queue-operation`` and others are the tool's own records.

Kept: an ``assistant`` line's ``text`` blocks (the AI, role ``assistant``), and a ``user``
line's string or ``text`` blocks, what the person typed (role ``user``, no name); an image
the person pasted is ``[attachment: image]``. Skipped, by kind: ``tool`` for ``tool_use``
blocks and the ``user`` lines that carry ``tool_result`` blocks (or ``toolUseResult``);
``thinking`` for ``thinking`` and ``redacted_thinking``; ``meta`` for every other record,
``isMeta`` lines, compaction summaries (``isCompactSummary``,
``isVisibleInTranscriptOnly``), the tool's synthetic answers (model ``<synthetic>``,
``isApiErrorMessage``), the wrappers Claude Code writes as user text around slash commands
and shell mode (``<command-name>``, ``<local-command-stdout>``, ``<bash-input>``,
``<system-reminder>``..., "Caveat: The messages below were generated...", "[Request
interrupted by user]"), and sidechain lines (``isSidechain``): a subagent's conversation,
whose "user" is the main agent, not the person; ``empty`` for a turn without text.

One line is one message, never joined with the next: Claude Code writes each content block
of one API answer as its own line (same ``message.id``, its own ``uuid``), and the capture
hook re-reads the same file as it grows, so a message keyed by its first line's ``uuid``
whose text grew with later lines would keep its first half forever. Text blocks of one
answer are separated by tool calls in practice, so each is a paragraph of its own anyway.

Time: ``timestamp`` (ISO 8601, UTC ``Z``). Ids: the line's ``uuid``; the conversation is
the line's ``sessionId`` (a resumed session copies earlier lines with their own session, so
they stay in theirs), else the session of the lines above, else the file's name. No title.

Refused (``BadExport`` at ``line N``): a line that is not JSON (a cut last line too: the
file is read as written), not an object, not UTF-8, longer than ``MAX_MESSAGE_BYTES``,
nested deeper than ``jsonstream.MAX_DEPTH`` (the bounds of every JSON reader), or with a
``timestamp`` that is not a time; a file that is empty, UTF-16 or UTF-32.

Relied on (no official schema exists): DRMacIver/claude-reliability
``notes/transcript-format.md``, microsoft/amplifier
``ai_working/claude_code_logging/session_format_specification.md`` (compaction, command
wrappers, meta lines) and Huntehhh/claude-code-chat ``docs/claude-cli-jsonl-format.md``
(record types, content blocks).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from wontopos_mcp.imports.histories import iso_time, text_blocks, turn
from wontopos_mcp.imports.jsonstream import BOM, loads_line
from wontopos_mcp.imports.messages import BadExport, Message, ReadOptions, Role, SkipKind, Skipped, export_id
from wontopos_mcp.imports.sources import Source, iter_lines, refuse_wide_text

NAME = "claude-code"

# User text Claude Code writes itself, around commands, shell mode, hooks and interruptions.
_WRAPPERS = (
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<user-prompt-submit-hook>",
    "<system-reminder>",
    "<task-notification>",
    "Caveat: The messages below were generated",
    "[Request interrupted by user",
)
_META_FLAGS = ("isSidechain", "isMeta", "isCompactSummary", "isVisibleInTranscriptOnly", "isApiErrorMessage")


def sniff(head: bytes) -> bool:
    """JSON lines whose first is an object with ``type``, and a ``sessionId`` with
    ``parentUuid`` (a turn) or ``leafUuid`` (a summary) in the head. Key checks on the
    bytes, not a parse: the head may cut a line."""
    text = head.removeprefix(BOM).lstrip()
    if not text.startswith(b"{") or b'"type"' not in text.split(b"\n", 1)[0]:
        return False
    return b'"sessionId"' in text and (b'"parentUuid"' in text or b'"leafUuid"' in text)


def read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]:
    """The session's turns, line by line."""
    session = source.name
    seen_any = False
    with source.open() as stream:
        for number, raw in iter_lines(stream):
            place = f"line {number}"
            if number == 1:
                refuse_wide_text(raw, place)
                raw = raw.removeprefix(BOM)
            if not raw.strip():
                continue
            seen_any = True
            record = _record(raw, place)
            session = export_id(record.get("sessionId")) or session
            kind, role, text = _classify(record)
            if kind is not None:
                yield Skipped(session, kind, place)
                continue
            time = iso_time(record.get("timestamp"), place, "timestamp")
            yield turn(session, role, text, time, record.get("uuid"), place, None)
    if not seen_any:
        raise BadExport("byte 0", "the file is empty")


def _record(raw: bytes, place: str) -> dict[str, Any]:
    record = loads_line(raw, place)
    if not isinstance(record, dict):
        raise BadExport(place, "not a JSON object")
    return record


def _classify(record: dict[str, Any]) -> tuple[SkipKind | None, Role, str]:
    """(the skip kind, or None with the role and text of a turn to keep)."""
    kind = record.get("type")
    message = record.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, dict):
        return "meta", "user", ""
    if any(record.get(flag) for flag in _META_FLAGS):
        return "meta", "user", ""
    if kind == "assistant":
        if message.get("model") == "<synthetic>":
            return "meta", "assistant", ""
        skip, text = _assistant_text(message.get("content"))
        return skip, "assistant", text
    if record.get("toolUseResult") is not None:
        return "tool", "user", ""
    skip, text = _user_text(message.get("content"))
    return skip, "user", text


def _assistant_text(content: Any) -> tuple[SkipKind | None, str]:
    if isinstance(content, str):
        return (None, content.strip()) if content.strip() else ("empty", "")
    paragraphs, kinds = text_blocks(content)
    if paragraphs:
        return None, "\n\n".join(paragraphs)
    if kinds & {"tool_use", "server_tool_use"}:
        return "tool", ""
    if kinds & {"thinking", "redacted_thinking"}:
        return "thinking", ""
    return "empty", ""


def _user_text(content: Any) -> tuple[SkipKind | None, str]:
    if isinstance(content, str):
        if _is_wrapper(content):
            return "meta", ""
        return (None, content.strip()) if content.strip() else ("empty", "")
    lines: list[str] = []
    wrapped = False
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            return "tool", ""
        said = block.get("text")
        if block.get("type") == "text" and isinstance(said, str) and said.strip():
            if _is_wrapper(said):
                wrapped = True
            else:
                lines.append(said.strip())
        elif block.get("type") == "image":
            lines.append("[attachment: image]")
    if lines:
        return None, "\n".join(lines)
    return ("meta" if wrapped else "empty"), ""


def _is_wrapper(text: str) -> bool:
    return text.lstrip().startswith(_WRAPPERS)
