"""Memory writes: add, conversations, supersede, forget, each at most once per
idempotency key and each in one LanceDB commit.

``MemoryService`` (``service``) inherits these; they are apart only to keep each module
short. Every write embeds outside the write lock, then under it checks again what it
depends on (store, speakers, the memory, duplicates) and commits.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from . import validation as v
from .batch import Origin, carry_key, cut_text, forget_marks, known_result, not_current, parse_items, stored_target
from .conversation import parse_messages
from .dates import month_bucket, parse_moment
from .duplicates import is_restatement, restatement_key
from .errors import ConflictError, InvalidRequestError, NotFoundError
from .idempotency import WINDOW_US, Idempotency, Running, parse_record, record_key, record_row, replayed
from .names import check_speaker
from .registry import StoresAndSpeakers
from .scope import in_store, quote, quote_all, speaker_is
from .text import chunk_text, duplicate_key, importance

if TYPE_CHECKING:
    from .embeddings import Embedder, ModelLoader

DEFAULT_CATEGORY = "general"
T = TypeVar("T")


class MemoryWrites(StoresAndSpeakers):
    models: "ModelLoader"
    model_wait: float
    _running: Running

    # -- memories: writes ----------------------------------------------------------------------

    def memory_add(
        self,
        content: Any,
        speaker: Any = None,
        category: Any = None,
        event_date: Any = None,
        conversation_id: Any = None,
        user_id: Any = None,
        *,
        idempotency: Idempotency | None = None,
    ) -> dict[str, Any]:
        text = v.text(content, field="content", max_chars=v.MAX_CONTENT_CHARS)
        name = None if speaker is None else check_speaker(speaker)
        category = v.optional_label(category, field="category") or DEFAULT_CATEGORY
        event = None if event_date is None else parse_moment(event_date, field="event_date")
        conversation = v.optional_label(conversation_id, field="conversation_id")
        key, display = self._resolve(user_id)
        memory = {
            "content": text, "speaker": name, "category": category, "event": event,
            "conversation_id": conversation, "role": None,
        }  # fmt: skip

        def decide() -> tuple[str | None, int]:
            _, _, recorded = self._checked(user_id, [(name, "speaker")])
            return self._find_duplicate(key, text, name, conversation), self._last_seq(key, recorded)

        def write(embedded: Embedded, decided: tuple[str | None, int]) -> Written:
            duplicate, last_seq = decided
            if duplicate is not None:
                return Written([], _duplicate_answer(display, duplicate))
            memory_id, rows = self._new_rows(key, memory, embedded.chunks[0], embedded.vectors[0], seq=last_seq + 1)
            return Written(rows, _stored_answer(display, memory_id, name, len(rows)))

        return self._write_once(key, idempotency, [text], decide, write)

    # -- idempotent commits --------------------------------------------------------------------

    def _write_once(
        self,
        key: str,
        idem: Idempotency | None,
        texts: list[str],
        decide: Callable[[], T],
        write: Callable[[Embedded, T], Written],
    ) -> dict[str, Any]:
        """Embed ``texts`` and run one memory write, at most once per idempotency key.

        ``decide`` makes the reads a write depends on (store, speakers, the memory,
        duplicates, the next sequence number) and refuses a bad call. It runs before
        the model is needed, and runs again inside the write lock only if the database
        changed since (LanceDB table versions, other processes' commits included), so
        the lock is held for little more than the append. (Embedding on another thread
        meanwhile was measured slower on two cores: onnxruntime already uses both.)
        ``write`` builds the rows from the embedding and the decision; the commit
        carries the idempotency key with the memories.
        """
        replay = self._replay(key, idem)
        if replay is not None:
            return replay
        seen = self.store.versions()
        decided = decide()
        with self._running.guard(key, idem):
            embedded = self._embed(texts)
            with self.store.write_lock():
                replay = self._replay(key, idem)
                if replay is not None:
                    return replay
                if self.store.versions() != seen:
                    decided = decide()
                return self._commit(key, idem, write(embedded, decided))

    def _embed(self, texts: list[str]) -> Embedded:
        """Chunk and embed texts in one batch; makes sure the chunks table exists (after
        the write's checks passed: a refused call leaves no trace). No texts need no model."""
        if not texts:
            return Embedded([], [])
        embedder = self._embedder()
        self.store.chunks(embedder.model_id, embedder.dim)
        chunked = [chunk_text(t, embedder.max_chars) for t in texts]
        flat = embedder.embed_passages([c for chunks in chunked for c in chunks])
        vectors, at = [], 0
        for chunks in chunked:
            vectors.append(flat[at : at + len(chunks)])
            at += len(chunks)
        return Embedded(chunked, vectors)

    def _replay(self, key: str, idem: Idempotency | None) -> dict[str, Any] | None:
        """The first answer to this key in this store within 24 h, if there was one."""
        if idem is None:
            return None
        since = self._now_us() - WINDOW_US
        rows = self.store.rows(
            in_store(key) + f" AND idem_key = {quote(idem.key)} AND created_us >= {since}",
            columns=("idem_fp", "idem_answer"),
            limit=1,
        )
        if rows:
            return replayed(idem, rows[0]["idem_fp"], rows[0]["idem_answer"])
        records = self.store.registry_rows(f"key = {quote(record_key(key, idem.key))} AND created_us >= {since}")
        if records:
            return replayed(idem, *parse_record(records[0]["value"]))
        return None

    def _commit(self, key: str, idem: Idempotency | None, written: "Written") -> dict[str, Any]:
        """Write the new rows (inside the write lock) with the idempotency record in the
        same commit; an outcome that writes no memory keeps its record in the registry.
        """
        rows, answer = written.rows, written.answer
        if idem is not None:
            answer_json = json.dumps(answer, ensure_ascii=False)
            for row in rows:
                row.update(idem_key=idem.key, idem_fp=idem.fingerprint, idem_answer=answer_json)
            if not rows:
                record = record_row(key, idem.key, idem.fingerprint, answer_json, self._now_us())
                self.store.registry_delete(f"key = {quote(record['key'])}")
                self.store.registry_add([record])
        table = self.store.existing_chunks()
        if written.updated:
            self.store.upsert_chunks(table, written.updated + rows)
        elif rows:
            self.store.add_chunks(table, rows)
        return answer

    def _find_duplicate(self, key: str, text: str, name: str | None, conversation: str | None) -> str | None:
        """A current memory this text restates, by the same speaker, from another conversation.

        Every restatement, exact or near-verbatim, has the text's restatement key
        (``duplicates.restatement_key``), so one indexed equality lookup finds them all;
        no vector search, and no candidate missed. Rows written before the current key
        function carry another key (``dup_key`` before 4774e8d, the looser key of
        4774e8d..6f096ab), so the normalised key is also looked up in ``dup_key``: exact
        restatements of such rows are still caught (~1 ms more at 1M rows than one
        column), near-verbatim ones of them only missed, never wrongly matched.
        ``_restates`` still compares the texts and applies the conversation rule.
        """
        dup = duplicate_key(text)
        where = (
            in_store(key) + " AND NOT superseded AND " + speaker_is(name)
            + f" AND chunk_idx = 0 AND (restate_key IN {quote_all([restatement_key(text), dup])}"
            + f" OR dup_key = {quote(dup)})"
        )  # fmt: skip
        for row in self.store.rows(where, columns=("memory_id", "content", "conversation_id")):
            if _restates(text, conversation, row):
                return row["memory_id"]
        return None

    def _new_rows(
        self,
        key: str,
        memory: dict[str, Any],
        chunks: list[str],
        vectors: Any,
        *,
        seq: int | None = None,
        created: int | None = None,
    ) -> tuple[str, list[dict[str, Any]]]:
        """The chunk rows of a new memory; ``seq`` defaults to the store's next number,
        ``created`` (microseconds) to now."""
        memory_id = str(uuid.uuid4())
        created = self._now_us() if created is None else created
        event = memory["event"]
        when = event[0] if event else created
        shared = {
            "memory_id": memory_id,
            "n_chunks": len(chunks),
            "user_id": key,
            "speaker": memory["speaker"],
            "content": memory["content"],
            "dup_key": duplicate_key(memory["content"]),
            "restate_key": restatement_key(memory["content"]),
            "created_us": created,
            "seq": self._last_seq(key) + 1 if seq is None else seq,
            "event_date": event[1] if event else None,
            "event_us": event[0] if event else None,
            "when_us": when,
            "time_bucket": month_bucket(when),
            "category": memory["category"],
            "importance": importance(memory["content"]),
            "superseded": False,
            "superseded_by": None,
            "conversation_id": memory["conversation_id"],
            "role": memory["role"],
        }
        rows = [
            {**shared, "chunk_id": f"{memory_id}:{i}", "chunk_idx": i, "text": chunk, "vector": vectors[i].tolist()}
            for i, chunk in enumerate(chunks)
        ]
        return memory_id, rows

    def memory_add_batch(
        self,
        items: Any,
        user_id: Any = None,
        *,
        idempotency: Idempotency | None = None,
        origins: Sequence[Origin] | None = None,
    ) -> dict[str, Any]:
        """Store many memories with one embedding pass and one commit (imports, bulk).

        Duplicates are checked as single writes check them, exact and near-verbatim
        restatements alike, against the store and within the batch: by their keys (one
        lookup per 500 items), then by the texts. Items may carry ``created_at`` (an
        import keeps its dates).

        ``origins`` (the ``import`` command, one per item) make it an import batch, and
        the answer gains ``results``, one per item (``stored`` / ``exists`` /
        ``duplicate`` / ``refused`` with a ``reason``). Each item is written under its
        own key, looked up at any age: an imported memory keeps its exported
        ``created_at``, which the 24 h window (measured on ``created_at``) would miss. An
        item whose key is in the store already ``exists`` and is not embedded again; the
        same key with other fields is refused. An item that supersedes a memory is stored
        with its own ``created_at`` and the old one's speaker, category and conversation
        (SPEC), unchecked for duplicates (as ``memory_supersede``), and only if that
        memory is current; when the item it supersedes was not stored, it is a plain
        memory.
        """
        parsed = parse_items(items)
        key, display = self._resolve(user_id)
        if origins is not None and (idempotency is not None or len(origins) != len(parsed)):
            raise ValueError("origins: one per item, and no batch idempotency key")
        known = self._imported(key, origins or ())
        fresh = [item for item in parsed if origins is None or origins[item.index].idem.key not in known]

        def check() -> None:
            self._checked(user_id, [(item.speaker, f"items[{item.index}].speaker") for item in fresh])

        def write(embedded: Embedded, _: None) -> Written:
            if origins is not None:  # another import may have written some since
                known.update(self._imported(key, [origins[item.index] for item in fresh]))
            vectors = {item.index: (c, vs) for item, c, vs in zip(fresh, embedded.chunks, embedded.vectors)}
            keys = {i: (duplicate_key(parsed[i].content), restatement_key(parsed[i].content)) for i in vectors}
            seen = self._stored_restated(key, sorted(set(keys.values())))
            stored_olds = self._superseded_rows(key, origins or (), known)
            batch_rows: dict[str, list[dict[str, Any]]] = {}  # memory id -> rows, of this batch
            seq = self._last_seq(key)
            ids, rows, updated, duplicates, results = [], [], [], 0, []
            for item in parsed:
                origin = None if origins is None else origins[item.index]
                if origin is not None and origin.idem.key in known:
                    results.append(known_result(known[origin.idem.key], origin))
                    continue
                marks = [(k, item.speaker) for k in keys[item.index]]
                target = None if origin is None else stored_target(origin.supersedes, results)
                old = None if target is None else batch_rows.get(target) or stored_olds.get(target)
                if target is None:
                    said = item.content, item.conversation_id
                    restated = [o for m in marks for o in seen.get(m, ()) if _restates(*said, o)]
                    if restated:
                        duplicates += 1
                        results.append({"status": "duplicate", "duplicate_of": restated[0]["memory_id"]})
                        continue
                elif old is None or old[0]["superseded"]:
                    results.append({"status": "refused", "reason": not_current(old is None)})
                    continue
                seq += 1
                like = {"speaker": item.speaker, "category": item.category, "conversation_id": item.conversation_id}
                if old is not None:  # SPEC: the new version keeps the old one's speaker, category, conversation
                    like = {k: old[0][k] for k in like}
                memory = {**like, "content": item.content, "event": item.event, "role": None}
                memory["category"] = memory["category"] or DEFAULT_CATEGORY
                chunks, vecs = vectors[item.index]
                memory_id, new_rows = self._new_rows(key, memory, chunks, vecs, seq=seq, created=item.created_us)
                if old is not None:
                    for row in old:
                        row.update(superseded=True, superseded_by=memory_id)
                    forget_marks(seen, old[0])
                    updated += old if target in stored_olds else []
                if origin is not None:
                    carry_key(new_rows, origin, {"user_id": display, "id": memory_id, "status": "stored"})
                    batch_rows[memory_id] = new_rows
                    known[origin.idem.key] = (memory_id, origin.idem.fingerprint)  # the same line again: exists
                for mark in marks:
                    seen.setdefault(mark, []).append(new_rows[0])
                ids.append(memory_id)
                rows += new_rows
                results.append({"status": "stored", "id": memory_id})
            answer = {"user_id": display, "status": "stored", "ids": ids, "count": len(ids), "duplicates": duplicates}
            if origins is not None:
                answer["results"] = results
            return Written(rows, answer, updated=updated)

        return self._write_once(key, idempotency, [item.content for item in fresh], check, write)

    def _imported(self, key: str, origins: Sequence[Origin]) -> dict[str, tuple[str, str]]:
        """(memory id, fingerprint) by import key, of the store's memories written under
        these keys, at any age (one lookup per 500 keys)."""
        found: dict[str, tuple[str, str]] = {}
        wanted = sorted({origin.idem.key for origin in origins})
        for start in range(0, len(wanted), 500):
            where = in_store(key) + f" AND chunk_idx = 0 AND idem_key IN {quote_all(wanted[start : start + 500])}"
            for row in self.store.rows(where, columns=("idem_key", "idem_fp", "memory_id")):
                found[row["idem_key"]] = (row["memory_id"], row["idem_fp"])
        return found

    def _superseded_rows(
        self, key: str, origins: Sequence[Origin], known: dict[str, tuple[str, str]]
    ) -> dict[str, list[dict[str, Any]]]:
        """Every row (all columns, to rewrite them) of the stored memories an import batch
        supersedes: named by id, or by an earlier item already in the store."""
        ids = {o.supersedes for o in origins if isinstance(o.supersedes, str)}
        ids |= {
            known[origins[o.supersedes].idem.key][0]
            for o in origins
            if isinstance(o.supersedes, int) and origins[o.supersedes].idem.key in known
        }
        found: dict[str, list[dict[str, Any]]] = {}
        if ids:
            where = in_store(key) + f" AND memory_id IN {quote_all(sorted(ids))}"
            for row in sorted(self.store.rows(where, columns=None), key=lambda r: r["chunk_idx"]):
                found.setdefault(row["memory_id"], []).append(row)
        return found

    def memory_add_bulk(
        self,
        content: Any,
        category: Any = None,
        timestamp: Any = None,
        user_id: Any = None,
        *,
        idempotency: Idempotency | None = None,
    ) -> dict[str, Any]:
        """A text blob (at most 500,000 characters) cut into memories and stored as a batch."""
        pieces = cut_text(content)
        category = v.optional_label(category, field="category")
        created = None if timestamp is None else parse_moment(timestamp, field="timestamp")[1]
        items = [{"content": p, "category": category, "created_at": created} for p in pieces]
        return self.memory_add_batch(items, user_id, idempotency=idempotency)

    def _stored_restated(
        self, key: str, keys: list[tuple[str, str]]
    ) -> dict[tuple[str, str | None], list[dict[str, Any]]]:
        """Current memories of the store matching one of these (normalised key, restatement
        key) pairs as ``_find_duplicate`` matches them, filed under both their keys with
        their speaker."""
        found: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
        columns = ("memory_id", "dup_key", "restate_key", "speaker", "content", "conversation_id")
        for start in range(0, len(keys), 500):
            dks, rks = zip(*keys[start : start + 500])
            where = (
                in_store(key) + " AND chunk_idx = 0 AND NOT superseded"
                + f" AND (dup_key IN {quote_all(list(dks))} OR restate_key IN {quote_all(list(rks))})"
            )  # fmt: skip
            for row in self.store.rows(where, columns=columns):
                for mark in {(row["dup_key"], row["speaker"]), (row["restate_key"], row["speaker"])}:
                    found.setdefault(mark, []).append(row)
        return found

    def memory_add_messages(
        self,
        messages: Any,
        conversation_id: Any = None,
        user_id: Any = None,
        *,
        idempotency: Idempotency | None = None,
    ) -> dict[str, Any]:
        """Store a conversation: one labelled memory per message, all in one commit."""
        parsed = parse_messages(messages)
        conversation = v.optional_label(conversation_id, field="conversation_id") or str(uuid.uuid4())
        key, display = self._resolve(user_id)

        def check() -> None:
            self._checked(user_id, [(m.speaker, f"messages[{m.index}].name") for m in parsed])

        def write(embedded: Embedded, _: None) -> Written:
            seq = self._last_seq(key)
            results, rows = [], []
            for message, chunks, vectors in zip(parsed, embedded.chunks, embedded.vectors):
                duplicate = self._find_duplicate(key, message.content, message.speaker, conversation)
                if duplicate is not None:
                    results.append(_duplicate_answer(display, duplicate))
                    continue
                seq += 1
                memory = {
                    "content": message.content, "speaker": message.speaker, "category": DEFAULT_CATEGORY,
                    "event": None, "conversation_id": conversation, "role": message.role,
                }  # fmt: skip
                memory_id, new_rows = self._new_rows(key, memory, chunks, vectors, seq=seq)
                rows += new_rows
                results.append(_stored_answer(display, memory_id, message.speaker, len(chunks)))
            return Written(rows, {"user_id": display, "conversation_id": conversation, "results": results})

        return self._write_once(key, idempotency, [m.content for m in parsed], check, write)

    # -- memories: forget and supersede -----------------------------------------------------------

    def memory_forget(
        self, memory_id: Any = None, speaker: Any = None, confirm_records: Any = None, user_id: Any = None
    ) -> dict[str, Any]:
        if (memory_id is None) == (speaker is None):
            raise InvalidRequestError(
                "give exactly one of memory_id, or speaker with confirm_records", field="memory_id"
            )
        if memory_id is not None:
            if confirm_records is not None:
                raise InvalidRequestError("confirm_records goes with speaker, not memory_id", field="confirm_records")
            return self._forget_one(v.label(memory_id, field="memory_id"), user_id)
        name = check_speaker(speaker)
        if confirm_records is None:
            raise InvalidRequestError(
                "confirm_records is required with speaker: pass records_to_delete from by_speaker",
                field="confirm_records",
            )
        confirm = v.integer(confirm_records, field="confirm_records", low=0)
        return self._forget_speaker(name, confirm, user_id)

    def _forget_one(self, memory_id: str, user_id: Any) -> dict[str, Any]:
        key, display = self._resolve(user_id)
        self._memory_row(key, memory_id)
        with self.store.write_lock():
            row = self._memory_row(key, memory_id)
            gone = in_store(key) + f" AND memory_id = {quote(memory_id)}"
            # The versions it superseded are relinked in the same commit as the delete:
            # forgetting the newest version makes its predecessor current again; forgetting
            # a middle one links its predecessor to its successor (A -> B -> C becomes A -> C).
            previous = self.store.rows(in_store(key) + f" AND superseded_by = {quote(memory_id)}", columns=None)
            successor = row["superseded_by"]
            relinked = [{**r, "superseded": successor is not None, "superseded_by": successor} for r in previous]
            self._delete_memories(key, gone, updated=relinked)
        return {"user_id": display, "status": "deleted", "deleted": 1}

    def _forget_speaker(self, name: str, confirm: int, user_id: Any) -> dict[str, Any]:
        key, display = self._resolve(user_id)
        self._require_registered(key, name, writing=False)
        said = in_store(key) + f" AND speaker = {quote(name)}"
        with self.store.write_lock():
            current = self.store.count(said)
            if current != confirm:
                raise ConflictError(
                    f"confirm_records is {confirm} but {name!r} now has {current} records to delete; "
                    "call by_speaker again and confirm the current number",
                    field="confirm_records",
                    records_to_delete=current,
                )
            deleted = self.store.count(said + " AND chunk_idx = 0")
            self._delete_memories(key, said)
        return {"user_id": display, "status": "deleted", "deleted": deleted}

    def memory_supersede(
        self, memory_id: Any, content: Any, user_id: Any = None, *, idempotency: Idempotency | None = None
    ) -> dict[str, Any]:
        mid = v.label(memory_id, field="memory_id")
        text = v.text(content, field="content", max_chars=v.MAX_CONTENT_CHARS)
        key, display = self._resolve(user_id)

        def check() -> dict[str, Any]:
            self._resolve(user_id)
            return _refuse_superseded(self._memory_row(key, mid))

        def write(embedded: Embedded, old: dict[str, Any]) -> Written:
            memory = {
                "content": text, "speaker": old["speaker"], "category": old["category"], "event": None,
                "conversation_id": old["conversation_id"], "role": None,  # a correction, not a turn said
            }  # fmt: skip
            new_id, rows = self._new_rows(key, memory, embedded.chunks[0], embedded.vectors[0])
            old_rows = self.store.rows(in_store(key) + f" AND memory_id = {quote(mid)}", columns=None)
            marked = [{**r, "superseded": True, "superseded_by": new_id} for r in old_rows]
            answer = {"user_id": display, "id": new_id, "status": "stored", "superseded": mid}
            return Written(rows, answer, updated=marked)

        return self._write_once(key, idempotency, [text], check, write)

    def _memory_row(self, key: str, memory_id: str, columns: Any = None) -> dict[str, Any]:
        where = in_store(key) + f" AND memory_id = {quote(memory_id)} AND chunk_idx = 0"
        rows = self.store.rows(where, **({"columns": columns} if columns else {}))
        if not rows:
            raise NotFoundError(f"memory '{memory_id}' does not exist in this store", memory_id=memory_id)
        return rows[0]

    # -- helpers ------------------------------------------------------------------------------------

    def _embedder(self) -> "Embedder":
        return self.models.get(timeout=self.model_wait)


@dataclass
class Embedded:
    """Texts cut into chunks, and one array of chunk vectors per text."""

    chunks: list[list[str]]
    vectors: list[Any]


@dataclass
class Written:
    """What a write decided under the lock: new rows, rows updated with them, the answer."""

    rows: list[dict[str, Any]]
    answer: dict[str, Any]
    updated: list[dict[str, Any]] = field(default_factory=list)


def _stored_answer(display: str, memory_id: str, speaker: str | None, chunks: int) -> dict[str, Any]:
    answer: dict[str, Any] = {"user_id": display, "id": memory_id, "status": "stored"}
    if speaker is not None:
        answer["speaker"] = speaker
    answer["chunks"] = chunks
    return answer


def _restates(text: str, conversation: str | None, stored: dict[str, Any]) -> bool:
    """Would storing ``text`` restate ``stored`` (same speaker already matched)? Not when
    both come from the same conversation: a person repeating themselves is two turns."""
    same_conversation = conversation is not None and stored["conversation_id"] == conversation
    return not same_conversation and is_restatement(text, stored["content"])


def _duplicate_answer(display: str, duplicate_of: str) -> dict[str, Any]:
    return {
        "user_id": display,
        "status": "duplicate",
        "id": "",
        "duplicate_of": duplicate_of,
        "note": "not stored: this restates a current memory of the same speaker; "
        "use memory_supersede to change a fact",
    }


def _refuse_superseded(row: dict[str, Any]) -> dict[str, Any]:
    if row["superseded"]:
        raise ConflictError(
            f"memory '{row['memory_id']}' was already superseded; supersede its current version",
            memory_id=row["memory_id"],
            superseded_by=row["superseded_by"],
        )
    return row
