"""Idempotent writes: a repeated request answers the first answer instead of writing twice.

The official SDK sends an ``Idempotency-Key`` on every memory write and retries on
408/409/502/503/504. The key is kept 24 h per store, *in the database*, written in the
same commit as the memories it guards (columns on their rows), so after a crash a repeat
either replays the stored answer or finds nothing and writes exactly once. An outcome
that writes no memory (a duplicate) is recorded in the registry instead (``registry``
keeps those rows).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .errors import ConflictError, InvalidRequestError

KEY_FIELD = "Idempotency-Key"
WINDOW_US = 24 * 3600 * 1_000_000
RETRY_AFTER_MS = 500
_KEY = re.compile(r"[A-Za-z0-9._:-]{1,128}")


@dataclass(frozen=True)
class Idempotency:
    """A write's key and a fingerprint of its request body (same key + other body: 422)."""

    key: str
    fingerprint: str

    @classmethod
    def of(cls, key: Any, fingerprint: str) -> Idempotency:
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InvalidRequestError(
                f"{KEY_FIELD} must be 1-128 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'", field=KEY_FIELD
            )
        return cls(key, fingerprint)


def replayed(idem: Idempotency, fingerprint: str, answer_json: str) -> dict[str, Any]:
    """The first answer again, or 422 when the key came with another body."""
    if fingerprint != idem.fingerprint:
        raise InvalidRequestError(
            f"this {KEY_FIELD} was already used with a different request body; use a new key",
            status=422,
            field=KEY_FIELD,
        )
    return {**json.loads(answer_json), "replayed": True}


class Running:
    """Keys whose first request is still being written, in this process.

    Across processes the write lock serialises the writes, and the second one finds the
    first one's record inside the lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: set[tuple[str, str]] = set()

    @contextmanager
    def guard(self, store: str, idem: Idempotency | None) -> Iterator[None]:
        if idem is None:
            yield
            return
        token = (store, idem.key)
        with self._lock:
            if token in self._keys:
                raise ConflictError(
                    f"a request with this {KEY_FIELD} is still running; retry shortly",
                    field=KEY_FIELD,
                    retry_after_ms=RETRY_AFTER_MS,
                )
            self._keys.add(token)
        try:
            yield
        finally:
            with self._lock:
                self._keys.discard(token)
