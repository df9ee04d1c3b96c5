"""Erasure reaches the disk: after every path that erases (forget by id or by speaker,
store_delete, delete_all, a speaker's merge, rename or removal) and the purge bound, no
file under the database holds what was erased, and no readable old version of any table
either.

Each test writes distinctive words where each kind of trace would stay: the text (and
its stemmed token, what the full-text index keeps), the category and the conversation id
(bitmap and B-tree keys), the idempotency key (on the memory's rows), a store id, a
speaker's name. They are looked for lower-cased in the raw bytes of every file and in
every row of every version ``lance.dataset(path, version=v)`` still opens. The full-text
index keeps its tokens in a compressed set (an FST) no byte search sees, so its document
lists are read instead: none may name a row that is not in the table.

The bound is a constructor argument: one second here (the default is 60 s), and readers
get 0.1 s of grace, so each test waits about a second.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import lance
import pytest
from lance.file import LanceFileReader
from support import KEY, refused, serve, settings_for

from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.storage import purge as purge_module
from wontopos_mcp.storage.locks.coordination import COMPACTION_FILE
from wontopos_mcp.storage.locks.lease import LeaseTiming
from wontopos_mcp.storage.purge import MARKERS, PurgeTiming
from wontopos_mcp.storage.purge_steps import catch_up, cleanup, compact, compact_beside_writers, seal
from wontopos_mcp.storage.purge_worker import ApartRewrite, PurgeWorkerError
from wontopos_mcp.storage.upkeep_policy import FAN_IN, fragments_of, tier

TOKEN = "zqxjurple"  # stemmed to "zqxjurpl" by the full-text index: the needle is the stem
TEXTS = (f"The {TOKEN} vault code sits behind the blue door.", f"Another {TOKEN} note: the spare key is in the shed.")
CATEGORY, CONVERSATION, IDEM_KEY = "zcatqq", "zconvqq", "zidemqq"
TRACES = ("zqxjurpl", CATEGORY, CONVERSATION, IDEM_KEY)
GONE = "Zorblat"  # a speaker whose name a merge, rename or removal ends


@pytest.fixture
def make_purging(make_service: Callable[..., MemoryService]) -> Callable[..., MemoryService]:
    """``make_purging(within=1.0, db=None, apart=False, **store)``: a service whose purges
    run within ``within`` seconds (``db``: another database, a URI too; ``apart``: the
    chunks table rewritten by the purge's child process, as a large table is; ``store``:
    more ``Store`` arguments)."""

    def make(within: float = 1.0, db: Any = None, apart: bool = False, **store: Any) -> MemoryService:
        timing = PurgeTiming(timedelta(seconds=within), apart_from_rows=0 if apart else None)
        return make_service(db=db, store={"purge": timing, "retain": timedelta(seconds=0.1), **store})

    return make


@pytest.fixture
def svc(make_purging: Callable[..., MemoryService]) -> MemoryService:
    return make_purging()


def remember(svc: MemoryService, user_id: str | None = None, speaker: str | None = None) -> list[str]:
    """Two marked memories among others, indexed the two ways an index can hold a row:
    the first compacted with the others into one fragment, the second alone in its own
    fragment (which a delete drops from the table at once, leaving it to the indexes)."""
    filler = [{"content": f"Filler note {i} about the garden and the weather."} for i in range(12)]
    svc.memory_add_batch(filler, user_id)
    ids = []
    for number, text in enumerate(TEXTS):
        idem = svc.idempotency(f"{IDEM_KEY}-{number}", text)
        fields = {"category": CATEGORY, "conversation_id": CONVERSATION, "idempotency": idem}
        ids.append(svc.memory_add(text, user_id=user_id, speaker=speaker, **fields)["id"])
        chunks = svc.store.chunks.existing()
        if number == 0:
            svc.memory_add_batch([{"content": f"Later note {i} about the river."} for i in range(4)], user_id)
            svc.store.maintain()  # one fragment, every index holding the first
        else:
            chunks.to_lance().optimize.optimize_indices()  # the second indexed in its own fragment
            chunks.checkout_latest()
    return ids


def purged(svc: MemoryService, timeout: float = 30.0) -> None:
    """Wait until no purge is due (the markers go with the purge's last commit)."""
    deadline = time.monotonic() + timeout
    while svc.store.registry.rows(MARKERS):
        assert time.monotonic() < deadline, "the purge did not run"
        time.sleep(0.05)


def traces(db: Path, needles: tuple[str, ...]) -> list[str]:
    """Where any of ``needles`` is still found: a file's raw bytes, a row of a readable
    version of a table, or a full-text document left of a deleted row."""
    found = []
    for path in sorted(p for p in db.rglob("*") if p.is_file()):
        data = path.read_bytes().lower()
        found += [f"{path.relative_to(db)}: {n}" for n in needles if n.lower().encode() in data]
    for table in sorted(db.glob("*.lance")):
        found += versions_holding(str(table), needles)
        found += orphan_documents(table, lance.dataset(str(table)))
    return found


def versions_holding(table: str, needles: tuple[str, ...], options: dict[str, str] | None = None) -> list[str]:
    """Each readable version of ``table`` (a path or URI) whose rows hold a needle."""
    latest = lance.dataset(table, storage_options=options)
    columns = [name for name in latest.schema.names if name != "vector"]
    found = []
    for version in latest.versions():
        rows = lance.dataset(table, version=version["version"], storage_options=options)
        text = json.dumps(rows.to_table(columns=columns).to_pylist(), ensure_ascii=False, default=str).lower()
        found += [f"{table.rsplit('/', 1)[-1]} v{version['version']}: {n}" for n in needles if n.lower() in text]
    return found


def orphan_documents(table: Path, latest: Any) -> list[str]:
    """Full-text documents and vector index entries of the latest version whose row is
    not in it (a deleted row's)."""
    live = set(latest.to_table(columns=[], with_row_address=True)["_rowaddr"].to_pylist())
    found = []
    for index in latest.describe_indices():
        if "IVF" in index.index_type:  # its rows' ids sit beside their quantized vectors
            for segment in index.segments:
                for file in sorted((table / "_indices" / str(segment.uuid)).glob("*.idx")):
                    held = LanceFileReader(str(file)).read_all().to_table()
                    rows = set(held["_rowid"].to_pylist()) if "_rowid" in held.column_names else set()
                    found += [
                        f"{table.name} {index.name}: the vector of deleted row {row}" for row in sorted(rows - live)
                    ]
            continue
        if index.index_type != "Inverted":
            continue
        docs = [table / "_indices" / str(s.uuid) for s in index.segments]
        files = [f for folder in docs for f in sorted(folder.glob("part_*_docs.lance"))]
        documents = sum(part.get("num_docs", 0) for part in latest.stats.index_stats(index.name)["indices"])
        assert files or not documents, f"{index.name}: where are its {documents} documents?"
        for file in files:
            rows = set(LanceFileReader(str(file)).read_all().to_table()["_rowid"].to_pylist())
            found += [f"{table.name} {index.name}: a document of deleted row {row}" for row in sorted(rows - live)]
    return found


@pytest.mark.slow
@pytest.mark.parametrize("apart", [False, True], ids=["here", "apart"])
def test_forgotten_memories_leave_every_file_and_version(
    make_purging: Callable[..., MemoryService], tmp_path: Path, apart: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Here and in the purge's child process (a large table's), alike."""
    svc = make_purging(apart=apart)
    ids = remember(svc)
    assert traces(tmp_path / "db", TRACES)  # there before: the search can find them
    for memory_id in ids:
        svc.memory_forget(memory_id=memory_id)
    with caplog.at_level(logging.DEBUG, logger="wontopos_mcp.storage.purge"):
        purged(svc)
    assert ("rewrite runs in a worker process" in caplog.text) is apart
    assert traces(tmp_path / "db", TRACES) == []
    assert svc.memory_list()["count"] == 16  # what was not forgotten is all there
    assert len(svc.memory_search("filler note about the garden")["memories"]) == 10


@pytest.mark.slow
@pytest.mark.parametrize("apart", [False, True], ids=["here", "apart"])
def test_a_forgotten_memory_alone_in_its_fragment_leaves_the_vector_index(
    make_purging: Callable[..., MemoryService], tmp_path: Path, apart: bool
) -> None:
    """With a vector index (built here from 16 rows) whose one segment covers the second
    marked memory's fragment (an index update merged it in), that memory, alone in its
    fragment, leaves the table at its delete while its vector stays in the index (LanceDB
    drops only a segment all of whose fragments went) until the purge merges the index."""
    svc = make_purging(vector_index_min_rows=16, apart=apart)
    ids = remember(svc)
    chunks = svc.store.chunks.existing()
    chunks.to_lance().optimize.optimize_indices(num_indices_to_merge=2)  # one segment of both fragments
    chunks.checkout_latest()
    assert [len(i.segments) for i in chunks.to_lance().describe_indices() if "IVF" in i.index_type] == [1]
    svc.memory_forget(memory_id=ids[1])
    table = tmp_path / "db" / "chunks.lance"
    assert any("the vector of deleted row" in t for t in orphan_documents(table, lance.dataset(str(table))))
    purged(svc)
    assert orphan_documents(table, lance.dataset(str(table))) == []
    assert traces(tmp_path / "db", (ids[1],)) == []
    assert ids[1] not in [m["id"] for m in svc.memory_search("where is the spare key?", limit=20)["memories"]]


@pytest.mark.slow
def test_a_purge_after_the_regular_upkeep_still_leaves_nothing(
    make_purging: Callable[..., MemoryService], tmp_path: Path
) -> None:
    """The upkeep may compact and update the indexes between a forget and its purge: the
    deleted rows then leave the full-text and B-tree indexes, not the bitmaps' keys."""
    svc = make_purging(within=600)
    for memory_id in remember(svc):
        svc.memory_forget(memory_id=memory_id)
    svc.memory_add_batch([{"content": f"Newer note {i} about the lake."} for i in range(3)])
    dataset = svc.store.chunks.existing().to_lance()
    dataset.optimize.optimize_indices()  # what an upkeep round does: the new rows indexed...
    dataset.optimize.compact_files(materialize_deletions_threshold=0.0)  # ...and a fragment rewritten
    left = traces(tmp_path / "db", TRACES)
    assert any("bitmap" in t and CATEGORY in t for t in left)
    assert svc.store.purge() is not None
    assert traces(tmp_path / "db", TRACES) == []


@pytest.mark.slow
@pytest.mark.parametrize("apart", [False, True], ids=["here", "apart"])
def test_writes_during_the_purges_index_rebuild_are_kept_and_found_and_nothing_forgotten_stays(
    make_purging: Callable[..., MemoryService], tmp_path: Path, apart: bool
) -> None:
    """The purge rebuilds the indexes outside the write lock. In the middle of the rebuild
    (the test's seam), another thread stores a memory and forgets one: both commit at once
    (they would wait for the purge otherwise, and the bound below would fail), the stored
    one is kept and found (vector search, full text, the filters' indexes) once the purge
    is done, the one forgotten meanwhile keeps its own marker and leaves with the next
    purge, and no file holds what the first forget erased."""
    svc_holder: list[MemoryService] = []
    late: list[str] = []
    stored: list[str] = []

    def meanwhile() -> None:
        if stored:  # the first purge's rebuild only
            return
        svc = svc_holder[0]

        def write() -> None:
            fields = {"category": "znewcatqq", "conversation_id": "znewconvqq"}
            stored.append(svc.memory_add("The zqnewparcel arrived at the depot.", **fields)["id"])
            svc.memory_forget(memory_id=late[0])

        writer = threading.Thread(target=write)
        writer.start()
        writer.join(timeout=60)
        assert not writer.is_alive(), "a write waited for the purge's index rebuild"

    svc = make_purging(within=600, apart=apart, during_purge_reindex=meanwhile)
    svc_holder.append(svc)
    ids = remember(svc)
    late.append(svc.memory_add("The zqlatefact is kept in the attic.")["id"])
    where = f"memory_id = '{late[0]}'"
    late_rows = svc.store.chunks.existing().to_lance().to_table(filter=where, with_row_address=True)["_rowaddr"]
    for memory_id in ids:
        svc.memory_forget(memory_id=memory_id)
    assert svc.store.purge() is not None
    assert stored, "the seam ran"
    # Only the memory forgotten meanwhile is left, as a document of the rebuilt index.
    left = [f"chunks.lance text_idx: a document of deleted row {row}" for row in late_rows.to_pylist()]
    assert traces(tmp_path / "db", TRACES) == left
    assert svc.store.registry.rows(MARKERS)  # the forget made meanwhile is due next
    assert svc.memory_list()["count"] == 17  # 16 fillers and the new one
    assert stored[0] in [m["id"] for m in svc.memory_search("a parcel arrived at the depot", limit=3)["memories"]]
    chunks = svc.store.chunks.existing()
    found = chunks.search("zqnewparcel", query_type="fts").limit(5).to_list()
    assert [row["memory_id"] for row in found] == stored
    assert chunks.count_rows("category = 'znewcatqq' AND conversation_id = 'znewconvqq'") == 1
    assert svc.store.purge() is not None
    assert traces(tmp_path / "db", (*TRACES, "zqlatefact")) == []
    assert not svc.store.registry.rows(MARKERS)
    assert svc.memory_list()["count"] == 17


@pytest.mark.slow
@pytest.mark.parametrize("apart", [False, True], ids=["here", "apart"])
def test_fragments_the_writes_appended_during_a_purge_are_merged_before_their_upkeep_resumes(
    make_purging: Callable[..., MemoryService], apart: bool
) -> None:
    """The writes made while a purge holds the maintenance exclusion skip their upkeep,
    each leaving a small fragment; the purge merges them beside the writers before it
    lets go (else the first write after it would, in its answer). Every one is kept."""
    svc_holder: list[MemoryService] = []
    stored: list[str] = []

    def meanwhile() -> None:  # in another thread, as a writer beside the purge
        def write() -> None:
            for i in range(2 * FAN_IN):
                stored.append(svc_holder[0].memory_add(f"Parcel {i} arrived at the zqdepot today.")["id"])

        if not stored:
            writer = threading.Thread(target=write)
            writer.start()
            writer.join(timeout=120)

    svc = make_purging(within=600, apart=apart, during_purge_reindex=meanwhile)
    svc_holder.append(svc)
    ids = remember(svc)
    svc.memory_forget(memory_id=ids[0])
    assert svc.store.purge() is not None
    assert len(stored) == 2 * FAN_IN
    small = [f for f in fragments_of(svc.store.chunks.existing().to_lance()) if tier(f.rows) == 0]
    assert len(small) < FAN_IN, small  # merged by the purge: no write's upkeep ran meanwhile
    assert {m["id"] for m in svc.memory_list(limit=100)["memories"]} >= set(stored)
    found = svc.store.chunks.existing().search("zqdepot", query_type="fts").limit(50).to_list()
    assert {row["memory_id"] for row in found} == set(stored)


def test_the_catch_up_merges_the_appends_on_both_sides_of_the_compactions_new_fragment(tmp_path: Path) -> None:
    """A compaction beside the writers puts its new fragment after those appended while it
    ran; appends after its commit come after it. Both stretches of small fragments are
    merged by the purge's catch-up (one upkeep round merges one), and every row is kept."""
    import lancedb
    import pyarrow as pa

    def rows(start: int, n: int) -> pa.Table:
        return pa.table({"id": [f"r{i}" for i in range(start, start + n)]})

    table = lancedb.connect(str(tmp_path / "db")).create_table("t", rows(0, 1))
    for i in range(1, FAN_IN + 1):  # appended while the compaction ran
        table.add(rows(i, 1))
    table.add(rows(100, 300))  # the compaction's new fragment, of a higher tier
    for i in range(FAN_IN + 1):  # appended after its commit
        table.add(rows(1000 + i, 1))
    before = fragments_of(table.to_lance())
    assert [tier(f.rows) for f in before].count(0) == 2 * (FAN_IN + 1)
    assert catch_up(table) >= 2 * (FAN_IN + 1)  # a merge's fragment may join the next one
    after = fragments_of(table.to_lance())
    assert [tier(f.rows) for f in after].count(0) <= 1, after
    assert table.count_rows() == 1 + FAN_IN + 300 + FAN_IN + 1


def test_a_write_during_the_purges_cleanup_commits_at_once_and_nothing_forgotten_stays(
    make_purging: Callable[..., MemoryService], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a local directory the cleanup runs beside the writers (at 1M rows it unlinks the
    old data and index files for a third of a second): a write made while it runs commits
    without waiting for it, is kept and found, and the forgotten memory leaves the disk.
    (The purge is run here, not by the poll thread, which would leave this one nothing.)"""
    svc = make_purging(within=600)
    real_cleanup = purge_module.cleanup
    written: list[str] = []

    def cleanup_with_a_write(table: Any, before: int) -> int:
        if not written:
            writer = threading.Thread(target=lambda: written.append(svc.memory_add("zqcleanwrite beside")["id"]))
            writer.start()
            writer.join(timeout=15)
            assert written, "the write waited for the cleanup"
        return real_cleanup(table, before)

    monkeypatch.setattr(purge_module, "cleanup", cleanup_with_a_write)
    ids = remember(svc)
    svc.memory_forget(memory_id=ids[1])
    svc.memory_forget(memory_id=ids[0])
    assert svc.store.purge() is not None
    assert written
    assert svc.memory_get(written[0])["memory"]["content"] == "zqcleanwrite beside"
    found = svc.store.chunks.existing().search("zqcleanwrite", query_type="fts").limit(5).to_list()
    assert [row["memory_id"] for row in found] == written
    assert traces(tmp_path / "db", TRACES) == []


class DeleteMeanwhile:
    """A chunks table whose second look at its latest version (the compaction's check
    before its commit) first commits a delete, as a writer outside the compaction's
    exclusion would."""

    def __init__(self, table: Any, where: str) -> None:
        self.table, self.where, self.looks = table, where, 0

    def checkout_latest(self) -> None:
        self.table.checkout_latest()

    def to_lance(self) -> Any:
        self.looks += 1
        if self.looks == 2:
            self.table.delete(self.where)
        return self.table.to_lance()


@pytest.mark.parametrize("erase", ["forget", "supersede", "rename"])
def test_an_erasure_waits_for_a_compaction_beside_the_writers_outside_the_lock(
    svc: MemoryService, tmp_path: Path, erase: str
) -> None:
    """While a purge compacts beside the writers (another process holds the compaction
    exclusion here, as a purge in another replica does), a forget, a supersede or a
    rename waits for it before it takes the write lock, so a plain write made meanwhile
    commits at once instead of queueing behind it for the compaction's seconds."""
    svc.speaker_register("Zed")
    first = svc.memory_add("The first note, by Zed.", speaker="Zed")["id"]
    erasures = {
        "forget": lambda: svc.memory_forget(memory_id=first),
        "supersede": lambda: svc.memory_supersede(first, "The first note, corrected."),
        "rename": lambda: svc.speaker_rename("Zed", "Zoe"),
    }
    holder = subprocess.Popen(  # the compaction exclusion's file lock, held until its input ends
        [sys.executable, "-c", "import sys, filelock; lock = filelock.FileLock(sys.argv[1]); lock.acquire(); "
         "print('held', flush=True); sys.stdin.read()", str(tmp_path / "db" / COMPACTION_FILE)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        erasing = threading.Thread(target=erasures[erase])
        erasing.start()
        time.sleep(0.5)  # the erasure is waiting for the compaction by now
        added: list[str] = []
        adding = threading.Thread(target=lambda: added.append(svc.memory_add("A plain note meanwhile.")["id"]))
        adding.start()
        adding.join(timeout=30)
        assert added, "a plain write queued behind an erasure waiting for the compaction"
        assert erasing.is_alive()  # it cannot finish while the compaction runs
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()
    erasing.join(timeout=30)
    assert not erasing.is_alive()
    if erase == "forget":
        assert first not in [m["id"] for m in svc.memory_list()["memories"]]
    elif erase == "supersede":
        assert svc.memory_get(first)["memory"]["is_superseded"] is True
    else:
        assert [s["speaker"] for s in svc.speakers_list()["speakers"]] == ["Zoe"]


def test_a_compaction_whose_fragment_changed_meanwhile_leaves_no_file_and_runs_in_the_lock(tmp_path: Path) -> None:
    """Lance would refuse the compaction's commit (after its index remap wrote files no
    version names): it is not made, its new data files are removed, and the compaction in
    the write lock leaves nothing of either deleted row once the old versions go."""
    import lancedb
    import pyarrow as pa

    table = lancedb.connect(str(tmp_path / "db")).create_table(
        "t", pa.table({"id": [f"r{i}" for i in range(50)], "text": [f"row {i}" for i in range(50)]})
    )
    table.update(where="id = 'r1'", values={"text": "zqgonefirst"})
    table.update(where="id = 'r2'", values={"text": "zqgonelater"})
    table.to_lance().optimize.compact_files(materialize_deletions_threshold=0.0)
    table.checkout_latest()
    table.delete("id = 'r1'")
    assert compact_beside_writers(DeleteMeanwhile(table, "id = 'r2'")) is False
    compact(table)
    assert cleanup(table, seal(table, time.time_ns() // 1000)) > 0
    files = [p for p in (tmp_path / "db").rglob("*") if p.is_file()]
    assert [str(p) for p in files for n in (b"zqgonefirst", b"zqgonelater") if n in p.read_bytes()] == []
    assert table.count_rows() == 48


@pytest.mark.slow
def test_a_speakers_forgotten_memories_leave_the_disk(svc: MemoryService, tmp_path: Path) -> None:
    svc.speaker_register("Bob")
    remember(svc, speaker="Bob")
    count = svc.by_speaker("Bob")["records_to_delete"]
    assert svc.memory_forget(speaker="Bob", confirm_records=count)["deleted"] == 2
    purged(svc)
    assert traces(tmp_path / "db", TRACES) == []


@pytest.mark.slow
def test_a_deleted_store_leaves_the_disk_with_its_id(svc: MemoryService, tmp_path: Path) -> None:
    svc.store_create("zstoreqq")
    svc.speaker_register(GONE, user_id="zstoreqq")
    remember(svc, user_id="zstoreqq", speaker=GONE)
    svc.store_delete("zstoreqq")
    purged(svc)
    assert traces(tmp_path / "db", (*TRACES, "zstoreqq", GONE)) == []


@pytest.mark.slow
def test_delete_all_leaves_nothing_of_the_stores_memories(svc: MemoryService, tmp_path: Path) -> None:
    svc.store_create("alice")
    remember(svc, user_id="alice")
    svc.memory_add("A memory of another store stays.")
    assert svc.delete_all("alice")["deleted"] == 18
    purged(svc)
    assert traces(tmp_path / "db", TRACES) == []
    assert svc.memory_list()["count"] == 1


def tagged_by_gone(svc: MemoryService) -> dict[str, Any]:
    """``GONE``'s marked memories, and a conversation stored in one call with Bob, whose
    kept first answer names both."""
    for name in (GONE, "Bob"):
        svc.speaker_register(name)
    remember(svc, speaker=GONE)
    messages = [
        {"role": "user", "name": GONE, "content": "See you at eight."},
        {"role": "user", "name": "Bob", "content": "Fine."},
    ]
    return svc.memory_add_messages(messages, idempotency=svc.idempotency("k-messages", "both"))


@pytest.mark.slow
def test_a_merged_away_name_leaves_the_disk(svc: MemoryService, tmp_path: Path) -> None:
    tagged_by_gone(svc)
    count = svc.by_speaker(GONE)["records_to_delete"]
    assert svc.speaker_merge(GONE, "Bob", confirm_records=count)["memories_retagged"] == 3
    purged(svc)
    assert traces(tmp_path / "db", (GONE,)) == []
    assert svc.speakers_list()["speakers"][0]["memories"] == 4


@pytest.mark.slow
def test_a_renamed_name_leaves_the_disk_and_replays_name_the_new_one(svc: MemoryService, tmp_path: Path) -> None:
    first = tagged_by_gone(svc)
    svc.speaker_rename(GONE, "Zed")
    purged(svc)
    assert traces(tmp_path / "db", (GONE,)) == []
    messages = [
        {"role": "user", "name": "Zed", "content": "See you at eight."},
        {"role": "user", "name": "Bob", "content": "Fine."},
    ]
    again = svc.memory_add_messages(messages, idempotency=svc.idempotency("k-messages", "both"))
    assert [r.get("speaker") for r in again["results"]] == ["Zed", "Bob"]
    assert again == {**first, "results": again["results"], "replayed": True}


@pytest.mark.slow
def test_a_removed_name_leaves_the_disk(svc: MemoryService, tmp_path: Path) -> None:
    tagged_by_gone(svc)
    assert svc.speaker_remove(GONE)["memories_untagged"] == 3
    purged(svc)
    assert traces(tmp_path / "db", (GONE,)) == []
    assert svc.memory_list()["count"] == 20  # the memories stay, untagged


@pytest.mark.slow
def test_a_purge_left_due_by_a_stopped_process_runs_before_the_next_first_answer(
    make_purging: Callable[..., MemoryService], tmp_path: Path
) -> None:
    first = make_purging(within=600)  # its purge would come long after the test
    for memory_id in remember(first):
        first.memory_forget(memory_id=memory_id)
    first.close()  # stopped before its bound, the marker still in the database
    assert traces(tmp_path / "db", TRACES)
    second = make_purging(within=600)
    assert second.memory_list()["count"] == 16  # the first answer, after the purge
    assert traces(tmp_path / "db", TRACES) == []
    assert second.store.registry.rows(MARKERS) == []


@pytest.mark.slow
@pytest.mark.parametrize("apart", [False, True], ids=["here", "apart"])
def test_on_object_storage_a_leased_replica_purges_every_object_and_version(
    make_purging: Callable[..., MemoryService], s3_endpoint: str, apart: bool
) -> None:
    """The same on S3 (moto's emulator), replicas sharing it under leases: the database
    lease's holder purges, old versions go by number, and no object under the database
    (leases included) holds a trace. (The index paths are the local tests'.)"""
    import boto3

    prefix = f"purge-{uuid.uuid4().hex[:8]}"
    options = {"endpoint": s3_endpoint, "allow_http": "true", "region": "us-east-1",
               "aws_access_key_id": "test", "aws_secret_access_key": "test"}  # fmt: skip
    uri = f"s3://exists/{prefix}"
    lease = LeaseTiming.from_ttl_ms(1000)
    svc = make_purging(db=uri, storage_options=options, writers="leased", lease=lease, apart=apart)
    fields = {"category": CATEGORY, "conversation_id": CONVERSATION, "idempotency": svc.idempotency(IDEM_KEY, "b")}
    svc.memory_add("A note to keep.")
    svc.memory_forget(memory_id=svc.memory_add(TEXTS[0], **fields)["id"])
    purged(svc)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                      aws_access_key_id="test", aws_secret_access_key="test")  # fmt: skip
    found = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="exists", Prefix=prefix):
        for item in page.get("Contents", []):
            try:
                data = s3.get_object(Bucket="exists", Key=item["Key"])["Body"].read().lower()
            except s3.exceptions.NoSuchKey:  # a lease released meanwhile
                continue
            found += [f"{item['Key']}: {n}" for n in TRACES if n.encode() in data]
    for table in ("chunks", "registry"):
        found += versions_holding(f"{uri}/{table}.lance", TRACES, options)
    assert found == []


def test_a_purge_worker_that_cannot_open_its_table_says_why_and_ends(tmp_path: Path) -> None:
    """The child's failure comes back as an exception of the parent's (its type and
    message, for the log filter), and the child is gone."""
    worker = ApartRewrite(str(tmp_path / "empty"), {}, "chunks")
    with pytest.raises(PurgeWorkerError, match="start failed: .*not found"):
        worker.start()
    with pytest.raises(PurgeWorkerError, match="not running"):
        worker.compact()  # no child left to ask


def test_a_purge_whose_worker_cannot_start_runs_here_all_the_same(
    make_purging: Callable[..., MemoryService], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """No interpreter to start the child with: a warning, and the purge does it here."""
    svc = make_purging(within=600, apart=True)
    for memory_id in remember(svc):
        svc.memory_forget(memory_id=memory_id)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    assert svc.store.purge() is not None
    assert "the worker process did not start" in caplog.text
    assert traces(tmp_path / "db", TRACES) == []


# --- records that name a forgotten memory ----------------------------------------------------------

SECRET_TEXT = "The safe's PIN is 4719."
DUPLICATE_KEY = "zdupkeyqq"  # a second key, answered "duplicate" of the memory forgotten later


def erase_over_rest(http: httpx.Client, how: str, memory_id: str) -> None:
    """Forget ``memory_id``, said by Bob in the store "alice", as ``how`` says."""
    if how == "by id":
        answer = http.post("/api/v1/memory/forget", json={"user_id": "alice", "memory_id": memory_id})
    elif how == "by speaker":
        said = http.post("/api/v1/memory/by-speaker", json={"user_id": "alice", "speaker": "Bob"}).json()
        body = {"user_id": "alice", "speaker": "Bob", "confirm_records": said["records_to_delete"]}
        answer = http.post("/api/v1/memory/forget", json=body)
    elif how == "delete_all":
        answer = http.post("/api/v1/memory/forget", json={"user_id": "alice"})
    else:
        answer = http.request("DELETE", "/api/v1/memory/collection", json={"user_id": "alice"})
    assert answer.status_code == 200, answer.text


@pytest.mark.slow
@pytest.mark.parametrize("how", ["by id", "by speaker", "delete_all", "store_delete"])
def test_a_duplicates_record_goes_with_the_memory_it_names_and_its_key_is_fresh_again(
    svc: MemoryService, tmp_path: Path, how: str
) -> None:
    """Issue 30: a text stored under one key, sent again under a second (answered
    "duplicate"), then forgotten: after the purge no file holds the second key or the
    forgotten id, and replaying the second key stores the text afresh (REST, raw HTTP)."""
    with (
        serve(svc, settings_for(tmp_path, api_key=KEY)) as live,
        httpx.Client(base_url=live.url, headers={"X-API-Key": KEY}, timeout=60) as http,
    ):
        assert http.post("/api/v1/memory/collection", json={"user_id": "alice"}).status_code == 200
        http.post("/api/v1/memory/speakers", json={"user_id": "alice", "speaker": "Bob"})
        body = {"user_id": "alice", "content": SECRET_TEXT, "metadata": {"speaker": "Bob"}}

        def store(key: str) -> httpx.Response:
            return http.post("/api/v1/memory/store", json=body, headers={"Idempotency-Key": key})

        first = store("zfirstkeyqq").json()
        duplicate = store(DUPLICATE_KEY)
        assert duplicate.json()["duplicate_of"] == first["id"]
        assert "Idempotent-Replayed" in store(DUPLICATE_KEY).headers  # kept before the forget
        erase_over_rest(http, how, first["id"])
        purged(svc)
        assert traces(tmp_path / "db", (DUPLICATE_KEY, "zfirstkeyqq", first["id"])) == []
        if how == "store_delete":
            http.post("/api/v1/memory/collection", json={"user_id": "alice"})
            http.post("/api/v1/memory/speakers", json={"user_id": "alice", "speaker": "Bob"})
        again = store(DUPLICATE_KEY)
        assert again.status_code == 200, again.text
        assert "Idempotent-Replayed" not in again.headers
        assert (again.json()["status"], again.json().get("replayed")) == ("stored", None)


@pytest.mark.slow
def test_records_on_other_memories_that_name_a_forgotten_one_go_in_the_same_commit(svc: MemoryService) -> None:
    """A conversation stored in one call (its answer, kept on each message's rows, names
    every message, and a message answered "duplicate" names the memory it restates) and a
    supersede (its answer names the old version): forgetting the memory they name takes
    their records at once, so a repeat is a new request; other records stay."""
    svc.speaker_register("Bob")
    named = svc.memory_add(SECRET_TEXT, speaker="Bob")["id"]
    messages = [
        {"role": "user", "name": "Bob", "content": SECRET_TEXT},  # duplicate_of named
        {"role": "user", "name": "Bob", "content": "The gate code changed last week."},
    ]
    conversation = svc.memory_add_messages(messages, idempotency=svc.idempotency("k-conversation", "c"))
    assert conversation["results"][0]["duplicate_of"] == named
    kept = svc.memory_add("The bins go out on Thursday.", idempotency=svc.idempotency("k-kept", "k"))
    old = svc.memory_add("The lock code is 1234.", idempotency=svc.idempotency("k-old", "o"))["id"]
    newer = svc.memory_supersede(old, "The lock code is 5678.", idempotency=svc.idempotency("k-newer", "n"))
    assert newer["superseded"] == old
    svc.memory_forget(memory_id=named)
    svc.memory_forget(memory_id=old)
    again = svc.memory_add_messages(messages, idempotency=svc.idempotency("k-conversation", "c"))
    assert "replayed" not in again  # a new request: the first message is stored this time
    assert again["results"][0]["status"] == "stored"
    with refused(404, field="memory_id"):  # a new request too: the old version is gone
        svc.memory_supersede(old, "The lock code is 5678.", idempotency=svc.idempotency("k-newer", "n"))
    replayed = svc.memory_add("The bins go out on Thursday.", idempotency=svc.idempotency("k-kept", "k"))
    assert replayed == {**kept, "replayed": True}  # naming no forgotten memory, it stays


class CompactionWithWrites:
    """``lance.optimize.Compaction`` whose commit first lets ``write`` run in another
    thread (as writers beside the purge's compaction, between its rewrite and its commit),
    then counts the table's smallest fragments in ``small_at_commit``."""

    real: Any = None
    write: Callable[[], None] = staticmethod(lambda: None)
    small_at_commit: list[int] = []

    @classmethod
    def plan(cls, dataset: Any, options: Any) -> Any:
        return cls.real.plan(dataset, options)

    @classmethod
    def commit(cls, dataset: Any, results: Any, options: Any) -> Any:
        writer = threading.Thread(target=cls.write)
        writer.start()
        writer.join(timeout=120)
        assert not writer.is_alive(), "the writes waited for the compaction"
        latest = lance.dataset(dataset.uri)
        cls.small_at_commit.append(sum(tier(f.rows) == 0 for f in fragments_of(latest)))
        return cls.real.commit(dataset, results, options)


def test_writes_beside_the_purges_compaction_merge_their_own_fragments_and_the_purge_stands(
    make_purging: Callable[..., MemoryService], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the purge compacts beside the writers, their upkeep rounds still merge the
    fragments they append (no index covers them), where they used to skip it and leave
    one fragment each (at 1M rows a duplicate look-up went from 6 to 37 ms after 200
    writes: every read opens every fragment). The purge's commit goes over those merges:
    the compaction is not redone in the write lock, every row is kept and found, and
    nothing forgotten stays on the disk."""
    import lance.optimize

    svc = make_purging(within=600)
    stored: list[str] = []

    def write() -> None:
        for i in range(2 * FAN_IN + 1):
            stored.append(svc.memory_add(f"Parcel {i} arrived at the zqbesidedepot today.")["id"])

    monkeypatch.setattr(CompactionWithWrites, "real", lance.optimize.Compaction)
    monkeypatch.setattr(CompactionWithWrites, "write", staticmethod(write))
    monkeypatch.setattr(CompactionWithWrites, "small_at_commit", [])
    monkeypatch.setattr(lance.optimize, "Compaction", CompactionWithWrites)
    real_compact, in_the_lock = purge_module.compact, []

    def compact_in_the_lock(table: Any) -> None:
        in_the_lock.append(table)
        real_compact(table)

    monkeypatch.setattr(purge_module, "compact", compact_in_the_lock)
    ids = remember(svc)
    svc.memory_forget(memory_id=ids[1])
    svc.memory_forget(memory_id=ids[0])
    registry = svc.store.registry.handle
    assert svc.store.purge() is not None
    assert len(stored) == 2 * FAN_IN + 1
    assert len(CompactionWithWrites.small_at_commit) == 1  # the purge's one compaction
    assert CompactionWithWrites.small_at_commit[0] < FAN_IN  # 2 * FAN_IN + 1 appended
    assert all(table is registry for table in in_the_lock), "the compaction was redone in the write lock"
    assert {m["id"] for m in svc.memory_list(limit=100)["memories"]} >= set(stored)
    found = svc.store.chunks.existing().search("zqbesidedepot", query_type="fts").limit(50).to_list()
    assert {row["memory_id"] for row in found} == set(stored)
    assert svc.memory_search("a parcel arrived at the depot", limit=3)["memories"][0]["id"] in stored
    assert traces(tmp_path / "db", TRACES) == []
