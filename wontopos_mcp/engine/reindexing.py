"""Re-embedding a database for another model, in place (``wontopos-mcp reindex``).

Every memory keeps its rows, and every column of them but the vector: ids, ``seq``,
speakers, dates, supersede chains, idempotency records. The order, and why a kill at any
point leaves the old model's database or the new one, never a mix:

1. The model loads first (an unknown name, or one that needs a download while offline,
   stops here with nothing changed).
2. Every writer is held off for the whole run (``Store.exclusive``: the database's lock,
   and with ``--writers leased`` every store's lease too), so no write interleaves.
3. The record is marked (``ModelRecord.mark``): from now on an open asks the table which
   model its vectors are of.
4. Every chunk row is read from one version and re-embedded in batches, each chunk cut
   from its memory's text and embedded exactly as a write does (``commits.chunks_of``,
   ``commits.embed_chunks``), and the whole table is written back in ONE commit that
   also records the new model and vector size in the table's schema (``ChunksTable.reembed``):
   the atomic point. Before it, the old version is current; after it, the new one.
5. The indexes are built again (an overwrite drops them; an open builds what is missing).
6. The record (registry ``meta`` row, then the JSON file) names the new model, last. A
   kill between 4 and 6 leaves a table that names its model: the next open repairs the
   record forward (``ModelRecord.truth``).

A server still running with the old model cannot write old vectors into the re-embedded
table: every write checks the table's record inside the write lock (``ChunksTable.add``)
and answers 503. A chunk is re-embedded as stored: the chunks of a memory are cut again
from its text by the write path's rule, which gives the stored chunks (a model with a
shorter input than the chunk truncates it, as it would on a write). Should the rule have
changed since a memory was written (another chunk count), its new chunks are spread over
its stored rows in order, so its rows and ids stay (``spread``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from wontopos_mcp.model.embeddings import model_key
from wontopos_mcp.rules.answers import ReindexAnswer

from .commits import chunks_of, embed_chunks

if TYPE_CHECKING:
    from wontopos_mcp.model.embeddings import Embedder
    from wontopos_mcp.storage.adapter import Store
    from wontopos_mcp.storage.rows import ChunkRow

BATCH_ROWS = 256  # chunk rows per embedding pass (the embedder batches them by 16 again)

Step = Callable[[str], None]  # told each step's name as it is reached ("locked", "batch 1", ...)
Progress = Callable[[int, int, float], None]  # (chunks done, chunks in all, seconds so far)


def same_model(store: Store, model_name: str) -> tuple[str, int] | None:
    """The record, when it already names ``model_name`` (nothing to do), else ``None``."""
    recorded = store.recorded_model()
    return recorded if recorded is not None and model_key(recorded[0]) == model_key(model_name) else None


def reindex(
    store: Store,
    embedder: Embedder,
    *,
    step: Step | None = None,
    progress: Progress | None = None,
    batch_rows: int = BATCH_ROWS,
) -> ReindexAnswer:
    """Re-embed every chunk with ``embedder`` (see the module). Answers ``status``
    (``"reindexed"``, or ``"unchanged"`` when the database already is of that model),
    ``model``, ``previous``, ``dim``, ``memories``, ``chunks`` and ``seconds``."""
    told = step or (lambda name: None)
    target = (embedder.model_id, embedder.dim)
    started = time.monotonic()
    memories = 0
    batches = 0

    def vectors_for(rows: list[ChunkRow]) -> Any:
        nonlocal memories
        cut: dict[str, list[str]] = {}
        texts = []
        for row in rows:
            pieces = cut.get(row["memory_id"])
            if pieces is None:
                pieces = cut[row["memory_id"]] = spread(chunks_of(embedder, row["content"]), row["n_chunks"])
            texts.append(pieces[row["chunk_idx"]])
            memories += row["chunk_idx"] == 0
        return embed_chunks(embedder, texts)

    def on_batch(done: int, total: int) -> None:
        nonlocal batches
        batches += 1
        if progress is not None:
            progress(done, total, time.monotonic() - started)
        told(f"batch {batches}")

    with store.exclusive():
        told("locked")
        previous = store.recorded_model()
        was = previous[0] if previous else None
        if previous is not None and model_key(previous[0]) == model_key(target[0]):
            return reindexed(target, was, "unchanged", 0, 0, 0.0)
        store.mark_model(*target)
        told("marked")
        chunks = store.chunks.reembed(*target, vectors_for, batch_rows=batch_rows, on_batch=on_batch)
        told("committed")
        store.chunks.rebuild_indexes()
        told("indexed")
        store.record_model(*target)
        told("recorded")
    return reindexed(target, was, "reindexed", memories, chunks, time.monotonic() - started)


def reindexed(
    model: tuple[str, int], previous: str | None, status: Literal["reindexed", "unchanged"], memories: int,
    chunks: int, seconds: float,
) -> ReindexAnswer:  # fmt: skip
    """A reindex's answer, its keys in the order the CLI has always printed them."""
    return {"model": model[0], "dim": model[1], "previous": previous, "status": status, "memories": memories,
            "chunks": chunks, "seconds": seconds}  # fmt: skip


def spread(pieces: list[str], rows: int) -> list[str]:
    """``pieces`` over ``rows`` stored chunk rows, in order: the pieces themselves when
    they are as many (always, while the chunking rule is the one the rows were cut by);
    else row ``i`` gets its share of them, joined (or, with fewer pieces than rows, the
    piece at its place). Public: a pure rule, tested with plain values."""
    if len(pieces) == rows or not pieces:
        return pieces or [""] * rows
    shares = [" ".join(pieces[i * len(pieces) // rows : (i + 1) * len(pieces) // rows]) for i in range(rows)]
    return [share or pieces[min(i * len(pieces) // rows, len(pieces) - 1)] for i, share in enumerate(shares)]
