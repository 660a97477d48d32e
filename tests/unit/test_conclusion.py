"""How a run ends: a cancel wins over continue-as-new, no error escapes while a lease is
held, and a successor is never someone else's run (issue 12, holes 3, 4 and 14)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from durable import App, Context, EngineConfig, RunStatus
from durable.core.ids import derived_run_id
from durable.core.limits import ITEM_LIMIT
from durable.core.retention import incarnation
from durable.testing import LocalRunner

LEASE = timedelta(seconds=60)


def test_a_cancel_that_lands_mid_step_wins_over_continue_as_new() -> None:
    """GIVEN a loop that continues as new after a step
    WHEN a cancel lands while that step runs
    THEN the run ends CANCELED and no successor exists, now or after the sweeper (hole 3)."""
    app = App()
    runner: LocalRunner
    bodies: list[int] = []

    def work(n: int) -> int:
        bodies.append(n)
        if n == 0:
            runner.cancel(first[0], "stop the loop")
        return n + 1

    @app.workflow
    def loop(ctx: Context, n: int) -> int:
        n = ctx.step(work, n)
        ctx.continue_as_new(n)
        return n

    runner = LocalRunner(app, determinism_guard=False)
    first: list[str] = []
    run = runner.start("loop", 0)
    first.append(run.run_id)
    runner.run_until_idle()
    runner.advance(minutes=10)
    assert runner.get_run(run.run_id).status == RunStatus.CANCELED
    assert runner.memory_ledger.all_run_ids() == [run.run_id]
    assert bodies == [0]


class Count(BaseModel):
    n: int


def test_a_successor_input_the_workflow_refuses_fails_the_run_with_attention() -> None:
    """GIVEN a workflow that continues as new with input its own annotation refuses
    WHEN the worker concludes the run
    THEN the run ends FAILED with InvalidInput and needs_attention; resume raises nothing and
    no worker crash-loops on it (hole 4)."""
    app = App()

    @app.workflow
    def loop(ctx: Context, count: Count) -> None:
        ctx.continue_as_new({"n": "not a number"})

    runner = LocalRunner(app)
    run = runner.start("loop", {"n": 1})
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.needs_attention) == (RunStatus.FAILED, True)
    assert stored.error is not None and stored.error.type == "InvalidInput"
    assert stored.lease_owner is None and stored.due_at is None
    assert runner.memory_ledger.all_run_ids() == [run.run_id]


def test_a_successor_input_over_the_item_limit_fails_the_run_with_attention() -> None:
    """GIVEN a workflow that carries more state into its successor than an item holds
    WHEN the worker concludes the run
    THEN FAILED with PayloadTooLarge and needs_attention, and no successor (hole 4)."""
    app = App()

    @app.workflow
    def loop(ctx: Context, state: str) -> None:
        ctx.continue_as_new("x" * (ITEM_LIMIT + 10))

    runner = LocalRunner(app, large_values=False)
    run = runner.start("loop", "small")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.needs_attention) == (RunStatus.FAILED, True)
    assert stored.error is not None and stored.error.type == "PayloadTooLarge"
    assert runner.memory_ledger.all_run_ids() == [run.run_id]


def test_a_result_over_the_item_limit_fails_the_run_with_attention() -> None:
    """GIVEN a workflow whose result does not fit the run item
    WHEN the worker writes the result
    THEN the run ends FAILED with PayloadTooLarge and needs_attention at the first try, not
    RUNNING with workers dying on it at every takeover (hole 4)."""
    app = App()

    @app.workflow
    def big(ctx: Context) -> str:
        return "x" * ITEM_LIMIT

    runner = LocalRunner(app, config=EngineConfig(lease=LEASE), large_values=False)
    run = runner.start("big")
    runner.run_until_idle()
    runner.advance(LEASE * 5)
    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.needs_attention) == (RunStatus.FAILED, True)
    assert stored.error is not None and stored.error.type == "PayloadTooLarge"
    assert stored.output is None and stored.takeovers == 0


def test_a_preexisting_run_under_the_successor_id_is_never_adopted() -> None:
    """GIVEN someone who can start keyed runs and pre-creates a run under the id a
    continue-as-new successor would have had
    WHEN the run continues as new
    THEN its successor is a run of its own carrying the run's state (hole 14)."""
    app = App()

    @app.workflow
    def loop(ctx: Context, n: int) -> Any:
        if n == 1:
            ctx.continue_as_new(2)
        return n

    runner = LocalRunner(app)
    run = runner.start("loop", 1)
    planted = runner.start("loop", 666, idempotency_key=f"continue:{run.run_id}.{incarnation(run)}")
    assert planted.run_id == derived_run_id("loop", f"continue:{run.run_id}.{incarnation(run)}")
    runner.run_until_idle()
    successors = [
        runner.get_run(r)
        for r in runner.memory_ledger.all_run_ids()
        if runner.get_run(r).continued_from == run.run_id
    ]
    assert len(successors) == 1
    assert successors[0].run_id != planted.run_id and successors[0].input == "2"
    assert runner.get_run(run.run_id).output == f'{{"continued_as_new":"{successors[0].run_id}"}}'


def test_losing_the_lease_while_a_cancel_beats_continue_as_new_ends_the_invocation_quietly() -> (
    None
):
    """GIVEN a run that continues as new, a cancel with compensation that lands just before
    its final write, and a new owner that took the run over meanwhile
    WHEN the worker turns to the compensations and its first write fails on the lease
    THEN resume returns lease_lost instead of raising (explorer seed 201846)."""
    from durable.adapters.memory import MemoryLedger
    from durable.engine.engine import Engine

    app = App()

    def book() -> str:
        return "b1"

    def unbook(ref: str) -> None:
        return None

    @app.workflow
    def loop(ctx: Context, n: int) -> int:
        ctx.step(book, compensate=unbook)
        ctx.continue_as_new(n + 1)
        return n

    class Interrupted(MemoryLedger):
        def continue_run(self, run_id: str, guard: Any, changes: Any, successor: Any) -> None:
            engine.cancel(run_id, "stop", compensate=True)
            super().continue_run(run_id, guard, changes, successor)

        def update_run(self, run_id: str, guard: Any, changes: Any) -> Any:
            if changes.get("status") == "COMPENSATING":  # a takeover came first
                self.patch_run(run_id, {"fence": 99, "lease_owner": "new-owner"})
            return super().update_run(run_id, guard, changes)

    runner = LocalRunner(app)
    ledger = Interrupted()
    engine = Engine(app, ledger, runner.invoker, runner.effect_store, clock=runner.clock)
    run = engine.start("loop", 0)
    assert engine.resume(run.run_id).result == "lease_lost"
    assert ledger.all_run_ids() == [run.run_id]
