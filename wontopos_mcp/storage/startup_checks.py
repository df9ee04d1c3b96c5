"""Whether a database can be used, asked before anything is served: a database that
cannot be opened or written stops the server at start, not at its first write.

Pure filesystem for a local directory: no LanceDB import (a second on a cold process),
so the stdio server still answers ``tools/list`` as fast as before. For object storage the
store opens a LanceDB connection and lists its tables (``Store.check_usable``); this
module only turns what went wrong into one line naming the problem and the fix.

Every failure is a ``ConfigError``: ``--db`` (or ``WONTOPOS_DB``, or the storage options)
names something that cannot work, and the CLI prints it as one line and exits 2.
"""

from __future__ import annotations

import errno
import os
import re
import threading
from collections.abc import Callable
from typing import Any

from wontopos_mcp.errors import ConfigError
from wontopos_mcp.storage.locks.coordination import PRIVATE_DIR

_FIX_PATH = "pass --db (or WONTOPOS_DB) a directory this user can write"


def check_directory(path: str, lock_name: str) -> None:
    """Raise ``ConfigError`` unless ``path`` is, or can be made, a directory this process
    can write: a probe file is created and removed, and the lock file is opened, which is
    exactly what the first write will need. Tests as root see permissions bypassed, which
    is why the probe writes instead of asking ``os.access``.

    A directory made here is 0700 (the database is its user's alone); one that
    exists keeps the mode its owner gave it."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ConfigError(f"the database path {path} is a file, not a directory; fix: {_FIX_PATH}")
    try:
        os.makedirs(path, mode=PRIVATE_DIR, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the database directory {path}: {_reason(exc)}; fix: {_FIX_PATH}") from None
    try:
        _probe(path)
        os.close(os.open(os.path.join(path, lock_name), os.O_RDWR | os.O_CREAT, 0o600))
    except OSError as exc:
        raise ConfigError(
            f"the database directory {path} is not writable: {_reason(exc)}; fix: give this user write "
            f"permission there (chmod/chown), or {_FIX_PATH}"
        ) from None
    _check_tables(path)


def _check_tables(path: str) -> None:
    """Each table already there (``<name>.lance``) must be a directory this process can
    write: a stray file by that name, or a table copied in read-only, would otherwise pass
    and fail every call later. One probe per table, still no LanceDB; none inside a
    table's own folders (``data``, ``_versions``), which other processes' LanceDB lists
    and cleans while this one starts."""
    with os.scandir(path) as entries:
        tables = sorted(e.path for e in entries if e.name.endswith(".lance"))
    for table in tables:
        if not os.path.isdir(table):
            raise ConfigError(
                f"the database at {path} is damaged: {os.path.basename(table)} is not a table directory; "
                f"fix: restore the database from a backup or move it aside, or {_FIX_PATH}"
            )
        try:
            _probe(table)
        except OSError as exc:
            raise ConfigError(
                f"the database at {path} is not writable: {table}: {_reason(exc)}; fix: give this user "
                f"write permission on the whole directory (chmod -R/chown -R), or {_FIX_PATH}"
            ) from None


def _probe(folder: str) -> None:
    """Create, write and remove a file in ``folder``, as the first write will (OSError if not)."""
    probe = os.path.join(folder, f".wontopos-probe-{os.getpid()}")
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, b"probe")
    finally:
        os.close(fd)
        os.remove(probe)


def _reason(exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    if exc.errno == errno.EROFS:
        reason += " (a read-only file system)"
    return reason


def check_remote(uri: str, list_tables: Callable[[], Any], timeout: float) -> None:
    """Raise ``ConfigError`` unless ``list_tables`` (a LanceDB connection to object storage
    listing its tables: a missing bucket, an http endpoint without allow_http and refused
    credentials all fail there) answers within ``timeout`` seconds. It runs in a daemon
    thread, since the object store retries for minutes."""
    failure: list[BaseException] = []

    def probe() -> None:
        try:
            list_tables()
        except Exception as exc:  # noqa: BLE001 - every failure becomes the one line
            failure.append(exc)

    thread = threading.Thread(target=probe, name="wontopos-check-db", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise remote_timeout(uri, timeout)
    if failure:
        raise remote_failure(uri, failure[0]) from None


def remote_failure(uri: str, exc: BaseException) -> ConfigError:
    """One line for a LanceDB connection to object storage that failed.

    LanceDB reports object-store errors as one long ``ValueError`` (Rust debug output);
    the known causes are recognised by the words the store's answer carries.
    """
    text = str(exc)
    bucket = uri.split("://", 1)[-1].split("/", 1)[0]
    where = f"the database at {uri} cannot be opened"
    if "BadScheme" in text or "URL scheme is not allowed" in text:
        return ConfigError(
            f"{where}: its endpoint is plain http, which is refused by default; fix: set AWS_ALLOW_HTTP=true "
            'or WONTOPOS_STORAGE_OPTIONS=\'{"allow_http": "true"}\' (or use an https endpoint)'
        )
    if "NoSuchBucket" in text:
        return ConfigError(f"{where}: the bucket {bucket!r} does not exist; fix: create it, or correct --db")
    if any(word in text for word in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "status: 403")):
        return ConfigError(
            f"{where}: the storage refused the credentials; fix: check AWS_ACCESS_KEY_ID / "
            "AWS_SECRET_ACCESS_KEY (or the GOOGLE_* / AZURE_* variables, or WONTOPOS_STORAGE_OPTIONS)"
        )
    if any(word in text for word in ("dns error", "Connection refused", "connect error", "tcp connect")):
        return ConfigError(
            f"{where}: its endpoint cannot be reached; fix: check the endpoint (AWS_ENDPOINT or the "
            "storage option endpoint) and the network"
        )
    first = " ".join(text.split())[:300]
    return ConfigError(f"{where}: {type(exc).__name__}: {first}; fix: check --db and WONTOPOS_STORAGE_OPTIONS")


def open_failure(uri: str, exc: BaseException, *, remote: bool) -> ConfigError:
    """One line for a database whose opening failed after the start-up check passed: a
    table LanceDB cannot read (a corrupt or foreign ``registry.lance``), a file inside
    the directory it cannot write. LanceDB's message names the cause; its Rust source
    location (``, /root/.cargo/...rs:12:34``) is cut off."""
    if remote:
        return remote_failure(uri, exc)
    text = " ".join(str(exc).split())
    text = re.sub(r",\s*/\S+\.rs:\d+:\d+$", "", text)[:300]
    return ConfigError(
        f"the database at {uri} cannot be opened: {type(exc).__name__}: {text}; fix: restore the "
        f"directory from a backup or move it aside, or {_FIX_PATH}"
    )


def remote_timeout(uri: str, seconds: float) -> ConfigError:
    return ConfigError(
        f"the database at {uri} did not answer within {seconds:.0f} s; fix: check the endpoint "
        "(AWS_ENDPOINT or the storage option endpoint), the network and the credentials"
    )
