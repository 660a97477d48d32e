"""Effect records outlive every retry of their run, judged on one clock, and an effect
action names one effect (issue 12, holes 7 and 13)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from durable import App, Context, EngineConfig, RetryPolicy, RunStatus, current_step
from durable.core.clock import FakeClock
from durable.errors import InvalidState
from durable.testing import LocalRunner
from examples.services import FakeServices


def charge_app(remote: FakeServices, failures: list[int]) -> App:
    app = App()

    @app.step(retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=1)))
    def charge(amount: int) -> str:
        ref = current_step().effect("charge", lambda key: remote.perform("charge", key, "ch_1"))
        if failures:
            failures.pop()
            raise ConnectionError("the receipt service timed out")
        return str(ref)

    @app.workflow
    def pay(ctx: Context, amount: int) -> str:
        return charge(amount)

    return app


def test_effect_expiry_is_judged_on_the_engines_clock_not_the_wall_clock() -> None:
    """GIVEN a LocalRunner whose fake clock stands years before the wall clock
    WHEN a step's charge went through and the step is retried
    THEN the retry finds the stored reference: the record is not taken as expired by the
    wall clock (hole 7)."""
    remote = FakeServices()
    runner = LocalRunner(charge_app(remote, [1]), clock=FakeClock(datetime(2020, 1, 1, tzinfo=UTC)))
    run = runner.start("pay", 5)
    runner.run_until_idle()
    runner.advance(minutes=5)
    assert runner.get_run(run.run_id).output == '"ch_1"'
    assert remote.calls["charge"] == 1


def test_a_wait_past_the_runs_lifetime_is_refused_at_the_call() -> None:
    """GIVEN max_run_lifetime of 365 days
    WHEN a workflow sleeps 390 days
    THEN the sleep fails at the call with an error naming max_run_lifetime, instead of a
    run that outlives its effect records (hole 7)."""
    app = App()

    @app.workflow
    def nap(ctx: Context) -> None:
        ctx.sleep(timedelta(days=390))

    runner = LocalRunner(app)
    run = runner.start("nap")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert stored.error is not None and "max_run_lifetime" in stored.error.message
    assert runner.history(run.run_id) == []


def test_a_run_woken_past_its_lifetime_fails_and_cannot_be_retried() -> None:
    """GIVEN a run waiting for a signal without a timeout
    WHEN the signal comes after max_run_lifetime
    THEN the run fails with needs_attention and a retry is refused (its effect records may
    be gone), naming fork as the way on (hole 7)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> object:
        return ctx.wait_for_signal("go")

    runner = LocalRunner(app, config=EngineConfig(inprocess_wait_threshold=timedelta(0)))
    run = runner.start("flow")
    runner.run_until_idle()
    runner.clock.advance(timedelta(days=366))
    runner.signal(run.run_id, "go", 1)
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.needs_attention) == (RunStatus.FAILED, True)
    assert stored.error is not None and "max_run_lifetime" in stored.error.message
    with pytest.raises(InvalidState, match="fork"):
        runner.retry(run.run_id)


def test_the_same_effect_action_twice_in_one_attempt_is_refused() -> None:
    """GIVEN a step that calls effect("email") once per recipient
    WHEN the second call comes
    THEN it fails with an error that says to name each effect, instead of silently
    returning the first email's id (hole 13)."""
    app = App()
    remote = FakeServices()

    def send_to(to: str) -> Callable[[str], str]:
        return lambda key: remote.perform("email", key, to)

    def send_all() -> list[str]:
        step = current_step()
        return [str(step.effect("email", send_to(to))) for to in ("a@x", "b@x")]

    @app.workflow
    def flow(ctx: Context) -> list[str]:
        return ctx.step(send_all)

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert stored.error is not None and "effect action 'email'" in stored.error.message
    assert remote.effects["email"] == 1
