"""Claude Code's hooks: ``wontopos-mcp hook session-start|prompt|capture``, so a coding
agent recalls and captures without the model deciding to.

Claude Code runs a hook's command with the event's JSON on stdin (its hooks reference,
https://code.claude.com/docs/en/hooks, "Hook input"): every event carries
``session_id``, ``transcript_path`` (the session's ``.jsonl``), ``cwd`` and
``hook_event_name``; ``SessionStart`` adds ``source`` (``startup``, ``resume``,
``clear``, ``compact``), ``UserPromptSubmit`` the ``prompt``, ``Stop``
``stop_hook_active``, ``PreCompact`` ``trigger`` and ``custom_instructions``,
``SessionEnd`` ``reason``. Only the fields named here are read; others are ignored.

What a hook prints becomes context: "exit code 0: success ... except for
``UserPromptSubmit`` and ``SessionStart``, where stdout is added to the context" (the same
page, "Simple: Exit Code"); JSON with ``hookSpecificOutput.additionalContext`` is the other
way, and plain text is the simpler of the two, so that is what these print. Exit code 2
would block (for ``UserPromptSubmit``, erase the person's prompt), and any other code
shows an error: every failure here (stdin that is not the event's JSON, no database, an
engine that cannot be reached or does not answer in time, a refusal) is one line on stderr
and exit code 0, stdout empty. Claude Code may leave stdin open after the JSON, so it is
read until one JSON object is complete, not until the end of input.

- ``session-start`` prints the store's people and its latest memories (newest first, at
  most :data:`SESSION_START_CHARS`); nothing for a store with neither.
- ``prompt`` searches the store with the person's prompt and prints the best memories,
  each labelled by who said it (at most :data:`PROMPT_CHARS`); nothing when nothing is found.
- ``capture`` (for ``Stop``, ``PreCompact`` and ``SessionEnd``) imports ``transcript_path``
  as ``import --format claude-code`` does: the import keys make it store only the turns not
  imported before, so it can run after every answer. Its stdout stays empty.

Each goes through the shared engine, as the human commands do (:func:`client.engine_for`):
the engine holds the model, so a hook answers in the time of a request. Whether a hook
waits for an engine to start is decided per hook: every hook starts one when none runs
(``session-start`` is where a session's engine starts, before the first prompt), but
``prompt`` waits only :data:`PROMPT_MODEL_WAIT` seconds for a model still loading (the
person is waiting for the answer; the next prompt finds the model ready), ``capture`` up to
:data:`CAPTURE_MODEL_WAIT` (under Claude Code's 60 s default timeout; what it misses, the
next capture stores), and ``session-start`` needs no model. ``--engine inprocess`` runs a
hook in this process, at the cost of its own model load.

No log line or stderr line holds a prompt's or a memory's text.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from wontopos_mcp.errors import ConfigError, UnavailableError, WontoposError
from wontopos_mcp.rules.budget import fit
from wontopos_mcp.rules.conversation import speaker_label
from wontopos_mcp.rules.validation import MAX_QUERY_CHARS

if TYPE_CHECKING:
    from wontopos_mcp.config import Settings

    from .client import Service

__all__ = [
    "CAPTURE_MODEL_WAIT",
    "HOOKS",
    "PROMPT_CHARS",
    "PROMPT_MODEL_WAIT",
    "SESSION_START_CHARS",
    "is_hook",
    "never_blocking",
    "run_hook",
]

log = logging.getLogger(__name__)

HOOKS = ("session-start", "prompt", "capture")
SESSION_START_CHARS = 4000
PROMPT_CHARS = 2000
PROMPT_MODEL_WAIT = 3.0
"""Seconds ``prompt`` waits for a model still loading (an engine just started)."""
CAPTURE_MODEL_WAIT = 45.0
"""Seconds ``capture`` waits for a model still loading."""
# Seconds each hook waits for one message of the engine (an answer, or an import's
# progress) before it gives up: an engine that hangs never holds the session.
_ANSWER_WAIT = {"session-start": 10.0, "prompt": 5.0, "capture": CAPTURE_MODEL_WAIT + 5.0}
_STDIN_WAIT = 5.0  # seconds for the event's JSON to arrive
_STDIN_LIMIT = 16 << 20  # bytes: a prompt may be a long paste, not more
_PROMPT_RESULTS = 10
_SESSION_MEMORIES = 20  # revisions' largest page
_LINE_CHARS = {"session-start": 400, "prompt": 700}  # a long memory (an assistant's answer) is cut


class HookFailed(Exception):
    """Why a hook did nothing: its one line on stderr."""


def run_hook(
    name: str,
    args: Mapping[str, Any],
    settings: Settings,
    *,
    service: Service | None = None,
    stdin: IO[bytes] | None = None,
    out: IO[str] | None = None,
) -> int:
    """Run the hook ``name`` on the event read from ``stdin``; its context goes to ``out``.
    Always 0 (see the module's docstring). ``service`` (tests) replaces the engine's client."""
    out = sys.stdout if out is None else out
    try:
        event = read_event(sys.stdin.buffer if stdin is None else stdin)
        text = _HOOKS[name](event, args.get("user_id"), settings, service)
    except HookFailed as exc:
        _say(name, str(exc))
        return 0
    except WontoposError as exc:
        from wontopos_mcp.verbs import speak

        _say(name, f"{speak(exc, 'cli').message} ({exc.status} {exc.type})")
        return 0
    except OSError as exc:  # a file, a socket: its reason, never a text of the store
        _say(name, f"{exc.strerror or type(exc).__name__}{': ' + str(exc.filename) if exc.filename else ''}")
        return 0
    if text:
        out.write(text + "\n")
        out.flush()
    return 0


def _say(name: str, line: str) -> None:
    print(f"wontopos-mcp: hook {name}: {line}", file=sys.stderr, flush=True)


# -- the event ---------------------------------------------------------------------------------


def read_event(stream: IO[bytes], *, wait: float = _STDIN_WAIT) -> dict[str, Any]:
    """The hook's JSON object from ``stream``, read until it is complete (the writer may
    keep the stream open after it), its end, or ``wait`` seconds."""
    data = b""
    deadline = time.monotonic() + wait
    while True:
        chunk = _read_some(stream, deadline)
        data += chunk
        event = _complete(data)
        if event is not None:
            return event
        if not chunk:
            what = "nothing" if not data.strip() else "no complete JSON object"
            raise HookFailed(f"stdin held {what}; expected the hook's JSON as Claude Code sends it")
        if len(data) > _STDIN_LIMIT:
            raise HookFailed(f"stdin is over {_STDIN_LIMIT >> 20} MiB; expected the hook's JSON")


def _read_some(stream: IO[bytes], deadline: float) -> bytes:
    """What ``stream`` has now (waiting until ``deadline``); ``b""`` at its end."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # not a file (a test's BytesIO): it holds everything already
        return stream.read()
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([fd], [], [], left)[0]:
        raise HookFailed(f"no complete JSON on stdin within {_STDIN_WAIT:.0f} s")
    return os.read(fd, 1 << 16)


