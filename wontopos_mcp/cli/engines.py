"""The shared engine's places on this machine: where its socket is, how a relay finds or
starts one, and what ``wontopos-mcp engine status|stop`` reads.

The standard library only (no ``mcp``, pydantic or LanceDB): the relay imports this, and a
relay must start in a fraction of a bare MCP server's time.

- **Where**: ``$XDG_RUNTIME_DIR/wontopos-mcp/`` when the variable names an absolute path,
  else ``<temp dir>/wontopos-mcp-<uid>/``; a socket path longer than :data:`SOCKET_PATH_MAX`
  (the platforms' ``sun_path``) tries the temp dir, and past that there is no shared
  engine (the stdio server runs in-process). The directory is created 0700.
- **Whose**: the directory must be a real directory (not a link) owned by this user with
  no access for group or others, and a socket in it likewise (0600, this user's); on
  Linux the peer of a connection must run as this user (``SO_PEERCRED``). Anything else is
  refused with one line naming the fix (:class:`ConfigError`), never used and never
  silently replaced: a place another user can open could serve someone else's engine.
- **Which**: one engine per database, package version and the settings that change what
  it answers (model, model cache, speaker limit, redaction, writers, storage options):
  the files are named ``e-<hash>`` of those (:func:`engine_key`), so two versions of the
  package never share an engine, and two hosts with different settings neither.
- **One at a time**: a starting relay takes ``e-<hash>.lock`` (``flock``) before it
  spawns an engine and holds it until the socket answers, so relays starting at once end
  with one engine; an engine holds ``e-<hash>.json`` (its pid, version, database and
  client count) locked for its lifetime, so a second engine for the same key leaves at
  once and ``status`` tells a live engine from a stale file by the lock.
- **Detached**: the engine is spawned in a new session, with ``/`` as its working
  directory, stdin and stdout on the null device and stderr on ``e-<hash>.log`` (0600;
  the package's logs carry no memory text), so it holds none of its starter's streams.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from wontopos_mcp.config import Settings
from wontopos_mcp.errors import ConfigError

SOCKET_PATH_MAX = 104
"""The longest socket path every platform with ``AF_UNIX`` binds (macOS 104, Linux 108)."""

START_TIMEOUT = 60.0
"""The most seconds a relay waits for the engine it spawned to accept."""

_POLL = 0.02


def supported() -> bool:
    """Whether this platform has local sockets (and ``flock``) for a shared engine."""
    return hasattr(socket, "AF_UNIX") and hasattr(fcntl, "flock")


def runtime_roots(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Where engines' files may be, in the order a relay tries them."""
    env = os.environ if environ is None else environ
    roots = []
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        roots.append(Path(runtime) / "wontopos-mcp")
    roots.append(Path(tempfile.gettempdir()) / f"wontopos-mcp-{os.getuid()}")
    return roots


def engine_key(settings: Settings, version: str) -> str:
    """The name of the engine serving ``settings`` with package ``version``."""
    what = [
        version,
        database(settings.db),
        settings.embed_model,
        os.path.abspath(settings.model_cache),
        settings.speaker_limit,
        settings.redact,
        settings.writers,
        settings.storage_options,
        settings.tools,  # an engine's sessions list one profile
    ]
    return "e-" + hashlib.sha256(json.dumps(what).encode()).hexdigest()[:20]


def database(db: str) -> str:
    """The database as an engine started elsewhere must name it: an absolute real path
    for a directory, a URI as given."""
    return db if "://" in db else os.path.realpath(db)


@dataclass(frozen=True)
class Place:
    """One engine's files."""

    root: Path
    key: str

    @property
    def socket(self) -> Path:
        return self.root / f"{self.key}.sock"

    @property
    def lock(self) -> Path:
        return self.root / f"{self.key}.lock"

    @property
    def info(self) -> Path:
        return self.root / f"{self.key}.json"

    @property
    def log(self) -> Path:
        return self.root / f"{self.key}.log"


def place_for(settings: Settings, version: str, environ: Mapping[str, str] | None = None) -> Place | None:
    """The place of the engine for ``settings``, its directory made and checked; None when
    every candidate's socket path is too long to bind."""
    key = engine_key(settings, version)
    for root in runtime_roots(environ):
        if len(str(root / f"{key}.sock").encode()) <= SOCKET_PATH_MAX:
            return Place(private_dir(root), key)
    return None


