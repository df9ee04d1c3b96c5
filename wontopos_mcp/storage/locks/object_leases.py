"""Lease backends (``lease.LeaseBackend``) for the object stores LanceDB runs on, through
the cloud SDK its own configuration implies (boto3, azure-storage-blob,
google-cloud-storage), configured from the same storage options and standard variables
LanceDB (its object_store) reads, so one configuration points both at the same place. No
request is signed by hand; a missing SDK is a ``ConfigError`` naming the extra to install.

* ``s3://``: an object under ``<database>/_wontopos/leases/``, created with
  ``If-None-Match: *``, rewritten and deleted with ``If-Match: <etag>`` (S3 since 2024;
  MinIO, R2 and moto honour them too).
* ``s3+ddb://``: LanceDB's DynamoDB commit store, for S3-compatible stores that ignore
  those headers: the lease is an item in the same DynamoDB table, under a ``base_uri``
  LanceDB never uses, written with condition expressions.
* ``az://`` (and ``abfs[s]://``, ``azure://``, ``adl://``, LanceDB's other spellings): a
  blob in the container, the same conditional headers on Put Blob and Delete Blob, the
  ETag as token (Azurite honours them).
* ``gs://``: an object in the bucket, created with ``ifGenerationMatch=0``, rewritten and
  deleted with ``ifGenerationMatch=<generation>``, the generation as token.

Any other scheme has no backend (``backend_for`` says so in one line).
"""

from __future__ import annotations

import importlib
import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, parse_qs, urlsplit

from wontopos_mcp.errors import ConfigError

from .lease import LeaseBackend

LEASE_DIR = "_wontopos/leases"
_TIMEOUTS = {"connect_timeout": 3, "read_timeout": 10, "retries": {"max_attempts": 3, "mode": "standard"}}


def _lease_key(prefix: str, name: str) -> str:
    """Where lease ``name`` of the database at ``prefix`` lives in its bucket or container."""
    prefix = prefix.strip("/")
    return f"{prefix}/{LEASE_DIR}/{name}" if prefix else f"{LEASE_DIR}/{name}"


def _option(options: Mapping[str, str], *names: str, env: tuple[str, ...] = ()) -> str | None:
    """The first of ``names`` in the storage options (any case), else of ``env``."""
    lowered = {k.lower(): v for k, v in options.items()}
    for name in names:
        if lowered.get(name):
            return lowered[name]
    for var in env:
        if os.environ.get(var):
            return os.environ[var]
    return None


def _sdk(module: str, scheme: str, extra: str) -> Any:
    """The cloud SDK ``module``, or the one line that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.replace(".", "-")  # boto3, azure-storage-blob, google-cloud-storage
        raise ConfigError(
            f"a database on {scheme} needs {package} for its leases: pip install 'wontopos-mcp[{extra}]'"
        ) from None


def _client(service: str, options: Mapping[str, str], endpoint: str | None) -> Any:
    from botocore.config import Config

    virtual = (_option(options, "virtual_hosted_style_request", "aws_virtual_hosted_style_request") or "").lower()
    style = "virtual" if virtual == "true" or endpoint is None else "path"
    return _sdk("boto3", "s3://", "s3").client(
        service,
        endpoint_url=endpoint,
        region_name=_option(options, "region", "aws_region", env=("AWS_REGION", "AWS_DEFAULT_REGION")) or "us-east-1",
        aws_access_key_id=_option(options, "aws_access_key_id", "access_key_id"),
        aws_secret_access_key=_option(options, "aws_secret_access_key", "secret_access_key"),
        aws_session_token=_option(options, "aws_session_token", "session_token"),
        config=Config(s3={"addressing_style": style}, **_TIMEOUTS),
    )


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


_LOST = {"PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "412", "409", "404"}


class S3LeaseBackend:
    """Leases as objects in the database's bucket, next to its tables."""

    def __init__(self, bucket: str, prefix: str, client: Any) -> None:
        self.bucket, self.prefix, self.client = bucket, prefix.strip("/"), client

    def _key(self, name: str) -> str:
        return _lease_key(self.prefix, name)

    def _put(self, name: str, body: bytes, **condition: str) -> str | None:
        from botocore.exceptions import ClientError

        try:
            answer = self.client.put_object(Bucket=self.bucket, Key=self._key(name), Body=body, **condition)
        except ClientError as exc:
            if _code(exc) in _LOST:
                return None
            raise
        return str(answer["ETag"])

    def create(self, name: str, body: bytes) -> str | None:
        return self._put(name, body, IfNoneMatch="*")

    def replace(self, name: str, token: str, body: bytes) -> str | None:
        return self._put(name, body, IfMatch=token)

    def delete(self, name: str, token: str) -> None:
        from botocore.exceptions import ClientError

        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(name), IfMatch=token)
        except ClientError as exc:
            if _code(exc) not in _LOST:
                raise

    def read(self, name: str) -> tuple[str, bytes] | None:
        from botocore.exceptions import ClientError

        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(name))
        except ClientError as exc:
            if _code(exc) in _LOST:
                return None
            raise
        return str(answer["ETag"]), answer["Body"].read()


