"""The peer's wait-for-condition suite (requirements 6-1 to 6-13) on our API:
``ctx.wait_for_condition(check, interval, timeout, initial_state=, until=, name=,
backoff=, max_interval=, max_attempts=, jitter=)``.

The peer's wait strategy is a function of the state deciding "continue after a delay" or
"stop"; ours is the same decision split in two: ``until(state)`` (stop when true) and the
delay options (``interval`` times ``backoff`` per check, up to ``max_interval``, full
jitter or none, at most ``max_attempts`` checks). Each check that does not stop parks the
run with the new state and the next check's time recorded (the peer's ``StepSucceeded``
with a next-attempt delay); the last check records the result."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from durable import App, Context, RunStatus, StepFailed, StepStatus
from durable.core.model import StepKind
from tests.conformance.helpers import UpperCodec, play

SECOND = timedelta(seconds=1)


def increment(n: int) -> int:
    return n + 1


def test_WAIT_FOR_CONDITION_6_1_polls_a_counter_up_to_a_threshold() -> None:
    """6-1: from state 0, each check adds one; polling stops at the input threshold (3),
    which is returned: three checks, suspended between them."""
    app = App()

    @app.workflow
    def counter(ctx: Context, threshold: int) -> int:
        return ctx.wait_for_condition(
            increment, SECOND, initial_state=0, until=lambda n: n >= threshold
        )

    played = play(app, "counter", 3)
    (record,) = played.records()
    assert (record.kind, record.status, record.attempt) == (
        StepKind.CONDITION,
        StepStatus.WAITING,
        1,
    )
    assert record.checkpoint is not None and record.checkpoint["state"] == "1"
    played.advance(seconds=10)
    assert played.result() == 3
    assert played.invocations == ["suspended", "suspended", "succeeded"]
    assert (played.records()[0].status, played.records()[0].attempt) == (StepStatus.DONE, 3)


def test_WAIT_FOR_CONDITION_6_2_met_on_the_first_check() -> None:
    """6-2: from state 5 the first check already meets the condition: no suspension."""
    app = App()

    def unchanged(n: int) -> int:
        return n

    @app.workflow
    def immediate(ctx: Context) -> int:
        return ctx.wait_for_condition(unchanged, SECOND, initial_state=5, until=lambda n: n >= 5)

    played = play(app, "immediate")
    assert played.result() == 5
    assert played.invocations == ["succeeded"]
    assert played.records()[0].attempt == 1


def test_WAIT_FOR_CONDITION_6_3_named_condition() -> None:
    """6-3: ``name="poll-status"`` names the wait's record; it stops at 2."""
    app = App()

    @app.workflow
    def named(ctx: Context, threshold: int) -> int:
        return ctx.wait_for_condition(
            increment,
            SECOND,
            initial_state=0,
            until=lambda n: n >= threshold,
            name="poll-status",
        )

    played = play(app, "named", 2, until=timedelta(seconds=10))
    assert played.result() == 2
    assert [r.name for r in played.records()] == ["poll-status"]
    assert played.invocations == ["suspended", "succeeded"]


def test_WAIT_FOR_CONDITION_6_4_initial_state_seeds_the_first_check() -> None:
    """6-4: the first check gets ``initial_state`` (5); each later one gets the state the
    one before returned (recorded across suspensions), up to 8."""
    app = App()
    seen: list[int] = []

    def counting(n: int) -> int:
        seen.append(n)
        return n + 1

    @app.workflow
    def seeded(ctx: Context, threshold: int) -> int:
        return ctx.wait_for_condition(
            counting, SECOND, initial_state=5, until=lambda n: n >= threshold
        )

    played = play(app, "seeded", 8, until=timedelta(seconds=10))
    assert played.result() == 8
    assert seen == [5, 6, 7]
    assert played.invocations == ["suspended", "suspended", "succeeded"]


