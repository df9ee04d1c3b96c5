"""LanceDB's async API on one background loop, and the reads of the chunks table run on it.

Reads go through the async API: its sync wrapper makes about six round trips to its own
loop per query (schema look-ups included), ~1.5 ms each time; ``run`` makes one hop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, NamedTuple, TypeVar

from wontopos_mcp.rules.text import has_cjk

from .rows import ChunkRow, RegistryRow
from .schema import CJK_TEXT, MEMORY_FIELDS, indexes_on

log = logging.getLogger(__name__)

# Indexed search re-ranks about this many rows with their full vectors (refine_factor =
# this / k, at least 3): IVF_SQ's quantised distances alone reorder close neighbours
# (recall@10 0.975), and re-ranking reads each row's vector: at 1M rows refine 10 on
# k=40 (400 rows) took 70 ms, 4 (160 rows) ~30 ms. bench/scale.py prints recall@10/@40.
_REFINED_ROWS = 160

T = TypeVar("T")
_LOOP: Any = None
_LOOP_LOCK = threading.Lock()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine of LanceDB's async API on this process's one background loop."""
    return begin(coro).result()


def begin(coro: Coroutine[Any, Any, T]) -> Future[T]:
    """Start a coroutine of LanceDB's async API on the background loop; its answer is the
    future's ``result()``: a read that runs while the caller goes on."""
    global _LOOP
    if _LOOP is None:
        with _LOOP_LOCK:
            if _LOOP is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="wontopos-lancedb", daemon=True).start()
                _LOOP = loop
    return asyncio.run_coroutine_threadsafe(coro, _LOOP)


def full_text_query(text: str) -> Any:
    """The full-text query for ``text``: a match on the ICU index and, when ``text`` has
    Hangul, kana or Han, on the bigram index too (``schema.cjk_index``), a row
    scoring the sum of the two. Latin queries never touch the bigram index.

    A match, never the raw string: LanceDB parses a raw string (quotes make a phrase
    query, which needs positions the index does not keep).
    """
    from lancedb.query import BooleanQuery, MatchQuery, Occur

    # (lancedb's stubs list every option as required)
    words = MatchQuery(text, "text")  # type: ignore[call-arg]
    if not has_cjk(text):
        return words
    return BooleanQuery([(Occur.SHOULD, words), (Occur.SHOULD, MatchQuery(text, CJK_TEXT))])  # type: ignore[call-arg]


class Found(NamedTuple):
    """What one ``vector_and_text_search`` found: inside the scope, the nearest chunks and
    the full-text matches; inside the wider context, the full-text matches, best first
    (empty when there is no context)."""

    nearest: list[ChunkRow]
    matches: list[ChunkRow]
    context_matches: list[ChunkRow]
    vector: Any = None  # the query's vector, when the search computed it
    scope_rows: int = 0  # the rows inside the scope (as given, or counted beside the searches)


def as_rows(table: Any) -> list[ChunkRow]:
    """An Arrow table's rows as dicts, a ``vector`` as a float64 numpy row rather than a list
    of Python floats: the ranking takes cosines of a few hundred chunks per search, and at
    100 rows the lists cost 1.2 ms to make and 2.0 ms to multiply, the arrays 0.2 and 0.2 ms,
    with the very same values (float32 widened exactly either way)."""
    if "vector" not in table.column_names:
        rows: list[ChunkRow] = table.to_pylist()
        return rows
    import numpy as np

    column = table.column("vector").combine_chunks()
    vectors = np.asarray(column.flatten().to_numpy(zero_copy_only=False), dtype=np.float64)
    vectors = vectors.reshape(len(table), -1) if len(table) else vectors.reshape(0, 0)
    rows = table.drop_columns(["vector"]).to_pylist()
    for row, vector in zip(rows, vectors):
        row["vector"] = vector
    return rows


