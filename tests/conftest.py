"""Shared fixtures: ledgers on every backend, tables created from template.yaml.

Backends: ``memory`` and ``moto`` (in-process) are unit tier; ``dynamodb-local`` (the
official AWS jar over HTTP) is integration tier. The DynamoDB Local server is started
once per session on 127.0.0.1 unless ``DURABLE_TEST_DYNAMODB_ENDPOINT`` points at one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.memory import MemoryEffectStore, MemoryLedger
from durable.adapters.schema import IDEMPOTENCY, LEDGER, create_tables

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tier markers by folder; parametrized backends carry their own marks."""
    for item in items:
        path = str(item.path)
        own = {m.name for m in item.iter_markers()}
        if own & {"integration", "localstack"}:
            continue
        if f"{os.sep}integration{os.sep}" in path or f"{os.sep}e2e{os.sep}" in path:
            item.add_marker(pytest.mark.integration)
        elif f"{os.sep}localstack{os.sep}" in path:
            item.add_marker(pytest.mark.localstack)
        else:
            item.add_marker(pytest.mark.unit)


@pytest.fixture(scope="session")
def dynamodb_local_endpoint() -> Iterator[str]:
    endpoint = os.environ.get("DURABLE_TEST_DYNAMODB_ENDPOINT")
    if endpoint:
        yield endpoint
        return
    from infra.local.dynamodb_local import DynamoDBLocal

    with DynamoDBLocal() as server:
        yield server.endpoint_url


def _fresh_tables(client: Any) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    names = {LEDGER: f"ledger-{suffix}", IDEMPOTENCY: f"idem-{suffix}"}
    create_tables(client, names, template=TEMPLATE)
    return names[LEDGER], names[IDEMPOTENCY]


@pytest.fixture
def moto_client() -> Iterator[Any]:
    from moto import mock_aws

    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def ddb_local_client(dynamodb_local_endpoint: str) -> Any:
    return boto3.client("dynamodb", endpoint_url=dynamodb_local_endpoint, region_name="us-east-1")


BACKENDS = [
    "memory",
    "moto",
    pytest.param("dynamodb-local", marks=pytest.mark.integration),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def stores(backend: str, request: pytest.FixtureRequest) -> tuple[Any, Any]:
    """(ledger, effect store) on every backend."""
    if backend == "memory":
        return MemoryLedger(), MemoryEffectStore()
    client = request.getfixturevalue("moto_client" if backend == "moto" else "ddb_local_client")
    ledger_table, idem_table = _fresh_tables(client)
    return DynamoLedger(client, ledger_table), DynamoEffectStore(client, idem_table)


@pytest.fixture
def atomic_backend(backend: str) -> None:
    """Skip on moto in-process: it applies conditional writes without per-item locking,
    so races between threads are not atomic there (DynamoDB Local covers them)."""
    if backend == "moto":
        pytest.skip("moto in-process does not serialize concurrent conditional writes")


@pytest.fixture
def ledger(stores: tuple[Any, Any]) -> Any:
    return stores[0]


@pytest.fixture
def effect_store(stores: tuple[Any, Any]) -> Any:
    return stores[1]


MakeTables = Callable[[Any], tuple[str, str]]


@pytest.fixture
def make_tables() -> MakeTables:
    return _fresh_tables
