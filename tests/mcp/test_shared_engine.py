"""stdio sessions share one engine per database: through the relay a host launches, over
real processes, a real engine, LanceDB and the session's model.

Every engine here lives in the session's runtime directory (conftest ``engine_runtime``),
leaves a few seconds after its last client (``WONTOPOS_ENGINE_IDLE``, the real setting)
or when its database directory goes, and is stopped at the end of the session.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import REPO, TOOLS, engines_serving, error_body, server_env, wait_until

import wontopos_mcp
from wontopos_mcp.cli import engines
from wontopos_mcp.config import Settings

pytestmark = pytest.mark.process

WAIT = 60.0


class Session:
    """One host's stdio server: ``wontopos-mcp`` as a host spawns it, initialized."""

    def __init__(self, db: Path, env: dict[str, str], *args: str, cwd: Path = REPO) -> None:
        argv = [sys.executable, "-m", "wontopos_mcp", "--db", str(db), *args]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self.stderr: queue.Queue[str] = queue.Queue()
        self._pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self._lines.put), daemon=True),
            threading.Thread(
                target=self._pump, args=(self.proc.stderr, lambda b: self.stderr.put(b.decode())), daemon=True
            ),
        ]
        for pump in self._pumps:
            pump.start()
        self._ids = 0
        hello = self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
        )
        assert hello["result"]["serverInfo"]["name"] == "wontopos-mcp"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    @staticmethod
    def _pump(stream: Any, put: Callable[[bytes], None]) -> None:
        with stream:
            for line in stream:
                put(line)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def start(self, method: str, params: dict[str, Any] | None = None) -> int:
        self._ids += 1
        self.send({"jsonrpc": "2.0", "id": self._ids, "method": method, **({"params": params} if params else {})})
        return self._ids

    def answer(self, request_id: int) -> dict[str, Any]:
        while True:
            message: dict[str, Any] = json.loads(self._lines.get(timeout=WAIT))
            if message.get("id") == request_id:
                return message

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.answer(self.start(method, params))

    def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.request("tools/call", {"name": name, "arguments": arguments})["result"]
        return result

    def logged(self, text: str) -> None:
        """Until the server has written ``text`` on stderr."""
        while text not in self.stderr.get(timeout=WAIT):
            pass

    def close(self) -> int:
        assert self.proc.stdin
        self.proc.stdin.close()
        code = self.proc.wait(timeout=WAIT)
        for pump in self._pumps:
            pump.join(WAIT)
        return code


@pytest.fixture
def sessions(tmp_path: Path, model_cache: Path, embedder: Any) -> Iterator[Callable[..., Session]]:
    """``sessions(*args, db=..., cwd=..., **env)``: stdio servers on ``tmp_path/db``, closed
    after the test, whose engines leave with the test's database directory. The session's
    model is converted first (``embedder``), so an engine only loads it."""
    opened: list[Session] = []

    def open_session(*args: str, db: Path | None = None, cwd: Path = REPO, **env: str) -> Session:
        session = Session(db or tmp_path / "db", server_env(model_cache, **env), *args, cwd=cwd)
        opened.append(session)
        return session

    yield open_session
    for session in opened:
        if session.proc.poll() is None:
            session.close()
    shutil.rmtree(tmp_path / "db", ignore_errors=True)  # its engines leave at once


def _texts(session: Session) -> list[str]:
    listed = session.call("memory_list", limit=100)["structuredContent"]
    return [memory["content"] for memory in listed["memories"]]


def test_sessions_share_one_engine_see_each_others_writes_at_once_and_it_leaves_with_its_database(
    sessions, tmp_path
) -> None:
    first, second = sessions(), sessions()
    (engine,) = engines_serving(tmp_path / "db")
    assert engine["clients"] == 2
    assert engine["version"] == wontopos_mcp.__version__

    added = first.call("memory_add", content="The deadline moved to Tuesday.")["structuredContent"]
    assert added["status"] == "stored"
    assert _texts(second) == ["The deadline moved to Tuesday."]
    status = subprocess.run(
        [sys.executable, "-m", "wontopos_mcp", "engine", "status"], env=server_env(""), cwd=REPO,
        capture_output=True, text=True, timeout=WAIT, check=True,
    )  # fmt: skip
    assert f"pid {engine['pid']}  version {wontopos_mcp.__version__}  2 clients" in status.stdout

    shutil.rmtree(tmp_path / "db")  # with both sessions still connected
    wait_until(lambda: not engines_serving(tmp_path / "db"), f"engine {engine['pid']} to leave with its database", WAIT)