def test_WAIT_FOR_CONDITION_6_5_fixed_delay_between_checks() -> None:
    """6-5: a fixed 2-second delay (``backoff=1.0``, no jitter): each parked check records
    its next check 2 s later."""
    app = App()

    @app.workflow
    def fixed(ctx: Context, threshold: int) -> int:
        return ctx.wait_for_condition(
            increment,
            timedelta(seconds=2),
            initial_state=0,
            until=lambda n: n >= threshold,
            backoff=1.0,
            jitter="none",
        )

    played = play(app, "fixed", 3)
    assert played.seconds_after_start(played.records()[0].wake_at) == 2
    played.advance(seconds=2)
    assert played.seconds_after_start(played.records()[0].wake_at) == 4
    played.advance(seconds=2)
    assert played.result() == 3
    assert played.invocations == ["suspended", "suspended", "succeeded"]


def test_WAIT_FOR_CONDITION_6_6_out_of_attempts_fails_the_run() -> None:
    """6-6: a condition never met, with at most 3 checks: after the third the wait ends
    and, uncaught, fails the run.

    Differs: running out of checks is our ``CallbackTimeout`` ("not met after 3 checks"),
    recorded TIMED_OUT (the peer raises a max-attempts error recorded as ``StepFailed``)."""
    app = App()

    @app.workflow
    def exhausted(ctx: Context) -> int:
        return ctx.wait_for_condition(
            increment,
            SECOND,
            initial_state=0,
            until=lambda n: n < 0,
            backoff=1.0,
            max_attempts=3,
        )

    played = play(app, "exhausted", until=timedelta(seconds=10))
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "CallbackTimeout"
    assert "not met after 3 checks" in played.error_message()
    assert played.invocations == ["suspended", "suspended", "failed"]
    (record,) = played.records()
    assert (record.status, record.attempt) == (StepStatus.TIMED_OUT, 3)


class ServiceDown(ValueError):
    """A check's error that our taxonomy calls terminal (a ``ValueError``)."""


def _raising_app() -> App:
    app = App()

    def broken(n: int) -> int:
        raise ServiceDown("the status service answered 400")

    @app.workflow
    def raises(ctx: Context) -> int:
        return ctx.wait_for_condition(broken, SECOND, initial_state=0, until=lambda n: n > 1)

    @app.workflow
    def catches(ctx: Context) -> Any:
        try:
            return ctx.wait_for_condition(broken, SECOND, initial_state=0, until=lambda n: n > 1)
        except StepFailed:
            return "recovered"

    return app


def test_WAIT_FOR_CONDITION_6_7_check_raises_and_fails_the_run() -> None:
    """6-7: the first check raises; the wait fails for good (``StepFailed``, recorded
    TERMINAL_FAILED) and, uncaught, fails the run.

    Differs: only a terminal error fails the wait at once (a ``TerminalError``, or a
    ``ValueError`` and the like by our taxonomy); a retryable one counts as "not yet"
    until the check's retry policy runs out (the peer never retries a check's error)."""
    played = play(_raising_app(), "raises")
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "StepFailed"
    assert "the status service answered 400" in played.error_message()
    assert played.invocations == ["failed"]
    (record,) = played.records()
    assert (record.kind, record.status) == (StepKind.CONDITION, StepStatus.TERMINAL_FAILED)


def test_WAIT_FOR_CONDITION_6_8_check_raises_and_the_workflow_recovers() -> None:
    """6-8: the first check raises; the workflow catches the failure and returns
    "recovered". (Differs as 6-7: a terminal error.)"""
    played = play(_raising_app(), "catches")
    assert played.result() == "recovered"
    assert played.invocations == ["succeeded"]
    assert played.records()[0].status == StepStatus.TERMINAL_FAILED


def test_WAIT_FOR_CONDITION_6_9_object_state() -> None:
    """6-9: the state is an object {status, attempts}; DONE after two checks, and the
    final object is returned."""
    app = App()

    def poll(state: dict[str, Any]) -> dict[str, Any]:
        attempts = state["attempts"] + 1
        return {"status": "DONE" if attempts >= 2 else "PENDING", "attempts": attempts}

    @app.workflow
    def object_state(ctx: Context) -> dict[str, Any]:
        return ctx.wait_for_condition(
            poll,
            SECOND,
            initial_state={"status": "PENDING", "attempts": 0},
            until=lambda s: s["status"] == "DONE",
        )

    played = play(app, "object_state", until=timedelta(seconds=10))
    assert played.result() == {"status": "DONE", "attempts": 2}
    assert played.invocations == ["suspended", "succeeded"]


