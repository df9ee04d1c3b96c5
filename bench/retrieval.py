"""Speaker-attributed retrieval quality on the multilingual set in bench/data/retrieval.json.

Loads the 12 conversations (2 each in en, de, ja, ko, zh, ru) into ONE fresh store
through the real service (every speaker registered, every turn added with ``speaker=``
and ``conversation_id=``, in conversation order), then asks each question with the asked
speaker as the filter and prints R@1, R@5 and MRR (at 10) for three rankings:

* ``vector`` / ``bm25``: ``wontopos_mcp.engine.ranking.search_memories(mode=...)`` called directly
  with the where-clause the service builds (store, speaker, not superseded) and the query
  the service would send (the filtered speaker's name dropped);
* ``hybrid``: ``service.memory_search(query, speaker=..., limit=10)``, the product.

Per language (native questions), for the cross-language questions, overall, and split by
whether the gold turn answers the other person's previous turn (what neighbour
propagation targets). Then the same without a speaker filter, a few ranking ablations
(module constants of ``wontopos_mcp.engine.ranking`` changed for one pass, then restored), and
the median query latency per mode over interleaved runs, twice: as loaded (the fragments
of the last < 50 single adds not yet compacted) and after ``store.maintain()``.

    PYTHONPATH=. python bench/retrieval.py [--runs 10] [--model-cache DIR] [--db DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from wontopos_mcp.config import DEFAULT_MODEL, default_model_cache
from wontopos_mcp.engine import ranking as search
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader, load_embedder
from wontopos_mcp.rules.names import store_key
from wontopos_mcp.rules.query_names import query_without_name
from wontopos_mcp.storage.adapter import Store
from wontopos_mcp.storage.where import in_store, quote

DATA = Path(__file__).resolve().parent / "data" / "retrieval.json"
STORE = "retrieval"
LIMIT = 10
LANGS = ("en", "de", "ja", "ko", "zh", "ru")

Ranker = Callable[[dict[str, Any]], list[str]]


def load(service: MemoryService, data: dict[str, Any]) -> dict[tuple[int, int], str]:
    """Every turn as a memory of the one store; (conversation, turn) -> memory id."""
    service.store_create(STORE)
    for name in sorted({n for c in data["conversations"] for n in c["speakers"]}):
        service.speaker_register(name, user_id=STORE)
    ids: dict[tuple[int, int], str] = {}
    for ci, conv in enumerate(data["conversations"]):
        for ti, (who, text) in enumerate(conv["turns"]):
            answer = service.memory_add(text, speaker=who, conversation_id=conv["id"], user_id=STORE)
            if answer["status"] != "stored":
                raise SystemExit(f"turn {ci}/{ti} was not stored: {answer}")
            ids[(ci, ti)] = answer["id"]
    return ids


def scope_where(speaker: str | None) -> str:
    """The where-clause ``memory_search`` builds for this store and speaker (no filters)."""
    parts = [in_store(store_key(STORE))]
    if speaker is not None:
        parts.append(f"speaker = {quote(speaker)}")
    parts.append("NOT superseded")
    return " AND ".join(parts)


def direct(service: MemoryService, mode: str, *, filtered: bool = True,
           strip: Callable[[str, str | None], str] = query_without_name) -> Ranker:  # fmt: skip
    embedder = service.commits.embedder()

    def rank(q: dict[str, Any]) -> list[str]:
        speaker = q["speaker"] if filtered else None
        query = strip(q["query"], speaker)
        hits = search.search_memories(
            service.store, embedder, query, scope_where(speaker), LIMIT, mode=mode, context=scope_where(None)
        )
        return [row["memory_id"] for row, _ in hits]

    return rank


def via_service(service: MemoryService, *, filtered: bool = True) -> Ranker:
    def rank(q: dict[str, Any]) -> list[str]:
        speaker = q["speaker"] if filtered else None
        answer = service.memory_search(q["query"], speaker=speaker, user_id=STORE, limit=LIMIT)
        return [m["id"] for m in answer["memories"]]

    return rank


def strip_anywhere(query: str, name: str | None) -> str:
    """Drop the speaker's name wherever it occurs (also glued to CJK/Korean particles)."""
    if name is None or name == "me":
        return query
    stripped = query.replace(name, " ")
    return stripped if stripped.strip(" ?？!.,") else query


# -- metrics -----------------------------------------------------------------------------


def ranks(ranker: Ranker, questions: list[dict[str, Any]], ids: dict[tuple[int, int], str]) -> list[int | None]:
    """1-based rank of each question's gold memory in the top LIMIT, else None."""
    out: list[int | None] = []
    for q in questions:
        got = ranker(q)
        gold = ids[(q["conversation"], q["turn"])]
        out.append(got.index(gold) + 1 if gold in got else None)
    return out


