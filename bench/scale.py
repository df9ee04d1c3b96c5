"""Synthetic scale benchmark: 10k and 100k memories (1M with ``--sizes 10000,100000,1000000``).

One fresh database per size, with the store's production thresholds
(``flat_search_max`` 5,000 chunk rows, IVF_SQ index from 50,000 rows). The stores and
speakers are registered through the service; the memories are NOT embedded one by one:
rows with every field ``memory_add`` writes (``service.memories.new_rows``) are generated in bulk
and written straight into the chunks table with ``table.add`` (pyarrow, 100k rows per
append), then ``store.maintain()`` builds the indexes. Their vectors are precomputed
random unit vectors: a real e5 embedding of one of ~300 realistic sentences (the row's
text) plus Gaussian noise (cosine to it ~0.9), so the vector space is clustered the way
real sentences are and the BM25 index holds real words. Only the queries and the texts
of ``memory_add`` are embedded at run time.

Layout per size N: store ``u0`` holds 80 % of the memories (speaker ``Alice`` 40 % of
them, ``me`` 30 %, 28 other people 20 %, untagged 10 %, and ``Tiny`` exactly 3), stores
``u1``-``u4`` 5 % each. Memories come in runs of 10 in store order; 70 % of the runs
carry a conversation id, the rest none (plain ``memory_add`` without one).

Reported, p50/p95 over interleaved rounds: ``memory_search`` without a speaker, with a
common speaker and with the 3-memory speaker (which must get exactly its 3 every time);
``by_speaker`` first page; ``memory_add`` against its floor (one ``embed_passages`` plus
one LanceDB append of the same rows, same run) with the duplicate lookup
(``service.memories.find_duplicate``) and the other steps timed apart; recall@10 of the store's
vector search (the indexed path where the scope is above ``flat_search_max``) against
exact flat search on the same scope; RSS.

    PYTHONPATH=. python bench/scale.py [--sizes 10000,100000] [--rounds 30] [--model-cache DIR] [--db DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import numpy as np

from wontopos_mcp.config import DEFAULT_MODEL, default_model_cache
from wontopos_mcp.engine import ranking as search
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader, load_embedder
from wontopos_mcp.rules.query_names import query_without_name
from wontopos_mcp.rules.records import RECORD_FIELDS
from wontopos_mcp.rules.restatement import restatement_key
from wontopos_mcp.rules.text import cjk_text, duplicate_key, importance
from wontopos_mcp.storage.adapter import Store
from wontopos_mcp.storage.where import in_store, quote

TARGETS = {  # the targets printed beside the numbers
    "search_p50_ms": {100_000: 40.0, 1_000_000: 80.0},  # issue 29
    "by_speaker_p50_ms": {1_000_000: 10.0},
    "stores_list_p50_ms": {1_000_000: 10.0},
    "recall": 0.99,
    "add_ratio": 1.3,
}
OTHERS = [
    "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory", "Niaj", "Olivia",
    "Peggy", "Rupert", "Sybil", "Trent", "Uma", "Victor", "Walter", "Xena", "Yusuf", "Zoe", "Hans", "Eva",
    "さくら", "민수", "小明", "Ольга",
]  # fmt: skip
FACTS = [
    "I moved into a flat near the river", "the release got pushed to the end of March",
    "my knee hurts again after running", "we adopted a greyhound from the shelter",
    "I started a pottery class on Thursday evenings", "the landlord is raising the rent by ten percent",
    "I'm allergic to peanuts and shellfish", "my sister is getting married in Lisbon",
    "the car needs new brakes before the trip", "I switched teams at work and now report to a new manager",
    "we booked a cabin in the mountains for the holidays", "I'm learning Spanish with an app every morning",
    "the dentist found a cavity in a back tooth", "our daughter starts school in September",
    "I quit coffee and drink green tea instead", "the kitchen renovation is finally finished",
    "I ran my first half marathon in under two hours", "the project deadline moved to Friday",
    "my grandmother is in hospital with pneumonia", "I'm saving up for a new bike",
    "we are thinking about moving to the suburbs", "I lost my wallet on the train",
    "I got promoted to team lead", "the neighbours' dog barks all night",
    "I prefer window seats on long flights", "we planted tomatoes and basil on the balcony",
    "I'm reading a novel about the Silk Road", "my laptop died and I lost a week of work",
    "ich fahre jeden Tag mit dem Fahrrad zur Arbeit", "wir ziehen im Sommer nach Hamburg",
    "der Zahnarzttermin ist nächste Woche", "ich habe mit dem Klavierunterricht angefangen",
    "来月から新しい会社で働きます", "週末は京都で紅葉を見ました", "猫を飼い始めました", "毎朝ジョギングをしています",
    "다음 달에 부산으로 이사 가요", "요즘 요가를 배우고 있어요", "땅콩 알레르기가 있어요", "주말에 캠핑을 갔어요",
    "我下个月开始学开车", "我对芒果过敏", "周末去成都吃了火锅", "我打算明年去日本留学",
    "я купил старую дачу под Тверью", "летом хочу поехать в Рим", "я перестала есть мясо", "работаю по субботам",
    "the plumber is coming on Monday morning", "I'm training a puppy to walk on a leash",
    "we cancelled the gym membership", "I want to visit Iceland to see the northern lights",
    "the concert tickets sold out in minutes", "I'm trying to sleep before midnight",
    "my brother lent me his camera", "the heating broke during the cold snap",
    "I signed up for a cooking course in Italian cuisine", "our flight was delayed by six hours",
    "I'm volunteering at the food bank on Saturdays", "the bakery on the corner closed down",
]  # fmt: skip
TAILS = ["", " last week", " again this month", " before the holidays", " this weekend"]
QUERIES = [
    "what did they say about moving house?", "when is the project deadline?", "any allergies I should know about?",
    "how is the knee after running?", "what pet did they get?", "plans for the holidays?",
    "what about the new job and the manager?", "is the rent going up?", "wedding plans in Portugal?",
    "what happened with the car brakes?", "which language are they learning?", "news from the dentist?",
    "what sports or running events?", "family health news?", "what are they saving money for?",
    "Was hat sie über den Umzug gesagt?", "Fährt er mit dem Fahrrad zur Arbeit?", "新しい仕事はいつから？",
    "猫について何と言った？", "이사는 언제 가요?", "알레르기가 있어요?", "他为什么要学开车？", "周末去哪里玩了？",
    "Что он купил под Тверью?", "Куда она хочет поехать летом?", "what did they say about the broken laptop?",
    "garden or balcony plants?", "travel delays?", "cooking classes?", "volunteering on weekends?",
]  # fmt: skip
NEW_TEXTS = [
    "the {n}th sketch for the garden shed is done, the roof will be green",
    "booked the vet for the dog on day {n} of the month at {h}:30",
    "my train pass costs {n} euros a month now, up from last year",
    "we need {n} chairs for the birthday dinner on Saturday",
    "I finished chapter {n} of the Spanish course this morning",
    "the plumber quoted {n} pounds for the new boiler",
]  # fmt: skip
NOISE = 0.025  # per-dimension std: cosine of a row to its sentence ~0.9 at 384 dimensions


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f} {pct(values, 0.95) * 1000:8.1f}"


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MiB."""
    fields = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            name, _, value = line.partition(":")
            fields[name] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def du_mb(path: str) -> float:
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total / 2**20


