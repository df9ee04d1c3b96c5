"""Write coordination: who may commit to a database now.

LanceDB lets any number of readers in, but our rules decide under exclusion (the speaker
limit, duplicates, the next sequence number), so writers take turns. How they take turns
depends on where the database lives, and ``coordinator_for`` chooses by its URI:

* a local directory: ``FileLockCoordinator``, a thread lock plus a file lock in the
  directory, so several processes can share one database;
* any other URI (object storage): ``InProcessCoordinator``, the thread lock alone, as
  today; a lease kept in the bucket can take its place behind the same interface.

Both locks are re-entrant for the thread that holds them; the thread lock is also what
``Store`` opens and closes the database under (see ``Coordinator.local``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

LOCK_FILE = ".wontopos.lock"  # a local database's file lock


class Coordinator(Protocol):
    def attach(self) -> None:
        """The database is being opened: take up coordination with other processes."""
        ...

    def local(self) -> AbstractContextManager[Any]:
        """This process's threads only (re-entrant): opening and closing the database."""
        ...

    def hold(self) -> AbstractContextManager[None]:
        """Exclusive writing, across threads and (once attached) processes; re-entrant."""
        ...


class InProcessCoordinator:
    """Writers of this process take turns; other processes are not seen."""

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def attach(self) -> None:
        return None

    def local(self) -> threading.RLock:
        return self._lock

    @contextmanager
    def hold(self) -> Iterator[None]:
        with self._lock:
            yield


class FileLockCoordinator(InProcessCoordinator):
    """A thread lock, then a file lock in the database's directory (once it exists)."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory
        self._file_lock: Any = None

    def attach(self) -> None:
        from filelock import FileLock

        os.makedirs(self.directory, exist_ok=True)
        self._file_lock = FileLock(os.path.join(self.directory, LOCK_FILE), thread_local=False)

    @contextmanager
    def hold(self) -> Iterator[None]:
        with self._lock:
            if self._file_lock is None:
                yield
                return
            with self._file_lock:
                yield


def is_remote(uri: str) -> bool:
    return "://" in uri and not uri.startswith("file://")


def coordinator_for(uri: str) -> Coordinator:
    return InProcessCoordinator() if is_remote(uri) else FileLockCoordinator(uri)
