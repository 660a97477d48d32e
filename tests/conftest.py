"""Shared fixtures: ledgers and AWS clients on every backend, tables created from template.yaml.

Tiers, by marker (every test gets exactly one):

* ``unit``: no sockets (enforced below); memory adapters and moto in-process.
* ``integration``: real servers over HTTP on 127.0.0.1: DynamoDB Local (the official AWS jar)
  and moto's server (Scheduler). Each is started once per session unless
  ``DURABLE_TEST_DYNAMODB_ENDPOINT`` / ``DURABLE_TEST_MOTO_ENDPOINT`` point at a running one
  (``.ci/run`` does that).
* ``localstack``: the same contract and adapter tests against LocalStack. It is never started
  from here: its child servers bind every interface, so ``make test-localstack`` starts it inside
  a private network namespace around pytest and exports ``DURABLE_TEST_LOCALSTACK_ENDPOINT``.
  Without that variable, a run that selected ``-m localstack`` fails loudly; any other run skips
  those tests with the reason (so plain ``pytest`` works where LocalStack is not running).

Backends are fixture parameters carrying their tier's mark, so ``-m`` picks them.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from durable.adapters.aws_services import DYNAMODB_CLIENT_OPTIONS
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.memory import MemoryEffectStore, MemoryLedger
from durable.adapters.schema import IDEMPOTENCY, LEDGER, create_tables
from infra.local.deployed_stack import DeployedStack, runtime_python

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
REGION = "us-east-1"

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
# Tests pick every endpoint explicitly. An AWS_ENDPOINT_URL* left in the shell by `eval "$(...
# start)"` would silently send the clients of other fixtures (moto in-process included) to that
# server instead.
for _name in [
    n for n in os.environ if n == "AWS_ENDPOINT_URL" or n.startswith("AWS_ENDPOINT_URL_")
]:
    del os.environ[_name]

LOCALSTACK_ENV = "DURABLE_TEST_LOCALSTACK_ENDPOINT"
_LOCALSTACK_MISSING = (
    f"{LOCALSTACK_ENV} is not set: the localstack tier runs through `make test-localstack`, which "
    "starts LocalStack in a private network namespace around pytest"
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tier markers by folder; parametrized backends carry their own marks."""
    localstack_selected = "localstack" in (config.option.markexpr or "")
    localstack_running = bool(os.environ.get(LOCALSTACK_ENV))
    for item in items:
        path = str(item.path)
        own = {m.name for m in item.iter_markers()}
        if not own & {"integration", "localstack", "project", "browser", "deployed", "chaos"}:
            if f"{os.sep}integration{os.sep}" in path or f"{os.sep}e2e{os.sep}" in path:
                item.add_marker(pytest.mark.integration)
            elif f"{os.sep}project{os.sep}" in path:
                item.add_marker(pytest.mark.project)
            elif f"{os.sep}deployed{os.sep}" in path:
                item.add_marker(pytest.mark.deployed)
            elif f"{os.sep}localstack{os.sep}" in path:
                item.add_marker(pytest.mark.localstack)
            else:
                item.add_marker(pytest.mark.unit)
        if item.get_closest_marker("localstack") and not (
            localstack_running or localstack_selected
        ):
            # Plain `pytest` on a machine without LocalStack: visible in the -ra summary. An
            # explicit `-m localstack` run instead reaches the fixture, which fails.
            item.add_marker(pytest.mark.skip(reason=_LOCALSTACK_MISSING))


# --- the unit tier opens no sockets ---------------------------------------------------------


class SocketInUnitTest(RuntimeError):
    """A unit-tier test tried to reach the network: mark it integration, or fake the call."""


