"""The human commands through the shared engine, as real processes: a command that embeds
and finds no engine runs alone, as fast as ever, and starts the engine in the background;
every later command asks it (no second model load: the engine count and the command's own
memory say so), an engine killed mid-command is one
line and exit code 1 with every acknowledged write kept, and ``--engine inprocess`` still
runs the command alone.

One database for the module; its engines live in the session's runtime directory and
leave with the database directory at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import engines_serving, server_env, wait_until

from wontopos_mcp.cli.client import ENGINE_LOST

pytestmark = pytest.mark.process

WAIT = 60.0
LOST_LINE = f"wontopos-mcp: {ENGINE_LOST} (503 unavailable_error)"

# Runs a command and prints, last on stderr, the peak resident memory of it (kilobytes):
# the engine it may start is not waited for by it, so not counted.
MEASURED = (
    "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(done.returncode)"
)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("commands-engine") / "db"
    yield path
    shutil.rmtree(path, ignore_errors=True)  # its engines leave at once


@pytest.fixture(scope="module")
def cli(db: Path, model_cache: Path, embedder: Any) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``cli(*argv, measured=False)``: ``wontopos-mcp --db DB *argv`` as a person runs it
    (the session's model converted first, so an engine only loads it)."""
    env = server_env(model_cache, WONTOPOS_ENGINE_IDLE="60")

    def run(*argv: str, measured: bool = False) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "wontopos_mcp", "--db", str(db), *argv]
        if measured:
            command = [sys.executable, "-c", MEASURED, *command]
        return subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=WAIT, stdin=subprocess.DEVNULL
        )  # fmt: skip

    return run


def _one_engine(db: Path) -> dict[str, Any]:
    """The one engine serving ``db``, once it runs (a command that found none ran alone and
    started it in the background)."""
    wait_until(lambda: len(engines_serving(db)) == 1, "the engine a command started", WAIT)
    (engine,) = engines_serving(db)
    return engine


def _peak_mb(done: subprocess.CompletedProcess[str]) -> float:
    return int(done.stderr.strip().splitlines()[-1]) / 1024


def test_a_command_that_reads_runs_alone_while_no_engine_runs(cli: Any, db: Path) -> None:
    done = cli("stats")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("store 'default': 0 memories")
    assert engines_serving(db) == []


def test_the_first_add_starts_the_engine_and_every_later_command_asks_it_without_loading_the_model(
    cli: Any, db: Path
) -> None:
    added = cli("add", "The ferry to Naxos leaves at seven.", "--json")
    assert added.returncode == 0, added.stderr
    engine = _one_engine(db)

    found = cli("search", "when does the boat leave?", measured=True)
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines()[0].endswith("The ferry to Naxos leaves at seven.")
    # A command that loaded the model itself holds hundreds of megabytes.
    assert _peak_mb(found) < 150, f"the search process peaked at {_peak_mb(found):.0f} MB"
    listed = cli("memories", "list", "--json")
    assert [m["id"] for m in json.loads(listed.stdout)["memories"]] == [json.loads(added.stdout)["id"]]
    assert engines_serving(db) == [engine | {"clients": 0}]  # the same engine, one for all

    refused = cli("add", "Carol's words.", "--speaker", "Carol")
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr.count("\n") == 1
    assert "wontopos-mcp speakers add Carol" in refused.stderr  # the fix in the command line's verbs

    alone = cli("--engine", "inprocess", "memories", "list", "--json")
    assert alone.returncode == 0, alone.stderr
    assert json.loads(alone.stdout) == json.loads(listed.stdout)


def test_the_engine_killed_during_an_add_is_one_line_exit_1_and_no_acknowledged_write_is_lost(
    cli: Any, db: Path, model_cache: Path
) -> None:
    kept = cli("add", "Acknowledged before the kill.")
    assert kept.returncode == 0, kept.stderr
    engine = _one_engine(db)
    # A long memory (many chunks to embed) keeps the engine busy while it is killed.
    long = " ".join(f"Sentence {i} of a long account of the harbour, its boats and their crews." for i in range(400))
    env = server_env(model_cache, WONTOPOS_ENGINE_IDLE="60")
    command = [sys.executable, "-m", "wontopos_mcp", "--db", str(db), "add", long[:32_000]]
    adding = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wait_until(lambda: any(e["clients"] for e in engines_serving(db)), "the add to reach the engine", WAIT)
    os.kill(engine["pid"], signal.SIGKILL)
    out, err = adding.communicate(timeout=WAIT)

    assert adding.returncode == 1
    assert out == ""
    assert err.splitlines() == [LOST_LINE]
    listed = cli("memories", "list", "--json")
    assert "Acknowledged before the kill." in [m["content"] for m in json.loads(listed.stdout)["memories"]]


def test_the_engine_killed_during_an_import_keeps_every_batch_it_acknowledged(
    cli: Any, db: Path, model_cache: Path, tmp_path: Path
) -> None:
    facts = ({"id": f"line-{i}", "content": f"Imported fact number {i} about the harbour."} for i in range(60))
    lines = [json.dumps(fact) for fact in facts]
    export = tmp_path / "export.jsonl"
    export.write_text("\n".join(lines) + "\n")
    started = cli("search", "harbour")  # it runs alone and starts an engine (the last test killed the one before)
    assert started.returncode == 0, started.stderr
    engine = _one_engine(db)
    env = server_env(model_cache, WONTOPOS_ENGINE_IDLE="60")
    command = [sys.executable, "-m", "wontopos_mcp", "--db", str(db), "import", str(export), "--user", "port",
               "--batch", "1"]  # fmt: skip
    importing = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert importing.stderr is not None
    said = b""
    while b"stored=2," not in said:  # two batches acknowledged: their progress came back
        chunk = importing.stderr.read1(4096)
        assert chunk, said
        said += chunk
    os.kill(engine["pid"], signal.SIGKILL)
    out, rest = importing.communicate(timeout=WAIT)

    assert importing.returncode == 1
    assert out == b""
    assert (said + rest).decode().splitlines()[-1].split("\r")[-1] == LOST_LINE
    again = cli("import", str(export), "--user", "port", "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["already_there"] >= 2  # what was acknowledged is there
    assert summary["stored"] + summary["already_there"] == 60
    new = _one_engine(db)
    assert new["pid"] != engine["pid"]
