"""WebVTT captions of a meeting (``.vtt``): who said what, from voice spans or ``Name:`` prefixes.

A WebVTT file is ``WEBVTT``, a header, then blocks separated by blank lines: cues (an
optional id line, a timing line ``start --> end [settings]``, the text) and ``NOTE``,
``STYLE`` and ``REGION`` blocks. Meeting tools say who speaks in one of two ways::

    a1b2c3d4-0000-4000-8000-00000000abcd/12-0      Teams: a GUID id and a voice span
    00:00:03.120 --> 00:00:05.400
    <v Alice Smith>Good morning, everyone.</v>

    2                                              Zoom: a number and a Name: prefix
    00:00:05.500 --> 00:00:08.000 align:start
    Bob Lee: Morning! Can you hear me?

What it handles: voice spans ``<v Name>text</v>``, ``<v Name>text`` running to the cue's
end, ``<v.loud Name>`` with classes, several voices in one cue; ``Name: text`` cue text
when no voice is given; a cue that names nobody, after one that did, is the same speaker
going on (Zoom and captioners name a speaker once and cut the sentence over several cues),
and cues of one speaker in a row are one turn, one message; other tags (``<c>``, ``<i>``,
``<b>``, ``<u>``, ``<ruby>``, ``<lang>``, inline ``<00:00:01.000>`` timestamps) are dropped
and HTML entities (``&amp;``, ``&lt;``, ``&nbsp;``...) read; hours are optional in
timestamps; cue settings after the timing are ignored; NOTE, STYLE and REGION blocks are
skipped without a count (they are no one's words).

A cue naming nobody before anyone has spoken (a title, "[music]") is skipped as ``system``;
a file in which no cue names anyone is refused (``no speaker names``): the speaker is the
voice or the prefix, and a film's subtitles have neither. A message's time is
``options.start`` (when the recording began) plus its first cue's start, and ``None``
without a start. The conversation is the file's name; cues have no id worth keeping (a
Teams id names a cue, not a turn), so ``message_id`` is ``None``.

Written here rather than with a library: ``webvtt-py`` (0.5 reads ``caption.voice``) loads
the whole file into a list before the first caption, and this reader must stream; the
grammar it needs is a dozen lines. Sources relied on: the W3C WebVTT specification (file
structure, cue timings and settings, the cue text tags and the ``v`` span's annotation)
and the shapes of Teams' and Zoom's transcripts as their documentation shows them.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

from wontopos_mcp.imports.cues import Turns, blocks, decode_head, no_speakers, seconds, split_prefix, text_lines
from wontopos_mcp.imports.messages import BadExport, Message, ReadOptions, Skipped
from wontopos_mcp.imports.sources import Source

NAME = "vtt"

_SIGNATURE = re.compile(r"^WEBVTT(?:[ \t\r\n]|$)")
_TIMING = re.compile(r"^\s*(?P<start>[0-9:.]+)[ \t]+-->[ \t]+(?P<end>[0-9:.]+)(?:[ \t].*)?$")
_STAMP = re.compile(r"^(?:[0-9]{2,}:)?[0-9]{2}:[0-9]{2}\.[0-9]{3}$")
# A tag of cue text: a class list after dots, an annotation after a space (a voice's name).
_TAG = re.compile(r"<(?P<close>/)?(?P<name>[^\s./>]+)(?:\.[^\s>]*)?(?:[ \t]+(?P<annotation>[^>]*))?>")
_SKIPPED_BLOCKS = ("NOTE", "STYLE", "REGION")


def sniff(head: bytes) -> bool:
    """The file starts with ``WEBVTT`` (after a BOM), as the specification requires."""
    text = decode_head(head)
    return text is not None and _SIGNATURE.match(text) is not None


def read(source: Source, options: ReadOptions) -> Iterator[Message | Skipped]:
    """The turns of the captions, in order (see the module's docstring)."""
    turns = Turns(source.name, options.start, merge=True)
    with source.open() as stream:
        lines = text_lines(stream)
        first = next(lines, None)
        if first is None:
            raise BadExport("byte 0", "an empty file")
        if _SIGNATURE.match(first[1]) is None:
            raise BadExport("line 1", "not a WebVTT file: the first line must be WEBVTT")
        cues = 0
        for start, block in blocks(lines):
            if start == 2 and not _is_cue(block):
                continue  # the header's own lines (Kind:, Language:), right under WEBVTT
            if block[0].split(maxsplit=1)[0] in _SKIPPED_BLOCKS and "-->" not in block[0]:
                continue
            timing_at = 0 if "-->" in block[0] else 1
            if timing_at >= len(block) or "-->" not in block[timing_at]:
                raise BadExport(f"line {start}", "a block with no timing line (start --> end)")
            timing = _TIMING.match(block[timing_at])
            if timing is None:
                raise BadExport(f"line {start + timing_at}", f"not a cue timing: {block[timing_at][:80]!r}")
            offset = _stamp(timing["start"], start + timing_at)
            _stamp(timing["end"], start + timing_at)
            cues += 1
            place = f"line {start}"
            for speaker, text in _voices("\n".join(block[timing_at + 1 :])):
                yield from turns.add(speaker, text, offset, place)
        yield from turns.close()
        if cues == 0:
            raise BadExport("the whole file", "no cues: a WebVTT file without a single timing line")
        if not turns.named:
            raise no_speakers("WebVTT", "a <v Name> voice or a 'Name: ' prefix")


def _is_cue(block: list[str]) -> bool:
    return any("-->" in line for line in block[:2])


def _stamp(stamp: str, number: int) -> float:
    if _STAMP.match(stamp) is None:
        raise BadExport(f"line {number}", f"{stamp!r} is not a WebVTT timestamp ([hh:]mm:ss.ttt)")
    return seconds(stamp, f"line {number}")


def _voices(payload: str) -> list[tuple[str | None, str]]:
    """The cue text in pieces by voice: ``(name, text)``, ``None`` for text outside any voice.

    Without a voice span at all, a ``Name: `` prefix names the speaker."""
    pieces: list[tuple[str | None, str]] = []
    voice: str | None = None
    voiced = False
    buffer: list[str] = []
    at = 0
    for tag in _TAG.finditer(payload):
        buffer.append(payload[at : tag.start()])
        at = tag.end()
        if tag["name"] != "v":
            continue
        pieces.append((voice, "".join(buffer)))
        buffer = []
        voiced = True
        voice = None if tag["close"] else (html.unescape(tag["annotation"] or "").strip() or None)
    buffer.append(payload[at:])
    pieces.append((voice, "".join(buffer)))
    cleaned = [(speaker, " ".join(html.unescape(text).split())) for speaker, text in pieces]
    cleaned = [(speaker, text) for speaker, text in cleaned if text]
    if not voiced and cleaned:
        return [split_prefix(cleaned[0][1])]
    return cleaned or [(None, "")]
