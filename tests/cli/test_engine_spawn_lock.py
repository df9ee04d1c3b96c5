"""The spawn lock an engine's starter holds until the engine accepts: a command that finds
no engine but the lock held waits for the engine being started instead of starting its
own, and gives up (running alone) when none comes; an engine started in the background
inherits the lock and lets it go once its socket accepts.

Plain files and sockets in a temporary directory, no engine: the lock's rules alone.
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from wontopos_mcp.cli import engines


def _hold(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_a_command_waits_for_the_engine_being_started_and_connects_to_it(tmp_path: Path) -> None:
    place = engines.Place(tmp_path, "e-test")
    starter = _hold(place.lock)
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def engine_accepts() -> None:
        time.sleep(0.3)
        listening.bind(str(place.socket))
        os.chmod(place.socket, 0o600)  # as an engine's socket is
        listening.listen(1)
        os.close(starter)  # the engine lets the spawn lock go once it accepts

    threading.Thread(target=engine_accepts).start()
    begun = time.monotonic()
    sock = engines.connect_or_wait(place)
    try:
        assert sock is not None
        assert time.monotonic() - begun >= 0.25
    finally:
        if sock is not None:
            sock.close()
        listening.close()


def test_with_no_engine_and_no_starter_a_command_runs_alone_at_once(tmp_path: Path) -> None:
    begun = time.monotonic()
    assert engines.connect_or_wait(engines.Place(tmp_path, "e-test")) is None
    assert time.monotonic() - begun < 1.0


def test_a_starter_that_never_lets_go_is_waited_for_only_so_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    place = engines.Place(tmp_path, "e-test")
    held = _hold(place.lock)
    monkeypatch.setattr(engines, "START_TIMEOUT", 0.3)
    try:
        begun = time.monotonic()
        assert engines.connect_or_wait(place) is None
        assert 0.25 <= time.monotonic() - begun < 2.0
    finally:
        os.close(held)


def test_an_engine_started_in_the_background_lets_the_inherited_lock_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    place = engines.Place(tmp_path, "e-test")
    inherited = _hold(place.lock)
    monkeypatch.setenv(engines.SPAWN_LOCK_FD, str(inherited))
    engines.let_spawn_lock_go()
    assert engines.SPAWN_LOCK_FD not in os.environ
    probe = os.open(place.lock, os.O_RDWR)
    try:
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: no BlockingIOError
    finally:
        os.close(probe)
