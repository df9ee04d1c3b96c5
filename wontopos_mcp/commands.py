"""The human commands of ``wontopos-mcp``: look into a store from a terminal.

    wontopos-mcp stores list                          (and: stores create --user alice)
    wontopos-mcp speakers list --user alice
    wontopos-mcp speakers add Bob --user alice        (and: speakers remove Bob)
    wontopos-mcp search "what did Bob say?" --user alice --speaker Bob
    wontopos-mcp export --user alice > alice.jsonl
    wontopos-mcp import alice.jsonl --user alice-copy
    wontopos-mcp stats --user alice

Each command is one call of the same core the servers use, on the database the usual
settings name (``--db`` / ``WONTOPOS_DB``). Results go to stdout, as text for reading or
``--json`` for scripts (``export`` always writes JSON Lines); these commands are the only
place the package writes to stdout, and they never run inside the stdio server. A refusal
is one line on stderr and exit code 1 (``2`` for bad usage or settings).

``export`` writes every memory of a store, oldest first, one JSON object per line, as
``memory_list`` returns it (superseded versions included, flagged). ``import`` reads such
a file into a store, creating the store when it does not exist (said on stderr). It
reads bytes and decodes each line on its own, so a line that is not UTF-8, not JSON
(cut short), or not an exported memory is one skipped line, reported with its number
and reason, and the exit code is then 1; blank lines are ignored. Lines go
``IMPORT_BATCH`` at a time through ``memory_add_batch`` (one embedding pass and one
commit per batch), each keeping its ``created_at``. Supersede chains are rebuilt: the
newer version supersedes the imported copy of the older one, both with their exported
``created_at``.

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

import argparse
import contextlib
import hashlib
import json
import os
import stat
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from . import validation as v
from .batch import MAX_BATCH_ITEMS, Origin, check_item
from .contract import DEFAULT_STORE, operation
from .errors import ConflictError, InvalidRequestError, WontoposError
from .idempotency import Idempotency

if TYPE_CHECKING:
    from .config import Settings
    from .service import MemoryService

EXIT_REFUSED = 1
IMPORT_BATCH = 250  # lines per memory_add_batch call of an import (--batch)
# The first run of a command that needs the model may convert it (seconds); wait longer
# than a server call would.
MODEL_WAIT = 180.0


def add_commands(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Register the subcommands on ``parser``; ``common`` carries the shared settings flags."""
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help: str, *, parent: Any = commands) -> argparse.ArgumentParser:
        sub = parent.add_parser(name, help=help, description=help, parents=[common])
        sub.add_argument("--user", dest="user_id", help=f'the store (default: "{DEFAULT_STORE}")')
        sub.add_argument("--json", action="store_true", help="print JSON instead of text")
        return sub

    stores = commands.add_parser("stores", help="list or create stores")
    store_actions = stores.add_subparsers(dest="action", metavar="ACTION", required=True)
    command("list", "list every store", parent=store_actions)
    command("create", "create a store (its id is --user)", parent=store_actions)

    speakers = commands.add_parser("speakers", help="list, add or remove a store's speakers")
    actions = speakers.add_subparsers(dest="action", metavar="ACTION", required=True)
    command("list", "list the people registered in a store", parent=actions)
    command("add", "register a person in a store", parent=actions).add_argument("speaker")
    command("remove", "unregister a person (their memories stay, untagged)", parent=actions).add_argument("speaker")

    search = command("search", "search a store's memories by meaning")
    search.add_argument("query")
    search.add_argument("--speaker", help="only this speaker's words")
    limit = operation("memory_search").param("limit")
    search.add_argument("--limit", type=int, default=limit.default, help=f"how many ({limit.span})")

    export = command("export", "write every memory of a store as JSON Lines")
    export.add_argument("--out", help="file to write (default: stdout)")

    imported = command("import", "read memories from a JSON Lines export into a store")
    imported.add_argument("file", help="the export file ('-' for stdin)")
    imported.add_argument(
        "--batch", type=int, default=IMPORT_BATCH, metavar="N",
        help=f"lines per write: one embedding pass and one commit each (default {IMPORT_BATCH})",
    )  # fmt: skip

    command("stats", "count a store's memories and speakers")


