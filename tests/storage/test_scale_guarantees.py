"""Scale guarantees of search and storage, crossed with a few hundred rows.

The store's size thresholds are constructor arguments, so a real LanceDB store with
``flat_search_max=50`` and ``vector_index_min_rows=300`` takes the same code paths at
~400 memories that a production store takes at 20,000 and 50,000 rows: exact (flat)
search for small scopes, the IVF_SQ index above, index creation and compaction in
``maintain()``.

Most memories are written as the service writes them (``Memories.new_rows``: every
field) but in one commit, with vectors from the real model: a few distinct sentences
embedded once, plus a little seeded noise so no two vectors tie. The memories whose
words or embedding a test depends on go through ``memory_add``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import all_memories, next_seq, store_key, walk_by_speaker

from wontopos_mcp.engine import ranking as search
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader
from wontopos_mcp.storage.adapter import MEMORY_FIELDS, Store
from wontopos_mcp.storage.rows import ChunkRow
from wontopos_mcp.storage.where import in_store, quote

FLAT_MAX = 50
INDEX_MIN = 300
STORE = "scale"
TOPICS = (
    "We repainted the kitchen a pale green last weekend.", "The release moved to the end of March.",
    "My knee hurts after the long run on Sunday.", "We adopted a greyhound from the shelter.",
    "The landlord wants ten percent more rent from May.", "I'm learning Spanish before the trip to Valencia.",
    "The dentist said the back tooth needs a root canal.", "Our flight to Lisbon was delayed by six hours.",
    "I planted tomatoes and basil on the balcony.", "The car needs new brakes before winter.",
    "私は毎朝コーヒーを飲みます。", "다음 달에 부산으로 이사 가요.", "我对芒果过敏。",
    "Я купил старую дачу под Тверью.",
    "Ich fahre jeden Tag mit dem Fahrrad zur Arbeit.", "The concert tickets sold out in ten minutes.",
)  # fmt: skip
TINY_TEXTS = (
    "The spare key is under the blue flower pot.",
    "I never eat anything with coriander in it.",
    "My passport expires next February.",
)
QUERIES = ("where is the spare key?", "what about the kitchen?", "knee pain", "我对芒果过敏", "passport renewal")
FILLER = itertools.count(1)
NASTY = ("Bob' OR '1'='1", '"unterminated', "AND OR NOT (", "title:x", "*", "') OR 1=1 --", "NOT NOT NOT", "???")


@dataclass
class World:
    service: MemoryService
    store: Store
    owned: dict[str | None, set[str]] = field(default_factory=dict)  # speaker -> memory ids
    index_before_maintain: bool = False


def has_vector_index(store: Store) -> bool:
    return any(ix.columns == ["vector"] for ix in store.chunks.existing().list_indices())


def bulk_insert(
    service: MemoryService, embedder: Any, plan: list[tuple[str | None, int, str | None]], seed: int
) -> list[str]:
    """Memories (speaker, topic, conversation) in one commit, every field as the service
    writes it; sequence numbers follow the store's. Returns the new ids in order."""
    bases = embedder.embed_passages(list(TOPICS))
    rng = np.random.default_rng(seed)
    first, key = next_seq(service, STORE), store_key(service, STORE)
    rows, ids = [], []
    for i, (speaker, topic, conversation) in enumerate(plan):
        vector = bases[topic] + rng.normal(0.0, 0.03, embedder.dim).astype(np.float32)
        vector /= np.linalg.norm(vector)
        memory = {"content": TOPICS[topic], "speaker": speaker, "category": "general", "event": None,
                  "conversation_id": conversation, "role": None}  # fmt: skip
        memory_id, new = service.memories.new_rows(key, memory, [TOPICS[topic]], vector[None, :], seq=first + i)
        rows += new
        ids.append(memory_id)
    store = service.store
    with store.write_lock():
        store.chunks.add(store.chunks.for_model(embedder.model_id, embedder.dim), rows)
    return ids