def metrics(found: list[int | None]) -> tuple[float, float, float]:
    n = len(found) or 1
    r1 = sum(1 for r in found if r == 1) / n
    r5 = sum(1 for r in found if r is not None and r <= 5) / n
    mrr = sum(1.0 / r for r in found if r is not None) / n
    return r1, r5, mrr


def groups(questions: list[dict[str, Any]]) -> list[tuple[str, list[int]]]:
    idx = range(len(questions))
    out = [(lang, [i for i in idx if questions[i]["lang"] == lang and not questions[i].get("cross")]) for lang in LANGS]
    out.append(("cross", [i for i in idx if questions[i].get("cross")]))
    out.append(("topic<-prev", [i for i in idx if questions[i]["topic_in_previous_turn"]]))
    out.append(("self-cont.", [i for i in idx if not questions[i]["topic_in_previous_turn"]]))
    out.append(("all", list(idx)))
    return out


def print_table(title: str, results: dict[str, list[int | None]], questions: list[dict[str, Any]]) -> None:
    modes = list(results)
    print(f"\n{title}")
    print(f"{'':<12}{'n':>3}  " + "".join(f"{m:^21}" for m in modes))
    print(f"{'':<12}{'':>3}  " + "".join(f"{'R@1':>6}{'R@5':>6}{'MRR':>7}  " for _ in modes))
    for name, members in groups(questions):
        cells = ""
        for m in modes:
            r1, r5, mrr = metrics([results[m][i] for i in members])
            cells += f"{r1:>6.2f}{r5:>6.2f}{mrr:>7.3f}  "
        print(f"{name:<12}{len(members):>3}  {cells}")


