"""The AWS ports of a deployment, built from ``Settings``: botocore clients and adapters.

Clients are created on first use: a client costs tens of milliseconds to build (the Lambda
client about 100 ms), and most invocations never call most services (a worker that
suspends never invokes Lambda). Secrets go through Powertools parameters, cached for
``SECRET_MAX_AGE`` so rotation reaches warm containers.

The clients come from a botocore session, not boto3's: a boto3 client *is* a botocore
client (``boto3.client`` calls ``create_client`` on the botocore session it wraps, and
adds only resources and S3's transfer methods, which nothing here uses), but importing
boto3 also loads its resource machinery and s3transfer, which loads ``multiprocessing``
(59 modules): a DynamoDB client took 338 ms of CPU from botocore against 390 ms from boto3
(medians of 8 fresh python3.12 interpreters each), paid by every cold start for nothing
(issue 47, ``benchmarks.cold_start``). boto3 is still installed: Powertools' idempotency
layer and parameters import it, when an app first uses them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from durable.adapters import dynamodb_units, item_boundary
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.lambda_invoker import LambdaCaller, LambdaInvoker
from durable.adapters.nonces import DynamoNonceStore
from durable.core.clock import Clock, SystemClock
from durable.core.ports import NoTimers, PayloadStore, Timers
from durable.core.secrets import KeyService
from durable.core.usage import Meter
from durable.errors import StorageError
from durable.runtime import Services
from durable.settings import Settings

if TYPE_CHECKING:
    import botocore.session

    from durable.adapters.scheduler import SchedulerRecurring
    from durable.runtime import SecretSource

SECRET_MAX_AGE = 300
# The DynamoDB client's options. botocore checks every request's parameters against the
# service model before sending it: about a tenth of the client's CPU per step, spent on
# requests our item codec builds, never on user input. The contract suite runs every
# ledger request through clients made with these options against moto, DynamoDB Local and
# LocalStack (tests/conftest.py), so a malformed request would fail there, answered by
# the server's ValidationException as it would be here.
DYNAMODB_CLIENT_OPTIONS: dict[str, Any] = {"parameter_validation": False}


def client_options(settings: Settings | None = None, **overrides: Any) -> dict[str, Any]:
    """The ``botocore.config.Config`` options of an AWS client: explicit connect and read
    timeouts and a bounded retry budget (``Settings.aws_*``), then ``overrides``.

    botocore's defaults wait 60 s for a connection and 60 s for each answer, and retry a
    DynamoDB request up to 10 times: a store that accepts connections but stops answering
    (a paused server, a network that drops replies) held an API request for minutes. With
    these, a request fails within about ``attempts x read timeout``, as a retryable
    ``StorageError`` the API answers with 503 and Retry-After. "standard" mode retries
    throttles and transient errors with jittered backoff, timeouts included.
    """

    def setting(name: str) -> Any:
        # Without a deployment's settings (the CLI's clients, durable dev's own): the defaults.
        return getattr(settings, name) if settings else Settings.model_fields[name].default

    options: dict[str, Any] = {
        "connect_timeout": setting("aws_connect_timeout_seconds"),
        "read_timeout": setting("aws_read_timeout_seconds"),
        # total_max_attempts counts the first attempt (max_attempts would count retries).
        "retries": {"total_max_attempts": setting("aws_max_attempts"), "mode": "standard"},
    }
    return {**options, **overrides}


class LazyClient:
    """A botocore client created on its first attribute access (thread-safe)."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._client: Any = None
        self._lock = threading.Lock()
        self._on_made: list[Callable[[Any], Any]] = []

    def when_made(self, callback: Callable[[Any], Any]) -> None:
        """Call ``callback`` with the client when it is made (now, if it already is), before
        any request is sent with it: how an adapter installs a request hook
        (``item_boundary.install``) on a client it is given without making it."""
        with self._lock:
            if self._client is None:
                self._on_made.append(callback)
                return
        callback(self._client)

    def botocore_client(self) -> Any:
        """The client itself, made now if it was not yet."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    made = self._factory()
                    for callback in self._on_made:  # before any thread can use it
                        callback(made)
                    self._on_made.clear()
                    self._client = made
        return self._client

    def close_connections(self) -> None:
        """Drop the client's open connections, if it was made (botocore's public
        ``close``); the client stays usable and opens new ones on its next request."""
        with self._lock:
            made = self._client
        if made is not None:
            made.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.botocore_client(), name)


def aws_services(settings: Settings, session: botocore.session.Session | None = None) -> Services:
    from botocore.config import Config
    from botocore.session import get_session

    own = session or get_session()
    # Every client this composition makes, for ``after_restore``.
    clients: list[LazyClient] = []

    def lazy(factory: Callable[[], Any]) -> LazyClient:
        made = LazyClient(factory)
        clients.append(made)
        return made

    def client(service: str, **options: Any) -> Any:
        config = Config(**client_options(settings, **options))
        return lazy(lambda: own.create_client(service, config=config))

    # Every DynamoDB request reports the units it consumed to the meter: each
    # invocation's run records what it used (``durable.core.usage``).
    meter = Meter()

    def watched_dynamodb() -> Any:
        config = Config(**client_options(settings, **DYNAMODB_CLIENT_OPTIONS))
        made = own.create_client("dynamodb", config=config)
        dynamodb_units.watch(made, meter)
        return item_boundary.install(made)

    dynamodb: Any = lazy(watched_dynamodb)
    ledger = DynamoLedger(
        dynamodb,
        settings.ledger_table,
        due_shards=settings.due_shards,
        inputs_apart=settings.inputs_apart,
    )
    units = dynamodb_units.RunWriteUnits(ledger)
    units.install(meter)
    worker = settings.require("worker_function", "invoking the worker")
    timers: Timers = NoTimers()
    recurring: SchedulerRecurring | None = None
    if settings.scheduler_group:
        # Imported where configured, as the KMS and S3 adapters are: a stack without them
        # loads none of their code on a cold start.
        from durable.adapters.scheduler import SchedulerRecurring, SchedulerTimers

        scheduler = cast(Any, client("scheduler"))
        role = settings.require("scheduler_role_arn", "arming timers")
        timers = SchedulerTimers(
            scheduler, group=settings.scheduler_group, target_arn=worker, role_arn=role
        )
        recurring = SchedulerRecurring(
            scheduler, group=settings.scheduler_group, target_arn=worker, role_arn=role
        )
    clock: Clock = SystemClock()
    if settings.clock_file:  # durable dev: every process shares one scaled virtual clock
        from durable.core.clock import ScaledClock, read

        clock = ScaledClock(read(Path(settings.clock_file)))
    return Services(
        payloads=_payloads(settings, client, clock),
        clock=clock,
        ledger=ledger,
        meter=meter,
        schedules=recurring,
        effects=DynamoEffectStore(dynamodb, settings.idempotency_table),
        invoker=LambdaInvoker(cast(Any, client("lambda")), worker),
        nonces=DynamoNonceStore(dynamodb, settings.idempotency_table),
        timers=timers,
        secrets=secrets_manager(client("secretsmanager").botocore_client),
        idempotency=lambda: _persistence(settings, own, lazy),
        keys=_keys(settings, client),
        # Asked while an API request waits: a short timeout, no retries (unknown = start).
        served=_served(
            settings,
            client(
                "lambda",
                read_timeout=10,
                connect_timeout=3,
                retries={"total_max_attempts": 1, "mode": "standard"},
            ),
            worker,
        ),
        # Every function's events read or write the ledger: its client is worth making
        # during INIT (about a third of a cold start's composition is this client).
        prepare=dynamodb.botocore_client,
        after_restore=lambda: _close_all(clients),
    )


def _close_all(clients: list[LazyClient]) -> None:
    """After a snapshot's restore (Lambda SnapStart): connections opened before the
    snapshot are not valid in the restored environment, and one restored environment's
    connection must never be another's. Credentials are not dropped: with SnapStart the
    runtime serves them through the container credentials endpoint, which botocore
    refreshes by itself."""
    for made in list(clients):
        made.close_connections()


def _served(settings: Settings, lambda_client: Any, worker: str) -> Any:
    """The API's question to the worker alias: which workflow versions it serves."""
    if settings.served_check_seconds == 0:
        return None
    describe = LambdaCaller(lambda_client, worker)

    def served() -> dict[str, list[int]]:
        table: dict[str, list[int]] = describe({"control": "describe"})["workflows"]
        return table

    return served


