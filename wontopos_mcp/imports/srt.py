"""SubRip captions (``.srt``) whose cue text names the speaker: ``Name: text``.

A SubRip file is blocks separated by blank lines: a counter, a timing line
``00:00:01,000 --> 00:00:04,000`` and the text::

    1
    00:00:01,000 --> 00:00:04,200
    Alice: Shall we start?

    2
    00:00:04,300 --> 00:00:06,000
    Let's go through the agenda.

What it handles: the ``Name: text`` prefix (as Otter, Zoom and Meet's caption exports
write it); a cue that names nobody, after one that did, is the same speaker going on, and
cues of one speaker in a row are one turn, one message (the logic shared with ``vtt`` in
``cues``); a missing counter; ``.`` instead of ``,`` before the milliseconds; formatting
tags (``<i>``, ``<b>``, ``<u>``, ``<font ...>``) and ASS position codes (``{\\an8}``)
dropped; a UTF-8 BOM; a block without a timing line after a cue (a blank line inside a
cue's text, which some tools write) is read as more of that cue's text.

As in ``vtt``: a cue naming nobody before anyone spoke is skipped as ``system``, a file in
which no cue names anyone is refused (``no speaker names``), a message's time is
``options.start`` plus its first cue's start (``None`` without a start), the conversation
is the file's name and ``message_id`` is ``None`` (a counter numbers cues, not turns).

Written here rather than with the ``srt`` library: ``srt.parse`` takes the whole file as
one string, and this reader streams; the grammar is a timing line. Sources relied on: the
SubRip format as the ``srt`` library's documentation and Matroska's subtitle notes
describe it (counter, ``hh:mm:ss,mmm --> hh:mm:ss,mmm``, text, blank line).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from wontopos_mcp.imports.cues import Turns, blocks, decode_head, no_speakers, seconds, split_prefix, text_lines
from wontopos_mcp.imports.messages import BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import Source

NAME = "srt"

_TIMING = re.compile(
    r"^\s*(?P<start>[0-9]{1,3}:[0-9]{2}:[0-9]{2}[,.][0-9]{1,3})[ \t]+-->[ \t]+"
    r"(?P<end>[0-9]{1,3}:[0-9]{2}:[0-9]{2}[,.][0-9]{1,3})(?:[ \t].*)?$"
)
_COUNTER = re.compile(r"^\s*[0-9]+\s*$")
_TAGS = re.compile(r"</?(?:i|b|u|s|font)(?:\s[^>]*)?>|\{\\[^}]*\}", re.IGNORECASE)


def sniff(head: bytes) -> bool:
    """The first block is a SubRip cue: a counter then a timing line, or the timing line first."""
    text = decode_head(head)
    if text is None:
        return False
    lines = [line for line in text.splitlines() if line.strip()][:2]
    if not lines:
        return False
    if _TIMING.match(lines[0]):
        return True
    return len(lines) == 2 and _COUNTER.match(lines[0]) is not None and _TIMING.match(lines[1]) is not None


def read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]:
    """The turns of the captions, in order (see the module's docstring)."""
    turns = Turns(source.name, options.start, merge=True)
    cues = 0
    with source.open() as stream:
        for start, block in blocks(text_lines(stream)):
            timing_at = 0 if _TIMING.match(block[0]) else 1
            if timing_at == 1 and (len(block) < 2 or not _TIMING.match(block[1]) or not _COUNTER.match(block[0])):
                if cues == 0:
                    raise BadExport(f"line {start}", "not a SubRip cue: a counter and a timing line (start --> end)")
                text = _clean(block)
                yield from turns.add(None, text, None, f"line {start}", joiner="\n")
                continue
            timing = _TIMING.match(block[timing_at])
            assert timing is not None
            place = f"line {start + timing_at}"
            offset = seconds(timing["start"], place)
            seconds(timing["end"], place)
            cues += 1
            speaker, text = split_prefix(_clean(block[timing_at + 1 :]))
            yield from turns.add(speaker, text, offset, f"line {start}")
    yield from turns.close()
    if cues == 0:
        raise BadExport("byte 0", "an empty file")
    if not turns.named:
        raise no_speakers("SubRip", "a 'Name: ' prefix")


def _clean(lines: list[str]) -> str:
    """A cue's text on one line, formatting tags dropped."""
    return " ".join(_TAGS.sub("", " ".join(lines)).split())