def test_an_engine_killed_mid_write_answers_it_503_loses_no_acknowledged_write_and_the_next_call_gets_a_new_one(
    sessions, tmp_path
) -> None:
    session = sessions("--log-level", "debug")
    acknowledged = session.call("memory_add", content="Acknowledged before the kill.")["structuredContent"]
    assert acknowledged["status"] == "stored", acknowledged
    (engine,) = engines_serving(tmp_path / "db")

    turn = "a long turn about the quarterly plan. " * 40
    chat = [{"role": "user", "content": f"Message {i}: {turn}"} for i in range(100)]
    slow = session.start("tools/call", {"name": "memory_add_messages", "arguments": {"messages": chat}})
    session.logged(f"relayed tools/call id={slow}")
    os.kill(engine["pid"], signal.SIGKILL)

    lost = session.answer(slow)["result"]
    assert lost["isError"] is True
    error_body(lost["structuredContent"], 503, "unavailable_error")
    assert lost["structuredContent"]["error"]["retry_after_ms"] > 0
    assert json.loads(lost["content"][0]["text"]) == lost["structuredContent"]

    assert _texts(session) == ["Acknowledged before the kill."]  # the next call, on a new engine
    (new,) = engines_serving(tmp_path / "db")
    assert new["pid"] != engine["pid"]


def test_a_second_package_version_starts_its_own_engine(sessions, tmp_path) -> None:
    other = tmp_path / "other-version"
    shutil.copytree(REPO / "wontopos_mcp", other / "wontopos_mcp", ignore=shutil.ignore_patterns("__pycache__"))
    version = other / "wontopos_mcp" / "version.py"
    source = version.read_text()
    assert f'__version__ = "{wontopos_mcp.__version__}"' in source
    version.write_text(source.replace(f'__version__ = "{wontopos_mcp.__version__}"', '__version__ = "9.9.9"'))

    ours = sessions()
    theirs = sessions(cwd=other, PYTHONPATH=str(other))
    assert {engine["version"] for engine in engines_serving(tmp_path / "db")} == {wontopos_mcp.__version__, "9.9.9"}
    for session in (ours, theirs):
        assert {tool["name"] for tool in session.request("tools/list")["result"]["tools"]} == TOOLS


@pytest.fixture
def runtime() -> Iterator[Path]:
    """A runtime directory of the test's own (short: a socket path has a limit)."""
    root = Path(tempfile.mkdtemp(prefix="wos-t-"))
    yield root
    shutil.rmtree(root)


def _refused(done: subprocess.CompletedProcess[str], line: str) -> None:
    """One line on stderr saying ``line``, exit code 2, nothing on stdout."""
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1
    assert line in done.stderr


def test_the_relay_refuses_a_directory_or_socket_others_can_open(tmp_path, model_cache, runtime) -> None:
    def start() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "wontopos_mcp", "--db", str(tmp_path / "db")], input="", capture_output=True,
            text=True, env=server_env(model_cache, XDG_RUNTIME_DIR=str(runtime)), cwd=REPO, timeout=WAIT,
        )  # fmt: skip

    place = runtime / "wontopos-mcp"
    place.mkdir()
    place.chmod(0o755)
    done = start()
    _refused(done, f"refusing the shared engine's directory {place}")

    place.chmod(0o700)
    settings = Settings.load({"db": str(tmp_path / "db"), "model_cache": str(model_cache)}, environ={})
    planted = place / f"{engines.engine_key(settings, wontopos_mcp.__version__)}.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listening:
        listening.bind(str(planted))
        listening.listen()
        planted.chmod(0o666)
        done = start()
    _refused(done, f"refusing the shared engine's socket {planted}")


def test_opting_out_runs_the_engine_in_the_stdio_process(sessions, tmp_path) -> None:
    session = sessions(WONTOPOS_ENGINE="inprocess")
    assert session.call("stores_list")["structuredContent"]["stores"][0]["user_id"] == "default"
    assert engines_serving(tmp_path / "db") == []


def test_an_engine_leaves_when_its_last_client_has_been_gone_for_its_idle_time(sessions, tmp_path) -> None:
    session = sessions(WONTOPOS_ENGINE_IDLE="1")
    (engine,) = engines_serving(tmp_path / "db")
    assert session.close() == 0
    wait_until(lambda: not engines_serving(tmp_path / "db"), f"engine {engine['pid']} to leave", WAIT)