def _payloads(
    settings: Settings, client: Callable[[str], Any], clock: Clock
) -> PayloadStore | None:
    """S3 when the stack has a payload bucket; durable dev's folder; else none (values
    too large for an item are refused)."""
    if settings.payload_bucket:
        from durable.adapters.s3_payloads import S3Payloads

        return S3Payloads(client("s3"), settings.payload_bucket)
    if settings.payload_folder:
        from durable.adapters.payload_stores import FolderPayloads

        return FolderPayloads(Path(settings.payload_folder), clock)
    return None


def _keys(settings: Settings, client: Callable[[str], Any]) -> KeyService | None:
    """KMS when a key is configured; durable dev's file key; else none (secrets refused)."""
    if settings.kms_key_id:
        from durable.adapters.kms import KmsKeys

        return KmsKeys(client("kms"), settings.kms_key_id)
    if settings.local_key_file:
        from durable.core.secrets import LocalKeys

        return LocalKeys(bytes.fromhex(Path(settings.local_key_file).read_text().strip()))
    return None


def secrets_manager(factory: Callable[[], Any]) -> SecretSource:
    """Read secret strings through Powertools parameters (cached, lazily connected)."""
    provider: list[Any] = []

    def read(name: str) -> str:
        from aws_lambda_powertools.utilities.parameters import SecretsProvider
        from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

        if not provider:
            provider.append(SecretsProvider(boto3_client=factory()))
        try:
            value = provider[0].get(name, max_age=SECRET_MAX_AGE)
        except GetParameterError as e:
            # The message names the secret, never its value.
            raise StorageError(f"reading secret {name!r} failed: {e}", retryable=True) from e
        return value if isinstance(value, str) else bytes(value).decode()

    return read


