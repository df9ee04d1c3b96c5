"""The chunk table in the engine's words: memories' rows, and the look-ups the rules
make (a memory, duplicates, idempotency keys, pages, the next sequence number).

``Memories`` is the only builder of chunk rows (``storage.rows.ChunkRow``); every clause
it reads with comes from ``storage.where``. It decides nothing: the parts above it
(``writes``, ``reads``, ``speaker_pages``) apply the rules to what it answers.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wontopos_mcp.errors import NotFoundError
from wontopos_mcp.rules.dates import month_bucket
from wontopos_mcp.rules.idempotency import answer_needles, names_any, speaker_in_answer
from wontopos_mcp.rules.records import RECORD_FIELDS
from wontopos_mcp.rules.restatement import is_restatement, restatement_key
from wontopos_mcp.rules.text import cjk_text, duplicate_key, full_text, importance
from wontopos_mcp.storage import where as clause
from wontopos_mcp.storage.rows import ChunkRow
from wontopos_mcp.storage.where import FIRST_CHUNK, in_store, memories_in, memory_is, said_by, speaker_is

if TYPE_CHECKING:
    from wontopos_mcp.storage.adapter import Store

Row = ChunkRow
_LOOKUP_BATCH = 500  # keys per IN (...) look-up
# Up to this many stores, ``store_counts`` counts each with its own indexed count; past it,
# one scan of the store column for all (the two cost the same near 150 stores at 1M).
COUNT_EACH_STORE_MAX = 64
_NEWEST_FIRST = (("created_us", False), ("seq", False))


@dataclass(frozen=True)
class Naming:
    """What ``Memories.naming`` found outside the write lock: the memories whose kept
    answers named the ones going (``of``), among the rows written through ``through_seq``."""

    ids: frozenset[str]
    through_seq: int
    of: frozenset[str]


class Memories:
    def __init__(self, store: Store, *, now_us: Callable[[], int]) -> None:
        self.store = store
        self._now_us = now_us
        self._seq_floor: dict[str, int] = {}  # per store: a seq known to be given (see max_seq)
        self._seq_top: dict[str, tuple[tuple[int, int | None], int]] = {}  # per store: at these versions, the top

    # -- rows ------------------------------------------------------------------------------

    def new_rows(
        self, key: str, memory: dict[str, Any], chunks: list[str], vectors: Any, *, seq: int, created: int | None = None
    ) -> tuple[str, list[Row]]:
        """The chunk rows of a new memory; ``created`` (microseconds) defaults to now."""
        memory_id = str(uuid.uuid4())
        created = self._now_us() if created is None else created
        event = memory["event"]
        when = event[0] if event else created
        shared = ChunkRow(
            memory_id=memory_id,
            n_chunks=len(chunks),
            user_id=key,
            speaker=memory["speaker"],
            content=memory["content"],
            dup_key=duplicate_key(memory["content"]),
            restate_key=restatement_key(memory["content"]),
            created_us=created,
            seq=seq,
            event_date=event[1] if event else None,
            event_us=event[0] if event else None,
            when_us=when,
            time_bucket=month_bucket(when),
            category=memory["category"],
            importance=importance(memory["content"]),
            superseded=False,
            superseded_by=None,
            conversation_id=memory["conversation_id"],
            role=memory["role"],
        )
        words = [full_text(memory["content"], i) for i in range(len(chunks))]  # what BM25 indexes
        rows = [
            ChunkRow(
                **shared,
                chunk_id=f"{memory_id}:{i}",
                chunk_idx=i,
                vector=vectors[i].tolist(),
                text=text,
                cjk_text=cjk_text(text),
            )
            for i, text in enumerate(words)
        ]
        return memory_id, rows

    def max_seq(self, key: str) -> int:
        """The highest ``seq`` among the store's rows.

        Sequence numbers only grow, so the last answer is a floor: later calls read just
        the rows above it (a B-tree range: 12 ms at 1M rows, 18-78 ms while a purge holds
        the upkeep off and small fragments pile up), including rows other processes wrote
        since. Only the first call per store sorts the store. And while the database is at
        the versions this process's last write of the store left it at (``seq_given``:
        nothing committed since, here or elsewhere), its answer stands without a read.
        """
        known = self._seq_top.get(key)
        if known is not None and known[0] == self.store.versions():
            return known[1]
        floor = self._seq_floor.get(key)
        if floor is None:
            rows = self.store.chunks.rows(in_store(key), columns=("seq",), order=(("seq", False),), limit=1)
            top = int(rows[0]["seq"]) if rows else 0
        else:
            top = max([floor, *self.store.chunks.column(in_store(key) + clause.seq_above(floor), "seq")])
        self._seq_floor[key] = top
        return top

    def seq_given(self, key: str, top: int) -> None:
        """Inside the store's write lock, right after a commit of its rows whose highest
        ``seq`` is ``top`` (one above every number given before): the store's top until the
        database's versions move (no writer of this store commits while the lock is held;
        a commit of another store's moves them too, and only costs the next call a read)."""
        self._seq_floor[key] = max(top, self._seq_floor.get(key, 0))
        self._seq_top.pop(key, None)
        try:
            versions = self.store.versions()
        except Exception:  # noqa: BLE001 - a hint only: the commit stands, and the next call reads
            return
        self._seq_top[key] = (versions, top)

    # -- one memory --------------------------------------------------------------------------

    def memory_row(self, key: str, memory_id: str) -> Row:
        """A memory's first chunk, every memory field; 404 when the store has no such memory."""
        rows = self.store.chunks.rows(memory_is(key, memory_id) + FIRST_CHUNK)
        if not rows:
            raise NotFoundError(
                f"memory '{memory_id}' does not exist in this store", field="memory_id", memory_id=memory_id
            )
        return rows[0]

    def every_chunk(self, key: str, memory_id: str) -> list[Row]:
        """Every column of every chunk of a memory (to rewrite them)."""
        return self.store.chunks.rows(memory_is(key, memory_id), columns=None)

    def superseded_by(self, key: str, memory_id: str) -> list[Row]:
        """Every column of every chunk of the versions ``memory_id`` superseded."""
        return self.store.chunks.rows(in_store(key) + clause.superseded_by(memory_id), columns=None)

    def chunks_by_memory(self, key: str, memory_ids: set[str]) -> dict[str, list[Row]]:
        """Every column of every chunk of these memories, by memory, in chunk order."""
        found: dict[str, list[Row]] = {}
        if memory_ids:
            rows = self.store.chunks.rows(memories_in(key, sorted(memory_ids)), columns=None)
            for row in sorted(rows, key=lambda r: r["chunk_idx"]):
                found.setdefault(row["memory_id"], []).append(row)
        return found

    # -- duplicates ------------------------------------------------------------------------

    def find_duplicate(self, key: str, text: str, name: str | None, conversation: str | None) -> str | None:
        """A current memory this text restates, by the same speaker, from another conversation.

        Every restatement, exact or near-verbatim, has the text's restatement key
        (``restatement.restatement_key``), so one indexed equality lookup finds them all;
        no vector search, and no candidate missed. Rows written before the current key
        function carry another key (``dup_key`` before 4774e8d, the looser key of
        4774e8d..6f096ab), so the normalised key is also looked up in ``dup_key``: exact
        restatements of such rows are still caught (~1 ms more at 1M rows than one
        column), near-verbatim ones of them only missed, never wrongly matched.
        ``restates`` still compares the texts and applies the conversation rule.
        """
        dup = duplicate_key(text)
        where = (
            clause.current(in_store(key)) + " AND " + speaker_is(name) + FIRST_CHUNK
            + clause.restating([restatement_key(text), dup], [dup])
        )  # fmt: skip
        for row in self.store.chunks.rows(where, columns=("memory_id", "content", "conversation_id")):
            if restates(text, conversation, row):
                return str(row["memory_id"])
        return None

    def restated_by_keys(self, key: str, keys: list[tuple[str, str]]) -> dict[tuple[str, str | None], list[Row]]:
        """Current memories of the store matching one of these (normalised key, restatement
        key) pairs as ``find_duplicate`` matches them, filed under both their keys with
        their speaker."""
        found: dict[tuple[str, str | None], list[Row]] = {}
        columns = ("memory_id", "dup_key", "restate_key", "speaker", "content", "conversation_id")
        for start in range(0, len(keys), _LOOKUP_BATCH):
            dks, rks = zip(*keys[start : start + _LOOKUP_BATCH])
            where = clause.current(clause.first_chunks(in_store(key))) + clause.restating(list(rks), list(dks))
            for row in self.store.chunks.rows(where, columns=columns):
                for mark in {(row["dup_key"], row["speaker"]), (row["restate_key"], row["speaker"])}:
                    found.setdefault(mark, []).append(row)
        return found

    # -- idempotency keys on rows ----------------------------------------------------------------

    def idempotent_answer(self, key: str, idem_key: str, since_us: int) -> tuple[str, str] | None:
        """(fingerprint, answer JSON) carried by a memory written under this key since then."""
        where = in_store(key) + clause.idempotency_key_is(idem_key, since_us)
        rows = self.store.chunks.rows(where, columns=("idem_fp", "idem_answer"), limit=1)
        return (rows[0]["idem_fp"] or "", rows[0]["idem_answer"] or "") if rows else None

    def imported(self, key: str, idem_keys: Sequence[str]) -> dict[str, tuple[str, str]]:
        """(memory id, fingerprint) by idempotency key, of the store's memories written
        under these keys, at any age (one lookup per 500 keys)."""
        found: dict[str, tuple[str, str]] = {}
        wanted = sorted(set(idem_keys))
        for start in range(0, len(wanted), _LOOKUP_BATCH):
            batch = wanted[start : start + _LOOKUP_BATCH]
            where = clause.first_chunks(in_store(key)) + clause.idempotency_keys_in(batch)
            for row in self.store.chunks.rows(where, columns=("idem_key", "idem_fp", "memory_id")):
                found[row["idem_key"] or ""] = (row["memory_id"], row["idem_fp"] or "")
        return found

    def naming(self, key: str, memory_ids: set[str]) -> Naming:
        """The look-up ``answering_for`` needs, made before the write lock is taken: a
        full scan of the store's kept answers (~90 ms at 1M rows), which writers then need
        not wait for. An answer names only memories that existed when it was written, or
        that its own call wrote, so a row that comes to name one later is a row written
        later: ``answering_for`` reads those alone, above ``through_seq``."""
        through = self.max_seq(key)  # first: every row at or below it is in the scan that follows
        return Naming(frozenset(self._naming(in_store(key), memory_ids)), through, frozenset(memory_ids))

    def answering_for(self, key: str, memory_ids: set[str], known: Naming | None = None) -> list[Row]:
        """Every column of every chunk of the store's other memories whose kept first
        answer names one of ``memory_ids`` (a conversation stored in one call, a supersede
        of one of them): one filtered scan, then ``names_any`` decides. ``known``: what
        ``naming`` found before the lock; only the rows written since are scanned (a B-tree
        range), and each row read is checked again against ``memory_ids``; memories it was
        not asked about (a speaker's written since) get the full scan."""
        if not memory_ids:
            return []
        if known is None:
            naming = self._naming(in_store(key), memory_ids)
        else:
            naming = set(known.ids) | self._naming(in_store(key) + clause.seq_above(known.through_seq), memory_ids)
            if memory_ids - known.of:
                naming |= self._naming(in_store(key), memory_ids - known.of)
        if not naming:
            return []
        rows = self.store.chunks.rows(memories_in(key, sorted(naming)), columns=None)
        if known is not None:  # named by the answers these rows hold now, not then
            naming = {row["memory_id"] for row in rows if names_any(row["idem_answer"] or "", memory_ids)}
            rows = [row for row in rows if row["memory_id"] in naming]
        return rows

    def _naming(self, scope: str, memory_ids: set[str]) -> set[str]:
        where = scope + clause.answer_names_any(answer_needles(memory_ids))
        return {
            row["memory_id"]
            for row in self.store.chunks.rows(where, columns=("memory_id", "idem_answer"))
            if row["memory_id"] not in memory_ids and names_any(row["idem_answer"] or "", memory_ids)
        }

    def ids(self, where: str) -> set[str]:
        """The ids of the memories ``where`` selects."""
        return set(self.store.chunks.column(where + FIRST_CHUNK, "memory_id"))

    # -- counts and pages -----------------------------------------------------------------------

    def count(self, where: str) -> int:
        return self.store.chunks.count(where)

    def count_memories(self, where: str) -> int:
        """Memories (not chunks) ``where`` selects."""
        return self.store.chunks.count(where + FIRST_CHUNK)

    def speaker_counts(self, key: str) -> Counter[str]:
        """Memories per speaker in the store (superseded included)."""
        return self._counts(clause.first_chunks(in_store(key)) + clause.tagged(), "speaker")

    def store_counts(self, keys: Sequence[str]) -> dict[str, int]:
        """Memories per store key (superseded included) of the stores ``keys`` names: one
        indexed count each (~2 ms at 1M memories), or past ``COUNT_EACH_STORE_MAX`` stores
        one scan of the store column for all (~320 ms at 1M: ``bench/scale.py``)."""
        if len(keys) <= COUNT_EACH_STORE_MAX:
            return {key: self.count_memories(in_store(key)) for key in keys}
        return dict(self._counts(clause.EVERY_MEMORY, "user_id"))

    def _counts(self, where: str, column: str) -> Counter[str]:
        """How many memories ``where`` selects per value of ``column``: one scan of one column."""
        return Counter(self.store.chunks.column(where, column))

    def newest_first(self, where: str, limit: int) -> list[Row]:
        """A page's rows, newest first: record fields only (each column costs about a
        millisecond at 1M rows)."""
        return self.store.chunks.rows(where, columns=(*RECORD_FIELDS, "seq"), order=_NEWEST_FIRST, limit=limit)

    def after_seq(
        self, key: str, after: int, limit: int, after_id: str | None = None, speaker: str | None = None
    ) -> list[Row]:
        """The store's (or ``speaker``'s) memories after (``seq`` ``after``, id ``after_id``)
        in write order; ``seq`` ties are ordered by id, so no page boundary skips one."""
        first = clause.first_chunks(in_store(key) if speaker is None else said_by(key, speaker))
        order = (("seq", True), ("memory_id", True))
        tied_where, later_where = clause.after_in_write_order(first, after, after_id)  # two ranges, not an OR
        tied = [] if tied_where is None else self.store.chunks.rows(tied_where)
        later = self.store.chunks.rows(later_where, order=order, limit=limit)
        return sorted([*tied, *later], key=lambda row: (row["seq"], row["memory_id"]))[:limit]

    # -- commits (inside the write lock) ------------------------------------------------------------

    def add(self, rows: list[Row], updated: list[Row]) -> None:
        """Commit new rows, and rows rewritten with them, in one commit."""
        table = self.store.chunks.existing()
        if updated:
            self.store.chunks.upsert(table, updated + rows)
        elif rows:
            self.store.chunks.add(table, rows)

    def delete(self, where: str, *, updated: list[Row] | None = None) -> None:
        """Delete the rows ``where`` selects; rows in ``updated`` are rewritten in the
        same commit."""
        if updated:
            self.store.chunks.upsert(self.store.chunks.existing(), updated, delete_where=where, embedded=False)
        else:
            self.store.chunks.delete(where)

    def retag(self, key: str, name: str, new_name: str | None) -> int:
        """Put ``new_name`` (``None``: no name) on every memory of ``name``, superseded
        ones included, in one commit; how many memories it was on.

        First, in a commit of its own, the first answers kept for idempotency that name
        ``name`` (its memories', and a conversation's other memories stored in the same
        call) name ``new_name`` instead, as a replay should, so no row keeps the old name.
        A crash in between leaves ``name`` registered, and calling again finishes."""
        old, new = speaker_in_answer(name), speaker_in_answer(new_name)
        answering = in_store(key) + clause.answer_names(old)
        if self.store.chunks.count(answering):
            self.store.chunks.update(answering, {"idem_answer": clause.replaced_in_answer(old, new)})
        tagged = said_by(key, name)
        retagged = self.store.chunks.count(tagged + FIRST_CHUNK)
        if retagged:
            self.store.chunks.update(tagged, {"speaker": clause.literal(new_name)})
        return retagged


def restates(text: str, conversation: str | None, stored: Row) -> bool:
    """Would storing ``text`` restate ``stored`` (same speaker already matched)? Not when
    both come from the same conversation: a person repeating themselves is two turns."""
    same_conversation = conversation is not None and stored["conversation_id"] == conversation
    return not same_conversation and is_restatement(text, stored["content"])
