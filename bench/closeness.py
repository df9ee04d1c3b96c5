"""Where a search's close matches end: the distance from the best result's similarity
that the memory browser reads as "close match" (``CLOSE_WITHIN`` in
``wontopos_mcp/http/ui/format.js``), measured on the public conversation sets.

Evaluation only, never in CI. It reads a dump of ``bench/ranking_dump.py`` (every search
the product made on the sets, what it answered, every chunk's vector) and, for each
search, the top 10 the product answered with each memory's similarity (its best chunk's
cosine to the query, as the API reports it) and whether it holds an evidence turn. For
each candidate distance it prints the share of the top 10's evidence that lies within it
of the best result (what a reader would miss below the line) and the size of the close
group (how much of the 10 still reads as close):

    PYTHONPATH=. .venv/bin/python bench/closeness.py /tmp/rdump --sets friendsqa,locomo
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ranking_replay as replay  # a sibling script: the dump's reader

DISTANCES = (0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.10)


def top_ten(dump: Path, name: str) -> list[list[tuple[float, bool]]]:
    """Per search of the set: (similarity, holds evidence) for each memory of the top 10."""
    searches = []
    for q in replay.load_questions(dump, name):
        for s in (q.filter, q.nofilter):
            if s is None:
                continue
            evidence = set(q.evidence)
            searches.append(
                [
                    (
                        float(max(s.cos[i] for i in s.store.by_mid[mid])),
                        bool(set(s.store.turns.get(mid, [])) & evidence),
                    )
                    for mid in s.product[:10]
                    if s.store.by_mid.get(mid)
                ]
            )
    return [top for top in searches if top]


def report(name: str, searches: list[list[tuple[float, bool]]]) -> None:
    found = sum(hit for top in searches for _, hit in top)
    print(f"{name}: {len(searches)} searches, {found} evidence memories in their top 10")
    for distance in DISTANCES:
        sizes, inside = [], 0
        for top in searches:
            best = top[0][0]
            close = [hit for sim, hit in top if sim >= best - distance]
            sizes.append(len(close))
            inside += sum(close)
        print(
            f"  within {distance:.2f}: evidence inside {inside / max(found, 1):.2f}, close group median "
            f"{np.median(sizes):.0f} (mean {np.mean(sizes):.1f}), one to three close in {np.mean([1 <= n <= 3 for n in sizes]):.2f}"
        )
    hits = [sim for top in searches for sim, hit in top if hit]
    misses = [sim for top in searches for sim, hit in top if not hit]
    print(f"  similarity p10/p50/p90: evidence {np.percentile(hits, [10, 50, 90]).round(3)}, "
          f"the rest {np.percentile(misses, [10, 50, 90]).round(3)}")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump", type=Path)
    ap.add_argument("--sets", default=",".join(replay.SETS))
    a = ap.parse_args()
    for name in a.sets.split(","):
        if (a.dump / f"{name}.perq.jsonl").exists():
            report(name, top_ten(a.dump, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
