"""Start-up refuses a database that cannot be opened or written: one line on stderr
naming the problem and the fix, exit code 2, no traceback, on every transport and in the
human commands.

Real ``python -m wontopos_mcp`` processes. Object storage is a real S3 API (moto's
server on a free loopback port, started and stopped by a fixture), reached the way a
user would configure it: ``AWS_*`` variables and ``WONTOPOS_STORAGE_OPTIONS``.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from s3_emulator import free_port
from support import REPO, engine_env

from wontopos_mcp.config import ConfigError
from wontopos_mcp.engine.service import MemoryService
from wontopos_mcp.storage.adapter import LOCK_FILE, Store

# Every way to run the program against a database: the three transports and two commands.
ENTRY_POINTS = [
    pytest.param([], id="stdio"),
    pytest.param(["--transport", "http"], id="http"),
    pytest.param(["--transport", "sse"], id="sse"),
    pytest.param(["stores", "list"], id="stores-list"),
    pytest.param(["speakers", "list"], id="speakers-list"),
]


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "PYTHONPATH": str(REPO), **engine_env(), **extra}


def _start(db: str | bytes, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if "--transport" in args:
        args = [*args, "--port", str(free_port())]
    return subprocess.run(
        [sys.executable, "-m", "wontopos_mcp", "--db", db, *args],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _refused_in_one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("wontopos-mcp: "), done.stderr
    assert "fix:" in lines[0]
    return lines[0]


# --- a local directory ---------------------------------------------------------------------------


# Real processes (every start-up refusal here): see the module's doc.
@pytest.mark.parametrize("args", ENTRY_POINTS)
def test_a_file_as_the_database_stops_every_entry_point_with_one_line(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "memories.txt"
    db.write_text("not a database")
    line = _refused_in_one_line(_start(str(db), args, _env(tmp_path)))
    assert str(db) in line
    assert "is a file, not a directory" in line
    assert db.read_text() == "not a database"


def test_a_database_under_a_file_cannot_be_created_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    db = tmp_path / "file" / "db"
    line = _refused_in_one_line(_start(str(db), [], _env(tmp_path)))
    assert f"cannot create the database directory {db}" in line


def _unwritable_directory(tmp_path: Path) -> Path:
    """An existing directory this process cannot write in. A read-only mode does it for
    an ordinary user; root writes through modes, so then a kernel file system that
    refuses new files even to root (sysfs) serves instead. Each is tried for real."""
    candidates = [tmp_path / "read-only"] if os.geteuid() != 0 else [Path("/sys"), Path("/proc/1")]
    if os.geteuid() != 0:
        candidates[0].mkdir()
        candidates[0].chmod(stat.S_IRUSR | stat.S_IXUSR)
    for folder in candidates:
        try:
            os.close(os.open(folder / ".wontopos-test-probe", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        except OSError:
            return folder
        os.remove(folder / ".wontopos-test-probe")
    raise AssertionError(f"no unwritable directory found among {candidates} to test with")


@pytest.mark.parametrize("args", [ENTRY_POINTS[0], ENTRY_POINTS[1], ENTRY_POINTS[3]])
def test_an_unwritable_directory_stops_with_one_line(tmp_path: Path, args: list[str]) -> None:
    folder = _unwritable_directory(tmp_path)
    line = _refused_in_one_line(_start(str(folder), args, _env(tmp_path)))
    assert f"the database directory {folder} is not writable" in line


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_a_usable_directory_passes_and_the_check_leaves_only_the_lock_file(tmp_path: Path) -> None:
    db = tmp_path / "new" / "db"
    Store(str(db)).check_usable()
    assert sorted(p.name for p in db.iterdir()) == [LOCK_FILE]
    assert (_mode(db), _mode(db / LOCK_FILE)) == (0o700, 0o600)  # made here: this user's alone
    Store(str(db)).check_usable()  # an existing database passes again
    with pytest.raises(ConfigError, match="is a file"):
        Store(str(db / LOCK_FILE)).check_usable()


@pytest.mark.slow
def test_a_database_directory_the_library_makes_is_0700_and_one_the_user_made_keeps_its_mode(
    tmp_path: Path, make_service: Callable[..., MemoryService]
) -> None:
    made = tmp_path / "made" / "db"
    make_service(db=made).memory_add("The gate code is 4711")
    assert _mode(made) == 0o700
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    theirs.chmod(0o750)
    make_service(db=theirs).memory_add("The gate code is 4711")
    assert _mode(theirs) == 0o750


# A fresh interpreter: what an import loads shows only in a process that loaded nothing before.
def test_checking_a_local_directory_does_not_import_lancedb(tmp_path: Path) -> None:
    """The stdio server checks before tools/list: LanceDB's import (~1 s) must not come first."""
    code = (
        "import sys; from wontopos_mcp.storage.adapter import Store; Store(sys.argv[1]).check_usable(); "
        "print(sorted(m for m in ('lancedb', 'pyarrow') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "db")], capture_output=True, text=True,
                          env=_env(tmp_path), timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --- a directory LanceDB cannot use ----------------------------------------------------------------


@pytest.mark.parametrize("args", ENTRY_POINTS)
def test_a_table_that_is_a_file_stops_every_entry_point_with_one_line(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "db"
    db.mkdir()
    (db / "registry.lance").write_text("x")
    line = _refused_in_one_line(_start(str(db), args, _env(tmp_path)))
    assert f"the database at {db} is damaged: registry.lance is not a table directory" in line


def _made(db: Path, home: Path) -> None:
    """A real database with a store in it, made by the CLI."""
    done = _start(str(db), ["stores", "create", "alice"], _env(home))
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_a_command_on_a_table_lancedb_cannot_read_stops_with_one_line_naming_the_cause(tmp_path: Path) -> None:
    db = tmp_path / "db"
    _made(db, tmp_path)
    for manifest in (db / "registry.lance" / "_versions").iterdir():
        manifest.write_bytes(b"garbage\n")
    line = _refused_in_one_line(_start(str(db), ["stores", "list"], _env(tmp_path)))
    assert line.startswith(f"wontopos-mcp: the database at {db} cannot be opened: ")
    assert "does not have sufficient data" in line
    assert ".rs:" not in line


def _serve_until_it_stops(db: Path, args: list[str], home: Path) -> tuple[int, str, str]:
    """A server whose stdin stays open (a host that keeps it): (exit code, stdout, stderr)."""
    if "--transport" in args:
        args = [*args, "--port", str(free_port())]
    server = subprocess.Popen(
        [sys.executable, "-m", "wontopos_mcp", "--db", str(db), *args], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(home), cwd=REPO,
    )  # fmt: skip
    assert server.stdin is not None
    assert server.stdout is not None
    assert server.stderr is not None
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}) + "\n")
    server.stdin.flush()
    try:
        code = server.wait(timeout=90)
    finally:
        server.kill()
    out, err = server.stdout.read(), server.stderr.read()
    server.stdin.close()
    server.stdout.close()
    server.stderr.close()
    return code, out, err


