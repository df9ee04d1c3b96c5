"""Plain helpers of the core tests: error expectations, whole-store snapshots, paging
walks and a clock a test moves by hand. The fixtures are in ``core_fixtures``.

Importing this module also registers and loads the hypothesis profile of STYLE.md
("Properties, not just examples"): no deadline, a few dozen examples, derandomized, so
the suite stays fast and stable on 2 cores. It has to be loaded before any ``@given``
is applied (hypothesis reads the settings at decoration time), which is why it lives in
the module the test modules import first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from wontopos_mcp.errors import WontoposError
from wontopos_mcp.service import MemoryService

ERROR_TYPES = {400: "invalid_request_error", 404: "not_found_error", 409: "conflict_error"}
T0 = datetime(2026, 7, 10, 4, 20, 39, 123456, tzinfo=timezone.utc)


class SteppableClock:
    """A clock that stands still until a test moves it, so writes can share a timestamp."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now

    def set(self, moment: datetime) -> None:
        self.now = moment


@contextmanager
def refused(status: int, **details: Any) -> Iterator[pytest.ExceptionInfo[WontoposError]]:
    """Expect a ``WontoposError`` with this status, its SPEC type and these detail fields."""
    with pytest.raises(WontoposError) as info:
        yield info
    error = info.value
    assert error.status == status, repr(error)
    if status in ERROR_TYPES:
        assert error.type == ERROR_TYPES[status], repr(error)
    envelope = error.envelope()
    assert envelope["type"] == "error" and envelope["status"] == status
    for key, value in details.items():
        assert envelope["error"].get(key) == value, f"{key}: {envelope['error'].get(key)!r} != {value!r} in {error!r}"


def all_memories(svc: MemoryService, user_id: str | None = None, *, page: int = 500) -> list[dict[str, Any]]:
    """Every memory of a store, walking ``memory_list`` to its end (oldest first)."""
    memories: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10_000):
        answer = svc.memory_list(limit=page, cursor=cursor, user_id=user_id)
        memories += answer["memories"]
        cursor = answer["next_cursor"]
        if cursor is None:
            return memories
    raise AssertionError("memory_list never reached its last page")


def snapshot(svc: MemoryService) -> dict[str, Any]:
    """Everything a caller can see: stores, and each store's speakers and memories."""
    stores = svc.stores_list()["stores"]
    state: dict[str, Any] = {"stores": stores}
    for store in stores:
        uid = store["user_id"]
        state[uid] = {"speakers": svc.speakers_list(user_id=uid), "memories": all_memories(svc, uid)}
    return state


@contextmanager
def changes_nothing(svc: MemoryService) -> Iterator[None]:
    """The block must leave every store exactly as it found it."""
    before = snapshot(svc)
    yield
    assert snapshot(svc) == before


def walk_by_speaker(
    svc: MemoryService,
    speaker: str,
    *,
    limit: int = 20,
    user_id: str | None = None,
    between_pages: Callable[[], None] | None = None,
    max_pages: int = 1_000,
) -> list[dict[str, Any]]:
    """All pages of ``by_speaker``, following ``next_before``/``next_skip_ids``."""
    seen: list[dict[str, Any]] = []
    before, skip = None, None
    for _ in range(max_pages):
        page = svc.by_speaker(speaker, limit=limit, before=before, skip_ids=skip, user_id=user_id)
        assert page["returned"] == len(page["memories"])
        seen += page["memories"]
        if not page["has_more"]:
            assert page["next_before"] is None and page["next_skip_ids"] == []
            return seen
        assert page["returned"] == limit
        before, skip = page["next_before"], page["next_skip_ids"]
        if between_pages is not None:
            between_pages()
    raise AssertionError(f"by_speaker({speaker!r}) never reached its last page")
