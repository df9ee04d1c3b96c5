"""The parts a service is built from, given the entry points' settings.

``MemoryService.open(settings)`` calls ``parts``: a ``Store`` for the database (its
write coordination chosen by the URI, in ``coordination``), a not yet started
``ModelLoader`` for the embedding model, and the service's options. The settings are
whatever has the attributes of ``StartupSettings`` (``config.Settings`` does): the engine
never imports ``config``, which reads the environment.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from wontopos_mcp.model.embeddings import ModelLoader
    from wontopos_mcp.storage.adapter import Store


MALLOC_ARENAS = 2
"""glibc's malloc arenas a server process may use (``cap_malloc_arenas``)."""
_M_ARENA_MAX = -8  # mallopt's parameter number, glibc's malloc.h


def cap_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Let glibc's malloc keep at most ``arenas`` arenas in this process; whether it did.

    glibc gives threads that allocate at once arenas of their own, up to 8 per core, and an
    arena keeps what it freed for its next use. An engine's threads are many: onnxruntime's
    pool, LanceDB's runtime, the server's workers. Each search left more memory resident in
    more arenas: measured on the 10,000-memory store (``bench/memory.py``), 40 searches took a
    process from 583 MB to 694 MB resident by default, to 592 MB with two arenas (one per
    core of the 2-core machines we target), search latency within the noise. Called by the
    program before anything starts a thread; a user's own ``MALLOC_ARENA_MAX`` wins, and
    elsewhere than glibc on Linux nothing happens. The library never calls it: a host
    program's allocator is its own business."""
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the process already runs on
    except (OSError, AttributeError):  # musl and others: no mallopt
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))


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
    """(store, model loader, service options) for these settings; ``answers`` replaces
    the loader of ``settings.embed_model`` (tests, an embedder already loaded)."""
    from wontopos_mcp.model.embeddings import ModelLoader

    store = store_for(settings)
    if models is None:
        models = ModelLoader.for_model(settings.embed_model, settings.model_cache)
    return store, models, {"speaker_limit": settings.speaker_limit, "redact": settings.redact}


def store_for(settings: StartupSettings) -> Store:
    """The ``Store`` the settings name (not yet opened: construction is cheap)."""
    from wontopos_mcp.storage.adapter import Store
    from wontopos_mcp.storage.locks.lease import LeaseTiming

    lease = LeaseTiming.from_ttl_ms(settings.lease_ttl_ms)
    return Store(settings.db, storage_options=settings.storage_options_dict, writers=settings.writers, lease=lease)


def model_converted(settings: StartupSettings) -> bool | None:
    """Whether the default model (or the test-only one made of its weights) is already
    converted in the settings' cache (a few ``stat`` calls); ``None`` for a fastembed
    model, which is downloaded on first use."""
    from wontopos_mcp.model import e5_convert
    from wontopos_mcp.model.embeddings import DEFAULT_MODEL, TEST_MODEL, model_key

    if model_key(settings.embed_model) not in (DEFAULT_MODEL, TEST_MODEL):
        return None
    return e5_convert.is_converted(settings.model_cache)
