"""Operator decisions that must not run work inline nor copy what is not settled (issue 12,
holes 10, 11 and 12)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, EngineConfig, RunStatus, StepStatus
from durable.engine.waits import Callback
from durable.errors import InvalidInput, InvalidState
from durable.testing import LocalRunner


def test_cancel_never_runs_a_compensation_inside_the_request() -> None:
    """GIVEN a failed run compensating one step per invocation (its lease released between
    two compensations)
    WHEN an operator cancels it without compensation
    THEN the cancel call runs no compensation body (it is refused: a run undoing its steps
    cannot be canceled, issue 31 hole 8), the compensations finish in workers, and the run
    ends FAILED with the original error and position (hole 10)."""
    app = App()
    undone: list[tuple[str, bool]] = []
    in_cancel = [False]

    def book(name: str) -> str:
        return name

    def unbook(ref: str, name: str) -> None:
        undone.append((ref, in_cancel[0]))

    def charge() -> None:
        raise ValueError("card declined")

    @app.workflow
    def trip(ctx: Context) -> None:
        ctx.step(book, "hotel", compensate=unbook)
        ctx.step(book, "flight", compensate=unbook)
        ctx.step(charge)

    runner = LocalRunner(app, config=EngineConfig(steps_per_invocation=1))
    run = runner.start("trip")
    while runner.get_run(run.run_id).status != RunStatus.COMPENSATING:
        item = runner.invoker.pop()
        assert item is not None
        runner.engine.resume(item.run_id, reason=item.reason)
    assert runner.get_run(run.run_id).lease_owner is None
    in_cancel[0] = True
    with pytest.raises(InvalidState, match="undoing its completed steps"):
        runner.cancel(run.run_id, "give up")
    in_cancel[0] = False
    runner.run_until_idle()
    assert [inside for _, inside in undone] == [False, False]
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert stored.error is not None and "card declined" in stored.error.message
    assert stored.error.position == "0003"


def test_cancel_with_compensation_while_waiting_for_a_submitted_callback() -> None:
    """GIVEN a run waiting in wait_for_callback(submit=...) after a compensable step
    WHEN an operator cancels it with compensation
    THEN the step is undone once and the run ends CANCELED, without non-determinism or
    attention (hole 11)."""
    app = App()
    undone: list[str] = []
    sent: list[Callback] = []

    def reserve() -> str:
        return "r1"

    def release(ref: str) -> None:
        undone.append(ref)

    def email(cb: Callback) -> None:
        sent.append(cb)

    @app.workflow
    def flow(ctx: Context) -> Any:
        ctx.step(reserve, compensate=release)
        return ctx.wait_for_callback("approval", submit=email)

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    runner.cancel(run.run_id, "withdrawn", compensate=True)
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.needs_attention) == (RunStatus.CANCELED, False)
    assert undone == ["r1"]
    # The run shows it was undone (a retry is then refused): once lost on this path.
    assert stored.compensated is True


def callback_app(sent: list[Callback]) -> App:
    app = App()

    def prepare() -> str:
        return "p"

    def email(cb: Callback) -> None:
        sent.append(cb)

    @app.workflow
    def flow(ctx: Context) -> Any:
        ctx.step(prepare)
        return ctx.wait_for_callback("approval", submit=email)

    return app


def test_fork_never_copies_a_step_recorded_after_an_unfinished_one() -> None:
    """GIVEN a canceled run whose callback (step 2) was never answered but whose submit
    step (3) is DONE
    WHEN an operator forks it from step 4
    THEN the fork is refused, naming the step to fork from; from step 2 the fork sends a
    new URL and can be answered (hole 12)."""
    sent: list[Callback] = []
    runner = LocalRunner(callback_app(sent))
    run = runner.start("flow")
    runner.run_until_idle()
    runner.cancel(run.run_id, "stale")
    with pytest.raises(InvalidInput, match="from_step"):
        runner.fork(run.run_id, 4)
    forked = runner.fork(run.run_id, 2)
    runner.run_until_idle()
    assert len(sent) == 2 and sent[1].token != sent[0].token
    runner.complete_callback(sent[1].token, "ok")
    runner.run_until_idle()
    assert runner.get_run(forked.run_id).output == '"ok"'


def test_fork_refuses_runs_still_in_flight_and_positions_it_cannot_honour() -> None:
    """GIVEN a waiting run and a finished one
    WHEN an operator forks the waiting one, or the finished one from a nested, zero or
    out-of-range position
    THEN each is refused with the field to fix and nothing is created (hole 12)."""
    sent: list[Callback] = []
    runner = LocalRunner(callback_app(sent))
    waiting = runner.start("flow")
    runner.run_until_idle()
    with pytest.raises(InvalidState, match="WAITING"):
        runner.fork(waiting.run_id, 2)
    runner.complete_callback(sent[0].token, "ok")
    runner.run_until_idle()
    for bad in ("0001.0001", "0", 99, -1):
        with pytest.raises(InvalidInput, match="from_step"):
            runner.fork(waiting.run_id, bad)
    assert runner.memory_ledger.all_run_ids() == [waiting.run_id]


def test_fork_of_a_run_past_ten_thousand_steps_keeps_every_earlier_step() -> None:
    """GIVEN a run of 10,000 steps
    WHEN it is forked from step 10,000
    THEN steps 1-9,999 are copied (positions compared as numbers, not text) and only the
    last body runs again (hole 12)."""
    app = App()
    bodies: list[int] = []

    def tick(i: int) -> int:
        bodies.append(i)
        return i

    @app.workflow
    def long(ctx: Context) -> int:
        return sum(ctx.step(tick, i) for i in range(10_000))

    runner = LocalRunner(app, determinism_guard=False)
    run = runner.start("long")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    bodies.clear()
    forked = runner.fork(run.run_id, 10_000)
    runner.run_until_idle()
    assert bodies == [9_999]
    assert runner.get_run(forked.run_id).output == str(sum(range(10_000)))
    assert runner.history(forked.run_id)[-1].status == StepStatus.DONE


def test_the_history_of_a_long_run_is_in_position_order() -> None:
    """GIVEN positions past 9999 (five digits)
    WHEN the history is read
    THEN step 10000 comes after step 9999 (hole 12's text comparison, on reading)."""
    app = App()

    def tick(i: int) -> int:
        return i

    @app.workflow
    def long(ctx: Context) -> None:
        for i in range(9_999):
            ctx.step(tick, i)
        ctx.sleep(timedelta(hours=1))  # position 10000: the last max_history allows

    runner = LocalRunner(app, determinism_guard=False)
    run = runner.start("long")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.WAITING
    positions = [s.position for s in runner.engine.history(run.run_id)]
    assert positions[:2] == ["0001", "0002"]
    assert positions[-3:] == ["9998", "9999", "10000"]
