"""The parts a service is built from, given the entry points' settings.

``MemoryService.open(settings)`` calls ``parts``: a ``Store`` for the database (its
write coordination chosen by the URI, in ``coordination``), a not yet started
``ModelLoader`` for the embedding model, and the service's options. The settings are
whatever has the attributes of ``StartupSettings`` (``config.Settings`` does): the engine
never imports ``config``, which reads the environment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .embeddings import ModelLoader
    from .store import Store


class StartupSettings(Protocol):
    """What building a service reads from the settings."""

    @property
    def db(self) -> str: ...
    @property
    def embed_model(self) -> str: ...
    @property
    def model_cache(self) -> str: ...
    @property
    def speaker_limit(self) -> int: ...

    @property
    def storage_options_dict(self) -> dict[str, str]: ...
    @property
    def writers(self) -> str: ...
    @property
    def lease_ttl_ms(self) -> int: ...
    @property
    def redact(self) -> str: ...


def parts(settings: StartupSettings, *, models: ModelLoader | None = None) -> tuple[Store, ModelLoader, dict[str, Any]]:
    """(store, model loader, service options) for these settings; ``models`` replaces
    the loader of ``settings.embed_model`` (tests, an embedder already loaded)."""
    from .embeddings import ModelLoader

    store = store_for(settings)
    if models is None:
        models = ModelLoader.for_model(settings.embed_model, settings.model_cache)
    return store, models, {"speaker_limit": settings.speaker_limit, "redact": settings.redact}


def store_for(settings: StartupSettings) -> Store:
    """The ``Store`` the settings name (not yet opened: construction is cheap)."""
    from .lease import LeaseTiming
    from .store import Store

    lease = LeaseTiming.from_ttl_ms(settings.lease_ttl_ms)
    return Store(settings.db, storage_options=settings.storage_options_dict, writers=settings.writers, lease=lease)
