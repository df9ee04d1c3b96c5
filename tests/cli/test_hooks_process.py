"""Claude Code's hooks as Claude Code runs them: a process, the event's JSON on stdin, the
context on stdout, exit code 0 whatever happens.

One database for the module and no engine running at first: the first ``capture`` starts
it (and waits for its model), the later hooks ask it. The engine lives in the session's
runtime directory and leaves with the database directory at the end.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import engines_serving, server_env
from test_hooks import capture_events, prompt_event, session_start_event, transcript

pytestmark = pytest.mark.process

WAIT = 90.0
Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("hooks") / "db"
    yield path
    shutil.rmtree(path, ignore_errors=True)  # its engine leaves at once


@pytest.fixture(scope="module")
def hook(db: Path, model_cache: Path, embedder: Any) -> Run:
    """``hook(name, stdin, *flags)``: ``wontopos-mcp --db DB hook NAME *flags`` with
    ``stdin`` (the session's model converted first, so an engine only loads it)."""
    env = server_env(model_cache, WONTOPOS_ENGINE_IDLE="60")

    def run(name: str, stdin: Any, *flags: str, database: Path = db) -> subprocess.CompletedProcess[str]:
        text = stdin if isinstance(stdin, str) else json.dumps(stdin)
        command = [sys.executable, "-m", "wontopos_mcp", "--db", str(database), "hook", name, *flags]
        return subprocess.run(command, input=text, capture_output=True, text=True, env=env, timeout=WAIT)

    return run


def test_a_hook_with_stdin_that_is_not_json_says_one_line_and_exits_0(hook: Run) -> None:
    done = hook("prompt", "not the hook's JSON")

    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.startswith("wontopos-mcp: hook prompt: ")
    assert done.stderr.count("\n") == 1


def test_a_hook_command_line_that_cannot_be_parsed_exits_0(hook: Run) -> None:
    done = hook("prompt", prompt_event("hi"), "--no-such-flag")

    assert (done.returncode, done.stdout) == (0, "")
    assert "--no-such-flag" in done.stderr


def test_recall_from_a_database_that_does_not_exist_prints_nothing_and_starts_nothing(
    hook: Run, tmp_path: Path
) -> None:
    missing = tmp_path / "none"

    assert hook("prompt", prompt_event("anything?"), database=missing).returncode == 0
    done = hook("session-start", session_start_event(), database=missing)

    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not missing.exists()
    assert engines_serving(missing) == []


def test_capture_starts_the_engine_then_every_hook_asks_it(hook: Run, db: Path, tmp_path: Path) -> None:
    stop = capture_events(transcript(tmp_path / "session.jsonl", range(2)))[0]
    assert engines_serving(db) == []

    captured = hook("capture", stop)

    assert (captured.returncode, captured.stdout, captured.stderr) == (0, "", "")
    assert len(engines_serving(db)) == 1
    recalled = hook("prompt", prompt_event("which module parses invoices of customer number 1?"))
    assert (recalled.returncode, recalled.stderr) == (0, "")
    assert recalled.stdout.splitlines()[1].endswith("[me] Module 1 parses the invoices of customer number 1.")
    started = hook("session-start", session_start_event())
    assert "4 memories" in started.stdout.splitlines()[0]
    assert started.stdout.count("\n- ") == 4
    assert len(engines_serving(db)) == 1
