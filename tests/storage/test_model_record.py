"""The database records the model it was built with; opening it with another one stops
(one line on stderr naming both), checked from the small file beside a local database,
without LanceDB: by the server, the commands that embed and ``Memory()``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from support import REPO, engine_env

from wontopos_mcp import Memory
from wontopos_mcp.errors import ModelMismatch
from wontopos_mcp.model.embeddings import DEFAULT_MODEL, load_embedder
from wontopos_mcp.storage.adapter import META_FILE, Store


def test_a_database_built_with_one_model_refuses_another_naming_both(
    make_service: Any, embedder: Any, tmp_path: Path
) -> None:
    service = make_service(db=tmp_path / "db")
    service.memory_add("The ferry leaves at seven.")  # creates the chunks table: the model is recorded
    model_id = embedder.model_id

    fresh = Store(str(tmp_path / "db"))
    assert fresh.check_model(model_id) is None
    with pytest.raises(ModelMismatch) as refused:
        fresh.check_model("intfloat/multilingual-e5-large")
    assert model_id in str(refused.value)
    assert "intfloat/multilingual-e5-large" in str(refused.value)


def test_the_check_reads_the_file_beside_the_database_not_lancedb(make_service: Any, tmp_path: Path) -> None:
    """A process that only checks the model never imports LanceDB (about a second)."""
    make_service(db=tmp_path / "db").memory_add("The ferry leaves at seven.")
    script = f"""
import sys
from wontopos_mcp.errors import ModelMismatch
from wontopos_mcp.storage.adapter import Store
store = Store({str(tmp_path / "db")!r})
try:
    store.check_model("intfloat/multilingual-e5-large")
except ModelMismatch:
    print("refused", "lancedb" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["refused", "False"]


def test_a_database_without_vectors_yet_accepts_any_model(make_service: Any, tmp_path: Path) -> None:
    make_service(db=tmp_path / "db").store_create("alice")
    assert Store(str(tmp_path / "db")).check_model("any-model") is None


@pytest.mark.slow
def test_names_compare_as_loading_resolves_them(tmp_path: Path, model_cache: Path, embedder: Any) -> None:
    """``--embed-model MULTILINGUAL-E5-SMALL-Q4`` loads the default model and records its
    id; the same flag opens the database again (one function, ``model_key``, for both)."""
    assert load_embedder("  MULTILINGUAL-E5-SMALL-Q4 ", model_cache).model_id == DEFAULT_MODEL
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / META_FILE).write_text(json.dumps({"model": DEFAULT_MODEL, "dim": 384}))
    store = Store(str(tmp_path / "db"))
    assert store.check_model("MULTILINGUAL-E5-SMALL-Q4") is None
    assert store.check_model(" Multilingual-E5-Small-Q4 ") is None
    with pytest.raises(ModelMismatch):
        store.check_model("multilingual-e5-small")


# Real processes: what a user types, twice, on one database.
def _cli(db: Path, model_cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(db.parent), "PYTHONPATH": str(REPO),
           "WONTOPOS_MODEL_CACHE": str(model_cache), **engine_env()}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "wontopos_mcp", "--db", str(db), *args],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _export_line(tmp_path: Path, content: str) -> str:
    """An export file of one memory (a new id each time), for ``import``."""
    memory_id = str(uuid.uuid4())
    path = tmp_path / f"{memory_id}.jsonl"
    path.write_text(json.dumps({"id": memory_id, "content": content}) + "\n")
    return str(path)


@pytest.mark.slow
def test_the_flag_that_built_a_database_in_capitals_opens_it_again(
    tmp_path: Path, model_cache: Path, embedder: Any
) -> None:
    db, flag = tmp_path / "db", ["--embed-model", "MULTILINGUAL-E5-SMALL-Q4"]
    first = _cli(db, model_cache, *flag, "import", _export_line(tmp_path, "The ferry leaves at seven."))
    assert first.returncode == 0, first.stderr
    assert json.loads((db / META_FILE).read_text())["model"] == DEFAULT_MODEL
    again = _cli(db, model_cache, *flag, "import", _export_line(tmp_path, "Bob sails on Sunday."))
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("imported 1 memory")
    found = _cli(db, model_cache, *flag, "search", "when does the ferry leave?")
    assert found.returncode == 0, found.stderr
    assert "The ferry leaves at seven." in found.stdout.splitlines()[0]


@pytest.fixture
def foreign_db(tmp_path: Path, model_cache: Path) -> Path:
    """A real database (a store, no vectors yet) whose record names another model, as
    a database built with BAAI/bge-small-en-v1.5 would."""
    db = tmp_path / "db"
    made = _cli(db, model_cache, "stores", "create", "alice")
    assert made.returncode == 0, made.stderr
    (db / META_FILE).write_text(json.dumps({"model": "BAAI/bge-small-en-v1.5", "dim": 384}))
    return db


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [pytest.param(["import", "EXPORT", "--user", "alice"], id="import"),
     pytest.param(["search", "the ferry", "--user", "alice"], id="search")],
)  # fmt: skip
def test_a_command_that_embeds_refuses_a_database_built_with_another_model(
    foreign_db: Path, model_cache: Path, tmp_path: Path, args: list[str]
) -> None:
    export = _export_line(tmp_path, "The ferry leaves at seven.")
    done = _cli(foreign_db, model_cache, *[export if a == "EXPORT" else a for a in args])
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "'BAAI/bge-small-en-v1.5'" in lines[0]
    assert f"not {DEFAULT_MODEL!r}" in lines[0]
    assert not (foreign_db / "chunks.lance").exists(), "nothing was embedded into it"


@pytest.mark.slow
def test_a_command_that_embeds_nothing_still_reads_a_database_of_another_model(
    foreign_db: Path, model_cache: Path
) -> None:
    listed = _cli(foreign_db, model_cache, "stores", "list")
    assert listed.returncode == 0, listed.stderr
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == ["default", "alice"]


@pytest.mark.slow
def test_the_library_refuses_a_database_built_with_another_model(
    foreign_db: Path, model_cache: Path, embedder: Any
) -> None:
    with pytest.raises(ModelMismatch, match=r"'BAAI/bge-small-en-v1\.5' \(384 dimensions\), not 'multilingual"):
        Memory(db=str(foreign_db), model_cache=str(model_cache))
    (foreign_db / META_FILE).write_text(json.dumps({"model": DEFAULT_MODEL, "dim": 384}))  # the one it was built with
    opened = Memory(db=str(foreign_db), model_cache=str(model_cache), embed_model="MULTILINGUAL-E5-SMALL-Q4")
    assert [s["user_id"] for s in opened.list_stores()] == ["default", "alice"]
