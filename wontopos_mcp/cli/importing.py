"""``wontopos-mcp import``: read a JSON Lines export into a store, in batches.

``import`` reads a file written by ``export`` (every memory of a store, oldest first,
one JSON object per line, as ``memory_list`` returns it) into a store, creating the store
when it does not exist (said on stderr). It reads bytes and decodes each line on its
own, so a line that is not UTF-8, not JSON (cut short), or not an exported memory is one
skipped line, reported with its number and reason in the file's own terms (``event_date
must be ...``, never a batch's ``items[0].event_date``); blank lines are ignored. Lines
go ``IMPORT_BATCH`` at a time through ``memory_add_batch`` (one embedding pass and one
commit per batch), each keeping its ``created_at``. Supersede chains are rebuilt: the
newer version supersedes the imported copy of the older one, both with their exported
``created_at``. A progress bar (``tqdm``, on stderr) shows lines done of the file's total,
the rate, and what was stored.

Idempotency: each line is written under the key ``import:<exported id>``, carried on its
own rows in the commit that stores it (one key per memory, not one per batch, so batch
boundaries may move between runs). Before a batch is embedded, the core looks up which
of its keys the store already holds, at any age, not only within the 24 h of other
idempotent writes (an imported memory keeps its exported ``created_at``, often older than
24 h, which the usual window would miss); those lines count as *already there* and are
not embedded again, and the look-up is repeated under the write lock. So a re-run, or a
run after an import stopped half-way, stores only what is missing, and a line whose id
was imported with other content is skipped. A memory forgotten after its import is no
longer there, and a re-run imports it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO, TypedDict, cast

from wontopos_mcp.contract import DEFAULT_STORE
from wontopos_mcp.errors import ConflictError, InvalidRequestError, WontoposError
from wontopos_mcp.rules.batch_items import Origin, check_item
from wontopos_mcp.rules.idempotency import Idempotency

from .client import EngineClient
from .wire import Report

if TYPE_CHECKING:
    from tqdm import tqdm

    from wontopos_mcp.engine.service import MemoryService

    from .client import Service

IMPORT_BATCH = 250  # lines per memory_add_batch call of an import (--batch)
_IMPORTED = ("content", "speaker", "category", "event_date", "conversation_id", "created_at")


class Skipped(TypedDict):
    line: int
    reason: str  # for a human


class ImportSummary(TypedDict):
    """What ``import`` prints (``--json``: as is)."""

    user_id: str
    lines: int
    stored: int
    already_there: int
    duplicates: int
    skipped: list[Skipped]  # by line


def import_file(service: Service, path: str, user_id: str | None, *, batch: int = IMPORT_BATCH) -> ImportSummary:
    """Import the export at ``path`` (``-``: stdin) into ``user_id``; the summary
    ``{user_id, lines, stored, already_there, duplicates, skipped: [{line, reason}]}``.
    Through the shared engine, the engine reads the file itself (stdin is copied into a
    private temporary file first) and this process draws its progress."""
    with contextlib.ExitStack() as stack:
        stdin = path == "-"
        source: BinaryIO = sys.stdin.buffer if stdin else stack.enter_context(open(path, "rb"))
        # A pipe or FIFO given as a path cannot be read twice: only a regular file is counted.
        total = None if stdin or not stat.S_ISREG(os.fstat(source.fileno()).st_mode) else _count_lines(path)
        bar = stack.enter_context(_Bar(total))
        if not isinstance(service, EngineClient):
            return import_lines(service, source, user_id, batch=batch, report=bar)
        if total is None:
            path = stack.enter_context(_spooled(source))
        return cast(ImportSummary, service.import_lines(os.path.abspath(path), user_id, batch=batch, report=bar))
    raise AssertionError("unreachable")


def import_lines(
    service: MemoryService, source: BinaryIO, user_id: str | None, *, batch: int, report: Report
) -> ImportSummary:
    """Import the export lines of ``source`` into ``user_id`` (where the engine is)."""
    service.start()
    if user_id is not None and service.store_create(user_id)["status"] == "created":
        report.said(f"import: created store {user_id!r}")
    importer = _Import(service, user_id, report)
    pending: list[_Line] = []
    for number, raw in enumerate(source, 1):
        line = importer.read(number, raw)
        if line is not None:
            pending.append(line)
        if len(pending) >= batch:
            importer.send(pending)
            pending = []
            importer.progress(number)
    importer.send(pending)
    importer.progress(importer.lines)
    return {
        "user_id": user_id or DEFAULT_STORE,
        "lines": importer.lines,
        "stored": importer.counts["stored"],
        "already_there": importer.counts["exists"],
        "duplicates": importer.counts["duplicate"],
        "skipped": sorted(importer.skipped, key=lambda skip: skip["line"]),
    }


class _Bar:
    """The import's progress on stderr (``tqdm``: lines done of the total, the rate, what
    was stored), drawn from its first report, after the lines said before it."""

    def __init__(self, total: int | None) -> None:
        self.total = total
        self.bar: tqdm[Any] | None = None
        self.done = 0  # lines the bar has counted

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()

    def said(self, text: str) -> None:
        print(f"wontopos-mcp: {text}", file=sys.stderr)

    def progress(self, *values: Any) -> None:
        """Move the bar to line ``number``: tqdm shows the total, the rate and the time left."""
        number, counts = values
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, unit=" lines", desc="wontopos-mcp: import", file=sys.stderr,
                            dynamic_ncols=True, mininterval=0)  # fmt: skip
        self.bar.set_postfix(counts, refresh=False)  # a dict keeps this order; keywords would be sorted
        self.bar.update(number - self.done)
        self.done = number


@contextlib.contextmanager
def _spooled(source: BinaryIO) -> Iterator[str]:
    """``source`` (stdin, a pipe) copied into a temporary file of this user's alone (the
    umask is 077), removed afterwards: the path the engine reads."""
    import shutil
    import tempfile

    fd, path = tempfile.mkstemp(prefix="wontopos-import-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "wb") as copy:
            shutil.copyfileobj(source, copy, 1 << 20)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _count_lines(path: str) -> int:
    """Lines in a file (a last one without a newline counts), read in 1 MiB blocks."""
    count, last = 0, b"\n"
    with open(path, "rb") as file:
        while block := file.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


class _Line:
    """One exported memory read from the file, checked, waiting for its batch."""

    def __init__(self, number: int, memory: dict[str, Any], item: dict[str, Any], idem: Idempotency) -> None:
        self.number, self.memory, self.item, self.idem = number, memory, item, idem
        self.replaces: str | None = None  # exported id of the memory this one superseded


class _Import:
    """One import run: reads lines, registers speakers, writes batches, counts.

    Supersede chains are rebuilt from the export's ``superseded_by``: the line of the
    newer version names the older one's exported id; its imported copy (stored in an
    earlier batch, in this one, or found already there) is what the new copy supersedes.
    """

    def __init__(self, service: MemoryService, user_id: str | None, report: Report) -> None:
        self.service, self.user_id, self.report = service, user_id, report
        self.counts: Counter[str] = Counter()
        self.skipped: list[Skipped] = []
        self.lines = 0
        self.speakers: dict[str, str | None] = {}  # speaker -> why it could not be registered (None: registered)
        self.copies: dict[str, str] = {}  # exported id of a superseded memory -> id of its imported copy
        self.successor_of: dict[str, str] = {}  # exported id of a newer version -> exported id it replaced

    def skip(self, number: int, reason: str) -> None:
        self.skipped.append({"line": number, "reason": reason})

    def read(self, number: int, raw: bytes) -> _Line | None:
        """The line checked on its own; ``None`` for a blank line or a skipped one."""
        self.lines = number
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.skip(number, f"not UTF-8 text (byte 0x{raw[exc.start]:02X} at column {exc.start + 1}); "
                      "save the file as UTF-8")  # fmt: skip
            return None
        text = text.removeprefix("\ufeff") if number == 1 else text
        if not text.strip():
            return None
        try:
            line = _read_line(number, text, self.service.scrubbed, self.service.idempotency, self.service.now_us())
        except _Unreadable as exc:
            self.skip(number, str(exc))
            return None
        except WontoposError as exc:  # a field the core refuses: its message names the field
            self.skip(number, exc.message)
            return None
        replaced = line.memory.get("superseded_by")
        if isinstance(replaced, str):
            self.successor_of[replaced] = line.memory["id"]
        line.replaces = self.successor_of.pop(line.memory["id"], None)
        speaker = line.item.get("speaker")
        if speaker is not None and speaker != "me" and speaker not in self.speakers:
            try:
                self.service.speaker_register(speaker, user_id=self.user_id)
                self.speakers[speaker] = None
            except WontoposError as exc:
                self.speakers[speaker] = exc.message
        if speaker is not None and self.speakers.get(speaker) is not None:
            self.skip(number, f"its speaker {speaker!r} could not be registered: {self.speakers[speaker]}")
            return None
        return line

    def send(self, lines: list[_Line]) -> None:
        """Write lines as one batch; when the batch is refused as a whole (a speaker
        removed meanwhile...), line by line, so only the lines at fault are skipped."""
        if not lines:
            return
        ids = {line.memory["id"]: i for i, line in enumerate(lines)}
        origins = [Origin(line.idem, self._target(line, ids, i)) for i, line in enumerate(lines)]
        try:
            answer = self.service.memory_add_batch([line.item for line in lines], self.user_id, origins=origins)
        except (InvalidRequestError, ConflictError) as exc:
            if len(lines) == 1:
                self.skip(lines[0].number, exc.message)
            else:
                for line in lines:
                    self.send([line])
            return
        for line, result in zip(lines, answer["results"]):
            self.counts[result["status"]] += 1
            if result["status"] == "refused":
                self.skip(line.number, result["reason"])
            elif result["status"] in ("stored", "exists") and line.memory.get("superseded_by"):
                self.copies[line.memory["id"]] = result["id"]

    def _target(self, line: _Line, ids: dict[str, int], index: int) -> str | int | None:
        """What the line's copy supersedes: an earlier line of the batch, or a copy stored before."""
        if line.replaces is None:
            return None
        earlier = ids.get(line.replaces)
        if earlier is not None and earlier < index:
            return earlier
        return self.copies.get(line.replaces)

    def progress(self, number: int) -> None:
        """Report line ``number`` done, with what was stored so far."""
        counts = {"stored": self.counts["stored"], "already_there": self.counts["exists"], "skipped": len(self.skipped)}
        self.report.progress(number, counts)


