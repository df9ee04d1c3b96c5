"""A server process caps glibc's malloc arenas before its threads start (issue 53: each
search left memory resident in more arenas); a user's own ``MALLOC_ARENA_MAX`` wins."""

from __future__ import annotations

import subprocess
import sys

import pytest

from wontopos_mcp.engine.bootstrap import cap_malloc_arenas

GLIBC = sys.platform.startswith("linux") and "glibc" in " ".join(__import__("platform").libc_ver())


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt only")
def test_the_cap_is_set_unless_the_user_set_malloc_arena_max(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert cap_malloc_arenas() is True
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert cap_malloc_arenas() is False


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt only")
def test_the_program_caps_the_arenas_before_it_runs_a_command():
    """The program's entry point calls it: ``--version`` runs through ``launch.main``."""
    code = (
        "import wontopos_mcp.engine.bootstrap as b, wontopos_mcp.launch as launch\n"
        "calls = []\n"
        "b.cap_malloc_arenas = lambda *a: calls.append(a) or True\n"
        "try:\n    launch.main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(len(calls))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip().splitlines()[-1] == "1"
