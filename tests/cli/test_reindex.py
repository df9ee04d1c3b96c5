"""``wontopos-mcp reindex --embed-model NAME`` re-embeds every memory in place: the
database records the model that made its vectors, and ``reindex`` is how it changes model.

The second model is the test-only ``TEST_MODEL`` (the default's weights, another pooling,
256 values): Hugging Face Hub is out of reach here, and its vectors and size both differ
from the default's, so a stored vector tells which model made it. The database is built
in process with the session's model, then the real CLI runs as a subprocess, as a user
types it. A reindex killed at chosen steps (a process of its own that runs
``MemoryService.reindex`` with a ``step`` callback of the test's, which SIGKILLs it at the
named step) must leave the old model's database or the new one, never a mix, and a
second run of the CLI finishes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import REPO

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.errors import UnavailableError
from wontopos_mcp.model.embeddings import DEFAULT_MODEL, TEST_DIM, TEST_MODEL, ModelLoader, load_embedder
from wontopos_mcp.rules.text import chunk_text
from wontopos_mcp.storage.adapter import META_FILE, Store
from wontopos_mcp.storage.schema import missing_indexes, recorded_model

pytestmark = [pytest.mark.slow]

OLD_MESSAGE_FIX = "`wontopos-mcp reindex --embed-model"


@pytest.fixture(scope="session")
def test_embedder(model_cache: Path, embedder: Any) -> Any:
    """The test-only second model, loaded from the session's converted weights."""
    return load_embedder(TEST_MODEL, model_cache, threads=2)


def _cli(
    db: Path, model_cache: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", ""), "HOME": str(db.parent), "PYTHONPATH": str(REPO),
            "WONTOPOS_MODEL_CACHE": str(model_cache), "HF_HUB_OFFLINE": "1"}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "wontopos_mcp", "--db", str(db), *args],
        capture_output=True, text=True, env={**base, **(env or {})}, cwd=REPO, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _fill(service: MemoryService, *, memories: int, long_memory: bool = False) -> None:
    """Two stores, two people, every kind of field: categories, conversations, dates,
    a supersede chain of three, idempotency records (on rows, and one in the registry
    for a duplicate), a conversation's messages, and ``memories`` plain notes of three
    sentences (three chunks each)."""
    service.store_create("alice")
    service.speaker_register("Bob", user_id="alice")
    service.speaker_register("Carol", user_id="alice")
    first = service.memory_add("Bob's train leaves at 8.", speaker="Bob", user_id="alice", category="travel")
    second = service.memory_supersede(first["id"], "Bob's train leaves at 9.", user_id="alice")
    service.memory_supersede(second["id"], "Bob's train leaves at 10.", user_id="alice")
    keyed = service.idempotency("key-1", "body-1")
    service.memory_add("Carol booked the harbour restaurant for Friday.", speaker="Carol", user_id="alice",
                       event_date="2026-03-02", conversation_id="plans-1", idempotency=keyed)  # fmt: skip
    again = service.idempotency("key-2", "body-2")
    assert (
        service.memory_add("Bob's train leaves at 10.", speaker="Bob", user_id="alice", idempotency=again)["status"]
        == "duplicate"
    )
    service.memory_add_messages(
        [{"role": "user", "content": "Shall we take the ferry?"}, {"role": "assistant", "content": "Yes, at seven."}],
        conversation_id="chat-7",
        user_id="alice",
    )
    if long_memory:
        sentence = "The lighthouse keeper counted every passing ship and wrote its name in a blue notebook. "
        service.memory_add((sentence * 400)[:32_000], speaker="me")
    items = [
        {"content": f"Note {i} is about the garden. The roses need water on day {i}. Tomatoes grow slowly.",
         "speaker": "me" if i % 2 else None}
        for i in range(memories)
    ]  # fmt: skip
    service.memory_add_batch(items)