class _Unreadable(Exception):
    """A line that is not an exported memory; its message is the reason, for a human."""


def _read_line(
    number: int, text: str, scrubbed: Callable[[Any], Any], keyed: Callable[[str, str], Idempotency], now_us: int
) -> _Line:
    """A line as an exported memory, checked as ``memory_add_batch`` will check it; its
    fingerprint (``keyed``: the database's keyed hash) is of the fields as they will be
    stored (``scrubbed``: secrets redacted when the store redacts them, so no hash of a
    secret is kept).

    A hand-written line needs only ``content`` (the other fields are optional): without an
    ``id`` it is keyed by its fields, so a re-run finds it already there."""
    try:
        memory = json.loads(text.rstrip("\r\n"))
    except json.JSONDecodeError as exc:  # "Unterminated string starting at", "Expecting value"...
        where = f"{exc.msg.removesuffix(' at')} at column {exc.colno}"
        raise _Unreadable(f"not valid JSON ({where}): cut short or damaged") from None
    except RecursionError:
        raise _Unreadable("nested too deeply to be an exported memory") from None
    if not isinstance(memory, dict) or "content" not in memory:
        raise _Unreadable('not a memory: it needs at least a "content"')
    if memory.get("id") is not None and not isinstance(memory["id"], str):
        raise _Unreadable('its "id" is not a string')
    item = {k: memory[k] for k in _IMPORTED if memory.get(k) is not None}
    try:
        fields = json.dumps(scrubbed(item), sort_keys=True, ensure_ascii=False)
        fields.encode("utf-8")  # the check itself: a lone surrogate cannot be encoded, so it is refused here
    except UnicodeEncodeError:
        raise _Unreadable("it holds a lone surrogate escape (such as \\ud800), which is not text") from None
    check_item(item, now_us)
    if memory.get("id") is None:  # a hand-written line: its own fields name it
        memory["id"] = "line-" + hashlib.sha256(fields.encode("utf-8")).hexdigest()[:40]
    try:
        idem = keyed(f"import:{memory['id']}", fields)
    except InvalidRequestError:
        raise _Unreadable(f"its id {memory['id'][:60]!r} is not an exported memory id") from None
    return _Line(number, memory, item, idem)
