"""JSON exports read as a stream, bounded: what every JSON reader reads through.

Three layers, each a bound:

- :class:`CheckedStream`, the file's bytes: a UTF-8 BOM skipped; UTF-16 and UTF-32 (what
  Windows' Notepad saves as "Unicode") and empty files refused at once; with ``limit``, a
  value longer than that refused before it is held whole (see ``JsonEvents.value``).
- :class:`JsonEvents`, the parse: ``ijson``'s event parser (``basic_parse``, yajl) as a
  pull cursor with a depth cap (``MAX_DEPTH``), the place the reader gives for errors,
  and every parser error a :class:`BadExport` with a one-line reason and the bytes where
  the parser was. Events, never ``ijson.parse`` or ``ijson.items``: those build a prefix
  string per nesting level, so 60 KB of ``[[[[`` takes 2 GB and a few hundred kilobytes
  kill the process; here the 257th level refuses the file.
- Walks a reader composes: :meth:`JsonEvents.members` (an object's keys, one value at a
  time; none for another value), :meth:`JsonEvents.items` (a list's items, numbered, the
  place following them), :meth:`JsonEvents.value` (one value built as Python objects),
  :meth:`JsonEvents.skip`; and :func:`list_items` for a file that is one top-level list.

:func:`loads_line` holds one JSON Lines record to the same bounds (``json.loads``, with
the depth cap checked on what it built).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, BinaryIO, Protocol

from wontopos_mcp.imports.messages import SNIFF_BYTES, BadExport
from wontopos_mcp.imports.sources import refuse_wide_text

# Nesting no export reaches (a ChatGPT message's metadata goes a dozen levels deep).
MAX_DEPTH = 256
BUF = 64 * 1024  # bytes the parser asks for at a time
BOM = b"\xef\xbb\xbf"

_OPEN = frozenset({"start_map", "start_array"})
_CLOSE = frozenset({"end_map", "end_array"})


class Readable(Protocol):
    """What :class:`CheckedStream` reads from: a binary file, or a reader's own filter over one."""

    def read(self, size: int = -1, /) -> bytes: ...


class _TooLong(Exception):
    """Raised through the parser by :meth:`CheckedStream.read`; ``JsonEvents`` places it."""


class CheckedStream:
    """A binary stream as the parser reads it.

    On creation it reads the first ``SNIFF_BYTES``: UTF-16/32 and empty (or blank) files
    are refused there, at ``place``; ``head`` is those bytes without their BOM. ``offset``
    and ``span`` are positions in the file (the BOM counted): how far it has been read, and
    the bytes handed out last. With ``limit``, more than ``limit`` bytes (plus the
    parser's read-ahead) read since the last :meth:`mark` refuses the file."""

    def __init__(self, raw: Readable, place: str = "byte 0", limit: int | None = None) -> None:
        first = raw.read(SNIFF_BYTES)
        refuse_wide_text(first, place)
        if not first.strip():
            more = raw.read(1)
            if not more:
                raise BadExport(place, "the file is empty")
            first += more
        self.raw, self.limit = raw, limit
        self.head = first.removeprefix(BOM)
        self._pending = self.head
        self.offset = len(first) - len(self.head)  # the file's bytes handed to the parser
        self.span = (0, self.offset)
        self._mark = self.offset

    def mark(self) -> None:
        """Start counting toward ``limit`` again (the parser has produced an event since)."""
        self._mark = self.offset

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson asks for nothing first, to learn bytes from text
            return b""
        if self.limit is not None and self.offset - self._mark > self.limit + 2 * BUF:
            raise _TooLong
        if self._pending:
            chunk = self._pending if size < 0 else self._pending[:size]
            self._pending = self._pending[len(chunk) :]
        else:
            chunk = self.raw.read(size)
        self.span = (self.offset, self.offset + len(chunk))
        self.offset += len(chunk)
        return chunk


