"""Write coordination: who may commit to a database, or to one store of it, now.

LanceDB lets any number of readers in, but our rules decide under exclusion (the speaker
limit, duplicates, the next sequence number), so writers take turns. How they take turns
depends on where the database lives, and ``coordinator_for`` chooses by its URI:

* a local directory (a ``file://`` URI arrives here as its absolute path):
  ``FileLockCoordinator``, a thread lock plus a file lock in the directory, so several
  processes can share one database;
* object storage: ``LeaseCoordinator``, leases kept in the bucket (``lease``,
  ``object_leases``). ``single`` (the default): the first write takes the database's
  lease for the process's lifetime, so a second writer is refused, and the server takes
  it at start (``claim``). ``leased``: every decide-then-commit operation holds its
  store's lease, and store creation and deletion, table creation and maintenance hold
  the database's, so replicas share one database; different stores proceed in parallel;
* anything else (``db://``, a store without a lease backend and one writer):
  ``InProcessCoordinator``, this process's threads only.

``hold(scope)`` takes a store's lock (``where`` = its key) or, without one, the database's;
with ``patience``, a writer waiting for a local lock asks every ``patience.seconds`` whether
to give up (a reindex holding the database: 503, not a wait as long as the reindex);
a store's is always taken before the database's, never after, so two threads or two
replicas cannot wait on each other. Every lock is re-entrant for the thread that holds it;
the thread lock of ``local`` is what ``Store`` opens and closes the database under.

Two narrower exclusions sit beside it, each a thread lock and, on a local directory, a
file lock of its own; both are taken before any write lock or without waiting inside one:

* ``maintenance()``: one maintainer of the tables at a time (a purge, whose index rebuild
  runs outside the write lock; a reindex; a writer's upkeep round, which asks without
  waiting and, when it is taken, leaves the round to the next commit), so their commits
  never race each other;
* ``compaction()``: held by a purge while it compacts the chunks table outside the write
  lock, and taken by every delete or update of that table (inside the write lock: the
  purge never waits for the write lock while it holds this one), so appends go on beside
  the compaction and a delete or an update waits until it is committed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from wontopos_mcp.errors import ConfigError
from wontopos_mcp.rules.locations import is_remote

from .lease import Lease, LeaseBackend, LeaseBusy, Leases, LeaseTiming

log = logging.getLogger(__name__)

LOCK_FILE = ".wontopos.lock"  # a local database's file lock
MAINTENANCE_FILE = ".wontopos.upkeep.lock"  # a local database's ``maintenance`` lock
COMPACTION_FILE = ".wontopos.compaction.lock"  # a local database's ``compaction`` lock
PRIVATE_DIR = 0o700  # a database directory made here (startup_checks or attach): nobody else may list or read it
DATABASE = "database"  # the database lease's name


@dataclass(frozen=True)
class Patience:
    """How a writer waits for a lock someone else holds: every ``seconds`` without it,
    ``give_up()`` is called, which raises to stop waiting (or returns to wait on)."""

    seconds: float
    give_up: Callable[[], None]


def _wait_for(acquire: Callable[[float], bool], patience: Patience | None) -> None:
    """``acquire(timeout)`` (``-1``: no bound) until it succeeds, asking ``patience``."""
    if patience is None:
        acquire(-1)
        return
    while not acquire(patience.seconds):
        patience.give_up()


class Coordinator(Protocol):
    def attach(self) -> None:
        """The database is being opened: take up coordination with other processes."""
        ...

    def claim(self) -> None:
        """At a server's start: take what this process needs to write for its lifetime
        now (``single``: the database), or raise ``ConfigError`` saying why it cannot."""
        ...

    def local(self) -> AbstractContextManager[Any]:
        """This process's threads only (re-entrant): opening and closing the database."""
        ...

    def hold(self, scope: str | None = None, patience: Patience | None = None) -> AbstractContextManager[None]:
        """Exclusive writing to the store ``where`` (or the whole database), across
        threads and (once attached) processes; re-entrant. ``patience``: how to wait
        (leases bound their own waits and ignore it)."""
        ...

    def check(self) -> None:
        """Right before a commit: raise (503) if this thread's exclusion has lapsed."""
        ...

    def try_hold(self) -> AbstractContextManager[bool]:
        """The database's exclusion if it is free now (``True``), else nothing (``False``);
        never waits. What tidying that no writer may be doing meanwhile needs."""
        ...

    def upkeep(self) -> AbstractContextManager[bool]:
        """Whether this process is the one to maintain the tables now (and holds what
        maintenance needs while the block runs)."""
        ...

    def maintenance(self, wait: bool = True) -> AbstractContextManager[bool]:
        """The maintenance exclusion (see the module): ``True`` once this thread holds it,
        in this process and, on a local directory, across processes (on object storage
        the database lease, which ``upkeep`` takes, keeps replicas apart); without
        ``wait``, ``False`` at once when someone else holds it. Re-entrant."""
        ...

    def compaction(self, wait: bool = True) -> AbstractContextManager[bool]:
        """The compaction exclusion (see the module), as ``maintenance`` holds its own."""
        ...

    def close(self) -> None:
        """Give up what this process holds (leases); it may attach again later."""
        ...


