"""What the text readers share: decoded lines, the ``Name:`` prefix, and turns made of cues.

``whatsapp``, ``vtt``, ``srt`` and ``transcript`` all read text line by line: the lines
come from :func:`text_lines` (UTF-8, an optional BOM dropped, UTF-16 refused with the fix
named, since a phone or Windows' Notepad sometimes saves one). Subtitles and transcripts
then say who speaks either with a voice span or with a ``Name: text`` prefix
(:func:`split_prefix`), and a subtitle file cuts one person's sentence into cues of a few
seconds each: :class:`Turns` glues the cues of one speaker in a row into one message, so
a turn is stored as the person said it, not as the captioner cut it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import BinaryIO

from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES, BadExport, Message, Skipped
from wontopos_mcp.imports.sources import iter_lines, refuse_wide_text, utf16_name

UTF8_BOM = b"\xef\xbb\xbf"


def decode_head(head: bytes) -> str | None:
    """A sniffing head as text: UTF-8 with the BOM dropped and a character cut at the end
    forgiven; a UTF-16 head decoded as such (so a reader can claim the file and then say
    what to do); ``None`` for bytes that are no text."""
    encoding = utf16_name(head)
    if encoding is not None and encoding != "UTF-32":
        if "mark" in encoding:
            body, codec = head, "utf-16-le" if head[1] == 0 else "utf-16-be"
        else:
            body, codec = head[2:], "utf-16-be" if "big" in encoding else "utf-16-le"
        return body[: len(body) // 2 * 2].decode(codec, errors="replace")
    if encoding is not None:
        return None
    if head.startswith(UTF8_BOM):
        head = head[3:]
    if b"\x00" in head:
        return None
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:
            return None
        return head[: exc.start].decode("utf-8")


def text_lines(stream: BinaryIO) -> Iterator[tuple[int, str]]:
    """Numbered lines of a UTF-8 text (1-based), line ends removed, a BOM at the start dropped.

    Refuses, naming the line: UTF-16 or UTF-32 (the fix is to save it again as UTF-8),
    NUL bytes (binary, or UTF-16 without a mark), and bytes that are not UTF-8."""
    for number, raw in iter_lines(stream):
        if number == 1:
            refuse_wide_text(raw, "byte 0")
            if raw.startswith(UTF8_BOM):
                raw = raw[3:]
        if b"\x00" in raw:
            raise BadExport(f"line {number}", "NUL bytes: a binary file, or UTF-16 text; save the text again as UTF-8")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadExport(f"line {number}", f"not UTF-8 text (byte {exc.start + 1} of the line)") from None
        yield number, text.rstrip("\r\n")


# ``Name: text``: a name of at most 64 characters and 6 words, before a colon (French
# typography's space before it allowed) and a space. What may not be in a name keeps a
# sentence with a colon ("The point is: ...") from becoming a speaker more often than not.
_PREFIX = re.compile(r"^(?P<name>[^\s:][^:]{0,63}?)\s?:\s+(?P<text>\S.*)$", re.DOTALL)
_NOT_IN_NAME = re.compile(r"[,;!?\"“”«»<>{}|\\/=*#`]|https?$|\.\.")


def plausible_name(name: str) -> bool:
    """Whether ``name`` may be a speaker's name before a colon (not a sentence, a URL, a key)."""
    return 0 < len(name) <= 64 and len(name.split()) <= 6 and _NOT_IN_NAME.search(name) is None


def split_prefix(text: str) -> tuple[str | None, str]:
    """``"Alice Smith: hello"`` -> ``("Alice Smith", "hello")``; text without one -> ``(None, text)``."""
    found = _PREFIX.match(text)
    if found is None or not plausible_name(found["name"].strip()):
        return None, text
    return found["name"].strip(), found["text"]


@dataclass
class _Turn:
    speaker: str
    parts: list[str]
    offset: float | None
    place: str
    size: int = field(default=0)


