"""LanceDB: the only module that imports ``lancedb`` and ``pyarrow``.

Two tables in one database:

* ``registry`` — one row per store, per registered speaker, and one ``meta`` row that
  records the embedding model and vector size the database was built with.
* ``chunks`` — one row per sentence chunk, with every field of its memory copied onto
  it, so each operation on memories is a single atomic LanceDB commit (add = one
  ``add``, supersede = one ``merge_insert``, forget = one ``delete``...).

Writes are serialised by a per-database lock (a thread lock plus a file lock for a
local directory, so several processes can share one database); handles read with
``read_consistency_interval=0`` so they always see other processes' commits. Every
string that reaches a ``where`` clause goes through :func:`sql_str`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

log = logging.getLogger(__name__)

REGISTRY = "registry"
CHUNKS = "chunks"
MEMORY_FIELDS = (
    "memory_id", "user_id", "speaker", "content", "n_chunks", "created_us", "seq",
    "event_date", "event_us", "when_us", "time_bucket", "category", "importance",
    "superseded", "superseded_by", "conversation_id", "role", "dup_key", "restate_key",
)  # fmt: skip
META_FILE = "wontopos.json"
LOCK_FILE = ".wontopos.lock"  # a local database's file lock (see write_lock)
_CHECK_TIMEOUT_S = 20.0  # check_usable: longest wait for object storage to answer
_VECTOR_INDEX_KEY = "index:vector"  # registry row: table size when the vector index was last built
_REINDEX_GROWTH = 10
# Indexed search re-ranks about this many rows with their full vectors (refine_factor =
# this / k, at least 3): IVF_SQ's quantised distances alone reorder close neighbours
# (recall@10 0.975), and re-ranking reads each row's vector: at 1M rows refine 10 on
# k=40 (400 rows) took 70 ms, 4 (160 rows) ~30 ms. bench/scale.py prints recall@10/@40.
_REFINED_ROWS = 160
_REGISTRY_CACHE_SIZE = 256  # registry answers kept per store handle (see registry_rows)
_BITMAP_COLUMNS = ("user_id", "speaker", "superseded", "category", "chunk_idx")


_LOOP: Any = None
_LOOP_LOCK = threading.Lock()


def _run(coro: Any) -> Any:
    """Run a coroutine of LanceDB's async API on this process's one background loop.

    Reads go through the async API: its sync wrapper makes about six round trips to
    its own loop per query (schema look-ups included), ~1.5 ms each time; one hop here.
    """
    global _LOOP
    if _LOOP is None:
        with _LOOP_LOCK:
            if _LOOP is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="wontopos-lancedb", daemon=True).start()
                _LOOP = loop
    return asyncio.run_coroutine_threadsafe(coro, _LOOP).result()


def sql_str(value: str) -> str:
    """The one way a string enters a filter: a quoted SQL literal, quotes doubled."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(values: Sequence[str]) -> str:
    return "(" + ", ".join(sql_str(v) for v in values) + ")"


def is_remote(uri: str) -> bool:
    return "://" in uri and not uri.startswith("file://")


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


def chunk_schema(dim: int) -> Any:
    import pyarrow as pa

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
        ]
    )


def _indexes_on(column: str, indexes: Any) -> list[Any]:
    """The indexes (of ``list_indices()``, sync or async) on exactly ``column``."""
    return [index for index in indexes if index.columns == [column]]


def _stale_user_id_indexes(table: Any) -> list[str]:
    """Names of user_id indexes that are not the bitmap (B-trees of earlier versions)."""
    return [index.name for index in _indexes_on("user_id", table.list_indices()) if index.index_type != "Bitmap"]


def _retention(remote: bool) -> timedelta:
    from .maintenance import RETAIN, RETAIN_REMOTE

    return RETAIN_REMOTE if remote else RETAIN


class ModelMismatch(RuntimeError):
    """The database was built with another embedding model (a start-up error)."""


def _arrow(rows: list[dict[str, Any]], schema: Any) -> Any:
    import pyarrow as pa

    return pa.Table.from_pylist(rows, schema=schema)


