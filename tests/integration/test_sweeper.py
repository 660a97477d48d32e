"""The sweeper on real DynamoDB (moto in-process, DynamoDB Local): every lost trigger is
found, entries younger than the grace period are left to the Scheduler, each due entry
is claimed once, invocations are capped per sweep and the rest come in later sweeps."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, Engine, EngineConfig
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.memory import MemoryInvoker
from durable.core.clock import FakeClock
from durable.testing import CrashingPort, CrashPlan, CrashPoint, SimulatedCrash
from tests.conftest import MakeTables

app = App()


def work() -> str:
    return "done"


@app.workflow
def short(ctx: Context) -> str:
    ctx.step(work)
    ctx.sleep(timedelta(hours=1))
    return ctx.step(work)


@app.workflow
def two(ctx: Context) -> str:
    return ctx.step(work) + ctx.step(work)


@pytest.fixture
def client(dynamodb_client: Any) -> Any:
    """On moto in-process, DynamoDB Local and LocalStack (``DYNAMODB_SERVERS`` in conftest)."""
    return dynamodb_client


class LossyInvoker(MemoryInvoker):
    """Async invocations that can be lost (as an Event invoke can be, in theory)."""

    def __init__(self) -> None:
        super().__init__()
        self.drop = 0

    def invoke(self, run_id: str, reason: str, hop: int = 0) -> None:
        if self.drop > 0:
            self.drop -= 1
            return
        super().invoke(run_id, reason, hop)


class Stack:
    def __init__(self, client: Any, make_tables: MakeTables, **config: Any) -> None:
        ledger_table, idem_table = make_tables(client)
        self.clock = FakeClock()
        self.invoker = LossyInvoker()
        self.plan = CrashPlan()
        self.ledger = DynamoLedger(client, ledger_table)
        self.engine = Engine(
            app,
            CrashingPort("ledger", self.ledger, self.plan),
            self.invoker,
            DynamoEffectStore(client, idem_table),
            clock=self.clock,
            config=EngineConfig(lease=timedelta(seconds=60), **config),
        )

    def invoked(self) -> list[str]:
        out = []
        while (item := self.invoker.pop()) is not None:
            out.append(item.run_id)
        return out


def test_a_start_whose_invocation_was_lost_is_started_after_the_grace(
    client: Any, make_tables: MakeTables
) -> None:
    stack = Stack(client, make_tables, sweep_grace=timedelta(minutes=2))
    stack.invoker.drop = 1
    run = stack.engine.start("short")  # the invocation was lost
    assert stack.invoked() == []
    stack.clock.advance(timedelta(minutes=1))
    assert stack.engine.sweep().invoked == 0  # younger than the grace: the Scheduler's turn
    stack.clock.advance(timedelta(minutes=2))
    report = stack.engine.sweep()
    assert (report.invoked, stack.invoked()) == (1, [run.run_id])
    assert stack.engine.sweep().invoked == 0  # claimed: not invoked twice


def test_a_lost_timer_and_a_dead_owner_are_both_found(client: Any, make_tables: MakeTables) -> None:
    stack = Stack(client, make_tables, sweep_grace=timedelta(0))
    sleeper = stack.engine.start("short")
    stack.invoked()
    assert stack.engine.resume(sleeper.run_id).result == "suspended"  # no timer service
    dead = stack.engine.start("short")
    stack.invoked()
    # the dead run's first step write (the sleeper's sleep wrote no step item)
    first_write = stack.plan.counts.get("ledger.write_step", 0) + 1
    stack.plan.points.append(CrashPoint("ledger.write_step", first_write, "before"))
    with pytest.raises(SimulatedCrash):
        stack.engine.resume(dead.run_id)  # claimed, then died: its lease runs 60 s
    stack.clock.advance(timedelta(seconds=30))
    assert stack.engine.sweep().invoked == 0  # the dead owner's lease still runs
    stack.clock.advance(timedelta(hours=1))
    stack.engine.sweep()
    assert sorted(stack.invoked()) == sorted([sleeper.run_id, dead.run_id])
    assert stack.engine.resume(dead.run_id).result == "suspended"  # taken over
    assert stack.engine.resume(sleeper.run_id).result == "succeeded"


def test_a_lost_hand_off_is_continued(client: Any, make_tables: MakeTables) -> None:
    stack = Stack(
        client,
        make_tables,
        sweep_grace=timedelta(0),
        steps_per_invocation=1,
        handoff_grace=timedelta(seconds=30),
    )
    run = stack.engine.start("two")
    stack.invoked()
    stack.invoker.drop = 1
    assert stack.engine.resume(run.run_id).result == "handed_off"  # its invoke was lost
    assert stack.invoked() == []
    stack.clock.advance(timedelta(seconds=31))
    stack.engine.sweep()
    assert stack.invoked() == [run.run_id]


def test_invocations_are_capped_per_sweep_and_paged_through(
    client: Any, make_tables: MakeTables
) -> None:
    stack = Stack(client, make_tables, sweep_grace=timedelta(0), sweep_max_invocations=5)
    stack.invoker.drop = 12
    runs = {stack.engine.start("short").run_id for _ in range(12)}
    stack.clock.advance(timedelta(seconds=1))
    first = stack.engine.sweep()
    assert (first.invoked, first.capped) == (5, True)
    second = stack.engine.sweep()
    third = stack.engine.sweep()
    assert (second.invoked, third.invoked, third.capped) == (5, 2, False)
    assert set(stack.invoked()) == runs
