"""The peer's step suite (requirements 1-1 to 1-20) on our API: ``ctx.step`` and decorated
steps, ``RetryPolicy``, ``semantics=``, ``current_step().logger``."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from durable import (
    App,
    Context,
    RetryPolicy,
    RunStatus,
    StepFailed,
    StepStatus,
    TerminalError,
    current_step,
)
from durable.core.model import StepKind
from durable.testing import SimulatedCrash
from tests.conformance.helpers import UpperCodec, play

NO_RETRY = RetryPolicy(max_attempts=1)


def test_STEP_1_1_step_succeeds_on_first_attempt() -> None:
    """1-1: a single step takes the input and returns a greeting, on its first attempt."""
    app = App()

    def greet(name: str) -> str:
        return f"Hello, {name}!"

    @app.workflow
    def basic(ctx: Context, name: str) -> str:
        return ctx.step(greet, name)

    played = play(app, "basic", "World")
    assert played.result() == "Hello, World!"
    assert played.invocations == ["succeeded"]
    (step,) = played.records()
    assert (step.kind, step.status, step.attempt) == (StepKind.STEP, StepStatus.DONE, 1)


def test_STEP_1_2_step_with_a_name() -> None:
    """1-2: ``name=`` is the step's name in the ledger."""
    app = App()

    def greet(name: str) -> str:
        return f"Hello, {name}!"

    @app.workflow
    def named(ctx: Context, name: str) -> str:
        return ctx.step(greet, name, name="custom_step_name")

    played = play(app, "named", "World")
    assert played.result() == "Hello, World!"
    assert [r.name for r in played.records()] == ["custom_step_name"]


def test_STEP_1_3_second_step_uses_the_first_ones_result() -> None:
    """1-3: two sequential steps, the second given the first one's result."""
    app = App()

    def step_one() -> str:
        return "first"

    def step_two(previous: str) -> str:
        return f"{previous}_second"

    @app.workflow
    def sequence(ctx: Context) -> str:
        return ctx.step(step_two, ctx.step(step_one))

    played = play(app, "sequence")
    assert played.result() == "first_second"
    assert played.names() == [("step_one", "DONE"), ("step_two", "DONE")]


def test_STEP_1_4_step_returns_a_nested_object() -> None:
    """1-4: a nested object with lists and mixed types comes back as it was returned."""
    app = App()

    def build_response(event: dict[str, Any]) -> dict[str, Any]:
        return {"user": {"name": event["name"], "tags": event["tags"]}, "count": 2}

    @app.workflow
    def complex_result(ctx: Context, event: dict[str, Any]) -> dict[str, Any]:
        return ctx.step(build_response, event)

    played = play(app, "complex_result", {"name": "Alice", "tags": ["admin", "active"]})
    assert played.result() == {"user": {"name": "Alice", "tags": ["admin", "active"]}, "count": 2}


def test_STEP_1_5_step_returns_none() -> None:
    """1-5: a step returning None succeeds, and so does the run, with a null result."""
    app = App()

    def do_nothing() -> None:
        return None

    @app.workflow
    def nothing(ctx: Context) -> None:
        return ctx.step(do_nothing)

    played = play(app, "nothing")
    assert played.status == RunStatus.SUCCEEDED
    assert played.result() is None
    assert played.records()[0].status == StepStatus.DONE


def test_STEP_1_6_custom_codec_per_step() -> None:
    """1-6: a step's own codec (``serdes=``) encodes its result (upper-cased here): the
    step's record holds the codec's text, and the workflow gets what the codec decodes."""
    app = App()

    def return_input(text: str) -> str:
        return text

    @app.workflow
    def custom_codec(ctx: Context, text: str) -> str:
        return ctx.step(return_input, text, serdes=UpperCodec())

    played = play(app, "custom_codec", "hello world")
    assert played.result() == "HELLO WORLD"
    assert played.record("return_input").output == '"HELLO WORLD"'


