"""The documentation against the code it describes: the README stays a newcomer's page,
its links lead somewhere, and the reference pages cannot drift from the parser, the tool
listing and the settings.

``scripts/generate_docs.py`` writes the generated sections of ``docs/cli.md`` and
``docs/tools.md``; here they are generated again and compared, so a command, a flag or a
tool added without its line fails, naming the command that fixes it.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import fields
from pathlib import Path

from wontopos_mcp.cli.main import build_parser
from wontopos_mcp.config import Settings

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")

_spec = importlib.util.spec_from_file_location("generate_docs", ROOT / "scripts" / "generate_docs.py")
assert _spec is not None
assert _spec.loader is not None
generate_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate_docs)


def test_the_readme_is_a_page_a_newcomer_reads_through() -> None:
    assert len(README.splitlines()) <= 250


def test_every_link_of_the_readme_and_the_pages_leads_to_a_page_that_exists() -> None:
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if not (page.parent / target).resolve().exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_generated_sections_are_what_the_code_gives_now() -> None:
    assert generate_docs.stale() == [], "run: python scripts/generate_docs.py"


def test_a_flag_missing_from_the_cli_page_would_be_caught() -> None:
    """The comparison above is not vacuous: the CLI page holds every command's flags."""
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    section = page[page.index("<!-- generated: cli-help -->") :]
    for flag in ("--user", "--speaker", "--dry-run", "--register", "--json", "--embed-model"):
        assert flag in section, flag
    assert generate_docs.rendered(page, "cli-help", "nothing") != page


def test_the_configuration_page_names_every_setting_the_code_reads() -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    variables = {f"WONTOPOS_{f.name.upper()}" for f in fields(Settings)}
    assert "WONTOPOS_DB" in variables
    assert sorted(v for v in variables if f"`{v}`" not in page) == []
    server_flags = {
        option
        for action in build_parser([])._actions
        for option in action.option_strings
        if option.startswith("--") and option not in ("--help", "--version")
    }
    assert "--db" in server_flags
    assert sorted(f for f in server_flags if f"`{f}`" not in page) == []


def test_the_readmes_hooks_are_claude_codes_events_and_real_hook_commands() -> None:
    """The README's settings.json block: valid JSON, Claude Code's five events, and each
    command one the parser knows (``wontopos-mcp hook NAME``)."""
    (block,) = [b for b in re.findall(r"```json\n(.*?)```", README, flags=re.S) if '"hooks"' in b]
    events = json.loads(block)["hooks"]
    assert set(events) == {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"}
    for entries in events.values():
        for hook in (h for entry in entries for h in entry["hooks"]):
            words = hook["command"].split()
            assert words[:2] == ["wontopos-mcp", "hook"], words
            assert build_parser(words[1:]).parse_args(words[1:]).command == "hook"
