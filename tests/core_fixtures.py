"""Fixtures of the core tests (names, service, paging, concurrency, injection).

Loaded by those modules with ``pytest_plugins = ("core_fixtures",)``; their plain helpers
(``refused``, ``snapshot``, ``walk_by_speaker``, the clock) are in ``core_support``.
Every service here is real: LanceDB on disk under ``tmp_path`` and the session's real embedding model (the
``embedder`` fixture of ``conftest.py``); nothing of storage or the model is faked. Time is
the one thing a test controls, through the service's ``clock`` argument, so writes can be
made to share a timestamp.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from core_support import SteppableClock

from wontopos_mcp.embeddings import ModelLoader
from wontopos_mcp.service import MemoryService
from wontopos_mcp.store import Store


@pytest.fixture
def clock() -> SteppableClock:
    return SteppableClock()


@pytest.fixture
def make_service(tmp_path: Path, embedder: Any) -> Iterator[Callable[..., MemoryService]]:
    """``make_service(speaker_limit=50, clock=None, db=None)``: a real service on disk.

    Services built on the same ``db`` share one database, as two processes would.
    """
    opened: list[MemoryService] = []

    def make(
        *, speaker_limit: int = 50, clock: Callable[[], datetime] | None = None, db: Path | None = None
    ) -> MemoryService:
        kwargs: dict[str, Any] = {"speaker_limit": speaker_limit}
        if clock is not None:
            kwargs["clock"] = clock
        svc = MemoryService(Store(str(db or tmp_path / "db")), ModelLoader.of(embedder), **kwargs)
        opened.append(svc)
        return svc

    yield make
    for svc in opened:
        svc.close()


@pytest.fixture
def service(make_service: Callable[..., MemoryService]) -> MemoryService:
    return make_service()


@pytest.fixture
def clocked_service(make_service: Callable[..., MemoryService], clock: SteppableClock) -> MemoryService:
    """A service whose time stands still until the test moves ``clock``."""
    return make_service(clock=clock)
