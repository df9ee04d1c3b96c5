"""A local Azure Blob API for tests: Azurite's blob service, started and always stopped here.

``with AzureEmulator(work_dir) as azurite:`` starts ``npx -y -p azurite@3.37.0 azurite-blob``
(the blob service alone: Azurite's full launcher also takes the fixed queue and table
ports) on 127.0.0.1 at a free port, waits (bounded; the first run on a machine downloads
the package) until it answers, and stops it on exit, whatever happened. ``container(name)``
creates a container; ``storage_options()`` is how a database reaches it.

Azurite enforces ``If-None-Match: *`` and ``If-Match`` on Put Blob and Delete Blob (409
``BlobAlreadyExists`` / 412 ``ConditionNotMet``, checked when this was written), so
races against it are real races.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from s3_emulator import free_port

from wontopos_mcp.object_leases import AZURITE_ACCOUNT, AZURITE_KEY

AZURITE = "azurite@3.37.0"
START_TIMEOUT = 120.0  # seconds: a cold npm cache downloads Azurite first


class AzureEmulator:
    """Azurite's blob service on a free loopback port, in a process group of its own
    (npx starts node under a shell), so stopping it leaves nothing behind."""

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.log_path = work_dir / "azurite.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"  # AZURITE_BLOB_STORAGE_URL's form
        self.endpoint = f"{self.url}/{AZURITE_ACCOUNT}"  # the account's blob endpoint
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[str] | None = None

    def __enter__(self) -> AzureEmulator:
        npx = shutil.which("npx")
        if npx is None:
            raise RuntimeError("Azurite needs Node.js and npm (npx) on PATH")
        data = self.work_dir / "data"
        data.mkdir(exist_ok=True)
        self._log = self.log_path.open("w", encoding="utf-8")
        self._process = subprocess.Popen(
            [npx, "-y", "-p", AZURITE, "azurite-blob", "--blobHost", "127.0.0.1", "--blobPort", str(self.port)]
            + ["--location", str(data), "--silent", "--skipApiVersionCheck"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
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
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"Azurite exited at start; see {self.log_path}")
            try:
                self.service().get_service_properties()
                return
            except Exception:  # not listening yet
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Azurite did not answer within {START_TIMEOUT:.0f} s") from None
                time.sleep(0.2)

    def stop(self) -> None:
        """Kill Azurite's process group (npx, its shell and node) and reap it."""
        if self._process is not None and self._process.poll() is None:
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._process.wait(timeout=15)
        if self._log is not None:
            self._log.close()
            self._log = None

    def service(self) -> Any:
        from azure.core.credentials import AzureNamedKeyCredential
        from azure.storage.blob import BlobServiceClient

        credential = AzureNamedKeyCredential(AZURITE_ACCOUNT, AZURITE_KEY)
        return BlobServiceClient(self.endpoint, credential=credential, retry_total=0, connection_timeout=2)

    def container(self, name: str) -> str:
        self.service().create_container(name)
        return name

    def storage_options(self) -> dict[str, str]:
        """The account, its key and the endpoint, as LanceDB's Azure storage options."""
        return {
            "account_name": AZURITE_ACCOUNT,
            "account_key": AZURITE_KEY,
            "endpoint": self.endpoint,
            "allow_http": "true",  # for LanceDB's object_store; the SDK takes http as given
        }
