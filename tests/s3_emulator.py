"""A local S3 API for tests and benches: ``moto``'s server, started and always stopped here.

``with S3Emulator(log_dir) as s3:`` starts ``python -m moto.server`` on 127.0.0.1 at a free
port, waits (bounded) until it answers an S3 call, and stops it on exit, whatever
happened. ``s3.bucket(name)`` creates a bucket; ``s3.env()`` is what a server process
needs to reach it (the standard ``AWS_*`` variables LanceDB reads); ``s3.storage_options()``
is the same for ``lancedb.connect`` in this process.

moto enforces ``If-None-Match``/``If-Match`` on PUT and DELETE (the conditional writes
LanceDB's commits and our lease rely on), so races against it are real races.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

START_TIMEOUT = 20.0  # seconds for moto to answer its first call
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


_Server = TypeVar("_Server", bound="LoopbackServer")


class LoopbackServer:
    """A server subprocess on a free loopback port, waited for (bounded) and always
    stopped: subclasses say how to start it (``command``) and how to ask it something
    (``answer``). ``own_group``: it runs in a process group of its own (a launcher that
    starts the server under a shell), killed whole."""

    name = "the server"
    start_timeout = START_TIMEOUT
    own_group = False

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[str] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def answer(self) -> None:
        """One call the server answers once it is up (raises until then)."""
        raise NotImplementedError

    def __enter__(self: _Server) -> _Server:
        command = self.command()
        self._log = self.log_path.open("w", encoding="utf-8")
        self._process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=self.own_group
        )
        try:
            self._wait_until_it_answers()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _wait_until_it_answers(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start; see {self.log_path}")
            try:
                self.answer()
                return
            except Exception:  # noqa: BLE001 - not listening yet: connection refused, reset, a bad status line ...
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} did not answer within {self.start_timeout:.0f} s") from None
                time.sleep(0.1)

    def stop(self) -> None:
        """Kill the server (nothing of its state is worth a graceful stop) and reap it."""
        if self._process is not None and self._process.poll() is None:
            if self.own_group:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, signal.SIGKILL)  # the group this process started
            else:
                self._process.kill()
            self._process.wait(timeout=15)
        if self._log is not None:
            self._log.close()
            self._log = None


class S3Emulator(LoopbackServer):
    """moto's S3 on a free loopback port, a subprocess of this one."""

    name = "moto's server"

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir / "moto.log")
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]

    def answer(self) -> None:
        self.client().list_buckets()

    def client(self) -> Any:
        import boto3  # moto[server] brings it (test extra)
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=CREDENTIALS["AWS_REGION"],
            config=Config(connect_timeout=2, read_timeout=10, retries={"max_attempts": 1}),
        )

    def bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def env(self) -> dict[str, str]:
        """The variables a server process reads to use this endpoint."""
        return {
            **CREDENTIALS,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def storage_options(self) -> dict[str, str]:
        """The same, as LanceDB storage options (for ``lancedb.connect`` in this process)."""
        return {
            "endpoint": self.endpoint,
            "allow_http": "true",
            "region": CREDENTIALS["AWS_REGION"],
            "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        }
