"""Which reader a file is for: ``--format`` names one, ``auto`` asks each reader's ``sniff``.

Detection reads the content, never the file's name: a folder or zip by its entries (Slack),
a file by its first ``SNIFF_BYTES``. The order goes from the most specific signature to the
least: JSON exports by their own keys, then the line formats with a fixed header or timing
line, then WhatsApp's dated lines, and last plain ``Name: text`` transcripts, which nearly
any chat text would match. Readers are imported when asked for, so ``import`` of one format
never loads the others.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from wontopos_mcp.imports.messages import BadExport
from wontopos_mcp.imports.sources import Source, head

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
# This product's own export (``export``): not a conversation, read by the CLI's line importer.
JSONL = "jsonl"
FORMATS = ("auto", *READERS, JSONL)


def reader(name: str) -> ModuleType:
    """The reader module of a format (``READERS``)."""
    return importlib.import_module(READERS[name])


def looks_like_jsonl(first: bytes) -> bool:
    """A line of this product's ``export`` (or one written by hand for its ``import``): a JSON
    object with a ``content``. Asked after every JSON reader has declined the file."""
    line = first.removeprefix(b"\xef\xbb\xbf").lstrip().split(b"\n", 1)[0]
    return line.startswith(b"{") and b'"content"' in line


def detect(source: Source) -> str:
    """The format of ``source``, decided from its content; ``BadExport`` naming what was tried."""
    if source.entries():
        slack = reader("slack")
        if slack.sniff_source(source):
            return "slack"
        raise BadExport("the archive", "not a Slack workspace export (no users.json and channels.json); tried: slack")
    first = head(source)
    if not first.strip():
        raise BadExport("byte 0", "the file is empty")
    for name in READERS:
        if name != "slack" and reader(name).sniff(first):
            return name
    if looks_like_jsonl(first):
        return JSONL
    raise BadExport("the start of the file", f"no format recognises it; tried {', '.join([*READERS, JSONL])}")
