"""One typed row per table: the columns as the engine reads and writes them.

``schema`` gives LanceDB the same columns as Arrow types; these give the type checker the
Python values (``None`` where the column is nullable). A read with ``columns=`` returns
only those keys, so every key is optional here (``total=False``); writes build whole rows.
Searches add ``_rowid``, and ``_distance`` (vector) or ``_score`` (full text).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


class ChunkRow(TypedDict, total=False):
    """A row of ``chunks``: one sentence chunk of a memory, with the memory's fields."""

    chunk_id: str
    memory_id: str
    chunk_idx: int
    n_chunks: int
    user_id: str  # the store's lookup key
    speaker: str | None
    content: str  # the whole memory, on every chunk
    text: str  # this chunk: what is embedded and full-text indexed
    cjk_text: str  # this chunk as character bigrams (CJK full text)
    dup_key: str
    restate_key: str
    created_us: int
    seq: int
    event_date: str | None
    event_us: int | None
    when_us: int
    time_bucket: str
    category: str
    importance: float
    superseded: bool
    superseded_by: str | None
    conversation_id: str | None
    role: str | None
    idem_key: str | None
    idem_fp: str | None
    idem_answer: str | None
    vector: list[float] | npt.NDArray[np.float64]  # a read gives an array (``chunk_search.as_rows``)
    _rowid: int
    _distance: float
    _score: float
    in_scope: bool | None  # a value a read computed (``ChunkReads.rows``, ``computed``); NULL: not in it


class RegistryRow(TypedDict):
    """A row of ``registry``: a store, a speaker, a kept idempotency record, the model
    record, a purge marker or the database's idempotency secret (``kind``), under its
    primary ``key``. ``value``'s meaning depends on the kind: ``engine.registry`` (and
    ``storage.purge`` for markers) is the one place that reads it."""

    key: str
    kind: str
    user_id: str
    name: str
    created_us: int
    value: str | None