@contextmanager
def patched(**values: Any) -> Iterator[None]:
    """Change ranking constants of ``wontopos_mcp.engine.ranking`` for one pass (ablations)."""
    saved = {k: getattr(search, k) for k in values}
    for k, v in values.items():
        setattr(search, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(search, k, v)


# -- latency -------------------------------------------------------------------------------


def latencies(rankers: dict[str, Callable[[dict[str, Any]], Any]], questions: list[dict[str, Any]], runs: int) -> dict[str, list[float]]:  # fmt: skip
    """Each query through every mode, modes interleaved and rotated, ``runs`` times."""
    times: dict[str, list[float]] = {m: [] for m in rankers}
    names = list(rankers)
    for run in range(runs):
        for qi, q in enumerate(questions):
            shift = (run + qi) % len(names)
            for m in names[shift:] + names[:shift]:
                start = time.perf_counter()
                rankers[m](q)
                times[m].append(time.perf_counter() - start)
    return times


def print_latencies(timed: dict[str, Callable[[dict[str, Any]], Any]], questions: list[dict[str, Any]],
                    runs: int, store: Store, state: str) -> None:  # fmt: skip
    stats = store.chunks.existing().stats()["fragment_stats"]
    times = latencies(timed, questions, runs)
    print(f"\nquery latency {state} ({stats['num_fragments']} fragments, {stats['num_small_fragments']} small): "
          f"{runs} interleaved runs x {len(questions)} questions per mode; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    for m, ts in times.items():
        ts_sorted = sorted(ts)
        p95 = ts_sorted[int(0.95 * (len(ts_sorted) - 1))]
        print(f"  {m:<32} median {statistics.median(ts) * 1000:6.1f} ms   p95 {p95 * 1000:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-cache", default=default_model_cache())
    parser.add_argument("--runs", type=int, default=10, help="interleaved timing runs over all questions")
    parser.add_argument("--db", default=None, help="an empty directory for the database (default: a temporary one)")
    args = parser.parse_args()
    data = json.loads(DATA.read_text(encoding="utf-8"))
    questions = data["questions"]
    embedder = load_embedder(DEFAULT_MODEL, args.model_cache)
    service = MemoryService(Store(args.db or tempfile.mkdtemp(prefix="wontopos-retrieval-")), ModelLoader.of(embedder))
    start = time.perf_counter()
    ids = load(service, data)
    n_turns = len(ids)
    per_speaker = {n: sum(1 for c in data["conversations"] for w, _ in c["turns"] if w == n)
                   for c in data["conversations"] for n in c["speakers"]}  # fmt: skip
    print(f"loaded {n_turns} turns of {len(data['conversations'])} conversations into ONE store "
          f"'{STORE}' in {time.perf_counter() - start:.1f} s; {len(per_speaker)} speakers, "
          f"{min(per_speaker.values())}-{max(per_speaker.values())} memories each (the filtered scope); "
          f"{len(questions)} questions ({sum(1 for q in questions if q.get('cross'))} cross-language, "
          f"{sum(1 for q in questions if q['topic_in_previous_turn'])} whose topic is named only in the "
          f"other person's previous turn); model {embedder.model_id}; load average {os.getloadavg()[0]:.1f}")  # fmt: skip

    rankers = {"vector": direct(service, "vector"), "bm25": direct(service, "bm25"), "hybrid": via_service(service)}
    results = {m: ranks(r, questions, ids) for m, r in rankers.items()}
    same = ranks(direct(service, "hybrid"), questions, ids)
    print_table(f"speaker filter = the asked speaker (R@k and MRR at {LIMIT}; hybrid = service.memory_search)",
                results, questions)  # fmt: skip
    if same != results["hybrid"]:
        print("WARNING: search_memories(mode='hybrid') with the service's where-clause ranked differently "
              "from service.memory_search")  # fmt: skip

    unfiltered = {
        "vector": ranks(direct(service, "vector", filtered=False), questions, ids),
        "bm25": ranks(direct(service, "bm25", filtered=False), questions, ids),
        "hybrid": ranks(via_service(service, filtered=False), questions, ids),
    }
    print_table(f"no speaker filter (scope = all {n_turns} turns; the name stays in the query)", unfiltered, questions)

    ablations: list[tuple[str, dict[str, Any], Callable[[str, str | None], str]]] = [
        ("hybrid as shipped", {}, query_without_name),
        ("no neighbour propagation", {"NEIGHBOUR_WEIGHTS": {}}, query_without_name),
        ("neighbours: -1 .5 only", {"NEIGHBOUR_WEIGHTS": {-1: 0.5}}, query_without_name),
        ("neighbours: -1 .5, +1 .1", {"NEIGHBOUR_WEIGHTS": {-1: 0.5, 1: 0.1}}, query_without_name),
        ("neighbours: -1 .7 only", {"NEIGHBOUR_WEIGHTS": {-1: 0.7}}, query_without_name),
        ("neighbours x2 (-1 .6, +1 .4, -2 .3, +2 .2)",
         {"NEIGHBOUR_WEIGHTS": {-1: 0.6, 1: 0.4, -2: 0.3, 2: 0.2}}, query_without_name),
        ("dense only + neighbours (bm25 0)", {"BM25_WEIGHT": 0.0, "DENSE_WEIGHT": 1.0}, query_without_name),
        ("bm25 0.5 / dense 0.5", {"BM25_WEIGHT": 0.5, "DENSE_WEIGHT": 0.5}, query_without_name),
        ("name dropped in any script", {}, strip_anywhere),
    ]  # fmt: skip
    print("\nhybrid ablations (speaker filter on; search_memories called directly; constants of "
          "wontopos_mcp.engine.ranking changed for one pass)")  # fmt: skip
    print(f"{'variant':<44}{'R@1':>6}{'R@5':>6}{'MRR':>7}  {'topic<-prev R@1/R@5':>20}  "
          f"{'self-cont. R@1/R@5':>19}  {'ja+zh+ko R@1':>12}")  # fmt: skip
    prev = [i for i, q in enumerate(questions) if q["topic_in_previous_turn"]]
    selfc = [i for i, q in enumerate(questions) if not q["topic_in_previous_turn"]]
    cjk = [i for i, q in enumerate(questions) if q["lang"] in ("ja", "zh", "ko") and not q.get("cross")]
    for label, constants, strip in ablations:
        with patched(**constants):
            found = ranks(direct(service, "hybrid", strip=strip), questions, ids)
        r1, r5, mrr = metrics(found)
        p1, p5, _ = metrics([found[i] for i in prev])
        s1, s5, _ = metrics([found[i] for i in selfc])
        c1, _, _ = metrics([found[i] for i in cjk])
        print(
            f"{label:<44}{r1:>6.2f}{r5:>6.2f}{mrr:>7.3f}  {p1:>12.2f} / {p5:.2f}  {s1:>11.2f} / {s5:.2f}  {c1:>12.2f}"
        )

    timed = {
        "embed_query only": lambda q: embedder.embed_query(query_without_name(q["query"], q["speaker"])),
        "vector": rankers["vector"],
        "bm25": rankers["bm25"],
        "hybrid (search_memories)": direct(service, "hybrid"),
        "hybrid (service.memory_search)": rankers["hybrid"],
    }
    if args.runs:  # --runs 0: the quality tables only
        print_latencies(timed, questions, args.runs, service.store, "as loaded")
        with service.store.write_lock():
            service.store.maintain()
        print_latencies(timed, questions, args.runs, service.store, "after store.maintain()")
    service.close()


if __name__ == "__main__":
    main()
