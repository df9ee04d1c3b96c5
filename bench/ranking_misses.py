"""Where the evidence turns a search missed stand, over a dump of ``bench/ranking_dump.py``.

Evaluation only, never in CI. For the questions whose answer lies in several turns (or in
one, ``--one``), with or without the speaker filter, every evidence turn the product's top
5 missed is placed: in its top 20 or not; among the product's candidates (the memories of
the k nearest chunk rows of the scope by cosine, and the k best full-text matches, k as the
product takes it for the search's limit: 80 at the harnesses' 20), or in neither; in a conversation
that a top-5 result comes from, or within two turns of one. So the next ranking change can
be aimed at the misses it can reach: a re-ranking helps only the candidates, a candidate
source only the others.

    PYTHONPATH=. .venv/bin/python bench/ranking_misses.py /tmp/rdump [--set locomo] [--nofilter] [--one]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ranking_replay  # beside this script (bench/ is no package)

ORDER = (
    "found in the top 5", "missed", "  in the top 20", "  outside the scope", "  a candidate by cosine",
    "  a candidate by full text", "  a candidate by neither", "  in a conversation of the top 5",
    "  within two turns of a top-5 result", "not stored",
)  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump", type=Path)
    ap.add_argument("--set", default="locomo", choices=ranking_replay.SETS)
    ap.add_argument("--nofilter", action="store_true", help="the searches without the speaker filter")
    ap.add_argument("--one", action="store_true", help="questions with one evidence turn instead of several")
    a = ap.parse_args()
    counts: Counter[str] = Counter()
    cosine_ranks: list[int] = []
    chunks: Counter[int] = Counter()
    for q in ranking_replay.load_questions(a.dump, a.set):
        search = q.nofilter if a.nofilter else q.filter
        if search is None or q.filter is None or q.several == a.one:
            continue
        store = search.store
        top = search.product[:5]
        top_conversations = {store.conv_of.get(mid) for mid in top}
        memory_of = {turn: mid for mid, turns in store.turns.items() for turn in turns}
        k = max(search.limit * 4, ranking_replay.Knobs().floor)  # what each candidate search reads
        best = {mid: ranking_replay.best_chunk(search, mid, search.cos)[0] for mid in search.scope}
        by_cosine = {mid: n for n, mid in enumerate(sorted(best, key=lambda m: -best[m]))}
        scope_rows = [i for i, mid in enumerate(store.mids) if mid in search.scope]
        nearest = {store.mids[i] for i in sorted(scope_rows, key=lambda i: -search.cos[i])[:k]}
        by_text = {mid for mid, _ in search.matches[:k]}
        for turn in q.evidence:
            mid = memory_of.get(turn)
            if mid is None:
                counts["not stored"] += 1
                continue
            if mid in top:
                counts["found in the top 5"] += 1
                continue
            counts["missed"] += 1
            counts["  in the top 20"] += mid in search.product[:20]
            if mid not in search.scope:
                counts["  outside the scope"] += 1
                continue
            dense, text = mid in nearest, mid in by_text
            counts["  a candidate by cosine"] += dense
            counts["  a candidate by full text"] += text
            counts["  a candidate by neither"] += not dense and not text
            counts["  in a conversation of the top 5"] += store.conv_of.get(mid) in top_conversations
            counts["  within two turns of a top-5 result"] += any(
                store.around(other, offset, 1 << 30) == mid for other in top for offset in (-2, -1, 1, 2)
            )
            cosine_ranks.append(by_cosine[mid])
            chunks[len(store.by_mid[mid])] += 1
    which = f"{a.set}, {'one evidence turn' if a.one else 'several evidence turns'}, {'no filter' if a.nofilter else 'the speaker filter'}"
    print(f"evidence turns of the questions with {which}:")
    for name in ORDER:
        if name in counts:
            print(f"  {name:<42}{counts[name]:>6}")
    if cosine_ranks:
        quartiles = np.percentile(cosine_ranks, [25, 50, 75]).round().astype(int).tolist()
        print(f"  the missed ones' rank by cosine in the scope, quartiles: {quartiles}")
        print(f"  their sentence chunks: {dict(sorted(chunks.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
