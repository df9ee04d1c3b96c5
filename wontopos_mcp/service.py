"""MemoryService: every rule of SPEC.md, behind one facade.

The faces (MCP tools, REST, the ``Memory`` library) call these methods with SPEC's MCP
parameter names and send back the dicts they return; refusals are ``WontoposError``s.
The service is synchronous and thread-safe: the async faces call it through
``anyio.to_thread.run_sync``. Defaults that do not depend on a face live here (a
``user_id`` left out is the "default" store, for ``store_create`` too).

The service owns no rows itself; each part owns one thing (the arrows point down):

    service ──> stores, writes, batch_writes, reads, paging
                  └──> commits ──> registry (registry rows), memories (chunk rows)
                                      └──> store (LanceDB) ──> coordination

Order of checks in every call (SPEC "Errors", precedence): argument shape and ranges,
then the store, then the speaker, then the memory, then conflicts, and only then the
model, so a call that fails early never waits for the model. Checks that depend on
stored state are repeated inside the write lock, where they decide.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .batch_writes import BatchWrites
from .bootstrap import StartupSettings, parts
from .commits import Commits
from .dates import to_us
from .forwarding import delegate
from .idempotency import Idempotency
from .identity import Identity
from .memories import Memories
from .names import DEFAULT_STORE
from .paging import SpeakerPages
from .reads import Reads
from .redaction import Redactor
from .registry import Registry
from .stores import Stores
from .writes import Writes

if TYPE_CHECKING:
    from .embeddings import Embedder, ModelLoader
    from .store import Store

log = logging.getLogger(__name__)


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
        speaker_limit: int = 50,
        clock: Callable[[], datetime] = _utcnow,
        model_wait: float = 20.0,
        window_cap: int = 1024,
        redact: str = "none",
        on_open_failure: Callable[[Exception], None] | None = None,
    ) -> None:
        """``on_open_failure``: called (on the opening thread) with what the background
        open of ``start`` raised; the server stops there (``cli.serve``)."""
        self.store = store
        self.models = models
        self.clock = clock
        self.registry = Registry(store, speaker_limit=speaker_limit, now_us=self._now_us)
        self.memories = Memories(store, now_us=self._now_us)
        self.commits = Commits(
            store, self.registry, self.memories, models,
            model_wait=model_wait, now_us=self._now_us, redactor=Redactor(redact),
        )  # fmt: skip
        self._stores = Stores(self.commits)
        self._identity = Identity(self.commits)
        self._writes = Writes(self.commits)
        self._batches = BatchWrites(self.commits)
        self._reads = Reads(self.registry, self.memories, embedder=self.commits.embedder, now_us=self._now_us)
        self._pages = SpeakerPages(self.registry, self.memories, window_cap=window_cap, now_us=self._now_us)
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
        return self._pages.window_cap

    @property
    def redact(self) -> str:
        """The ``redact`` setting: ``"none"`` or ``"secrets"``."""
        return self.commits.redactor.mode

    def scrubbed(self, body: Any) -> Any:
        """A write's request body as its idempotency fingerprint hashes it: with the
        secrets the write would redact redacted, so no hash of one is kept (``Redactor.scrub``)."""
        return self.commits.redactor.scrub(body)

    def idempotency(self, key: Any, message: str) -> Idempotency:
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

    def close(self) -> None:
        self.store.close()

    # -- stores and speakers ----------------------------------------------------------------------

    def store_create(self, user_id: Any = None) -> dict[str, Any]:
        return self._stores.store_create(DEFAULT_STORE if user_id is None else user_id)

    stores_list = delegate(Stores.stores_list, "_stores")
    store_delete = delegate(Stores.store_delete, "_stores")
    delete_all = delegate(Stores.delete_all, "_stores")
    speaker_register = delegate(Stores.speaker_register, "_stores")
    speakers_list = delegate(Stores.speakers_list, "_stores")
    speaker_remove = delegate(Stores.speaker_remove, "_stores")
    speaker_rename = delegate(Identity.speaker_rename, "_identity")
    speaker_merge = delegate(Identity.speaker_merge, "_identity")

    # -- memories -------------------------------------------------------------------------------

    memory_add = delegate(Writes.memory_add, "_writes")
    memory_add_messages = delegate(Writes.memory_add_messages, "_writes")
    memory_forget = delegate(Writes.memory_forget, "_writes")
    memory_supersede = delegate(Writes.memory_supersede, "_writes")
    memory_add_batch = delegate(BatchWrites.memory_add_batch, "_batches")
    memory_add_bulk = delegate(BatchWrites.memory_add_bulk, "_batches")
    memory_search = delegate(Reads.memory_search, "_reads")
    memory_recall = delegate(Reads.memory_recall, "_reads")
    memory_get = delegate(Reads.memory_get, "_reads")
    memory_list = delegate(Reads.memory_list, "_reads")
    by_speaker = delegate(SpeakerPages.by_speaker, "_pages")

    # -- for tests and bench/ (thin names over the parts) ---------------------------------------------

    def _now_us(self) -> int:
        return to_us(self.clock())

    def _resolve(self, user_id: Any) -> tuple[str, str]:
        """(key, id as created) of an existing store (``Registry.resolve``)."""
        handle = self.registry.resolve(user_id)
        return handle.key, handle.display

    def _embedder(self) -> Embedder:
        return self.commits.embedder()

    def _last_seq(self, key: str) -> int:
        return self.commits.last_seq(key)

    def _new_rows(
        self, key: str, memory: dict[str, Any], chunks: list[str], vectors: Any, *, seq: int | None = None,
        created: int | None = None,
    ) -> tuple[str, list[dict[str, Any]]]:  # fmt: skip
        """A new memory's chunk rows (``Memories.new_rows``); ``seq`` defaults to the next."""
        seq = self.commits.last_seq(key) + 1 if seq is None else seq
        return self.memories.new_rows(key, memory, chunks, vectors, seq=seq, created=created)