def _snapshot(db: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every chunk row but its vector, and every registry row but the model record, sorted."""
    store = Store(str(db))
    try:
        rows = [{k: v for k, v in r.items() if k != "vector"} for r in store.chunks.rows("true", columns=None)]
        registry = [r for r in store.registry.rows("kind != 'meta'") if not r["key"].startswith("index:")]
        return sorted(rows, key=lambda r: r["chunk_id"]), sorted(registry, key=lambda r: r["key"])
    finally:
        store.close()


def _vectors_are_of(db: Path, embedder: Any, *, sample: int = 4) -> None:
    """The stored vectors of a few chunks (the first, the last, a long memory's last
    chunk) are what ``embedder`` makes of those chunks, as a write makes them."""
    store = Store(str(db))
    try:
        rows = sorted(store.chunks.rows("true", columns=None), key=lambda r: (r["seq"], r["user_id"], r["chunk_idx"]))
        longest = max(rows, key=lambda r: (r["n_chunks"], r["chunk_idx"]))
        for row in [*rows[:sample], rows[-1], longest]:
            chunk = chunk_text(row["content"], embedder.max_chars)[row["chunk_idx"]]
            stored = np.asarray(row["vector"], dtype=np.float32)
            assert stored.shape == (embedder.dim,), (row["chunk_id"], stored.shape)
            assert float(stored @ embedder.embed_passages([chunk])[0]) > 0.9999, row["chunk_id"]
        assert recorded_model(store.chunks.existing().schema) == (embedder.model_id, embedder.dim)
    finally:
        store.close()


def _record(db: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((db / META_FILE).read_text())
    return record


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    """A database of the default model: 100 notes (300 chunk rows: two embedding batches)
    and every kind of field. Each test works on its own copy."""
    db = tmp_path_factory.mktemp("reindex") / "template"
    service = MemoryService(Store(str(db)), ModelLoader.of(embedder))
    try:
        _fill(service, memories=100)
    finally:
        service.close()
    return db


def _copy(built: Path, tmp_path: Path) -> Path:
    db = tmp_path / "db"
    shutil.copytree(built, db)
    return db


# -- the happy path ------------------------------------------------------------------------------


@pytest.mark.process
def test_reindex_re_embeds_every_memory_in_place_and_the_old_model_is_refused_after(
    tmp_path: Path, model_cache: Path, embedder: Any, test_embedder: Any
) -> None:
    db = tmp_path / "db"
    service = MemoryService(Store(str(db)), ModelLoader.of(embedder))
    try:
        _fill(service, memories=12, long_memory=True)
    finally:
        service.close()
    before = _snapshot(db)

    done = _cli(db, model_cache, "reindex", "--embed-model", TEST_MODEL)
    assert done.returncode == 0, done.stderr
    summary = done.stdout.strip().splitlines()
    assert len(summary) == 1, done.stdout
    assert summary[0].startswith("reindexed 19 memories ("), done.stdout
    assert f"for {TEST_MODEL!r} (was {DEFAULT_MODEL!r})" in summary[0]
    assert "memories/s" in summary[0]
    assert "chunks embedded" in done.stderr
    assert "chunks/s" in done.stderr

    assert _snapshot(db) == before, "every column but the vectors, and the registry, as they were"
    assert _record(db) == {"model": TEST_MODEL, "dim": TEST_DIM}
    _vectors_are_of(db, test_embedder)
    _assert_every_index(db)

    found = _cli(db, model_cache, "--embed-model", TEST_MODEL, "search", "harbour restaurant", "--user", "alice")
    assert found.returncode == 0, found.stderr
    assert "Carol booked the harbour restaurant" in found.stdout.splitlines()[0]

    refused = _cli(db, model_cache, "search", "harbour", "--user", "alice")
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert f"built with embedding model {TEST_MODEL!r} ({TEST_DIM} dimensions), not {DEFAULT_MODEL!r}" in lines[0]
    assert f"{OLD_MESSAGE_FIX} {DEFAULT_MODEL}`" in lines[0]
    assert "no in-place reindex" not in lines[0]
    server = _cli(db, model_cache)  # the stdio server, old model: refused at start
    assert server.returncode == 2
    assert server.stdout == ""
    assert f"not {DEFAULT_MODEL!r}" in server.stderr
    served = _cli(db, model_cache, "--embed-model", TEST_MODEL)  # the new model: it serves (stdin closed: it ends)
    assert served.returncode == 0, served.stderr
    stopped = _cli(db, model_cache, "engine", "stop")  # the shared engine it started leaves with the test
    assert (stopped.returncode, stopped.stdout.startswith("stopped ")) == (0, True), stopped.stdout + stopped.stderr


def _assert_every_index(db: Path) -> None:
    """No index the chunks table should have is missing (an overwrite drops them all)."""
    check = Store(str(db))
    try:
        assert missing_indexes(check.chunks.existing()) == []
    finally:
        check.close()


# -- killed at every step --------------------------------------------------------------------------

# A process of its own re-embeds the database through the service's public ``reindex``,
# as the CLI does, and kills itself with SIGKILL when the reindex reaches ``point``.
_KILLED_REINDEX = """
import os, signal, sys
from wontopos_mcp.config import Settings
from wontopos_mcp.engine.service import MemoryService

db, cache, model, point = sys.argv[1:]
service = MemoryService.open(Settings.load({"db": db, "model_cache": cache, "embed_model": model}))
service.open_or_refuse()


def step(name: str) -> None:
    if name == point:
        os.kill(os.getpid(), signal.SIGKILL)


service.reindex(model, step=step)
"""


def _reindex_killed_at(db: Path, model_cache: Path, point: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(db.parent), "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", _KILLED_REINDEX, str(db), str(model_cache), TEST_MODEL, point],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip


# (the step the process kills itself at, the model the database is of afterwards)
KILL_POINTS = [
    ("locked", DEFAULT_MODEL),
    ("marked", DEFAULT_MODEL),
    ("batch 1", DEFAULT_MODEL),  # the overwrite half written
    ("batch 2", DEFAULT_MODEL),  # every row handed to LanceDB, not yet committed
    ("committed", TEST_MODEL),  # the table re-embedded, no index, the record still the old one
    ("indexed", TEST_MODEL),  # indexes rebuilt, the record still the old one
]


@pytest.mark.process
@pytest.mark.parametrize(("point", "model"), KILL_POINTS, ids=[p for p, _ in KILL_POINTS])
def test_a_reindex_killed_at_any_step_leaves_one_models_database_that_opens_and_searches(
    built: Path, tmp_path: Path, model_cache: Path, embedder: Any, test_embedder: Any, point: str, model: str
) -> None:
    db = _copy(built, tmp_path)
    before = _snapshot(db)
    killed = _reindex_killed_at(db, model_cache, point)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    assert killed.stdout == ""

    other = DEFAULT_MODEL if model == TEST_MODEL else TEST_MODEL
    found = _cli(db, model_cache, "--embed-model", model, "search", "harbour restaurant", "--user", "alice")
    assert found.returncode == 0, found.stderr
    assert "Carol booked the harbour restaurant" in found.stdout.splitlines()[0]
    assert _record(db)["model"] == model, "the record names the model of the table's vectors (repaired forward)"
    assert "reindex" not in _record(db), "no reindex runs: its mark is gone, so the next start reads the file alone"
    assert _snapshot(db) == before, "every memory once, with its ids and fields"
    _vectors_are_of(db, test_embedder if model == TEST_MODEL else embedder)
    refused = _cli(db, model_cache, "--embed-model", other, "search", "harbour", "--user", "alice")
    assert refused.returncode == 2, refused.stderr

    again = _cli(db, model_cache, "reindex", "--embed-model", TEST_MODEL)
    assert again.returncode == 0, again.stderr
    expected = "nothing to do" if model == TEST_MODEL else "reindexed 106 memories (306 chunks)"
    assert again.stdout.startswith(expected), again.stdout
    assert _record(db) == {"model": TEST_MODEL, "dim": TEST_DIM}
    assert _snapshot(db) == before
    _vectors_are_of(db, test_embedder)
    _assert_every_index(db)


# -- refusals and no-ops ---------------------------------------------------------------------------


@pytest.mark.process
@pytest.mark.parametrize(
    ("model", "env"),
    [pytest.param("no-such-model/at-all", {}, id="unknown"),
     pytest.param("BAAI/bge-small-en-v1.5", {}, id="needs-a-download-while-offline")],
)  # fmt: skip
def test_a_model_that_cannot_load_is_one_line_exit_2_and_changes_nothing(
    built: Path, tmp_path: Path, model_cache: Path, model: str, env: dict[str, str]
) -> None:
    db = _copy(built, tmp_path)
    versions = sorted(os.listdir(db / "chunks.lance" / "_versions"))
    done = _cli(db, model_cache, "reindex", "--embed-model", model, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    errors = [line for line in done.stderr.strip().splitlines() if "loading embedding model" not in line]
    assert len(errors) == 1, done.stderr
    assert model in errors[0], done.stderr
    assert "Traceback" not in done.stderr
    assert _record(db) == {"model": DEFAULT_MODEL, "dim": 384}
    assert sorted(os.listdir(db / "chunks.lance" / "_versions")) == versions


@pytest.mark.process
def test_reindexing_to_the_model_the_database_has_does_nothing_and_says_so(
    built: Path, tmp_path: Path, model_cache: Path
) -> None:
    db = _copy(built, tmp_path)
    versions = sorted(os.listdir(db / "chunks.lance" / "_versions"))
    done = _cli(db, model_cache, "reindex", "--embed-model", "MULTILINGUAL-E5-SMALL-Q4")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"nothing to do: the database is already built with {DEFAULT_MODEL!r} (384 dimensions)\n"
    assert sorted(os.listdir(db / "chunks.lance" / "_versions")) == versions


@pytest.mark.process
def test_reindex_without_a_database_or_without_a_model_is_one_line_exit_2_and_creates_nothing(
    tmp_path: Path, model_cache: Path
) -> None:
    missing = tmp_path / "nowhere"
    done = _cli(missing, model_cache, "reindex", "--embed-model", TEST_MODEL)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"wontopos-mcp: there is no database at {missing} to reindex; fix: pass --db (or WONTOPOS_DB) the database"
    ]
    assert not missing.exists()
    unnamed = _cli(missing, model_cache, "reindex")
    assert unnamed.returncode == 2
    assert unnamed.stderr == "wontopos-mcp: the following arguments are required: --embed-model\n"
    assert not missing.exists()


def test_a_database_without_memories_yet_only_changes_its_record(
    make_service: Any, tmp_path: Path, test_embedder: Any
) -> None:
    make_service(db=tmp_path / "db").store_create("alice")  # no chunks table yet
    service = MemoryService(Store(str(tmp_path / "db")), ModelLoader.of(test_embedder))
    try:
        answer = service.reindex(TEST_MODEL)
        assert (answer["status"], answer["memories"], answer["previous"]) == ("reindexed", 0, None)
        assert _record(tmp_path / "db") == {"model": TEST_MODEL, "dim": TEST_DIM}
        assert service.memory_add("The first memory, of the new model.")["status"] == "stored"
        _vectors_are_of(tmp_path / "db", test_embedder)
    finally:
        service.close()


# -- a server that still runs the old model --------------------------------------------------------


def test_a_process_still_on_the_old_model_neither_writes_nor_searches_after_a_reindex(
    make_service: Any, tmp_path: Path, test_embedder: Any
) -> None:
    """The write checks the table's own record inside the write lock: no old-model
    vector is written into the re-embedded table (503, nothing written); a search is
    refused alike; calls that need no model still work."""
    old = make_service(db=tmp_path / "db")
    kept = old.memory_add("The ferry leaves at seven.")["id"]
    gone = old.memory_add("The bus leaves at noon.")["id"]
    new = MemoryService(Store(str(tmp_path / "db")), ModelLoader.of(test_embedder))
    try:
        assert new.reindex(TEST_MODEL)["status"] == "reindexed"
        with pytest.raises(UnavailableError, match=f"restart it with --embed-model {TEST_MODEL}"):
            old.memory_add("Written with the old model.")
        with pytest.raises(UnavailableError, match=f"restart it with --embed-model {TEST_MODEL}"):
            old.memory_supersede(kept, "The ferry leaves at eight.")
        with pytest.raises(UnavailableError, match="re-embedded"):
            old.memory_search("ferry")
        assert old.memory_forget(memory_id=gone)["deleted"] == 1
        assert [m["id"] for m in new.memory_list()["memories"]] == [kept]
        _vectors_are_of(tmp_path / "db", test_embedder, sample=1)
        assert new.memory_search("ferry")["memories"][0]["id"] == kept
    finally:
        new.close()


def test_a_reindex_that_fails_while_embedding_commits_nothing_and_says_why(
    make_service: Any, tmp_path: Path, test_embedder: Any
) -> None:
    """What the stream of re-embedded rows raised reaches the caller as itself (LanceDB
    would wrap it in a RuntimeError), and the table stays at its version."""
    service = make_service(db=tmp_path / "db")
    service.memory_add_batch([{"content": f"Note {i}. It has two sentences."} for i in range(6)])
    store = service.store
    version = store.chunks.existing().version

    def failing(rows: list[Any]) -> Any:
        if failing.calls:  # type: ignore[attr-defined]
            raise UnavailableError("the model stopped", model=TEST_MODEL)
        failing.calls += 1  # type: ignore[attr-defined]
        return test_embedder.embed_passages([row["content"] for row in rows])

    failing.calls = 0  # type: ignore[attr-defined]
    with store.exclusive(), pytest.raises(UnavailableError, match="the model stopped"):
        store.chunks.reembed(TEST_MODEL, TEST_DIM, failing, batch_rows=4)
    table = store.chunks.existing()
    table.checkout_latest()
    assert table.version == version
    assert recorded_model(table.schema) == (DEFAULT_MODEL, 384)
    assert service.memory_search("note")["memories"]


def test_with_leased_writers_on_object_storage_a_store_write_waits_for_the_reindex(
    s3_endpoint: str, embedder: Any, test_embedder: Any
) -> None:
    """``--writers leased``: each store has its own lease, and LanceDB's overwrite never
    conflicts with an append, so a write slipped in during the reindex would be lost by
    its overwrite. The reindex holds every store's lease too: the write waits, and then
    meets the re-embedded table (503), and nothing of it is stored."""
    import threading
    import uuid

    from wontopos_mcp.storage.locks.lease import LeaseTiming

    uri = f"s3://exists/reindex-{uuid.uuid4().hex[:8]}"
    options = {"endpoint": s3_endpoint, "allow_http": "true", "region": "us-east-1",
               "aws_access_key_id": "test", "aws_secret_access_key": "test"}  # fmt: skip
    timing = LeaseTiming.from_ttl_ms(3000)

    def service(model: Any) -> MemoryService:
        return MemoryService(Store(uri, storage_options=options, writers="leased", lease=timing), ModelLoader.of(model))

    old, new = service(embedder), service(test_embedder)
    try:
        old.store_create("alice")
        ids = {old.memory_add(f"Note {i} of alice.", user_id="alice")["id"] for i in range(3)}
        outcome: list[BaseException | dict[str, Any]] = []
        started = threading.Event()

        def write() -> None:
            started.set()
            try:
                outcome.append(old.memory_add("Written while the reindex runs.", user_id="alice"))
            except UnavailableError as exc:
                outcome.append(exc)

        writer = threading.Thread(target=write)

        def step(name: str) -> None:
            if name == "marked":
                writer.start()
                started.wait(5)
                writer.join(1.0)  # it waits for alice's lease, which the reindex holds
                assert writer.is_alive(), outcome

        assert new.reindex(TEST_MODEL, step=step)["status"] == "reindexed"
        writer.join(30)
        assert len(outcome) == 1
        assert isinstance(outcome[0], UnavailableError), outcome
        assert {m["id"] for m in new.memory_list(user_id="alice")["memories"]} == ids
        assert new.memory_search("note", user_id="alice")["memories"]
    finally:
        old.close()
        new.close()


def test_chunks_cut_again_fill_the_stored_rows_in_order_whatever_their_count() -> None:
    """The chunking rule gives the stored rows' chunks; had it changed since a memory was
    written, its new chunks are spread over its stored rows, so no row and no id changes."""
    from wontopos_mcp.engine.reindexing import spread

    assert spread(["a", "b", "c"], 3) == ["a", "b", "c"]
    assert spread(["a", "b", "c", "d"], 2) == ["a b", "c d"]
    assert spread(["a", "b", "c"], 2) == ["a", "b c"]
    assert spread(["a", "b"], 3) == ["a", "a", "b"]
    assert spread([], 2) == ["", ""]


def test_a_write_waiting_on_a_local_reindex_answers_503_after_its_bounded_wait(
    tmp_path: Path, embedder: Any, test_embedder: Any
) -> None:
    """A reindex holds every writer off for its whole run: a write waits ``write_wait``
    (0.2 s here; a few seconds by default), then answers 503 with ``retry_after_ms`` while
    the reindex still runs, and nothing of it is stored."""
    import threading

    db = str(tmp_path / "db")
    old = MemoryService(Store(db, write_wait=0.2), ModelLoader.of(embedder))
    new = MemoryService(Store(db), ModelLoader.of(test_embedder))
    try:
        kept = old.memory_add("Written before the reindex.")["id"]
        outcome: list[BaseException | dict[str, Any]] = []

        def write() -> None:
            try:
                outcome.append(old.memory_add("Written while the reindex runs."))
            except UnavailableError as exc:
                outcome.append(exc)

        def step(name: str) -> None:
            if name == "marked":
                writer = threading.Thread(target=write)
                writer.start()
                writer.join(30)
                assert not writer.is_alive(), "the write waited for the whole reindex"

        assert new.reindex(TEST_MODEL, step=step)["status"] == "reindexed"
        assert len(outcome) == 1
        assert isinstance(outcome[0], UnavailableError), outcome
        assert outcome[0].details["retry_after_ms"] >= 1000
        assert [m["id"] for m in new.memory_list()["memories"]] == [kept]
    finally:
        old.close()
        new.close()


def test_a_write_waiting_on_anything_but_a_reindex_waits_on_past_its_bound(tmp_path: Path, embedder: Any) -> None:
    """Another writer (a purge, an index build) holding the lock longer than
    ``write_wait``: the write waits for it and is stored."""
    import threading

    service = MemoryService(Store(str(tmp_path / "db"), write_wait=0.05), ModelLoader.of(embedder))
    try:
        service.memory_add("The first note, so the table exists.")
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            with service.store.write_lock():
                holding.set()
                release.wait(30)

        holder = threading.Thread(target=hold)
        holder.start()
        assert holding.wait(30)
        outcome: list[Any] = []
        writer = threading.Thread(target=lambda: outcome.append(service.memory_add("Written after a long wait.")))
        writer.start()
        writer.join(0.5)  # ten times its bound
        assert writer.is_alive()
        assert outcome == []
        release.set()
        writer.join(30)
        holder.join(30)
        assert outcome[0]["status"] == "stored"
    finally:
        service.close()
