"""The two tables' layout: their schemas, the indexes every filter uses, and the upgrade
of a table an earlier version made. Imports pyarrow and ``lancedb.index`` only when
called (``adapter`` is the module the rest of the engine talks to).

* ``registry``: one row per store, per registered speaker and per kept idempotency
  record (``registry`` owns those), plus the store's own bookkeeping: a ``meta`` row
  with the embedding model and vector size, and an ``index`` row with the table size at
  the last vector-index build.
* ``chunks``: one row per sentence chunk, with every field of its memory copied onto
  it, so each operation on memories is a single atomic LanceDB commit (add = one
  ``add``, supersede = one ``merge_insert``, forget = one ``delete``...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from wontopos_mcp.rules.text import CJK_TEXT_SQL

REGISTRY = "registry"
CHUNKS = "chunks"
MEMORY_FIELDS = (
    "memory_id", "user_id", "speaker", "content", "n_chunks", "created_us", "seq",
    "event_date", "event_us", "when_us", "time_bucket", "category", "importance",
    "superseded", "superseded_by", "conversation_id", "role", "dup_key", "restate_key",
)  # fmt: skip
_BITMAP_COLUMNS = ("user_id", "speaker", "superseded", "category", "chunk_idx")
CJK_TEXT = "cjk_text"  # the bigram-indexed column (see cjk_index)
_BTREE_COLUMNS = ("memory_id", "chunk_id", "created_us", "seq", "conversation_id", "dup_key", "restate_key")
# The chunks table's own model record (schema metadata): which model made its vectors, and
# their size. Written with the table (creation, a reindex's overwrite), so the vectors and
# their record change in one commit; tables made before it carry none (the registry's
# ``meta`` row is then the record).
MODEL_META, DIM_META = "wontopos.model", "wontopos.dim"


def registry_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("key", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("user_id", pa.string(), nullable=False),
            pa.field("name", pa.string(), nullable=False),
            pa.field("created_us", pa.int64(), nullable=False),
            pa.field("value", pa.string()),
        ]
    )


def chunk_schema(dim: int, model_id: str | None = None) -> Any:
    """The chunks table's columns; with ``model_id``, its model record in the metadata."""
    import pyarrow as pa

    metadata = None if model_id is None else {MODEL_META: model_id, DIM_META: str(dim)}
    return pa.schema(
        [
            pa.field("chunk_id", pa.string(), nullable=False),
            pa.field("memory_id", pa.string(), nullable=False),
            pa.field("chunk_idx", pa.int32(), nullable=False),
            pa.field("n_chunks", pa.int32(), nullable=False),
            pa.field("user_id", pa.string(), nullable=False),
            pa.field("speaker", pa.string()),
            pa.field("content", pa.string(), nullable=False),
            pa.field("text", pa.string(), nullable=False),
            pa.field("cjk_text", pa.string(), nullable=False),
            pa.field("dup_key", pa.string(), nullable=False),
            pa.field("restate_key", pa.string(), nullable=False),
            pa.field("created_us", pa.int64(), nullable=False),
            pa.field("seq", pa.int64(), nullable=False),
            pa.field("event_date", pa.string()),
            pa.field("event_us", pa.int64()),
            pa.field("when_us", pa.int64(), nullable=False),
            pa.field("time_bucket", pa.string(), nullable=False),
            pa.field("category", pa.string(), nullable=False),
            pa.field("importance", pa.float32(), nullable=False),
            pa.field("superseded", pa.bool_(), nullable=False),
            pa.field("superseded_by", pa.string()),
            pa.field("conversation_id", pa.string()),
            pa.field("role", pa.string()),
            pa.field("idem_key", pa.string()),
            pa.field("idem_fp", pa.string()),
            pa.field("idem_answer", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
        ],
        metadata=metadata,
    )


def recorded_model(schema: Any) -> tuple[str, int] | None:
    """(model id, vector size) a chunks table's schema records, or ``None`` (a table made
    before the record was kept with it)."""
    metadata = schema.metadata or {}
    model, dim = metadata.get(MODEL_META.encode()), metadata.get(DIM_META.encode())
    return (model.decode(), int(dim)) if model and dim else None


def reembedded_schema(schema: Any, model_id: str, dim: int) -> Any:
    """``schema`` with vectors of ``dim`` values and the model record of ``model_id``; every
    other field as it was, its metadata included (the primary key is kept there)."""
    import pyarrow as pa

    at = schema.get_field_index("vector")
    old = schema.field(at)
    vector = pa.field("vector", pa.list_(pa.float32(), dim), nullable=old.nullable, metadata=old.metadata)
    metadata = {**(schema.metadata or {}), MODEL_META.encode(): model_id.encode(), DIM_META.encode(): str(dim).encode()}
    return schema.set(at, vector).with_metadata(metadata)


def arrow(rows: Sequence[Mapping[str, Any]], schema: Any) -> Any:
    import pyarrow as pa

    return pa.Table.from_pylist(rows, schema=schema)


def indexes_on(column: str, indexes: Any) -> list[Any]:
    """The indexes (of ``list_indices()``, sync or async) on exactly ``column``."""
    return [index for index in indexes if index.columns == [column]]


def _index_configs(*, bitmaps_only: bool = False) -> list[tuple[str, Any]]:
    """(column, index config) of every index the chunks table's filters and searches use."""
    from lancedb.index import FTS, Bitmap, BTree

    # user_id is a bitmap, not a B-tree: at 1M rows a B-tree lookup of a large store
    # materialises every row id (~35 ms per filtered query); the bitmap takes ~2 ms.
    configs: list[tuple[str, Any]] = [(column, Bitmap()) for column in _BITMAP_COLUMNS]
    if bitmaps_only:
        return configs
    configs += [(column, BTree()) for column in _BTREE_COLUMNS]
    configs.append(("text", FTS(base_tokenizer="icu", stem=True, remove_stop_words=True)))
    configs.append((CJK_TEXT, cjk_index()))
    return configs


def create_indexes(table: Any, *, bitmaps_only: bool = False, only: Sequence[str] | None = None) -> None:
    """Scalar indexes for every filter, and BM25 full text (ICU splits CJK words); each
    replaces the column's index when there is one. ``bitmaps_only``: the bitmap indexes
    alone (a purge: they keep a key whose rows are all gone); ``only``: these columns'."""
    for column, config in _index_configs(bitmaps_only=bitmaps_only):
        if only is None or column in only:
            table.create_index(column, config=config)


def missing_indexes(table: Any) -> list[str]:
    """The columns whose index the chunks table lacks (an overwrite drops every index:
    a reindex killed before it rebuilt them leaves none, and full-text search fails)."""
    indexed = {column for index in table.list_indices() for column in index.columns}
    return [column for column, _ in _index_configs() if column not in indexed and column in table.schema.names]


def cjk_index() -> Any:
    """Character bigrams of the Hangul, kana and Han runs (``text.cjk_text``): "부산"
    matches "부산에서", "大阪" matches "大阪城"; Latin text leaves it empty, so the ICU
    index (stemming, stop words) alone ranks it. bench/retrieval.py hybrid R@1/MRR, ko:
    0.50/0.725 -> 0.70/0.808 (filter), 0.30/0.529 -> 0.40/0.631 (none), other languages
    unchanged. 2-3 grams, a max instead of a sum and the bigram score weighted 0.3 to 2
    measured the same or worse; 1-2 or 1-3 grams and runs joined without spaces traded
    ko R@1 with the filter (0.6) for R@1 without (0.5). No lindera/jieba: they need
    dictionaries downloaded into Lance's model home."""
    from lancedb.index import FTS

    return FTS(
        base_tokenizer="ngram", ngram_min_length=2, ngram_max_length=2,
        lower_case=False, stem=False, remove_stop_words=False, ascii_folding=False,
    )  # fmt: skip


def _stale_user_id_indexes(table: Any) -> list[str]:
    """Names of user_id indexes that are not the bitmap (B-trees of earlier versions)."""
    return [index.name for index in indexes_on("user_id", table.list_indices()) if index.index_type != "Bitmap"]


def _memory_level_documents(table: Any) -> None:
    """Rows written before a memory was one full-text document (each chunk held its own
    sentence) rewritten as ``text.full_text`` writes them: the whole memory on the first
    chunk, nothing on the others. Every table without ``cjk_text`` is older than both,
    and a table already right matches neither filter, so a rerun after a crash is safe."""
    table.update(where="chunk_idx = 0 AND n_chunks > 1 AND text != content", values_sql={"text": "content"})
    table.update(where="chunk_idx > 0 AND text != ''", values={"text": ""})


def upgrade(table: Any, write_lock: Callable[[], AbstractContextManager[Any]]) -> None:
    """Bring a chunks table made by an earlier version up to this schema (once, < 10 s at
    1M): user_id's index becomes a bitmap; ``restate_key`` is added, filled with the old
    rows' ``dup_key`` (so old rows are still found as exact restatements; only
    near-verbatim detection against them is lost); sentence-level full-text documents
    become memory-level ones; ``cjk_text`` is added, computed from ``text`` by the same
    rule in SQL, and indexed. Last, any index the table lacks is built (``repair_indexes``)."""
    from lancedb.index import Bitmap, BTree

    names = table.schema.names
    if not _stale_user_id_indexes(table) and "restate_key" in names and CJK_TEXT in names:
        repair_indexes(table, write_lock)
        return
    with write_lock():
        table.checkout_latest()
        if "restate_key" not in table.schema.names:
            table.add_columns({"restate_key": "dup_key"})
            table.create_index("restate_key", config=BTree())
        if CJK_TEXT not in table.schema.names:
            _memory_level_documents(table)
            table.add_columns({CJK_TEXT: CJK_TEXT_SQL})
            table.create_index(CJK_TEXT, config=cjk_index())
        for name in _stale_user_id_indexes(table):
            table.drop_index(name)
            table.create_index("user_id", config=Bitmap(), replace=True)
    repair_indexes(table, write_lock)


def repair_indexes(table: Any, write_lock: Callable[[], AbstractContextManager[Any]]) -> None:
    """Build the indexes the table lacks (inside the write lock, asked again there: the
    process that dropped them may be rebuilding them now). One ``list_indices`` when
    none is missing: what every open of the table costs."""
    if not missing_indexes(table):
        return
    with write_lock():
        table.checkout_latest()
        missing = missing_indexes(table)
        if missing:
            create_indexes(table, only=missing)
