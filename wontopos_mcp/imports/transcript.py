"""Plain-text transcripts: ``Name: text`` lines, or Otter-style ``Name  0:05`` headers over paragraphs.

Two shapes, which may mix in one file::

    Alice: Shall we start?                 a turn a line; lines without a name go on
    Bob: Yes. First, the budget.           with the turn before (a blank line between
    It went over by ten percent.           them makes a new paragraph of the same turn)

    Speaker 1  0:05                        Otter: the name, two spaces or more (or a
    Hello everyone, thanks for coming.     tab), a timestamp (m:ss or h:mm:ss), then
                                           the paragraphs of that turn
    Speaker 2  1:02:33
    Thanks for having me.

A ``Name: text`` line may start with a timestamp too (``[00:01:23] Alice: text`` or
``00:01:23 Alice: text``). Each named line or header is one turn (unlike subtitles, whose
cues cut sentences, a transcript's turns are the writer's own); text before the first
name (a title, a date) is skipped as ``system``; a file in which no line names anyone is
refused (``no speaker names``). Times: ``options.start`` (when the recording began) plus
the turn's timestamp, ``None`` without either. The conversation is the file's name;
``message_id`` is ``None``.

Sniffing is the last resort of detection and so stays conservative: it claims a file
only when one of its first three lines names a speaker, at least two lines do, with at least two
different names, none of them a mail or HTTP header, a config key or a date, and the
file is not WhatsApp, WebVTT, SubRip, JSON or markup. ``--format transcript`` reads any
such text, a monologue included.

Sources relied on: the shape of Otter.ai's ``.txt`` export (a ``Name  m:ss`` line, the
paragraph, a blank line) as public parsers of it read it; the rest is plain text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from wontopos_mcp.imports import srt, vtt, whatsapp
from wontopos_mcp.imports.cues import Turns, decode_head, plausible_name, seconds, split_prefix, text_lines
from wontopos_mcp.imports.messages import SNIFF_BYTES, BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import Source

NAME = "transcript"

_STAMP = r"(?:[0-9]{1,3}:)?[0-9]{1,2}:[0-9]{2}(?:[.,][0-9]{1,3})?"
_HEADER = re.compile(rf"^(?P<name>[^\s:][^:]*?)(?:[ ]{{2,}}|\t+)(?P<stamp>{_STAMP})\s*$")
_STAMPED = re.compile(rf"^(?:\[(?P<bracketed>{_STAMP})\]|(?P<bare>{_STAMP}))[ \t]+(?P<rest>.+)$")
_NOT_PEOPLE = re.compile(
    r"^(?:from|to|subject|date|cc|bcc|reply-to|sender|received|return-path|message-id|mime-version|content-[a-z-]+"
    r"|host|user-agent|accept(?:-[a-z]+)?|authorization|cookie|set-cookie|location|server|status|error|warning"
    r"|info|debug|note|title|name|version|description|author|license|q|a)$",
    re.IGNORECASE,
)
_MARKUP = re.compile(r"^\s*(?:[{<]|\[\s*[\[{\"\]]|\[\s*$)")
_KEY_OR_DATE = re.compile(r"^[a-z_][a-z0-9_.-]*$|[0-9]{2}[:/.-][0-9]{2}")


def sniff(head: bytes) -> bool:
    """Conservative: see the module's docstring."""
    text = decode_head(head)
    if text is None or _MARKUP.match(text):
        return False
    if whatsapp.sniff(head) or vtt.sniff(head) or srt.sniff(head):
        return False
    lines = text.splitlines()
    if len(head) >= SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the head ends inside a line
    named = [_speaker(line) for line in lines[:200] if line.strip()]
    if not any(name is not None for name in named[:3]):
        return False
    names = [name for name in named if name is not None]
    if len(names) < 2 or len(set(names)) < 2:
        return False
    return not any(_NOT_PEOPLE.match(name) or _KEY_OR_DATE.search(name) for name in names)


def read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]:
    """The turns of the transcript, in order (see the module's docstring)."""
    turns = Turns(source.name, options.start, merge=False, joiner="\n")
    header: tuple[str, float, str] | None = None  # an Otter header waiting for its paragraph
    blank = False
    seen = False
    with source.open() as stream:
        for number, line in text_lines(stream):
            seen = True
            place = f"line {number}"
            if not line.strip():
                blank = True
                continue
            found = _HEADER.match(line)
            if found is not None and plausible_name(found["name"].strip()):
                if header is not None:
                    yield Skipped(source.name, "empty", header[2])
                header = (found["name"].strip(), seconds(found["stamp"], place), place)
                yield from turns.close()
                blank = False
                continue
            offset, speaker, text = _turn_line(line, place)
            if header is not None and speaker is None:
                yield from turns.add(header[0], text, header[1], header[2])
                header = None
            elif speaker is not None:
                if header is not None:
                    yield Skipped(source.name, "empty", header[2])
                    header = None
                yield from turns.add(speaker, text, offset, place)
            else:
                yield from turns.add(None, text, None, place, joiner="\n\n" if blank else "\n")
            blank = False
    if header is not None:
        yield Skipped(source.name, "empty", header[2])
    yield from turns.close()
    if not seen:
        raise BadExport("byte 0", "an empty file")
    if not turns.named:
        raise BadExport(
            "the whole file",
            "no speaker names: no line starts with 'Name: ' or is an Otter-style 'Name  0:05' header",
        )


def _turn_line(line: str, place: str) -> tuple[float | None, str | None, str]:
    """A line's timestamp, speaker and text: ``(None, None, line)`` for a line naming nobody."""
    stamped = _STAMPED.match(line)
    if stamped is not None:
        speaker, text = split_prefix(stamped["rest"])
        if speaker is not None:
            return seconds(stamped["bracketed"] or stamped["bare"], place), speaker, text
    speaker, text = split_prefix(line)
    return None, speaker, text


def _speaker(line: str) -> str | None:
    """The name a line gives, for sniffing."""
    found = _HEADER.match(line)
    if found is not None and plausible_name(found["name"].strip()):
        return found["name"].strip()
    stamped = _STAMPED.match(line)
    return split_prefix(stamped["rest"] if stamped else line)[0]