def private_dir(path: Path) -> Path:
    """``path``, created 0700 when missing; ConfigError when another user could open it."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    _check_private(path, stat.S_ISDIR, "directory", "chmod 700")
    return path


def _check_private(path: Path, is_kind: Any, kind: str, fix: str) -> None:
    info = os.lstat(path)
    if not is_kind(info.st_mode):
        raise ConfigError(f"{path} is not a {kind}; refusing to use it for the shared engine; fix: remove it")
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ConfigError(
            f"refusing the shared engine's {kind} {path}: it belongs to uid {info.st_uid} with mode "
            f"{stat.S_IMODE(info.st_mode):o}, which others can open; fix: remove it (or {fix} it if it is yours), "
            "or run with --engine inprocess"
        )


def connect(place: Place) -> socket.socket | None:
    """A connection to the engine at ``place``, or None when none accepts there.

    A socket or an engine another user could reach is refused (ConfigError)."""
    try:
        _check_private(place.socket, stat.S_ISSOCK, "socket", "chmod 600")
    except FileNotFoundError:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(place.socket))
    except OSError:
        sock.close()
        return None
    peer = getattr(socket, "SO_PEERCRED", None)
    if peer is not None:
        _, uid, _ = _peer_credentials(sock, peer)
        if uid != os.getuid():
            sock.close()
            raise ConfigError(f"refusing the shared engine at {place.socket}: it runs as uid {uid}")
    return sock


def _peer_credentials(sock: socket.socket, option: int) -> tuple[int, int, int]:
    import struct

    pid, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return pid, uid, gid


@contextlib.contextmanager
def _locked(path: Path, timeout: float | None = None) -> Iterator[int]:
    """The lock file at ``path`` held, its descriptor yielded; with ``timeout``,
    :class:`TimeoutError` when it is not free within that many seconds."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if timeout is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{path} held for {timeout:.0f} s") from None
                    time.sleep(_POLL)
        yield fd
    finally:
        os.close(fd)


class EngineFailed(Exception):
    """The engine a relay spawned left before it accepted; the message is its last line."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def connect_or_start(place: Place, command: Sequence[str], env: Mapping[str, str]) -> socket.socket:
    """A connection to the engine at ``place``, spawning it first when none runs."""
    sock = connect(place)
    if sock is not None:
        return sock
    with _locked(place.lock):
        sock = connect(place)  # another relay started it while this one waited
        if sock is not None:
            return sock
        engine = _spawn(place, command, env)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            sock = connect(place)
            if sock is not None:
                return sock
            if engine.poll() is not None:
                line = _last_line(place.log) or f"the shared engine exited with code {engine.returncode}"
                raise EngineFailed(line, engine.returncode)
            time.sleep(_POLL)
        raise EngineFailed(f"the shared engine did not accept within {START_TIMEOUT:.0f} s; see {place.log}")


_spawned: list[subprocess.Popen[bytes]] = []


def _spawn(
    place: Place, command: Sequence[str], env: Mapping[str, str], keep: tuple[int, ...] = ()
) -> subprocess.Popen[bytes]:
    """The engine process, detached (a session of its own, ``/`` its working directory, its
    stderr in the place's log), with only the descriptors in ``keep`` passed on."""
    with open(place.log, "wb") as log:
        os.chmod(place.log, 0o600)
        engine = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=dict(env),
            cwd="/",
            start_new_session=True,
            close_fds=True,
            pass_fds=keep,
        )
    _spawned.append(engine)
    return engine


SPAWN_LOCK_FD = "WONTOPOS_ENGINE_SPAWN_LOCK_FD"
"""The environment variable naming the spawn lock's descriptor an engine started in the
background inherits (:func:`start_in_background`); it lets the lock go once it accepts."""


def connect_or_wait(place: Place) -> socket.socket | None:
    """A connection to the engine at ``place`` when one runs or is being started (its
    starter holds the spawn lock until it accepts, waited for up to :data:`START_TIMEOUT`);
    ``None`` when none runs, or none accepted in that time."""
    sock = connect(place)
    if sock is not None:
        return sock
    try:
        with _locked(place.lock, timeout=START_TIMEOUT):
            return connect(place)
    except TimeoutError:
        return None


def start_in_background(place: Place, command: Sequence[str], env: Mapping[str, str]) -> None:
    """Spawn the engine at ``place`` for the commands and sessions to come, without waiting
    for it: what a command that ran in its own process leaves behind. The spawn lock passes
    to the engine (an inherited descriptor, named in :data:`SPAWN_LOCK_FD`), which lets it
    go once its socket accepts, so a relay or command arriving meanwhile waits for this
    engine instead of starting a second one; an engine that stops before then frees the
    lock by leaving."""
    with _locked(place.lock) as fd:
        running = connect(place)
        if running is not None:
            running.close()
            return
        _spawn(place, command, {**env, SPAWN_LOCK_FD: str(fd)}, keep=(fd,))


def let_spawn_lock_go() -> None:
    """An engine started in the background: its socket accepts, so the spawn lock it
    inherited is let go (closed; the starter closed its own copy)."""
    inherited = os.environ.pop(SPAWN_LOCK_FD, None)
    if inherited is not None and inherited.isdigit():
        with contextlib.suppress(OSError):
            os.close(int(inherited))


