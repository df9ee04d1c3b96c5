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
NEIGHBOUR_WEIGHTS = {-1: 0.30, 1: 0.20, -2: 0.15, 2: 0.10}
NEIGHBOUR_SPAN = 64  # how far (in store order) to look for a conversation's neighbours
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
    candidates scored by cosine alone (their BM25 is unknown: counted as none)."""
    in_scope = [c for c in candidates.values() if c.in_scope]
    if not in_scope:
        return {}
    store_key = in_scope[0].row["user_id"]
    seqs = [c.row["seq"] for c in in_scope]
    conversations = sorted({c.row["conversation_id"] for c in in_scope if c.row["conversation_id"] is not None})
    same_line = [f"conversation_id IN {quote_all(conversations)}"] if conversations else []
    if any(c.row["conversation_id"] is None for c in in_scope):
        same_line.append("conversation_id IS NULL")
    where = (
        f"user_id = {quote(store_key)} AND NOT superseded AND seq >= {min(seqs) - NEIGHBOUR_SPAN}"
        f" AND seq <= {max(seqs) + NEIGHBOUR_SPAN} AND ({' OR '.join(same_line)})"
    )
    rows = store.rows(where, columns=(*MEMORY_FIELDS, "vector"), order=(("seq", True),))
    lines: dict[Any, list[str]] = {}
    new: dict[str, Candidate] = {}
    for row in rows:
        mid = row["memory_id"]
        chunk_vector = row.pop("vector")
        if mid not in candidates:
            similarity = float(np.dot(vector, chunk_vector))
            held = new.get(mid)
            if held is None or similarity > held.dense:
                new[mid] = Candidate(row, similarity, in_scope=False)
        line = lines.setdefault(row["conversation_id"], [])
        if not line or line[-1] != mid:
            line.append(mid)
    if new:
        _score_newcomers(candidates, new)
    return lines


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
