"""Many memories in one call: the items of an import, or a text blob cut into memories.

Parsing and cutting live here; ``MemoryWrites.memory_add_batch`` stores them with one
embedding pass (batched by the model) and one commit. An import batch also carries an
``Origin`` per item: the idempotency key of its line and the memory it supersedes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wontopos_mcp.errors import InvalidRequestError

from . import validation as v
from .answers import ImportResult
from .dates import parse_moment
from .idempotency import Idempotency
from .names import check_speaker
from .text import split_sentences

MAX_BATCH_ITEMS = 10_000
MAX_BULK_CHARS = 500_000
BULK_MEMORY_CHARS = 1_000
_ITEM_KEYS = ("content", "speaker", "category", "event_date", "conversation_id", "created_at")


@dataclass(frozen=True)
class Item:
    """One memory of a batch, checked."""

    index: int
    content: str
    speaker: str | None
    category: str | None
    event: tuple[int, str] | None
    conversation_id: str | None
    created_us: int | None


def parse_items(items: object, now_us: int) -> list[Item]:
    """Checked batch items; a bad one refuses the whole batch (400 naming ``items[i].x``).
    ``now_us``: a ``created_at`` later than this is refused (``as_of`` could never see it)."""
    if not isinstance(items, list) or not items:
        raise InvalidRequestError("items must be a non-empty list of memories", field="items")
    if len(items) > MAX_BATCH_ITEMS:
        raise InvalidRequestError(f"at most {MAX_BATCH_ITEMS} items per batch", field="items")
    return [_parse_item(i, item, f"items[{i}].", now_us) for i, item in enumerate(items)]


def check_item(item: dict[str, Any], now_us: int) -> Item:
    """One item checked on its own, its fields named as written (``event_date``, not
    ``items[0].event_date``): the import checks each line before it joins a batch, so
    one bad line is one skipped line, told in the file's own terms."""
    return _parse_item(0, item, "", now_us)


def _parse_item(index: int, item: object, prefix: str, now_us: int) -> Item:
    where = prefix.rstrip(".") or "item"
    if not isinstance(item, dict):
        raise InvalidRequestError(f"{where} must be an object with content", field=where)
    unknown = sorted(set(item) - set(_ITEM_KEYS))
    if unknown:
        raise InvalidRequestError(f"{where} has an unknown key {unknown[0]!r}", field=f"{prefix}{unknown[0]}")
    speaker = item.get("speaker")
    event, created = item.get("event_date"), item.get("created_at")
    created_us = None if created is None else parse_moment(created, field=f"{prefix}created_at")[0]
    if created_us is not None and created_us > now_us:
        raise InvalidRequestError(
            f"{prefix}created_at {created} is later than now: a memory cannot have been stored in the future",
            field=f"{prefix}created_at",
        )
    return Item(
        index=index,
        content=v.text(item.get("content"), field=f"{prefix}content", max_chars=v.MAX_CONTENT_CHARS),
        speaker=None if speaker is None else check_speaker(speaker, field=f"{prefix}speaker"),
        category=v.optional_label(item.get("category"), field=f"{prefix}category"),
        event=None if event is None else parse_moment(event, field=f"{prefix}event_date"),
        conversation_id=v.optional_label(item.get("conversation_id"), field=f"{prefix}conversation_id"),
        created_us=created_us,
    )


@dataclass(frozen=True)
class Origin:
    """Where an item of an import batch comes from.

    ``idem``: the key of its line (``import:<exported id>``) and a fingerprint of the
    fields imported; ``supersedes``: the memory it replaces, an id in the store or the
    index of an earlier item of the same batch (``None``: a plain memory).
    """

    idem: Idempotency
    supersedes: str | int | None = None


def bulk_text(text: object) -> str:
    """A blob to cut into memories, checked (at most 500,000 characters)."""
    return v.text(text, field="content", max_chars=MAX_BULK_CHARS)


def cut_text(text: str) -> list[str]:
    """A blob (checked: ``bulk_text``) cut into memories: paragraphs (blank-line
    separated); a paragraph longer than about 1,000 characters is cut at sentence ends
    into pieces of about that size."""
    memories: list[str] = []
    for paragraph in text.replace("\r\n", "\n").split("\n\n"):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph) <= BULK_MEMORY_CHARS:
            memories.append(paragraph)
            continue
        piece = ""
        for sentence in split_sentences(paragraph):
            if piece and len(piece) + len(sentence) + 1 > BULK_MEMORY_CHARS:
                memories.append(piece)
                piece = ""
            piece = f"{piece} {sentence}".strip()
        if piece:
            memories.append(piece)
    return [m[: v.MAX_CONTENT_CHARS] for m in memories]


# -- import batches: what each item's outcome is (MemoryWrites.memory_add_batch) -----------


def known_result(found: tuple[str, str], origin: Origin) -> ImportResult:
    """An import item whose key is in the store: there already, or refused when that
    key came with other fields (a key names one body: sent with another, it is refused)."""
    memory_id, fingerprint = found
    if origin.idem.matches(fingerprint):
        return {"status": "exists", "id": memory_id}
    reason = "a memory with this id was already imported into this store with other content"
    return {"status": "refused", "reason": reason}


def stored_target(supersedes: str | int | None, results: list[ImportResult]) -> str | None:
    """The store id an import item supersedes; ``None`` when the earlier item of the
    batch it names was not stored (a duplicate, refused): it is then a plain memory."""
    if supersedes is None or isinstance(supersedes, str):
        return supersedes
    earlier = results[supersedes]
    return earlier["id"] if earlier["status"] in ("stored", "exists") else None


def not_current(missing: bool) -> str:
    if missing:
        return "the memory it supersedes is no longer in this store"
    return "the memory it supersedes was already superseded in this store; only a current version can be"
