"""How every memory write commits: embedded outside the write lock, decided again under
it only if the database moved, at most once per idempotency key, in one LanceDB commit.

``Commits`` also keeps the promise a delete must keep first: the store's sequence
high-water mark (a number is never given twice). A memory's idempotency record lives on
its rows and goes with them, with every record whose answer names it, so a repeat
of a forgotten write, or of one answered with a forgotten memory, is a new write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from wontopos_mcp.errors import ConflictError, Fix
from wontopos_mcp.rules.idempotency import WINDOW_US, Idempotency, Running, answer_json, replayed
from wontopos_mcp.rules.redaction import Redactor
from wontopos_mcp.rules.text import chunk_text
from wontopos_mcp.storage.rows import ChunkRow

from .registry import store_in_fix

if TYPE_CHECKING:
    from wontopos_mcp.model.embeddings import Embedder, ModelLoader
    from wontopos_mcp.storage.adapter import Store

    from .memories import Memories, Naming
    from .registry import Registry

T = TypeVar("T")
A = TypeVar("A", bound=Mapping[str, object])  # the answer a write gives


@dataclass
class Embedded:
    """Texts cut into chunks, and one array of chunk vectors per text."""

    chunks: list[list[str]]
    vectors: list[Any]


@dataclass
class Written(Generic[A]):
    """What a write decided under the lock: new rows, rows updated with them, the answer."""

    rows: list[ChunkRow]
    answer: A
    updated: list[ChunkRow] = field(default_factory=list)


class Commits:
    def __init__(
        self,
        store: Store,
        registry: Registry,
        memories: Memories,
        models: ModelLoader,
        *,
        model_wait: float,
        now_us: Callable[[], int],
        redactor: Redactor | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.memories = memories
        self.models = models
        self.model_wait = model_wait
        self.now_us = now_us  # the service's clock, in microseconds
        self._running = Running()
        # Every write's texts pass through it before they are checked, embedded or stored.
        self.redactor = redactor or Redactor()

    def embedder(self) -> Embedder:
        """The model, waiting for it up to ``model_wait`` seconds (then 503); the store is
        told which it is (``ChunksTable.embeds_with``: it refuses a table re-embedded for another)."""
        embedder = self.models.get(timeout=self.model_wait)
        self.store.chunks.embeds_with(embedder.model_id, embedder.dim)
        return embedder

    def write_once(
        self,
        key: str,
        idem: Idempotency | None,
        texts: list[str],
        decide: Callable[[], T],
        write: Callable[[Embedded, T], Written[A]],
        *,
        rewrites: bool = False,
    ) -> A:
        """Embed ``texts`` and run one memory write, at most once per idempotency key.

        ``decide`` makes the reads a write depends on (store, speakers, the memory,
        duplicates, the next sequence number) and refuses a bad call. It runs before
        the model is needed, and runs again inside the write lock only if the database
        changed since (LanceDB table versions, other processes' commits included), so
        the lock is held for little more than the append. (Embedding on another thread
        meanwhile was measured slower on two cores: onnxruntime already uses both.)
        ``write`` builds the rows from the embedding and the decision; the commit
        carries the idempotency key with the memories. ``rewrites``: it updates rows
        already stored (a supersede), so it takes the lock ``rewriting``.
        """
        replay = self._replay(key, idem)
        if replay is not None:
            return cast("A", replay)
        seen = self.store.versions()
        decided = decide()
        with self._running.guard(key, idem):
            embedded = self._embed(texts)
            with self.store.write_lock(key, rewriting=rewrites):
                replay = self._replay(key, idem)
                if replay is not None:
                    return cast("A", replay)
                if self.store.versions() != seen:
                    decided = decide()
                return self._commit(key, idem, write(embedded, decided))

    def _embed(self, texts: list[str]) -> Embedded:
        """Chunk and embed texts in one batch; makes sure the chunks table exists (after
        the write's checks passed: a refused call leaves no trace). No texts need no model."""
        if not texts:
            return Embedded([], [])
        embedder = self.embedder()
        self.store.chunks.for_model(embedder.model_id, embedder.dim)
        chunked = [chunks_of(embedder, t) for t in texts]
        flat = embed_chunks(embedder, [c for chunks in chunked for c in chunks])
        vectors, at = [], 0
        for chunks in chunked:
            vectors.append(flat[at : at + len(chunks)])
            at += len(chunks)
        return Embedded(chunked, vectors)

    def _replay(self, key: str, idem: Idempotency | None) -> dict[str, object] | None:
        """The first answer to this key in this store within 24 h, if there was one (as
        this write answered it then, with ``replayed: true``)."""
        if idem is None:
            return None
        since = self.now_us() - WINDOW_US
        first = self.memories.idempotent_answer(key, idem.key, since)
        if first is None:
            first = self.registry.idempotency_record(key, idem.key, since)
        return None if first is None else replayed(idem, *first)

    def _commit(self, key: str, idem: Idempotency | None, written: Written[A]) -> A:
        """Write the new rows (inside the write lock) with the idempotency record in the
        same commit; an outcome that writes no memory keeps its record in the registry.
        """
        rows, answer = written.rows, written.answer
        if idem is not None:
            kept = answer_json(answer)
            for row in rows:
                row["idem_key"], row["idem_fp"], row["idem_answer"] = idem.key, idem.fingerprint, kept
            if not rows:
                record = (idem.key, idem.fingerprint, kept, self.now_us())
                self.registry.keep_idempotency_records(key, [record])
        self.memories.add(rows, written.updated)
        if rows:
            self.memories.seq_given(key, max(int(row["seq"]) for row in rows))
        return answer

    # -- sequence numbers and deletes --------------------------------------------------------------

    def last_seq(self, key: str, recorded: int | None = None) -> int:
        """The store's highest sequence number ever given, deleted memories included.

        Deletes record the high-water mark on the store's registry row first, so a
        number is never given twice and a ``memory_list`` cursor stays a place in the
        store's write order. ``recorded``: that mark, when the caller has just read it.
        """
        if recorded is None:
            recorded = self.registry.recorded_seq(key)
        return max(self.memories.max_seq(key), recorded)

    def remember_last_seq(self, key: str) -> None:
        """Call inside the write lock before deleting memories of the store ``key``."""
        self.registry.record_seq(key, self.last_seq(key))

    def delete_memories(
        self, key: str, where: str, memory_ids: set[str] | None, *, updated: list[ChunkRow] | None = None,
        known: Naming | None = None,
    ) -> None:  # fmt: skip
        """Delete the memories ``where`` selects, ``memory_ids`` (``None``: every memory
        of the store), inside the store's write lock, keeping the store's sequence
        high-water mark first; rows in ``updated`` are rewritten in the same commit as the
        delete. Their idempotency records go with their rows, and so does every record
        whose answer names one of them (a ``duplicate``'s ``duplicate_of`` included): those
        in the registry first, those on other memories' rows cleared in the delete's commit.
        The purge takes every trace off the disk (``Store.erasing``). ``known``: the
        look-up of the rows naming them, made before the lock (``Memories.naming``)."""
        with self.store.erasing():
            self.remember_last_seq(key)
            self.registry.forget_records_naming(key, memory_ids)
            answering = [] if memory_ids is None else self.memories.answering_for(key, memory_ids, known)
            self.memories.delete(where, updated=_without_records(updated or [], answering))


def _without_records(updated: list[ChunkRow], answering: list[ChunkRow]) -> list[ChunkRow]:
    """``updated``, and the ``answering`` rows with no idempotency record (a row in both
    keeps both changes)."""
    rows = {row["chunk_id"]: row for row in updated}
    for answered in answering:
        row = rows.get(answered["chunk_id"], answered)
        rows[row["chunk_id"]] = {**row, "idem_key": None, "idem_fp": None, "idem_answer": None}
    return list(rows.values())


def chunks_of(embedder: Embedder, text: str) -> list[str]:
    """A memory's chunks, as every write cuts them (and a reindex cuts them again)."""
    return chunk_text(text, embedder.max_chars)


def embed_chunks(embedder: Embedder, chunks: list[str]) -> Any:
    """Chunk vectors as every write makes them: stored text (the model's passage form,
    its prefix included), one array of ``len(chunks)`` rows."""
    return embedder.embed_passages(chunks)


def require_confirmed(key: str, name: str, current: int, confirm: int) -> None:
    """409 unless ``confirm`` is ``name``'s current ``records_to_delete`` (``current``):
    a delete or merge of someone's memories goes ahead only on the number the caller saw."""
    if current != confirm:
        raise ConflictError(
            (
                f"confirm_records is {confirm} but {name!r} now has {current} "
                f"record{'' if current == 1 else 's'}; call ",
                Fix.of("by_speaker", speaker=name, user_id=store_in_fix(key)),
                " again and confirm the current number",
            ),
            field="confirm_records",
            records_to_delete=current,
        )
