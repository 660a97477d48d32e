"""The peer's wait suite (requirements 2-1 to 2-5) on our API: ``ctx.sleep``."""

from __future__ import annotations

from datetime import timedelta

from durable import App, Context, RunStatus, StepStatus
from durable.core.model import StepKind
from tests.conformance.helpers import play


def test_WAIT_2_1_wait_suspends_and_resumes() -> None:
    """2-1: a 2-second wait suspends the run; the invocation after it ends the run.

    In our terms: a wait without ``name=`` is named "sleep" in our ledger (the peer's has no
    name)."""
    app = App()

    @app.workflow
    def basic_wait(ctx: Context) -> None:
        ctx.sleep(timedelta(seconds=2))

    played = play(app, "basic_wait")
    assert played.run.status == RunStatus.WAITING
    (sleep,) = played.records()
    assert (sleep.kind, sleep.name, sleep.status) == (StepKind.SLEEP, "sleep", StepStatus.WAITING)
    assert played.seconds_after_start(sleep.wake_at) == 2
    played.advance(seconds=2)
    assert played.status == RunStatus.SUCCEEDED
    assert played.invocations == ["suspended", "succeeded"]
    assert played.records()[0].status == StepStatus.DONE


def test_WAIT_2_2_wait_with_a_name() -> None:
    """2-2: ``name=`` names the wait in the ledger."""
    app = App()

    @app.workflow
    def named_wait(ctx: Context) -> None:
        ctx.sleep(timedelta(seconds=2), name="custom_wait_name")

    played = play(app, "named_wait", until=timedelta(seconds=2))
    assert played.status == RunStatus.SUCCEEDED
    assert [(r.name, r.kind) for r in played.records()] == [("custom_wait_name", StepKind.SLEEP)]


def test_WAIT_2_3_two_sequential_waits() -> None:
    """2-3: two named waits, each suspending and resuming the run (three invocations)."""
    app = App()

    @app.workflow
    def two_waits(ctx: Context) -> dict[str, int]:
        ctx.sleep(timedelta(seconds=2), name="wait-1")
        ctx.sleep(timedelta(seconds=2), name="wait-2")
        return {"completedWaits": 2}

    played = play(app, "two_waits", until=timedelta(seconds=10))
    assert played.result() == {"completedWaits": 2}
    assert played.invocations == ["suspended", "suspended", "succeeded"]
    first, second = played.records()
    assert (first.name, second.name) == ("wait-1", "wait-2")
    assert played.seconds_after_start(first.wake_at) == 2
    assert played.seconds_after_start(second.wake_at) == 4


def test_WAIT_2_4_a_wait_in_minutes() -> None:
    """2-4: a wait of one minute is recorded as 60 seconds, and the run suspends."""
    app = App()

    @app.workflow
    def minutes_wait(ctx: Context) -> None:
        ctx.sleep(timedelta(minutes=1))

    played = play(app, "minutes_wait")
    assert played.invocations == ["suspended"]
    assert played.status == RunStatus.WAITING
    assert played.seconds_after_start(played.records()[0].wake_at) == 60


def test_WAIT_2_5_a_wait_of_an_hour() -> None:
    """2-5: a wait of one hour is recorded as 3600 seconds, and the run suspends."""
    app = App()

    @app.workflow
    def hour_wait(ctx: Context) -> None:
        ctx.sleep(timedelta(hours=1))

    played = play(app, "hour_wait")
    assert played.invocations == ["suspended"]
    assert played.status == RunStatus.WAITING
    assert played.seconds_after_start(played.records()[0].wake_at) == 3600
