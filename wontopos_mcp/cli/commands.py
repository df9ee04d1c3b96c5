"""The human commands of ``wontopos-mcp``: look into a store from a terminal, and fix it.

One grammar, ``wontopos-mcp NOUN VERB [NAME] [--user STORE]``::

    wontopos-mcp info                                 database path, size, stores, model
    wontopos-mcp stores list | create NAME | delete NAME [--yes]
    wontopos-mcp speakers list | add NAME | remove NAME       --user alice
    wontopos-mcp memories list [--speaker NAME] | get ID | forget ID
    wontopos-mcp search "what did Bob say?" --user alice --speaker Bob
    wontopos-mcp export --user alice --out alice.jsonl
    wontopos-mcp import alice.jsonl --user alice-copy
    wontopos-mcp import chat.txt --user family --format whatsapp --register
    wontopos-mcp stats --user alice
    wontopos-mcp reindex --embed-model NAME

Each command is one call of the same core the servers use, on the database the usual
settings name (``--db`` / ``WONTOPOS_DB``). Results go to stdout, as text for reading or
``--json`` for scripts (not on ``export``, which always writes JSON Lines); these
commands are the only place the package writes to stdout, and they never run inside the
stdio server. A refusal is one line on stderr and exit code 1 (``2`` for bad usage or
settings); a fix in it names these commands (``wontopos-mcp stores create alice``), not
the MCP tools (:func:`verbs.speak`). Numbers with a range (``--limit``, ``--batch``) are
checked by the parser, before the database is opened or the model loaded.

``stores create --user NAME``, the spelling of earlier versions, still works (``NAME``
given both ways must agree); ``stores delete`` takes the name only, and asks before it
deletes (``--yes`` does not ask; with nobody to answer, nothing is deleted).
``memories list`` pages through a store, or with ``--speaker`` through one person's
memories, oldest first (``memory_list``); ``--cursor`` continues either, and the command
for the next page is printed on stderr.
``import`` is :mod:`importing`; ``hook session-start|prompt|capture`` are Claude Code's
hooks (:mod:`hooks`, run by ``main`` itself: a hook never fails). ``reindex`` re-embeds the whole database for the model
``--embed-model`` names (which it requires: ``WONTOPOS_EMBED_MODEL`` alone is not taken as
the wish to rewrite every vector); a database that does not exist is one line and exit
code 2, nothing created.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from wontopos_mcp.contract import DEFAULT_STORE, Param, operation
from wontopos_mcp.errors import ConfigError, Fix, InvalidRequestError, WontoposError
from wontopos_mcp.rules.answers import MemoryRecord
from wontopos_mcp.rules.batch_items import MAX_BATCH_ITEMS
from wontopos_mcp.rules.import_options import JSONL
from wontopos_mcp.verbs import render, speak

from .client import MODEL_WAIT, EngineClient
from .conversations import add_import_arguments, import_conversation_file, is_jsonl_export
from .exits import EXIT_BAD_SETTING, EXIT_REFUSED
from .importing import IMPORT_BATCH, import_file

if TYPE_CHECKING:
    from wontopos_mcp.config import Settings

    from .client import Service

EMBEDS = frozenset({"add", "search", "import"})  # refuse a database of another model, as the server does
# What the shared engine serves: every command but reindex (which rewrites every vector for
# another model, alone). Only those that embed start an engine; the others ask one that
# runs and otherwise open the database here, without the model, as fast as an engine starts.
SERVED = frozenset({"info", "stores list", "stores create", "stores delete", "speakers list", "speakers add",
                    "speakers remove", "speakers rename", "speakers merge", "memories list", "memories get",
                    "memories forget", "add", "search", "export", "import", "stats"})  # fmt: skip
_LIST = operation("memory_list").param("limit")
_PAGE = _LIST.high  # export and stats read the biggest pages

EXAMPLES = """\
examples:
  wontopos-mcp                                      serve MCP over stdio (what an agent's host runs)
  wontopos-mcp info                                 where the database is, its stores, the model
  wontopos-mcp stores create alice
  wontopos-mcp speakers add Bob --user alice
  wontopos-mcp add "The deadline moved to Tuesday." --user alice --speaker Bob
  wontopos-mcp search "what did Bob say?" --user alice --speaker Bob --limit 5
  wontopos-mcp memories list --user alice --speaker Bob
  wontopos-mcp memories forget MEMORY_ID --user alice
  wontopos-mcp export --user alice --out alice.jsonl
  wontopos-mcp import alice.jsonl --user alice-copy
  wontopos-mcp stores delete alice                  asks first; --yes does not
  wontopos-mcp reindex --embed-model NAME           re-embed every memory for another model
  wontopos-mcp engine status                        the engine stdio sessions share (engine stop stops it)"""


def ranged(param: Param) -> Callable[[str], int]:
    """An argparse ``type`` checking a whole number against the contract's range, so a
    bad ``--limit`` stops at parsing, before any database or model is touched."""
    low, high = param.low, param.high

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            span = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {span}, got {value}")
        return value

    return parse


# The settings flags each command takes beyond ``--db`` and ``--log-level``: those it uses.
# The server's own (``--transport``, ``--host``, ``--port``, ...) belong to no command.
_MODEL = ("embed_model", "model_cache")  # a command that embeds
_WRITES = ("writers",)  # a command that writes (object storage: one writer, or leased replicas)
USES: dict[str, tuple[str, ...]] = {
    "stores create": _WRITES,
    "stores delete": _WRITES,
    "speakers add": (*_WRITES, "speaker_limit"),
    "speakers remove": _WRITES,
    "speakers rename": _WRITES,
    "speakers merge": _WRITES,
    "memories forget": _WRITES,
    "info": _MODEL,  # names the model and its cache
    "add": (*_MODEL, *_WRITES, "redact"),
    "search": _MODEL,
    "import": (*_MODEL, *_WRITES, "redact", "speaker_limit"),
    "reindex": ("model_cache", *_WRITES),  # and its own --embed-model, required
    "hook session-start": _MODEL,  # the engine's key names the model
    "hook prompt": _MODEL,
    "hook capture": (*_MODEL, *_WRITES, "redact", "speaker_limit"),
}
EVERY_COMMAND = ("db", "log_level")
HOOK_HELP = {
    "session-start": "SessionStart: print the store's people and its latest memories as the session's context",
    "prompt": "UserPromptSubmit: print the memories closest to the person's prompt as context (nothing when none)",
    "capture": "Stop, PreCompact, SessionEnd: import the session's transcript, only the turns not imported before",
}


def add_commands(
    parser: argparse.ArgumentParser,
    flags: Callable[[Sequence[str]], argparse.ArgumentParser],
    epilog: str = "",
) -> None:
    """Register the subcommands on ``parser``; ``flags(names)`` gives a parent parser with
    the settings flags of those names (each command takes those it uses, ``USES``),
    ``epilog`` ends every command's ``--help`` (the resolved database path)."""
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(
        name: str,
        help: str,
        example: str,
        *,
        parent: Any = commands,
        of: str = "",
        store: str | None = "the store",
        json: bool = True,
    ) -> argparse.ArgumentParser:
        uses = flags((*EVERY_COMMAND, *USES.get(f"{of} {name}".strip(), ())))
        sub: argparse.ArgumentParser = parent.add_parser(
            name, help=help, description=help, parents=[uses], epilog=f"example:\n  {example}\n\n{epilog}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )  # fmt: skip
        where = argparse.SUPPRESS if store is None else f'{store} (default: "{DEFAULT_STORE}")'
        sub.add_argument("--user", dest="user_id", metavar="STORE", help=where)
        if json:
            sub.add_argument("--json", action="store_true", help="print JSON instead of text")
        return sub

    def group(name: str, help: str) -> Any:
        sub = commands.add_parser(name, help=help, description=help, epilog=epilog,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
        return sub.add_subparsers(dest="action", metavar="ACTION", required=True)

    command(
        "info", "where the database is, its size, its stores and the embedding model", "wontopos-mcp info", store=None
    )

    stores = group("stores", "list, create or delete stores")
    command("list", "list every store", "wontopos-mcp stores list", parent=stores, of="stores", store=None)
    command(
        "create", "create a store", "wontopos-mcp stores create alice", parent=stores, of="stores", store=None
    ).add_argument("name", nargs="?", metavar="NAME")
    delete = command(
        "delete",
        "delete a store with its memories and speakers (asks first)",
        "wontopos-mcp stores delete alice --yes",
        parent=stores,
        of="stores",
        store=None,
    )
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("--yes", action="store_true", help="do not ask")

    speakers = group("speakers", "list, add or remove a store's speakers")
    command(
        "list",
        "list the people registered in a store",
        "wontopos-mcp speakers list --user alice",
        parent=speakers,
        of="speakers",
    )
    command(
        "add",
        "register a person in a store",
        "wontopos-mcp speakers add Bob --user alice",
        parent=speakers,
        of="speakers",
    ).add_argument("speaker", metavar="NAME")
    command(
        "remove",
        "unregister a person (their memories stay, untagged)",
        "wontopos-mcp speakers remove Bob --user alice",
        parent=speakers,
        of="speakers",
    ).add_argument("speaker", metavar="NAME")
    renamed = command("rename", "give a person another name (their memories follow)",
                      "wontopos-mcp speakers rename Bbo Bob --user alice", parent=speakers, of="speakers")  # fmt: skip
    renamed.add_argument("speaker", metavar="NAME")
    renamed.add_argument("new_name", metavar="NEW_NAME")
    merged = command("merge", "make one person of two names: NAME's memories go to INTO (asks first)",
                     "wontopos-mcp speakers merge Robert Bob --user alice", parent=speakers, of="speakers")  # fmt: skip
    merged.add_argument("speaker", metavar="NAME")
    merged.add_argument("into", metavar="INTO")
    merged.add_argument("--yes", action="store_true", help="do not ask")

    memories = group("memories", "list, show or forget a store's memories")
    listed = command("list", "list memories, oldest first (with --speaker: that person's only)",
                     "wontopos-mcp memories list --user alice --speaker Bob --limit 20",
                     parent=memories, of="memories")  # fmt: skip
    listed.add_argument("--speaker", metavar="NAME", help="only this person's memories")
    listed.add_argument("--limit", type=ranged(_LIST), default=_LIST.default, help=f"how many ({_LIST.span})")
    listed.add_argument("--cursor", help="continue after an earlier list (the command for it is printed)")
    command(
        "get", "show one memory", "wontopos-mcp memories get MEMORY_ID --user alice", parent=memories, of="memories"
    ).add_argument("memory_id", metavar="ID")
    command(
        "forget",
        "forget one memory",
        "wontopos-mcp memories forget MEMORY_ID --user alice",
        parent=memories,
        of="memories",
    ).add_argument("memory_id", metavar="ID")

    added = command(
        "add",
        "store one memory (TEXT, or '-' to read it from stdin)",
        'wontopos-mcp add "The deadline moved to Tuesday." --user alice --speaker Bob',
    )
    added.add_argument("content", metavar="TEXT")
    added.add_argument("--speaker", metavar="NAME", help='who said it: "me" or a registered name (default: untagged)')
    added.add_argument("--category", help='a label to group memories (default: "general")')
    added.add_argument(
        "--conversation",
        "--conversation-id",
        dest="conversation_id",
        metavar="ID",
        help="the conversation it was said in",
    )
    added.add_argument(
        "--event-date", dest="event_date", metavar="DATE", help="when it happened: YYYY-MM-DD or RFC 3339"
    )

    search = command(
        "search",
        "search a store's memories by meaning",
        'wontopos-mcp search "what did Bob say?" --user alice --speaker Bob --limit 5',
    )
    search.add_argument("query")
    search.add_argument("--speaker", metavar="NAME", help="only this speaker's words")
    limit = operation("memory_search").param("limit")
    search.add_argument("--limit", type=ranged(limit), default=limit.default, help=f"how many ({limit.span})")

    export = command(
        "export",
        "write every memory of a store as JSON Lines",
        "wontopos-mcp export --user alice --out alice.jsonl",
        json=False,
    )
    export.add_argument("--out", help="file to write (default: stdout)")
    export.add_argument("--speaker", metavar="NAME", help="only this person's memories (their own data)")

    imported = command(
        "import",
        "bring conversations in: a chat export (WhatsApp, Telegram, Slack, Discord), an assistant history "
        "(ChatGPT, Claude, Claude Code), a meeting transcript (vtt, srt, text), or this product's JSON Lines "
        "export; every message under the person who wrote it (the store is created if missing)",
        "wontopos-mcp import 'WhatsApp Chat with Ana.txt' --user family --register --dry-run",
    )
    imported.add_argument("files", nargs="+", metavar="PATH", help="export files or folders ('-': JSON Lines on stdin)")
    add_import_arguments(imported)
    batch = Param("--batch", "", low=1, high=MAX_BATCH_ITEMS)
    imported.add_argument(
        "--batch", type=ranged(batch), default=IMPORT_BATCH, metavar="N",
        help=f"lines per write: one embedding pass and one commit each ({batch.span}, default {IMPORT_BATCH})",
    )  # fmt: skip

    command("stats", "count a store's memories and speakers", "wontopos-mcp stats --user alice")

    reindex = command(
        "reindex",
        "re-embed every memory in place for another embedding model; afterwards start the server with that "
        "--embed-model",
        "wontopos-mcp reindex --embed-model BAAI/bge-small-en-v1.5 --db ./memdb",
        store=None,
    )
    # Required, after the command (WONTOPOS_EMBED_MODEL alone is not the wish to rewrite every vector).
    reindex.add_argument("--embed-model", metavar="NAME", required=True, help="the model to re-embed every memory for")

    hook = group(
        "hook",
        "Claude Code's hooks: recall at a session's start and on each prompt, capture its transcript "
        "(docs/hooks.md); each reads the hook's JSON on stdin and never fails the session",
    )
    for name, help in HOOK_HELP.items():
        command(name, help, f"wontopos-mcp hook {name} --user alice", parent=hook, of="hook", json=False)

    engine = group("engine", "see or stop the engine every stdio session on this machine shares")
    command("status", "list the running shared engines: database, pid, version, clients",
            "wontopos-mcp engine status", parent=engine, store=None, json=False)  # fmt: skip
    command("stop", "stop every shared engine (the next session starts a new one)",
            "wontopos-mcp engine stop", parent=engine, store=None, json=False)  # fmt: skip
    engine.add_parser("serve")  # what a relay spawns; its settings come in the environment (cli.engines)


def run(args: dict[str, Any], settings: Settings, *, service: Service | None = None) -> int:
    """Run one command; a refusal is one line on stderr and exit code 1.

    ``service`` (tests) replaces the one the settings would give; it is left open. Else a
    command of ``SERVED`` asks the shared engine serving these settings (``client``; one
    being started is waited for). With none, the command runs in this process, as fast as
    it ever did, and one that embeds (``EMBEDS``) then starts the engine in the background:
    it loads the model for the next command and for the agents' sessions. A command no
    engine serves opens the database here, before it runs: a database LanceDB cannot
    open, and for a command that embeds a database built with another model, are one line
    and exit code 2, as for the server (and no engine is started).
    """
    name = args["command"] if args.get("action") is None else f"{args['command']} {args['action']}"
    own = service is None
    later = False
    if service is None and name in SERVED:
        from .client import engine_for

        service = engine_for(settings, start=False)
        later = service is None and name in EMBEDS
    code = _run_with(name, args, settings, service, own=own)
    if later and code != EXIT_BAD_SETTING:
        from .client import start_engine_later

        start_engine_later(settings)
    return code


def _run_with(name: str, args: dict[str, Any], settings: Settings, service: Service | None, *, own: bool) -> int:
    """:func:`run` with its service: the engine's client, or ``None`` for this process's own."""
    from wontopos_mcp.errors import ModelMismatch

    if service is None:
        from wontopos_mcp.engine.service import MemoryService

        service = MemoryService.open(settings, model_wait=MODEL_WAIT)
    try:
        if own:
            service.open_or_refuse()
            if name in EMBEDS:
                service.check_model(settings.embed_model)
        return _HANDLERS[name](service, {**args, "settings": settings}, sys.stdout) or 0
    except (ConfigError, ModelMismatch) as exc:
        _say(str(exc))
        return EXIT_BAD_SETTING
    except WontoposError as exc:
        print(
            f"wontopos-mcp: {speak(exc, 'cli').message}{_where(exc, args)} ({exc.status} {exc.type})", file=sys.stderr
        )
        return EXIT_REFUSED
    except OSError as exc:
        print(f"wontopos-mcp: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_REFUSED
    finally:
        if own:
            service.close()


def _where(exc: WontoposError, args: dict[str, Any]) -> str:
    """For a memory or speaker not found: the store the command looked in, and how to name
    another (a store that does not exist says so itself, with how to create it)."""
    if exc.status != 404 or exc.field == "user_id" or "user_id" not in args:
        return ""
    return f", {args['user_id'] or DEFAULT_STORE!r}; name another store with --user NAME"


def many(n: int, one: str, more: str) -> str:
    """``1 memory``, ``2 memories``."""
    return f"{n} {one if n == 1 else more}"


def _emit(out: TextIO, args: dict[str, Any], answer: Any, text: str) -> None:
    out.write((json.dumps(answer, ensure_ascii=False, indent=2) if args.get("json") else text) + "\n")


def _say(message: str) -> None:
    print(f"wontopos-mcp: {message}", file=sys.stderr)


# -- info and stores ---------------------------------------------------------------------------


def _info(service: Service, args: dict[str, Any], out: TextIO) -> None:
    from .info import info, info_text

    answer = info(service, args["settings"])
    _emit(out, args, answer, info_text(answer))


def _stores_list(service: Service, args: dict[str, Any], out: TextIO) -> None:
    answer = service.stores_list()
    _emit(out, args, answer, "\n".join(f"{s['user_id']}\tsince {s['created_at']}" for s in answer["stores"]))


def _stores_create(service: Service, args: dict[str, Any], out: TextIO) -> None:
    name, flag = args["name"], args["user_id"]
    if name is not None and flag is not None and name != flag:
        raise InvalidRequestError(f"two store names, {name!r} and --user {flag!r}: give the name once", field="user_id")
    if name is None and flag is None:
        raise InvalidRequestError("name the store to create: wontopos-mcp stores create NAME", field="user_id")
    answer = service.store_create(name or flag)
    _emit(out, args, answer, f"{answer['user_id']}: {answer['status']}")


def _stores_delete(service: Service, args: dict[str, Any], out: TextIO) -> int:
    name = args["name"]
    memories = sum(1 for _ in _memories(service, name))  # also the 404 of a store that does not exist
    speakers = service.speakers_list(user_id=name)["count"]
    what = f"{many(memories, 'memory', 'memories')} and {many(speakers, 'speaker', 'speakers')}"
    question = (
        f"empty the default store, forgetting its {what}?"
        if name.lower() == DEFAULT_STORE
        else f"delete store {name!r} with its {what}?"
    )
    if not args["yes"] and not _confirmed(question):
        _say("nothing deleted")
        return EXIT_REFUSED
    answer = service.store_delete(name)
    _emit(out, args, answer, f"{answer['user_id']}: deleted ({what})")
    return 0


def _confirmed(question: str) -> bool:
    """Ask on stderr, read the answer from stdin: only ``y`` or ``yes`` is a yes; no
    answer (end of input) is a no."""
    print(f"wontopos-mcp: {question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    if not sys.stdin.isatty():
        print(file=sys.stderr)  # a piped answer is not echoed: end the question's line
    return answer.strip().lower() in ("y", "yes")


# -- speakers --------------------------------------------------------------------------------


def _speakers_list(service: Service, args: dict[str, Any], out: TextIO) -> None:
    answer = service.speakers_list(user_id=args["user_id"])
    lines = [f"{s['speaker']}\t{many(s['memories'], 'memory', 'memories')}\tsince {s['created_at']}"
             for s in answer["speakers"]]  # fmt: skip
    lines.append(f"{answer['count']} of {answer['limit']} speakers registered in {answer['user_id']!r}")
    _emit(out, args, answer, "\n".join(lines))


def _speakers_add(service: Service, args: dict[str, Any], out: TextIO) -> None:
    answer = service.speaker_register(args["speaker"], user_id=args["user_id"])
    alike = f"; looks like {', '.join(answer['similar_to'])} (another person)" if "similar_to" in answer else ""
    _emit(out, args, answer, f"{answer['speaker']}: {answer['status']} ({answer['count']} of {answer['limit']}){alike}")


def _speakers_remove(service: Service, args: dict[str, Any], out: TextIO) -> None:
    answer = service.speaker_remove(args["speaker"], user_id=args["user_id"])
    untagged = many(answer["memories_untagged"], "memory", "memories")
    _emit(out, args, answer, f"{answer['speaker']}: removed; {untagged} untagged")


def _speakers_rename(service: Service, args: dict[str, Any], out: TextIO) -> None:
    answer = service.speaker_rename(args["speaker"], args["new_name"], user_id=args["user_id"])
    retagged = many(answer["memories_retagged"], "memory", "memories")
    _emit(out, args, answer, f"{answer['previous']} is now {answer['speaker']}; {retagged} retagged")


def _speakers_merge(service: Service, args: dict[str, Any], out: TextIO) -> int:
    name, into, user_id = args["speaker"], args["into"], args["user_id"]
    counted = service.by_speaker(name, user_id=user_id)  # also the 404 of a stranger
    records = counted["records_to_delete"]
    moving = f"{many(counted['memories_to_delete'], 'memory', 'memories')} ({many(records, 'record', 'records')})"
    question = f"merge {name!r} into {into!r}: {moving} move, {name!r} is unregistered?"
    if not args["yes"] and not _confirmed(question):
        _say("nothing merged")
        return EXIT_REFUSED
    answer = service.speaker_merge(name, into, confirm_records=records, user_id=user_id)
    moved = many(answer["memories_retagged"], "memory", "memories")
    _emit(out, args, answer, f"{answer['merged']} merged into {answer['speaker']}; {moved} retagged")
    return 0


# -- memories --------------------------------------------------------------------------------


def _memory_line(m: MemoryRecord) -> str:
    said = f"[{m['speaker']}] " if "speaker" in m else ""
    return f"{m['id']}  {m['created_at']}  {said}{m['content']}{'  (superseded)' if m['is_superseded'] else ''}"


def _memories_list(service: Service, args: dict[str, Any], out: TextIO) -> None:
    user_id, speaker = args["user_id"], args["speaker"]
    answer = service.memory_list(limit=args["limit"], cursor=args["cursor"], user_id=user_id, speaker=speaker)
    more = answer["next_cursor"]
    if more is not None:
        _say(f"more: {render(Fix.of('memory_list', user_id=user_id, speaker=speaker, cursor=more), 'cli')}")
    _emit(out, args, answer, "\n".join(map(_memory_line, answer["memories"])) or "(no memories)")


def _memories_get(service: Service, args: dict[str, Any], out: TextIO) -> None:
    answer = service.memory_get(args["memory_id"], user_id=args["user_id"])
    memory = answer["memory"]
    _emit(out, args, answer, "\n".join(f"{key}: {value}" for key, value in memory.items()))


def _memories_forget(service: Service, args: dict[str, Any], out: TextIO) -> None:
    answer = service.memory_forget(memory_id=args["memory_id"], user_id=args["user_id"])
    _emit(out, args, answer, f"forgot memory {args['memory_id']} in {answer['user_id']!r}")


def _add(service: Service, args: dict[str, Any], out: TextIO) -> None:
    # From stdin, the one line break that ends what `echo` or a file gives is not the memory's.
    content = _one_line_break_off(sys.stdin.read()) if args["content"] == "-" else args["content"]
    service.start()
    answer = service.memory_add(
        content, speaker=args["speaker"], category=args["category"], event_date=args["event_date"],
        conversation_id=args["conversation_id"], user_id=args["user_id"],
    )  # fmt: skip
    if answer["status"] == "duplicate":
        text = f"not stored: it restates memory {answer['duplicate_of']}"
    else:
        who = f" ({answer['speaker']})" if "speaker" in answer else ""
        text = f"stored memory {answer['id']}{who} in {answer['user_id']!r}"
    _emit(out, args, answer, text)


def _one_line_break_off(text: str) -> str:
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


def _search(service: Service, args: dict[str, Any], out: TextIO) -> None:
    service.start()
    answer = service.memory_search(args["query"], speaker=args["speaker"], limit=args["limit"], user_id=args["user_id"])
    lines = [
        f"{m['similarity']:.3f}  {'[' + m['speaker'] + '] ' if 'speaker' in m else ''}{m['content']}"
        for m in answer["memories"]
    ]
    _emit(out, args, answer, "\n".join(lines) if lines else "(no memories)")


def _memories(service: Service, user_id: str | None, speaker: str | None = None) -> Iterator[MemoryRecord]:
    cursor = None
    while True:
        page = service.memory_list(limit=_PAGE, cursor=cursor, user_id=user_id, speaker=speaker)
        yield from page["memories"]
        cursor = page["next_cursor"]
        if cursor is None:
            return


# -- export, import, stats ---------------------------------------------------------------------


def _export(service: Service, args: dict[str, Any], out: TextIO) -> None:
    if args["out"] is None:
        _write_jsonl(service, args["user_id"], out, args["speaker"])
        return
    with open(args["out"], "w", encoding="utf-8") as file:
        count = _write_jsonl(service, args["user_id"], file, args["speaker"])
    _say(f"exported {many(count, 'memory', 'memories')} to {args['out']}")


def _write_jsonl(service: Service, user_id: str | None, out: TextIO, speaker: str | None = None) -> int:
    count = 0
    for memory in _memories(service, user_id, speaker):
        out.write(json.dumps(memory, ensure_ascii=False) + "\n")
        count += 1
    return count


def _import(service: Service, args: dict[str, Any], out: TextIO) -> int:
    """Import each PATH: a conversation export (``conversations``), or this product's JSON
    Lines (``--format jsonl``, detected, or ``-``); the worst exit code of the files."""
    worst = 0
    for path in args["files"]:
        if path == "-" or args["format"] == JSONL or (args["format"] == "auto" and is_jsonl_export(path)):
            code = _import_lines(service, path, args, out)
        else:
            code = import_conversation_file(service, path, args, out)
        worst = max(worst, code)
    return worst


def _import_lines(service: Service, path: str, args: dict[str, Any], out: TextIO) -> int:
    """Import a JSON Lines export in batches; exit code 1 when a line was skipped."""
    summary = import_file(service, path, args["user_id"], batch=args["batch"])
    skipped = summary["skipped"]
    for skip in skipped:
        _say(f"import: skipped line {skip['line']}: {skip['reason']}")
    text = (
        f"imported {many(summary['stored'], 'memory', 'memories')} "
        f"({summary['already_there']} already there, {many(summary['duplicates'], 'duplicate', 'duplicates')}, "
        f"{many(len(skipped), 'line', 'lines')} skipped)"
    )
    _emit(out, args, summary, text)
    return EXIT_REFUSED if skipped else 0


def _stats(service: Service, args: dict[str, Any], out: TextIO) -> None:
    """The SDK's ``stats`` and ``revisions`` counts (memories, never records), and who said
    how many: counts only, whatever the store's size."""
    stats = service.stats(user_id=args["user_id"])
    revisions = service.revisions(user_id=args["user_id"])
    speakers = service.speakers_list(user_id=args["user_id"])
    said = {s["speaker"]: s["memories"] for s in speakers["speakers"]}
    said["me"] = service.by_speaker("me", limit=1, user_id=args["user_id"])["memories_to_delete"]
    said["(untagged)"] = stats["total_memories"] - sum(said.values())
    answer = {
        "user_id": stats["user_id"],
        "memories": stats["total_memories"],
        "current": revisions["unrevised"],
        "superseded": revisions["revised"],
        "short_term_turns": stats["short_term_turns"],
        "speakers": speakers["count"],
        "speaker_limit": speakers["limit"],
        "by_speaker": {name: n for name, n in sorted(said.items()) if n},
    }
    lines = [
        (
            f"store {stats['user_id']!r}: {many(stats['total_memories'], 'memory', 'memories')} "
            f"({revisions['unrevised']} current, {revisions['revised']} superseded)"
        ),
        f"{speakers['count']} of {speakers['limit']} speakers registered",
        *(f"  {name}\t{n}" for name, n in sorted(said.items()) if n),
    ]
    _emit(out, args, answer, "\n".join(lines))


# -- reindex -------------------------------------------------------------------------------------


def _reindex(service: Service, args: dict[str, Any], out: TextIO) -> int:
    """Re-embed the database for ``--embed-model`` (``MemoryService.reindex``): progress and
    rate on stderr, one summary line on stdout. A model that cannot load is one line and
    exit code 2 (a bad setting), with nothing changed."""
    from wontopos_mcp.errors import UnavailableError

    said = [-1.0]  # when the last progress line was printed (at most one a second)

    def progress(done: int, total: int, seconds: float) -> None:
        if seconds - said[0] < 1.0 and done < total:
            return
        said[0] = seconds
        rate = done / seconds if seconds > 0 else 0.0
        _say(f"reindex: {done}/{total} chunks embedded ({rate:.1f} chunks/s)")

    assert not isinstance(service, EngineClient), "reindex runs in its own process"
    settings = args["settings"]
    _say(f"reindex: loading embedding model {settings.embed_model!r}")
    try:
        answer = service.reindex(settings.embed_model, progress=progress)
    except UnavailableError as exc:
        if "model" not in exc.details:
            raise  # not the model (a lease lost on object storage): a refusal, exit code 1
        _say(exc.message)
        return EXIT_BAD_SETTING
    if answer["status"] == "unchanged":
        text = f"nothing to do: the database is already built with {answer['model']!r} ({answer['dim']} dimensions)"
    else:
        seconds = answer["seconds"]
        rate = answer["memories"] / seconds if seconds > 0 else 0.0
        was = f" (was {answer['previous']!r})" if answer["previous"] else ""
        text = (
            f"reindexed {many(answer['memories'], 'memory', 'memories')} ({many(answer['chunks'], 'chunk', 'chunks')}) "
            f"for {answer['model']!r}{was} in {seconds:.1f} s ({rate:.1f} memories/s); start the server with "
            f"--embed-model {answer['model']}"
        )
    _emit(out, args, answer, text)
    return 0


_HANDLERS: dict[str, Callable[[Service, dict[str, Any], TextIO], int | None]] = {
    "info": _info,
    "stores list": _stores_list,
    "stores create": _stores_create,
    "stores delete": _stores_delete,
    "speakers list": _speakers_list,
    "speakers add": _speakers_add,
    "speakers remove": _speakers_remove,
    "speakers rename": _speakers_rename,
    "speakers merge": _speakers_merge,
    "memories list": _memories_list,
    "memories get": _memories_get,
    "memories forget": _memories_forget,
    "add": _add,
    "search": _search,
    "export": _export,
    "import": _import,
    "stats": _stats,
    "reindex": _reindex,
}

__all__ = ["EXAMPLES", "add_commands", "many", "ranged", "run"]
