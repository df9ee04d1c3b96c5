"""MemoryService: every operation of the three faces, behind one facade.

The faces (MCP tools, REST, the ``Memory`` library) call these methods with the MCP tools'
parameter names (each face maps its own onto them in one table, ``contract``) and send
back the answers they return; refusals are ``WontoposError``s. The service is synchronous
and thread-safe: the async faces call it through ``anyio.to_thread.run_sync``. Defaults
that do not depend on a face live here (a ``user_id`` left out is the "default" store, for
``store_create`` too).

The service owns no rows itself; each part owns one thing (the arrows point down):

    service ──> stores, writes, batch_writes, retagging, reads, speaker_pages
                  └──> commits ──> registry (registry rows), memories (chunk rows)
                                      └──> storage.adapter (LanceDB) ──> storage.locks

Order of checks in every call, when several things are wrong: argument shape and ranges,
then the store, then the speaker, then the memory, then conflicts, and only then the
model, so a call that fails early never waits for the model. Checks that depend on
stored state are repeated inside the write lock, where they decide.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from wontopos_mcp.model.embeddings import MODEL_WAIT_S, model_wait_observer
from wontopos_mcp.rules.answers import (
    JSON,
    BySpeakerAnswer,
    HistoryAnswer,
    ImportSummaryAnswer,
    LineageAnswer,
    MemoryAddAnswer,
    MemoryAddMessagesAnswer,
    MemoryBatchAnswer,
    MemoryDuplicateAnswer,
    MemoryForgetAnswer,
    MemoryGetAnswer,
    MemoryListAnswer,
    MemoryRecallAnswer,
    MemorySearchAnswer,
    MemorySupersedeAnswer,
    ReindexAnswer,
    RevisionsAnswer,
    SpeakerMergeAnswer,
    SpeakerRegisterAnswer,
    SpeakerRemoveAnswer,
    SpeakerRenameAnswer,
    SpeakersListAnswer,
    StatsAnswer,
    StoreCreateAnswer,
    StoreDeleteAnswer,
    StoresListAnswer,
)
from wontopos_mcp.rules.batch_items import Origin
from wontopos_mcp.rules.dates import to_us
from wontopos_mcp.rules.idempotency import Idempotency
from wontopos_mcp.rules.names import DEFAULT_SPEAKER_LIMIT, check_store_id
from wontopos_mcp.rules.redaction import Redactor

from .batch_writes import BatchWrites
from .bootstrap import StartupSettings, parts
from .commits import Commits
from .conversation_import import IMPORT_BATCH, ConversationImport
from .conversation_import import Progress as ImportProgress
from .memories import Memories
from .reads import Reads
from .registry import Registry
from .retagging import Retagging
from .speaker_pages import SpeakerPages
from .store_state import StoreState
from .stores import Stores
from .writes import Writes

if TYPE_CHECKING:
    from wontopos_mcp.errors import ConfigError
    from wontopos_mcp.imports.sources import Source
    from wontopos_mcp.model.embeddings import ModelLoader
    from wontopos_mcp.rules.import_options import ImportOptions
    from wontopos_mcp.storage.adapter import Store

    from .reindexing import Progress, Step

log = logging.getLogger(__name__)
J = TypeVar("J", bound=JSON)  # a request body, as it came and as it is scrubbed


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class MemoryService:
    """The engine's one entry: each method validates, resolves the store and answers
    through the part that owns the operation."""

    def __init__(
        self,
        store: Store,
        models: ModelLoader,
        *,
        speaker_limit: int = DEFAULT_SPEAKER_LIMIT,
        clock: Callable[[], datetime] = _utcnow,
        model_wait: float = MODEL_WAIT_S,
        window_cap: int = 1024,
        redact: str = "none",
        on_open_failure: Callable[[Exception], None] | None = None,
    ) -> None:
        """``on_open_failure``: called (on the opening thread) with what the background
        open of ``start`` raised; the server stops there (``cli.main.serve``)."""
        self.store = store
        self.models = models
        self.clock = clock
        self.registry = Registry(store, speaker_limit=speaker_limit, now_us=self.now_us)
        self.memories = Memories(store, now_us=self.now_us)
        self.commits = Commits(
            store, self.registry, self.memories, models,
            model_wait=model_wait, now_us=self.now_us, redactor=Redactor(redact),
        )  # fmt: skip
        self._stores = Stores(self.commits)
        self._retagging = Retagging(self.commits)
        self._writes = Writes(self.commits)
        self._batches = BatchWrites(self.commits)
        self._reads = Reads(self.registry, self.memories, embedder=self.commits.embedder, now_us=self.now_us)
        self.pages = SpeakerPages(self.registry, self.memories, window_cap=window_cap, now_us=self.now_us)
        self._state = StoreState(self.registry, self.memories, self.pages)
        self._db_state = "opening"  # the background open's outcome: "opening", "ok" or "error"
        self._started = False
        self._on_open_failure = on_open_failure
        self._start_lock = threading.Lock()
        store.on_open(self.registry.ensure_default_store)

    @classmethod
    def open(cls, settings: StartupSettings, *, models: ModelLoader | None = None, **kwargs: Any) -> MemoryService:
        """The composition root's way in: a database and a (not yet started) model loader."""
        store, models, options = parts(settings, models=models)
        return cls(store, models, **options, **kwargs)

    # -- options the parts hold ----------------------------------------------------------------

    @property
    def speaker_limit(self) -> int:
        return self.registry.speaker_limit

    @property
    def model_wait(self) -> float:
        return self.commits.model_wait

    @property
    def window_cap(self) -> int:
        return self.pages.window_cap

    @property
    def redact(self) -> str:
        """The ``redact`` setting: ``"none"`` or ``"secrets"``."""
        return self.commits.redactor.mode

    def scrubbed(self, body: J) -> J:
        """A write's request body as its idempotency fingerprint hashes it: with the
        secrets the write would redact redacted, so no hash of one is kept (``Redactor.scrub``:
        strings in, strings out, so the body keeps its shape)."""
        scrubbed: J = self.commits.redactor.scrub(body)
        return scrubbed

    def idempotency(self, key: JSON, message: str) -> Idempotency:
        """An ``Idempotency-Key`` (400 unless well formed) with the fingerprint of
        ``message``, what identifies the request body: a keyed hash under the database's
        secret (``idempotency``)."""
        return Idempotency.keyed(key, self.registry.idempotency_secret, message)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Open the database, then load the model, in the background (later calls do nothing).

        Returns at once. The database comes first and alone, so calls that need no model
        wait only for it (the two compete for the interpreter: ``bench/first_call.py``); a
        call that needs the model sooner starts the load itself (``ModelLoader.get``).
        """
        with self._start_lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._warm_up, name="wontopos-open-db", daemon=True).start()

    def _warm_up(self) -> None:
        try:
            self.store.connect()
            self._db_state = "ok"
        except Exception as exc:  # the first call that needs the database reports it properly
            self._db_state = "error"
            if self._on_open_failure is not None:
                self._on_open_failure(exc)
            log.warning("opening the database in the background failed", exc_info=True)
        finally:
            self.models.start()

    def database_state(self) -> str:
        """Where the background open stands, without waiting: "opening", "ok" or "error"."""
        return self._db_state

    @property
    def model_state(self) -> str:
        """Where the model load stands, without waiting: "loading", "ready" or "failed"."""
        return self.models.state

    @contextmanager
    def reporting_model_waits(self, observer: Callable[[float, float], None]) -> Iterator[None]:
        """While this lasts, a call that waits for the model to load calls
        ``observer(seconds_waited, wait_bound)`` about once a second, on the waiting
        thread: how a face tells its caller the call is alive (MCP progress). It holds for
        calls made in this context, and on worker threads given a copy of it (as
        ``anyio.to_thread.run_sync`` does)."""
        token = model_wait_observer.set(observer)
        try:
            yield
        finally:
            model_wait_observer.reset(token)

    def open_or_refuse(self) -> None:
        """Open the database now, or ``ConfigError`` in one line naming it and why it cannot
        be used: what a human command calls before it runs."""
        self.store.open_or_refuse()

    def open_failure(self, exc: Exception) -> ConfigError:
        """What opening the database raised, as the one line ``open_or_refuse`` raises."""
        return self.store.open_failure(exc)

    def claim(self) -> None:
        """At a server's start: take what writing needs for the process's lifetime (object
        storage with one writer: the database lease), or ``ConfigError``."""
        self.store.claim()

    def release(self) -> None:
        """Give up what this process holds for writing, without waiting: the way out on SIGTERM."""
        self.store.release()

    def check_model(self, model_id: str) -> None:
        """``ModelMismatch`` when the database was built with another model than ``model_id``."""
        self.store.check_model(model_id)

    def close(self) -> None:
        self.store.close()

    def reindex(self, model_name: str, *, step: Step | None = None, progress: Progress | None = None) -> ReindexAnswer:
        """Re-embed every memory in place for ``model_name``, the model this service loads
        (``reindexing``). Already that model: ``status: "unchanged"``, without loading it.
        A model that cannot load: ``UnavailableError``, nothing changed."""
        from .reindexing import reindex, same_model

        recorded = same_model(self.store, model_name)
        if recorded is not None:
            return {"status": "unchanged", "model": recorded[0], "dim": recorded[1], "previous": recorded[0],
                    "memories": 0, "chunks": 0, "seconds": 0.0}  # fmt: skip
        embedder = self.models.load_here(self.model_wait)
        self.store.chunks.embeds_with(embedder.model_id, embedder.dim)
        return reindex(self.store, embedder, step=step, progress=progress)

    # -- stores and speakers ----------------------------------------------------------------------

    def store_create(self, user_id: JSON = None) -> StoreCreateAnswer:
        return self._stores.store_create(user_id)

    def stores_list(self) -> StoresListAnswer:
        """Every store, oldest first."""
        return self._stores.stores_list()

    def store_delete(self, user_id: JSON) -> StoreDeleteAnswer:
        """Delete a store with its memories and speakers (``default`` is emptied and stays)."""
        return self._stores.store_delete(user_id)

    def delete_all(self, user_id: JSON) -> MemoryForgetAnswer:
        """Erase every memory of a store; the store and its speakers stay (REST and library only)."""
        return self._stores.delete_all(user_id)

    def speaker_register(self, speaker: JSON, user_id: JSON = None) -> SpeakerRegisterAnswer:
        """Register a person (counted against the limit only here)."""
        return self._stores.speaker_register(speaker, user_id)

    def speakers_list(self, user_id: JSON = None) -> SpeakersListAnswer:
        """The registered people with their memory counts."""
        return self._stores.speakers_list(user_id)

    def speaker_remove(self, speaker: JSON, user_id: JSON = None) -> SpeakerRemoveAnswer:
        """End a registration; the memories stay, untagged."""
        return self._stores.speaker_remove(speaker, user_id)

    def speaker_rename(self, speaker: JSON, new_name: JSON, user_id: JSON = None) -> SpeakerRenameAnswer:
        """Re-tag every memory of a person and rename the registration, in one commit."""
        return self._retagging.speaker_rename(speaker, new_name, user_id)

    def speaker_merge(
        self, speaker: JSON, into: JSON, confirm_records: JSON = None, user_id: JSON = None
    ) -> SpeakerMergeAnswer:
        """Re-tag one person's memories as another's and end the first registration."""
        return self._retagging.speaker_merge(speaker, into, confirm_records, user_id)

    # -- memories -------------------------------------------------------------------------------

    def memory_add(
        self,
        content: JSON,
        speaker: JSON = None,
        category: JSON = None,
        event_date: JSON = None,
        conversation_id: JSON = None,
        user_id: JSON = None,
        *,
        idempotency: Idempotency | None = None,
    ) -> MemoryAddAnswer | MemoryDuplicateAnswer:
        """Store one memory, or answer the memory it restates."""
        return self._writes.memory_add(
            content, speaker, category, event_date, conversation_id, user_id, idempotency=idempotency
        )

    def memory_add_messages(
        self,
        messages: JSON,
        conversation_id: JSON = None,
        user_id: JSON = None,
        *,
        idempotency: Idempotency | None = None,
    ) -> MemoryAddMessagesAnswer:
        """Store a conversation's messages, one labelled memory each, in one commit."""
        return self._writes.memory_add_messages(messages, conversation_id, user_id, idempotency=idempotency)

    def memory_forget(
        self, memory_id: JSON = None, speaker: JSON = None, confirm_records: JSON = None, user_id: JSON = None
    ) -> MemoryForgetAnswer:
        """Forget one memory, or all of a speaker's against a confirmed count."""
        return self._writes.memory_forget(memory_id, speaker, confirm_records, user_id)

    def memory_supersede(
        self, memory_id: JSON, content: JSON, user_id: JSON = None, *, idempotency: Idempotency | None = None
    ) -> MemorySupersedeAnswer:
        """Replace the current version of a fact with a new memory."""
        return self._writes.memory_supersede(memory_id, content, user_id, idempotency=idempotency)

    def memory_add_batch(
        self,
        items: JSON,
        user_id: JSON = None,
        *,
        idempotency: Idempotency | None = None,
        origins: Sequence[Origin] | None = None,
        redacted: Mapping[str, int] | None = None,
    ) -> MemoryBatchAnswer:
        """Store many memories with one embedding pass and one commit (imports)."""
        return self._batches.memory_add_batch(
            items, user_id, idempotency=idempotency, origins=origins, redacted=redacted
        )

    def import_conversations(
        self,
        source: Source,
        options: ImportOptions,
        user_id: JSON = None,
        *,
        progress: ImportProgress | None = None,
        batch: int = IMPORT_BATCH,
    ) -> ImportSummaryAnswer:
        """A chat export or transcript stored message by message under its speakers
        (``conversation_import``); a dry run stores nothing and says who is who.
        ``progress(done, total, counts)`` is called after each batch of ``batch`` messages
        (an exception it raises stops the import there, as a Ctrl-C would)."""
        store = None if user_id is None else check_store_id(user_id)
        importer = ConversationImport(self._stores, self._batches, self.idempotency, self.now_us, batch=batch)
        return importer.run(source, store, options, progress)

    def memory_add_bulk(
        self,
        content: JSON,
        category: JSON = None,
        timestamp: JSON = None,
        user_id: JSON = None,
        *,
        idempotency: Idempotency | None = None,
    ) -> MemoryBatchAnswer:
        """A text blob (at most 500,000 characters) cut into memories and stored as a batch."""
        return self._batches.memory_add_bulk(content, category, timestamp, user_id, idempotency=idempotency)

    def memory_search(
        self,
        query: JSON,
        speaker: JSON = None,
        limit: JSON = 10,
        filters: JSON = None,
        include_superseded: JSON = False,
        user_id: JSON = None,
        max_chars: JSON = None,
        as_of: JSON = None,
    ) -> MemorySearchAnswer:
        """The memories in scope that best answer ``query``, best first."""
        return self._reads.memory_search(query, speaker, limit, filters, include_superseded, user_id, max_chars, as_of)

    def memory_recall(
        self,
        query: JSON,
        limit: JSON = 10,
        context_limit: JSON = 10,
        user_id: JSON = None,
        max_chars: JSON = None,
        as_of: JSON = None,
    ) -> MemoryRecallAnswer:
        """Prompt-ready context: the search answer, lines around its best memory, recent turns."""
        return self._reads.memory_recall(query, limit, context_limit, user_id, max_chars, as_of)

    def memory_get(self, memory_id: JSON, user_id: JSON = None) -> MemoryGetAnswer:
        """One memory by id."""
        return self._reads.memory_get(memory_id, user_id)

    def memory_list(
        self, limit: JSON = 100, cursor: JSON = None, user_id: JSON = None, speaker: JSON = None
    ) -> MemoryListAnswer:
        """Every memory of the store (or of one speaker), oldest first, a page at a time."""
        return self._reads.memory_list(limit, cursor, user_id, speaker)

    def by_speaker(
        self, speaker: JSON, limit: JSON = 20, before: JSON = None, skip_ids: JSON = None, user_id: JSON = None
    ) -> BySpeakerAnswer:
        """What one person said, newest first, a page at a time."""
        return self.pages.by_speaker(speaker, limit, before, skip_ids, user_id)

    # -- the store's own state (REST and library; no MCP tool) ---------------------------------------

    def stats(self, user_id: JSON = None) -> StatsAnswer:
        """How many memories the store holds (memories, never records) and its short-term turns."""
        return self._state.stats(user_id)

    def history(self, user_id: JSON = None) -> HistoryAnswer:
        """The short-term turns ``memory_recall`` reads, oldest first."""
        return self._state.recent_turns(user_id)

    def lineage(self, memory_id: JSON, user_id: JSON = None) -> LineageAnswer:
        """One memory's versions from ``memory_id`` forward to the one in force, oldest first."""
        return self._state.lineage(memory_id, user_id)

    def revisions(
        self, include: JSON = None, limit: JSON = 20, before: JSON = None, skip_ids: JSON = None, user_id: JSON = None
    ) -> RevisionsAnswer:
        """How many memories a later version superseded; with ``include``, one page of either side."""
        return self._state.revisions(include, limit, before, skip_ids, user_id)

    def now_us(self) -> int:
        """The service's clock, in microseconds (a test sets it with ``clock``)."""
        return to_us(self.clock())