# -- synthetic data ----------------------------------------------------------------------


class Topics:
    """~300 realistic sentences and their real e5 passage vectors."""

    def __init__(self, embedder: Any) -> None:
        self.texts = [f"{fact}{tail}." for fact in FACTS for tail in TAILS]
        start = time.perf_counter()
        self.vectors = embedder.embed_passages(self.texts).astype(np.float32)
        self.embed_seconds = time.perf_counter() - start
        self.dup_keys = [duplicate_key(t) for t in self.texts]
        self.restate_keys = [restatement_key(t) for t in self.texts]
        self.cjk_texts = [cjk_text(t) for t in self.texts]
        self.importance = np.array([importance(t) for t in self.texts], dtype=np.float32)


def plan_rows(n: int, rng: np.random.Generator) -> dict[str, Any]:
    """Store, speaker and conversation of each of ``n`` memories (no vectors yet)."""
    stores = rng.choice(5, size=n, p=[0.8, 0.05, 0.05, 0.05, 0.05])
    names = np.array(["Alice", "me", *OTHERS, None], dtype=object)
    p_u0 = np.array([0.4, 0.3] + [0.2 / len(OTHERS)] * len(OTHERS) + [0.1])
    p_rest = np.array([0.0, 0.5] + [0.3 / len(OTHERS)] * len(OTHERS) + [0.2])
    speakers = np.where(
        stores == 0, names[rng.choice(len(names), size=n, p=p_u0)], names[rng.choice(len(names), size=n, p=p_rest)]
    )
    u0 = np.flatnonzero(stores == 0)
    tiny = rng.choice(u0, size=3, replace=False)
    speakers[tiny] = "Tiny"
    return {"stores": stores, "speakers": speakers, "tiny": tiny}


