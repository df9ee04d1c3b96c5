"""A memory as every read returns it: optional fields are omitted when they have no
value, never ``null``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from .answers import MemoryRecord, Role
from .dates import format_us

# The columns ``memory_record`` reads: reads that only build records select just these
# (at 1M rows each extra column costs about a millisecond per query).
RECORD_FIELDS = (
    "memory_id", "content", "speaker", "category", "importance", "time_bucket", "created_us",
    "event_date", "conversation_id", "superseded", "superseded_by",
)  # fmt: skip


def memory_record(row: Mapping[str, Any], *, similarity: float | None = None) -> MemoryRecord:
    """Build the public record from a stored chunk row (any chunk of the memory)."""
    # Built key by key, in the order the answer shows them; the required keys all follow.
    record: MemoryRecord = {"id": row["memory_id"], "content": row["content"]}  # type: ignore[typeddict-item]
    if row.get("speaker") is not None:
        record["speaker"] = row["speaker"]
    record["category"] = row["category"]
    record["importance"] = round(float(row["importance"]), 4)
    if similarity is not None:
        record["similarity"] = round(min(max(similarity, 0.0), 1.0), 6)
    record["time_bucket"] = row["time_bucket"]
    record["created_at"] = format_us(row["created_us"])
    if row.get("event_date") is not None:
        record["event_date"] = row["event_date"]
    if row.get("conversation_id") is not None:
        record["conversation_id"] = row["conversation_id"]
    record["is_superseded"] = bool(row["superseded"])
    if row.get("superseded_by") is not None:
        record["superseded_by"] = row["superseded_by"]
    return record


def turn_role(role: str | None) -> Role:
    """A conversation turn's stored role: only ``memory_add_messages`` stores one, and only
    "user" or "assistant" (the rows read as turns are those with a role)."""
    if role not in ("user", "assistant"):
        raise ValueError(f"a turn's role is 'user' or 'assistant', not {role!r}")
    return cast("Role", role)
