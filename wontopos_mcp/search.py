"""Ranking memories for a query inside an exact scope: hybrid retrieval.

The scope (store, speaker, superseded, filters) is a LanceDB prefilter on every
candidate search, so nothing outside it is ever returned, and the answer has exactly
min(limit, memories in scope) memories, each once, best first.

Ranking, as measured on real two-person conversations (NOTES "Retrieval"):

1. Candidates: the nearest chunks by cosine (e5 ``query:``/``passage:``) and the best
   chunks by BM25 (LanceDB full text, ICU tokenizer), both inside the scope. A memory
   scores as its best chunk.
2. Score fusion: each signal is standardised over the candidates (raw cosines all sit
   near 0.8, so unstandardised fusion hurts), then ``0.3 * bm25 + 0.7 * dense``.
3. Neighbour propagation: a memory also gets a share of the fused score of the
   memories said just before and after it in the same conversation (store order when
   it has none), whoever said them: the answer to "what did Bob say about X" often sits
   next to the turn that mentions X. Neighbours only add score; they are never returned
   unless they are in scope. Without neighbours the score is the plain fused score.

``similarity`` in answers stays the cosine of the best chunk; the order is the score's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .scope import quote, quote_all
from .store import MEMORY_FIELDS

if TYPE_CHECKING:
    from .embeddings import Embedder
    from .store import Store

BM25_WEIGHT = 0.3
DENSE_WEIGHT = 0.7
# Share of a neighbour's fused score, by position relative to the memory: the turn
# before counts more than the turn after, and distance 2 half as much as distance 1.
# Measured on bench/data/retrieval.json (R@1 / R@5 / MRR, speaker filter on): none
# 0.56/0.90/0.695; {-1: .3, +1: .2, -2: .15, +2: .1} 0.61/0.96/0.768; {-1: .5, +1: .1}
# 0.71/0.97/0.833; {-1: .7} 0.80/0.97/0.882. That set leans on answers that follow
# the other person's question (48 of 70), so the middle setting is the one kept.
NEIGHBOUR_WEIGHTS = {-1: 0.5, 1: 0.1}
NEIGHBOUR_SPAN = 16  # how far (in store order) a conversation's neighbours are looked for
_CANDIDATE_FLOOR = 40


@dataclass
class Candidate:
    row: dict[str, Any]
    dense: float
    bm25: float = 0.0
    in_scope: bool = True
    fused: float = 0.0


MODES = ("hybrid", "vector", "bm25")


def search_memories(
    store: "Store", embedder: "Embedder", query: str, where: str, limit: int, *, mode: str = "hybrid"
) -> list[tuple[dict[str, Any], float]]:
    """The best ``limit`` memories in scope as (row, cosine similarity), best first.

    ``mode`` is for evaluation (``bench/retrieval.py``): ``vector`` ranks by cosine
    alone, ``bm25`` by full text alone (cosine breaks ties), ``hybrid`` is the product.
    """
    scope_memories = store.count(where + " AND chunk_idx = 0")
    wanted = min(limit, scope_memories)
    if wanted == 0:
        return []
    vector = embedder.embed_query(query)
    candidates = _dense_candidates(store, vector, where, wanted)
    if mode == "vector":
        scores = {mid: c.dense for mid, c in candidates.items()}
    else:
        _add_bm25(store, vector, query, where, max(wanted * 4, _CANDIDATE_FLOOR), candidates)
        if mode == "bm25":
            scores = {mid: c.bm25 for mid, c in candidates.items()}
        else:
            _fuse(candidates)
            scores = _propagate(store, vector, candidates)
    ranked = sorted(
        (c for c in candidates.values() if c.in_scope),
        key=lambda c: (-scores[c.row["memory_id"]], -c.dense, -c.row["seq"]),
    )
    return [(c.row, c.dense) for c in ranked[:wanted]]


def _dense_candidates(store: "Store", vector: Any, where: str, wanted: int) -> dict[str, Candidate]:
    """At least ``wanted`` distinct in-scope memories by cosine (more chunks until then)."""
    scope_rows = store.count(where)
    k = max(wanted * 4, _CANDIDATE_FLOOR)
    while True:
        rows = store.vector_search(vector, where, k, MEMORY_FIELDS, scope_rows=scope_rows)
        found: dict[str, Candidate] = {}
        for row in rows:
            similarity = 1.0 - float(row.pop("_distance"))
            held = found.get(row["memory_id"])
            if held is None or similarity > held.dense:
                found[row["memory_id"]] = Candidate(row, similarity)
        if len(found) >= wanted or len(rows) < k:
            return found
        k *= 4


def _add_bm25(
    store: "Store", vector: Any, query: str, where: str, k: int, candidates: dict[str, Candidate]
) -> None:
    """BM25 scores for the candidates, and BM25-only hits added with their cosine."""
    for row in store.text_search(query, where, k, (*MEMORY_FIELDS, "vector")):
        score = float(row.pop("_score"))
        chunk_vector = row.pop("vector")
        held = candidates.get(row["memory_id"])
        if held is None:
            held = candidates[row["memory_id"]] = Candidate(row, float(np.dot(vector, chunk_vector)))
        held.bm25 = max(held.bm25, score)


def _standardised(values: np.ndarray) -> np.ndarray:
    spread = values.std()
    return (values - values.mean()) / spread if spread > 1e-9 else np.zeros_like(values)


def _fuse(candidates: dict[str, Candidate]) -> None:
    items = list(candidates.values())
    dense = _standardised(np.array([c.dense for c in items]))
    bm25 = _standardised(np.array([c.bm25 for c in items]))
    for c, d, b in zip(items, dense, bm25):
        c.fused = float(DENSE_WEIGHT * d + BM25_WEIGHT * b)


def _propagate(store: "Store", vector: Any, candidates: dict[str, Candidate]) -> dict[str, float]:
    """Each candidate's fused score plus shares of its neighbours' fused scores."""
    scores = {mid: c.fused for mid, c in candidates.items()}
    order = _neighbourhoods(store, vector, candidates)
    for mid, c in candidates.items():
        if not c.in_scope:
            continue
        line = order.get(c.row["conversation_id"])
        if not line:
            continue
        at = line.index(mid) if mid in line else -1
        if at < 0:
            continue
        for offset, weight in NEIGHBOUR_WEIGHTS.items():
            j = at + offset
            if 0 <= j < len(line) and line[j] in candidates:
                scores[mid] += weight * candidates[line[j]].fused
    return scores


def _neighbourhoods(store: "Store", vector: Any, candidates: dict[str, Candidate]) -> dict[Any, list[str]]:
    """Memories around the candidates in write order, per conversation (``None`` = no
    conversation: store order). Neighbours not yet candidates join as out-of-scope
    candidates scored by cosine alone (their BM25 is unknown: counted as none).

    Two small reads: the ids and order of the memories in a window around each
    candidate (no vectors), then the vectors of the few neighbours actually used.
    """
    in_scope = [c for c in candidates.values() if c.in_scope]
    if not in_scope:
        return {}
    store_key = in_scope[0].row["user_id"]
    windows = " OR ".join(sorted({_window(c.row) for c in in_scope}))
    where = f"user_id = {quote(store_key)} AND chunk_idx = 0 AND NOT superseded AND ({windows})"
    lines: dict[Any, list[str]] = {}
    for row in store.rows(where, columns=("memory_id", "conversation_id", "seq"), order=(("seq", True),)):
        lines.setdefault(row["conversation_id"], []).append(row["memory_id"])
    wanted: set[str] = set()
    for c in in_scope:
        line = lines.get(c.row["conversation_id"], [])
        at = line.index(c.row["memory_id"]) if c.row["memory_id"] in line else -1
        if at >= 0:
            wanted.update(line[j] for j in (at + o for o in NEIGHBOUR_WEIGHTS) if 0 <= j < len(line))
    wanted -= set(candidates)
    if wanted:
        _score_newcomers(candidates, _neighbour_candidates(store, vector, store_key, sorted(wanted)))
    return lines


def _window(row: dict[str, Any]) -> str:
    """The stretch of write order around one memory, in its own conversation."""
    same = "conversation_id IS NULL" if row["conversation_id"] is None else f"conversation_id = {quote(row['conversation_id'])}"
    return f"(seq >= {row['seq'] - NEIGHBOUR_SPAN} AND seq <= {row['seq'] + NEIGHBOUR_SPAN} AND {same})"


def _neighbour_candidates(store: "Store", vector: Any, store_key: str, ids: list[str]) -> dict[str, Candidate]:
    where = f"user_id = {quote(store_key)} AND memory_id IN {quote_all(ids)}"
    found: dict[str, Candidate] = {}
    for row in store.rows(where, columns=(*MEMORY_FIELDS, "vector")):
        similarity = float(np.dot(vector, row.pop("vector")))
        held = found.get(row["memory_id"])
        if held is None or similarity > held.dense:
            found[row["memory_id"]] = Candidate(row, similarity, in_scope=False)
    return found


def _score_newcomers(candidates: dict[str, Candidate], new: dict[str, Candidate]) -> None:
    """Fused scores for neighbours on the candidates' scale (same mean and spread)."""
    known = list(candidates.values())
    dense = np.array([c.dense for c in known])
    bm25 = np.array([c.bm25 for c in known])
    d_mean, d_std = dense.mean(), dense.std() or 1.0
    b_mean, b_std = bm25.mean(), bm25.std() or 1.0
    for mid, c in new.items():
        c.fused = float(DENSE_WEIGHT * (c.dense - d_mean) / d_std + BM25_WEIGHT * (0.0 - b_mean) / b_std)
        candidates[mid] = c
