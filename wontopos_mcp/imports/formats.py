"""Which reader a file is for, and what it reads: ``--format`` names one, ``auto`` asks each reader's ``sniff``.

A file is detected by its content, never its name: its first ``SNIFF_BYTES``. The order
goes from the most specific signature to the least: JSON exports by their own keys, then
the line formats with a fixed header or timing line, then WhatsApp's dated lines, and last
plain ``Name: text`` transcripts, which nearly any chat text would match.

A folder or zip is a Slack workspace when it has ``users.json`` and ``channels.json``
(read whole by the ``slack`` reader). Otherwise one entry of it is the export, the way the
apps hand theirs out (ChatGPT's and Claude's zip hold ``conversations.json`` among other
files, WhatsApp's iOS zip ``_chat.txt`` and the media, Telegram's folder ``result.json``),
and that entry is read as a file of its own (``sources.EntrySource``). ``auto`` looks, in
this order, for: a ``conversations.json`` that sniffs as ChatGPT or Claude; a
``result.json`` (Telegram Desktop's fixed name); a ``.txt`` that sniffs as WhatsApp, then
one that sniffs as a transcript; a ``.vtt``, ``.srt`` or Claude Code ``.jsonl`` that
sniffs as such. An explicit ``--format`` looks only where its format keeps its export
(``ENTRIES``), sniffing only to choose among several. The first kind found must be one
entry: two WhatsApp chats in one zip are refused, naming both, rather than one chosen
at random. macOS's ``__MACOSX/`` and ``._`` shadow files are never entries.

Readers are imported when asked for, so ``import`` of one format never loads the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import PurePosixPath
from types import ModuleType

from wontopos_mcp.imports.messages import BadExport
from wontopos_mcp.imports.sources import EntrySource, Source, head
from wontopos_mcp.rules.import_options import JSONL

# --format value -> the module of its reader, in the order ``auto`` tries them.
READERS: dict[str, str] = {
    "slack": "wontopos_mcp.imports.slack",
    "chatgpt": "wontopos_mcp.imports.chatgpt",
    "claude": "wontopos_mcp.imports.claude",
    "telegram": "wontopos_mcp.imports.telegram",
    "discord": "wontopos_mcp.imports.discord",
    "claude-code": "wontopos_mcp.imports.claude_code",
    "vtt": "wontopos_mcp.imports.vtt",
    "srt": "wontopos_mcp.imports.srt",
    "whatsapp": "wontopos_mcp.imports.whatsapp",
    "transcript": "wontopos_mcp.imports.transcript",
}


def reader(name: str) -> ModuleType:
    """The reader module of a format (``READERS``)."""
    return importlib.import_module(READERS[name])


def looks_like_jsonl(first: bytes) -> bool:
    """A line of this product's ``export`` (or one written by hand for its ``import``): a JSON
    object with a ``content``. Asked after every JSON reader has declined the file."""
    line = first.removeprefix(b"\xef\xbb\xbf").lstrip().split(b"\n", 1)[0]
    return line.startswith(b"{") and b'"content"' in line


# Where a format's export sits in a folder or zip: an entry of that name, or of that
# extension. ``auto`` looks at all but ``discord`` (a ``.json`` could be anything), in this order.
ENTRIES: dict[str, str] = {
    "chatgpt": "conversations.json",
    "claude": "conversations.json",
    "telegram": "result.json",
    "whatsapp": ".txt",
    "transcript": ".txt",
    "vtt": ".vtt",
    "srt": ".srt",
    "claude-code": ".jsonl",
    "discord": ".json",
}
_AUTO = tuple(name for name in ENTRIES if name != "discord")
_BY_NAME_ONLY = {"telegram"}  # auto takes Telegram Desktop's result.json by its name
_LOOKED_FOR = (
    "Slack's users.json and channels.json, a ChatGPT or Claude conversations.json, Telegram's result.json, "
    "a WhatsApp chat or a transcript .txt, a .vtt, .srt or Claude Code .jsonl"
)


def detect(source: Source, fmt: str = "auto") -> tuple[str, Source]:
    """The format of ``source`` (``fmt`` when one is named) and the source its reader reads:
    ``source`` itself, or, for a folder or zip that is not a Slack workspace, the entry
    holding the export (see the module's docstring). ``BadExport`` naming what was tried."""
    if not source.entries():
        return (fmt if fmt != "auto" else _sniff_file(source)), source
    if fmt == "slack" or (fmt == "auto" and reader("slack").sniff_source(source)):
        return "slack", source
    if fmt != "auto" and fmt not in ENTRIES:
        return fmt, source  # this product's own export: the caller says what to do with it
    return _telling_entry(source, fmt)


def _sniff_file(source: Source) -> str:
    first = head(source)
    if not first.strip():
        raise BadExport("byte 0", "the file is empty")
    for name in READERS:
        if name != "slack" and reader(name).sniff(first):
            return name
    if looks_like_jsonl(first):
        return JSONL
    raise BadExport("the start of the file", f"no format recognises it; tried {', '.join([*READERS, JSONL])}")


def _telling_entry(archive: Source, fmt: str) -> tuple[str, Source]:
    files = [entry for entry in archive.entries() if not _shadow(entry)]
    heads: dict[str, bytes] = {}

    def sniffed(name: str, entries: list[str]) -> list[str]:
        for entry in entries:
            if entry not in heads:
                heads[entry] = head(EntrySource(archive, entry))
        return [entry for entry in entries if reader(name).sniff(heads[entry])]

    for name in _AUTO if fmt == "auto" else (fmt,):
        found = _matching(files, ENTRIES[name])
        if fmt == "auto" and name not in _BY_NAME_ONLY:
            found = sniffed(name, found)
        elif len(found) > 1:  # a named format sniffs only to choose
            found = sniffed(name, found) or found
        if found:
            return name, EntrySource(archive, _one(found, name))
    if fmt != "auto":
        raise BadExport("the archive", f"no {ENTRIES[fmt]} in it, where a {fmt} export is")
    raise BadExport("the archive", f"no conversation export in it; looked for {_LOOKED_FOR}")


def _shadow(entry: str) -> bool:
    """macOS's resource forks, which its zips carry beside every file: not files anyone exported."""
    return entry.startswith("__MACOSX/") or PurePosixPath(entry).name.startswith("._")


def _matching(files: Iterable[str], where: str) -> list[str]:
    """The entries of that file name, or (``where`` starting with a dot) that extension."""
    if where.startswith("."):
        return [e for e in files if PurePosixPath(e).suffix.lower() == where]
    return [e for e in files if PurePosixPath(e).name == where]


def _one(found: list[str], fmt: str) -> str:
    if len(found) > 1:
        names = ", ".join(found[:10]) + (f" and {len(found) - 10} more" if len(found) > 10 else "")
        reason = f"{len(found)} entries could be the {fmt} export ({names}): take out the one you mean and import it"
        raise BadExport("the archive", reason)
    return found[0]
