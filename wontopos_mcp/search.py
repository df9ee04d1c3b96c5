"""Ranking memories for a query inside an exact scope.

The scope (store, speaker, superseded, filters) is a LanceDB prefilter, so nothing
outside it is ever returned; the answer has exactly min(limit, memories in scope)
memories, each once, best first. Chunks are what is embedded; a memory scores as its
best chunk. Search is exact (flat) here; indexed search for large scopes is a later
step (issue 5).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .store import MEMORY_FIELDS

if TYPE_CHECKING:
    from .embeddings import Embedder
    from .store import Store


def search_memories(
    store: "Store", embedder: "Embedder", query: str, where: str, limit: int
) -> list[tuple[dict[str, Any], float]]:
    wanted = min(limit, store.count(where + " AND chunk_idx = 0"))
    if wanted == 0:
        return []
    vector = embedder.embed_query(query)
    best: dict[str, tuple[dict[str, Any], float]] = {}
    k = wanted * 4
    while True:
        rows = store.vector_search(vector, where, k, MEMORY_FIELDS)
        best.clear()
        for row in rows:
            similarity = 1.0 - float(row["_distance"])
            held = best.get(row["memory_id"])
            if held is None or similarity > held[1]:
                best[row["memory_id"]] = (row, similarity)
        if len(best) >= wanted or len(rows) < k:
            break
        k *= 4
    ranked = sorted(best.values(), key=lambda hit: (-hit[1], -hit[0]["seq"]))
    return ranked[:wanted]
