"""DynamoDB Local killed mid-run, then restarted on its files: crash-only storage.

A run's second step finishes its body; before its record is written the server is SIGKILLed.
The worker must stop with one clean, retryable ``StorageError`` (what Lambda's retry, or the
sweeper, turns into another invocation), nothing acknowledged may be lost, nothing half-written
may appear, and once DynamoDB Local is back on the same ``-dbPath`` the run completes with every
step recorded exactly once.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from durable import App, Context, Engine, EngineConfig, RunStatus, StepStatus
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.memory import MemoryInvoker
from durable.core.clock import FakeClock
from durable.errors import StorageError
from durable.testing import CrashPlan, CrashPoint
from infra.local.dynamodb_local import DynamoDBLocal
from tests.conftest import _fresh_tables, aws_client

app = App()
executions: Counter[str] = Counter()


def first() -> str:
    executions["first"] += 1
    return "a"


def second() -> str:
    executions["second"] += 1
    return "b"


def third() -> str:
    executions["third"] += 1
    return "c"


@app.workflow
def three_steps(ctx: Context) -> str:
    return ctx.step(first) + ctx.step(second) + ctx.step(third)


class KillingPort:
    """Like ``durable.testing.CrashingPort`` (the same ``CrashPlan`` decides when), except that
    the planned crash is the *server's* death: ``kill`` runs, then the call goes ahead against
    the dead server, as the worker's next request would."""

    def __init__(self, name: str, target: Any, plan: CrashPlan, kill: Callable[[], None]) -> None:
        self._name = name
        self._target = target
        self._plan = plan
        self._kill = kill

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._target, attr)
        if not callable(value) or attr.startswith("_"):
            return value
        key = f"{self._name}.{attr}"

        def call(*args: Any, **kwargs: Any) -> Any:
            before, _ = self._plan.tick(key)
            if before:
                self._kill()
            return value(*args, **kwargs)

        return call


def _client(endpoint: str) -> Any:
    # Short timeouts and one retry: a dead server must fail the call in about a second, not after
    # botocore's default of ten attempts with backoff.
    return aws_client(
        "dynamodb",
        endpoint,
        retries={"total_max_attempts": 2},
        connect_timeout=2,
        read_timeout=5,
    )


def _sigkill(server: DynamoDBLocal) -> None:
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while server.running:  # polls (and reaps) the JVM
        assert time.monotonic() < deadline, "DynamoDB Local survived SIGKILL"
        time.sleep(0.05)


def _engine(client: Any, tables: tuple[str, str], clock: FakeClock, ledger: Any = None) -> Engine:
    return Engine(
        app,
        ledger or DynamoLedger(client, tables[0]),
        MemoryInvoker(),
        DynamoEffectStore(client, tables[1]),
        clock=clock,
        config=EngineConfig(lease=timedelta(seconds=60)),
    )


def test_a_server_killed_between_two_steps_loses_nothing_and_the_run_completes(
    tmp_path: Path,
) -> None:
    executions.clear()
    db_path = tmp_path / "db"
    clock = FakeClock()

    # GIVEN a run on DynamoDB Local persisting to db_path, and a plan to SIGKILL the server
    # right before the second step's record is written
    server = DynamoDBLocal(log_path=tmp_path / "dynamodb-1.log")
    try:
        client = _client(server.start(db_path=db_path))
        tables = _fresh_tables(client)
        plan = CrashPlan([CrashPoint("ledger.write_step", 2, "before")])
        ledger = KillingPort(
            "ledger", DynamoLedger(client, tables[0]), plan, lambda: _sigkill(server)
        )
        engine = _engine(client, tables, clock, ledger)
        run = engine.start("three_steps")

        # WHEN the worker runs into the dead server
        # THEN it stops with one clean, retryable StorageError caused by the connection failure
        with pytest.raises(StorageError) as info:
            engine.resume(run.run_id)
        assert info.value.retryable, info.value
        assert info.value.__cause__ is not None
        assert not server.running
    finally:
        server.stop()

    # WHEN DynamoDB Local restarts on the same files (a new port: a new client, as a new
    # invocation would build)
    server = DynamoDBLocal(log_path=tmp_path / "dynamodb-2.log")
    try:
        client = _client(server.start(db_path=db_path))
        ledger_after = DynamoLedger(client, tables[0])

        # THEN every acknowledged write survived the SIGKILL and the lost one left no trace
        history = ledger_after.load(run.run_id)
        assert history is not None
        assert history.run.status == RunStatus.RUNNING
        assert {p: s.status for p, s in history.steps.items()} == {"0001": StepStatus.DONE}

        # AND after the dead worker's lease expires, the run completes from where it stopped
        engine = _engine(client, tables, clock)
        assert engine.resume(run.run_id).result == "busy"  # the dead worker's lease still holds
        clock.advance(timedelta(seconds=70))
        assert engine.resume(run.run_id).result == "succeeded"

        stored = engine.get_run(run.run_id)
        assert stored.status == RunStatus.SUCCEEDED and stored.takeovers == 1
        steps = engine.history(run.run_id)
        assert [(s.position, s.name, s.status) for s in steps] == [
            ("0001", "first", StepStatus.DONE),
            ("0002", "second", StepStatus.DONE),
            ("0003", "third", StepStatus.DONE),
        ]
        # At-least-once: only the step whose record was lost ran twice.
        assert dict(executions) == {"first": 1, "second": 2, "third": 1}
        # Nothing else in the partition: the run item and one item per step.
        items = client.scan(TableName=tables[0], ConsistentRead=True)["Items"]
        assert sorted(i["sk"]["S"] for i in items) == ["RUN", "STEP#0001", "STEP#0002", "STEP#0003"]
    finally:
        server.stop()