def bulk_load(store: Store, embedder: Any, topics: Topics, n: int, seed: int, no_conversation: float) -> dict[str, Any]:  # fmt: skip
    """Write ``n`` memories straight into the chunks table; fields as ``Memories.new_rows`` makes them."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    plan = plan_rows(n, rng)
    table = store.chunks.for_model(embedder.model_id, embedder.dim)
    schema = table.schema
    seq = np.zeros(n, dtype=np.int64)
    for s in range(5):  # per-store write order: 1, 2, 3, ...
        members = np.flatnonzero(plan["stores"] == s)
        seq[members] = np.arange(1, len(members) + 1)
    t0 = int(datetime.now(timezone.utc).timestamp() * 1e6) - (n + 10) * 1_000_000
    created = t0 + seq * 1_000_000 + plan["stores"]
    runs = seq // 10  # runs of 10 memories in store order share a conversation (or have none)
    keep = rng.random(n // 10 + 2) >= no_conversation
    conv = np.array(
        [f"conv-u{s}-{r}" if keep[r % len(keep)] else None for s, r in zip(plan["stores"], runs)], dtype=object
    )
    topic = rng.integers(0, len(topics.texts), size=n)
    texts = np.array(topics.texts, dtype=object)
    gen = write = 0.0
    batch = 100_000
    tiny_ids: list[str] = []
    for at in range(0, n, batch):
        start = time.perf_counter()
        sl = slice(at, min(n, at + batch))
        m = sl.stop - sl.start
        ids = [str(uuid.uuid4()) for _ in range(m)]
        vec = topics.vectors[topic[sl]] + rng.normal(0.0, NOISE, size=(m, embedder.dim)).astype(np.float32)
        vec /= np.linalg.norm(vec, axis=1, keepdims=True)
        cr = created[sl]
        months = cr.astype("datetime64[us]").astype("datetime64[M]").astype(str)
        none = pa.nulls(m, pa.string())
        columns = {
            "chunk_id": pa.array([f"{i}:0" for i in ids]),
            "memory_id": pa.array(ids),
            "chunk_idx": pa.array(np.zeros(m, dtype=np.int32)),
            "n_chunks": pa.array(np.ones(m, dtype=np.int32)),
            "user_id": pa.array([f"u{s}" for s in plan["stores"][sl]]),
            "speaker": pa.array(list(plan["speakers"][sl]), pa.string()),
            "content": pa.array(list(texts[topic[sl]])),
            "text": pa.array(list(texts[topic[sl]])),
            "cjk_text": pa.array([topics.cjk_texts[t] for t in topic[sl]]),
            "dup_key": pa.array([topics.dup_keys[t] for t in topic[sl]]),
            "restate_key": pa.array([topics.restate_keys[t] for t in topic[sl]]),
            "created_us": pa.array(cr),
            "seq": pa.array(seq[sl]),
            "event_date": none,
            "event_us": pa.nulls(m, pa.int64()),
            "when_us": pa.array(cr),
            "time_bucket": pa.array(list(months)),
            "category": pa.array(["general"] * m),
            "importance": pa.array(topics.importance[topic[sl]]),
            "superseded": pa.array(np.zeros(m, dtype=bool)),
            "superseded_by": none,
            "conversation_id": pa.array(list(conv[sl]), pa.string()),
            "role": none,
            "idem_key": none,
            "idem_fp": none,
            "idem_answer": none,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vec.reshape(-1)), embedder.dim),
        }
        arrow = pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)
        tiny_ids += [ids[i - at] for i in plan["tiny"] if sl.start <= i < sl.stop]
        gen += time.perf_counter() - start
        start = time.perf_counter()
        table.add(arrow)
        write += time.perf_counter() - start
    return {"plan": plan, "tiny_ids": sorted(tiny_ids), "generate_s": gen, "append_s": write}


# -- measurements ----------------------------------------------------------------------------


def interleaved(ops: dict[str, Callable[[int], Any]], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in ops}
    names = list(ops)
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            ops[name](r)
            times[name].append(time.perf_counter() - start)
    return times


def vector_index(store: Store) -> str:
    for index in store.chunks.existing().list_indices():
        if index.columns == ["vector"]:
            stats = store.chunks.existing().index_stats(index.name)
            unindexed = getattr(stats, "num_unindexed_rows", "?")
            return f"{index.index_type} ({getattr(stats, 'num_indexed_rows', '?')} rows indexed, {unindexed} not)"
    return "none"


def path_of(store: Store, rows_in_scope: int) -> str:
    indexed = vector_index(store) != "none"
    if rows_in_scope > store.flat_search_max and indexed:
        return "IVF_SQ index (refined)"
    return "flat (exact)"


def exact(store: Store, vector: Any, where: str, k: int) -> list[str]:
    table = store.chunks.existing()
    query = table.search(vector, vector_column_name="vector").distance_type("cosine").where(where, prefilter=True)
    return query.select(["chunk_id"]).limit(k).bypass_vector_index().to_arrow().column("chunk_id").to_pylist()


def plan_says_ann(store: Store, vector: Any, where: str) -> bool:
    """Whether LanceDB's plan for the store's indexed query shape uses the vector index."""
    table = store.chunks.existing()
    query = table.search(vector, vector_column_name="vector").distance_type("cosine").where(where, prefilter=True)
    plan = query.select(["chunk_id"]).limit(10).refine_factor(10).explain_plan(True)
    return "ANN" in plan or "Ivf" in plan or "IVF" in plan


def anchor_against(service: MemoryService, store: Store, embedder: Any, db: str, rounds: int) -> None:
    """``memory_search`` with the speaker filter beside the anchor's search on the same memories:
    the plain stack of ``../shared/eval/backend_plain.py`` (a LanceDB table of turns, no vector
    index, LanceDB's full-text index, hybrid search with reciprocal-rank fusion and a
    ``where`` prefilter), built from this database's rows in a directory beside it, the
    query embedded in both (the same model), interleaved rounds."""
    import lance
    import lancedb
    from lancedb.rerankers import RRFReranker

    start = time.perf_counter()
    turns = lance.dataset(os.path.join(db, "chunks.lance")).to_table(
        columns=["memory_id", "user_id", "speaker", "content", "vector"], filter="chunk_idx = 0"
    )
    plain = lancedb.connect(db + "-plain").create_table("t", turns, mode="overwrite")
    plain.create_fts_index("content", replace=True)
    print(f"\nanchor: {turns.num_rows:,} turns in a plain LanceDB table, full-text index built, in "
          f"{time.perf_counter() - start:.1f} s (no vector index, as the anchor builds none)")  # fmt: skip
    where = "user_id = 'u0' AND speaker = 'Alice'"
    alice_only: list[bool] = []

    def anchor(r: int) -> None:
        query = QUERIES[r % len(QUERIES)]
        vector = [float(x) for x in embedder.embed_query(query)]
        rows = (plain.search(query_type="hybrid").vector(vector).text(query).where(where, prefilter=True)
                .limit(10).rerank(RRFReranker()).to_list())  # fmt: skip
        alice_only.append(len(rows) == 10 and all(row["speaker"] == "Alice" for row in rows))

    def product(r: int) -> None:
        service.memory_search(QUERIES[r % len(QUERIES)], speaker="Alice", user_id="u0", limit=10)

    for r in range(3):
        anchor(r)
        product(r)
    alice_only.clear()
    times = interleaved({"memory_search speaker=Alice": product, "anchor, hybrid, speaker=Alice": anchor}, rounds)
    ours, theirs = (statistics.median(ts) * 1000 for ts in times.values())
    for name, ts in times.items():
        print(f"  {name:<38}{ms(ts)}")
    print(f"  product / anchor p50: {ours / theirs:.2f} (target <= 1.5); the anchor's 10 all Alice's in "
          f"{sum(alice_only)}/{len(alice_only)}")  # fmt: skip
    shutil.rmtree(db + "-plain", ignore_errors=True)


def run_size(n: int, args: argparse.Namespace, embedder: Any, topics: Topics, parent: str) -> None:
    db = os.path.join(parent, f"db-{n}")
    thresholds = {k: v for k, v in (("flat_search_max", args.flat_search_max),
                                    ("vector_index_min_rows", args.vector_index_min_rows)) if v is not None}  # fmt: skip
    store = Store(db, **thresholds)
    service = MemoryService(store, ModelLoader.of(embedder))
    for s in range(5):
        service.store_create(f"u{s}")
        for name in ["Alice", *OTHERS, *(["Tiny"] if s == 0 else [])]:
            service.speaker_register(name, user_id=f"u{s}")
    service.store_create("floor")
    loaded = bulk_load(store, embedder, topics, n, seed=n, no_conversation=args.no_conversation)
    start = time.perf_counter()
    with store.write_lock():
        store.maintain()
    maintain_s = time.perf_counter() - start
    u0 = in_store("u0") + " AND NOT superseded"
    alice = u0 + " AND speaker = 'Alice'"
    tiny = u0 + " AND speaker = 'Tiny'"
    n_u0, n_alice = store.chunks.count(u0), store.chunks.count(alice)
    print(f"\n== {n:,} memories: rows written straight into the chunks table (pyarrow, bulk table.add); vectors "
          f"are precomputed random unit vectors around {len(topics.texts)} embedded sentences (cosine ~0.9), "
          f"{args.no_conversation:.0%} of runs without conversation id ==")  # fmt: skip
    print(f"load: generate {loaded['generate_s']:.1f} s, append {loaded['append_s']:.1f} s "
          f"({n / max(loaded['append_s'], 1e-9):,.0f} rows/s), store.maintain() {maintain_s:.1f} s; "
          f"vector index: {vector_index(store)}; disk {du_mb(db):,.0f} MiB")  # fmt: skip
    print(f"thresholds: flat_search_max {store.flat_search_max:,} rows, vector_index_min_rows "
          f"{store.vector_index_min_rows:,}; scopes: u0 {n_u0:,} (path {path_of(store, n_u0)}), "
          f"u0+Alice {n_alice:,} (path {path_of(store, n_alice)}), u0+Tiny 3 (flat); load average "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    q_vec = embedder.embed_query(QUERIES[0])
    if path_of(store, n_alice).startswith("IVF"):
        print(f"LanceDB plan of the indexed query shape on u0+Alice uses the vector index: "
              f"{plan_says_ann(store, q_vec, alice)}")  # fmt: skip

    # -- reads: interleaved rounds, nothing written meanwhile --------------------------------
    tiny_ok: list[bool] = []
    alice_ok: list[bool] = []

    def q(r: int) -> str:
        return QUERIES[r % len(QUERIES)]

    def search_tiny(r: int) -> None:
        got = service.memory_search(q(r), speaker="Tiny", user_id="u0", limit=10)["memories"]
        tiny_ok.append(sorted(m["id"] for m in got) == loaded["tiny_ids"] and all(m["speaker"] == "Tiny" for m in got))

    def search_alice(r: int) -> None:
        got = service.memory_search(q(r), speaker="Alice", user_id="u0", limit=10)["memories"]
        alice_ok.append(len({m["id"] for m in got}) == 10 and all(m["speaker"] == "Alice" for m in got))

    reads = {
        "memory_search u0, no speaker": lambda r: service.memory_search(q(r), user_id="u0", limit=10),
        "memory_search speaker=Alice": search_alice,
        "memory_search speaker=Tiny (3)": search_tiny,
        "by_speaker Alice, first page": lambda r: service.by_speaker("Alice", user_id="u0"),
        "by_speaker Tiny, first page": lambda r: service.by_speaker("Tiny", user_id="u0"),
        "stores_list (every store's count)": lambda r: service.stores_list(),
    }
    for r in range(3):  # warm-up
        for op in reads.values():
            op(r)
    tiny_ok.clear()
    alice_ok.clear()
    times = interleaved(reads, args.rounds)
    targets = {  # by the operation, the first word of a read's name
        "memory_search": TARGETS["search_p50_ms"].get(n),
        "by_speaker": TARGETS["by_speaker_p50_ms"].get(n),
        "stores_list": TARGETS["stores_list_p50_ms"].get(n),
    }
    print(f"\n{'reads (' + str(args.rounds) + ' interleaved rounds)':<40}{'p50 ms':>9}{'p95 ms':>9}   target")
    for name, ts in times.items():
        limit = targets.get(name.split()[0])
        met = limit is not None and statistics.median(ts) * 1000 <= limit
        target = f"p50 <= {limit:.0f} ms: {'met' if met else 'MISSED'}" if limit else ""
        print(f"  {name:<38}{ms(ts)}   {target}")
    print(f"  Tiny got exactly its 3 memories in {sum(tiny_ok)}/{len(tiny_ok)} searches; Alice got 10 distinct "
          f"memories, all hers, in {sum(alice_ok)}/{len(alice_ok)}")  # fmt: skip

    if args.anchor:
        anchor_against(service, store, embedder, db, args.rounds)

    # -- where memory_search spends its time (speaker=Alice) ------------------------------------
    vec_for: dict[int, Any] = {}
    cands: dict[int, Any] = {}

    def step_embed(r: int) -> None:
        vec_for[r] = embedder.embed_query(query_without_name(q(r), "Alice"))

    scope_rows: dict[int, int] = {}

    def step_counts(r: int) -> None:
        scope_rows[r] = store.chunks.count(alice)

    def step_dense(r: int) -> None:
        cands[r] = search.dense_candidates(
            store, vec_for[r], alice, 10, scope_rows[r], keys=(*search.CANDIDATE_KEYS, "vector")
        )  # with vectors, as the searches side by side read them

    def step_bm25(r: int) -> None:
        matches = store.chunks.text_search(q(r), alice, 40, (*search.CANDIDATE_KEYS, "vector"))
        search.add_bm25(vec_for[r], matches, cands[r])
        search._fuse(cands[r])

    current = u0  # the store's current memories: what memory_search passes as the context of a filtered search
    seeds: dict[int, Any] = {}

    def step_both(r: int) -> None:
        seeds[r] = search.candidate_searches(  # the scope counted beside them, as memory_search does
            store, lambda: vec_for[r], q(r), alice, 40, context=current
        ).context_matches

    lines: dict[int, Any] = {}
    fields: dict[int, Any] = {}

    def step_lines(r: int) -> None:
        rows = [c.row for c in cands[r].values()]
        beside = store.chunks.take_beside([row["_rowid"] for row in rows], RECORD_FIELDS)
        lines[r] = search.Lines.around_replies(
            store, rows, search.reply_seeds(seeds[r], cands[r]), base=current, scope=alice
        )
        fields[r] = beside.result()

    def step_take(r: int) -> None:
        lines[r].take_ahead(store, cands[r], search.reply_seeds(seeds[r], cands[r]), search.CANDIDATE_KEYS)

    neighbour_rows: list[int] = []

    def step_replies_and_neighbours(r: int) -> None:
        cands[r].update(search.replies(store, vec_for[r], seeds[r], alice, cands[r], base=current, lines=lines[r]))
        _, newcomers = search.neighbours(store, vec_for[r], cands[r], {}, base=current, lines=lines[r])
        neighbour_rows.append(len(newcomers))

    def step_fields(r: int) -> None:
        ranked = sorted((c for c in cands[r].values() if c.in_scope), key=lambda c: -c.fused)
        scores = {c.row["memory_id"]: c.fused for c in ranked}
        search.covering(store, vec_for[r], ranked[: 10 + search.COVERAGE_POOL], scores, 10, taken=fields[r])

    steps = {"embed_query": step_embed, "count of the scope (beside the searches)": step_counts, "dense candidates (k=40)": step_dense,
             "bm25 candidates (k=40) + fusion": step_bm25, "  the three searches side by side": step_both,
             "lines, the candidates' records beside": step_lines, "replies' and neighbours' vectors": step_take,
             "replies and neighbours joined": step_replies_and_neighbours,
             "covering selection (+ records not read)": step_fields}  # fmt: skip
    step_times: dict[str, list[float]] = {k: [] for k in steps}
    for r in range(min(args.rounds, 15)):
        for name, fn in steps.items():  # in order: each step needs the previous one
            start = time.perf_counter()
            fn(r)
            step_times[name].append(time.perf_counter() - start)
    print("  memory_search speaker=Alice, step by step (search.py internals, same calls):")
    for name, ts in step_times.items():
        print(f"    {name:<36}{ms(ts)}")
    runs = ("embed_query", "  the three searches side by side", "lines, the candidates' records beside",
            "replies' and neighbours' vectors", "replies and neighbours joined",
            "covering selection (+ records not read)")  # fmt: skip
    path = sum(statistics.median(step_times[name]) for name in runs)
    print(f"    the neighbours' read added {statistics.median(neighbour_rows):,.0f} neighbours (median) with their "
          f"vectors; the steps memory_search runs ({', '.join(n.strip() for n in runs)}) sum to {path * 1000:.1f} ms")  # fmt: skip

    # -- where by_speaker spends its time (Alice, first page) -----------------------------------
    said = in_store("u0") + " AND speaker = 'Alice'"
    # The time window the reads above settled on (none: a speaker this small is sorted whole).
    span = service.pages.spans.get((service.registry.resolve("u0").key, "Alice", True))
    window = said + " AND chunk_idx = 0" + ("" if span is None else f" AND created_us > {service.now_us() - span}")
    page_steps = {
        "resolve + require_speaker (registry)": lambda r: (
            service.registry.resolve("u0"), service.registry.require_speaker("u0", "Alice", writing=False)),
        "count of the speaker's chunk rows": lambda r: store.chunks.count(said),
        "count of the page's time window": lambda r: store.chunks.count(window),
        "page rows (the window's newest 21)": lambda r: service.memories.newest_first(window, 21),
    }  # fmt: skip
    page_times = interleaved(page_steps, min(args.rounds, 15))
    print("  by_speaker Alice first page, step by step (the calls service.by_speaker makes):")
    for name, ts in page_times.items():
        print(f"    {name:<42}{ms(ts)}")

    # -- writes: memory_add vs its floor, same run, interleaved --------------------------------------
    import pyarrow as pa

    table = store.chunks.existing()
    statuses: list[str] = []
    floor_seq = [0]

    def text(r: int, salt: int) -> str:
        return NEW_TEXTS[(r + salt) % len(NEW_TEXTS)].format(n=1000 * salt + r + 7, h=8 + r % 10)

    def add(r: int) -> None:
        answer = service.memory_add(text(r, 1), speaker="Alice", conversation_id=f"bench-{r // 10}", user_id="u0")
        statuses.append(answer["status"])

    def floor(r: int) -> None:
        t = text(r, 2)
        vectors = embedder.embed_passages([t])
        floor_seq[0] += 1
        memory = {"content": t, "speaker": None, "category": "general", "event": None,
                  "conversation_id": None, "role": None}  # fmt: skip
        _, rows = service.memories.new_rows("floor", memory, [t], vectors, seq=floor_seq[0])
        table.add(pa.Table.from_pylist(rows, schema=table.schema))

    def find_duplicate(r: int) -> None:
        service.memories.find_duplicate("u0", text(r, 3), "Alice", f"bench-{r // 10}")

    dup_scope = in_store("u0") + " AND NOT superseded AND speaker = 'Alice'"
    dup_keys = {r: (duplicate_key(text(r, 3)), restatement_key(text(r, 3))) for r in range(args.rounds + 3)}

    def dup_lookup(r: int) -> None:  # the one query of _find_duplicate
        dk, rk = dup_keys[r]
        store.chunks.rows(dup_scope + f" AND chunk_idx = 0 AND (dup_key = {quote(dk)} OR restate_key = {quote(rk)})",
                   columns=("memory_id", "content", "conversation_id"))  # fmt: skip

    writes = {
        "memory_add speaker=Alice": add,
        "floor: embed_passages + 1 append": floor,
        "memories.find_duplicate": find_duplicate,
        "  of which: the key lookup": dup_lookup,
        "registry.resolve (store lookup)": lambda r: service.registry.resolve("u0"),
        "registry.require_speaker": lambda r: service.registry.require_speaker("u0", "Alice", writing=True),
        "commits.last_seq (next seq)": lambda r: service.commits.last_seq("u0"),
        "embed_passages (1 text)": lambda r: embedder.embed_passages([text(r, 4)]),
    }
    times = interleaved(writes, args.rounds)
    add_p50 = statistics.median(times["memory_add speaker=Alice"])
    floor_p50 = statistics.median(times["floor: embed_passages + 1 append"])
    print(
        f"\n{'writes (' + str(args.rounds) + ' interleaved rounds)':<40}{'p50 ms':>9}{'p95 ms':>9}   share of memory_add p50"
    )
    for name, ts in times.items():
        share = "" if name.startswith(("memory_add", "floor")) else f"{statistics.median(ts) / add_p50:6.0%}"
        print(f"  {name:<38}{ms(ts)}   {share}")
    ratio = add_p50 / floor_p50
    print(f"  memory_add / floor (p50): {ratio:.2f}  (target <= {TARGETS['add_ratio']}: "
          f"{'met' if ratio <= TARGETS['add_ratio'] else 'MISSED'}); statuses: "
          f"{ {s: statuses.count(s) for s in set(statuses)} }; memory_add runs store.maintain() every 20th store write "
          f"(some fall in this window)")  # fmt: skip
    stats = table.stats()["fragment_stats"]
    after = interleaved({k: reads[k] for k in ("memory_search speaker=Alice", "memory_search u0, no speaker")},
                        min(args.rounds, 10))  # fmt: skip
    print(f"  reads again with the {stats['num_small_fragments']} small fragments these writes left "
          f"(before the next maintain): " + "; ".join(f"{k} p50 {statistics.median(v) * 1000:.1f} ms"
                                                      for k, v in after.items()))  # fmt: skip

    # -- recall@10 of the store's vector search against exact flat search -------------------------
    scopes = {
        "u0 (all speakers)": u0,
        "u0 + Alice": alice,
        "u0 + me": u0 + " AND speaker = 'me'",
        "u0 + untagged": u0 + " AND speaker IS NULL",
        "u1 (5% store)": in_store("u1") + " AND NOT superseded",
        "u0 + Bob (~0.6%)": u0 + " AND speaker = 'Bob'",
        "u0 + Tiny (3)": tiny,
    }
    vectors = [embedder.embed_query(text) for text in QUERIES[: args.recall_queries]]
    print(f"\nrecall of store.vector_search vs exact flat search, {len(vectors)} queries "
          f"(target recall@10 >= {TARGETS['recall']})")  # fmt: skip
    print(f"  {'scope':<20}{'rows':>9}  {'path':<26}{'recall@10':>10}{'recall@40':>10}{'short':>7}"
          f"{'store p50':>11}{'exact p50':>11}")  # fmt: skip
    for label, where in scopes.items():
        rows = store.chunks.count(where)
        r10, r40, short, t_store, t_exact = [], [], 0, [], []
        for v in vectors:
            for k, sink in ((10, r10), (40, r40)):
                start = time.perf_counter()
                got = [row["chunk_id"] for row in store.chunks.vector_search(v, where, k, ("chunk_id",))]
                if k == 10:
                    t_store.append(time.perf_counter() - start)
                start = time.perf_counter()
                truth = exact(store, v, where, k)
                if k == 10:
                    t_exact.append(time.perf_counter() - start)
                short += len(got) < min(k, rows)
                sink.append(len(set(got) & set(truth)) / max(1, len(truth)))
        mean10, mean40 = statistics.mean(r10), statistics.mean(r40)
        flag = "" if mean10 >= TARGETS["recall"] else "  MISSED"
        print(f"  {label:<20}{rows:>9,}  {path_of(store, rows):<26}{mean10:>10.3f}{mean40:>10.3f}{short:>7}"
              f"{statistics.median(t_store) * 1000:>9.1f}ms{statistics.median(t_exact) * 1000:>9.1f}ms{flag}")  # fmt: skip
    registry = store.registry.table
    reg_stats = registry.stats()["fragment_stats"]
    before = interleaved({"resolve": lambda r: service.registry.resolve("u0")}, 20)["resolve"]
    from datetime import timedelta

    registry.optimize(cleanup_older_than=timedelta(hours=1))
    after_opt = interleaved({"resolve": lambda r: service.registry.resolve("u0")}, 20)["resolve"]
    print(f"\nregistry table: {registry.count_rows()} rows in {reg_stats['num_fragments']} fragments (store.maintain() "
          f"compacts it too); registry.resolve p50 {statistics.median(before) * 1000:.1f} ms, "
          f"{statistics.median(after_opt) * 1000:.1f} ms after registry.optimize()")  # fmt: skip
    now, peak = rss_mb()
    print(f"RSS now {now:,.0f} MiB, peak {peak:,.0f} MiB (process: model + LanceDB + this size's data); "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    service.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--sizes", default="10000,100000", help="comma-separated memory counts, e.g. 10000,100000,1000000"
    )
    parser.add_argument("--rounds", type=int, default=30, help="interleaved measurement rounds per operation")
    parser.add_argument("--recall-queries", type=int, default=20)
    parser.add_argument(
        "--no-conversation", type=float, default=0.3, help="share of memories without a conversation id"
    )
    parser.add_argument("--flat-search-max", type=int, default=None, help="override Store's default (experiments)")
    parser.add_argument(
        "--vector-index-min-rows", type=int, default=None, help="override Store's default (experiments)"
    )
    parser.add_argument("--model-cache", default=default_model_cache())
    parser.add_argument("--db", default=None, help="parent directory for the databases (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument(
        "--anchor", action="store_true", help="also time the anchor's search (backend_plain.py) on the same memories"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    embedder = load_embedder(DEFAULT_MODEL, args.model_cache)
    topics = Topics(embedder)
    now, _ = rss_mb()
    print(f"model {embedder.model_id} loaded; {len(topics.texts)} topic sentences embedded in "
          f"{topics.embed_seconds:.1f} s; RSS {now:,.0f} MiB; {os.cpu_count()} CPUs; load average "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    parent = args.db or tempfile.mkdtemp(prefix="wontopos-scale-")
    try:
        for n in sizes:
            start = time.perf_counter()
            run_size(n, args, embedder, topics, parent)
            print(f"({n:,}: {time.perf_counter() - start:.0f} s)")
            if not args.keep:
                shutil.rmtree(os.path.join(parent, f"db-{n}"), ignore_errors=True)
    finally:
        if not args.keep and args.db is None:
            shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()
