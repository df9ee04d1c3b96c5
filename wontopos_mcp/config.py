"""Settings, read once by the entry points: flags > ``WONTOPOS_*`` environment > defaults.

Only the CLI and ``Memory()`` (for the arguments it was not given) build a ``Settings``;
nothing else in the package reads the environment. The API key is read from the
environment only, never from a flag, so it never shows in ``ps``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from wontopos_mcp.contract import PROFILES
from wontopos_mcp.model.embeddings import DEFAULT_MODEL
from wontopos_mcp.rules.locations import WRITERS
from wontopos_mcp.rules.names import DEFAULT_SPEAKER_LIMIT
from wontopos_mcp.rules.redaction import MODES as REDACT_MODES

from .errors import ConfigError

TRANSPORTS = ("stdio", "http", "sse")
ENGINES = ("shared", "inprocess")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
# An HTTP server refuses a shorter WONTOPOS_API_KEY: the wrong-key limit never refuses the
# right key, so a guess's answer (429 or 200) tells a guesser which it was; only the key's
# length bounds guessing.
MIN_KEY_LENGTH = 16
_MiB = 1024 * 1024


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    import ipaddress

    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def key_problem(key: str | None) -> str | None:
    """Why ``key`` cannot guard an HTTP server (one line, without the key), or None when
    it can or none is set. Empty counts as set: ``WONTOPOS_API_KEY=`` asked for a key."""
    if key is None or len(key) >= MIN_KEY_LENGTH:
        return None
    fix = "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'"
    if not key:
        return (
            f"WONTOPOS_API_KEY is set but empty; it must be at least {MIN_KEY_LENGTH} characters ({fix}), "
            "or unset it to serve loopback without a key"
        )
    return f"WONTOPOS_API_KEY is {len(key)} characters; it must be at least {MIN_KEY_LENGTH} ({fix})"


def default_db_dir() -> str:
    from platformdirs import user_data_dir

    return user_data_dir("wontopos-mcp", appauthor=False)


def default_model_cache() -> str:
    from platformdirs import user_cache_dir

    return os.path.join(user_cache_dir("wontopos-mcp", appauthor=False), "models")


@dataclass(frozen=True)
class Settings:
    db: str = ""
    transport: str = "stdio"
    # stdio: relay to the engine process every session on this machine shares (``shared``)
    # or serve in this process (``inprocess``); how long a shared engine with no client stays.
    engine: str = "shared"
    engine_idle: int = 600
    # The MCP tools a session lists (``contract.PROFILES``): every one, or the few an agent
    # needs most (a smaller listing costs the model less on every turn).
    tools: str = "full"
    host: str = "127.0.0.1"
    port: int = 8765
    api_key: str | None = field(default=None, repr=False)
    allowed_hosts: tuple[str, ...] = ()
    max_body_bytes: int = 4 * _MiB
    speaker_limit: int = DEFAULT_SPEAKER_LIMIT
    embed_model: str = DEFAULT_MODEL
    model_cache: str = ""
    log_level: str = "warning"
    # LanceDB storage options (WONTOPOS_STORAGE_OPTIONS, a JSON object): pairs, so the
    # settings stay hashable; ``storage_options_dict`` is what ``lancedb.connect`` takes.
    storage_options: tuple[tuple[str, str], ...] = ()
    # Object storage: one writer (``single``) or replicas sharing the database under
    # leases (``leased``); how long an unrenewed lease stands (``coordination``).
    writers: str = "single"
    lease_ttl_ms: int = 10_000
    # Secrets in written texts replaced by [redacted:<kind>] (``secrets``) or kept (``none``).
    redact: str = "none"
    # HTTP: a connection that has not sent a whole request's headers this long after it
    # opened (or after its last answer) is closed (``http.server``); a body that has not
    # arrived this long after its headers is 408; the bodies being read at once hold at
    # most this many bytes together (or one body of ``max_body_bytes``, when that is more),
    # past which a body is 503 (``http.app.Guard``).
    header_timeout_ms: int = 10_000
    body_timeout_ms: int = 30_000
    body_budget_bytes: int = 64 * _MiB

    @property
    def storage_options_dict(self) -> dict[str, str]:
        return dict(self.storage_options)

    @classmethod
    def load(cls, overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
        """Merge defaults, the environment and explicit overrides (``None`` = not given).

        A variable is read only for a setting no override gives: a flag wins over it, so
        a bad ``WONTOPOS_PORT`` beside ``--port`` is never looked at."""
        env = os.environ if environ is None else environ
        given = {name for name, value in (overrides or {}).items() if value is not None}
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in given:
                continue
            raw = env.get(f"WONTOPOS_{f.name.upper()}")
            # An empty variable is unset, but for the key: set and empty, it is refused, as any
            # key shorter than 16 characters is.
            if raw is not None and (raw.strip() != "" or f.name == "api_key"):
                values[f.name] = _parse(f.name, raw.strip(), source=f"WONTOPOS_{f.name.upper()}")
        for name, value in (overrides or {}).items():
            if name == "api_key":
                raise ConfigError("the API key is read from WONTOPOS_API_KEY only")
            if value is not None:
                values[name] = _parse(name, value, source=f"--{name.replace('_', '-')}")
        settings = replace(cls(), **values)
        return settings._with_defaults()._checked()

    def _with_defaults(self) -> Settings:
        return replace(
            self,
            db=_local_path(self.db) if self.db else default_db_dir(),
            model_cache=self.model_cache or default_model_cache(),
        )

    def _checked(self) -> Settings:
        if self.transport not in TRANSPORTS:
            raise ConfigError(f"transport must be one of {', '.join(TRANSPORTS)}, not {self.transport!r}")
        if self.engine not in ENGINES:
            raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, not {self.engine!r}")
        if self.tools not in PROFILES:
            raise ConfigError(f"tools must be one of {', '.join(PROFILES)}, not {self.tools!r}")
        if self.engine_idle < 1:
            raise ConfigError(f"WONTOPOS_ENGINE_IDLE must be at least 1 second, not {self.engine_idle}")
        if not 0 < self.port < 65536:
            raise ConfigError(f"port must be 1-65535, not {self.port}")
        if self.speaker_limit < 1:
            raise ConfigError(f"speaker limit must be at least 1, not {self.speaker_limit}")
        if self.max_body_bytes < 1024:
            raise ConfigError(f"max body bytes must be at least 1024, not {self.max_body_bytes}")
        if self.log_level not in LOG_LEVELS:
            raise ConfigError(f"log level must be one of {', '.join(LOG_LEVELS)}, not {self.log_level!r}")
        if self.writers not in WRITERS:
            raise ConfigError(f"writers must be one of {', '.join(WRITERS)}, not {self.writers!r}")
        if self.redact not in REDACT_MODES:
            raise ConfigError(f"redact must be one of {', '.join(REDACT_MODES)}, not {self.redact!r}")
        if self.lease_ttl_ms < 500:
            raise ConfigError(f"WONTOPOS_LEASE_TTL_MS must be at least 500, not {self.lease_ttl_ms}")
        if self.header_timeout_ms < 100:
            raise ConfigError(f"WONTOPOS_HEADER_TIMEOUT_MS must be at least 100, not {self.header_timeout_ms}")
        if self.body_timeout_ms < 100:
            raise ConfigError(f"WONTOPOS_BODY_TIMEOUT_MS must be at least 100, not {self.body_timeout_ms}")
        if self.body_budget_bytes < 1024:
            raise ConfigError(f"WONTOPOS_BODY_BUDGET_BYTES must be at least 1024, not {self.body_budget_bytes}")
        if not self.embed_model.strip():
            raise ConfigError("embed model must not be empty")
        return self


_INTS = {
    "port",
    "speaker_limit",
    "max_body_bytes",
    "lease_ttl_ms",
    "header_timeout_ms",
    "body_timeout_ms",
    "body_budget_bytes",
    "engine_idle",
}


def _local_path(db: str) -> str:
    """A ``file://`` URI as the absolute path it names, a local directory like any other; any
    other value as given."""
    if not db.startswith("file://"):
        return db
    from urllib.parse import unquote, urlsplit

    return os.path.abspath(unquote(urlsplit(db).path) or "/")


def _storage_options(value: Any, *, source: str) -> tuple[tuple[str, str], ...]:
    """A JSON object (or a mapping, from ``Memory()``) of LanceDB storage options, whose
    values are strings; JSON booleans and numbers become LanceDB's spelling of them."""
    import json

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ConfigError(f"{source} must be a JSON object of storage options: {exc}") from None
    if not isinstance(value, Mapping):
        raise ConfigError(f'{source} must be a JSON object such as {{"allow_http": "true"}}, not {value!r}')
    pairs = []
    for key, item in value.items():
        if isinstance(item, bool):
            item = "true" if item else "false"
        elif isinstance(item, (int, float)):
            item = str(item)
        if not isinstance(key, str) or not isinstance(item, str):
            raise ConfigError(f"{source}: the value of {key!r} must be a string, number or boolean, not {item!r}")
        pairs.append((key, item))
    return tuple(sorted(pairs))