def _complete(data: bytes) -> dict[str, Any] | None:
    """The JSON object ``data`` holds, once it is whole; refused when it is not an object."""
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if not text:
        return None
    try:
        event, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return None  # not whole yet (or not JSON: said when the input ends)
    if not isinstance(event, dict):
        raise HookFailed(f"stdin holds a JSON {type(event).__name__}, not the hook's JSON object")
    return event


def _field(event: Mapping[str, Any], name: str) -> str | None:
    value = event.get(name)
    if value is not None and not isinstance(value, str):
        raise HookFailed(f"the hook's JSON has a {name} that is not a string")
    return value


# -- the engine ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _engine(name: str, settings: Settings, service: Service | None, *, model_wait: float) -> Iterator[Service]:
    """The service a hook asks: the given one (tests), the shared engine (started when
    none runs), or with ``--engine inprocess`` this process's own; closed after."""
    if service is not None:
        yield service
        return
    socket.setdefaulttimeout(_ANSWER_WAIT[name])  # every socket of this short process: one bound per message
    from .client import ENGINE_LOST, engine_for

    client = engine_for(settings, start=True, model_wait=model_wait)
    if client is None:
        if settings.engine == "shared":
            raise HookFailed(
                f"no shared engine could be reached or started for {settings.db} (wontopos-mcp engine status)"
            )
        from wontopos_mcp.engine.service import MemoryService

        own = MemoryService.open(settings, model_wait=model_wait)
        try:
            own.open_or_refuse()
            yield own
        finally:
            own.close()
        return
    try:
        yield client
    except UnavailableError as exc:
        if exc.message == ENGINE_LOST:  # gone, or silent past the bound (a socket timeout)
            raise HookFailed(
                f"the shared engine stopped or did not answer within {_ANSWER_WAIT[name]:.0f} s; "
                f"nothing {_WOULD[name]} this time"
            ) from None
        if "retry_after_ms" in exc.details and "model" not in exc.details:
            loading = "the shared engine is still loading its model"
            raise HookFailed(f"{loading}; nothing {_WOULD[name]} this time") from None
        raise
    finally:
        client.close()


_WOULD = {"session-start": "recalled", "prompt": "recalled for this prompt", "capture": "captured"}


def _database_exists(settings: Settings) -> bool:
    """Whether there is a database to recall from (a recall never creates one)."""
    if "://" in settings.db:
        return True  # object storage: the engine says
    return os.path.isdir(settings.db)


def _store_missing(exc: WontoposError) -> bool:
    """A refusal that only says the store does not exist yet: nothing to recall."""
    return exc.status == 404 and exc.field == "user_id"


# -- session-start ---------------------------------------------------------------------------------