def test_STEP_1_7_step_logger(caplog: pytest.LogCaptureFixture) -> None:
    """1-7 (optional in the peer): ``current_step().logger`` writes each line once."""
    app = App()

    def greet(name: str) -> str:
        current_step().logger.info("Greeting step started for: %s", name)
        greeting = f"Hello, {name}!"
        current_step().logger.info("Greeting step completed with: %s", greeting)
        return greeting

    @app.workflow
    def logged(ctx: Context, name: str) -> str:
        return ctx.step(greet, name)

    with caplog.at_level(logging.INFO):
        played = play(app, "logged", "q7Zx2pLm")
    assert played.result() == "Hello, q7Zx2pLm!"
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("Greeting step started for: q7Zx2pLm") == 1
    assert messages.count("Greeting step completed with: Hello, q7Zx2pLm!") == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_STEP_1_8_step_then_wait_replays_the_step() -> None:
    """1-8: a step, then a 2-second wait; the replay after the wait skips the step."""
    app = App()

    def compute() -> str:
        return "computed"

    @app.workflow
    def step_and_wait(ctx: Context) -> str:
        value = ctx.step(compute)
        ctx.sleep(timedelta(seconds=2))
        return value

    played = play(app, "step_and_wait", until=timedelta(seconds=5))
    assert played.result() == "computed"
    assert played.invocations == ["suspended", "succeeded"]
    step, sleep = played.records()
    assert step.kind == StepKind.STEP and sleep.kind == StepKind.SLEEP
    assert played.seconds_after_start(sleep.wake_at) == 2


def test_STEP_1_9_replay_returns_the_recorded_result_without_running_the_body() -> None:
    """1-9: on the replay after a wait, the succeeded step's body does not run again."""
    app = App()
    bodies: list[str] = []

    def cached() -> str:
        bodies.append("step executed")
        return "cached_value"

    @app.workflow
    def replay_skips(ctx: Context) -> str:
        value = ctx.step(cached)
        ctx.sleep(timedelta(seconds=1))
        return value

    played = play(app, "replay_skips", until=timedelta(seconds=5))
    assert played.result() == "cached_value"
    assert played.invocations == ["suspended", "succeeded"]
    assert bodies == ["step executed"]


def test_STEP_1_10_replay_raises_the_recorded_failure_again() -> None:
    """1-10: a step that failed for good (caught) raises the same ``StepFailed`` on the
    replay after the wait, without running its body again."""
    app = App()
    bodies: list[str] = []
    caught: list[str] = []

    def fails() -> str:
        bodies.append("step executed")
        raise ValueError("permanent failure")

    @app.workflow
    def replay_rethrows(ctx: Context) -> None:
        try:
            ctx.step(fails, retry=NO_RETRY)
        except StepFailed as e:
            caught.append(e.error_message)
        ctx.sleep(timedelta(seconds=1))

    played = play(app, "replay_rethrows", until=timedelta(seconds=5))
    assert played.status == RunStatus.SUCCEEDED
    assert played.invocations == ["suspended", "succeeded"]
    assert bodies == ["step executed"]
    assert caught == ["ValueError: permanent failure"] * 2  # first run, then the replay
    assert played.records()[0].status == StepStatus.TERMINAL_FAILED


def test_STEP_1_11_retry_fails_then_succeeds() -> None:
    """1-11: a step that fails once is retried after its delay and succeeds on attempt 2."""
    app = App()
    attempts: list[int] = []

    def unreliable() -> str:
        attempts.append(current_step().attempt)
        if len(attempts) == 1:
            raise RuntimeError("transient")
        return "Operation succeeded"

    @app.workflow
    def retried(ctx: Context) -> str:
        policy = RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=1), jitter="none")
        return ctx.step(unreliable, retry=policy)

    played = play(app, "retried", until=timedelta(seconds=10))
    assert played.result() == "Operation succeeded"
    assert played.invocations == ["suspended", "succeeded"]
    assert attempts == [1, 2]
    (step,) = played.records()
    assert step.attempt == 2
    first, second = step.attempts
    assert first.error_class == "retryable" and second.error is None
    assert played.seconds_after_start(second.started_at) == 1


