"""A deployed stack in miniature: the four handlers over real tables.

Tables come from ``template.yaml`` on moto (unit tier) or DynamoDB Local (integration
tier). The worker's self-invocations are queued and fed back to the worker handler as
the async ``Event`` payload Lambda would deliver; armed timers are fired as the input
EventBridge Scheduler would deliver. Time is a fake clock started at the real time (the
Powertools idempotency records compare against the real clock).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from durable.adapters import dynamodb_units
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.memory import MemoryInvoker, MemoryRecurring, MemoryTimers
from durable.adapters.nonces import DynamoNonceStore
from durable.aws import LambdaHandler, api_handler, events_handler, sweeper_handler, worker_handler
from durable.core.clock import FakeClock
from durable.core.ports import Timers
from durable.core.secrets import LocalKeys
from durable.core.usage import Meter
from durable.engine.registry import App
from durable.runtime import Services
from durable.settings import Settings
from tests.conftest import MakeTables
from tests.handlers import workflows
from tests.handlers.events import ACCOUNT, LambdaContext

WORKER_ARN = "arn:aws:lambda:us-east-1:123456789012:function:durable-worker-test"
CALLBACK_SECRET = "callback-secret-0123456789abcdef"
WEBHOOK_SECRET = "webhook-secret-0123456789abcdef"


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, Any]

    @property
    def error(self) -> dict[str, Any]:
        value: dict[str, Any] = self.body["error"]
        return value


@dataclass
class Stack:
    client: Any
    tables: tuple[str, str]
    settings: Settings
    clock: FakeClock
    invoker: MemoryInvoker
    timers: MemoryTimers
    secrets: dict[str, str]
    recurring: MemoryRecurring = field(default_factory=MemoryRecurring)
    handlers: dict[str, LambdaHandler] = field(default_factory=dict)

    @property
    def api(self) -> LambdaHandler:
        return self.handlers["api"]

    @property
    def worker(self) -> LambdaHandler:
        return self.handlers["worker"]

    def call(self, event: dict[str, Any]) -> Reply:
        raw = self.api(event, LambdaContext(function_name="durable-api-test"))
        headers = {k: v[0] if isinstance(v, list) else v for k, v in _headers(raw).items()}
        body = json.loads(raw["body"]) if raw.get("body") else None
        return Reply(raw["statusCode"], body, headers)

    def drain(self, limit: int = 200) -> list[dict[str, Any]]:
        """Deliver queued async invocations to the worker until none is left."""
        results: list[dict[str, Any]] = []
        for _ in range(limit):
            item = self.invoker.pop()
            if item is None:
                return results
            event = {"run_id": item.run_id, "reason": item.reason, "hop": item.hop}
            results.append(self.worker(event, LambdaContext()))
        raise AssertionError(f"still invoking after {limit} invocations")

    def fire_timers(self) -> list[dict[str, Any]]:
        from tests.handlers.events import scheduler_target_input

        fired = self.timers.due(self.clock.now())
        return [self.worker(scheduler_target_input(r), LambdaContext()) for r in fired]

    def snapshot(self) -> list[list[dict[str, Any]]]:
        """Every item of both tables, in a stable order (for "nothing was written")."""
        out = []
        for table in self.tables:
            items = self.client.scan(TableName=table, ConsistentRead=True)["Items"]
            out.append(sorted(items, key=lambda i: json.dumps(i, sort_keys=True)))
        return out


def _headers(raw: dict[str, Any]) -> dict[str, Any]:
    return dict(raw.get("multiValueHeaders") or {}) | dict(raw.get("headers") or {})


def build_stack(
    client: Any,
    make_tables: MakeTables | None,
    timers: Timers | None = None,
    tables: tuple[str, str] | None = None,
    app: App | None = None,
    served: Any = None,
    **overrides: Any,
) -> Stack:
    """Tables (made, or the given ones), settings (``overrides`` change fields) and the
    four handlers over them."""
    if tables is None:
        assert make_tables is not None
        tables = make_tables(client)
    ledger_table, idem_table = tables
    settings = Settings(
        app="tests.handlers.workflows:app",
        ledger_table=ledger_table,
        idempotency_table=idem_table,
        worker_function=WORKER_ARN,
        callback_secret_name="durable/callback",
        webhook_secret_name="durable/webhook",
        callback_base_url="https://abcdef1234.execute-api.us-east-1.amazonaws.com/test",
        sweep_grace_seconds=0,
        **{
            "start_event_sources": "com.example.signup",
            "start_event_accounts": ACCOUNT,
            **overrides,
        },
    )
    clock = FakeClock(datetime.now(UTC).replace(microsecond=0))
    invoker = MemoryInvoker()
    memory_timers = MemoryTimers()
    secrets = {
        "durable/callback": CALLBACK_SECRET,
        "durable/webhook": json.dumps({"greet": WEBHOOK_SECRET}),  # a key per hook
    }
    recurring = MemoryRecurring(clock.now)
    # As aws_services composes it: every request reports its units to the meter.
    meter = Meter()
    dynamodb_units.watch(client, meter)
    ledger = DynamoLedger(client, ledger_table, due_shards=settings.due_shards)
    units = dynamodb_units.RunWriteUnits(ledger)
    units.install(meter)
    services = Services(
        ledger=ledger,
        meter=meter,
        schedules=recurring,
        effects=DynamoEffectStore(client, idem_table),
        invoker=invoker,
        nonces=DynamoNonceStore(client, idem_table),
        timers=timers or memory_timers,
        secrets=secrets.__getitem__,
        clock=clock,
        idempotency=lambda: DynamoDBPersistenceLayer(table_name=idem_table, boto3_client=client),
        keys=LocalKeys(),
        served=served,
    )
    tables = (ledger_table, idem_table)
    stack = Stack(client, tables, settings, clock, invoker, memory_timers, secrets, recurring)
    for name, factory in [
        ("api", api_handler),
        ("worker", worker_handler),
        ("sweeper", sweeper_handler),
        ("events", events_handler),
    ]:
        stack.handlers[name] = factory(app or workflows.app, settings, services=services)
    return stack


@pytest.fixture(autouse=True)
def _reset_workflow_flags() -> Iterator[None]:
    yield
    workflows.FLAKY["fail"] = True


@pytest.fixture(params=["moto", pytest.param("dynamodb-local", marks=pytest.mark.integration)])
def stack(request: pytest.FixtureRequest, make_tables: MakeTables) -> Stack:
    fixture = "moto_client" if request.param == "moto" else "ddb_local_client"
    return build_stack(request.getfixturevalue(fixture), make_tables)


@pytest.fixture
def local_stack(ddb_local_client: Any, make_tables: MakeTables) -> Stack:
    """DynamoDB Local only: races need a server that serializes conditional writes."""
    return build_stack(ddb_local_client, make_tables)


def later(stack: Stack, **delta: float) -> None:
    stack.clock.advance(timedelta(**delta))
