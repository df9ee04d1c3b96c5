"""``Memory``: the Python face, with the official ``wontopos`` SDK ``Client``'s method
names, argument order and answers, so code written for the hosted API ports by changing
one import. Synchronous and thread-safe; errors are raised as ``WontoposError``
subclasses (``InvalidRequestError``, ``NotFoundError``, ...).
"""

from __future__ import annotations

from typing import Any

from .config import Settings
from .errors import InvalidRequestError
from .service import MemoryService

_NO_ID = object()
_METADATA_KEYS = ("speaker", "category", "event_date", "conversation_id")


class Memory:
    """A local memory: ``Memory(db="./memdb")``; ``Memory()`` reads ``WONTOPOS_*``.

    The embedding model starts loading in the background at construction; calls that
    need it wait for it (up to 20 s, then ``UnavailableError``), others never do.
    """

    def __init__(
        self,
        db: str | None = None,
        *,
        speaker_limit: int | None = None,
        embed_model: str | None = None,
        model_cache: str | None = None,
        service: MemoryService | None = None,
    ) -> None:
        if service is None:
            settings = Settings.load(
                {"db": db, "speaker_limit": speaker_limit, "embed_model": embed_model, "model_cache": model_cache}
            )
            service = MemoryService.open(settings)
        self._service = service
        self._service.start()

    # -- stores ---------------------------------------------------------------------------

    def create_store(self, user_id: str | None = None) -> dict[str, Any]:
        return self._service.store_create(user_id=_store(user_id))

    def list_stores(self) -> list[dict[str, Any]]:
        return self._service.stores_list()["stores"]

    def delete_store(self, user_id: str) -> dict[str, Any]:
        return self._service.store_delete(user_id=user_id)

    # -- speakers ---------------------------------------------------------------------------

    def add_speaker(self, speaker: str, user_id: str | None = None) -> dict[str, Any]:
        return self._service.speaker_register(speaker, user_id=user_id)

    def list_speakers(self, user_id: str | None = None) -> dict[str, Any]:
        return self._service.speakers_list(user_id=user_id)

    def remove_speaker(self, speaker: str, user_id: str | None = None) -> dict[str, Any]:
        return self._service.speaker_remove(speaker, user_id=user_id)

    # -- memories ----------------------------------------------------------------------------

    def add(
        self, content: str, user_id: str | None = None, *, metadata: dict[str, Any] | None = None, **extra: Any
    ) -> dict[str, Any]:
        """Store one memory; ``speaker``, ``category``, ``event_date`` and
        ``conversation_id`` may come as keywords or in ``metadata`` (keywords win)."""
        fields = {**(metadata or {}), **extra}
        unknown = sorted(set(fields) - set(_METADATA_KEYS))
        if unknown:
            raise InvalidRequestError(f"unknown argument {unknown[0]!r}", field=unknown[0])
        return self._service.memory_add(content, user_id=user_id, **fields)

    def add_messages(
        self, messages: list[dict[str, Any]], user_id: str | None = None, *, conversation_id: str | None = None
    ) -> dict[str, Any]:
        """Store a conversation ({role, name?, content} messages), one memory per message."""
        return self._service.memory_add_messages(messages, conversation_id=conversation_id, user_id=user_id)

    def add_turn(self, user_msg: str, assistant_msg: str, user_id: str | None = None) -> dict[str, Any]:
        """One exchange: the user's words (untagged) and the assistant's (``me``)."""
        messages = [{"role": "user", "content": user_msg}, {"role": "assistant", "content": assistant_msg}]
        return self.add_messages(messages, user_id)

    def add_bulk(
        self, content: str, user_id: str | None = None, category: str | None = "general", timestamp: str | None = None
    ) -> dict[str, Any]:
        """A long text cut into memories (paragraphs) and stored in one batch."""
        return self._service.memory_add_bulk(content, category=category, timestamp=timestamp, user_id=user_id)

    def add_many(self, items: list[dict[str, Any]], user_id: str | None = None) -> dict[str, Any]:
        """Many memories ({content, speaker?, category?, event_date?, conversation_id?,
        created_at?}) in one batch: one embedding pass, one commit (imports)."""
        return self._service.memory_add_batch(items, user_id)

    def update(self, old_memory_id: str, new_content: str, user_id: str | None = None) -> dict[str, Any]:
        """Supersede a memory whose fact changed."""
        try:
            return self._service.memory_supersede(old_memory_id, new_content, user_id=user_id)
        except InvalidRequestError as exc:
            raise exc.renamed_field({"memory_id": "old_memory_id", "content": "new_content"}) from None

    def search(
        self,
        query: str,
        user_id: str | None = None,
        limit: int = 10,
        *,
        speaker: str | None = None,
        filters: dict[str, Any] | None = None,
        include_superseded: bool = False,
    ) -> list[dict[str, Any]]:
        """The best memories for ``query``, best first (a list, as the SDK returns)."""
        answer = self._service.memory_search(
            query, speaker=speaker, limit=limit, filters=filters,
            include_superseded=include_superseded, user_id=user_id,
        )  # fmt: skip
        return answer["memories"]

    def recall(
        self, query: str, user_id: str | None = None, *, limit: int | None = None, context_limit: int | None = None
    ) -> dict[str, Any]:
        """Prompt-ready context: recent turns, the best memories, the conversation around the best."""
        return self._service.memory_recall(
            query,
            limit=10 if limit is None else limit,
            context_limit=10 if context_limit is None else context_limit,
            user_id=user_id,
        )

    def get(self, user_id: Any = None, memory_id: Any = _NO_ID) -> dict[str, Any]:
        """The memory itself; ``get(memory_id)`` alone reads the default store."""
        user_id, memory_id = _split_id_args(user_id, memory_id)
        return self._service.memory_get(memory_id, user_id=user_id)["memory"]

    def list_memories(
        self, user_id: str | None = None, *, limit: int = 100, cursor: str | None = None
    ) -> dict[str, Any]:
        return self._service.memory_list(limit=limit, cursor=cursor, user_id=user_id)

    def by_speaker(
        self,
        speaker: str,
        user_id: str | None = None,
        *,
        limit: int | None = None,
        before: str | None = None,
        skip_ids: list[str] | None = None,
    ) -> dict[str, Any]:
        return self._service.by_speaker(
            speaker, limit=20 if limit is None else limit, before=before, skip_ids=skip_ids, user_id=user_id
        )

    def delete(self, user_id: Any = None, memory_id: Any = _NO_ID) -> dict[str, Any]:
        """Forget one memory; ``delete(memory_id)`` alone uses the default store."""
        user_id, memory_id = _split_id_args(user_id, memory_id)
        return self._service.memory_forget(memory_id=memory_id, user_id=user_id)

    def delete_speaker(self, speaker: str, *, confirm_records: int, user_id: str | None = None) -> dict[str, Any]:
        """Forget every memory of one speaker; ``confirm_records`` is ``records_to_delete``."""
        return self._service.memory_forget(speaker=speaker, confirm_records=confirm_records, user_id=user_id)

    def delete_all(self, user_id: str) -> dict[str, Any]:
        """Erase every memory of a store (required ``user_id``); store and speakers stay."""
        return self._service.delete_all(user_id)

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        self._service.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _store(user_id: str | None) -> str:
    return "default" if user_id is None else user_id


def _split_id_args(user_id: Any, memory_id: Any) -> tuple[Any, Any]:
    """``get(id)`` and ``get(store, id)`` both work, as in the SDK."""
    if memory_id is _NO_ID:
        return None, user_id
    return user_id, memory_id
