"""``wontopos-mcp``: argument parsing and start-up; no rules.

The default command is the stdio MCP server, so ``uvx wontopos-mcp`` in an agent's
config just works. ``--transport http`` serves the one HTTP app of ``http.app`` (MCP at
``/mcp``, SSE at ``/sse``, REST under ``/api/v1``, ``/healthz``) with uvicorn;
``--transport sse`` serves the same app, since SSE is part of it. An HTTP bind that is
not loopback needs ``WONTOPOS_API_KEY``. The human commands (``info``, ``stores``,
``speakers``, ``memories``, ``search``, ``export``, ``import``, ``stats``, ``reindex``) live in
``cli.commands``; ``--help`` shows examples and the database a run would use. Claude Code's
hooks (``hook session-start|prompt|capture``, :mod:`cli.hooks`) exit 0 whatever happens,
a bad command line included: exit code 2 would block the session.

The servers themselves (stdio, the shared engine, HTTP) are :class:`Servers`, given to
:func:`main` by the entry point ``wontopos_mcp.launch``: this module decides what to
serve and when, and never imports the MCP or HTTP face.

stdio: by default (``--engine shared``) this process is a relay (:mod:`cli.relay`) to the
engine every stdio session on the machine shares for this database, package version and
model settings (:mod:`cli.engines`), started here when none runs; the engine is this same
program as ``engine serve``, one ``MemoryService`` whose every connection is its own MCP
session. ``--engine inprocess``, and a platform without local sockets, serve in this
process. ``engine status|stop`` show and stop the engines.

A bad setting stops here with one line on stderr and exit code 2, never a traceback;
stdout stays reserved for the protocol (only the human commands print results to it).

A database that cannot be opened stops the run with one line and exit code 2, in two steps
so that ``tools/list`` never waits for LanceDB's import: the filesystem check
(``_check_database``) before anything is served, then LanceDB's own open. The human
commands open the database before they run (``cli.commands.run``); the server opens it in
the background (``MemoryService.start``) and, when that open fails (a corrupt table, a
file inside the directory it cannot write), stops there, on every transport: one line,
exit code 2, requests in flight unanswered. A server that stayed up could only answer
every call with the same error; /healthz's 503 is for a database that fails later.

Keeping to itself:

- Every file and directory this process creates is its user's alone: the umask is
  ``0o077`` from the start of every run, so the database directory LanceDB fills is 0700
  and its files 0600 (and so is the model cache it converts). A directory the user made
  beforehand keeps the mode they gave it; its new files are still 0600.
- Logs go to stderr through ``logs.PrivateRecords``: no memory text, query or key.
- An HTTP server (``--transport http`` or ``sse``) refuses to start with a
  ``WONTOPOS_API_KEY`` that is set but shorter than 16 characters (``config.MIN_KEY_LENGTH``),
  empty included (``config.key_problem``): the wrong-key limit never refuses the right
  key, so the key's length is what bounds guessing. stdio never reads the key.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Protocol

from wontopos_mcp import logs
from wontopos_mcp.config import ENGINES, TRANSPORTS, Settings, is_loopback, key_problem
from wontopos_mcp.contract import PROFILES
from wontopos_mcp.errors import ConfigError
from wontopos_mcp.version import __version__

from .exits import EXIT_BAD_SETTING

if TYPE_CHECKING:
    from wontopos_mcp.engine.service import MemoryService

PRIVATE_UMASK = 0o077


class Servers(Protocol):
    """The servers a run starts, handed to :func:`main` by the program's entry point
    (``wontopos_mcp.launch``): the command line stands beside the MCP and HTTP faces, not
    above them, so it names what it serves without importing them. Each one imports its
    face when called, so a human command or a relay never loads the MCP SDK or uvicorn.
    """

    def stdio(self, service: MemoryService, *, tools: str) -> None:
        """Serve MCP on stdin/stdout until stdin ends, listing the ``tools`` profile."""

    def engine(
        self,
        service: MemoryService,
        listener: socket.socket,
        *,
        idle: float,
        alive: Callable[[], bool],
        on_clients: Callable[[int], None],
        tools: str,
    ) -> None:
        """The shared engine: start ``service`` once the MCP server is built, then serve
        each connection to ``listener`` as its own MCP session (listing the ``tools``
        profile), until ``idle`` seconds pass without a client or ``alive()`` says false;
        ``on_clients`` hears the count."""

    def http(self, service: MemoryService, settings: Settings, listener: socket.socket) -> None:
        """Serve the one HTTP app (MCP, SSE, REST, /healthz, the browser) on ``listener``
        until the server stops."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (no usage dump), and a command
    that does not exist names the one the person probably meant (:mod:`guesses`)."""

    def error(self, message: str) -> Any:
        from .guesses import parse_invalid_choice, suggestion

        if (invalid := parse_invalid_choice(message)) and (meant := suggestion(self.prog, *invalid)):
            _fail(f"{invalid[0]!r} is not a command of {self.prog}; did you mean `{meant}`?")
        _fail(message)


# The settings the server and the human commands share, by ``Settings`` field: each
# command's ``--help`` shows only those it uses (``cli.commands.USES``), the server all.
SETTINGS_FLAGS: dict[str, str] = {
    "db": "database directory or LanceDB URI (WONTOPOS_DB)",
    "speaker_limit": "people a store may register, default 50 (WONTOPOS_SPEAKER_LIMIT)",
    "embed_model": "embedding model (WONTOPOS_EMBED_MODEL)",
    "model_cache": "model cache directory (WONTOPOS_MODEL_CACHE)",
    "log_level": "debug, info, warning (default), error (WONTOPOS_LOG_LEVEL)",
    "writers": "object storage: single (default, one writing process) or leased (replicas) (WONTOPOS_WRITERS)",
    "redact": "none (default) or secrets: API keys, tokens, private keys and passwords in written "
    "texts become [redacted:<kind>] before they are stored (WONTOPOS_REDACT)",
}


def _settings_flags(names: Sequence[str] = tuple(SETTINGS_FLAGS), default: Any = None) -> argparse.ArgumentParser:
    """A parent parser with the ``--flags`` of these settings; ``default`` is what a flag
    left out leaves (a command's copy: ``SUPPRESS``, so one given before the command stands)."""
    flags = argparse.ArgumentParser(add_help=False)
    for name in names:
        flags.add_argument("--" + name.replace("_", "-"), default=default, help=SETTINGS_FLAGS[name])
    return flags


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line; ``argv`` only tells ``--help`` which database ``--db`` names.

    Public: what :func:`main` parses with, and what tests and ``bench/`` parse a command
    line with to run it in-process (``commands.run``) or read its flags."""
    from .commands import EXAMPLES, add_commands

    where = _database_line(argv)
    parser = _Parser(
        prog="wontopos-mcp",
        parents=[_settings_flags()],
        description="Memory that knows who said it: an offline MCP memory server. "
        "With no command it serves MCP (stdio by default; --transport http or sse for HTTP, "
        "which also serves the memory browser at http://HOST:PORT/ui/).",
        epilog=f"{EXAMPLES}\n\n{where}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"wontopos-mcp {__version__}")
    parser.add_argument("--transport", choices=TRANSPORTS, help="stdio (default), http or sse (WONTOPOS_TRANSPORT)")
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        help="stdio: relay to the engine every session shares (shared, default) or serve in this process "
        "(inprocess) (WONTOPOS_ENGINE)",
    )
    parser.add_argument(
        "--tools", choices=tuple(PROFILES), help="the MCP tools listed: full (default) or core (WONTOPOS_TOOLS)"
    )
    parser.add_argument("--host", help="HTTP bind address, default 127.0.0.1 (WONTOPOS_HOST)")
    parser.add_argument("--port", help="HTTP port, default 8765 (WONTOPOS_PORT)")
    parser.add_argument("--allowed-hosts", help="extra Host/Origin names, comma-separated (WONTOPOS_ALLOWED_HOSTS)")
    parser.add_argument("--max-body-bytes", help="HTTP body limit, default 4 MiB (WONTOPOS_MAX_BODY_BYTES)")
    # A command's own copy of the flags it uses sets them only when given after the command.
    add_commands(parser, lambda names: _settings_flags(names, argparse.SUPPRESS), where)
    return parser


def _database_line(argv: Sequence[str] | None) -> str:
    """``database: <path> (from ...)``, resolved as a run with these arguments would."""
    words = list(sys.argv[1:] if argv is None else argv)
    given = next((w.split("=", 1)[1] for w in words if w.startswith("--db=")), None)
    if given is None and "--db" in words[:-1]:
        given = words[words.index("--db") + 1]
    try:
        db = Settings.load({"db": given}).db
    except ConfigError as exc:
        return f"database: none usable ({exc})"
    source = "--db" if given else ("WONTOPOS_DB" if os.environ.get("WONTOPOS_DB", "").strip() else "the default")
    return f"database: {db} (from {source}; set it with --db or WONTOPOS_DB)"


def _fail(message: str) -> Any:
    print(f"wontopos-mcp: {message}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_SETTING)


def main(argv: Sequence[str] | None = None, *, servers: Servers) -> int:
    """Run one command line (``sys.argv[1:]`` when ``argv`` is None); ``servers`` are what
    the server commands serve with. Returns the exit code, where a run does not leave by
    itself (``os._exit``, so no interpreter finalisation races the model's thread)."""
    from .hooks import never_blocking

    with never_blocking(sys.argv[1:] if argv is None else argv):
        args = vars(build_parser(argv).parse_args(argv))
        names = {f.name for f in fields(Settings)}
        try:
            settings = Settings.load({k: v for k, v in args.items() if k in names})
        except ConfigError as exc:
            _fail(str(exc))
    os.umask(PRIVATE_UMASK)
    logs.configure(settings.log_level)
    if args.get("command") is None:
        return serve(settings, servers)
    if args["command"] == "hook":  # before the database check: a hook says its one line and exits 0
        from .hooks import run_hook

        _exit_now(run_hook(args["action"], args, settings))
    if args["command"] == "engine":
        return _engine_command(args["action"], settings, servers)
    from .commands import run

    if args["command"] == "reindex":
        _reindex_preflight(args, settings)
    _check_database(settings)
    code = run(args, settings)
    _exit_now(code)
    return code


def serve(settings: Settings, servers: Servers) -> int:
    """The MCP server these settings ask for: stdio through the shared engine (or in this
    process), or HTTP; a setting or a database that cannot work stops it first."""
    if settings.transport != "stdio" and (problem := key_problem(settings.api_key)) is not None:
        _fail(problem)
    if settings.transport != "stdio" and settings.api_key is None and not is_loopback(settings.host):
        _fail(
            f"refusing to serve on {settings.host} without an API key: set WONTOPOS_API_KEY, "
            "or bind a loopback address such as 127.0.0.1"
        )
    _check_database(settings)
    if settings.transport == "stdio" and settings.engine == "shared":
        _relay(settings)  # returns only where no shared engine can be (no local sockets)
    listener = None if settings.transport == "stdio" else _listen(settings.host, settings.port)
    service = _open_service(settings)
    try:
        if listener is None:
            servers.stdio(service, tools=settings.tools)
        else:
            _serve_http(service, settings, listener, servers)
    except KeyboardInterrupt:
        pass
    finally:
        service.close()
    _exit_now(0)
    return 0


def _open_service(settings: Settings, *, on_leave: Callable[[], None] = lambda: None) -> MemoryService:
    """The process's one ``MemoryService``, holding what writing needs; a refusal is one line,
    exit 2. SIGTERM gives up what it holds (``on_leave`` first) and leaves at once."""
    from wontopos_mcp.engine.service import MemoryService
    from wontopos_mcp.errors import ModelMismatch

    def stop(exc: Exception) -> None:
        # The background open failed (a corrupt table, a file LanceDB cannot write): the
        # start-up check's verdict, come late. One line, exit 2, on every transport.
        print(f"wontopos-mcp: {service.open_failure(exc)}", file=sys.stderr)
        on_leave()
        service.release()
        _exit_now(EXIT_BAD_SETTING)

    service = MemoryService.open(settings, on_open_failure=stop)
    try:
        service.claim()
        service.check_model(settings.embed_model)  # object storage: opens the database now
    except (ModelMismatch, ConfigError) as exc:
        _fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - LanceDB's failures have no common type
        _fail(str(service.open_failure(exc)))

    # SIGTERM (a host closing us, uvicorn raising it again once it has shut down, ``engine
    # stop``): give up the leases this process holds on object storage, then leave at once,
    # as the default action would (every acknowledged write is committed). Not an
    # exception: one raised inside a close still waiting for the background open would
    # print a traceback.
    def leave(signum: int, frame: Any) -> None:
        on_leave()
        service.release()
        _exit_now(0)

    signal.signal(signal.SIGTERM, leave)
    return service


def _relay(settings: Settings) -> None:
    """stdio through the shared engine (:mod:`cli.relay`): never returns, except where this
    platform has no local sockets or no socket path short enough (then: in-process)."""
    from . import engines
    from .relay import Relay, Unavailable

    if not engines.supported():
        return
    try:
        place = engines.place_for(settings, __version__)
    except (ConfigError, OSError) as exc:
        _fail(str(exc))
    if place is None:
        return
    command, env = engines.spawn_command(), engines.engine_environment(settings)

    def gone_for_good(line: str) -> None:
        # The engine stopped on a setting or a database that cannot work (exit 2): so
        # does the relay, with its line, as an in-process server would.
        print(line if line.startswith("wontopos-mcp: ") else f"wontopos-mcp: {line}", file=sys.stderr)
        _exit_now(EXIT_BAD_SETTING)

    def connect() -> socket.socket:
        engines.reap()
        try:
            return engines.connect_or_start(place, command, env)
        except engines.EngineFailed as exc:
            if exc.code == EXIT_BAD_SETTING:
                gone_for_good(str(exc))
            raise Unavailable(str(exc)) from None
        except (ConfigError, OSError) as exc:
            raise Unavailable(str(exc)) from None

    def lost() -> None:
        line = engines.stopped_with(place, EXIT_BAD_SETTING)
        if line is not None:
            gone_for_good(line)

    try:
        first = engines.connect_or_start(place, command, env)
    except (ConfigError, OSError) as exc:
        _fail(str(exc))
    except engines.EngineFailed as exc:
        gone_for_good(str(exc))
    code = 0
    with contextlib.suppress(KeyboardInterrupt):
        code = Relay(connect, sys.stdin.buffer, sys.stdout.buffer, on_lost=lost).run(first)
    _exit_now(code)


def _engine_command(action: str, settings: Settings, servers: Servers) -> int:
    """``engine status``, ``engine stop``; ``engine serve`` is what a relay spawns."""
    from . import engines

    if action == "status":
        return engines.print_status(sys.stdout)
    if action == "stop":
        return engines.print_stop(sys.stdout)
    return _serve_engine(settings, servers)


def _serve_engine(settings: Settings, servers: Servers) -> int:
    """The shared engine: every connection to its socket is one MCP session over one
    service; it leaves after ``engine_idle`` seconds without a client, and at once when its
    database directory or its socket is gone."""
    import time

    from . import engines

    place = engines.place_for(settings, __version__) if engines.supported() else None
    if place is None:
        raise SystemExit(_fail("this platform has no local socket path for a shared engine; use --engine inprocess"))
    db = engines.database(settings.db)
    try:
        holder = engines.Holder(place, {"pid": os.getpid(), "version": __version__, "db": db, "started": time.time()})
    except BlockingIOError:
        return 0  # another engine serves these settings
    _check_database(settings)
    service = _open_service(settings, on_leave=holder.leave)
    listener = holder.bind()  # a relay may connect now; its messages wait in the socket
    engines.let_spawn_lock_go()  # started in the background: the next relay or command may connect
    local = "://" not in db

    def alive() -> bool:
        return holder.still_ours() and (not local or os.path.isdir(db))

    with contextlib.suppress(KeyboardInterrupt):
        servers.engine(
            service, listener, idle=settings.engine_idle, alive=alive, on_clients=holder.clients, tools=settings.tools
        )
    holder.leave()
    service.release()
    _exit_now(0)
    return 0


def _reindex_preflight(args: dict[str, Any], settings: Settings) -> None:
    """``reindex`` names its model on the command line, and needs a database that exists
    (the usual check would create an empty one): else one line, exit 2, nothing made."""
    from wontopos_mcp.engine.bootstrap import store_for

    if not args.get("embed_model"):
        _fail("name the model to re-embed every memory for: wontopos-mcp reindex --embed-model NAME")
    if store_for(settings).exists() is False:
        _fail(f"there is no database at {settings.db} to reindex; fix: pass --db (or WONTOPOS_DB) the database")


def _check_database(settings: Settings) -> None:
    """A database that cannot be opened or written stops here: one line, exit 2.

    Milliseconds for a local directory (no LanceDB import); object storage is asked.
    """
    from wontopos_mcp.engine.bootstrap import store_for

    try:
        store_for(settings).check_usable()
    except ConfigError as exc:
        print(f"wontopos-mcp: {exc}", file=sys.stderr)
        _exit_now(EXIT_BAD_SETTING)  # an object-store probe may still run in LanceDB's threads


def _listen(host: str, port: int) -> socket.socket:
    """Bind the HTTP port now, so a port in use is one line here, not a traceback later."""
    try:
        family, _, _, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        return socket.create_server(address[:2], family=family)
    except OSError as exc:
        _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    raise AssertionError("unreachable")


def _serve_http(service: MemoryService, settings: Settings, listener: socket.socket, servers: Servers) -> None:
    """``--transport http`` (and ``sse``): the one app with /mcp, /sse, /api/v1 and /healthz.
    The port is bound already, so a client that reads the line and connects at once waits
    in the socket's backlog while the app is built."""
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    print(
        f"wontopos-mcp: serving MCP at http://{host}:{settings.port}/mcp (SSE /sse, REST /api/v1, /healthz); "
        f"the memory browser at http://{host}:{settings.port}/ui/",
        file=sys.stderr,
        flush=True,
    )
    servers.http(service, settings, listener)


def _exit_now(code: int) -> None:
    """Leave without interpreter finalisation.

    The model may still be loading in a background thread when a host closes stdin;
    tearing down onnxruntime/LanceDB under a running native thread aborts the process
    (SIGABRT). Every acknowledged write is already committed, so nothing is lost.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
