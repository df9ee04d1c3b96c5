"""Idempotent writes: a repeated request answers the first answer instead of writing twice.

The official SDK sends an ``Idempotency-Key`` on every memory write and retries on
408/409/502/503/504. The key is kept 24 h per store, *in the database*, written in the
same commit as the memories it guards (columns on their rows), so after a crash a repeat
either replays the stored answer or finds nothing and writes exactly once; forgetting the
memory forgets its record with it. An outcome that writes no memory (a duplicate) is
recorded in the registry instead (``registry`` keeps those rows). A forget also takes
every record whose answer names a forgotten memory (``names_any``): a duplicate's
``duplicate_of``, a conversation's other messages, a supersede's old version; a repeat
of such a key is then a new request.

A request body is kept only as a keyed hash: HMAC-SHA256 under a secret the database
creates once (``Registry.idempotency_secret``), so a fingerprint cannot be checked
against a guessed body (a short text, a weak password) without that secret. Records
written before kept a plain SHA-256 of the same message: they still match the same
body (``Idempotency.legacy``) until they age out, so a repeat within 24 h of an upgrade
replays as it would have, and a re-import of an old export still finds its lines.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from wontopos_mcp.errors import ConflictError, InvalidRequestError

KEY_FIELD = "Idempotency-Key"
WINDOW_US = 24 * 3600 * 1_000_000
RETRY_AFTER_MS = 500
_KEY = re.compile(r"[A-Za-z0-9._:-]{1,128}")


FINGERPRINT = "hmac-sha256:"  # how a keyed fingerprint begins


@dataclass(frozen=True)
class Idempotency:
    """A write's key and the fingerprint of its request body (same key + other body:
    422); ``legacy``: the plain digest older versions kept for the same body, compared
    with, never stored."""

    key: str
    fingerprint: str
    legacy: str | None = None

    @classmethod
    def of(cls, key: object, fingerprint: str, legacy: str | None = None) -> Idempotency:
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InvalidRequestError(
                f"{KEY_FIELD} must be 1-128 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'", field=KEY_FIELD
            )
        return cls(key, fingerprint, legacy)

    @classmethod
    def keyed(cls, key: object, secret: Callable[[], bytes], message: str) -> Idempotency:
        """The key (checked first: a bad one is 400 before anything is read), with
        ``message`` (what identifies the request body) hashed under the database's
        ``secret()``."""
        cls.of(key, "")
        data = message.encode("utf-8")
        keyed = FINGERPRINT + hmac.new(secret(), data, hashlib.sha256).hexdigest()
        return cls.of(key, keyed, hashlib.sha256(data).hexdigest())

    def matches(self, stored: str) -> bool:
        """Whether a kept fingerprint is this body's (a keyed one, or an older plain one)."""
        return hmac.compare_digest(stored, self.fingerprint) or (
            self.legacy is not None and not stored.startswith(FINGERPRINT) and hmac.compare_digest(stored, self.legacy)
        )


def answer_json(answer: Mapping[str, object]) -> str:
    """An answer as its idempotency record keeps it (``speaker_in_answer`` relies on it)."""
    return json.dumps(answer, ensure_ascii=False)


def speaker_in_answer(name: str | None) -> str:
    """How a speaker appears inside a kept answer (``answer_json``; never its first key):
    what a rename, merge or removal rewrites there, so no kept answer holds a name that
    ended. ``None`` (no speaker): the empty string."""
    return "" if name is None else ', "speaker": ' + json.dumps(name, ensure_ascii=False)


# Where a kept answer names memories other than its own: a conversation's ``results``, a
# batch's ``ids``, a supersede's ``superseded`` (a duplicate's ``duplicate_of`` is in
# ``results`` or in an answer that stored nothing, kept in the registry), as
# ``answer_json`` writes them.
_NAMING_OTHERS = ('"results": [', '"ids": [', '"superseded": "')
_FEW_IDS = 16  # up to this many forgotten memories, an answer is looked for by their ids
_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def answer_needles(memory_ids: Collection[str]) -> list[str]:
    """Texts one of which every kept answer naming one of ``memory_ids`` contains, for a
    storage filter to narrow the answers ``names_any`` then decides on: each id as a JSON
    string when they are few, else the keys under which an answer names other memories."""
    if len(memory_ids) <= _FEW_IDS:
        return [json.dumps(memory_id, ensure_ascii=False) for memory_id in sorted(memory_ids)]
    return list(_NAMING_OTHERS)


def names_any(answer_json: str, memory_ids: Collection[str]) -> bool:
    """Whether a kept answer names one of ``memory_ids`` (as any string of its JSON: ``id``,
    ``duplicate_of``, ``superseded``, ``ids``, ``results``). A forgotten memory's record
    goes, and so does every record whose answer names it, so that no file keeps its id."""
    return any(match.group(1) in memory_ids for match in _JSON_STRING.finditer(answer_json))


def replayed(idem: Idempotency, fingerprint: str, answer_json: str) -> dict[str, object]:
    """The first answer again, or 422 when the key came with another body."""
    if not idem.matches(fingerprint):
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
