"""Many memories in one call: the items of an import, or a text blob cut into memories.

Parsing and cutting live here; ``MemoryWrites.memory_add_batch`` stores them with one
embedding pass (batched by the model) and one commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import validation as v
from .dates import parse_moment
from .errors import InvalidRequestError
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


def parse_items(items: Any) -> list[Item]:
    """Checked batch items; a bad one refuses the whole batch (400 naming ``items[i].x``)."""
    if not isinstance(items, list) or not items:
        raise InvalidRequestError("items must be a non-empty list of memories", field="items")
    if len(items) > MAX_BATCH_ITEMS:
        raise InvalidRequestError(f"at most {MAX_BATCH_ITEMS} items per batch", field="items")
    return [_parse_item(i, item) for i, item in enumerate(items)]


def _parse_item(index: int, item: Any) -> Item:
    where = f"items[{index}]"
    if not isinstance(item, dict):
        raise InvalidRequestError(f"{where} must be an object with content", field=where)
    unknown = sorted(set(item) - set(_ITEM_KEYS))
    if unknown:
        raise InvalidRequestError(f"{where} has an unknown key {unknown[0]!r}", field=f"{where}.{unknown[0]}")
    speaker = item.get("speaker")
    event, created = item.get("event_date"), item.get("created_at")
    return Item(
        index=index,
        content=v.text(item.get("content"), field=f"{where}.content", max_chars=v.MAX_CONTENT_CHARS),
        speaker=None if speaker is None else check_speaker(speaker, field=f"{where}.speaker"),
        category=v.optional_label(item.get("category"), field=f"{where}.category"),
        event=None if event is None else parse_moment(event, field=f"{where}.event_date"),
        conversation_id=v.optional_label(item.get("conversation_id"), field=f"{where}.conversation_id"),
        created_us=None if created is None else parse_moment(created, field=f"{where}.created_at")[0],
    )


def cut_text(text: Any) -> list[str]:
    """A blob cut into memories: paragraphs (blank-line separated); a paragraph longer
    than about 1,000 characters is cut at sentence ends into pieces of about that size."""
    text = v.text(text, field="content", max_chars=MAX_BULK_CHARS)
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
