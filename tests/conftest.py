"""Shared fixtures: a clean environment for every test, one real embedder per session.

The real default model is converted into a fresh temporary cache once per test session, so
a cache left on the machine can never hide a broken converter, and every test that needs
vectors shares it (seconds, not minutes).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from wontopos_mcp.embeddings import DEFAULT_MODEL, FastEmbedEmbedder, load_embedder

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


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No ``WONTOPOS_*`` setting from the machine leaks into a test."""
    for name in list(os.environ):
        if name.startswith("WONTOPOS_"):
            monkeypatch.delenv(name, raising=False)
    yield


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