@pytest.mark.slow
@pytest.mark.parametrize("args", [ENTRY_POINTS[0], ENTRY_POINTS[1]])
def test_a_server_whose_background_open_fails_stops_with_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    """The start-up check passes (an empty table directory is writable); LanceDB's open, in
    the background so the first answer never waits for it, fails: the server stops."""
    db = tmp_path / "db"
    (db / "registry.lance").mkdir(parents=True)
    code, out, err = _serve_until_it_stops(db, args, tmp_path)
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    if args:  # HTTP announces where it serves first
        announced = lines.pop(0)
        assert announced.startswith("wontopos-mcp: serving MCP at http://127.0.0.1:"), err
        assert "the memory browser at http://127.0.0.1:" in announced
        assert announced.endswith("/ui/")
    else:  # stdio answered initialize before the open failed
        assert json.loads(out.splitlines()[0])["id"] == 1
    assert len(lines) == 1, err
    assert lines[0].startswith(f"wontopos-mcp: the database at {db} cannot be opened: ")
    assert "fix:" in lines[0]


@pytest.mark.slow
def test_a_table_this_user_cannot_write_stops_with_one_line_naming_it(tmp_path: Path) -> None:
    """A database copied in read-only: the directory itself is writable, its table is
    not. Root writes through modes, so as root the command runs without its capabilities."""
    db = tmp_path / "db"
    _made(db, tmp_path)
    table = db / "registry.lance"
    folders = [table, *(p for p in table.iterdir() if p.is_dir())]
    for folder in folders:
        folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    as_user = ["setpriv", "--bounding-set", "-all", "--inh-caps", "-all"] if os.geteuid() == 0 else []
    try:
        done = subprocess.run(
            [*as_user, sys.executable, "-m", "wontopos_mcp", "--db", str(db), "stores", "list"],
            capture_output=True, text=True, env=_env(tmp_path), cwd=REPO, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    finally:
        for folder in folders:
            folder.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    line = _refused_in_one_line(done)
    assert f"the database at {db} is not writable: {table}" in line


@pytest.mark.parametrize("args", ENTRY_POINTS)
def test_an_in_memory_database_is_refused_as_a_bad_setting(tmp_path: Path, args: list[str]) -> None:
    line = _refused_in_one_line(_start("memory://", args, _env(tmp_path)))
    assert "--db memory:// is an in-memory database" in line


def test_an_in_memory_database_from_the_environment_names_the_variable(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wontopos_mcp", "stores", "list"],
        capture_output=True, text=True, env=_env(tmp_path, WONTOPOS_DB="memory://"), cwd=REPO, timeout=60,
    )  # fmt: skip
    assert "WONTOPOS_DB memory:// is an in-memory database" in _refused_in_one_line(done)


@pytest.mark.parametrize("args", [ENTRY_POINTS[0], ENTRY_POINTS[1], ENTRY_POINTS[3]])
def test_a_database_path_that_is_not_utf8_is_refused_in_one_line(tmp_path: Path, args: list[str]) -> None:
    db = os.fsencode(tmp_path) + b"/db\xffx"  # what a shell passes for $'.../db\xffx'
    line = _refused_in_one_line(_start(db, args, _env(tmp_path)))
    assert f"--db {tmp_path}/db\\xffx is not valid UTF-8" in line
    assert not os.path.lexists(db)


# --- object storage (S3, through moto's server) -----------------------------------------------------


def _s3_env(home: Path, endpoint: str, **extra: str) -> dict[str, str]:
    return _env(
        home,
        AWS_ACCESS_KEY_ID="test",
        AWS_SECRET_ACCESS_KEY="test",
        AWS_REGION="us-east-1",
        AWS_ENDPOINT=endpoint,
        AWS_EC2_METADATA_DISABLED="true",
        **extra,
    )


@pytest.mark.slow
@pytest.mark.parametrize("args", [ENTRY_POINTS[0], ENTRY_POINTS[3]])
def test_a_missing_bucket_stops_with_one_line_naming_it(tmp_path: Path, s3_endpoint: str, args: list[str]) -> None:
    env = _s3_env(tmp_path, s3_endpoint, AWS_ALLOW_HTTP="true")
    line = _refused_in_one_line(_start("s3://no-such-bucket/db", args, env))
    assert "the bucket 'no-such-bucket' does not exist" in line


@pytest.mark.slow
@pytest.mark.parametrize("args", [ENTRY_POINTS[0], ENTRY_POINTS[3]])
def test_an_http_endpoint_without_allow_http_stops_with_one_line_naming_the_fix(
    tmp_path: Path, s3_endpoint: str, args: list[str]
) -> None:
    line = _refused_in_one_line(_start("s3://exists/db", args, _s3_env(tmp_path, s3_endpoint)))
    assert "plain http" in line
    assert "AWS_ALLOW_HTTP=true" in line
    assert "allow_http" in line


@pytest.mark.slow
def test_allow_http_in_the_storage_options_opens_the_bucket(tmp_path: Path, s3_endpoint: str) -> None:
    """The same endpoint works once WONTOPOS_STORAGE_OPTIONS allows http: the options reach
    both the start-up check and the database itself."""
    env = _s3_env(tmp_path, s3_endpoint, WONTOPOS_STORAGE_OPTIONS='{"allow_http": true}')
    done = _start("s3://exists/db", ["stores", "create", "--user", "alice"], env)
    assert done.returncode == 0, done.stderr
    listed = _start("s3://exists/db", ["stores", "list"], env)
    assert listed.returncode == 0, listed.stderr
    assert [line.split("\t")[0] for line in listed.stdout.splitlines()] == ["default", "alice"]


def test_bad_storage_options_stop_with_one_line(tmp_path: Path) -> None:
    done = _start(str(tmp_path / "db"), [], _env(tmp_path, WONTOPOS_STORAGE_OPTIONS="{allow_http: true}"))
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "WONTOPOS_STORAGE_OPTIONS must be a JSON object" in lines[0], done.stderr


def _s3_options(endpoint: str) -> dict[str, str]:
    return {"endpoint": endpoint, "allow_http": "true", "region": "us-east-1",
            "aws_access_key_id": "test", "aws_secret_access_key": "test"}  # fmt: skip


@pytest.mark.slow
def test_an_endpoint_that_never_answers_stops_after_the_timeout() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # connections queue, nothing answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(ConfigError, match="did not answer within 1 s; fix: check the endpoint"):
            Store("s3://bucket/db", storage_options=_s3_options(endpoint)).check_usable(timeout=1.0)


@pytest.mark.slow
def test_an_endpoint_nobody_listens_on_is_named_unreachable() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConfigError, match="its endpoint cannot be reached; fix: check the endpoint"):
        Store("s3://bucket/db", storage_options=_s3_options(endpoint)).check_usable(timeout=60.0)