class Turns:
    """Cues in, messages out, in order.

    ``add`` takes one cue: its speaker (``None`` when the cue names nobody), its text, its
    start in seconds from the recording's start (``None`` when the file gives none) and its
    place. A cue naming nobody continues the turn before it (Zoom and captioners cut one
    person's sentence over several cues, naming them once); before anyone has spoken it is
    the recording's own line (a title, "[music]") and is skipped as ``system``. With
    ``merge`` (subtitles), a cue of the speaker already talking continues the turn; without
    it (a transcript's ``Name:`` lines), each named cue is a turn of its own. A turn is a
    message whose time is ``start`` plus its first cue's offset (``None`` without a start).
    A turn that outgrows ``MAX_MESSAGE_BYTES`` is cut there: the engine splits long
    messages at sentence ends anyway, and memory stays bounded.
    """

    def __init__(self, conversation: str, start: datetime | None, *, merge: bool, joiner: str = " ") -> None:
        self.conversation, self.start, self.merge, self.joiner = conversation, start, merge, joiner
        self.named = False
        self._turn: _Turn | None = None

    def add(
        self, speaker: str | None, text: str, offset: float | None, place: str, joiner: str | None = None
    ) -> Iterator[Message | Skipped]:
        """One cue; yields the turn it ends, if any."""
        text = text.strip()
        if not text:
            yield Skipped(self.conversation, "empty", place)
            return
        turn = self._turn
        if speaker is None and turn is None:
            yield Skipped(self.conversation, "system", place)
            return
        if turn is not None and (speaker is None or (self.merge and speaker == turn.speaker)):
            size = len(text.encode())
            if turn.size + size <= MAX_MESSAGE_BYTES:
                turn.parts.append(joiner if joiner is not None else self.joiner)
                turn.parts.append(text)
                turn.size += size + 2
                return
            speaker, offset = turn.speaker, offset
        yield from self.close()
        assert speaker is not None
        self.named = True
        self._turn = _Turn(speaker, [text], offset, place, len(text.encode()))

    def close(self) -> Iterator[Message]:
        """The turn still open, at a new speaker or at the end of the file."""
        turn, self._turn = self._turn, None
        if turn is None:
            return
        time = None
        if self.start is not None and turn.offset is not None:
            time = self.start + timedelta(seconds=turn.offset)
        yield Message(self.conversation, "person", turn.speaker, "".join(turn.parts), time, None, turn.place)


_CLOCK = re.compile(r"^(?:(?P<h>[0-9]+):)?(?P<m>[0-9]{1,2}):(?P<s>[0-9]{2})(?:[.,](?P<f>[0-9]{1,3}))?$")


def seconds(stamp: str, place: str) -> float:
    """``"1:02:03.500"``, ``"02:03,5"`` or ``"2:03"`` as seconds; minutes and seconds under 60."""
    found = _CLOCK.match(stamp.strip())
    if found is None:
        raise BadExport(place, f"{stamp.strip()!r} is not a timestamp (hh:mm:ss.ttt)")
    hours, minutes, secs = int(found["h"] or 0), int(found["m"]), int(found["s"])
    if minutes >= 60 or secs >= 60:
        raise BadExport(place, f"{stamp.strip()!r}: minutes and seconds go up to 59")
    fraction = found["f"] or ""
    return hours * 3600 + minutes * 60 + secs + (int(fraction) / 10 ** len(fraction) if fraction else 0.0)


def blocks(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, list[str]]]:
    """Runs of non-blank lines (a subtitle file's blocks), each with its first line's number.

    A block bigger than ``MAX_MESSAGE_BYTES`` refuses the file: no cue is that long, and
    the block would otherwise be held whole."""
    start, size = 0, 0
    block: list[str] = []
    for number, line in lines:
        if not line.strip():
            if block:
                yield start, block
            start, block, size = 0, [], 0
            continue
        if not block:
            start = number
        size += len(line.encode()) + 1
        if size > MAX_MESSAGE_BYTES:
            raise BadExport(f"line {start}", f"a block longer than {MAX_MESSAGE_BYTES:,} bytes: not a subtitle cue")
        block.append(line)
    if block:
        yield start, block


def no_speakers(format_name: str, how: str) -> BadExport:
    """The refusal of a file in which no cue names who speaks."""
    return BadExport(
        "the whole file",
        f"no speaker names: no {format_name} cue says who speaks ({how}); this import stores who said what, "
        "so a subtitle file without speakers has nothing to attribute",
    )