def _session_start(event: Mapping[str, Any], user_id: str | None, settings: Settings, given: Service | None) -> str:
    if given is None and not _database_exists(settings):
        return ""
    with _engine("session-start", settings, given, model_wait=0.0) as service:
        try:
            people = service.speakers_list(user_id=user_id)
            latest = service.revisions(include="unrevised", limit=_SESSION_MEMORIES, user_id=user_id)
        except WontoposError as exc:
            if _store_missing(exc):
                return ""
            raise
    memories = latest.get("memories", [])
    if not people["speakers"] and not memories:
        return ""
    store, total = people["user_id"], latest["total"]
    head = [
        f'Long-term memory (wontopos-mcp, store "{store}"): {total:,} memor{"y" if total == 1 else "ies"} from '
        "earlier conversations. Before answering what may depend on them, search it (memory_search, "
        "memory_recall); store what is worth keeping (memory_add).",
    ]
    if people["speakers"]:
        listed = ", ".join(f"{s['speaker']} ({s['memories']})" for s in people["speakers"])
        head.append(f"People registered (memories each): {listed}. [me] is you, the assistant.")
    else:
        head.append("No people registered yet. [me] is you, the assistant.")
    head.append("Latest memories, newest first:")
    return _block(head, [_memory_line(m, _LINE_CHARS["session-start"]) for m in memories], SESSION_START_CHARS)


# -- prompt ------------------------------------------------------------------------------------------


def _prompt(event: Mapping[str, Any], user_id: str | None, settings: Settings, given: Service | None) -> str:
    prompt = (_field(event, "prompt") or "").strip()
    if not prompt or (given is None and not _database_exists(settings)):
        return ""
    with _engine("prompt", settings, given, model_wait=PROMPT_MODEL_WAIT) as service:
        try:
            found = service.memory_search(prompt[:MAX_QUERY_CHARS], limit=_PROMPT_RESULTS, user_id=user_id)
        except WontoposError as exc:
            if _store_missing(exc):
                return ""
            raise
    memories = found["memories"]
    if not memories:
        return ""
    head = [
        f'From the long-term memory (wontopos-mcp, store "{found["user_id"]}"), what may bear on this prompt, '
        "best first ([me] is you, the assistant; memory_search finds more):"
    ]
    return _block(head, [_memory_line(m, _LINE_CHARS["prompt"]) for m in memories], PROMPT_CHARS)


# -- capture -----------------------------------------------------------------------------------------


def _capture(event: Mapping[str, Any], user_id: str | None, settings: Settings, given: Service | None) -> str:
    path = _field(event, "transcript_path")
    if not path:
        raise HookFailed("the hook's JSON names no transcript_path")
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(path):
        raise HookFailed(f"no transcript at {path}")
    options = {"format": "claude-code", "local_zone": "UTC"}
    with _engine("capture", settings, given, model_wait=CAPTURE_MODEL_WAIT) as service:
        summary = _import(service, path, options, user_id)
    log.info(
        "hook capture: %s stored, %s already imported, %s duplicates",
        summary["stored"], summary["already_imported"], summary["duplicates"],
    )  # fmt: skip
    return ""


def _import(service: Service, path: str, options: dict[str, Any], user_id: str | None) -> Any:
    """The transcript imported by the engine (which reads the file), or in this process."""
    from .client import EngineClient

    if isinstance(service, EngineClient):
        return service.import_export(path, options, user_id, progress=lambda *_: None)
    from .conversations import import_path

    try:
        return import_path(service, path, options, user_id)
    except ConfigError as exc:
        raise HookFailed(str(exc)) from None


_HOOKS: dict[str, Callable[[Mapping[str, Any], str | None, Settings, Service | None], str]] = {
    "session-start": _session_start,
    "prompt": _prompt,
    "capture": _capture,
}


# -- what is printed -----------------------------------------------------------------------------------


def _memory_line(memory: Mapping[str, Any], most: int) -> str:
    """``- 2025-06-01 [Bob] text``: when it happened (else when stored), who said it, the
    text on one line, cut at ``most`` characters."""
    when = str(memory.get("event_date") or memory["created_at"])[:10]
    text = " ".join(str(memory["content"]).split())
    line = f"- {when} {speaker_label(memory)}{text}"
    return line if len(line) <= most else line[: most - 1] + "…"


def _block(head: Sequence[str], lines: Sequence[str], budget: int) -> str:
    """``head`` then as many ``lines`` as fit, best first, the whole within ``budget``
    characters (the first line cut to fit when even it does not)."""
    top = "\n".join(head)
    left = budget - len(top)
    kept, _ = fit(lines, lambda line: len(line) + 1, left, at_least_one=False)
    if not kept and lines and left > 2:
        kept = [lines[0][: left - 2] + "…"]
    return "\n".join([top, *kept])[:budget]


# -- the command line ----------------------------------------------------------------------------------


def is_hook(words: Sequence[str]) -> bool:
    """Whether a command line runs a hook: its first word that is neither a flag nor a
    flag's value is ``hook``."""
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word.startswith("-"):
            skip = "=" not in word and word not in ("-h", "--help", "--version")
        else:
            return word == "hook"
    return False


@contextlib.contextmanager
def never_blocking(words: Sequence[str]) -> Iterator[None]:
    """A hook's command line that cannot be parsed, or names a bad setting, has said its
    one line on stderr; it exits 0 all the same (exit code 2 would block the session)."""
    try:
        yield
    except SystemExit as exc:
        if exc.code and is_hook(words):
            raise SystemExit(0) from None
        raise
