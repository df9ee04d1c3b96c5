"""Dump what the ranking sees, once, so rankings can be replayed offline (``bench/ranking_replay.py``).

Evaluation only, never in CI. Runs the three public sets of ``../shared/eval`` (the same
arguments as its ``dev_sets.py``) through the product, as its harnesses do, with a backend
that answers exactly as ``backend_wontopos.py`` and also records, for every search the
product makes:

* per store (once, when its first search runs): every current chunk row's memory id, the
  harness's turn ids it stands for, conversation, ``seq``, chunk index, speaker and vector;
* per search: the query as ranked (names dropped by the product), its vector, the memory
  ids in scope, the full-text matches inside the scope and inside the context (the whole
  store) with their BM25 scores (400 each: every candidate search of the product reads 80),
  the speakers the query names, the limit, and the product's answer.

Each harness also writes its per-question dump (``--dump``: evidence, category, figures), and
its result table (``--out``), so the replay scores questions exactly as the harness does.

    PYTHONPATH=. .venv/bin/python bench/ranking_dump.py --out /tmp/rdump [--sets locomo,friendsqa,longmemeval] [--quick]

About an hour on 2 cores for the three (each set in turn, LoCoMo first; ``--quick`` takes
the harness's small samples). The product's figures are printed as ``dev_sets.py`` prints
them (``bench/ranking_replay.py --table``).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
# The arguments dev_sets.py gives each harness (full run, then --quick), as it has them.
SETS = {
    "locomo": ("locomo_speaker_eval.py", ["--variants", "raw"], ["--limit-convs", "3"]),
    "friendsqa": ("friendsqa_speaker_eval.py", ["--variants", "raw"], ["--limit-convs", "4"]),
    "longmemeval": ("longmemeval_speaker_eval.py", ["--per-type", "5"], ["--per-type", "3", "--pool"]),
}
TEXT_K = 400
_ENV = "WONTOPOS_RANKING_DUMP"  # the file this backend appends to (set by main for the harness)


def _b64(vector: Any) -> str:
    return base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode()


# --------------------------------------------------------------------------- the backend
_call = threading.local()


def _install_recorder() -> None:
    """Wrap the product's ranking entry point: it ranks as before, and what it saw is written."""
    from wontopos_mcp.engine import ranking

    if getattr(ranking, "_dump_installed", False):
        return
    real = ranking.search_memories

    def recorded(store: Any, embedder: Any, query: str, where: str, limit: int, **kw: Any) -> Any:
        hits = real(store, embedder, query, where, limit, **kw)
        backend = getattr(_call, "backend", None)
        if backend is not None and kw.get("mode", "hybrid") == "hybrid":
            backend.record(store, embedder, query, where, limit, kw, hits)
        return hits

    ranking.search_memories = recorded
    ranking._dump_installed = True  # type: ignore[attr-defined]


def make_backend(conv_id: str, speakers: list[str]) -> Any:
    sys.path.insert(0, str(EVAL))
    from backend_wontopos import WontoposBackend  # type: ignore[import-not-found]

    _install_recorder()

    class DumpBackend(WontoposBackend):  # type: ignore[misc]
        def __init__(self, conv_id: str, speakers: list[str]) -> None:
            super().__init__(conv_id, speakers)
            self.label = conv_id
            self.turns: dict[str, list[str]] = {}  # memory id -> harness turn ids
            self.texts: dict[str, str] = {}  # memory id -> its text (whole-turn vectors, offline)
            self.out = open(os.environ[_ENV], "a")  # noqa: SIM115 - closed in close()
            self.snapshot_rows = -1

        def add(self, text: str, speaker: str, meta: dict[str, Any]) -> Any:
            mid = super().add(text, speaker, meta)
            if mid is not None:
                self.turns.setdefault(mid, []).append(str(meta["id"]))
                self.texts.setdefault(mid, text)
            return mid

        def add_many(self, items: list[Any]) -> Any:
            ids = super().add_many(items)
            for mid, (text, _, meta) in zip(ids, items):
                if mid is not None and str(meta["id"]) not in self.turns.get(mid, []):
                    self.turns.setdefault(mid, []).append(str(meta["id"]))
                    self.texts.setdefault(mid, text)
            return ids

        def search(self, query: str, speaker: str | None, k: int) -> Any:
            _call.backend, _call.query, _call.speaker = self, query, speaker
            try:
                return super().search(query, speaker, k)
            finally:
                _call.backend = None

        def record(self, store: Any, embedder: Any, query: str, where: str, limit: int, kw: dict, hits: Any) -> None:
            context = kw.get("context") or where
            count = store.chunks.count(context)
            if count != self.snapshot_rows:
                rows = store.chunks.rows(
                    context,
                    columns=("memory_id", "conversation_id", "seq", "chunk_idx", "speaker", "vector"),
                    row_ids=True,
                )
                self.out.write(json.dumps({
                    "kind": "store", "store": self.label,
                    "rows": [
                        [r["memory_id"], r["conversation_id"], r["seq"], r["chunk_idx"], r["speaker"], r["_rowid"]]
                        for r in rows
                    ],
                    "vectors": _b64([r["vector"] for r in rows]),
                    "turns": self.turns, "texts": self.texts,
                }) + "\n")  # fmt: skip
                self.snapshot_rows = count
            scope = sorted({r["memory_id"] for r in store.chunks.rows(where, columns=("memory_id",))})

            def matches(w: str) -> list[list[Any]]:
                return [
                    [r["memory_id"], float(r["_score"])]
                    for r in store.chunks.text_search(query, w, TEXT_K, ("memory_id",))
                ]

            self.out.write(json.dumps({
                "kind": "search", "store": self.label, "asked": _call.query, "speaker": _call.speaker,
                "query": query, "limit": limit, "named": sorted(kw.get("named") or ()),
                "vector": _b64(embedder.embed_query(query)), "scope": scope,
                "wide": context != where, "matches": matches(where),
                "context_matches": matches(context) if context != where else None,
                "product": [row["memory_id"] for row, _ in hits],
            }) + "\n")  # fmt: skip

        def close(self) -> None:
            try:
                super().close()
            finally:
                self.out.close()

    return DumpBackend(conv_id, speakers)


# --------------------------------------------------------------------------- the runner
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="a directory: <set>.features.jsonl, <set>.perq.jsonl, <set>.json")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in a.sets.split(","):
        script, args, quick = SETS[name]
        features = out / f"{name}.features.jsonl"
        features.write_text("")
        cmd = [
            sys.executable, str(EVAL / script), "--backend", f"{Path(__file__).resolve()}:make_backend",
            "--kmax", "20", "--out", str(out / f"{name}.json"), "--dump", str(out / f"{name}.perq.jsonl"),
            *(quick if a.quick else args),
        ]  # fmt: skip
        print(f"[{name}] {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        env = {**os.environ, _ENV: str(features), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        code = subprocess.run(cmd, cwd=EVAL, env=env).returncode
        print(f"[{name}] exit {code}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
