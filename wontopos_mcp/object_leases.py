"""Lease backends (``lease.LeaseBackend``) for the object stores LanceDB runs on, through
the cloud SDK its own configuration implies (boto3 for ``s3://``), configured from the
same storage options and standard variables LanceDB reads, so one configuration points
both at the same place. No request is signed by hand.

* ``s3://``: an object under ``<database>/_wontopos/leases/``, created with
  ``If-None-Match: *``, rewritten and deleted with ``If-Match: <etag>`` (S3 since 2024;
  MinIO, R2 and moto honour them too).
* ``s3+ddb://``: LanceDB's DynamoDB commit store, for S3-compatible stores that ignore
  those headers: the lease is an item in the same DynamoDB table, under a ``base_uri``
  LanceDB never uses, written with condition expressions.

``gs://`` and ``az://`` have no backend yet (``backend_for`` says so).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .errors import ConfigError
from .lease import LeaseBackend

LEASE_DIR = "_wontopos/leases"
_TIMEOUTS = {"connect_timeout": 3, "read_timeout": 10, "retries": {"max_attempts": 3, "mode": "standard"}}


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


def _boto3() -> Any:
    try:
        import boto3
    except ImportError:
        raise ConfigError("a database on s3:// needs boto3 for its leases: pip install 'wontopos-mcp[s3]'") from None
    return boto3


def _client(service: str, options: Mapping[str, str], endpoint: str | None) -> Any:
    from botocore.config import Config

    virtual = (_option(options, "virtual_hosted_style_request", "aws_virtual_hosted_style_request") or "").lower()
    style = "virtual" if virtual == "true" or endpoint is None else "path"
    return _boto3().client(
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
        return f"{self.prefix}/{LEASE_DIR}/{name}" if self.prefix else f"{LEASE_DIR}/{name}"

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
    raise ConfigError(
        f"{scheme}:// databases cannot be shared by several writers yet (leases are built for s3:// and "
        "s3+ddb://); run a single writer (--writers single) or use an S3-compatible store"
    )