def test_STEP_1_12_retries_exhausted_fail_the_run() -> None:
    """1-12: a step that always fails gets 4 attempts (1 + 3 retries, 1 s apart), then the
    run fails."""
    app = App()

    def always_fail() -> str:
        raise RuntimeError("always")

    @app.workflow
    def exhausted(ctx: Context) -> str:
        policy = RetryPolicy(
            max_attempts=4, initial_delay=timedelta(seconds=1), backoff=1.0, jitter="none"
        )
        return ctx.step(always_fail, retry=policy)

    played = play(app, "exhausted", until=timedelta(seconds=30))
    assert played.status == RunStatus.FAILED
    assert played.invocations == ["suspended", "suspended", "suspended", "failed"]
    (step,) = played.records()
    assert step.status == StepStatus.TERMINAL_FAILED
    assert [played.seconds_after_start(a.started_at) for a in step.attempts] == [0, 1, 2, 3]


def test_STEP_1_13_default_retry_policy() -> None:
    """1-13: without a policy a failing step is retried by the default one, with
    exponential backoff and full jitter, and succeeds on attempt 3.

    Differs: our default is ``RetryPolicy()``: 3 attempts, 1 s first delay, x2, at most
    5 min, full jitter (the peer's: 6 attempts, 5 s, x2, at most 60 s, full jitter)."""
    app = App()
    attempts: list[int] = []

    def unreliable() -> str:
        attempts.append(current_step().attempt)
        if len(attempts) < 3:
            raise RuntimeError("not yet")
        return "ok"

    @app.workflow
    def default_retry(ctx: Context) -> str:
        return ctx.step(unreliable)

    played = play(app, "default_retry", until=timedelta(minutes=1))
    assert played.result() == "ok"
    assert attempts == [1, 2, 3]
    assert played.invocations == ["suspended", "suspended", "succeeded"]
    _first, second, third = played.records()[0].attempts
    first_delay = played.seconds_after_start(second.started_at)
    second_delay = played.seconds_after_start(third.started_at) - first_delay
    assert 0 <= first_delay <= 1 and 0 <= second_delay <= 2  # full jitter of 1 s, then 2 s
    default = RetryPolicy()
    assert (default.max_attempts, default.initial_delay, default.backoff, default.jitter) == (
        3,
        timedelta(seconds=1),
        2.0,
        "full",
    )


def test_STEP_1_14_custom_retry_delays() -> None:
    """1-14: initial delay 2 s, backoff x3, no jitter: the retries come 2 s then 6 s later."""
    app = App()
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(current_step().attempt)
        if len(attempts) < 3:
            raise RuntimeError("not yet")
        return "ok"

    @app.workflow
    def custom_retry(ctx: Context) -> str:
        policy = RetryPolicy(
            max_attempts=5, initial_delay=timedelta(seconds=2), backoff=3.0, jitter="none"
        )
        return ctx.step(flaky, retry=policy)

    played = play(app, "custom_retry", until=timedelta(minutes=1))
    assert played.result() == "ok"
    starts = [played.seconds_after_start(a.started_at) for a in played.records()[0].attempts]
    assert starts == [0, 2, 8]


class TransientError(Exception):
    """The peer's custom error type for the retry-filter cases."""


def test_STEP_1_15_retry_only_a_given_error_type() -> None:
    """1-15: a policy that retries only ``TransientError`` retries it, and the step then
    succeeds (``RetryPolicy.retryable_errors``)."""
    app = App()
    attempts: list[int] = []

    def transient_once() -> str:
        attempts.append(current_step().attempt)
        if len(attempts) == 1:
            raise TransientError("try again")
        return "ok"

    policy = RetryPolicy(
        max_attempts=3, initial_delay=timedelta(seconds=1), retryable_errors=(TransientError,)
    )

    @app.workflow
    def retry_transient(ctx: Context) -> str:
        return ctx.step(transient_once, retry=policy)

    played = play(app, "retry_transient", until=timedelta(seconds=10))
    assert played.result() == "ok"
    assert attempts == [1, 2]
    assert played.invocations == ["suspended", "succeeded"]
    assert not policy.should_retry(RuntimeError("anything else"))