class JsonEvents:
    """The parse of a :class:`CheckedStream`, pulled one value at a time.

    ``place`` is where a refusal points (a reader's own words: ``"conversation 3"``); the
    walks move it as they go. Every refusal is a ``BadExport`` at ``place``: a parser error
    (its first line, and the bytes it was reading), nesting deeper than ``MAX_DEPTH``, and,
    when the stream has a ``limit``, a value built by :meth:`value` longer than that, or
    that many bytes without an event anywhere else (one giant string being skipped)."""

    def __init__(self, stream: CheckedStream, place: str = "the start of the file") -> None:
        import ijson

        self.stream, self.place = stream, place
        self._parse: Iterator[tuple[str, Any]] = ijson.basic_parse(stream, buf_size=BUF, use_float=True)
        self._json_error: type[Exception] = ijson.JSONError
        self._ahead: tuple[str, Any] | None = None
        self._done = False
        self._depth = 0  # containers open around the next event
        self.count = 0  # values and events taken: a walk sees whether its caller read a value

    def _refusal(self, exc: Exception) -> BadExport:
        """The parser's failure (or the stream's ``limit``) as a refusal at ``place``."""
        if isinstance(exc, _TooLong):
            return BadExport(self.place, f"a value longer than {self.stream.limit or 0:,} bytes: not a chat export")
        return BadExport(self.place, f"not valid JSON ({first_line(exc)}; {self.where()})")

    def _too_deep(self) -> BadExport:
        return BadExport(self.place, f"nested more than {MAX_DEPTH} levels deep ({self.where()})")

    def where(self) -> str:
        """The bytes the parser was reading, for people: ``in bytes 0-65,536``, ``at byte 70,000`` (its end)."""
        start, end = self.stream.span
        return f"at byte {end:,}" if start == end else f"in bytes {start:,}-{end:,}"

    # -- the cursor --------------------------------------------------------------------

    def peek(self) -> str | None:
        """The next event's kind (``start_map``, ``string``...), ``None`` at the end of the file."""
        if self._ahead is None and not self._done:
            try:
                self._ahead = next(self._parse, None)
            except (self._json_error, _TooLong) as exc:
                raise self._refusal(exc) from None
            self._done = self._ahead is None
        return self._ahead[0] if self._ahead is not None else None

    def take(self) -> tuple[str, Any]:
        """The next event, consumed (the depth counted, the stream's mark moved)."""
        if self.peek() is None:
            raise BadExport(self.place, "not valid JSON (the file ends inside a value)")
        event, self._ahead = self._ahead, None
        assert event is not None
        self.count += 1
        self.stream.mark()
        if event[0] in _OPEN:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise self._too_deep()
        elif event[0] in _CLOSE:
            self._depth -= 1
        return event

    # -- values ------------------------------------------------------------------------

    def value(self) -> Any:
        """The next value, built (objects as dicts, numbers as int or float); bounded by the stream's ``limit``."""
        kind, value = self.take()
        if kind not in _OPEN:
            return value
        root: Any = {} if kind == "start_map" else []
        top, key = root, None
        parents: list[tuple[Any, Any]] = []  # the containers around ``top``, with its key in each
        room = MAX_DEPTH - self._depth  # how many more levels may open inside
        try:
            for kind, value in self._parse:  # the hot loop: no call per event
                if kind == "map_key":
                    key = value
                elif kind == "end_map" or kind == "end_array":
                    if not parents:
                        self._depth -= 1
                        return root
                    top, key = parents.pop()
                elif kind == "start_map" or kind == "start_array":
                    if len(parents) >= room:
                        raise self._too_deep()
                    new: Any = {} if kind == "start_map" else []
                    if top.__class__ is dict:
                        top[key] = new
                    else:
                        top.append(new)
                    parents.append((top, key))
                    top = new
                elif top.__class__ is dict:
                    top[key] = value
                else:
                    top.append(value)
        except (self._json_error, _TooLong) as exc:
            raise self._refusal(exc) from None
        finally:
            self.stream.mark()
        raise BadExport(self.place, "not valid JSON (the file ends inside a value)")  # yajl says so first

    def skip(self) -> None:
        """The next value, read and dropped (the stream's mark moved at every event: only
        a single token longer than ``limit`` refuses it)."""
        kind, _ = self.take()
        if kind not in _OPEN:
            return
        stream, depth, base = self.stream, 1, self._depth - 1
        try:
            for kind, _ in self._parse:
                stream.mark()
                if kind == "start_map" or kind == "start_array":
                    depth += 1
                    if base + depth > MAX_DEPTH:
                        raise self._too_deep()
                elif kind == "end_map" or kind == "end_array":
                    depth -= 1
                    if not depth:
                        self._depth = base
                        return
        except (self._json_error, _TooLong) as exc:
            raise self._refusal(exc) from None
        raise BadExport(self.place, "not valid JSON (the file ends inside a value)")  # yajl says so first

    def members(self) -> Iterator[str]:
        """The keys of the next value when it is an object, in the file's order; after each,
        the caller reads its value (``value``, ``skip``, ``members``, ``items``), or it is
        skipped. Any other value is skipped: it has no members."""
        if self.peek() != "start_map":
            self.skip()
            return
        self.take()
        while True:
            kind, key = self.take()
            if kind == "end_map":
                return
            before = self.count
            yield key
            if self.count == before:
                self.skip()

    def items(self, what: str) -> Iterator[int]:
        """The next value, a list: its items' numbers from 1; after each, the caller reads
        the item (or it is skipped). ``place`` is ``"<what> N"`` from the item's first byte,
        ``"after <what> N"`` once it is read (so a file cut between items names the last
        whole one)."""
        kind, _ = self.take()
        if kind != "start_array":
            raise BadExport(self.place, "not a JSON list")
        number = 0
        while True:
            if self.peek() == "end_array":
                self.take()
                return
            number += 1
            self.place = f"{what} {number}"
            before = self.count
            yield number
            if self.count == before:
                self.skip()
            self.place = f"after {what} {number}"

    def finish(self) -> None:
        """The end of the file: anything after the top-level value refuses it."""
        if self.peek() is not None:  # yajl refuses a second value itself; this is a safety net
            raise BadExport(self.place, "not valid JSON (more after its end)")