def test_WAIT_FOR_CONDITION_6_10_null_final_state() -> None:
    """6-10: a check that returns None, and a strategy that stops at once: the result is
    None, without suspending."""
    app = App()

    def nothing(state: None) -> None:
        return None

    @app.workflow
    def null_state(ctx: Context) -> None:
        return ctx.wait_for_condition(nothing, SECOND, initial_state=None, until=lambda s: True)

    played = play(app, "null_state")
    assert played.status == RunStatus.SUCCEEDED
    assert played.result() is None
    assert played.invocations == ["succeeded"]


def test_WAIT_FOR_CONDITION_6_11_custom_codec_for_the_state() -> None:
    """6-11: the state goes through a codec of the call (``serdes=``) when recorded and
    when read back after a suspension; each check adds a character until there are two.

    The codec upper-cases what it writes, so the state read back after the suspension
    ("X") proves it went through the codec."""
    app = App()

    def grow(state: str) -> str:
        return state + "x"

    @app.workflow
    def coded(ctx: Context) -> str:
        return ctx.wait_for_condition(
            grow,
            SECOND,
            initial_state="",
            until=lambda s: len(s) >= 2,
            serdes=UpperCodec(),
        )

    played = play(app, "coded", until=timedelta(seconds=10))
    assert played.result() == "XX"
    assert played.invocations == ["suspended", "succeeded"]
    assert played.records()[0].output == '"XX"'


def test_WAIT_FOR_CONDITION_6_12_result_feeds_a_step() -> None:
    """6-12: the condition's final state (2) is passed to a step that multiplies it by 10;
    the poll is not run again after the resume."""
    app = App()
    checks: list[int] = []

    def counting(n: int) -> int:
        checks.append(n)
        return n + 1

    def times_ten(n: int) -> int:
        return n * 10

    @app.workflow
    def then_step(ctx: Context, threshold: int) -> int:
        reached = ctx.wait_for_condition(
            counting, SECOND, initial_state=0, until=lambda n: n >= threshold
        )
        return ctx.step(times_ten, reached)

    played = play(app, "then_step", 2, until=timedelta(seconds=10))
    assert played.result() == 20
    assert checks == [0, 1]
    assert [r.kind for r in played.records()] == [StepKind.CONDITION, StepKind.STEP]
    assert played.invocations == ["suspended", "succeeded"]


def test_WAIT_FOR_CONDITION_6_13_two_conditions_in_sequence() -> None:
    """6-13: the first condition goes 0 -> 2; its result seeds the second, 2 -> 4; each
    is a record of its own."""
    app = App()

    @app.workflow
    def two(ctx: Context) -> int:
        first = ctx.wait_for_condition(increment, SECOND, initial_state=0, until=lambda n: n >= 2)
        return ctx.wait_for_condition(
            increment, SECOND, initial_state=first, until=lambda n: n >= 4
        )

    played = play(app, "two", until=timedelta(seconds=10))
    assert played.result() == 4
    assert [(r.kind, r.status, r.output) for r in played.records()] == [
        (StepKind.CONDITION, StepStatus.DONE, "2"),
        (StepKind.CONDITION, StepStatus.DONE, "4"),
    ]
    assert played.invocations == ["suspended", "suspended", "succeeded"]


def test_WAIT_FOR_CONDITION_6_7_differs_a_retryable_error_counts_as_not_yet() -> None:
    """6-7, our documented difference: a check raising a retryable error does not fail
    the wait at once; the check's retry policy (3 attempts by default) decides."""
    app = App()
    calls: list[int] = []

    def flaky(n: int) -> int:
        calls.append(n)
        raise RuntimeError("flaky")

    @app.workflow
    def raises_retryable(ctx: Context) -> int:
        return ctx.wait_for_condition(flaky, SECOND, initial_state=0, until=lambda n: n > 1)

    played = play(app, "raises_retryable", until=timedelta(seconds=30))
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "StepFailed"
    assert len(calls) == 3
