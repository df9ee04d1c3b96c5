"""``wontopos-mcp import`` of conversation exports: chat apps, assistant histories, transcripts.

The command reads each PATH with the reader its ``--format`` names (``auto``: decided from
the content), resolves every name to a speaker before anything is stored, and stores the
messages through the engine (``MemoryService.import_conversations``). This product's own
JSON Lines export (``--format jsonl``, or detected) goes to the line importer
(:mod:`importing`), which keeps categories and supersede chains.

Refusals of an import (a file invalid for its format, unresolved names, the speaker limit)
are one line on stderr naming the file, the place and the reason, and exit code 2; the
unresolved names are listed with their message counts and this command's three ways out
(``--register``, ``--as 'Name=Bob'``, ``--skip 'Name'``). On a terminal a progress bar
(``tqdm``: messages, rate, time left); otherwise a line on stderr every ``QUIET_EVERY``
seconds. The summary goes to stdout (``--json``: as the engine answers it).

Local times (WhatsApp, transcripts) are read in ``--tz``, by default the machine's zone as
its ``/etc/localtime`` names it (UTC when it names none).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from wontopos_mcp.config import machine_zone
from wontopos_mcp.errors import InvalidRequestError, WontoposError
from wontopos_mcp.rules.answers import ImportSummaryAnswer
from wontopos_mcp.rules.import_options import FORMAT_NAMES, JSONL, import_options

from .client import EngineClient
from .exits import EXIT_BAD_SETTING

if TYPE_CHECKING:
    from collections.abc import Callable

    from tqdm import tqdm

    from wontopos_mcp.engine.service import MemoryService

    from .client import Service

QUIET_EVERY = 10.0  # seconds between progress lines when stderr is not a terminal
_RESOLVES = {
    "registered": "registered speaker {speaker}",
    "mapped": "mapped to {speaker}",
    "register": "will be registered as {speaker}",
    "me": "me (the assistant)",
    "untagged": "untagged",
    "unresolved": "UNRESOLVED",
}


def add_import_arguments(parser: argparse.ArgumentParser) -> None:
    """The conversation flags of ``import`` (beside the line importer's ``--batch``)."""
    parser.add_argument("--format", choices=FORMAT_NAMES, default="auto", help="the export's format (default: auto)")
    parser.add_argument(
        "--as", dest="as_", action="append", metavar="'NAME=SPEAKER'", default=[],
        help="store NAME's messages under SPEAKER (=me: the assistant, =-: untagged); repeatable",
    )  # fmt: skip
    parser.add_argument("--skip", action="append", metavar="NAME", default=[], help="leave NAME's messages out")
    parser.add_argument("--register", action="store_true", help="register every name not registered yet")
    parser.add_argument("--user-name", metavar="NAME", help="assistant histories: the speaker of your own messages")
    parser.add_argument("--tz", metavar="ZONE", help="the IANA zone of local times (default: the machine's)")
    parser.add_argument("--start", metavar="TIME", help="transcripts: when the recording began (RFC 3339)")
    parser.add_argument("--dry-run", action="store_true", help="read and resolve, store nothing; print who is who")


def import_path(
    service: MemoryService,
    path: str,
    options: dict[str, Any],
    user_id: str | None,
    progress: Callable[[int, int, Counter[str]], None] | None = None,
) -> ImportSummaryAnswer:
    """The export at ``path`` imported by ``service``, with ``options`` as ``import_options``
    takes them: what the engine does for a command or a hook that sent it the path, and a
    hook in its own process."""
    from wontopos_mcp.imports.sources import open_source

    return service.import_conversations(open_source(path), import_options(**options), user_id, progress=progress)


def is_jsonl_export(path: str) -> bool:
    """Whether ``path`` is this product's own export, by its content (``formats.detect``);
    a path that cannot be read is not (the conversation import says why)."""
    from wontopos_mcp.imports.formats import detect
    from wontopos_mcp.imports.messages import BadExport
    from wontopos_mcp.imports.sources import open_source

    try:
        return detect(open_source(path))[0] == JSONL
    except (BadExport, OSError):
        return False


def import_conversation_file(service: Service, path: str, args: dict[str, Any], out: TextIO) -> int:
    """Import one conversation export; 0 when done, 2 when refused (one line on stderr)."""
    from wontopos_mcp.imports.messages import BadExport
    from wontopos_mcp.imports.sources import open_source

    given = {"format": args["format"], "as_": args["as_"], "skip": args["skip"], "register": args["register"],
             "user_name": args["user_name"], "tz": args["tz"], "start": args["start"], "dry_run": args["dry_run"],
             "local_zone": machine_zone()}  # fmt: skip
    try:
        options = import_options(**given)
        source = open_source(path)
    except InvalidRequestError as exc:
        return _refused(f"{path}: --{str(exc.field).replace('_', '-')}: {exc.message}")
    except BadExport as exc:
        return _refused(f"{path}: {exc.place}: {exc.reason}; nothing was imported")
    except OSError as exc:
        return _refused(f"{path}: {exc.strerror or exc}")
    with _Progress(Path(path).name) as progress:
        try:
            if isinstance(service, EngineClient):  # the engine reads the file: the same user, the same machine
                summary = service.import_export(os.path.abspath(path), given, args["user_id"], progress=progress.update)
            else:
                summary = service.import_conversations(source, options, args["user_id"], progress=progress.update)
        except InvalidRequestError as exc:
            progress.close()
            line = _refusal_line(exc)
            return _refused(path + line[len(source.name) :] if line.startswith(source.name + ": ") else line)
    _emit_summary(out, args, summary)
    return 0


def _refused(line: str) -> int:
    print(f"wontopos-mcp: import: {line}", file=sys.stderr)
    return EXIT_BAD_SETTING


def _refusal_line(exc: WontoposError) -> str:
    """One line for a refused import, naming this command's own flags."""
    unresolved = exc.details.get("unresolved")
    if not unresolved:
        return exc.message.replace("(as 'Name=Bob'", "(--as 'Name=Bob'")
    listed = ", ".join(f"{e['name']!r} ({e['messages']} messages)" for e in unresolved[:10])
    more = f" and {len(unresolved) - 10} more" if len(unresolved) > 10 else ""
    first = str(unresolved[0]["name"])
    return (
        f"{exc.message.split(':', 1)[0]}: not registered speakers of this store: {listed}{more}; nothing was "
        f"imported. Either --register them, map each with --as {shlex.quote(first + '=Name')} "
        f"(=me for the assistant, =- for untagged), or leave one out with --skip {shlex.quote(first)}"
    )


def _emit_summary(out: TextIO, args: dict[str, Any], summary: ImportSummaryAnswer) -> None:
    import json

    if args.get("json"):
        out.write(json.dumps(summary, ensure_ascii=False, indent=2) + "\n")
        return
    lines = []
    for conversation in summary["conversations"]:
        span = f", {conversation['first']} .. {conversation['last']}" if "first" in conversation else ""
        title = f" ({conversation['title']})" if "title" in conversation else ""
        lines.append(f"{conversation['conversation_id']}{title}: {conversation['messages']} messages{span}")
        for person in conversation["people"]:
            how = _RESOLVES[person["resolves"]].format(speaker=person.get("speaker", ""))
            reason = f": {person['reason']}" if "reason" in person else ""
            lines.append(f"  {person['name']}\t{person['messages']}\t{how}{reason}")
        if conversation["skipped"]:
            lines.append("  skipped: " + ", ".join(f"{n} {kind}" for kind, n in conversation["skipped"].items()))
    head = f"{summary['file']} ({summary['format']}, times in {summary['tz']}) into {summary['user_id']!r}"
    if summary["dry_run"]:
        lines.insert(0, f"dry run: {head}: {summary['messages']} messages would be imported; nothing stored")
    else:
        skipped = sum(summary["skipped"].values())
        lines.insert(0, f"{head}: stored {summary['stored']}, already imported {summary['already_imported']}, "
                        f"duplicates {summary['duplicates']}, skipped {skipped}")  # fmt: skip
        if summary.get("registered"):
            lines.append("registered: " + ", ".join(summary["registered"]))
        if summary["speakers"]:
            lines.append("stored per speaker: " + ", ".join(f"{s} {n}" for s, n in summary["speakers"].items()))
    out.write("\n".join(lines) + "\n")


class _Progress:
    """A bar on a terminal, a line every ``QUIET_EVERY`` seconds otherwise; stderr only."""

    def __init__(self, name: str) -> None:
        self.name, self.last = name, time.monotonic()
        self.bar: tqdm[Any] | None = None
        self.tty = sys.stderr.isatty()

    def __enter__(self) -> _Progress:
        return self

    def update(self, done: int, total: int, counts: Counter[str]) -> None:
        if self.tty:
            if self.bar is None:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit=" messages", desc=f"wontopos-mcp: import {self.name}",
                                file=sys.stderr, dynamic_ncols=True)  # fmt: skip
            self.bar.set_postfix({"stored": counts["stored"], "already": counts["exists"]}, refresh=False)
            self.bar.update(done - self.bar.n)
        elif time.monotonic() - self.last >= QUIET_EVERY or done == total:
            self.last = time.monotonic()
            print(f"wontopos-mcp: import {self.name}: {done} of {total} messages, "
                  f"{counts['stored']} stored", file=sys.stderr)  # fmt: skip

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __exit__(self, *exc: object) -> None:
        self.close()