def test_STEP_1_16_an_error_the_policy_does_not_retry_fails_at_once() -> None:
    """1-16: a policy that does not retry ``TransientError`` fails the step on its first
    attempt, and the run with it (``RetryPolicy.never_retry``)."""
    app = App()
    attempts: list[int] = []

    def transient() -> str:
        attempts.append(current_step().attempt)
        raise TransientError("not retried")

    @app.workflow
    def no_retry_on_transient(ctx: Context) -> str:
        return ctx.step(transient, retry=RetryPolicy(never_retry=(TransientError,)))

    played = play(app, "no_retry_on_transient", until=timedelta(minutes=1))
    assert played.status == RunStatus.FAILED
    assert played.invocations == ["failed"]
    assert attempts == [1]
    assert played.records()[0].status == StepStatus.TERMINAL_FAILED


def test_STEP_1_17_at_most_once_interrupted_without_retry_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """1-17: an ``at_most_once_per_attempt`` step whose worker dies in its body, with no
    retry, is not run again: the interruption fails it and the run.

    Our record is written RUNNING before the body (the peer's ``StepStarted``); the worker
    that takes the run over after the lease finds it and records the failure."""
    app = App()

    @app.step(semantics="at_most_once_per_attempt", retry=NO_RETRY)
    def at_most_once_flaky_step(text: str) -> str:
        current_step().logger.info("running with %s", text)
        raise SimulatedCrash("the Lambda runtime exits")

    @app.workflow
    def interrupted(ctx: Context, text: str) -> str:
        return at_most_once_flaky_step(text)

    with caplog.at_level(logging.INFO):
        played = play(app, "interrupted", "Xy12Ab34")
        assert played.records()[0].status == StepStatus.RUNNING  # written before the body
        played.advance(minutes=5)  # past the dead worker's lease
    assert played.status == RunStatus.FAILED
    step = played.record("at_most_once_flaky_step")
    assert step.status == StepStatus.TERMINAL_FAILED
    assert "interrupted" in (step.error_summary or "")
    assert [r.getMessage() for r in caplog.records].count("running with Xy12Ab34") == 1


def test_STEP_1_18_at_most_once_interrupted_then_retried_succeeds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """1-18: the same step with a retry policy: the interruption counts as a failed
    attempt, and attempt 2 runs the body again and succeeds."""
    app = App()
    attempts: list[int] = []

    @app.step(
        semantics="at_most_once_per_attempt",
        retry=RetryPolicy(max_attempts=2, initial_delay=timedelta(seconds=1), jitter="none"),
    )
    def crash_once(text: str) -> str:
        attempts.append(current_step().attempt)
        current_step().logger.info("running with %s", text)
        if len(attempts) == 1:
            raise SimulatedCrash("the Lambda runtime exits")
        return "succeeded on second attempt"

    @app.workflow
    def interrupted_then_retried(ctx: Context, text: str) -> str:
        return crash_once(text)

    with caplog.at_level(logging.INFO):
        played = play(app, "interrupted_then_retried", "Xy12Ab34", until=timedelta(minutes=5))
    assert played.result() == "succeeded on second attempt"
    assert attempts == [1, 2]
    assert [r.getMessage() for r in caplog.records].count("running with Xy12Ab34") == 2


def test_STEP_1_19_step_fails_for_good_and_the_run_fails() -> None:
    """1-19: a step that raises, with no retries, fails once and fails the run."""
    app = App()

    def failing() -> str:
        raise ValueError("broken")

    @app.workflow
    def fails(ctx: Context) -> str:
        return ctx.step(failing, retry=NO_RETRY)

    played = play(app, "fails")
    assert played.status == RunStatus.FAILED
    assert played.invocations == ["failed"]
    (step,) = played.records()
    assert step.status == StepStatus.TERMINAL_FAILED and len(step.attempts) == 1
    assert "ValueError: broken" in played.error_message()


def test_STEP_1_20_caught_failure_then_a_fallback_step() -> None:
    """1-20: the workflow catches the step's failure (``StepFailed``) and goes on with a
    second step that succeeds."""
    app = App()

    def failing() -> str:
        raise TerminalError("no")

    def fallback() -> str:
        return "fallback_result"

    @app.workflow
    def caught(ctx: Context) -> str:
        try:
            return ctx.step(failing)
        except StepFailed:
            return ctx.step(fallback)

    played = play(app, "caught")
    assert played.result() == "fallback_result"
    assert played.names() == [("failing", "TERMINAL_FAILED"), ("fallback", "DONE")]
