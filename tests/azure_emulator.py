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

import shutil
from pathlib import Path
from typing import Any

from s3_emulator import LoopbackServer

from wontopos_mcp.storage.locks.object_leases import AZURITE_ACCOUNT, AZURITE_KEY

AZURITE = "azurite@3.37.0"
START_TIMEOUT = 120.0  # seconds: a cold npm cache downloads Azurite first


class AzureEmulator(LoopbackServer):
    """Azurite's blob service on a free loopback port, in a process group of its own
    (npx starts node under a shell), so stopping it leaves nothing behind."""

    name = "Azurite"
    start_timeout = START_TIMEOUT
    own_group = True

    def __init__(self, work_dir: Path) -> None:
        super().__init__(work_dir / "azurite.log")
        self.data = work_dir / "data"
        self.url = f"http://127.0.0.1:{self.port}"  # AZURITE_BLOB_STORAGE_URL's form
        self.endpoint = f"{self.url}/{AZURITE_ACCOUNT}"  # the account's blob endpoint

    def command(self) -> list[str]:
        npx = shutil.which("npx")
        if npx is None:
            raise RuntimeError("Azurite needs Node.js and npm (npx) on PATH")
        self.data.mkdir(exist_ok=True)
        serve = ["--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--location", str(self.data)]
        return [npx, "-y", "-p", AZURITE, "azurite-blob", *serve, "--silent", "--skipApiVersionCheck"]

    def answer(self) -> None:
        self.service().get_service_properties()

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