class SideLock:
    """A lock beside the write lock: a thread lock, then (once ``attach``ed to a path) a
    file lock, which counts per process, so the thread lock comes first. Re-entrant."""

    def __init__(self) -> None:
        self._thread = threading.RLock()
        self._file: Any = None

    def attach(self, path: str) -> None:
        from filelock import FileLock

        self._file = FileLock(path, thread_local=False)

    @contextmanager
    def held(self, wait: bool) -> Iterator[bool]:
        if not self._thread.acquire(blocking=wait):
            yield False
            return
        try:
            if self._file is None:
                yield True
                return
            with _file_held(self._file, -1 if wait else 0) as ours:
                yield ours
        finally:
            self._thread.release()


@contextmanager
def _file_held(file_lock: Any, timeout: float) -> Iterator[bool]:
    """Whether ``file_lock`` was taken within ``timeout`` (``-1``: no bound, ``0``: only if
    free now); held while the block runs."""
    from filelock import Timeout

    try:
        file_lock.acquire(timeout=timeout)
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        file_lock.release()


class InProcessCoordinator:
    """Writers of this process take turns; other processes are not seen."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._maintaining, self._compacting = SideLock(), SideLock()

    def attach(self) -> None:
        return None

    def claim(self) -> None:
        return None

    def local(self) -> threading.RLock:
        return self._lock

    @contextmanager
    def hold(self, scope: str | None = None, patience: Patience | None = None) -> Iterator[None]:
        _wait_for(lambda timeout: self._lock.acquire(timeout=timeout), patience)
        try:
            yield
        finally:
            self._lock.release()

    def check(self) -> None:
        return None

    @contextmanager
    def try_hold(self) -> Iterator[bool]:
        if not self._lock.acquire(blocking=False):
            yield False
            return
        try:
            yield True
        finally:
            self._lock.release()

    @contextmanager
    def upkeep(self) -> Iterator[bool]:
        yield True

    def maintenance(self, wait: bool = True) -> AbstractContextManager[bool]:
        return self._maintaining.held(wait)

    def compaction(self, wait: bool = True) -> AbstractContextManager[bool]:
        return self._compacting.held(wait)

    def close(self) -> None:
        return None


class FileLockCoordinator(InProcessCoordinator):
    """A thread lock, then a file lock in the database's directory (once it exists).
    One lock for every store: a local commit takes milliseconds."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory
        self._file_lock: Any = None

    def attach(self) -> None:
        from filelock import FileLock

        os.makedirs(self.directory, mode=PRIVATE_DIR, exist_ok=True)
        self._file_lock = FileLock(os.path.join(self.directory, LOCK_FILE), thread_local=False)
        self._maintaining.attach(os.path.join(self.directory, MAINTENANCE_FILE))
        self._compacting.attach(os.path.join(self.directory, COMPACTION_FILE))

    @contextmanager
    def hold(self, scope: str | None = None, patience: Patience | None = None) -> Iterator[None]:
        from filelock import Timeout

        def acquire(timeout: float) -> bool:
            try:
                self._file_lock.acquire(timeout=timeout)
            except Timeout:
                return False
            return True

        with super().hold(scope, patience):
            if self._file_lock is None:
                yield
                return
            _wait_for(acquire, patience)
            try:
                yield
            finally:
                self._file_lock.release()

    @contextmanager
    def try_hold(self) -> Iterator[bool]:
        with super().try_hold() as ours:
            if not ours or self._file_lock is None:
                yield ours
                return
            with _file_held(self._file_lock, 0) as got:
                yield got


def lease_name(scope: str | None) -> str:
    """The lease object's name: a store key may hold any character, its digest none."""
    return DATABASE if scope is None else "store-" + hashlib.sha256(scope.encode()).hexdigest()[:32]


