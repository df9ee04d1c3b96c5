"""The human commands' way to the shared engine: :class:`EngineClient` has the methods
the commands call on ``MemoryService``, each one request of the command line's protocol
(:mod:`cli.wire`) to the engine serving the command's database and settings, so a
command answers in the time of a request, not of a model load.

:func:`engine_for` finds that engine as a stdio relay does (the same key, the same
files: :mod:`cli.engines`), waits for one being started, and starts one when asked to (the
hooks); :func:`start_engine_later` starts one in the background for the commands to come.
``engine_for`` gives ``None`` where the command is to run in its own process instead: no
engine running, ``--engine inprocess``, no local sockets,
an engine that cannot be reached or started (a setting or a database it refuses, said
again by the command in process, exactly as before), or one that does not speak this
protocol.

A refusal comes back as the exception the engine raised (same class, message, fields and
fixes), so a command prints exactly what it prints in process. A call answered 503 while
the model loads is asked again until ``MODEL_WAIT`` seconds have passed, as an in-process
command waits that long. When the engine goes before it answers (killed, stopped), the
call raises :class:`UnavailableError` saying so: the command prints it as its one line
and exits 1; every write the engine acknowledged before was committed.

The standard library, ``errors``, ``config`` and the engines' bookkeeping only: no MCP
SDK, LanceDB or model in a command's process.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from wontopos_mcp.config import Settings
from wontopos_mcp.errors import ConfigError, UnavailableError
from wontopos_mcp.version import __version__

from . import engines, wire
from .exits import EXIT_BAD_SETTING

if TYPE_CHECKING:
    from wontopos_mcp.engine.service import MemoryService
    from wontopos_mcp.rules import answers

__all__ = ["ENGINE_LOST", "MODEL_WAIT", "EngineClient", "engine_for"]

log = logging.getLogger(__name__)

MODEL_WAIT = 180.0
"""Seconds a command waits for a model still loading in the engine (the first run of a
command that needs the model may convert it), as a command in process waits for its own."""

ENGINE_LOST = (
    "the shared engine stopped before answering; what this command was writing may or may not have "
    "been stored (check before repeating it; an import run again stores only what is missing); "
    "the next command starts a new engine"
)
_ATTEMPTS = 3  # connections an engine on its way out may close before greeting


class _Gone(Exception):
    """The connection ended before the engine greeted it."""


class _Foreign(Exception):
    """The engine answered the greeting, but not in this protocol."""


class EngineClient:
    """One connection to the shared engine; the methods of ``MemoryService`` the human
    commands call, by the same names and arguments, each one request."""

    def __init__(self, sock: socket.socket, *, model_wait: float = MODEL_WAIT) -> None:
        """Greet the engine on ``sock`` (:class:`_Gone` when it closes first)."""
        self._sock = sock
        self._answers = sock.makefile("rb")
        self._model_wait = model_wait
        try:
            sock.sendall(wire.hello(__version__))
            first = self._answers.readline()
        except OSError:
            first = b""
        if not first:
            self.close()
            raise _Gone
        try:
            greeting = json.loads(first)
        except ValueError:
            greeting = None
        if not isinstance(greeting, dict) or "hello" not in greeting:
            self.close()
            raise _Foreign
        self.pid: int | None = greeting["hello"].get("pid")

    # -- the connection ------------------------------------------------------------------------

    def close(self) -> None:
        self._answers.close()
        self._sock.close()

    def _call(self, op: str, args: dict[str, Any], report: wire.Report | None = None) -> Any:
        """The engine's answer to ``op``; its refusal raised. A 503 of a model still loading
        is asked again until :data:`MODEL_WAIT` seconds have passed."""
        until = time.monotonic() + self._model_wait
        while True:
            last = self._exchange(op, args, report)
            if "answer" in last:
                return last["answer"]
            refusal = wire.raised(last)
            wait = refusal.details.get("retry_after_ms")
            loading = isinstance(refusal, UnavailableError) and "model" not in refusal.details
            if not (loading and isinstance(wait, int) and time.monotonic() + wait / 1000 < until):
                raise refusal
            time.sleep(wait / 1000)

    def _exchange(self, op: str, args: dict[str, Any], report: wire.Report | None) -> dict[str, Any]:
        try:
            self._sock.sendall(wire.line({"op": op, "args": args}))
            for raw in self._answers:
                message = json.loads(raw)
                if "progress" in message:
                    if report is not None:
                        report.progress(*message["progress"])
                elif "say" in message:
                    if report is not None:
                        report.said(message["say"])
                else:
                    return cast(dict[str, Any], message)
        except (OSError, ValueError):
            pass  # a reset, or a line cut short: the engine went
        raise UnavailableError(ENGINE_LOST, retry_after_ms=1000)

    # -- what MemoryService does in process -----------------------------------------------------

    def start(self) -> None:
        """Nothing: the engine opened its database and started its model when it started."""

    def open_or_refuse(self) -> None:
        """Nothing: the engine opened its database before it accepted."""

    def check_model(self, model_id: str) -> None:
        """Nothing: the engine serves one model (its key names it) and checked it at start."""

    def stores_list(self) -> answers.StoresListAnswer:
        return cast("answers.StoresListAnswer", self._call("stores_list", {}))

    def store_create(self, user_id: Any = None) -> answers.StoreCreateAnswer:
        return cast("answers.StoreCreateAnswer", self._call("store_create", {"user_id": user_id}))

    def store_delete(self, user_id: Any) -> answers.StoreDeleteAnswer:
        return cast("answers.StoreDeleteAnswer", self._call("store_delete", {"user_id": user_id}))

    def speakers_list(self, user_id: Any = None) -> answers.SpeakersListAnswer:
        return cast("answers.SpeakersListAnswer", self._call("speakers_list", {"user_id": user_id}))

    def speaker_register(self, speaker: Any, user_id: Any = None) -> answers.SpeakerRegisterAnswer:
        args = {"speaker": speaker, "user_id": user_id}
        return cast("answers.SpeakerRegisterAnswer", self._call("speaker_register", args))

    def speaker_remove(self, speaker: Any, user_id: Any = None) -> answers.SpeakerRemoveAnswer:
        args = {"speaker": speaker, "user_id": user_id}
        return cast("answers.SpeakerRemoveAnswer", self._call("speaker_remove", args))

    def speaker_rename(self, speaker: Any, new_name: Any, user_id: Any = None) -> answers.SpeakerRenameAnswer:
        args = {"speaker": speaker, "new_name": new_name, "user_id": user_id}
        return cast("answers.SpeakerRenameAnswer", self._call("speaker_rename", args))

    def speaker_merge(
        self, speaker: Any, into: Any, confirm_records: Any = None, user_id: Any = None
    ) -> answers.SpeakerMergeAnswer:
        args = {"speaker": speaker, "into": into, "confirm_records": confirm_records, "user_id": user_id}
        return cast("answers.SpeakerMergeAnswer", self._call("speaker_merge", args))

    def memory_add(
        self,
        content: Any,
        speaker: Any = None,
        category: Any = None,
        event_date: Any = None,
        conversation_id: Any = None,
        user_id: Any = None,
    ) -> answers.MemoryAddAnswer | answers.MemoryDuplicateAnswer:
        args = {"content": content, "speaker": speaker, "category": category, "event_date": event_date,
                "conversation_id": conversation_id, "user_id": user_id}  # fmt: skip
        return cast("answers.MemoryAddAnswer | answers.MemoryDuplicateAnswer", self._call("memory_add", args))

    def memory_search(
        self, query: Any, speaker: Any = None, limit: Any = 10, user_id: Any = None
    ) -> answers.MemorySearchAnswer:
        args = {"query": query, "speaker": speaker, "limit": limit, "user_id": user_id}
        return cast("answers.MemorySearchAnswer", self._call("memory_search", args))

    def memory_list(
        self, limit: Any = 100, cursor: Any = None, user_id: Any = None, speaker: Any = None
    ) -> answers.MemoryListAnswer:
        args = {"limit": limit, "cursor": cursor, "user_id": user_id, "speaker": speaker}
        return cast("answers.MemoryListAnswer", self._call("memory_list", args))

    def memory_get(self, memory_id: Any, user_id: Any = None) -> answers.MemoryGetAnswer:
        return cast("answers.MemoryGetAnswer", self._call("memory_get", {"memory_id": memory_id, "user_id": user_id}))

    def memory_forget(
        self, memory_id: Any = None, speaker: Any = None, confirm_records: Any = None, user_id: Any = None
    ) -> answers.MemoryForgetAnswer:
        args = {"memory_id": memory_id, "speaker": speaker, "confirm_records": confirm_records, "user_id": user_id}
        return cast("answers.MemoryForgetAnswer", self._call("memory_forget", args))

    def by_speaker(self, speaker: Any, limit: Any = 20, user_id: Any = None) -> answers.BySpeakerAnswer:
        args = {"speaker": speaker, "limit": limit, "user_id": user_id}
        return cast("answers.BySpeakerAnswer", self._call("by_speaker", args))

    def stats(self, user_id: Any = None) -> answers.StatsAnswer:
        return cast("answers.StatsAnswer", self._call("stats", {"user_id": user_id}))

    def revisions(self, include: Any = None, limit: Any = 20, user_id: Any = None) -> answers.RevisionsAnswer:
        args = {"include": include, "limit": limit, "user_id": user_id}
        return cast("answers.RevisionsAnswer", self._call("revisions", args))

    # -- the imports: the engine reads the file --------------------------------------------------

    def import_lines(self, path: str, user_id: str | None, *, batch: int, report: wire.Report) -> dict[str, Any]:
        """``importing.import_lines`` in the engine, on the JSON Lines file at ``path``
        (absolute): its summary."""
        args = {"path": path, "user_id": user_id, "batch": batch}
        return cast(dict[str, Any], self._call("import_lines", args, report))

    def import_export(
        self,
        path: str,
        options: dict[str, Any],
        user_id: str | None,
        *,
        progress: Callable[[int, int, Counter[str]], None],
    ) -> answers.ImportSummaryAnswer:
        """``MemoryService.import_conversations`` in the engine, on the export at ``path``
        (absolute), with ``options`` as ``import_options`` takes them."""

        class Progress:
            def said(self, text: str) -> None:
                """Nothing: a conversation import says all it says in its summary."""

            def progress(self, *values: Any) -> None:
                done, total, counts = values
                progress(done, total, Counter(counts))

        args = {"path": path, "options": options, "user_id": user_id}
        return cast("answers.ImportSummaryAnswer", self._call("import_conversations", args, Progress()))


def _place(settings: Settings) -> engines.Place | None:
    """Where the shared engine for ``settings`` is; ``None`` where commands run in their own
    process (``--engine inprocess``, no local sockets)."""
    if settings.engine != "shared" or not engines.supported():
        return None
    return engines.place_for(settings, __version__)


def engine_for(settings: Settings, *, start: bool, model_wait: float = MODEL_WAIT) -> EngineClient | None:
    """The shared engine serving ``settings``, greeted (started first when none runs and
    ``start``), waiting up to ``model_wait`` seconds for a model still loading (a hook waits
    less than a command); ``None``: the command runs in its own process (see the module's docstring).
    An engine that stopped on a setting or a database is left to the command in process to
    say why, as it says it today; any other failure to reach one is logged first."""
    try:
        place = _place(settings)
    except (ConfigError, OSError) as exc:
        log.warning("running in this process: %s", exc)
        return None
    if place is None:
        return None
    for _ in range(_ATTEMPTS):
        try:
            if start:
                engines.reap()
                command, env = engines.spawn_command(), engines.engine_environment(settings)
                sock: socket.socket | None = engines.connect_or_start(place, command, env)
            else:
                sock = engines.connect_or_wait(place)
        except engines.EngineFailed as exc:
            if exc.code != EXIT_BAD_SETTING:
                log.warning("running in this process: %s", exc)
            return None
        except (ConfigError, OSError) as exc:
            log.warning("running in this process: %s", exc)
            return None
        if sock is None:
            return None
        try:
            return EngineClient(sock, model_wait=model_wait)
        except _Foreign:
            return None
        except _Gone:
            continue  # an engine on its way out: the next attempt starts (or finds) another
    return None


def start_engine_later(settings: Settings) -> None:
    """Start the shared engine for ``settings`` in the background, not waiting for it: a
    command that needed the model and found no engine ran in its own process (as fast as
    it ever was) and leaves the engine loading the model for the next command or session."""
    try:
        place = _place(settings)
        if place is not None:
            engines.start_in_background(place, engines.spawn_command(), engines.engine_environment(settings))
    except (ConfigError, OSError) as exc:
        log.warning("no engine started for the next command: %s", exc)


if TYPE_CHECKING:
    Service: TypeAlias = MemoryService | EngineClient
    """What a human command works on: the service in process, or the engine's client."""
