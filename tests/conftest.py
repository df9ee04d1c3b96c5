"""The suite's fixtures, all of them shared (plain helpers are in ``support``).

A clean environment for every test and one real embedder per session: the real default
model is converted into a fresh temporary cache once per test session, so a cache left on
the machine can never hide a broken converter, and every test that needs vectors shares it
(seconds, not minutes). Every service is real: LanceDB on disk under ``tmp_path`` and that
model; nothing of storage or the model is faked. Time is the one thing a test controls,
through the service's ``clock`` argument, so writes can be made to share a timestamp; and
the model load, through a ``Gate``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from s3_emulator import S3Emulator
from support import Gate, LibraryFace, ServiceFace, SteppableClock

from wontopos_mcp.cli import engines
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.model.embeddings import (
    DEFAULT_MODEL,
    FastEmbedEmbedder,
    ModelLoader,
    load_embedder,
)
from wontopos_mcp.storage.adapter import Store

# STYLE: few, reproducible examples, no deadline (2 cores, a real model and database).
settings.register_profile(
    "wontopos",
    deadline=None,
    max_examples=30,
    derandomize=True,
    # One real service per test serves every example (each example uses its own store);
    # building a model and a database per example would cost minutes.
    suppress_health_check=(HealthCheck.function_scoped_fixture, HealthCheck.too_slow),
)
settings.load_profile("wontopos")


_BROWSER_FIXTURES = {"browser", "page"}
_EMULATOR_FIXTURES = {"s3_endpoint", "azurite", "emulator", "ddb_table"}
_SLOW_KINDS = ("process", "browser", "emulator")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tiers from what a test uses: a browser or an emulator fixture marks it ``browser``
    or ``emulator``; every ``process``, ``browser`` or ``emulator`` test is also ``slow``,
    so ``pytest -m "not slow"`` leaves all of them out."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & _BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
        if used & _EMULATOR_FIXTURES:
            item.add_marker(pytest.mark.emulator)
        if any(item.get_closest_marker(kind) for kind in _SLOW_KINDS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def engine_runtime() -> Iterator[Path]:
    """The session's own runtime directory (``XDG_RUNTIME_DIR``) for the shared engines
    its stdio servers start, so none meets a user's engine or another run's; every engine
    still running there is stopped at the end. Short, for the socket path limit."""
    root = Path(tempfile.mkdtemp(prefix="wos-run-"))
    before = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(root)
    try:
        yield root
    finally:
        engines.stop([root / "wontopos-mcp"])
        if before is None:
            os.environ.pop("XDG_RUNTIME_DIR", None)
        else:
            os.environ["XDG_RUNTIME_DIR"] = before
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_stray_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """An engine a test's process started outside the session's runtime directory (a
    command run with an environment of the test's own making, which names none) is stopped
    with its test when its database is one of this run's: it would otherwise wait its ten
    idle minutes in the user's runtime directory, its model loaded."""
    yield
    base = str(tmp_path_factory.getbasetemp())
    for engine in engines.running(engines.runtime_roots({})):
        if str(engine.get("db", "")).startswith(base):
            with contextlib.suppress(ProcessLookupError):
                os.kill(engine["pid"], signal.SIGTERM)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``WONTOPOS_*`` setting from the machine leaks into a test."""
    for name in list(os.environ):
        if name.startswith("WONTOPOS_"):
            monkeypatch.delenv(name, raising=False)
    return


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's model cache folder (starts empty)."""
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(scope="session")
def embedder(model_cache: Path) -> FastEmbedEmbedder:
    """The real default embedder, converted into ``model_cache`` once per session."""
    loaded = load_embedder(DEFAULT_MODEL, model_cache, threads=2)
    assert isinstance(loaded, FastEmbedEmbedder)
    return loaded


@pytest.fixture
def anyio_backend() -> str:
    """The async tests run on asyncio only (what the server runs on)."""
    return "asyncio"


@pytest.fixture
def clock() -> SteppableClock:
    return SteppableClock()


@pytest.fixture
def make_service(tmp_path: Path, embedder: Any) -> Iterator[Callable[..., MemoryService]]:
    """``make_service(speaker_limit=50, clock=None, db=None, store=None, **options)``: a real
    service on disk (``store``: arguments of its ``Store``, e.g. ``purge``; ``options`` go
    to ``MemoryService``, e.g. ``window_cap``), closed after the test.

    Services built on the same ``db`` share one database, as two processes would.
    """
    opened: list[MemoryService] = []

    def make(
        *,
        speaker_limit: int = 50,
        clock: Callable[[], datetime] | None = None,
        db: Path | None = None,
        store: dict[str, Any] | None = None,
        **options: Any,
    ) -> MemoryService:
        kwargs: dict[str, Any] = {"speaker_limit": speaker_limit, **options}
        if clock is not None:
            kwargs["clock"] = clock
        svc = MemoryService(Store(str(db or tmp_path / "db"), **(store or {})), ModelLoader.of(embedder), **kwargs)
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


@pytest.fixture(params=["service", "library"])
def make_face(request: pytest.FixtureRequest, make_service: Callable[..., MemoryService]) -> Callable[..., ServiceFace]:
    """``make_face(**make_service_options)``: a fresh service seen through the core
    (``ServiceFace``) and, in the test's second run, through the library (``LibraryFace``)."""

    def make(**kwargs: Any) -> ServiceFace:
        svc = make_service(**kwargs)
        # Open the database before Memory() starts its background open: a call racing that
        # open is a bug of its own (test_a_call_made_while_the_database_is_opening_...).
        svc.stores_list()
        return ServiceFace(svc) if request.param == "service" else LibraryFace(svc)

    return make


@pytest.fixture
def face(make_face: Callable[..., ServiceFace]) -> ServiceFace:
    return make_face()


@pytest.fixture
def clocked_face(make_face: Callable[..., ServiceFace], clock: SteppableClock) -> ServiceFace:
    return make_face(clock=clock)


@pytest.fixture
def gate(embedder: Any) -> Iterator[Gate]:
    """A model load held until the test sets ``gate.event`` (set at teardown whatever happened)."""
    gate = Gate(embedder)
    yield gate
    gate.event.set()


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real S3 API (moto's server) on loopback with one bucket, ``exists``, for the
    whole session: started by the first test that needs it."""
    with S3Emulator(tmp_path_factory.mktemp("moto")) as emulator:
        emulator.bucket("exists")
        yield emulator.endpoint
