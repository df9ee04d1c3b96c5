"""Write the reference sections of ``docs/`` that the code itself knows, so they cannot drift.

- ``docs/cli.md``: every command's ``--help``, as the parser prints it.
- ``docs/tools.md``: every MCP tool as a host shows it to the model (name, title,
  description, parameters), from the live ``tools/list`` of the server.

Each generated section sits between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->``;
the prose around it is written by hand. ``tests/test_docs.py`` regenerates each section and
fails when the page differs, so a command, a flag or a tool added without its line fails CI.

    python scripts/generate_docs.py           # rewrite the sections
    python scripts/generate_docs.py --check   # exit 1 and name the stale pages
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
HELP_WIDTH = "100"  # argparse wraps help to $COLUMNS; fixed, so the page is the same everywhere


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse keeps its subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _help(parser: argparse.ArgumentParser) -> str:
    text = parser.format_help()
    # The line naming the database a run would use depends on who runs it: not reference.
    return "\n".join(line for line in text.splitlines() if not line.startswith("database: ")).rstrip()


@contextlib.contextmanager
def _fixed_width() -> Iterator[None]:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def cli_reference() -> str:
    """``wontopos-mcp --help``, then each command's and each action's, as sections."""
    from wontopos_mcp.cli.main import build_parser

    with _fixed_width():
        parser = build_parser([])
        parts = [f"### `wontopos-mcp`\n\n```text\n{_help(parser)}\n```"]
        for name, command in _subparsers(parser):
            parts.append(f"### `wontopos-mcp {name}`\n\n```text\n{_help(command)}\n```")
            for action_name, action in _subparsers(command):
                if action.prog.endswith("engine serve"):
                    continue  # what a relay spawns, not a command for people
                parts.append(f"### `wontopos-mcp {name} {action_name}`\n\n```text\n{_help(action)}\n```")
    return "\n\n".join(parts)


def tools_reference() -> str:
    """Each tool as ``tools/list`` answers it to a host (the listing the server serves, which
    a test keeps equal to what the tools build), the default speaker limit filled in."""
    from wontopos_mcp.mcp.listing import listing

    parts = []
    for listed in listing(speaker_limit="50"):
        tool = listed.model_dump(mode="json", by_alias=True, exclude_none=True)
        schema = tool.get("inputSchema") or {}
        required = set(schema.get("required", []))
        rows = []
        for name, spec in schema.get("properties", {}).items():
            kind = spec.get("type") or " | ".join(str(s.get("type")) for s in spec.get("anyOf", []) if s.get("type"))
            rows.append(f"| `{name}` | {kind or 'any'} | {'yes' if name in required else ''} | "
                        f"{(spec.get('description') or '').replace('|', '/')} |")  # fmt: skip
        table = "\n".join(["| parameter | type | required | meaning |", "|---|---|---|---|", *rows]) if rows else ""
        shown = len(json.dumps(
            {key: tool.get(key) for key in ("name", "title", "description", "inputSchema")},
            separators=(",", ":"), ensure_ascii=False,
        ))  # fmt: skip
        parts.append(
            f"### `{tool['name']}`: {tool.get('title', '')}\n\n{tool.get('description', '')}\n\n{table}\n\n"
            f"*What a host shows the model of it: {shown:,} characters.*".replace("\n\n\n\n", "\n\n")
        )
    return "\n\n".join(parts)


SECTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "cli-help": ("cli.md", cli_reference),
    "tools-listing": ("tools.md", tools_reference),
}


def _section(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- generated: {name} -->\n)(.*?)(<!-- end: {name} -->)", re.S)


def rendered(page: str, name: str, body: str) -> str:
    """``page`` with section ``name`` holding ``body`` (the page must have its markers)."""
    pattern = _section(name)
    if not pattern.search(page):
        raise SystemExit(f"{name}: no '<!-- generated: {name} -->' ... '<!-- end: {name} -->' markers in the page")
    return pattern.sub(lambda m: m[1] + body.rstrip("\n") + "\n" + m[3], page, count=1)


def stale() -> list[str]:
    """The pages whose generated sections differ from what the code gives now."""
    out = []
    for name, (page, make) in SECTIONS.items():
        text = (DOCS / page).read_text(encoding="utf-8")
        if rendered(text, name, make()) != text:
            out.append(f"docs/{page} ({name})")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 when a page is stale, changing nothing")
    if ap.parse_args().check:
        late = stale()
        for page in late:
            print(f"stale: {page}; run python scripts/generate_docs.py", file=sys.stderr)
        return 1 if late else 0
    for name, (page, make) in SECTIONS.items():
        path = DOCS / page
        path.write_text(rendered(path.read_text(encoding="utf-8"), name, make()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