def run(args: dict[str, Any], settings: Settings, *, service: MemoryService | None = None) -> int:
    """Run one command; a refusal is one line on stderr and exit code 1.

    ``service`` (tests) replaces the one the settings would open; it is left open.
    """
    from .service import MemoryService

    own = service is None
    if service is None:
        service = MemoryService.open(settings, model_wait=MODEL_WAIT)
    try:
        name = args["command"] if args.get("action") is None else f"{args['command']} {args['action']}"
        return _HANDLERS[name](service, args, sys.stdout) or 0
    except WontoposError as exc:
        print(f"wontopos-mcp: {exc.message} ({exc.status} {exc.type})", file=sys.stderr)
        return EXIT_REFUSED
    except OSError as exc:
        print(f"wontopos-mcp: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_REFUSED
    finally:
        if own:
            service.close()


def _emit(out: TextIO, args: dict[str, Any], answer: Any, text: str) -> None:
    out.write((json.dumps(answer, ensure_ascii=False, indent=2) if args["json"] else text) + "\n")


def _stores_list(service: MemoryService, args: dict[str, Any], out: TextIO) -> None:
    answer = service.stores_list()
    _emit(out, args, answer, "\n".join(f"{s['user_id']}\tsince {s['created_at']}" for s in answer["stores"]))


def _stores_create(service: MemoryService, args: dict[str, Any], out: TextIO) -> None:
    if args["user_id"] is None:
        raise InvalidRequestError("name the store to create with --user", field="user_id")
    answer = service.store_create(args["user_id"])
    _emit(out, args, answer, f"{answer['user_id']}: {answer['status']}")


def _speakers_list(service: MemoryService, args: dict[str, Any], out: TextIO) -> None:
    answer = service.speakers_list(user_id=args["user_id"])
    lines = [f"{s['speaker']}\t{s['memories']} memories\tsince {s['created_at']}" for s in answer["speakers"]]
    lines.append(f"{answer['count']} of {answer['limit']} speakers registered in {answer['user_id']!r}")
    _emit(out, args, answer, "\n".join(lines))


def _speakers_add(service: MemoryService, args: dict[str, Any], out: TextIO) -> None:
    answer = service.speaker_register(args["speaker"], user_id=args["user_id"])
    _emit(out, args, answer, f"{answer['speaker']}: {answer['status']} ({answer['count']} of {answer['limit']})")


def _speakers_remove(service: MemoryService, args: dict[str, Any], out: TextIO) -> None:
    answer = service.speaker_remove(args["speaker"], user_id=args["user_id"])
    _emit(out, args, answer, f"{answer['speaker']}: removed; {answer['memories_untagged']} memories untagged")


def _search(service: MemoryService, args: dict[str, Any], out: TextIO) -> None:
    service.start()
    answer = service.memory_search(args["query"], speaker=args["speaker"], limit=args["limit"], user_id=args["user_id"])
    lines = [
        f"{m['similarity']:.3f}  {'[' + m['speaker'] + '] ' if 'speaker' in m else ''}{m['content']}"
        for m in answer["memories"]
    ]
    _emit(out, args, answer, "\n".join(lines) if lines else "(no memories)")


_PAGE = operation("memory_list").param("limit").high  # export and stats read the biggest pages


def _memories(service: MemoryService, user_id: str | None) -> Iterator[dict[str, Any]]:
    cursor = None
    while True:
        page = service.memory_list(limit=_PAGE, cursor=cursor, user_id=user_id)
        yield from page["memories"]
        cursor = page["next_cursor"]
        if cursor is None:
            return


def _export(service: MemoryService, args: dict[str, Any], out: TextIO) -> None:
    if args["out"] is None:
        _write_jsonl(service, args["user_id"], out)
        return
    with open(args["out"], "w", encoding="utf-8") as file:
        count = _write_jsonl(service, args["user_id"], file)
    print(f"wontopos-mcp: exported {count} memories to {args['out']}", file=sys.stderr)


def _write_jsonl(service: MemoryService, user_id: str | None, out: TextIO) -> int:
    count = 0
    for memory in _memories(service, user_id):
        out.write(json.dumps(memory, ensure_ascii=False) + "\n")
        count += 1
    return count


_IMPORTED = ("content", "speaker", "category", "event_date", "conversation_id", "created_at")


def _import(service: MemoryService, args: dict[str, Any], out: TextIO) -> int:
    """Import an export in batches; exit code 1 when a line was skipped.

    The target store is created when missing (said on stderr). Progress goes to stderr
    after every batch, with the file's line count and the rate."""
    batch = v.integer(args["batch"], field="--batch", low=1, high=MAX_BATCH_ITEMS)
    user_id = args["user_id"]
    importer = _Import(service, user_id)
    with contextlib.ExitStack() as stack:
        stdin = args["file"] == "-"
        source = sys.stdin.buffer if stdin else stack.enter_context(open(args["file"], "rb"))
        # A pipe or FIFO given as a path cannot be read twice: only a regular file is counted.
        total = None if stdin or not stat.S_ISREG(os.fstat(source.fileno()).st_mode) else _count_lines(args["file"])
        service.start()
        if user_id is not None and service.store_create(user_id)["status"] == "created":
            print(f"wontopos-mcp: import: created store {user_id!r}", file=sys.stderr)
        pending: list[_Line] = []
        for number, raw in enumerate(source, 1):
            line = importer.read(number, raw)
            if line is not None:
                pending.append(line)
            if len(pending) >= batch:
                importer.send(pending)
                pending = []
                importer.progress(number, total)
        importer.send(pending)
        importer.progress(importer.lines, total)
    skipped = sorted(importer.skipped, key=lambda skip: skip["line"])
    for skip in skipped:
        print(f"wontopos-mcp: import: skipped line {skip['line']}: {skip['reason']}", file=sys.stderr)
    summary: dict[str, Any] = {
        "user_id": user_id or DEFAULT_STORE,
        "lines": importer.lines,
        "stored": importer.counts["stored"],
        "already_there": importer.counts["exists"],
        "duplicates": importer.counts["duplicate"],
        "skipped": skipped,
    }
    text = (
        f"imported {_many(summary['stored'], 'memory', 'memories')} "
        f"({summary['already_there']} already there, {_many(summary['duplicates'], 'duplicate', 'duplicates')}, "
        f"{_many(len(skipped), 'line', 'lines')} skipped)"
    )
    _emit(out, args, summary, text)
    return EXIT_REFUSED if skipped else 0


def _many(n: int, one: str, more: str) -> str:
    return f"{n} {one if n == 1 else more}"


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

    def __init__(self, service: MemoryService, user_id: str | None) -> None:
        self.service, self.user_id = service, user_id
        self.counts: Counter[str] = Counter()
        self.skipped: list[dict[str, Any]] = []
        self.lines = 0
        self.started = time.monotonic()
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
            line = _read_line(number, text)
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

    def progress(self, number: int, total: int | None) -> None:
        rate = number / max(time.monotonic() - self.started, 1e-6)
        of = f"{number} of {total} lines" if total is not None else f"{number} lines"
        print(
            f"wontopos-mcp: import: {of}, {rate:.1f} lines/s: {self.counts['stored']} stored, "
            f"{self.counts['exists']} already there, {len(self.skipped)} skipped",
            file=sys.stderr,
        )


class _Unreadable(Exception):
    """A line that is not an exported memory; its message is the reason, for a human."""


def _read_line(number: int, text: str) -> _Line:
    """A line as an exported memory, checked as ``memory_add_batch`` will check it."""
    try:
        memory = json.loads(text.rstrip("\r\n"))
    except json.JSONDecodeError as exc:  # "Unterminated string starting at", "Expecting value"...
        where = f"{exc.msg.removesuffix(' at')} at column {exc.colno}"
        raise _Unreadable(f"not valid JSON ({where}): cut short or damaged") from None
    except RecursionError:
        raise _Unreadable("nested too deeply to be an exported memory") from None
    if not isinstance(memory, dict) or not isinstance(memory.get("id"), str) or "content" not in memory:
        raise _Unreadable('not an exported memory: it needs an "id" and a "content"')
    item = {k: memory[k] for k in _IMPORTED if memory.get(k) is not None}
    try:
        fields = json.dumps(item, sort_keys=True, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise _Unreadable("it holds a lone surrogate escape (such as \\ud800), which is not text") from None
    check_item(item)
    try:
        idem = Idempotency.of(f"import:{memory['id']}", hashlib.sha256(fields).hexdigest())
    except InvalidRequestError:
        raise _Unreadable(f"its id {memory['id'][:60]!r} is not an exported memory id") from None
    return _Line(number, memory, item, idem)


def _stats(service: MemoryService, args: dict[str, Any], out: TextIO) -> None:
    speakers = service.speakers_list(user_id=args["user_id"])
    memories = list(_memories(service, args["user_id"]))
    superseded = sum(1 for m in memories if m["is_superseded"])
    by_speaker = Counter(m.get("speaker", "(untagged)") for m in memories)
    answer = {
        "user_id": speakers["user_id"],
        "memories": len(memories),
        "current": len(memories) - superseded,
        "superseded": superseded,
        "speakers": speakers["count"],
        "speaker_limit": speakers["limit"],
        "by_speaker": dict(sorted(by_speaker.items())),
    }
    lines = [
        (
            f"store {answer['user_id']!r}: {answer['memories']} memories "
            f"({answer['current']} current, {answer['superseded']} superseded)"
        ),
        f"{answer['speakers']} of {answer['speaker_limit']} speakers registered",
        *(f"  {name}\t{n}" for name, n in answer["by_speaker"].items()),
    ]
    _emit(out, args, answer, "\n".join(lines))


_HANDLERS = {
    "stores list": _stores_list,
    "stores create": _stores_create,
    "speakers list": _speakers_list,
    "speakers add": _speakers_add,
    "speakers remove": _speakers_remove,
    "search": _search,
    "export": _export,
    "import": _import,
    "stats": _stats,
}
