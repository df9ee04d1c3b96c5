"""Many memories in one embedding pass and one commit: batches, text blobs, imports.

Duplicates are checked as single writes check them, exact and near-verbatim
restatements alike, against the store and within the batch: by their keys (one lookup
per 500 items), then by the texts. Items may carry ``created_at`` (an import keeps its
dates).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wontopos_mcp.contract import DEFAULT_CATEGORY
from wontopos_mcp.errors import InvalidRequestError
from wontopos_mcp.rules import validation as v
from wontopos_mcp.rules.answers import JSON, ImportResult, MemoryBatchAnswer
from wontopos_mcp.rules.batch_items import (
    Item,
    Origin,
    bulk_text,
    cut_text,
    known_result,
    not_current,
    parse_items,
    stored_target,
)
from wontopos_mcp.rules.dates import parse_moment
from wontopos_mcp.rules.idempotency import Idempotency, answer_json
from wontopos_mcp.rules.redaction import Redactor, tally, with_redactions
from wontopos_mcp.rules.restatement import restatement_key
from wontopos_mcp.rules.text import duplicate_key
from wontopos_mcp.storage.rows import ChunkRow

from .commits import Embedded, Written
from .memories import restates

if TYPE_CHECKING:
    from .commits import Commits

Row = ChunkRow
Mark = tuple[str, "str | None"]  # (a duplicate key, the speaker)


@dataclass
class _Outcome:
    """What a batch has decided so far, item by item."""

    ids: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    updated: list[Row] = field(default_factory=list)
    results: list[ImportResult] = field(default_factory=list)
    duplicates: int = 0


def _redacted_items(redactor: Redactor, items: list[Item]) -> tuple[list[Item], dict[str, int]]:
    """Each item's speaker checked (a name that is a secret refuses the batch) and its
    content, category and conversation id redacted; what was redacted, summed."""
    done, counts = [], []
    for item in items:
        redactor.refuse_secret_name(item.speaker, field=f"items[{item.index}].speaker")
        found = redactor.redact(item.content)
        (category, conversation), in_labels = redactor.redact_labels(item.category, item.conversation_id)
        done.append(dataclasses.replace(item, content=found.text, category=category, conversation_id=conversation))
        counts += [found.counts, in_labels]
    return done, tally(counts)


class BatchWrites:
    def __init__(self, commits: Commits) -> None:
        self.commits = commits
        self.registry = commits.registry
        self.memories = commits.memories

    def memory_add_batch(
        self,
        items: JSON,
        user_id: JSON = None,
        *,
        idempotency: Idempotency | None = None,
        origins: Sequence[Origin] | None = None,
        redacted: Mapping[str, int] | None = None,
    ) -> MemoryBatchAnswer:
        """Store many memories with one embedding pass and one commit (imports, bulk).

        ``origins`` (the ``import`` command, one per item) make it an import batch, and
        the answer gains ``results``, one per item (``stored`` / ``exists`` /
        ``duplicate`` / ``refused`` with a ``reason``). Each item is written under its
        own key, looked up at any age: an imported memory keeps its exported
        ``created_at``, which the 24 h window (measured on ``created_at``) would miss. An
        item whose key is in the store already ``exists`` and is not embedded again; the
        same key with other fields is refused. An item that supersedes a memory is stored
        with its own ``created_at`` and the old one's speaker, category and conversation,
        unchecked for duplicates (as ``memory_supersede``), and only if that memory is
        current; when the item it supersedes was not stored, it is a plain
        memory.

        Secrets in the items' texts are redacted first (the ``redact`` setting);
        ``redacted``: what was redacted from the text the items were cut from (bulk).
        """
        parsed = parse_items(items, self.commits.now_us())
        handle = self.registry.resolve(user_id)
        key = handle.key
        if origins is not None and (idempotency is not None or len(origins) != len(parsed)):
            raise ValueError("origins: one per item, and no batch idempotency key")
        parsed, found = _redacted_items(self.commits.redactor, parsed)
        counts = tally([found, redacted or {}])
        known = self._imported(key, origins or ())
        fresh = [item for item in parsed if origins is None or origins[item.index].idem.key not in known]

        def check() -> None:
            self.registry.confirm(handle, [(item.speaker, f"items[{item.index}].speaker") for item in fresh])

        def write(embedded: Embedded, _: None) -> Written[MemoryBatchAnswer]:
            if origins is not None:  # another import may have written some since
                known.update(self._imported(key, [origins[item.index] for item in fresh]))
            vectors = {item.index: (c, vs) for item, c, vs in zip(fresh, embedded.chunks, embedded.vectors)}
            written = _BatchDecision(self, handle.key, handle.display, parsed, origins, known, vectors).decide()
            with_redactions(written.answer, counts)
            return written

        supersedes = origins is not None and any(origin.supersedes is not None for origin in origins)
        answer = self.commits.write_once(
            key, idempotency, [item.content for item in fresh], check, write, rewrites=supersedes
        )
        if origins is not None:
            self._keep_duplicates(key, origins, answer.get("results", []))
        return answer

    def memory_add_bulk(
        self,
        content: JSON,
        category: JSON = None,
        timestamp: JSON = None,
        user_id: JSON = None,
        *,
        idempotency: Idempotency | None = None,
    ) -> MemoryBatchAnswer:
        """A text blob (at most 500,000 characters) cut into memories and stored as a batch.

        Secrets are redacted from the whole blob before it is cut, so a private key
        block with blank lines in it is found whole."""
        text = bulk_text(content)
        category = v.optional_label(category, field="category")
        created = None if timestamp is None else self._written_at(timestamp)
        found = self.commits.redactor.redact(text)
        items = [{"content": p, "category": category, "created_at": created} for p in cut_text(found.text)]
        return self.memory_add_batch(items, user_id, idempotency=idempotency, redacted=found.counts)

    def _written_at(self, timestamp: JSON) -> str:
        """``timestamp`` as the memories' ``created_at``: when the text was written, which
        cannot be later than now (such a memory would be missing from every ``as_of``
        answer until then, and would page as newer than every memory written meanwhile)."""
        us, text = parse_moment(timestamp, field="timestamp")
        if us > self.commits.now_us():
            raise InvalidRequestError(
                f"timestamp {text} is later than now; give the moment the text was written", field="timestamp"
            )
        return text

    def _imported(self, key: str, origins: Sequence[Origin]) -> dict[str, tuple[str, str]]:
        """(memory id, fingerprint) of the items imported before: stored under their key,
        or found a duplicate of a memory still stored (its kept record names it), so an
        import run again embeds neither."""
        wanted = [origin.idem.key for origin in origins]
        found = self.memories.imported(key, wanted)
        missing = [k for k in wanted if k not in found]
        kept = self.registry.kept_records(key, missing) if missing else {}
        for idem_key, (fingerprint, answer) in kept.items():
            named = json.loads(answer).get("duplicate_of")
            if isinstance(named, str):
                found[idem_key] = (named, fingerprint)
        return found

    def _keep_duplicates(self, key: str, origins: Sequence[Origin], results: Sequence[ImportResult]) -> None:
        """After the batch's commit: a record for each item found a duplicate, naming the
        memory it restates, so importing it again finds it without embedding it (the
        record goes when that memory is forgotten, and the item is then stored afresh)."""
        now = self.commits.now_us()
        records = [
            (origin.idem.key, origin.idem.fingerprint, answer_json(result), now)
            for origin, result in zip(origins, results)
            if result["status"] == "duplicate"
        ]
        if records:
            with self.commits.store.write_lock(key):
                self.registry.keep_idempotency_records(key, records)

    def superseded_rows(
        self, key: str, origins: Sequence[Origin], known: dict[str, tuple[str, str]]
    ) -> dict[str, list[Row]]:
        """Every row (all columns, to rewrite them) of the stored memories an import batch
        supersedes: named by id, or by an earlier item already in the store."""
        ids = {o.supersedes for o in origins if isinstance(o.supersedes, str)}
        ids |= {
            known[origins[o.supersedes].idem.key][0]
            for o in origins
            if isinstance(o.supersedes, int) and origins[o.supersedes].idem.key in known
        }
        return self.memories.chunks_by_memory(key, ids)


class _BatchDecision:
    """One batch's decision under the write lock, item by item: exists (an import key
    already stored), duplicate, refused (supersedes no current memory), or stored."""

    def __init__(
        self,
        writes: BatchWrites,
        key: str,
        display: str,
        parsed: list[Item],
        origins: Sequence[Origin] | None,
        known: dict[str, tuple[str, str]],
        vectors: dict[int, tuple[list[str], Any]],
    ) -> None:
        self.memories = writes.memories
        self.key, self.display, self.parsed, self.origins, self.known = key, display, parsed, origins, known
        self.vectors = vectors
        self.keys = {i: (duplicate_key(parsed[i].content), restatement_key(parsed[i].content)) for i in vectors}
        self.seen = self.memories.restated_by_keys(key, sorted(set(self.keys.values())))
        self.stored_olds = writes.superseded_rows(key, origins or (), known)
        self.batch_rows: dict[str, list[Row]] = {}  # memory id -> rows, of this batch
        self.seq = writes.commits.last_seq(key)
        self.out = _Outcome()

    def decide(self) -> Written[MemoryBatchAnswer]:
        for item in self.parsed:
            self._one(item, None if self.origins is None else self.origins[item.index])
        out = self.out
        answer: MemoryBatchAnswer = {
            "user_id": self.display, "status": "stored", "ids": out.ids, "count": len(out.ids),
            "duplicates": out.duplicates,
        }  # fmt: skip
        if self.origins is not None:
            answer["results"] = out.results
        return Written(out.rows, answer, updated=out.updated)

    def _one(self, item: Item, origin: Origin | None) -> None:
        out = self.out
        if origin is not None and origin.idem.key in self.known:
            out.results.append(known_result(self.known[origin.idem.key], origin))
            return
        marks: list[Mark] = [(k, item.speaker) for k in self.keys[item.index]]
        target = None if origin is None else stored_target(origin.supersedes, out.results)
        old = None if target is None else self.batch_rows.get(target) or self.stored_olds.get(target)
        if target is None:
            restated = [
                o for m in marks for o in self.seen.get(m, ()) if restates(item.content, item.conversation_id, o)
            ]
            if restated:
                out.duplicates += 1
                out.results.append({"status": "duplicate", "duplicate_of": restated[0]["memory_id"]})
                return
        elif old is None or old[0]["superseded"]:
            out.results.append({"status": "refused", "reason": not_current(old is None)})
            return
        memory_id, new_rows = self._store(item, old)
        if old is not None:
            for row in old:
                row["superseded"], row["superseded_by"] = True, memory_id
            _forget_marks(self.seen, old[0])
            out.updated += old if target in self.stored_olds else []
        if origin is not None:
            _carry_key(new_rows, origin, {"user_id": self.display, "id": memory_id, "status": "stored"})
            self.batch_rows[memory_id] = new_rows
            self.known[origin.idem.key] = (memory_id, origin.idem.fingerprint)  # the same line again: exists
        for mark in marks:
            self.seen.setdefault(mark, []).append(new_rows[0])
        out.ids.append(memory_id)
        out.rows += new_rows
        out.results.append({"status": "stored", "id": memory_id})

    def _store(self, item: Item, old: list[Row] | None) -> tuple[str, list[Row]]:
        """The new memory's rows: the item's fields, or for a new version the old one's
        speaker, category and conversation."""
        self.seq += 1
        like = {"speaker": item.speaker, "category": item.category, "conversation_id": item.conversation_id}
        if old is not None:
            first = old[0]
            like = {
                "speaker": first["speaker"],
                "category": first["category"],
                "conversation_id": first["conversation_id"],
            }
        memory = {**like, "content": item.content, "event": item.event, "role": None}
        memory["category"] = memory["category"] or DEFAULT_CATEGORY
        chunks, vecs = self.vectors[item.index]
        return self.memories.new_rows(self.key, memory, chunks, vecs, seq=self.seq, created=item.created_us)


def _forget_marks(seen: dict[tuple[str, str | None], list[Row]], row: Row) -> None:
    """A memory superseded within a batch is no longer current: nothing later restates it."""
    for mark in ((row["dup_key"], row["speaker"]), (row["restate_key"], row["speaker"])):
        if mark in seen:
            seen[mark] = [o for o in seen[mark] if o["memory_id"] != row["memory_id"]]


def _carry_key(rows: list[Row], origin: Origin, answer: Mapping[str, str]) -> None:
    """An import item's own idempotency key on its rows, committed with them."""
    kept = answer_json(answer)
    for row in rows:
        row["idem_key"], row["idem_fp"], row["idem_answer"] = origin.idem.key, origin.idem.fingerprint, kept