def reap() -> None:
    """Collect the exit status of engines this process spawned that have left."""
    _spawned[:] = [engine for engine in _spawned if engine.poll() is None]


def stopped_with(place: Place, code: int, *, wait: float = 2.0) -> str | None:
    """The last line of the engine this process spawned at ``place`` when it has left (or
    leaves within ``wait`` seconds) with exit code ``code``; None otherwise."""
    for engine in _spawned:
        try:
            left = engine.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        if left == code:
            return _last_line(place.log) or f"the shared engine exited with code {code}"
    return None


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


# --- the engine's side -------------------------------------------------------------------


class Holder:
    """What an engine holds for its lifetime: the locked info file and the bound socket."""

    def __init__(self, place: Place, info: dict[str, Any]) -> None:
        self.place = place
        self._info = info
        self._fd = os.open(place.info, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise
        self._inode = 0
        self.clients(0)  # at once: the file may still name an engine that died, now that it is locked again

    def bind(self) -> socket.socket:
        """The listening socket (0600), replacing a stale one: no other engine holds the lock."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.place.socket)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(self.place.socket))
        os.chmod(self.place.socket, 0o600)
        sock.listen(128)
        self._inode = os.lstat(self.place.socket).st_ino
        self.clients(0)
        return sock

    def clients(self, count: int) -> None:
        """Record how many clients are connected (``status`` shows it)."""
        data = json.dumps({**self._info, "clients": count, "socket": str(self.place.socket)}).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def still_ours(self) -> bool:
        """Whether the socket path is still this engine's (not removed or replaced)."""
        try:
            return os.lstat(self.place.socket).st_ino == self._inode
        except FileNotFoundError:
            return False

    def leave(self) -> None:
        """Remove the socket if it is still ours; the lock goes with the process."""
        if self.still_ours():
            with contextlib.suppress(OSError):
                os.unlink(self.place.socket)


# --- status and stop -----------------------------------------------------------------------


def running(roots: Sequence[Path] | None = None) -> list[dict[str, Any]]:
    """Every engine of this user that runs, as its info file says (a file no process holds
    locked is stale and is left out)."""
    found = []
    for root in roots or runtime_roots():
        for info in sorted(root.glob("e-*.json")) if root.is_dir() else ():
            fd = os.open(info, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                with contextlib.suppress(ValueError):
                    found.append(json.loads(os.pread(fd, 1 << 16, 0) or b"{}"))
            finally:
                os.close(fd)
    return [engine for engine in found if isinstance(engine.get("pid"), int)]


def stop(roots: Sequence[Path] | None = None, *, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Stop every running engine of this user (SIGTERM; SIGKILL past ``timeout``); the
    engines stopped. Their clients' next calls start a new one."""
    engines = running(roots)
    for engine in engines:
        with contextlib.suppress(ProcessLookupError):
            os.kill(engine["pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while running(roots) and time.monotonic() < deadline:
        time.sleep(_POLL * 5)
    for engine in running(roots):
        with contextlib.suppress(ProcessLookupError):
            os.kill(engine["pid"], signal.SIGKILL)
    return engines


def describe(engine: Mapping[str, Any]) -> str:
    clients = engine.get("clients", 0)
    return (
        f"pid {engine['pid']}  version {engine.get('version')}  {clients} client{'s' if clients != 1 else ''}  "
        f"database {engine.get('db')}  socket {engine.get('socket')}"
    )


def print_status(out: IO[str]) -> int:
    engines = running()
    if not engines:
        print("no shared engine is running", file=out)
    for engine in engines:
        print(describe(engine), file=out)
    return 0


def print_stop(out: IO[str]) -> int:
    engines = stop()
    if not engines:
        print("no shared engine is running", file=out)
    for engine in engines:
        print(f"stopped {describe(engine)}", file=out)
    return 0


def spawn_command() -> list[str]:
    """How a relay starts an engine: this interpreter, this package."""
    return [sys.executable, "-m", "wontopos_mcp", "engine", "serve"]


def engine_environment(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The starter's environment with every setting the engine needs, resolved as the
    starter resolved them (flags included): the engine reads them back with ``Settings.load``."""
    env = dict(os.environ if environ is None else environ)
    for name, value in {
        "db": database(settings.db),
        "embed_model": settings.embed_model,
        "model_cache": os.path.abspath(settings.model_cache),
        "speaker_limit": str(settings.speaker_limit),
        "redact": settings.redact,
        "writers": settings.writers,
        "log_level": settings.log_level,
        "engine_idle": str(settings.engine_idle),
        "tools": settings.tools,
        "storage_options": json.dumps(settings.storage_options_dict),
        "transport": "stdio",
    }.items():
        env[f"WONTOPOS_{name.upper()}"] = value
    return env
