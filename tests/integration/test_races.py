"""Races on real DynamoDB (DynamoDB Local over HTTP): many workers, one run.

Each test lets threads contend through the real conditional writes and checks the run
ends consistent: no step body run twice where the protocol promises once, nothing lost.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, Engine, EngineConfig, RunStatus
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.memory import MemoryInvoker
from durable.core.clock import FakeClock
from durable.errors import InvalidState
from tests.conftest import MakeTables

pytestmark = pytest.mark.integration

bodies: Counter[str] = Counter()
lock = threading.Lock()


def body(name: str) -> str:
    with lock:
        bodies[name] += 1
    return name


app = App()


@app.workflow
def three(ctx: Context) -> str:
    return "".join(ctx.step(body, n) for n in ("a", "b", "c"))


@app.workflow
def waits(ctx: Context) -> Any:
    ctx.step(body, "before")
    return ctx.wait_for_signal("go")


@app.workflow
def nap(ctx: Context) -> str:
    ctx.sleep(timedelta(minutes=5))
    return ctx.step(body, "after-nap")


def engine_on(client: Any, make_tables: MakeTables, clock: FakeClock | None = None) -> Engine:
    ledger_table, idem_table = make_tables(client)
    return Engine(
        app,
        DynamoLedger(client, ledger_table),
        MemoryInvoker(),
        DynamoEffectStore(client, idem_table),
        clock=clock,
        config=EngineConfig(callback_secret=b"k" * 32, sweep_grace=timedelta(0)),
    )


def together(n: int, fn: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fn(i)
        except Exception as e:  # collected, asserted by the caller
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_concurrent_invocations_of_one_run_execute_each_step_once(
    ddb_local_client: Any, make_tables: MakeTables
) -> None:
    bodies.clear()
    engine = engine_on(ddb_local_client, make_tables)
    run = engine.start("three")
    outcomes = together(6, lambda _: engine.resume(run.run_id).result)
    assert outcomes.count("succeeded") == 1
    assert set(outcomes) <= {"succeeded", "busy"}
    assert engine.get_run(run.run_id).output == '"abc"'
    assert dict(bodies) == {"a": 1, "b": 1, "c": 1}


def test_concurrent_starts_with_one_key_make_one_run(
    ddb_local_client: Any, make_tables: MakeTables
) -> None:
    engine = engine_on(ddb_local_client, make_tables)
    runs = together(8, lambda _: engine.start("three", idempotency_key="order-7"))
    assert len({r.run_id for r in runs}) == 1
    assert len(engine.list_runs(workflow="three").items) == 1


def test_a_signal_racing_a_cancel_leaves_a_consistent_run(
    ddb_local_client: Any, make_tables: MakeTables
) -> None:
    bodies.clear()
    engine = engine_on(ddb_local_client, make_tables)
    for round_ in range(5):
        run = engine.start("waits")
        engine.resume(run.run_id)  # now waiting for the signal

        def act(i: int, run_id: str = run.run_id, n: int = round_) -> str:
            if i == 0:
                engine.signal(run_id, "go", {"round": n})
                return "signaled"
            engine.cancel(run_id, "race")
            return "canceled"

        results = together(2, act)
        assert all(r in ("signaled", "canceled") or isinstance(r, InvalidState) for r in results)
        engine.resume(run.run_id)
        final = engine.get_run(run.run_id)
        # Whichever landed first decides; the run is never both, never stuck.
        assert final.status in (RunStatus.CANCELED, RunStatus.SUCCEEDED)
        if final.status == RunStatus.SUCCEEDED:
            assert final.output == f'{{"round":{round_}}}'


def test_the_sweeper_and_a_timer_firing_together_resume_the_run_once(
    ddb_local_client: Any, make_tables: MakeTables
) -> None:
    bodies.clear()
    clock = FakeClock()
    engine = engine_on(ddb_local_client, make_tables, clock)
    run = engine.start("nap")
    assert engine.resume(run.run_id).result == "suspended"
    clock.advance(timedelta(minutes=6))
    # The Scheduler's invocation and the sweeper's invocation arrive at once.
    outcomes = together(2, lambda i: engine.resume(run.run_id, reason="timer" if i else "sweep"))
    assert sorted(o.result for o in outcomes) == ["busy", "succeeded"]
    assert bodies["after-nap"] == 1