def _persistence(
    settings: Settings,
    session: botocore.session.Session,
    lazy: Callable[[Callable[[], Any]], LazyClient] = LazyClient,
) -> Any:
    """Powertools' DynamoDB layer on the idempotency table (imported when first needed),
    on a client with the stored-bytes rule installed (``item_boundary``)."""
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
    from botocore.config import Config

    # Made here, not by Powertools, so its requests cross the stored-bytes rule as well:
    # the records it writes (a webhook's answer) are in the same table as the effects.
    made = lazy(
        lambda: session.create_client("dynamodb", config=Config(**client_options(settings)))
    )
    return DynamoDBPersistenceLayer(
        table_name=settings.idempotency_table,
        boto3_client=item_boundary.install(made.botocore_client()),
    )


# A check call runs as long as the worker's timeout allows (up to 900 s): the hook waits for
# it, and never retries one (a retried call would run the same check twice, in parallel).
HOOK_LAMBDA_OPTIONS: dict[str, Any] = {
    "read_timeout": 905,
    "connect_timeout": 10,
    "retries": {"total_max_attempts": 1, "mode": "standard"},
}


def deploy_hook_clients() -> tuple[Any, Any]:
    """The deploy hook's clients: Lambda (the worker versions) and CodeDeploy (the verdict)."""
    import boto3
    from botocore.config import Config

    lambda_client = boto3.client("lambda", config=Config(**HOOK_LAMBDA_OPTIONS))
    return lambda_client, boto3.client("codedeploy", config=Config(**client_options()))