class Store:
    """Storage primitives. Knows LanceDB; knows none of SPEC's rules.

    Construction is cheap: LanceDB (about a second to import) is imported and the
    database opened on first use, so a server can answer ``tools/list`` first.
    """

    def __init__(
        self,
        uri: str,
        *,
        flat_search_max: int = 5_000,
        vector_index_min_rows: int = 50_000,
        retain: timedelta | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        """``flat_search_max``: scopes up to this many chunk rows are searched exactly;
        ``vector_index_min_rows``: the table gets its IVF_SQ index at this size. Both are
        arguments so a test can cross them with a few hundred rows. ``retain``: how long
        old versions are kept for readers (default ``maintenance.RETAIN``, or
        ``RETAIN_REMOTE`` on object storage). ``storage_options``
        go to ``lancedb.connect`` (object storage: endpoint, region, allow_http...)."""
        self.uri = uri
        self.storage_options = dict(storage_options or {})
        self.flat_search_max = flat_search_max
        self.vector_index_min_rows = vector_index_min_rows
        self._remote = is_remote(uri)
        self.retain = retain if retain is not None else _retention(self._remote)
        self._thread_lock = threading.RLock()
        self._file_lock: Any = None
        self._db: Any = None
        self._registry: Any = None
        self._chunks: Any = None
        self._adb: Any = None  # the same database through LanceDB's async API (reads)
        self._aregistry: Any = None
        self._achunks: Any = None
        self._indexed = False  # the chunks table has its vector index (never dropped)
        self._seq_floor: dict[str, int] = {}  # per store: a seq known to be given (see max_seq)
        self._registry_cache: OrderedDict[str, tuple[int, list[dict[str, Any]]]] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._on_open: list[Callable[[], None]] = []
        self._ready = False  # set only once the registry is open and the hooks have run

    def on_open(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` once, right after the database is first opened."""
        self._on_open.append(hook)

    def connect(self) -> None:
        """Open the database now (idempotent); the server calls this in the background.

        Other threads wait (on the lock) until the open is complete; the hooks run on the
        opening thread, which may re-enter (``_db`` is set before them, ``_ready`` after).
        """
        if self._ready:
            return
        with self._thread_lock:
            if self._db is not None:
                return
            os.environ.setdefault("LANCEDB_LOG", "error")
            import lancedb

            if not self._remote:
                from filelock import FileLock

                os.makedirs(self.uri, exist_ok=True)
                self._file_lock = FileLock(os.path.join(self.uri, LOCK_FILE), thread_local=False)
            options = {"read_consistency_interval": timedelta(0), "storage_options": self.storage_options or None}
            db = lancedb.connect(self.uri, **options)
            self._adb = _run(lancedb.connect_async(self.uri, **options))
            self._db = db
            with self.write_lock():
                self._registry = self._open_or_create(REGISTRY, registry_schema(), "key")
            for hook in self._on_open:
                hook()
            self._ready = True

    def check_usable(self, timeout: float = _CHECK_TIMEOUT_S) -> None:
        """Raise ``ConfigError`` (one line: the problem and the fix) unless the database
        can be opened and written; the CLI asks this before serving anything.

        A local directory is checked on the filesystem alone, in about a millisecond and
        without importing LanceDB (see ``db_checks``). Object storage is asked through a
        LanceDB connection that lists the tables (a missing bucket, an http endpoint
        without allow_http and refused credentials all fail there), in a daemon thread
        given ``timeout`` seconds, since the object store retries for minutes.
        """
        from . import db_checks

        if not self._remote:
            db_checks.check_directory(self.uri, LOCK_FILE)
            return
        failure: list[BaseException] = []

        def probe() -> None:
            try:
                os.environ.setdefault("LANCEDB_LOG", "error")
                import lancedb

                lancedb.connect(self.uri, storage_options=self.storage_options or None).list_tables()
            except Exception as exc:  # noqa: BLE001 - every failure becomes the one line
                failure.append(exc)

        thread = threading.Thread(target=probe, name="wontopos-check-db", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise db_checks.remote_timeout(self.uri, timeout)
        if failure:
            raise db_checks.remote_failure(self.uri, failure[0]) from None

    @property
    def registry(self) -> Any:
        self.connect()
        return self._registry

    # -- locking -----------------------------------------------------------------

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Serialise writers of this database across threads and processes."""
        with self._thread_lock:
            if self._file_lock is None:
                yield
                return
            with self._file_lock:
                yield

    def _open_or_create(self, name: str, schema: Any, key: str) -> Any:
        if name in self._table_names():
            return self._db.open_table(name)
        table = self._db.create_table(name, schema=schema)
        table.set_unenforced_primary_key(key)
        return table

    def _table_names(self) -> list[str]:
        result = self._db.list_tables()
        return list(getattr(result, "tables", result))

    # -- registry ------------------------------------------------------------------

    def _registry_reader(self) -> Any:
        self.connect()  # waits while another thread is opening (the hooks run first)
        if self._aregistry is None:
            self._aregistry = _run(self._adb.open_table(REGISTRY))
        return self._aregistry

    def registry_rows(self, where: str) -> list[dict[str, Any]]:
        """Registry rows ``where`` selects, answered from memory while the registry's
        version has not moved (0.2 ms to ask, against ~3 ms for the query; other
        processes' commits move it too). Every call gets its own copies."""
        table = self._registry_reader()

        async def read() -> tuple[int, list[dict[str, Any]]]:
            version = await table.version()
            held = self._registry_cache.get(where)
            if held is not None and held[0] == version:
                return held
            # Tagged with the version read before the query: a commit in between only
            # makes the next call read again.
            return version, (await table.query().where(where).to_arrow()).to_pylist()

        version, rows = _run(read())
        with self._cache_lock:
            self._registry_cache[where] = (version, rows)
            self._registry_cache.move_to_end(where)
            while len(self._registry_cache) > _REGISTRY_CACHE_SIZE:
                self._registry_cache.popitem(last=False)
        return [dict(row) for row in rows]

    def registry_count(self, where: str) -> int:
        return len(self.registry_rows(where))

    def registry_add(self, rows: list[dict[str, Any]]) -> None:
        self.registry.add(_arrow(rows, registry_schema()))
        self._after_write()

    def registry_delete(self, where: str) -> None:
        self.registry.delete(where)
        self._after_write()

    def registry_update(self, where: str, values: dict[str, Any]) -> None:
        self.registry.update(where=where, values=values)
        self._after_write()

    # -- model record ----------------------------------------------------------------

    def recorded_model(self) -> tuple[str, int] | None:
        """(model id, vector size) the database was built with, if it has vectors yet.

        A local database answers from a small JSON file, without importing LanceDB, so
        the CLI can refuse a mismatch at start-up in milliseconds.
        """
        if not self._remote:
            try:
                with open(os.path.join(self.uri, META_FILE), encoding="utf-8") as fh:
                    meta = json.load(fh)
                return str(meta["model"]), int(meta["dim"])
            except (OSError, ValueError, KeyError, TypeError):
                return None
        rows = self.registry_rows("kind = 'meta'")
        return (rows[0]["name"], int(rows[0]["value"])) if rows else None

    def check_model(self, model_id: str) -> None:
        """Stop when the database was built with another model (vectors not comparable)."""
        recorded = self.recorded_model()
        if recorded and recorded[0] != model_id:
            raise ModelMismatch(
                f"the database at {self.uri} was built with embedding model {recorded[0]!r} "
                f"({recorded[1]} dimensions), not {model_id!r}; start with --embed-model "
                f"{recorded[0]} or reindex"
            )

    def chunks(self, model_id: str, dim: int) -> Any:
        """The chunks table, created (and the model recorded) on first use."""
        if self.existing_chunks() is None:
            with self.write_lock():
                self._create_chunks(model_id, dim)
            self._chunks = self._db.open_table(CHUNKS)
        return self._chunks

    def _create_chunks(self, model_id: str, dim: int) -> None:
        if CHUNKS in self._table_names():
            return
        self.check_model(model_id)
        if not self.registry_count("kind = 'meta'"):
            meta = {"key": "meta", "kind": "meta", "user_id": "", "name": model_id, "created_us": 0, "value": str(dim)}
            self.registry_add([meta])
        if not self._remote:
            with open(os.path.join(self.uri, META_FILE), "w", encoding="utf-8") as fh:
                json.dump({"model": model_id, "dim": dim}, fh)
        table = self._open_or_create(CHUNKS, chunk_schema(dim), "chunk_id")
        self._create_indexes(table)

    def _create_indexes(self, table: Any) -> None:
        """Scalar indexes for every filter, and BM25 full text (ICU splits CJK words)."""
        from lancedb.index import FTS, Bitmap, BTree

        # user_id is a bitmap, not a B-tree: at 1M rows a B-tree lookup of a large store
        # materialises every row id (~35 ms per filtered query); the bitmap takes ~2 ms.
        for column in ("memory_id", "chunk_id", "created_us", "seq", "conversation_id", "dup_key", "restate_key"):
            table.create_index(column, config=BTree())
        for column in _BITMAP_COLUMNS:
            table.create_index(column, config=Bitmap())
        table.create_index("text", config=FTS(base_tokenizer="icu", stem=True, remove_stop_words=True))

    def existing_chunks(self) -> Any | None:
        """The chunks table if it exists yet (reads that need no model use this)."""
        self.connect()
        if self._chunks is None and CHUNKS in self._table_names():
            try:
                table = self._db.open_table(CHUNKS)
            except ValueError as exc:  # listed while another thread or process creates it
                if "not found" not in str(exc):
                    raise
                return None
            self._upgrade(table)
            self._chunks = table
        return self._chunks

    def _upgrade(self, table: Any) -> None:
        """Bring a table made by an earlier version up to this schema (once, < 10 s at 1M):
        user_id's index becomes a bitmap; ``restate_key`` is added, filled with the old
        rows' ``dup_key`` (so old rows are still found as exact restatements; only
        near-verbatim detection against them is lost)."""
        from lancedb.index import Bitmap, BTree

        if not _stale_user_id_indexes(table) and "restate_key" in table.schema.names:
            return
        with self.write_lock():
            table.checkout_latest()
            if "restate_key" not in table.schema.names:
                table.add_columns({"restate_key": "dup_key"})
                table.create_index("restate_key", config=BTree())
            for name in _stale_user_id_indexes(table):
                table.drop_index(name)
                table.create_index("user_id", config=Bitmap(), replace=True)

    def versions(self) -> tuple[int, int | None]:
        """The registry's and the chunks table's latest versions (other processes'
        commits included): equal answers mean nothing was written in between."""
        registry, chunks = self._registry_reader(), self._reader()

        async def both() -> tuple[int, int | None]:
            return await registry.version(), None if chunks is None else await chunks.version()

        return _run(both())

    # -- chunk reads ---------------------------------------------------------------------

    def _reader(self) -> Any | None:
        """The chunks table through the async API, once it exists."""
        if self._achunks is None:
            if self.existing_chunks() is None:
                return None
            try:
                self._achunks = _run(self._adb.open_table(CHUNKS))
            except ValueError as exc:  # as in existing_chunks
                if "not found" not in str(exc):
                    raise
                return None
        return self._achunks

    def count(self, where: str) -> int:
        table = self._reader()
        return 0 if table is None else _run(table.count_rows(where))

    def rows(
        self,
        where: str,
        *,
        columns: Sequence[str] | None = MEMORY_FIELDS,
        order: Sequence[tuple[str, bool]] = (),
        limit: int | None = None,
        row_ids: bool = False,
    ) -> list[dict[str, Any]]:
        """Rows ``where`` selects; ``row_ids`` adds each row's ``_rowid`` (see ``take``)."""
        table = self._reader()
        if table is None:
            return []
        from lancedb.query import ColumnOrdering

        query = table.query().where(where)
        if columns is not None:
            query = query.select(list(columns))
        if row_ids:
            query = query.with_row_id()
        if order:
            query = query.order_by([ColumnOrdering(column_name=c, ascending=asc) for c, asc in order])
        if limit is not None:
            query = query.limit(limit)
        return _run(query.to_arrow()).to_pylist()

    def take(self, row_ids: Sequence[int], columns: Sequence[str]) -> dict[int, dict[str, Any]]:
        """Rows by the ``_rowid`` an earlier query gave, keyed by it: a direct read, about
        five times faster than a filtered look-up at 1M rows. Row ids change when
        fragments are compacted and vanish with deletes, so a caller checks what came
        back (an id that no longer exists is simply absent)."""
        table = self._reader()
        if table is None or not row_ids:
            return {}
        query = table.take_row_ids(sorted(set(row_ids))).select([*columns]).with_row_id()
        return {row.pop("_rowid"): row for row in _run(query.to_arrow()).to_pylist()}

    def column(self, where: str, column: str) -> list[Any]:
        table = self._reader()
        if table is None:
            return []
        return _run(table.query().where(where).select([column]).to_arrow()).column(column).to_pylist()

    def vector_search(
        self, vector: Any, where: str, k: int, columns: Sequence[str], *, scope_rows: int | None = None
    ) -> list[dict[str, Any]]:
        """Cosine search inside ``where``, never fewer rows than exist (up to ``k``);
        rows carry ``_distance`` and ``_rowid``.

        A scope of at most ``flat_search_max`` chunk rows is searched exactly (flat).
        A larger one uses the IVF_SQ index when there is one, refined, and is searched
        again over every partition when the index returned fewer rows than exist: an IVF
        index probes a fixed number of partitions and can miss a small scope's rows.
        """
        table = self._reader()
        if table is None:
            return []
        return _run(self._nearest(table, vector, where, k, columns, scope_rows))

    def text_search(self, text: str, where: str, k: int, columns: Sequence[str]) -> list[dict[str, Any]]:
        """BM25 full-text search of chunk text inside ``where``; rows carry ``_score`` and
        ``_rowid``.

        Any text is a plain match query (no query syntax); a query the tokenizer cannot
        use answers no rows rather than an error: full text is one signal of several.
        """
        table = self._reader()
        if table is None:
            return []
        return _run(self._bm25(table, text, where, k, columns))

    def vector_and_text_search(
        self, vector: Any, text: str, where: str, k: int, columns: Sequence[str], text_columns: Sequence[str],
        *, scope_rows: int | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
        """``vector_search`` and ``text_search`` at once: LanceDB runs them side by side."""
        table = self._reader()
        if table is None:
            return [], []

        async def both() -> Any:
            return await asyncio.gather(
                self._nearest(table, vector, where, k, columns, scope_rows), self._bm25(table, text, where, k, text_columns)
            )

        dense, text_rows = _run(both())
        return dense, text_rows

    async def _nearest(
        self, table: Any, vector: Any, where: str, k: int, columns: Sequence[str], scope_rows: int | None
    ) -> list[dict[str, Any]]:
        def query() -> Any:
            return (
                table.query().nearest_to(vector).column("vector").distance_type("cosine")
                .where(where).select([*columns]).with_row_id().limit(k)
            )  # fmt: skip

        if not await self._has_vector_index(table):
            return (await query().bypass_vector_index().to_arrow()).to_pylist()
        rows_in_scope = await table.count_rows(where) if scope_rows is None else scope_rows
        if rows_in_scope <= self.flat_search_max:
            return (await query().bypass_vector_index().to_arrow()).to_pylist()
        refine = max(3, -(-_REFINED_ROWS // k))
        found = (await query().refine_factor(refine).to_arrow()).to_pylist()
        if len(found) < min(k, rows_in_scope):
            found = (await query().refine_factor(refine).maximum_nprobes(0).to_arrow()).to_pylist()
        return found

    async def _bm25(self, table: Any, text: str, where: str, k: int, columns: Sequence[str]) -> list[dict[str, Any]]:
        from lancedb.query import MatchQuery

        try:
            # A MatchQuery, never the raw string: LanceDB parses a raw string (quotes make
            # a phrase query, which needs positions the index does not keep).
            query = table.query().nearest_to_text(MatchQuery(text, "text")).where(where).select([*columns])
            query = query.with_row_id().limit(k)
            return (await query.to_arrow()).to_pylist()
        except Exception:  # noqa: BLE001 - see text_search
            log.warning("full-text search failed; ranking by vectors alone", exc_info=True)
            return []

    async def _has_vector_index(self, table: Any) -> bool:
        if not self._indexed:
            self._indexed = bool(_indexes_on("vector", await table.list_indices()))
        return self._indexed

    # -- chunk writes (call inside write_lock) ----------------------------------------------

    def add_chunks(self, table: Any, rows: list[dict[str, Any]]) -> None:
        table.add(_arrow(rows, table.schema))
        self._after_write(table)

    def upsert_chunks(self, table: Any, rows: list[dict[str, Any]], delete_where: str | None = None) -> None:
        """Update/insert ``rows`` by chunk id and delete ``delete_where`` in ONE commit."""
        merge = table.merge_insert("chunk_id").when_matched_update_all().when_not_matched_insert_all()
        if delete_where:
            merge = merge.when_not_matched_by_source_delete(delete_where)
        merge.execute(_arrow(rows, table.schema))
        self._after_write(table)

    def update_chunks(self, where: str, values_sql: dict[str, str]) -> int:
        table = self.existing_chunks()
        if table is None:
            return 0
        result = table.update(where=where, values_sql=values_sql)
        self._after_write(table)
        return int(getattr(result, "rows_updated", 0) or 0)

    def delete_chunks(self, where: str) -> int:
        table = self.existing_chunks()
        if table is None:
            return 0
        before = table.count_rows(where)
        if before:
            table.delete(where)
            self._after_write(table)
        return before

    def max_seq(self, user_key: str) -> int:
        """The highest ``seq`` among the store's rows.

        Sequence numbers only grow, so the last answer is a floor: later calls read just
        the rows above it (a B-tree range, a few ms at 1M rows), including rows other
        processes wrote since. Only the first call per store sorts the store.
        """
        floor = self._seq_floor.get(user_key)
        if floor is None:
            rows = self.rows(f"user_id = {sql_str(user_key)}", columns=("seq",), order=(("seq", False),), limit=1)
            top = int(rows[0]["seq"]) if rows else 0
        else:
            top = max([floor, *self.column(f"user_id = {sql_str(user_key)} AND seq > {floor}", "seq")])
        self._seq_floor[user_key] = top
        return top

    def _after_write(self, table: Any = None) -> None:
        """Upkeep after a commit, inside the write lock, decided from the table's state
        (``maintenance``): whichever process writes keeps the database healthy."""
        from .maintenance import maintain

        table = table if table is not None else self._registry
        try:
            done = maintain(table, retain=self.retain)
            if table is not self._registry and (done["compacted"] or done["indexed"]):
                self._index_vectors(table)
        except Exception:  # housekeeping: the next commit decides again
            log.warning("table upkeep skipped", exc_info=True)

    def maintain(self, table: Any | None = None) -> None:
        """Bring both tables fully up to date now: one fragment each, every index
        current, the vector index built once the table is large enough, old versions
        removed once no reader can need them. Call inside the write lock. (Commits run
        the cheaper tiered upkeep of ``maintenance`` instead.)"""
        table = table if table is not None else self.existing_chunks()
        try:
            if table is not None:
                self._index_vectors(table)
                table.optimize(cleanup_older_than=self.retain)
            self.registry.optimize(cleanup_older_than=self.retain)
        except Exception:  # housekeeping: a lost commit race is retried next time
            log.warning("index maintenance skipped", exc_info=True)

    def _index_vectors(self, table: Any) -> None:
        """Build the IVF_SQ index once the table has ``vector_index_min_rows`` rows, and
        build it again each time the table has grown tenfold since: its partition count
        is fixed when it is built, so partitions would otherwise grow with the table and
        every probe would scan more. The size at the last build is kept in the registry."""
        from lancedb.index import IvfSq

        rows = table.count_rows()
        has_index = bool(_indexes_on("vector", table.list_indices()))
        if not has_index and rows < self.vector_index_min_rows:
            return
        record = self.registry_rows(f"key = {sql_str(_VECTOR_INDEX_KEY)}")
        built_at = int(record[0]["value"]) if record else (rows if has_index else 0)
        if has_index and rows < built_at * _REINDEX_GROWTH:
            if not record:
                self._record_index_size(rows)
            return
        table.create_index("vector", config=IvfSq(distance_type="cosine"), replace=True)
        self._record_index_size(rows)

    def _record_index_size(self, rows: int) -> None:
        self.registry.delete(f"key = {sql_str(_VECTOR_INDEX_KEY)}")
        row = {"key": _VECTOR_INDEX_KEY, "kind": "index", "user_id": "", "name": "vector", "created_us": 0, "value": str(rows)}
        self.registry.add(_arrow([row], registry_schema()))

    def close(self) -> None:
        with self._thread_lock:
            self._ready = False
            self._chunks = None
            self._registry = None
            self._db = None
            self._adb = None
            self._achunks = None
            self._aregistry = None
            self._indexed = False
            self._registry_cache.clear()