def mixed_plan(rng: np.random.Generator, counts: dict[str | None, int]) -> list[tuple[str | None, int, str | None]]:
    """Speakers shuffled together; runs of 8 share a conversation, every third run has none."""
    speakers = [s for s, n in counts.items() for _ in range(n)]
    rng.shuffle(speakers)
    return [
        (s, int(rng.integers(len(TOPICS))), None if (i // 8) % 3 == 2 else f"conv-{i // 8}")
        for i, s in enumerate(speakers)
    ]


def make_service(path: Path, embedder: Any) -> MemoryService:
    store = Store(str(path), flat_search_max=FLAT_MAX, vector_index_min_rows=INDEX_MIN)
    service = MemoryService(store, ModelLoader.of(embedder))
    service.store_create(STORE)
    return service


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[World]:
    """~400 memories: Big 200, me 100, untagged 97 (bulk), Tiny 3 (memory_add); maintained."""
    service = make_service(tmp_path_factory.mktemp("scale") / "db", embedder)
    for name in ("Big", "Tiny", "Ken", "Mia"):
        service.speaker_register(name, user_id=STORE)
    plan = mixed_plan(np.random.default_rng(1), {"Big": 200, "me": 100, None: 97})
    ids = bulk_insert(service, embedder, plan, seed=1)
    w = World(service, service.store)
    for (speaker, _, _), mid in zip(plan, ids):
        w.owned.setdefault(speaker, set()).add(mid)
    w.owned["Tiny"] = {service.memory_add(t, speaker="Tiny", user_id=STORE)["id"] for t in TINY_TEXTS}
    w.index_before_maintain = has_vector_index(w.store)
    with w.store.write_lock():
        w.store.maintain()
    yield w
    service.close()


def where(speaker: str | None = None) -> str:
    """The scope ``memory_search`` builds: the store, current memories, the speaker if given."""
    clause = in_store(STORE) + " AND NOT superseded"
    return clause if speaker is None else clause + f" AND speaker = {quote(speaker)}"


# -- (a) index creation ----------------------------------------------------------------------


@pytest.mark.slow
def test_upkeep_builds_the_vector_index_once_the_table_passes_its_threshold(world: World) -> None:
    # The commits' own upkeep (maintenance) builds it once the rows pass INDEX_MIN and an
    # index update falls due; no explicit maintain() call is needed.
    assert world.index_before_maintain
    table = world.store.chunks.existing()
    assert table.count_rows() >= INDEX_MIN
    vector = [ix for ix in table.list_indices() if ix.columns == ["vector"]]
    assert len(vector) == 1
    assert vector[0].index_type == "IvfSq"
    for ix in table.list_indices():  # every index, full text included, covers every row
        assert table.index_stats(ix.name).num_unindexed_rows == 0, ix.name


def rebuild_vector_index(store: Store, partitions: int | None) -> None:
    """Rebuild the vector index as ``maintain()`` builds it, or with more partitions than
    LanceDB probes (20) as at production sizes (~sqrt(rows) partitions), so that one
    indexed query sees only part of a scope."""
    from lancedb.index import IvfSq

    config = (
        IvfSq(distance_type="cosine")
        if partitions is None
        else IvfSq(distance_type="cosine", num_partitions=partitions)
    )
    store.chunks.existing().create_index("vector", config=config, replace=True)


# -- (b) exact scopes through the flat and the indexed path ------------------------------------


@pytest.mark.parametrize("query", QUERIES)
def test_a_three_memory_speaker_among_four_hundred_gets_exactly_its_three(world: World, query: str) -> None:
    assert world.store.chunks.count(where("Tiny")) <= FLAT_MAX  # the flat (exact) path
    got = world.service.memory_search(query, speaker="Tiny", limit=5, user_id=STORE)["memories"]
    assert len(got) == 3
    assert {m["id"] for m in got} == world.owned["Tiny"]
    assert all(m["speaker"] == "Tiny" for m in got)


@pytest.mark.slow
@pytest.mark.parametrize("limit", [5, 10, 20])
def test_a_speaker_above_the_flat_limit_gets_limit_distinct_memories_all_its_own_through_the_index(
    world: World, limit: int
) -> None:
    assert world.store.chunks.count(where("Big")) > FLAT_MAX
    assert has_vector_index(world.store)
    for query in QUERIES:
        ids = [
            m["id"] for m in world.service.memory_search(query, speaker="Big", limit=limit, user_id=STORE)["memories"]
        ]
        assert len(ids) == limit == len(set(ids))
        assert set(ids) <= world.owned["Big"]


def test_the_store_vector_search_returns_every_row_of_a_large_scope_that_is_asked_for(
    world: World, embedder: Any
) -> None:
    """k up to past the scope: min(k, 200) distinct rows, all in scope, even when the
    index's fixed number of probed partitions holds fewer (the re-query over every
    partition must make up the difference)."""
    rebuild_vector_index(world.store, 64)
    vector = embedder.embed_query("what about the kitchen?")
    for k in (10, 120, 199, 200, 260):
        rows = world.store.chunks.vector_search(vector, where("Big"), k, ("chunk_id", "memory_id", "speaker"))
        assert len(rows) == min(k, 200)
        assert len({r["chunk_id"] for r in rows}) == len(rows)
        assert {r["memory_id"] for r in rows} <= world.owned["Big"]


def test_the_indexed_search_of_a_large_scope_finds_the_same_top_ten_as_exact_search(
    world: World, embedder: Any
) -> None:
    rebuild_vector_index(world.store, None)  # as maintain() builds it (an earlier test may have replaced it)
    table = world.store.chunks.existing()
    overlap = []
    for query in QUERIES:
        vector = embedder.embed_query(query)
        got = [r["chunk_id"] for r in world.store.chunks.vector_search(vector, where("Big"), 10, ("chunk_id",))]
        exact = table.search(vector, vector_column_name="vector").distance_type("cosine").where(where("Big"))
        truth = exact.select(["chunk_id"]).limit(10).bypass_vector_index().to_arrow().column("chunk_id").to_pylist()
        overlap.append(len(set(got) & set(truth)) / 10)
    assert np.mean(overlap) >= 0.99, overlap


# -- (c) maintenance never loses or duplicates rows ----------------------------------------------


@pytest.mark.slow
def test_maintenance_interleaved_with_adds_supersedes_and_forgets_never_loses_or_duplicates_a_row(
    tmp_path: Path, embedder: Any
) -> None:
    service = make_service(tmp_path / "db", embedder)
    store = service.store
    service.speaker_register("Ann", user_id=STORE)
    bulk_insert(service, embedder, mixed_plan(np.random.default_rng(2), {"Ann": 150, "me": 100, None: 40}), seed=2)
    # model of the store: memory id -> (content, superseded?), in write order
    model = {m["id"]: (m["content"], m["is_superseded"]) for m in all_memories(service, STORE)}
    index_seen: list[bool] = []

    def check() -> None:
        walked = all_memories(service, STORE, page=37)
        ids = [m["id"] for m in walked]
        assert len(ids) == len(set(ids))
        assert {i: (m["content"], m["is_superseded"]) for i, m in zip(ids, walked)} == model
        assert ids == list(model)  # nothing reordered either
        chunk_ids = store.chunks.column(in_store(STORE), "chunk_id")
        assert len(chunk_ids) == len(set(chunk_ids)) == store.chunks.existing().count_rows()
        n_chunks = {r["memory_id"]: r["n_chunks"] for r in store.chunks.rows(in_store(STORE) + " AND chunk_idx = 0")}
        assert len(chunk_ids) == sum(n_chunks.values())
        ann = [m["id"] for m in walk_by_speaker(service, "Ann", user_id=STORE)]
        assert len(ann) == len(set(ann))
        assert set(ann) == {m["id"] for m in walked if m.get("speaker") == "Ann"}

    def maintain() -> None:
        with store.write_lock():
            store.maintain()
        index_seen.append(has_vector_index(store))
        check()

    maintain()
    assert index_seen == [False]  # 290 rows: below the threshold
    latest: list[str] = []
    for round_ in range(4):
        for j in range(3):  # multi-sentence memories: several chunks each
            text = f"Round {round_} note {j}. The boiler was serviced on day {round_ * 3 + j}. Bring the ladder."
            mid = service.memory_add(text, speaker="Ann", user_id=STORE)["id"]
            model[mid] = (text, False)
            latest.append(mid)
        maintain()
        old = latest.pop(0)
        new_text = f"Update {round_}: the boiler service moved to day {round_ + 40}. Keep the ladder."
        new = service.memory_supersede(old, new_text, user_id=STORE)["id"]
        model[old] = (model[old][0], True)
        model[new] = (new_text, False)
        maintain()
        victim = next(i for i, (_, superseded) in model.items() if not superseded)
        service.memory_forget(memory_id=victim, user_id=STORE)
        del model[victim]
        if round_ % 2:  # forgetting the newest version makes its predecessor current again
            service.memory_forget(memory_id=new, user_id=STORE)
            del model[new]
            model[old] = (model[old][0], False)
        maintain()
    assert index_seen[-1]
    assert not index_seen[0]
    service.close()


# -- (d) full text inside the speaker scope --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("query", "kens", "mias"),
    [
        ("东京", "我下个月去东京出差。", "东京的冬天不太冷。"),
        ("ラーメン", "来週、京都でラーメンを食べます。", "ラーメンは苦手です。"),
        ("runs", "I was running along the canal every morning.", "She runs a bakery downtown near the canal."),
    ],
)
def test_full_text_finds_a_cjk_word_and_an_english_stem_inside_the_speaker_scope_only(
    world: World, query: str, kens: str, mias: str
) -> None:
    service, store = world.service, world.store
    ken = service.memory_add(kens, speaker="Ken", user_id=STORE)["id"]
    mia = service.memory_add(mias, speaker="Mia", user_id=STORE)["id"]
    service.memory_add(f"Weather note {next(FILLER)}: grey skies all afternoon.", speaker="Ken", user_id=STORE)
    for state in ("before maintain", "after maintain"):  # new rows unindexed, then indexed
        hits = store.chunks.text_search(query, where("Ken"), 20, MEMORY_FIELDS)
        found = {h["memory_id"] for h in hits}
        assert ken in found, state
        assert mia not in found, state
        assert all(h["speaker"] == "Ken" for h in hits), state
        ranked = search.search_memories(store, service.commits.embedder(), query, where("Ken"), 5, mode="bm25")
        assert ranked[0][0]["memory_id"] == ken, state
        with store.write_lock():
            store.maintain()


# -- (e) hostile query text -------------------------------------------------------------------------


@pytest.mark.parametrize("query", NASTY)
def test_a_query_full_of_quotes_and_operators_never_errors_and_still_answers_min_limit_scope(
    world: World, query: str
) -> None:
    service = world.service
    for speaker, limit, expected in (("Tiny", 5, 3), ("Big", 10, 10), (None, 20, 20)):
        got = service.memory_search(query, speaker=speaker, limit=limit, user_id=STORE)["memories"]
        assert len(got) == len({m["id"] for m in got}) == expected
        if speaker is not None:
            assert all(m["speaker"] == speaker for m in got)


@pytest.mark.parametrize("query", ["Bob' OR '1'='1 kitchen", "AND OR NOT ( kitchen", "title:x kitchen", "* kitchen"])
def test_operators_around_a_real_word_leave_its_full_text_match_intact(world: World, query: str) -> None:
    hits = world.store.chunks.text_search(query, where("Big"), 50, ("memory_id", "text"))
    assert hits
    assert all("kitchen" in h["text"] for h in hits)


@pytest.mark.parametrize("query", ['"kitchen"', '"pale green"'])
def test_a_fully_quoted_query_keeps_its_full_text_signal(
    world: World, query: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="wontopos_mcp.storage.chunk_search"):
        hits = world.store.chunks.text_search(query, where("Big"), 50, ("memory_id", "text"))
    assert not [r for r in caplog.records if "full-text search failed" in r.getMessage()]
    assert hits
    assert all("kitchen" in h["text"] or "green" in h["text"] for h in hits)


# -- (e) growth, upgrades and row ids that move --------------------------------------------------


def recorded_index_size(store: Store) -> int | None:
    rows = store.registry.rows("key = 'index:vector'")
    return int(rows[0]["value"]) if rows else None


def row_ids_of(store: Store) -> list[ChunkRow]:
    return store.chunks.rows(in_store(STORE), columns=("memory_id",), row_ids=True)


@pytest.mark.slow
def test_the_vector_index_is_built_again_once_the_table_has_grown_tenfold(tmp_path: Path, embedder: Any) -> None:
    service = make_service(tmp_path / "db", embedder)
    store = service.store
    grow = lambda n, seed: bulk_insert(service, embedder, mixed_plan(np.random.default_rng(seed), {"me": n}), seed=seed)  # noqa: E731
    grow(INDEX_MIN, 3)
    with store.write_lock():
        store.maintain()
    built = recorded_index_size(store)
    assert has_vector_index(store)
    assert built == INDEX_MIN
    grow(INDEX_MIN * 10 - built - 1, 4)  # one row short of tenfold: kept
    with store.write_lock():
        store.maintain()
    assert recorded_index_size(store) == built
    grow(1, 5)
    with store.write_lock():
        store.maintain()
    table = store.chunks.existing()
    assert recorded_index_size(store) == table.count_rows() == INDEX_MIN * 10
    assert [ix.index_type for ix in table.list_indices() if ix.columns == ["vector"]] == ["IvfSq"]
    assert len(set(store.chunks.column(in_store(STORE), "chunk_id"))) == INDEX_MIN * 10
    got = service.memory_search(TOPICS[0], limit=10, user_id=STORE)["memories"]
    assert len({m["id"] for m in got}) == 10
    service.close()


@pytest.mark.slow
def test_a_database_from_before_the_bitmap_and_the_restatement_key_is_upgraded_on_open(
    tmp_path: Path, embedder: Any
) -> None:
    from lancedb.index import BTree

    service = make_service(tmp_path / "db", embedder)
    old = service.memory_add("The spare key is under the blue flower pot.", user_id=STORE)["id"]
    table = service.store.chunks.existing()
    table.drop_columns(["restate_key"])  # as the previous version wrote it
    table.drop_index("user_id_idx")
    table.create_index("user_id", config=BTree())
    service.close()

    service = MemoryService(Store(str(tmp_path / "db")), ModelLoader.of(embedder))
    table = service.store.chunks.existing()
    kinds = {tuple(ix.columns): ix.index_type for ix in table.list_indices()}
    assert kinds[("user_id",)] == "Bitmap"
    assert kinds[("restate_key",)] == "BTree"
    rows = service.store.chunks.rows(in_store(STORE), columns=("memory_id", "dup_key", "restate_key"))
    assert [r["memory_id"] for r in rows] == [old]
    assert rows[0]["restate_key"] == rows[0]["dup_key"]
    again = service.memory_add("the spare key is under the BLUE flower pot", user_id=STORE)
    assert again["status"] == "duplicate"
    assert again["duplicate_of"] == old
    assert service.memory_add("The spare key is under the red flower pot.", user_id=STORE)["status"] == "stored"
    service.close()


@pytest.mark.slow
def test_rows_read_by_a_row_id_that_compaction_moved_are_still_the_right_memories(
    tmp_path: Path, embedder: Any
) -> None:
    """Search reads winners by the row ids its queries gave; compaction in between (here
    forced) renumbers rows, and the read must notice and look them up by id instead."""
    service = make_service(tmp_path / "db", embedder)
    store = service.store
    ids = [service.memory_add(f"Note {i}: the boiler was serviced on day {i}.", user_id=STORE)["id"] for i in range(12)]
    seen = {
        r["memory_id"]: r["_rowid"] for r in store.chunks.rows(in_store(STORE), columns=("memory_id",), row_ids=True)
    }
    service.memory_forget(memory_id=ids[0], user_id=STORE)
    from datetime import timedelta

    store.chunks.existing().optimize(cleanup_older_than=timedelta(hours=1))  # 11 fragments into one
    now = {
        r["memory_id"]: r["_rowid"] for r in store.chunks.rows(in_store(STORE), columns=("memory_id",), row_ids=True)
    }
    assert any(seen[m] != now[m] for m in now)  # the premise: row ids moved
    fetched = search.fetch_by_row_ids(store, STORE, {m: [rid] for m, rid in seen.items()}, ("content",))
    assert set(fetched) == set(ids[1:])  # the forgotten one is gone, every other is found
    for i, m in enumerate(ids[1:], start=1):
        assert [row["content"] for row in fetched[m]] == [f"Note {i}: the boiler was serviced on day {i}."]
    service.close()


def test_rows_a_search_read_beside_are_used_and_a_stale_one_is_looked_up_again(tmp_path: Path, embedder: Any) -> None:
    """Search reads its candidates' records while it reads their lines, and hands them to
    the winners' read: a row handed in is not read again, and one that is no longer the
    memory's (its row id moved) is looked up by the memory's id."""
    service = make_service(tmp_path / "db", embedder)
    store = service.store
    ids = [service.memory_add(f"Note {i}: the gate code changed on day {i}.", user_id=STORE)["id"] for i in range(3)]
    seen = {
        r["memory_id"]: r["_rowid"] for r in store.chunks.rows(in_store(STORE), columns=("memory_id",), row_ids=True)
    }
    held = {
        seen[ids[0]]: {"memory_id": ids[0], "content": "as the search read it"},
        seen[ids[1]]: {"memory_id": ids[2], "content": "another memory's row"},
    }
    fetched = search.fetch_by_row_ids(store, STORE, {m: [seen[m]] for m in ids}, ("content",), held)
    assert [row["content"] for row in fetched[ids[0]]] == ["as the search read it"]
    assert [row["content"] for row in fetched[ids[1]]] == ["Note 1: the gate code changed on day 1."]
    assert [row["content"] for row in fetched[ids[2]]] == ["Note 2: the gate code changed on day 2."]
    service.close()