def _parse(name: str, value: Any, *, source: str) -> Any:
    if name in _INTS:
        if isinstance(value, bool):
            raise ConfigError(f"{source} must be an integer, not {value!r}")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{source} must be an integer, not {value!r}") from None
    if name == "allowed_hosts":
        items = value.split(",") if isinstance(value, str) else list(value)
        return tuple(h.strip() for h in items if h.strip())
    if name == "storage_options":
        return _storage_options(value, source=source)
    if name in ("transport", "engine", "tools", "log_level", "writers", "redact"):
        return str(value).strip().lower()
    if name == "db":
        return _database(str(value), source=source)
    return str(value)


def _database(db: str, *, source: str) -> str:
    """``--db`` as given, unless it names a database that cannot work: an in-memory one
    (``memory://``: every memory would be lost when the process ends) or a path that is
    not UTF-8 (LanceDB takes UTF-8 paths only; the shell passed bytes Python keeps as
    lone surrogates)."""
    if db.strip().lower().startswith(("memory://", "shared-memory://")):
        raise ConfigError(
            f"{source} {db} is an in-memory database: every memory would be lost when the process ends; "
            "fix: pass a directory (or an object-storage URI such as s3://bucket/path)"
        )
    try:
        db.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{source} {_shown(db)} is not valid UTF-8, which LanceDB needs in a database path; "
            "fix: choose a directory whose name is UTF-8"
        ) from None
    return db


def _shown(text: str) -> str:
    """``text`` printable: bytes a shell passed (lone surrogates) as ``\\xff``, other surrogates escaped."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def machine_zone() -> str:
    """The machine's IANA time zone, from where ``/etc/localtime`` points (``UTC`` when it
    names none): what an import reads local times in unless told (``--tz``)."""
    target = os.path.realpath("/etc/localtime")
    marker = "/zoneinfo/"
    return target.split(marker, 1)[1] if marker in target else "UTC"
