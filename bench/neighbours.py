"""The neighbourhood read of ``memory_search`` against a reference revision's, on a kept
``bench/scale.py`` database: old and new interleaved in one process on the same data (so
the ratios hold on a loaded machine), and their answers compared.

    PYTHONPATH=. .venv/bin/python bench/scale.py --sizes 100000 --keep --db /tmp/scale
    PYTHONPATH=. .venv/bin/python bench/neighbours.py /tmp/scale/db-100000 --reference main

The reference's ``engine/ranking.py`` (``git show REF:...``) is loaded beside today's; for
each query (speaker Alice, and no speaker) both run the replies and the neighbourhood
steps on the same candidates, and whole ``search_memories``; every answer must be equal
(ids, similarities, order). Evaluation only, never in CI.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import types
from typing import Any

from wontopos_mcp.config import DEFAULT_MODEL, default_model_cache
from wontopos_mcp.engine import ranking
from wontopos_mcp.model.embeddings import load_embedder
from wontopos_mcp.rules.query_names import query_without_name
from wontopos_mcp.storage.adapter import Store
from wontopos_mcp.storage.where import search_scope

sys.path.insert(0, os.path.dirname(__file__))
from scale import QUERIES


def _step(module: Any, name: str) -> Any:
    """A ranking step of either revision (private names, ``_replies``, before issue 33)."""
    return getattr(module, name, None) or getattr(module, "_" + name)


def reference(rev: str) -> types.ModuleType:
    source = subprocess.run(
        ["git", "show", f"{rev}:wontopos_mcp/engine/ranking.py"], capture_output=True, text=True, check=True
    ).stdout
    module = types.ModuleType("reference_ranking")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:ranking.py", "exec"), module.__dict__)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("--reference", default="main", help="git revision whose ranking.py is the old read")
    parser.add_argument("--store", default="u0")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    old = reference(args.reference)
    embedder = load_embedder(DEFAULT_MODEL, default_model_cache())
    store = Store(args.db)
    key = args.store
    context = search_scope(key, None, False, [])
    times: dict[str, list[float]] = {}
    differences = compared = 0
    whole = 0

    def plain(out: Any) -> Any:
        replies, (found_nb, newcomers) = out
        return (
            {m: (dict(c.row), c.dense, c.in_scope) for m, c in replies.items()},
            found_nb,
            {m: (dict(c.row), c.dense, c.bm25, c.in_scope) for m, c in newcomers.items()},
        )

    for text in QUERIES:
        for speaker in ("Alice", None):
            where = search_scope(key, speaker, False, [])
            query = query_without_name(text, speaker) if speaker else text
            scope_rows = store.chunks.count(where)
            vector = embedder.embed_query(query)
            found = ranking.candidate_searches(
                store, lambda v=vector: v, query, where, 40, scope_rows=scope_rows, context=context if speaker else None
            )
            seeds = found.context_matches if speaker else found.matches
            tag = "Alice" if speaker else "all"
            for _ in range(args.rounds):
                outs, hits = [], []
                for label, module in (("old", old), ("new", ranking)):
                    cands = ranking.dense_candidates(
                        store, vector, where, 10, scope_rows, first=[dict(r) for r in found.nearest]
                    )
                    ranking.add_bm25(vector, [dict(r) for r in found.matches], cands)
                    start = time.perf_counter()
                    replies = _step(module, "replies")(store, vector, seeds, where, cands, base=context)
                    middle = time.perf_counter()
                    cands.update(replies)
                    nb = _step(module, "neighbours")(store, vector, cands, {}, base=context)
                    end = time.perf_counter()
                    times.setdefault(f"{tag} replies {label}", []).append((middle - start) * 1000)
                    times.setdefault(f"{tag} neighbours {label}", []).append((end - middle) * 1000)
                    outs.append(plain((replies, nb)))
                    lines = ranking.Lines(store, key, [c.row for c in cands.values()], base=context)
                for label, module in (("old", old), ("new", ranking)):
                    start = time.perf_counter()
                    got = module.search_memories(store, embedder, query, where, 10, context=context)
                    times.setdefault(f"{tag} search_memories {label}", []).append((time.perf_counter() - start) * 1000)
                    hits.append([(row["memory_id"], similarity) for row, similarity in got])
                compared += 1
                if outs[0] != outs[1] or hits[0] != hits[1]:
                    differences += 1
                    again = old.search_memories(store, embedder, query, where, 10, context=context)
                    steady = [(row["memory_id"], similarity) for row, similarity in again] == hits[0]
                    print(f"difference: {query!r} speaker={speaker}: steps {'same' if outs[0] == outs[1] else 'DIFFER'}, "
                          f"search {'same' if hits[0] == hits[1] else 'differs'} (the old code again: "
                          f"{'same as before' if steady else 'differs from itself'})")  # fmt: skip
                whole += lines.whole
    print(f"{args.db}: {compared} comparisons, {differences} differences; whole-conversation read taken in "
          f"{whole}/{compared}; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'step (ms, interleaved)':<36}{'old p50':>9}{'new p50':>9}{'new/old':>9}")
    for name in sorted({n.rsplit(" ", 1)[0] for n in times}):
        o, n = statistics.median(times[name + " old"]), statistics.median(times[name + " new"])
        print(f"  {name:<34}{o:9.1f}{n:9.1f}{n / o:9.2f}")


if __name__ == "__main__":
    main()
