"""An awaited async step's body goes on after an await only on a recent view of its run
that shows no cancel: the workflow's loop is shared, so another body holding it (a slow
call, a paused worker) must not let a body run on long after a cancel was acknowledged
(found by the simulation explorer, seed 487)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, RetryPolicy, RunStatus, current_step
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit

ONE_TRY = RetryPolicy(max_attempts=1)


def gathered_app(
    seen: list[str], runner_of: list[LocalRunner], stall: timedelta, *, cancel: bool
) -> App:
    """``gather(slow(), charge())``: each body yields to the loop before its work; the
    slow one then holds the loop for ``stall`` (a call that hangs), during which the run
    is canceled when ``cancel``."""
    app = App()

    @app.step(name="slow", retry=ONE_TRY)
    async def slow() -> str:
        await asyncio.sleep(0)
        seen.append("slow")
        runner = runner_of[0]
        if cancel:
            runner.cancel(current_step().run_id, "customer left")
        runner.clock.advance(stall)
        return "slow"

    @app.step(name="charge", retry=ONE_TRY)
    async def charge() -> str:
        await asyncio.sleep(0)
        seen.append("charge")
        await asyncio.sleep(0)  # a later slice, on the view the first one looked at
        return "ch_1"

    @app.workflow(name="pay")
    async def pay(ctx: Context) -> list[str]:
        return list(await asyncio.gather(slow(), charge()))

    return app


def run_gathered(
    stall: timedelta, *, cancel: bool
) -> tuple[list[str], LocalRunner, str, list[Any]]:
    """The gathered run to its end; what the bodies saw, and the lease renewals written
    (each a look at the run) after the start's claim."""
    seen: list[str] = []
    runner_of: list[LocalRunner] = []
    runner = LocalRunner(
        gathered_app(seen, runner_of, stall, cancel=cancel), determinism_guard=False
    )
    runner_of.append(runner)
    renewals: list[Any] = []
    ledger = runner.engine.ledger
    real = ledger.update_run

    def update_run(run_id: str, guard: Any, changes: Any) -> Any:
        if changes.get("lease_until"):
            renewals.append(changes)
        return real(run_id, guard, changes)

    ledger.update_run = update_run  # type: ignore[method-assign]
    run = runner.start("pay")
    runner.run_until_idle()
    return seen, runner, run.run_id, renewals


def test_a_body_held_on_the_loop_past_the_cancel_bound_does_not_go_on() -> None:
    """GIVEN two gathered async steps, both started (each at its first await), the first
    then holding the loop 20 s while the run is canceled
    WHEN the second body's turn comes (its view of the run 20 s old, past the 5 s
    ``cancel_check_interval``)
    THEN the worker looks at the run again, sees the cancel and the second body stops at
    its await: its work never runs, and the run ends canceled."""
    seen, runner, run_id, _ = run_gathered(timedelta(seconds=20), cancel=True)
    assert seen == ["slow"]
    assert runner.get_run(run_id).status == RunStatus.CANCELED
    steps = {s.position: s for s in runner.history(run_id)}
    assert "0002" not in steps  # the stopped body recorded nothing


def test_a_cancel_the_worker_already_saw_stops_a_body_at_its_next_await() -> None:
    """GIVEN the same gather, the first body holding the loop only 1 s (its view still
    fresh), and a third step whose start looks at the run and sees the cancel
    WHEN a body under way resumes after that
    THEN it does not go on either: the cancel is known, as it would be to a new body."""
    seen: list[str] = []
    runner_of: list[LocalRunner] = []
    app = App()

    @app.step(name="slow", retry=ONE_TRY)
    async def slow() -> str:
        await asyncio.sleep(0)
        seen.append("slow")
        runner = runner_of[0]
        runner.cancel(current_step().run_id, "customer left")
        # The worker's view (the claim's read) is now 6 s old: the next start renews.
        runner.clock.advance(timedelta(seconds=6))
        return "slow"

    @app.step(name="charge", retry=ONE_TRY)
    async def charge() -> str:
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # the third step's start (and its renewal) comes first
        seen.append("charge")
        return "ch_1"

    @app.step(name="late", retry=ONE_TRY)
    async def late() -> str:
        seen.append("late")
        return "late"

    async def after_slow() -> str:
        await asyncio.sleep(0)  # its step starts after the slow body, before charge goes on
        return await late()

    @app.workflow(name="pay")
    async def pay(ctx: Context) -> list[str]:
        return list(await asyncio.gather(slow(), charge(), after_slow()))

    runner = LocalRunner(app, determinism_guard=False)
    runner_of.append(runner)
    run = runner.start("pay")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.CANCELED
    assert seen == ["slow"]


def test_a_body_whose_view_stays_fresh_goes_on_and_costs_no_look() -> None:
    """GIVEN the same gather, the first body holding the loop 1 s and no cancel
    WHEN the second body resumes (its view 1 s old)
    THEN it goes on without another look at the run: no lease renewal is written."""
    seen, runner, run_id, renewals = run_gathered(timedelta(seconds=1), cancel=False)
    assert runner.result(run_id) == ["slow", "ch_1"]
    assert seen == ["slow", "charge"]
    assert renewals == []


def test_a_body_held_past_the_bound_on_a_run_not_canceled_looks_once_and_goes_on() -> None:
    """GIVEN the first body holding the loop 20 s, no cancel
    WHEN the second body resumes on its 20 s old view
    THEN one renewal looks at the run, finds no cancel, and the body goes on to its end
    (its next slice rests on that look: no second one)."""
    seen, runner, run_id, renewals = run_gathered(timedelta(seconds=20), cancel=False)
    assert runner.result(run_id) == ["slow", "ch_1"]
    assert seen == ["slow", "charge"]
    assert len(renewals) == 1
