"""Leases: exclusion across machines, built on an object store's conditional writes.

A lease is one small object. Whoever creates it (``create``: "only if absent") holds it;
the holder rewrites it every third of the TTL (``replace``: "only if it is still the
version I wrote") and deletes it when done. Nobody trusts anybody's clock: a waiter that
sees the *same* version of the object for longer than the TTL plus a margin, measured on
its own monotonic clock, concludes that the holder is gone (killed, cut off) and takes
the lease over, again only if the object is still that version. Every rewrite changes
the body (a counter), so a live holder always changes the version a waiter sees.

There is no fencing token: a holder that stalls past its TTL could still commit late.
So the holder stops trusting its lease a margin *before* the TTL ends (``Lease.valid``),
the caller checks it right before each commit, and the TTL stays far above the length of
one commit. ``LeaseBackend`` is what a store must offer (S3's ``If-None-Match``/``If-Match``
on PUT and DELETE, a DynamoDB condition expression, ...): ``object_leases`` has them.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from wontopos_mcp.errors import UnavailableError

log = logging.getLogger(__name__)


class LeaseBackend(Protocol):
    """Conditional operations on small named objects. A token identifies one version of
    an object (an ETag, a generation): ``None`` answers "the condition did not hold"."""

    def create(self, name: str, body: bytes) -> str | None:
        """Write ``name`` only if it does not exist; the new version's token."""
        ...

    def replace(self, name: str, token: str, body: bytes) -> str | None:
        """Overwrite ``name`` only if its current version is ``token``."""
        ...

    def delete(self, name: str, token: str) -> None:
        """Remove ``name`` if its current version is ``token`` (otherwise leave it)."""
        ...

    def read(self, name: str) -> tuple[str, bytes] | None:
        """(token, body) of the current version, or ``None`` when there is none."""
        ...


@dataclass(frozen=True)
class LeaseTiming:
    """``ttl_s``: how long an unrenewed lease stands; ``margin_s``: clock-rate and
    network slack on both sides of it; ``wait_s``: how long ``acquire`` waits for a busy
    lease (by default long enough to take over from a holder that died just now)."""

    ttl_s: float = 10.0
    margin_s: float = 2.0
    wait_s: float | None = None

    @classmethod
    def from_ttl_ms(cls, ttl_ms: int) -> LeaseTiming:
        ttl = ttl_ms / 1000
        return cls(ttl_s=ttl, margin_s=max(0.2, ttl / 5))

    @property
    def takeover_s(self) -> float:
        return self.ttl_s + self.margin_s

    @property
    def wait(self) -> float:
        return self.wait_s if self.wait_s is not None else 2 * self.ttl_s + self.margin_s

    @property
    def retry_after_ms(self) -> int:
        return int(self.ttl_s * 1000)


class LeaseBusy(UnavailableError):
    """Another process held the lease for longer than this call waits (503: retry)."""


class LeaseLost(UnavailableError):
    """This process's lease lapsed before it could commit (503: nothing was written by
    the refused commit; an idempotency key makes the client's retry safe)."""


@dataclass
class Lease:
    """One held lease; ``valid`` until a margin before its TTL runs out unrenewed."""

    name: str
    token: str
    renewed_at: float  # monotonic time the last successful write was sent
    timing: LeaseTiming
    lost: bool = False
    renewals: int = 0
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def valid(self) -> bool:
        return not self.lost and time.monotonic() < self.renewed_at + self.timing.ttl_s - self.timing.margin_s


class Leases:
    """Acquire, renew (in a background thread per lease) and release leases kept by
    ``backend``. ``mode`` is recorded in the lease's body, for whoever reads it."""

    def __init__(self, backend: LeaseBackend, timing: LeaseTiming | None = None, *, mode: str = "leased") -> None:
        self.backend = backend
        self.timing = timing or LeaseTiming()
        self.mode = mode
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def _body(self, renewals: int) -> bytes:
        return json.dumps(
            {"holder": self.holder, "mode": self.mode, "renewals": renewals, "ttl_ms": int(self.timing.ttl_s * 1000)}
        ).encode()

    def try_acquire(self, name: str) -> Lease | None:
        """The lease if it is free right now (one conditional create), else ``None``."""
        sent = time.monotonic()
        token = self.backend.create(name, self._body(0))
        return None if token is None else self._held(name, token, sent)

    def acquire(self, name: str, wait: float | None = None) -> Lease:
        """The lease, waiting up to ``wait`` seconds (default ``timing.wait``) for its
        holder to release it or to be gone for longer than the TTL plus the margin."""
        deadline = time.monotonic() + (self.timing.wait if wait is None else wait)
        seen: tuple[str, float] | None = None  # a version of the lease, and when we first saw it
        pause = 0.02
        while True:
            lease = self.try_acquire(name)
            if lease is not None:
                return lease
            now = time.monotonic()
            current = self.backend.read(name)
            if current is not None:
                if seen is None or seen[0] != current[0]:
                    seen = (current[0], now)
                elif now - seen[1] >= self.timing.takeover_s:
                    token = self.backend.replace(name, current[0], self._body(0))
                    if token is not None:
                        log.warning("lease %s taken over from a holder silent for %.1f s", name, now - seen[1])
                        return self._held(name, token, now)
                    seen = None
            if now >= deadline:
                raise LeaseBusy(
                    f"another replica is writing to this store; retry after {self.timing.retry_after_ms} ms",
                    retry_after_ms=self.timing.retry_after_ms,
                )
            time.sleep(min(pause * random.uniform(0.5, 1.5), max(0.0, deadline - now)))
            pause = min(pause * 1.5, 0.25)

    def _held(self, name: str, token: str, sent: float) -> Lease:
        lease = Lease(name, token, sent, self.timing)
        lease._thread = threading.Thread(target=self._renew, args=(lease,), name=f"lease-{name}", daemon=True)
        lease._thread.start()
        return lease

    def _renew(self, lease: Lease) -> None:
        """Rewrite the lease every third of the TTL until released; a failed condition
        means another process took it over (``lost``); a failed request is retried
        until the lease lapses on its own."""
        while not lease._stop.wait(self.timing.ttl_s / 3):
            sent = time.monotonic()
            try:
                token = self.backend.replace(lease.name, lease.token, self._body(lease.renewals + 1))
            except Exception:  # the store did not answer: try again; ``valid`` lapses meanwhile
                log.warning("lease %s: renewal failed", lease.name, exc_info=True)
                continue
            if token is None:
                lease.lost = True
                log.warning("lease %s was taken over by another process", lease.name)
                return
            lease.token, lease.renewed_at, lease.renewals = token, sent, lease.renewals + 1

    def release(self, lease: Lease) -> None:
        lease._stop.set()
        if lease._thread is not None and lease._thread is not threading.current_thread():
            lease._thread.join()
        if not lease.lost:
            try:
                self.backend.delete(lease.name, lease.token)
            except Exception:  # it lapses after the TTL anyway
                log.warning("lease %s: release failed", lease.name, exc_info=True)
        lease.lost = True

    def check(self, lease: Lease) -> None:
        """Raise ``LeaseLost`` unless ``lease`` is still safely held (before a commit)."""
        if not lease.valid():
            raise LeaseLost(
                "this replica lost its lease on the store before it could write; nothing was "
                f"written by this step: retry after {self.timing.retry_after_ms} ms",
                retry_after_ms=self.timing.retry_after_ms,
            )
