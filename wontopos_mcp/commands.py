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
a file into an existing store: it registers each speaker it meets, adds each memory, and
rebuilds supersede chains (a memory that superseded an earlier one in the file supersedes
its imported copy). Each line is written under the idempotency key ``import:<id>``, so an
import that stopped half-way can simply be run again within 24 hours.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from .errors import InvalidRequestError, WontoposError
from .idempotency import Idempotency

if TYPE_CHECKING:
    from .config import Settings
    from .service import MemoryService

EXIT_REFUSED = 1
# The first run of a command that needs the model may convert it (seconds); wait longer
# than a server call would.
MODEL_WAIT = 180.0


def add_commands(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Register the subcommands on ``parser``; ``common`` carries the shared settings flags."""
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help: str, *, parent: Any = commands) -> argparse.ArgumentParser:
        sub = parent.add_parser(name, help=help, description=help, parents=[common])
        sub.add_argument("--user", dest="user_id", help='the store (default: "default")')
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
    search.add_argument("--limit", type=int, default=10, help="how many (5-20, default 10)")

    export = command("export", "write every memory of a store as JSON Lines")
    export.add_argument("--out", help="file to write (default: stdout)")

    imported = command("import", "read memories from a JSON Lines export into a store")
    imported.add_argument("file", help="the export file ('-' for stdin)")

    command("stats", "count a store's memories and speakers")


def run(args: dict[str, Any], settings: "Settings", *, service: "MemoryService | None" = None) -> int:
    """Run one command; a refusal is one line on stderr and exit code 1.

    ``service`` (tests) replaces the one the settings would open; it is left open.
    """
    from .service import MemoryService

    own = service is None
    if service is None:
        service = MemoryService.open(settings, model_wait=MODEL_WAIT)
    try:
        name = args["command"] if args.get("action") is None else f"{args['command']} {args['action']}"
        _HANDLERS[name](service, args, sys.stdout)
        return 0
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


def _stores_list(service: "MemoryService", args: dict[str, Any], out: TextIO) -> None:
    answer = service.stores_list()
    _emit(out, args, answer, "\n".join(f"{s['user_id']}\tsince {s['created_at']}" for s in answer["stores"]))


def _stores_create(service: "MemoryService", args: dict[str, Any], out: TextIO) -> None:
    if args["user_id"] is None:
        raise InvalidRequestError("name the store to create with --user", field="user_id")
    answer = service.store_create(args["user_id"])
    _emit(out, args, answer, f"{answer['user_id']}: {answer['status']}")


def _speakers_list(service: "MemoryService", args: dict[str, Any], out: TextIO) -> None:
    answer = service.speakers_list(user_id=args["user_id"])
    lines = [f"{s['speaker']}\t{s['memories']} memories\tsince {s['created_at']}" for s in answer["speakers"]]
    lines.append(f"{answer['count']} of {answer['limit']} speakers registered in {answer['user_id']!r}")
    _emit(out, args, answer, "\n".join(lines))


def _speakers_add(service: "MemoryService", args: dict[str, Any], out: TextIO) -> None:
    answer = service.speaker_register(args["speaker"], user_id=args["user_id"])
    _emit(out, args, answer, f"{answer['speaker']}: {answer['status']} ({answer['count']} of {answer['limit']})")


def _speakers_remove(service: "MemoryService", args: dict[str, Any], out: TextIO) -> None:
    answer = service.speaker_remove(args["speaker"], user_id=args["user_id"])
    _emit(out, args, answer, f"{answer['speaker']}: removed; {answer['memories_untagged']} memories untagged")


def _search(service: "MemoryService", args: dict[str, Any], out: TextIO) -> None:
    service.start()
    answer = service.memory_search(args["query"], speaker=args["speaker"], limit=args["limit"], user_id=args["user_id"])
    lines = [
        f"{m['similarity']:.3f}  {'[' + m['speaker'] + '] ' if 'speaker' in m else ''}{m['content']}"
        for m in answer["memories"]
    ]
    _emit(out, args, answer, "\n".join(lines) if lines else "(no memories)")


def _memories(service: "MemoryService", user_id: str | None) -> Iterator[dict[str, Any]]:
    cursor = None
    while True:
        page = service.memory_list(limit=500, cursor=cursor, user_id=user_id)
        yield from page["memories"]
        cursor = page["next_cursor"]
        if cursor is None:
            return


def _export(service: "MemoryService", args: dict[str, Any], out: TextIO) -> None:
    if args["out"] is None:
        _write_jsonl(service, args["user_id"], out)
        return
    with open(args["out"], "w", encoding="utf-8") as file:
        count = _write_jsonl(service, args["user_id"], file)
    print(f"wontopos-mcp: exported {count} memories to {args['out']}", file=sys.stderr)


def _write_jsonl(service: "MemoryService", user_id: str | None, out: TextIO) -> int:
    count = 0
    for memory in _memories(service, user_id):
        out.write(json.dumps(memory, ensure_ascii=False) + "\n")
        count += 1
    return count


IMPORT_PROGRESS_EVERY = 100


def _import(service: "MemoryService", args: dict[str, Any], out: TextIO) -> None:
    """Import an export: speakers registered as met, dates kept (``created_at``), supersede
    chains rebuilt, every line under its own idempotency key (a re-run stores nothing
    twice). A line that cannot be imported is skipped and reported with the reason;
    progress goes to stderr every 100 lines."""
    service.start()
    user_id = args["user_id"]
    service.speakers_list(user_id=user_id)  # an unknown store stops here, before reading
    counts: Counter[str] = Counter()
    skipped: list[dict[str, Any]] = []
    state = _ImportState()
    with contextlib.ExitStack() as stack:
        source = sys.stdin if args["file"] == "-" else stack.enter_context(open(args["file"], encoding="utf-8"))
        number = 0
        for number, line in enumerate(source, 1):
            if line.strip():
                try:
                    counts[_import_line(service, user_id, line, number, state)] += 1
                except WontoposError as exc:
                    skipped.append({"line": number, "reason": exc.message})
            if number % IMPORT_PROGRESS_EVERY == 0:
                print(f"wontopos-mcp: import: {number} lines read, {counts['stored']} stored", file=sys.stderr)
    for skip in skipped:
        print(f"wontopos-mcp: import: skipped line {skip['line']}: {skip['reason']}", file=sys.stderr)
    summary = {
        "user_id": user_id or "default",
        "stored": counts["stored"],
        "duplicates": counts["duplicate"],
        "skipped": skipped,
    }
    text = f"imported {summary['stored']} memories ({summary['duplicates']} duplicates, {len(skipped)} lines skipped)"
    _emit(out, args, summary, text)


class _ImportState:
    """What an import remembers across lines to rebuild supersede chains."""

    def __init__(self) -> None:
        self.registered: set[str] = set()
        self.new_ids: dict[str, str] = {}  # exported id -> imported id
        self.successor_of: dict[str, str] = {}  # exported id of a newer version -> the id it replaced


def _import_line(service: "MemoryService", user_id: str | None, line: str, number: int, state: _ImportState) -> str:
    memory = _record(line, number)
    idem = Idempotency.of(f"import:{memory['id']}", hashlib.sha256(line.strip().encode()).hexdigest())
    speaker = memory.get("speaker")
    if speaker is not None and speaker != "me" and speaker not in state.registered:
        service.speaker_register(speaker, user_id=user_id)
        state.registered.add(speaker)
    replaced = state.successor_of.pop(memory["id"], None)
    if replaced is not None and replaced in state.new_ids:
        answer = service.memory_supersede(state.new_ids[replaced], memory["content"], user_id=user_id, idempotency=idem)
        new_id = answer["id"]
    else:
        keys = ("content", "speaker", "category", "event_date", "conversation_id", "created_at")
        item = {k: memory[k] for k in keys if memory.get(k) is not None}
        answer = service.memory_add_batch([item], user_id, idempotency=idem)
        new_id = answer["ids"][0] if answer["ids"] else ""
        answer = {"status": "stored" if new_id else "duplicate"}
    if new_id:
        state.new_ids[memory["id"]] = new_id
    if memory.get("superseded_by"):
        state.successor_of[memory["superseded_by"]] = memory["id"]
    return answer["status"]


def _record(line: str, number: int) -> dict[str, Any]:
    try:
        memory = json.loads(line)
    except ValueError:
        raise InvalidRequestError(f"line {number} is not JSON", field="file", line=number) from None
    if not isinstance(memory, dict) or not isinstance(memory.get("id"), str) or "content" not in memory:
        raise InvalidRequestError(f"line {number} is not an exported memory (id, content)", field="file", line=number)
    return memory


def _stats(service: "MemoryService", args: dict[str, Any], out: TextIO) -> None:
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