@pytest.fixture(autouse=True)
def _no_network_in_unit_tests(request: pytest.FixtureRequest) -> Iterator[None]:
    """Unit tests must not connect anywhere, not even 127.0.0.1: a test that silently needs a
    server belongs to the integration tier, where the server is guaranteed to run."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def refuse(sock: socket.socket, address: Any) -> Any:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            raise SocketInUnitTest(f"unit test {request.node.nodeid} connected to {address!r}")
        return real_connect(sock, address)

    def refuse_ex(sock: socket.socket, address: Any) -> int:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            raise SocketInUnitTest(f"unit test {request.node.nodeid} connected to {address!r}")
        return real_connect_ex(sock, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        patch.setattr(socket.socket, "connect_ex", refuse_ex)
        yield


# --- servers --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def dynamodb_local_endpoint() -> Iterator[str]:
    endpoint = os.environ.get("DURABLE_TEST_DYNAMODB_ENDPOINT")
    if endpoint:
        yield endpoint
        return
    from infra.local.dynamodb_local import DynamoDBLocal

    with DynamoDBLocal() as server:
        yield server.endpoint_url


@pytest.fixture(scope="session")
def moto_server_endpoint() -> Iterator[str]:
    endpoint = os.environ.get("DURABLE_TEST_MOTO_ENDPOINT")
    if endpoint:
        yield endpoint.rstrip("/")
        return
    from infra.local.moto_server import MotoServer

    with MotoServer() as server:
        yield server.endpoint_url


@pytest.fixture(scope="session")
def localstack_endpoint() -> str:
    endpoint = os.environ.get(LOCALSTACK_ENV, "").rstrip("/")
    if not endpoint:
        pytest.fail(_LOCALSTACK_MISSING, pytrace=False)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{endpoint}/_localstack/health", timeout=10) as response:
            services = json.load(response).get("services", {})
    except (urllib.error.URLError, OSError, ValueError) as err:
        pytest.fail(
            f"LocalStack at {endpoint} does not answer its health check: {err}", pytrace=False
        )
    down = [s for s in ("dynamodb", "scheduler", "cloudformation") if services.get(s) is None]
    if down:
        pytest.fail(f"LocalStack at {endpoint} does not offer {', '.join(down)}", pytrace=False)
    return endpoint


def aws_client(
    service: str, endpoint: str | None, *, account: str | None = None, **config: Any
) -> Any:
    """A boto3 client for ``service`` at ``endpoint`` (None: AWS's own, i.e. moto in-process).

    ``account``: a 12-digit access key id, which LocalStack takes as the account id, so a test
    gets its own empty account. ``config`` goes to botocore's ``Config``
    (``retries={"total_max_attempts": 1}``, say).
    """
    kwargs: dict[str, Any] = {"region_name": REGION}
    if endpoint is not None:
        kwargs["endpoint_url"] = endpoint
    if account is not None:
        kwargs["aws_access_key_id"] = account
        kwargs["aws_secret_access_key"] = "testing"
    if service == "dynamodb":  # as the deployed functions make it (no client-side checks)
        config = {**DYNAMODB_CLIENT_OPTIONS, **config}
    if config:
        kwargs["config"] = Config(**config)
    # Untyped on purpose: boto3-stubs types `client` per literal service name.
    make: Callable[..., Any] = boto3.client
    return make(service, **kwargs)


@pytest.fixture
def mock_aws_session() -> Iterator[None]:
    """moto in-process for the test's duration (state is fresh per test)."""
    from moto import mock_aws

    with mock_aws():
        yield


def server_endpoint(server: str, request: pytest.FixtureRequest) -> str | None:
    """The endpoint of a backend by name; ``moto`` (in-process) activates the mock instead."""
    if server == "moto":
        request.getfixturevalue("mock_aws_session")
        return None
    fixture = {
        "dynamodb-local": "dynamodb_local_endpoint",
        "moto-server": "moto_server_endpoint",
        "localstack": "localstack_endpoint",
    }[server]
    endpoint: str = request.getfixturevalue(fixture)
    return endpoint


# --- DynamoDB clients and tables ------------------------------------------------------------


def _fresh_tables(client: Any) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    names = {LEDGER: f"ledger-{suffix}", IDEMPOTENCY: f"idem-{suffix}"}
    create_tables(client, names, template=TEMPLATE)
    return names[LEDGER], names[IDEMPOTENCY]


@pytest.fixture
def moto_client(mock_aws_session: None) -> Any:
    return aws_client("dynamodb", None)


@pytest.fixture
def ddb_local_client(dynamodb_local_endpoint: str) -> Any:
    return aws_client("dynamodb", dynamodb_local_endpoint)


@pytest.fixture
def localstack_client(localstack_endpoint: str) -> Any:
    return aws_client("dynamodb", localstack_endpoint)


# Every server that speaks DynamoDB, by tier. moto's server is left out: over HTTP it runs the
# same DynamoDB code as moto in-process, so it would add time and no coverage.
DYNAMODB_SERVERS = [
    "moto",
    pytest.param("dynamodb-local", marks=pytest.mark.integration),
    pytest.param("localstack", marks=pytest.mark.localstack),
]

ClientFactory = Callable[..., Any]


@pytest.fixture(params=DYNAMODB_SERVERS)
def dynamodb_server(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def dynamodb_factory(dynamodb_server: str, request: pytest.FixtureRequest) -> ClientFactory:
    """Makes DynamoDB clients for the parametrized server; keyword arguments are botocore
    ``Config`` options, for tests that tune retries or timeouts."""
    endpoint = server_endpoint(dynamodb_server, request)

    def make(**config: Any) -> Any:
        return aws_client("dynamodb", endpoint, **config)

    return make


@pytest.fixture
def dynamodb_client(dynamodb_factory: ClientFactory) -> Any:
    """A DynamoDB client on every server: moto (unit), DynamoDB Local, LocalStack."""
    return dynamodb_factory()


BACKENDS = [
    "memory",
    "moto",
    pytest.param("dynamodb-local", marks=pytest.mark.integration),
    pytest.param("localstack", marks=pytest.mark.localstack),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


_BACKEND_CLIENTS = {
    "moto": "moto_client",
    "dynamodb-local": "ddb_local_client",
    "localstack": "localstack_client",
}


@pytest.fixture
def stores(backend: str, request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    """(ledger, effect store) on every backend."""
    if backend == "memory":
        yield MemoryLedger(), MemoryEffectStore()
        return
    client = request.getfixturevalue(_BACKEND_CLIENTS[backend])
    ledger_table, idem_table = _fresh_tables(client)
    yield DynamoLedger(client, ledger_table), DynamoEffectStore(client, idem_table)
    if backend == "localstack":
        _drop_tables(client, [ledger_table, idem_table])


def _drop_tables(client: Any, names: list[str]) -> None:
    """Delete a test's tables on LocalStack: every table's stream takes a shard of its
    Kinesis emulator, which stops at 100 for a whole session."""
    for name in names:
        try:
            client.delete_table(TableName=name)
        except Exception:  # gone already, or the server is going down: nothing to free
            continue


@pytest.fixture
def atomic_backend(backend: str) -> None:
    """Skip on moto in-process: it applies conditional writes without per-item locking,
    so races between threads are not atomic there (DynamoDB Local and LocalStack, which
    runs DynamoDB Local, cover them)."""
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
def make_tables(request: pytest.FixtureRequest) -> Iterator[MakeTables]:
    made: list[tuple[Any, list[str]]] = []

    def make(client: Any) -> tuple[str, str]:
        names = _fresh_tables(client)
        made.append((client, list(names)))
        return names

    yield make
    if "localstack" in request.node.name:
        for client, names in made:
            _drop_tables(client, names)


# --- EventBridge Scheduler ------------------------------------------------------------------

SCHEDULER_SERVERS = [
    "moto",
    pytest.param("moto-server", marks=pytest.mark.integration),
    pytest.param("localstack", marks=pytest.mark.localstack),
]


def scheduler_client_on(server: str, request: pytest.FixtureRequest) -> Any:
    """A Scheduler client on ``server``. botocore's retries are off: both emulators answer a
    missing schedule group with a 500, which botocore would otherwise retry with backoff."""
    endpoint = server_endpoint(server, request)
    account = None
    if server == "moto-server":
        # One server serves the whole session; each test starts from an empty one.
        from infra.local.moto_server import reset

        assert endpoint is not None
        reset(endpoint)
    elif server == "localstack":
        # LocalStack has no reset API in the community edition; a fresh account is just as empty.
        account = f"{uuid.uuid4().int % 10**12:012d}"
    return aws_client("scheduler", endpoint, account=account, retries={"total_max_attempts": 1})


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Telemetry configures the ``durable`` logger as Powertools' (JSON handler bound to
    the stdout of the moment, no propagation, as on Lambda) whenever a test composes a
    handler; restore it whole after every test, wherever it lives, so the next handler
    composes afresh and later tests' ``caplog``/``capsys`` see the library's records
    (whatever order a run or the mutation driver's selection puts the tests in)."""
    import logging

    lib = logging.getLogger("durable")
    saved = {k: list(v) if isinstance(v, list) else v for k, v in vars(lib).items()}
    yield
    lib.__dict__.clear()
    lib.__dict__.update(saved)


# --- deployed stacks: built functions in a bare python3.12 (tiers deployed and project) ---

StackFactory = Callable[..., DeployedStack]


@pytest.fixture(scope="session")
def python312() -> str:
    return runtime_python()


@pytest.fixture
def deployed_stacks(
    dynamodb_local_endpoint: str,
    moto_server_endpoint: str,
    python312: str,
    tmp_path: Path,
) -> Iterator[StackFactory]:
    """Makes stacks from a ``sam build`` folder (``infra.local.deployed_stack``; ``overlay``:
    another SDK first on the path). Every stack gets its own tables, secrets and schedule
    group (a stage of its own); its containers stop and its tables go after the test."""
    made: list[DeployedStack] = []

    def make(build: Path, *, overlay: Path | None = None, **parameters: str) -> DeployedStack:
        work = tmp_path / f"stack{len(made)}"
        work.mkdir()
        stack = DeployedStack(
            build,
            dynamodb=dynamodb_local_endpoint,
            moto=moto_server_endpoint,
            python=python312,
            work=work,
            parameters=parameters,
            overlay=overlay,
        )
        made.append(stack)
        return stack

    yield make
    for stack in made:
        stack.close()