def list_items(
    raw: BinaryIO, what: str, *, start: str = "byte 0", within: str = "", limit: int | None = None
) -> Iterator[tuple[int, Any]]:
    """Each item of a file that is one JSON list, numbered from 1, built, one in memory at
    a time. ``BadExport`` at ``start`` for a file that is empty, UTF-16/32 or not a list
    (of ``what``\\ s), then at ``"<within><what> N"`` (or ``"after ..."``) for the rest:
    a cut file, trailing bytes, invalid UTF-8, nesting past ``MAX_DEPTH``, an item longer
    than ``limit``."""
    stream = CheckedStream(raw, start, limit)
    if not stream.head.lstrip().startswith(b"["):
        raise BadExport(start, f"not a JSON list of {what}s")
    events = JsonEvents(stream, start)
    for number in events.items(within + what):
        yield number, events.value()
    events.finish()


def loads_line(raw: bytes, place: str) -> Any:
    """One JSON Lines record (its length already bounded by the line reader): UTF-8,
    valid JSON, nested at most ``MAX_DEPTH`` levels; else ``BadExport`` at ``place``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadExport(place, f"not UTF-8 text (byte {exc.start} of the line)") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadExport(place, f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:  # the standard parser recurses: it stops near a thousand levels
        raise BadExport(place, f"nested more than {MAX_DEPTH} levels deep") from None
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _deeper_than(value, MAX_DEPTH):
        raise BadExport(place, f"nested more than {MAX_DEPTH} levels deep")
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers more than ``limit`` deep (it counting as 1)."""
    if not isinstance(value, (dict, list)):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, (dict, list)):
                if depth >= limit:
                    return True
                stack.append((child, depth + 1))
    return False


def first_line(exc: Exception) -> str:
    """The first line of yajl's message (the lines after it draw the bytes around the fault)."""
    raw = exc.args[0] if exc.args else exc
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