class DynamoLeaseBackend:
    """Leases as items of LanceDB's DynamoDB commit-store table (``base_uri`` hash key,
    ``version`` range key): ``base_uri`` is ``wontopos-lease:<bucket>/<path>/<name>``,
    which no LanceDB table uses, ``version`` 0; ``token`` changes on every write."""

    def __init__(self, table: str, base: str, client: Any) -> None:
        self.table, self.base, self.client = table, base, client

    def _item_key(self, name: str) -> dict[str, Any]:
        return {"base_uri": {"S": f"wontopos-lease:{self.base}/{name}"}, "version": {"N": "0"}}

    def _put(self, name: str, body: bytes, condition: str, values: dict[str, Any] | None = None) -> str | None:
        token = uuid.uuid4().hex
        item = {**self._item_key(name), "token": {"S": token}, "body": {"B": body}}
        extra = {"ExpressionAttributeValues": values, "ExpressionAttributeNames": {"#t": "token"}} if values else {}
        try:
            self.client.put_item(TableName=self.table, Item=item, ConditionExpression=condition, **extra)
        except self.client.exceptions.ConditionalCheckFailedException:
            return None
        return token

    def create(self, name: str, body: bytes) -> str | None:
        return self._put(name, body, "attribute_not_exists(base_uri)")

    def replace(self, name: str, token: str, body: bytes) -> str | None:
        return self._put(name, body, "#t = :old", {":old": {"S": token}}) if token else None

    def delete(self, name: str, token: str) -> None:
        try:
            self.client.delete_item(
                TableName=self.table,
                Key=self._item_key(name),
                ConditionExpression="#t = :old",
                ExpressionAttributeNames={"#t": "token"},
                ExpressionAttributeValues={":old": {"S": token}},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return

    def read(self, name: str) -> tuple[str, bytes] | None:
        answer = self.client.get_item(TableName=self.table, Key=self._item_key(name), ConsistentRead=True)
        item = answer.get("Item")
        return None if item is None else (item["token"]["S"], bytes(item["body"]["B"]))


AZURE_SCHEMES = ("az", "abfs", "abfss", "azure", "adl")
LEASED_SCHEMES = ("s3", "s3+ddb", "gs", *AZURE_SCHEMES)  # the schemes ``backend_for`` has a backend for
# Azurite's one account and its key, public and the same everywhere (object_store's defaults too).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
_TRUE = ("true", "1", "yes", "y", "on")
_GCS_TIMEOUT = (3, 10)  # (connect, read) seconds, as for S3


class AzureLeaseBackend:
    """Leases as blobs in the database's container (``container`` is the SDK's
    ``ContainerClient``); a token is the blob's ETag."""

    def __init__(self, container: Any, prefix: str) -> None:
        self.container, self.prefix = container, prefix.strip("/")

    def _put(self, name: str, body: bytes, **condition: Any) -> str | None:
        from azure.core.exceptions import ResourceExistsError, ResourceModifiedError

        blob = self.container.get_blob_client(_lease_key(self.prefix, name))
        try:  # a missing container (404) is an error, not a lost condition
            answer = blob.upload_blob(body, overwrite=True, **condition)
        except (ResourceExistsError, ResourceModifiedError):  # 409: it exists; 412: not that version (or gone)
            return None
        return str(answer["etag"])

    def create(self, name: str, body: bytes) -> str | None:
        from azure.core import MatchConditions

        return self._put(name, body, match_condition=MatchConditions.IfMissing)

    def replace(self, name: str, token: str, body: bytes) -> str | None:
        from azure.core import MatchConditions

        return self._put(name, body, etag=token, match_condition=MatchConditions.IfNotModified)

    def delete(self, name: str, token: str) -> None:
        from azure.core import MatchConditions
        from azure.core.exceptions import ResourceModifiedError, ResourceNotFoundError

        blob = self.container.get_blob_client(_lease_key(self.prefix, name))
        try:
            blob.delete_blob(etag=token, match_condition=MatchConditions.IfNotModified)
        except (ResourceModifiedError, ResourceNotFoundError):
            return

    def read(self, name: str) -> tuple[str, bytes] | None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            download = self.container.get_blob_client(_lease_key(self.prefix, name)).download_blob()
            return str(download.properties.etag), bytes(download.readall())
        except ResourceNotFoundError:
            return None


class GcsLeaseBackend:
    """Leases as objects in the database's bucket (``bucket`` is the SDK's ``Bucket``); a
    token is the object's generation, as a string."""

    def __init__(self, bucket: Any, prefix: str) -> None:
        self.bucket, self.prefix = bucket, prefix.strip("/")

    def _put(self, name: str, body: bytes, generation: int) -> str | None:
        from google.api_core.exceptions import PreconditionFailed

        blob = self.bucket.blob(_lease_key(self.prefix, name))
        try:  # a missing bucket (404) is an error, not a lost condition
            blob.upload_from_string(body, if_generation_match=generation, timeout=_GCS_TIMEOUT)
        except PreconditionFailed:  # 412: it exists (generation 0), or not that version, or gone
            return None
        return str(blob.generation)

    def create(self, name: str, body: bytes) -> str | None:
        return self._put(name, body, 0)  # generation 0: "only if there is none"

    def replace(self, name: str, token: str, body: bytes) -> str | None:
        return self._put(name, body, int(token))

    def delete(self, name: str, token: str) -> None:
        from google.api_core.exceptions import NotFound, PreconditionFailed

        try:
            self.bucket.blob(_lease_key(self.prefix, name)).delete(if_generation_match=int(token), timeout=_GCS_TIMEOUT)
        except (PreconditionFailed, NotFound):
            return

    def read(self, name: str) -> tuple[str, bytes] | None:
        from google.api_core.exceptions import NotFound

        blob = self.bucket.blob(_lease_key(self.prefix, name))
        try:
            body = blob.download_as_bytes(timeout=_GCS_TIMEOUT)  # GCS sends its generation with the body
            if blob.generation is None:  # a server that does not (gcp-storage-emulator): ask for it
                blob.reload(timeout=_GCS_TIMEOUT)
        except NotFound:
            return None
        return str(blob.generation), bytes(body)


def _azure(options: Mapping[str, str], *names: str) -> str | None:
    """An object_store Azure setting: a storage option, or the ``AZURE_*`` variable of the
    same name (object_store reads every ``AZURE_`` variable whose lowercase is a key)."""
    return _option(options, *names, env=tuple(n.upper() for n in names if n.startswith("azure_")))


def _azure_backend(uri: str, parts: SplitResult, options: Mapping[str, str]) -> AzureLeaseBackend:
    """object_store's Azure configuration: account and key (or SAS token) from the storage
    options or ``AZURE_STORAGE_*``, ``use_emulator`` for Azurite at
    ``AZURITE_BLOB_STORAGE_URL``, else ``AZURE_STORAGE_CONNECTION_STRING``, else a managed
    identity (``azure-identity``, when installed)."""
    blob = _sdk("azure.storage.blob", "az://", "azure")
    from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential

    container, _, host = parts.netloc.rpartition("@")  # az://container@account.dfs.core.windows.net/path
    container, url_account = (container, host.split(".")[0]) if container else (host, None)
    account = _azure(options, "azure_storage_account_name", "account_name") or url_account
    key = _azure(
        options,
        *("azure_storage_account_key", "azure_storage_access_key", "azure_storage_master_key"),
        *("master_key", "account_key", "access_key"),
    )
    sas = _azure(options, "azure_storage_sas_key", "azure_storage_sas_token", "sas_key", "sas_token")
    timeouts = {"connection_timeout": 3, "read_timeout": 10, "retry_total": 3}
    credential: Any = None
    if (_azure(options, "azure_storage_use_emulator", "use_emulator") or "").lower() in _TRUE:
        account = account or AZURITE_ACCOUNT
        emulator = os.environ.get("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:10000").rstrip("/")
        url = f"{emulator}/{account}"
        key = key or (None if sas else AZURITE_KEY)
    elif account:
        url = _azure(options, "azure_storage_endpoint", "azure_endpoint", "endpoint") or (
            f"https://{account}.blob.core.windows.net"
        )
    elif connection := os.environ.get("AZURE_STORAGE_CONNECTION_STRING"):
        service = blob.BlobServiceClient.from_connection_string(connection, **timeouts)
        return AzureLeaseBackend(service.get_container_client(container), parts.path)
    else:
        raise ConfigError(
            f"{uri}: an Azure database needs its storage account: azure_storage_account_name in the "
            "storage options or AZURE_STORAGE_ACCOUNT_NAME"
        )
    if key:
        credential = AzureNamedKeyCredential(account, key)
    elif sas:
        credential = AzureSasCredential(sas.lstrip("?"))
    else:
        try:
            from azure.identity import DefaultAzureCredential
        except ImportError:
            raise ConfigError(
                f"{uri}: an Azure database needs azure_storage_account_key or a SAS token (storage options "
                "or AZURE_STORAGE_*), or azure-identity installed for a managed identity"
            ) from None
        credential = DefaultAzureCredential()
    service = blob.BlobServiceClient(url, credential=credential, **timeouts)
    return AzureLeaseBackend(service.get_container_client(container), parts.path)


def _gcs_backend(uri: str, parts: SplitResult, options: Mapping[str, str]) -> GcsLeaseBackend:
    """object_store's GCS configuration: a service account key (JSON) or its file
    (``google_service_account``, ``GOOGLE_SERVICE_ACCOUNT``), a bearer token, application
    credentials (``GOOGLE_APPLICATION_CREDENTIALS``), else Google's default credentials;
    ``google_base_url`` for another endpoint; ``STORAGE_EMULATOR_HOST`` (an emulator,
    anonymous) is honoured by the SDK itself."""
    storage = _sdk("google.cloud.storage", "gs://", "gcs")
    import google.auth
    from google.auth.credentials import AnonymousCredentials
    from google.auth.exceptions import DefaultCredentialsError
    from google.oauth2 import credentials as oauth2
    from google.oauth2 import service_account

    def setting(*names: str) -> str | None:
        return _option(options, *names, env=tuple(n.upper() for n in names if n.startswith("google_")))

    key = setting("google_service_account_key", "service_account_key")
    path = setting("google_service_account", "service_account", "google_service_account_path", "service_account_path")
    path = path or os.environ.get("SERVICE_ACCOUNT")
    token = setting("google_bearer_token", "bearer_token")
    application = _option(options, "google_application_credentials", "application_credentials")
    base = setting("google_base_url", "base_url")
    project: str | None = None
    try:
        anonymous = (setting("google_skip_signature", "skip_signature") or "").lower() in _TRUE
        if anonymous or os.environ.get("STORAGE_EMULATOR_HOST"):
            credentials: Any = AnonymousCredentials()
        elif key:
            credentials = service_account.Credentials.from_service_account_info(json.loads(key))
        elif path:
            credentials = service_account.Credentials.from_service_account_file(path)
        elif token:
            credentials = oauth2.Credentials(token)
        elif application:  # an option (the variable of that name is Google's default anyway)
            info = json.loads(Path(application).read_text(encoding="utf-8"))
            if info.get("type") == "service_account":
                credentials = service_account.Credentials.from_service_account_info(info)
            else:
                credentials = oauth2.Credentials.from_authorized_user_info(info)
        else:
            credentials, project = google.auth.default()
    except (DefaultCredentialsError, OSError, ValueError) as exc:
        raise ConfigError(
            f"{uri}: no Google credentials for its leases ({str(exc).splitlines()[0]}); set "
            "google_service_account (a key file) or GOOGLE_APPLICATION_CREDENTIALS"
        ) from None
    project = project or getattr(credentials, "project_id", None) or "_"  # objects need none; "_" stops a lookup
    client = storage.Client(
        project=project, credentials=credentials, client_options={"api_endpoint": base} if base else None
    )
    return GcsLeaseBackend(client.bucket(parts.netloc), parts.path)


def backend_for(uri: str, options: Mapping[str, str]) -> LeaseBackend:
    """The lease backend for a database URI, or ``ConfigError`` (one line) naming why not."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme == "s3":
        names = ("endpoint", "aws_endpoint", "endpoint_url")
        endpoint = _option(options, *names, env=("AWS_ENDPOINT_URL", "AWS_ENDPOINT"))
        return S3LeaseBackend(parts.netloc, parts.path, _client("s3", options, endpoint))
    if scheme == "s3+ddb":
        tables = parse_qs(parts.query).get("ddbTableName")
        if not tables:
            raise ConfigError(f"{uri}: an s3+ddb:// database needs ?ddbTableName=<DynamoDB table> in its URI")
        endpoint = _option(options, "dynamodb_endpoint", env=("DYNAMODB_ENDPOINT",))
        return DynamoLeaseBackend(tables[0], f"{parts.netloc}{parts.path}", _client("dynamodb", options, endpoint))
    if scheme == "gs":
        return _gcs_backend(uri, parts, options)
    if scheme in AZURE_SCHEMES:
        return _azure_backend(uri, parts, options)
    raise ConfigError(
        f"{scheme}:// databases cannot be shared by several writers (leases are built for s3://, s3+ddb://, "
        "gs:// and az://); run a single writer (--writers single) or use one of those stores"
    )