class ChunkReads:
    """Reads of the chunks table through the async API: filtered rows, counts, rows by
    row id, and vector and full-text searches.

    A search scope of at most ``flat_search_max`` chunk rows is searched exactly (flat).
    A larger one uses the IVF_SQ index when there is one, refined, and is searched again
    over every partition when the index returned fewer rows than exist: an IVF index
    probes a fixed number of partitions and can miss a small scope's rows.
    """

    def __init__(self, table: Callable[[], Any | None], flat_search_max: int) -> None:
        """``table``: the chunks table's async handle, or None while it does not exist."""
        self._table = table
        self.flat_search_max = flat_search_max
        self.indexed = False  # the table has its vector index (it is never dropped)

    def count(self, where: str) -> int:
        table = self._table()
        return 0 if table is None else run(table.count_rows(where))

    def rows(
        self,
        where: str,
        *,
        columns: Sequence[str] | None = MEMORY_FIELDS,
        order: Sequence[tuple[str, bool]] = (),
        limit: int | None = None,
        row_ids: bool = False,
        computed: Mapping[str, str] | None = None,
    ) -> list[ChunkRow]:
        """Rows ``where`` selects (``columns=None``: every column); ``row_ids`` adds each
        row's ``_rowid`` (see ``take``); ``computed``: more values per row, name -> SQL
        expression over the row (with ``columns`` given)."""
        table = self._table()
        if table is None:
            return []
        from lancedb.query import ColumnOrdering

        query = table.query().where(where)
        if columns is not None:
            query = query.select({**{c: c for c in columns}, **computed} if computed else list(columns))
        if row_ids:
            query = query.with_row_id()
        if order:
            query = query.order_by([ColumnOrdering(column_name=c, ascending=asc) for c, asc in order])
        if limit is not None:
            query = query.limit(limit)
        return as_rows(run(query.to_arrow()))

    def take(self, row_ids: Sequence[int], columns: Sequence[str]) -> dict[int, ChunkRow]:
        """Rows by the ``_rowid`` an earlier query gave, keyed by it: a direct read, about
        five times faster than a filtered look-up at 1M rows. Row ids change when
        fragments are compacted and vanish with deletes, so a caller checks what came
        back (an id that no longer exists is simply absent)."""
        return self.take_beside(row_ids, columns).result()

    def take_beside(self, row_ids: Sequence[int], columns: Sequence[str]) -> Future[dict[int, ChunkRow]]:
        """``take``, started now and answered by the future: it reads while the caller
        makes its next read (LanceDB runs both at once)."""
        table = self._table()
        if table is None or not row_ids:  # nothing to read: no trip to the loop
            done: Future[dict[int, ChunkRow]] = Future()
            done.set_result({})
            return done
        return begin(self._take(table, row_ids, columns))

    @staticmethod
    async def _take(table: Any, row_ids: Sequence[int], columns: Sequence[str]) -> dict[int, ChunkRow]:
        query = table.take_row_ids(sorted(set(row_ids))).select([*columns]).with_row_id()
        return {row.pop("_rowid"): row for row in as_rows(await query.to_arrow())}

    def column(self, where: str, column: str) -> list[Any]:
        table = self._table()
        if table is None:
            return []
        values: list[Any] = run(table.query().where(where).select([column]).to_arrow()).column(column).to_pylist()
        return values

    def vector_search(
        self, vector: Any, where: str, k: int, columns: Sequence[str], *, scope_rows: int | None = None
    ) -> list[ChunkRow]:
        """Cosine search inside ``where``, never fewer rows than exist (up to ``k``);
        rows carry ``_distance`` and ``_rowid`` (flat or indexed: see the class)."""
        table = self._table()
        return [] if table is None else run(self.nearest(table, vector, where, k, columns, scope_rows))

    def text_search(self, text: str, where: str, k: int, columns: Sequence[str]) -> list[ChunkRow]:
        """BM25 full-text search of chunk text inside ``where``; rows carry ``_score`` and
        ``_rowid``; a query the tokenizer cannot use answers no rows."""
        table = self._table()
        return [] if table is None else run(self.bm25(table, text, where, k, columns))

    def vector_and_text_search(
        self, embed: Callable[[], Any], text: str, where: str, k: int, columns: Sequence[str], *,
        scope_rows: int | None = None, context_where: str | None = None, context_columns: Sequence[str] = (),
    ) -> Found:  # fmt: skip
        """``vector_search`` and ``text_search`` inside ``where`` at once (LanceDB runs them
        side by side), both reading ``columns``, and a second ``text_search`` inside
        ``context_where`` reading ``context_columns`` (default ``columns``) when it is given
        (else no rows for it). ``embed`` makes the query's vector (returned in
        ``Found.vector``) in a worker thread while the full-text searches, and the count of
        the scope when ``scope_rows`` is not given (``Found.scope_rows``), already run: the
        model and LanceDB each release the interpreter, so they overlap."""
        table = self._table()
        if table is None:
            return Found([], [], [], embed())
        wide = (context_where, context_columns or columns) if context_where is not None else None
        return run(self.both(table, embed, text, where, k, columns, scope_rows, wide))

    async def nearest(
        self, table: Any, vector: Any, where: str, k: int, columns: Sequence[str], scope_rows: int | None
    ) -> list[ChunkRow]:
        def query() -> Any:
            return (
                table.query().nearest_to(vector).column("vector").distance_type("cosine")
                .where(where).select([*columns]).with_row_id().limit(k)
            )  # fmt: skip

        found: list[ChunkRow]
        if not await self._has_vector_index(table):
            found = as_rows(await query().bypass_vector_index().to_arrow())
            return found
        rows_in_scope = await table.count_rows(where) if scope_rows is None else scope_rows
        if rows_in_scope <= self.flat_search_max:
            found = as_rows(await query().bypass_vector_index().to_arrow())
            return found
        refine = max(3, -(-_REFINED_ROWS // k))
        found = as_rows(await query().refine_factor(refine).to_arrow())
        if len(found) < min(k, rows_in_scope):
            found = as_rows(await query().refine_factor(refine).maximum_nprobes(0).to_arrow())
        return found

    async def bm25(self, table: Any, text: str, where: str, k: int, columns: Sequence[str]) -> list[ChunkRow]:
        """Any text is a plain match query (no query syntax); a query the tokenizer cannot
        use answers no rows rather than an error: full text is one signal of several."""
        try:
            query = table.query().nearest_to_text(full_text_query(text)).where(where).select([*columns])
            query = query.with_row_id().limit(k)
            return as_rows(await query.to_arrow())
        except Exception as exc:  # noqa: BLE001 - see the docstring
            # The kind only: the exception's message may quote the query, which no log may hold.
            log.warning("full-text search failed (%s); ranking by vectors alone", type(exc).__name__)
            return []

    async def both(
        self, table: Any, embed: Callable[[], Any], text: str, where: str, k: int, columns: Sequence[str],
        scope_rows: int | None, wide: tuple[str, Sequence[str]] | None,
    ) -> Found:  # fmt: skip
        counted = asyncio.ensure_future(table.count_rows(where)) if scope_rows is None else None
        texts = [asyncio.ensure_future(self.bm25(table, text, where, k, columns))]
        if wide is not None:
            texts.append(asyncio.ensure_future(self.bm25(table, text, wide[0], k, wide[1])))
        try:
            vector = await asyncio.get_running_loop().run_in_executor(None, embed)
            rows = int(await counted) if counted is not None else int(scope_rows or 0)
            nearest = await self.nearest(table, vector, where, k, columns, rows) if rows else []
        finally:  # never left running, even when embedding or counting failed
            found = await asyncio.gather(*texts)
            if counted is not None:
                await asyncio.gather(counted, return_exceptions=True)
        return Found(nearest, found[0], found[1] if wide is not None else [], vector, rows)

    async def _has_vector_index(self, table: Any) -> bool:
        if not self.indexed:
            self.indexed = bool(indexes_on("vector", await table.list_indices()))
        return self.indexed


class RegistryReads:
    """Registry rows by where-clause, answered from memory while the registry's version
    has not moved (0.2 ms to ask, against ~3 ms for the query; other processes' commits
    move it too). Every call gets its own copies."""

    def __init__(self, table: Callable[[], Any], size: int = 256) -> None:
        self._table = table  # the registry through the async API (opens the database)
        self._size = size  # answers kept, least recently used dropped first
        self._held: OrderedDict[str, tuple[int, list[RegistryRow]]] = OrderedDict()
        self._lock = threading.Lock()

    def rows(self, where: str) -> list[RegistryRow]:
        """Registry rows ``where`` selects (from memory while the registry's version holds)."""
        table = self._table()

        async def read() -> tuple[int, list[RegistryRow]]:
            version = await table.version()
            held = self._held.get(where)
            if held is not None and held[0] == version:
                return held
            # Tagged with the version read before the query: a commit in between only
            # makes the next call read again.
            return version, (await table.query().where(where).to_arrow()).to_pylist()

        version, rows = run(read())
        with self._lock:
            self._held[where] = (version, rows)
            self._held.move_to_end(where)
            while len(self._held) > self._size:
                self._held.popitem(last=False)
        return [RegistryRow(**row) for row in rows]  # copies: a caller may change its own

    def clear(self) -> None:
        with self._lock:
            self._held.clear()
