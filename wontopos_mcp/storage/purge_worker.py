"""A large table's purge rewrite in a process of its own, at a lower CPU priority.

At a million memories a purge's compaction rewrites a data file of about 1.5 GB and its
index rebuilds take seconds of both cores; the writers it runs beside (embedding, then an
append) share those cores. Measured in one process (``bench/purge.py --sizes 1000000``), the
writes made during a purge took 3.9x their usual p99 although none waited for a lock: the
purge's threads (Lance's, not ours) simply took the CPU. A thread's priority cannot be
lowered from Python for threads a library starts, a process's can: so for a table of at
least ``PurgeTiming.apart_from_rows`` rows the parent keeps every lock and exclusion and
asks a child, started at ``NICENESS``, to do the heavy steps, one at a time, over a pipe
(JSON lines: a step, then its answer). The child opens the same table (the storage options
go over the pipe, never on a command line another user could read) and runs the very
functions of ``purge_steps`` the parent would have run itself.

Nothing the child learns reaches a log but an exception's type and message, sent back and
raised in the parent, where the log filter applies; its stdout is the pipe (never the
server's stdout: a stdio server's stdout is the protocol), its stderr the parent's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import IO, Any

from wontopos_mcp.errors import StorageError

NICENESS = 10  # the child's: a tenth of a core's share against a busy writer, so its steps go on
_MESSAGE_MAX = 500  # characters of a child's exception message sent back


class PurgeWorkerError(StorageError):
    """The child could not do a step (its exception's type and message), or ended: the
    purge is skipped, its markers stay, and the next tick tries again."""


class ApartRewrite:
    """The parent's end: the child started by ``start`` (or on ``__enter__``) and ended by
    ``stop`` (``__exit__``); each step method answers when the child has done it."""

    def __init__(self, uri: str, storage_options: dict[str, str], table: str) -> None:
        self._opening = {"uri": uri, "storage_options": storage_options, "table": table, "niceness": NICENESS}
        self._child: subprocess.Popen[str] | None = None

    def __enter__(self) -> ApartRewrite:
        if self._child is None:
            self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the child and have it open the table (``PurgeWorkerError``, ``OSError``:
        it did not)."""
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        self._child = subprocess.Popen(
            [sys.executable, "-m", "wontopos_mcp.storage.purge_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,  # a terminal's Ctrl-C is the parent's to handle; the child ends with its input
        )
        try:
            self._ask(self._opening)
        except PurgeWorkerError:
            self.stop()
            raise

    def stop(self) -> None:
        """End the child: at the end of its input, else killed after 30 s."""
        child, self._child = self._child, None
        if child is None:
            return
        assert child.stdin is not None
        try:
            child.stdin.close()  # the child's loop ends at the end of its input
            child.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            child.kill()
            child.wait()
        finally:
            if child.stdout is not None:
                child.stdout.close()

    def compact(self) -> bool:
        """``purge_steps.compact_beside_writers`` in the child: whether it is done."""
        return bool(self._ask({"step": "compact"})["done"])

    def indexes(self, stale: bool) -> None:
        """``purge_steps.rebuild_indexes`` in the child."""
        self._ask({"step": "indexes", "stale": stale})

    def vectors(self) -> int:
        """``purge_steps.prune_vectors`` in the child: how many indexes it merged."""
        return int(self._ask({"step": "vectors"})["merged"])

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        child = self._child
        if child is None or child.stdin is None or child.stdout is None:
            raise PurgeWorkerError("the purge worker is not running")
        try:
            child.stdin.write(json.dumps(message) + "\n")
            child.stdin.flush()
            line = child.stdout.readline()
        except OSError as exc:
            raise PurgeWorkerError(f"the purge worker's pipe broke ({type(exc).__name__})") from None
        if not line:
            raise PurgeWorkerError(f"the purge worker ended (exit status {child.wait()})")
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise PurgeWorkerError(f"the purge worker's {message.get('step', 'start')} failed: {answer.get('error')}")
        return answer


def _serve(requests: IO[str], answers: IO[str]) -> None:
    """The child's end: the opening line, then one step per line until the input ends."""
    from .lancedb_import import import_lancedb
    from .purge_steps import compact_beside_writers, prune_vectors, rebuild_indexes

    table: Any = None
    for line in requests:
        request = json.loads(line)
        try:
            if table is None:
                if hasattr(os, "nice"):
                    os.nice(int(request["niceness"]))
                db = import_lancedb().connect(request["uri"], storage_options=request["storage_options"] or None)
                table = db.open_table(request["table"])
                answer: dict[str, Any] = {}
            elif request["step"] == "compact":
                answer = {"done": compact_beside_writers(table)}
            elif request["step"] == "indexes":
                rebuild_indexes(table, bool(request["stale"]))
                answer = {}
            elif request["step"] == "vectors":
                answer = {"merged": prune_vectors(table)}
            else:
                raise ValueError(f"no step {request['step']!r}")
        except Exception as exc:  # noqa: BLE001 - sent back: the parent raises it, through its log filter
            answers.write(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:_MESSAGE_MAX]}"}) + "\n")
        else:
            answers.write(json.dumps({"ok": True, **answer}) + "\n")
        answers.flush()


if __name__ == "__main__":
    _serve(sys.stdin, sys.stdout)
