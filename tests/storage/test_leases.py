"""Leases on object storage: the conditional writes they are built on, acquiring,
renewing, taking over from a dead holder, losing a lease, and the ``--writers`` modes,
against a real S3 and DynamoDB API (moto's server on loopback) and a real Azure Blob API
(Azurite on loopback).

``gs://`` is tested here only as far as no server is needed (the URI, the configuration,
the missing SDK): the one GCS emulator on PyPI, gcp-storage-emulator, ignores
``ifGenerationMatch`` altogether (a second create and a stale replace both succeed), so
a conformance run against it would prove nothing.

The races between whole server replicas are in ``test_replicas.py``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure_emulator import AzureEmulator
from s3_emulator import CREDENTIALS, free_port
from support import REPO

from wontopos_mcp.errors import ConfigError
from wontopos_mcp.storage.adapter import Store
from wontopos_mcp.storage.locks.coordination import LeaseCoordinator, coordinator_for, lease_name
from wontopos_mcp.storage.locks.lease import LeaseBackend, LeaseBusy, LeaseLost, Leases, LeaseTiming
from wontopos_mcp.storage.locks.object_leases import (
    AzureLeaseBackend,
    DynamoLeaseBackend,
    GcsLeaseBackend,
    S3LeaseBackend,
    backend_for,
)

pytestmark = pytest.mark.emulator

FAST = LeaseTiming.from_ttl_ms(1000)  # TTL 1 s, margin 0.2 s: takeovers within seconds
DDB_TABLE = "lance-commits"


def _options(endpoint: str) -> dict[str, str]:
    return {
        "endpoint": endpoint,
        "dynamodb_endpoint": endpoint,
        "allow_http": "true",
        "region": "us-east-1",
        "aws_access_key_id": "test",
        "aws_secret_access_key": "test",
    }


@pytest.fixture(scope="module")
def ddb_table(s3_endpoint: str) -> str:
    """LanceDB's DynamoDB commit-store table layout (``base_uri`` S, ``version`` N)."""
    import boto3

    client = boto3.client(
        "dynamodb",
        endpoint_url=s3_endpoint,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=CREDENTIALS["AWS_REGION"],
    )
    client.create_table(
        TableName=DDB_TABLE,
        KeySchema=[{"AttributeName": "base_uri", "KeyType": "HASH"}, {"AttributeName": "version", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "base_uri", "AttributeType": "S"},
            {"AttributeName": "version", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return DDB_TABLE


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzureEmulator]:
    """Azurite's blob service with one container, ``leases``, for this module."""
    with AzureEmulator(tmp_path_factory.mktemp("azurite")) as emulator:
        emulator.container("leases")
        yield emulator


@pytest.fixture(params=["s3", "s3+ddb", "az"])
def backend(request: pytest.FixtureRequest) -> LeaseBackend:
    prefix = f"leases-{uuid.uuid4().hex[:8]}"
    if request.param == "az":
        azurite: AzureEmulator = request.getfixturevalue("azurite")
        return backend_for(f"az://leases/{prefix}", azurite.storage_options())
    s3_endpoint = request.getfixturevalue("s3_endpoint")
    if request.param == "s3":
        return backend_for(f"s3://exists/{prefix}", _options(s3_endpoint))
    table = request.getfixturevalue("ddb_table")
    return backend_for(f"s3+ddb://exists/{prefix}?ddbTableName={table}", _options(s3_endpoint))


@pytest.fixture
def no_cloud_settings(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No Azure or Google setting of the machine's reaches the backend under test."""
    for var in list(os.environ):
        if var.startswith(("AZURE_", "AZURITE_", "GOOGLE_", "STORAGE_EMULATOR")) or var == "SERVICE_ACCOUNT":
            monkeypatch.delenv(var)
    return monkeypatch


# --- the conditional writes --------------------------------------------------------------------


def test_the_backends_are_chosen_by_the_uri(s3_endpoint: str, ddb_table: str, no_cloud_settings: Any) -> None:
    assert isinstance(backend_for("s3://exists/db", _options(s3_endpoint)), S3LeaseBackend)
    chosen = backend_for(f"s3+ddb://exists/db?ddbTableName={ddb_table}", _options(s3_endpoint))
    assert isinstance(chosen, DynamoLeaseBackend)
    assert chosen.table == ddb_table
    key = {"account_key": "a2V5"}
    for uri, account, container in [
        ("az://box/team/db", "acct", "box"),
        ("abfss://box/team/db", "acct", "box"),
        ("azure://box/team/db", "acct", "box"),
        ("abfs://box@other.dfs.core.windows.net/team/db", "other", "box"),  # the account in the URI
    ]:
        options = key if "@" in uri else {**key, "azure_storage_account_name": account}
        azure = backend_for(uri, options)
        assert isinstance(azure, AzureLeaseBackend), uri
        assert azure.prefix == "team/db", uri
        assert azure.container.container_name == container, uri
        assert azure.container.account_name == account, uri
        assert azure.container.url.startswith(f"https://{account}.blob.core.windows.net/{container}"), uri
    no_cloud_settings.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")  # anonymous: no credentials looked up
    gcs = backend_for("gs://pail/team/db/", {})
    assert isinstance(gcs, GcsLeaseBackend)
    assert gcs.bucket.name == "pail"
    assert gcs.prefix == "team/db"


@pytest.mark.parametrize(
    ("uri", "words"),
    [
        ("db://cloud-db", "db:// databases cannot be shared by several writers (leases are built for s3://"),
        ("memory://db", "memory:// databases cannot be shared by several writers"),
        ("s3+ddb://bucket/db", "needs ?ddbTableName="),
        ("az://box/db", "an Azure database needs its storage account: azure_storage_account_name"),
        ("gs://pail/db", "no Google credentials for its leases"),
    ],
)
def test_a_store_without_a_lease_backend_is_refused_in_one_line(
    uri: str, words: str, no_cloud_settings: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    no_cloud_settings.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match=re.escape(words)) as refused:
        backend_for(uri, {})
    assert "\n" not in str(refused.value)


def test_an_azure_account_without_a_key_or_sas_is_refused(no_cloud_settings: pytest.MonkeyPatch) -> None:
    """Without azure-identity (not a dependency) there is no managed identity to fall back on."""
    no_cloud_settings.setitem(sys.modules, "azure.identity", None)  # as where it is not installed
    with pytest.raises(ConfigError, match="needs azure_storage_account_key or a SAS token"):
        backend_for("az://box/db", {"account_name": "acct"})


@pytest.mark.parametrize(
    ("uri", "module", "extra"),
    [
        ("s3://bucket/db", "boto3", "s3"),
        ("az://box/db", "azure.storage.blob", "azure"),
        ("gs://pail/db", "google.cloud.storage", "gcs"),
    ],
)
def test_a_missing_cloud_sdk_names_the_extra_to_install(
    uri: str, module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # what an uninstalled package looks like to import
    with pytest.raises(ConfigError) as refused:
        backend_for(uri, {})
    assert str(refused.value) == (
        f"a database on {uri.split('//')[0]}// needs {module.replace('.', '-')} for its leases: "
        f"pip install 'wontopos-mcp[{extra}]'"
    )


def test_the_azure_emulator_settings_lancedb_reads_reach_azurite(
    azurite: AzureEmulator, no_cloud_settings: pytest.MonkeyPatch
) -> None:
    """``use_emulator`` (object_store's key): Azurite's account and key by default, at
    ``AZURITE_BLOB_STORAGE_URL``."""
    no_cloud_settings.setenv("AZURITE_BLOB_STORAGE_URL", azurite.url)
    emulated = backend_for(f"az://leases/emu-{uuid.uuid4().hex[:8]}", {"use_emulator": "true"})
    token = emulated.create("lease", b"one")
    assert token is not None
    assert emulated.read("lease") == (token, b"one")
    no_cloud_settings.setenv("AZURE_STORAGE_USE_EMULATOR", "true")  # the same, from the environment
    assert backend_for(f"az://leases/{uuid.uuid4().hex[:8]}", {}).create("lease", b"two") is not None


def test_a_missing_azure_container_is_an_error_not_a_busy_lease(azurite: AzureEmulator) -> None:
    from azure.core.exceptions import ResourceNotFoundError

    missing = backend_for("az://no-such-container/db", azurite.storage_options())
    with pytest.raises(ResourceNotFoundError):
        missing.create("lease", b"one")


def test_create_only_if_absent_replace_and_delete_only_if_unchanged(backend: LeaseBackend) -> None:
    first = backend.create("lease", b"one")
    assert first is not None
    assert backend.create("lease", b"two") is None  # it exists: nobody else gets it
    second = backend.replace("lease", first, b"three")
    assert second is not None
    assert second != first
    assert backend.replace("lease", first, b"four") is None  # a stale version changes nothing
    assert backend.read("lease") == (second, b"three")
    backend.delete("lease", first)  # stale: left alone
    assert backend.read("lease") == (second, b"three")
    backend.delete("lease", second)
    assert backend.read("lease") is None
    assert backend.replace("lease", second, b"five") is None  # gone: nothing to replace
    assert backend.create("lease", b"six") is not None


# --- acquiring, renewing, taking over ------------------------------------------------------------


def test_a_held_lease_is_busy_for_others_and_free_once_released(backend: LeaseBackend) -> None:
    mine, theirs = Leases(backend, FAST), Leases(backend, FAST)
    lease = mine.acquire("store-a")
    try:
        with pytest.raises(LeaseBusy) as refused:
            theirs.acquire("store-a", wait=0.3)
        assert refused.value.status == 503
        assert refused.value.details["retry_after_ms"] == 1000
        other = theirs.acquire("store-b", wait=0.3)  # another name is another lease
        theirs.release(other)
    finally:
        mine.release(lease)
    again = theirs.acquire("store-a", wait=0.3)
    theirs.release(again)


def test_a_live_holder_keeps_its_lease_past_the_ttl(backend: LeaseBackend) -> None:
    """Renewals change the lease's version, so a waiter never sees it unchanged for the
    TTL and never takes it over, however long it waits."""
    holder, waiter = Leases(backend, FAST), Leases(backend, FAST)
    lease = holder.acquire("db")
    try:
        with pytest.raises(LeaseBusy):
            waiter.acquire("db", wait=3 * FAST.ttl_s)
        assert lease.valid()
        assert lease.renewals >= 3
    finally:
        holder.release(lease)


class CutOff:
    """A holder's way to the lease store that fails every request once ``cut`` is set,
    as a holder's does when it is cut off (its renewals no longer arrive)."""

    def __init__(self, backend: LeaseBackend) -> None:
        self.backend = backend
        self.cut = threading.Event()

    def _through(self) -> LeaseBackend:
        if self.cut.is_set():
            raise ConnectionError("cut off from the lease store")
        return self.backend

    def create(self, name: str, body: bytes) -> str | None:
        return self._through().create(name, body)

    def replace(self, name: str, token: str, body: bytes) -> str | None:
        return self._through().replace(name, token, body)

    def delete(self, name: str, token: str) -> None:
        self._through().delete(name, token)

    def read(self, name: str) -> tuple[str, bytes] | None:
        return self._through().read(name)


def test_a_dead_holder_is_taken_over_after_the_ttl_and_then_knows_it(backend: LeaseBackend) -> None:
    way = CutOff(backend)
    holder, waiter = Leases(way, FAST), Leases(backend, FAST)
    dead = holder.acquire("db")
    way.cut.set()  # the holder is cut off: no more renewals arrive (as if it stalled or died)
    started = time.monotonic()
    taken = waiter.acquire("db")
    waited = time.monotonic() - started
    try:
        assert waited >= FAST.takeover_s  # never before the TTL plus the margin
        assert not dead.valid()  # the stalled holder stopped trusting its lease before that
        with pytest.raises(LeaseLost) as lost:
            holder.check(dead)
        assert lost.value.status == 503
        assert "retry_after_ms" in lost.value.details
    finally:
        waiter.release(taken)
        holder.release(dead)  # stops its renewals; its delete fails, cut off, and is only logged


def test_a_holder_whose_lease_was_taken_learns_it_at_the_next_renewal(backend: LeaseBackend) -> None:
    holder = Leases(backend, FAST)
    lease = holder.acquire("db")
    stolen = backend.replace("db", lease.token, b"someone else")  # as a takeover would
    assert stolen is not None
    deadline = time.monotonic() + 3 * FAST.ttl_s
    while not lease.lost and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lease.lost
    assert not lease.valid()
    holder.release(lease)
    assert backend.read("db") == (stolen, b"someone else")  # a lost lease is not deleted


# --- the coordinator over them -------------------------------------------------------------------


def _coordinator(endpoint: str, uri: str, writers: str) -> LeaseCoordinator:
    chosen = coordinator_for(uri, writers=writers, storage_options=_options(endpoint), timing=FAST)
    assert isinstance(chosen, LeaseCoordinator)
    return chosen


def test_leased_replicas_exclude_each_other_per_store_not_across_stores(s3_endpoint: str) -> None:
    uri = f"s3://exists/coord-{uuid.uuid4().hex[:8]}"
    one, two = _coordinator(s3_endpoint, uri, "leased"), _coordinator(s3_endpoint, uri, "leased")
    inside = threading.Event()
    with one.hold("alice"), one.hold("alice"):  # re-entrant
        with two.hold("bob"):  # another store: at the same time
            inside.set()
        with pytest.raises(LeaseBusy):
            two.leases().acquire(lease_name("alice"), wait=0.3)
        with two.upkeep() as maintains:
            assert maintains  # nobody holds the database lease: this one maintains
    assert inside.is_set()
    with one.hold(None):  # the database lease held: the other leaves upkeep to it
        with two.upkeep() as maintains:
            assert not maintains
    with two.hold("alice"):  # released: free at once
        pass


def _take_over(lease_store: LeaseBackend, name: str) -> None:
    """Replace the lease ``name`` as another replica's takeover would (read its version,
    replace that one; a renewal in between changes the version, so read again)."""
    for _ in range(20):
        held = lease_store.read(name)
        assert held is not None, f"nobody holds {name}"
        if lease_store.replace(name, held[0], b"taken") is not None:
            return
    raise AssertionError(f"{name} was renewed under every takeover")


@pytest.mark.parametrize("scheme", ["s3", "az"])
def test_a_store_refuses_to_commit_once_its_lease_was_lost(scheme: str, request: pytest.FixtureRequest) -> None:
    """The holder checks its lease before every commit: a lost one is a 503 and the
    commit does not happen. On az://, LanceDB itself runs on Azurite too."""
    if scheme == "az":
        uri, options = f"az://leases/lost-{uuid.uuid4().hex[:8]}", request.getfixturevalue("azurite").storage_options()
    else:
        uri, options = f"s3://exists/lost-{uuid.uuid4().hex[:8]}", _options(request.getfixturevalue("s3_endpoint"))
    store = Store(uri, storage_options=options, writers="leased", lease=FAST)
    other = coordinator_for(uri, writers="leased", storage_options=options, timing=FAST)  # another replica
    assert isinstance(other, LeaseCoordinator)
    row = {"key": "probe", "kind": "probe", "user_id": "", "name": "x", "created_us": 0, "value": ""}
    try:
        store.connect()
        with store.write_lock("alice"):
            _take_over(other.leases().backend, lease_name("alice"))
            # The holder's lease was last renewed before the theft: a third of the TTL
            # later its renewal finds it taken, and the TTL less the margin later it has
            # lapsed anyway, so after one TTL the holder no longer trusts it, whichever.
            time.sleep(FAST.ttl_s)
            with pytest.raises(LeaseLost):
                store.registry.insert([row])
        assert store.registry.rows("key = 'probe'") == []
    finally:
        store.close()
        other.close()


# --- --writers single: one writing process, a second refused at start ------------------------------


def _server(db: str, endpoint: str, home: Path, port: int, *extra: str) -> subprocess.Popen[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("WONTOPOS_", "AWS_"))},
        **CREDENTIALS,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ENDPOINT": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "HOME": str(home),
        "WONTOPOS_DB": db,
        "WONTOPOS_LEASE_TTL_MS": "1500",
        "PYTHONPATH": str(REPO),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "wontopos_mcp", "--transport", "http", "--port", str(port), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _serving(process: subprocess.Popen[str], port: int, timeout: float = 90) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("the server did not answer /healthz in time")


@pytest.fixture
def stopping() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=30)


def test_a_second_single_writer_stops_at_start_naming_the_flag(
    s3_endpoint: str, tmp_path: Path, stopping: list[Any]
) -> None:
    db = f"s3://exists/single-{uuid.uuid4().hex[:8]}"
    port = free_port()
    first = _server(db, s3_endpoint, tmp_path, port)
    stopping.append(first)
    _serving(first, port)
    second = _server(db, s3_endpoint, tmp_path, free_port())
    stopping.append(second)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 2
    assert out == ""
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert "another process is writing this database" in line
    assert "--writers leased" in line
    # Stopped the way a service manager stops it, the first releases the database: a new
    # writer starts without waiting out the lease.
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=60)
    backend = backend_for(db, _options(s3_endpoint))
    assert backend.read("database") is None


def test_leased_writers_on_a_store_without_a_lease_backend_stop_at_start(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("WONTOPOS_")}, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "wontopos_mcp", "--db", "db://cloud-db", "--writers", "leased", "stores", "list"],
        env={**env, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "wontopos-mcp: db:// databases cannot be shared by several writers (leases are built for s3://, "
        "s3+ddb://, gs:// and az://); run a single writer (--writers single) or use one of those stores"
    ]


@pytest.mark.parametrize("value", ["many", "leased,single", "1"])
def test_a_bad_writers_setting_is_refused(value: str) -> None:
    from wontopos_mcp.config import ConfigError, Settings

    with pytest.raises(ConfigError, match="writers must be one of single, leased"):
        Settings.load({"writers": value}, environ={})
    assert Settings.load(environ={"WONTOPOS_WRITERS": " Leased "}).writers == "leased"
