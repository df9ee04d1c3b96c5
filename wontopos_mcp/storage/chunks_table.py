"""The chunks table: one row per chunk of a memory, with its vector and every field a
search filters or ranks on. This object owns its handles, its reads (``chunk_search``:
filtered rows, counts, rows by row id, the vector and full-text searches), its writes, its
re-embedding for a reindex, and the one check every write and vector search makes: that
the table's vectors are of the model this process embeds with."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

from wontopos_mcp.errors import TableMissing, UnavailableError

from .chunk_search import ChunkReads, Found, run
from .database import Commits, Connection
from .model_record import ModelRecord
from .rows import ChunkRow
from .schema import (
    CHUNKS,
    arrow,
    chunk_schema,
    create_indexes,
    recorded_model,
    reembedded_schema,
    upgrade,
)

__all__ = ["ChunksTable"]


class ChunksTable(ChunkReads):
    """Created on the first write of embedded rows (``for_model``); until then every read
    answers as an empty table does."""

    def __init__(
        self,
        connection: Connection,
        commits: Commits,
        model: ModelRecord,
        lock: Callable[[], AbstractContextManager[None]],
        *,
        flat_search_max: int,
        retain: timedelta,
        remote: bool,
    ) -> None:
        """``model``: the database's model record (written when the table is created);
        ``lock``: the database's write lock (creating the table, upgrading an old one's
        layout); ``flat_search_max``: scopes up to this many rows are searched exactly;
        ``retain``, ``remote``: what a reindex's cleanup of a killed run may remove."""
        self._connection = connection
        self._commits = commits
        self._model = model
        self._lock = lock
        self._retain = retain
        self._remote = remote
        super().__init__(self._reader, flat_search_max)
        self._sync: Any = None
        self._async: Any = None
        self._writer: tuple[str, int] | None = None  # (model id, size) of the vectors this process makes

    # -- handles ------------------------------------------------------------------------

    def existing(self) -> Any | None:
        """The table's sync handle if it exists yet (reads that need no model use this)."""
        self._connection.ready()
        if self._sync is None and CHUNKS in self._connection.names():
            try:
                table = self._connection.table(CHUNKS)
            except TableMissing:
                return None
            upgrade(table, self._lock)
            self._sync = table
        return self._sync

    def embeds_with(self, model_id: str, dim: int) -> None:
        """The model this process makes vectors with (writes and queries): what the
        writes of embedded rows and the vector searches check the table's record against."""
        self._writer = (model_id, dim)

    def for_model(self, model_id: str, dim: int) -> Any:
        """The table, created (and the model recorded) on first use, for vectors of this
        model (``embeds_with``)."""
        self.embeds_with(model_id, dim)
        if self.existing() is None:
            with self._lock():
                self._create(model_id, dim)
            self._sync = self._connection.db.open_table(CHUNKS)
        return self._sync

    def _create(self, model_id: str, dim: int) -> None:
        if CHUNKS in self._connection.names():
            return
        self._model.check(model_id)
        self._model.record(model_id, dim)
        schema = chunk_schema(dim, model_id)
        create_indexes(self._connection.open_or_create(CHUNKS, schema, "chunk_id", self._commits.coordinator.check))

    def recorded_model(self) -> tuple[str, int] | None:
        """The model record the table keeps itself, if it exists and keeps one."""
        table = self.existing()
        return None if table is None else recorded_model(table.schema)

    def _reader(self) -> Any | None:
        """The table through the async API, once it exists."""
        if self._async is None:
            if self.existing() is None:
                return None
            try:
                self._async = self._connection.async_table(CHUNKS)
            except TableMissing:
                return None
        return self._async

    def version(self) -> Any:
        """The latest version's number as a coroutine, or ``None`` before the table exists."""
        reader = self._reader()
        return None if reader is None else reader.version()

    def close(self) -> None:
        self._sync = self._async = None
        self.indexed = False

    # -- reads (``ChunkReads``'s; a vector search first checks the model) ---------------

    def vector_search(
        self, vector: Any, where: str, k: int, columns: Sequence[str], *, scope_rows: int | None = None
    ) -> list[ChunkRow]:
        """Cosine search inside ``where``; rows carry ``_distance`` and ``_rowid``."""
        self._refuse_other_model()
        return super().vector_search(vector, where, k, columns, scope_rows=scope_rows)

    def vector_and_text_search(
        self,
        embed: Callable[[], Any],
        text: str,
        where: str,
        k: int,
        columns: Sequence[str],
        *,
        scope_rows: int | None = None,
        context_where: str | None = None,
        context_columns: Sequence[str] = (),
    ) -> Found:
        """``vector_search`` and ``text_search`` side by side, the query embedded meanwhile."""
        self._refuse_other_model()
        return super().vector_and_text_search(
            embed, text, where, k, columns, scope_rows=scope_rows, context_where=context_where,
            context_columns=context_columns,
        )  # fmt: skip

    # -- writes (inside the write lock) ---------------------------------------------------

    def add(self, table: Any, rows: Sequence[ChunkRow]) -> None:
        """Commit new rows, whose vectors this process's model made (see ``_fitting``);
        ``table``: what ``for_model`` answered."""
        self._commits.commit(lambda: table.add(self._fitting(table, rows)))
        self._commits.after(table)

    def upsert(
        self, table: Any, rows: Sequence[ChunkRow], delete_where: str | None = None, *, embedded: bool = True
    ) -> None:
        """Update/insert ``rows`` by chunk id and delete ``delete_where`` in ONE commit.
        ``embedded``: some rows carry vectors this process made (else all were read from
        the table, and any model may write them back)."""
        merge = table.merge_insert("chunk_id").when_matched_update_all().when_not_matched_insert_all()
        if delete_where:
            merge = merge.when_not_matched_by_source_delete(delete_where)
        fitting = self._fitting if embedded else (lambda t, r: arrow(r, t.schema))
        with self._commits.compaction():  # an update: after a purge's compaction (``coordination``)
            self._commits.commit(lambda: merge.execute(fitting(table, rows)))
        self._commits.after(table)

    def update(self, where: str, values_sql: dict[str, str]) -> int:
        """Set columns (SQL expressions) on the rows ``where`` selects; how many."""
        table = self.existing()
        if table is None:
            return 0
        with self._commits.compaction():
            result = self._commits.commit(lambda: table.update(where=where, values_sql=values_sql))
        self._commits.after(table)
        return int(getattr(result, "rows_updated", 0) or 0)

    def delete(self, where: str) -> int:
        """Delete the rows ``where`` selects; how many there were."""
        table = self.existing()
        if table is None:
            return 0
        before = int(table.count_rows(where))
        if before:
            with self._commits.compaction():
                self._commits.commit(lambda: table.delete(where))
            self._commits.after(table)
        return before

    def _fitting(self, table: Any, rows: Sequence[ChunkRow]) -> Any:
        """``rows`` as Arrow in the table's schema, once the table's own model record (the
        schema of the version the commit is based on: read anyway, ~0.2 ms) names the
        model this process embeds with. A reindex by another process may have re-embedded
        the table since this one started: writing would mix two models' vectors, so the
        write is refused (503, nothing written; inside the write lock, which the reindex
        held throughout, and again on a retried commit)."""
        schema = table.schema
        self._refuse_other_model(recorded_model(schema))
        return arrow(rows, schema)

    def _refuse_other_model(self, recorded: tuple[str, int] | None = None) -> None:
        """503 when the table's vectors are of another model than this process's
        (``recorded``: the table's record, when the caller has read it; else the latest
        version's schema is read, ~0.2 ms): a server started before a reindex finished
        neither writes nor searches with its old model."""
        if self._writer is None:
            return
        if recorded is None:
            reader = self._reader()
            recorded = None if reader is None else recorded_model(run(reader.schema()))
        if recorded is not None and recorded[0] != self._writer[0]:
            raise UnavailableError(
                f"the database was re-embedded for embedding model {recorded[0]!r} while this process runs "
                f"{self._writer[0]!r}; nothing was done; fix: restart it with --embed-model {recorded[0]}",
                model=self._writer[0],
            )

    # -- re-embedding (a reindex, inside ``Store.exclusive``) ---------------------------------

    def reembed(
        self,
        model_id: str,
        dim: int,
        vectors_for: Callable[[list[ChunkRow]], Any],
        *,
        batch_rows: int = 256,
        on_batch: Callable[[int, int], None] | None = None,
    ) -> int:
        """Replace every chunk row's vector with ``vectors_for(rows)`` (``rows``: the
        batch's ``memory_id``, ``chunk_idx``, ``n_chunks`` and ``content``; an array of
        ``len(rows)`` × ``dim`` float32) in ONE commit, every other column as it was; how
        many rows. Inside ``exclusive`` (nothing else commits meanwhile).

        The rows are read from one version, batch by batch, and streamed into LanceDB's
        overwrite, whose commit writes the new vectors, their size and the model's record
        (``schema.reembedded_schema``) at once: a kill before it leaves the old version
        current (and, in the table's ``data`` folder, files no version uses, which the
        next reindex removes first on a local disk), a kill after it the new one. An
        overwrite drops every index: they are built again here; until then full-text
        search answers nothing (it falls back to vectors) and the next open of the table
        builds them (``schema.repair_indexes``)."""
        import pyarrow as pa

        table = self.existing()
        if table is None:
            return 0
        table.checkout_latest()
        # Files a killed reindex (or a killed write) left behind: safe to remove now on a
        # local disk, where no other writer is at work (inside ``exclusive``). Not on object
        # storage: a replica that stalled past its lease may still be writing files for a
        # commit (leases have no fencing token), so Lance's own 7 days apply there.
        table.to_lance().cleanup_old_versions(older_than=self._retain, delete_unverified=not self._remote,
                                              error_if_tagged_old_versions=False)  # fmt: skip
        dataset = table.to_lance()  # one version: every row is read from it
        total = int(dataset.count_rows())
        schema = reembedded_schema(table.schema, model_id, dim)
        wanted = ["memory_id", "chunk_idx", "n_chunks", "content"]

        def read() -> Iterator[Any]:
            """The version's rows in batches of ``batch_rows`` (a scan yields at most one
            fragment per batch, and a table of small writes has many small fragments)."""
            held: list[Any] = []
            for batch in dataset.to_batches(batch_size=batch_rows):
                held.append(batch)
                if sum(b.num_rows for b in held) >= batch_rows:
                    yield from pa.Table.from_batches(held).combine_chunks().to_batches()
                    held = []
            if held:
                yield from pa.Table.from_batches(held).combine_chunks().to_batches()

        failed: list[Exception] = []  # what the stream raised: LanceDB re-raises it as a RuntimeError

        def batches() -> Iterator[Any]:
            done = 0
            try:
                for batch in read():
                    if not batch.num_rows:
                        continue
                    vectors = vectors_for(batch.select(wanted).to_pylist())
                    flat = pa.array(vectors.astype("float32").reshape(-1), type=pa.float32())
                    column = pa.FixedSizeListArray.from_arrays(flat, dim)
                    arrays = [column if name == "vector" else batch.column(name) for name in schema.names]
                    done += batch.num_rows
                    yield pa.RecordBatch.from_arrays(arrays, schema=schema)
                    if on_batch is not None:
                        on_batch(done, total)
                # The last moment before LanceDB commits: a lease lost meanwhile (object
                # storage) fails the write here, so nothing is committed.
                self._commits.coordinator.check()
            except Exception as exc:
                failed.append(exc)
                raise

        self._commits.coordinator.check()
        try:
            table.add(pa.RecordBatchReader.from_batches(schema, batches()), mode="overwrite")
        except Exception:
            if failed:
                raise failed[0] from None
            raise
        table.checkout_latest()
        self.indexed = False  # the overwrite dropped the vector index too
        return total

    def rebuild_indexes(self) -> None:
        """Every index built again, then the full upkeep of both tables (the vector index
        once the table is large enough; old versions removed past ``retain``)."""
        table = self.existing()
        if table is not None:
            create_indexes(table)
            self._commits.full(table)
