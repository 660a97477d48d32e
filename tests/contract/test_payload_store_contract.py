"""One contract for every payload store (``durable.core.ports.PayloadStore``): memory, the
folder ``durable dev`` uses, and S3 on moto in-process (unit), moto's server over HTTP
(integration) and LocalStack (its own tier). A store that drifted from S3 would fail
here, not in a deployed stack."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from durable.adapters.payload_stores import FolderPayloads, MemoryPayloads
from durable.adapters.s3_payloads import PREFIX, S3Payloads
from durable.core.clock import SystemClock
from durable.errors import StorageError
from tests.conftest import aws_client, server_endpoint

STORES = [
    "memory",
    "folder",
    "s3-moto",
    pytest.param("s3-moto-server", marks=pytest.mark.integration),
    pytest.param("s3-localstack", marks=pytest.mark.localstack),
]
SERVERS = {"s3-moto": "moto", "s3-moto-server": "moto-server", "s3-localstack": "localstack"}


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    kind: str = request.param
    if kind == "memory":
        yield MemoryPayloads(SystemClock())
        return
    if kind == "folder":
        yield FolderPayloads(tmp_path, SystemClock())
        return
    client = aws_client("s3", server_endpoint(SERVERS[kind], request))
    bucket = f"payloads-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    yield S3Payloads(client, bucket)


def run_id() -> str:
    return uuid.uuid4().hex.upper()[:26]


def test_a_put_object_reads_back_byte_for_byte(store: Any) -> None:
    rid = run_id()
    data = ("é" * 200_000).encode()
    store.put(f"{rid}/aa11", data)
    assert store.get(f"{rid}/aa11") == data
    store.put(f"{rid}/aa11", data)  # the same key again: idempotent
    assert store.get(f"{rid}/aa11") == data


def test_a_missing_object_is_a_storage_error_that_is_not_retried(store: Any) -> None:
    with pytest.raises(StorageError) as missing:
        store.get(f"{run_id()}/ffff")
    assert missing.value.retryable is False
    assert "missing" in str(missing.value)


def test_delete_older_removes_only_that_runs_objects_written_before_the_cutoff(
    store: Any,
) -> None:
    mine, other = run_id(), run_id()
    store.put(f"{mine}/01", b"a")
    store.put(f"{mine}/02", b"b")
    store.put(f"{other}/01", b"c")
    # Nothing of it is older than an hour ago.
    assert store.delete_older(f"{mine}/", datetime.now(UTC) - timedelta(hours=1)) == 0
    assert store.delete_older(f"{mine}/", datetime.now(UTC) + timedelta(minutes=1)) == 2
    for key in (f"{mine}/01", f"{mine}/02"):
        with pytest.raises(StorageError):
            store.get(key)
    assert store.get(f"{other}/01") == b"c"
    assert store.delete_older(f"{mine}/", datetime.now(UTC) + timedelta(minutes=1)) == 0


def test_s3_keys_live_under_the_runs_prefix_the_iam_policy_names(request: Any) -> None:
    """The template lets functions touch ``runs/*`` only: every key must be there."""
    client = aws_client("s3", server_endpoint("moto", request))
    client.create_bucket(Bucket="payload-prefix")
    S3Payloads(client, "payload-prefix").put("01ABC/dd", b"x")
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="payload-prefix")["Contents"]]
    assert keys == [f"{PREFIX}01ABC/dd"] and PREFIX == "runs/"
