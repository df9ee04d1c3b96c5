"""Duplicate detection on the multilingual sets in tests/data/.

Stores the first text of each pair, then writes the second, through the real service
(real LanceDB, real model; the restatement key finds the stored memory, the text
comparison decides) and prints, per language and overall:

* restatements caught  — pairs answered ``status: "duplicate"`` (want high),
* one-detail changes kept — pairs answered ``status: "stored"`` (want 100 %),
* rewordings kept — the dev set's former restatements that differ in a word that is no
  filler, answered ``status: "stored"`` (every word but a filler counts; want 100 %).

    python bench/duplicates.py [--set dev|heldout] [--model-cache DIR]

``dev`` is the set the word lists were written against; ``heldout`` was written by
someone who never saw the detector, and is the honest measure.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from wontopos_mcp.config import DEFAULT_MODEL, default_model_cache
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import ModelLoader, load_embedder
from wontopos_mcp.storage.adapter import Store

DATA_DIR = Path(__file__).resolve().parents[1] / "tests" / "data"
SETS = {"dev": "duplicates.json", "heldout": "duplicates_heldout.json"}


def run(service: MemoryService, pairs: list[list[str]], prefix: str) -> list[str]:
    statuses = []
    for i, (first, second) in enumerate(pairs):
        store = f"{prefix}-{i}"
        service.store_create(store)
        service.memory_add(first, user_id=store)
        statuses.append(service.memory_add(second, user_id=store)["status"])
    return statuses


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-cache", default=default_model_cache())
    parser.add_argument("--set", choices=sorted(SETS), default="dev", help="dev (tuned on) or heldout (written apart)")
    args = parser.parse_args()
    raw = json.loads((DATA_DIR / SETS[args.set]).read_text(encoding="utf-8"))
    data = {k: v for k, v in raw.items() if not k.startswith("_")}
    embedder = load_embedder(DEFAULT_MODEL, args.model_cache)
    service = MemoryService(Store(tempfile.mkdtemp(prefix="wontopos-dups-")), ModelLoader.of(embedder))
    totals = {"caught": [0, 0], "kept": [0, 0], "reworded": [0, 0]}
    print(f"{'lang':<6}{'restatements caught':>22}{'changes kept':>16}{'rewordings kept':>19}")
    for lang, sets in data.items():
        restated = run(service, sets["restatements"], f"{lang}-r")
        changed = run(service, sets["changes"], f"{lang}-c")
        reworded = run(service, sets.get("rewordings", []), f"{lang}-w")
        row = {
            "caught": (restated.count("duplicate"), len(restated)),
            "kept": (changed.count("stored"), len(changed)),
            "reworded": (reworded.count("stored"), len(reworded)),
        }
        for name, (hit, n) in row.items():
            totals[name][0] += hit
            totals[name][1] += n
        print(f"{lang:<6}" + "".join(_rate(*row[name], width) for name, width in zip(row, (14, 9, 12))))
    print(f"{'all':<6}" + "".join(_rate(*totals[name], width) for name, width in zip(totals, (14, 9, 12))))


def _rate(hit: int, n: int, width: int) -> str:
    return f"{hit:>{width}}/{n:<3} {hit / n:>4.0%}" if n else f"{'-':>{width + 9}}"


if __name__ == "__main__":
    main()