class LeaseCoordinator(InProcessCoordinator):
    """Leases on the object store (``mode`` ``single`` or ``leased``, see the module)."""

    def __init__(self, make_backend: Callable[[], LeaseBackend], mode: str, timing: LeaseTiming) -> None:
        super().__init__()
        self.mode, self.timing = mode, timing
        self._make_backend = make_backend
        self._leases: Leases | None = None
        self._locks: dict[str, threading.RLock] = {}
        self._held: dict[str, tuple[Lease, int]] = {}  # name -> (lease, this process's depth)
        self._mine = threading.local()  # the lease names the current thread holds
        self._lifetime: Lease | None = None  # single: the database, held until close

    def leases(self) -> Leases:
        with self._lock:
            if self._leases is None:
                self._leases = Leases(self._make_backend(), self.timing, mode=self.mode)
            return self._leases

    def claim(self) -> None:
        leases = self.leases()
        if self.mode == "single":
            try:
                self._single()
            except LeaseBusy:
                raise ConfigError(_SECOND_WRITER) from None
        else:
            leases.release(leases.acquire(DATABASE))  # the store answers conditional writes

    def _single(self) -> Lease:
        """The database's lease for the process's lifetime (taken over after the TTL
        from a predecessor that died holding it)."""
        with self._lock:
            lease = self._lifetime
            if lease is not None and lease.valid():
                return lease
            leases = self.leases()
            if lease is not None:
                leases.release(lease)
            try:
                self._lifetime = leases.acquire(DATABASE, wait=self.timing.takeover_s + self.timing.margin_s)
            except LeaseBusy as exc:
                raise LeaseBusy(_SECOND_WRITER, retry_after_ms=exc.details["retry_after_ms"]) from None
            return self._lifetime

    def _names(self) -> list[str]:
        if not hasattr(self._mine, "names"):
            self._mine.names = []
        names: list[str] = self._mine.names
        return names

    def _lock_for(self, name: str) -> threading.RLock:
        with self._lock:
            return self._locks.setdefault(name, threading.RLock())

    @contextmanager
    def hold(self, scope: str | None = None, patience: Patience | None = None) -> Iterator[None]:
        if self.mode == "single":
            with self._lock:
                self._single()
                yield
            return
        name = lease_name(scope)
        with self._lock_for(name):
            self._enter(name, self.leases().acquire)
            try:
                yield
            finally:
                self._leave(name)

    def _enter(self, name: str, acquire: Callable[[str], Lease]) -> None:
        """Inside ``name``'s thread lock: take the lease unless this thread has it."""
        lease, depth = self._held.get(name, (None, 0))
        if lease is None:
            lease = acquire(name)
        self._held[name] = (lease, depth + 1)
        self._names().append(name)

    def _leave(self, name: str) -> None:
        self._names().pop()
        lease, depth = self._held[name]
        if depth > 1:
            self._held[name] = (lease, depth - 1)
            return
        del self._held[name]
        self.leases().release(lease)

    @contextmanager
    def try_hold(self) -> Iterator[bool]:
        """Never: nothing on object storage needs it (a local database's marks alone)."""
        yield False

    def check(self) -> None:
        if self.mode == "single":
            if self._lifetime is not None:
                self.leases().check(self._lifetime)
            return
        for name in self._names():
            self.leases().check(self._held[name][0])

    @contextmanager
    def upkeep(self) -> Iterator[bool]:
        """``single``: this process once it holds the database (its first write, or the
        server's claim at start; a process that only reads never waits for it).
        ``leased``: whoever gets the database lease without waiting; a replica that does
        not get it leaves the round to the holder."""
        if self.mode == "single":
            yield self._lifetime is not None and self._lifetime.valid()
            return
        if DATABASE in self._names():
            yield True
            return
        lock = self._lock_for(DATABASE)
        if not lock.acquire(blocking=False):
            yield False
            return
        try:
            lease = self.leases().try_acquire(DATABASE)
            if lease is None:
                yield False
                return
            self._held[DATABASE] = (lease, 1)
            self._names().append(DATABASE)
            try:
                yield True
            finally:
                self._leave(DATABASE)
        finally:
            lock.release()

    def close(self) -> None:
        """Release the lifetime lease (``single``); takes no lock, so a signal handler can
        call it while another thread is inside ``hold``. Store leases of writes still
        running are left to lapse: their commits may still be on the way."""
        lease, self._lifetime = self._lifetime, None
        if lease is not None and self._leases is not None:
            self._leases.release(lease)


_SECOND_WRITER = (
    "another process is writing this database (--writers single, the default on object storage, "
    "allows one); stop it, or start every replica with --writers leased"
)


def coordinator_for(
    uri: str,
    *,
    writers: str = "single",
    storage_options: dict[str, str] | None = None,
    timing: LeaseTiming | None = None,
) -> Coordinator:
    """The coordinator for a database URI (see the module). Cheap: a lease backend (and
    its SDK) is built on first use."""
    if not is_remote(uri):
        return FileLockCoordinator(uri)
    from urllib.parse import urlsplit

    from .object_leases import LEASED_SCHEMES

    if urlsplit(uri).scheme.lower() not in LEASED_SCHEMES:
        if writers == "leased":
            from .object_leases import backend_for

            backend_for(uri, storage_options or {})  # raises: no lease backend for this store
        return InProcessCoordinator()

    def backend() -> LeaseBackend:
        from .object_leases import backend_for

        return backend_for(uri, storage_options or {})

    return LeaseCoordinator(backend, writers, timing or LeaseTiming())
