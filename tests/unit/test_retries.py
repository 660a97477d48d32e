"""Retry policies, the failure taxonomy, and how failures reach the workflow."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import (
    App,
    Context,
    EngineConfig,
    RetryableError,
    RetryPolicy,
    RunStatus,
    StepFailed,
    StepStatus,
    TerminalError,
)
from durable.core.retry import classify
from durable.testing import LocalRunner


class AwsError(Exception):
    """Shaped like botocore's ClientError, which the core reads by duck typing."""

    def __init__(self, code: str, status: int = 400) -> None:
        super().__init__(code)
        self.response = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}


class HttpError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (AwsError("ThrottlingException"), "retryable"),
        (AwsError("ProvisionedThroughputExceededException"), "retryable"),
        (AwsError("ServiceUnavailable", 503), "retryable"),
        (AwsError("AccessDeniedException", 403), "terminal"),
        (AwsError("ValidationException"), "terminal"),
        (AwsError("ResourceNotFoundException"), "terminal"),
        (AwsError("SomethingNew", 500), "retryable"),
        (AwsError("SomethingNew", 409), "terminal"),
        (HttpError(429), "retryable"),
        (HttpError(502), "retryable"),
        (HttpError(404), "terminal"),
        (TimeoutError(), "retryable"),
        (ConnectionResetError(), "retryable"),
        (ValueError("bad input"), "terminal"),
        (PermissionError(), "terminal"),
        (TerminalError("stop"), "terminal"),
        (RetryableError("again"), "retryable"),
        (RuntimeError("unknown"), "retryable"),
    ],
)
def test_default_taxonomy(error: BaseException, expected: str) -> None:
    assert classify(error) == expected


def test_backoff_grows_exponentially_and_is_capped() -> None:
    policy = RetryPolicy(
        max_attempts=10,
        initial_delay=timedelta(seconds=1),
        backoff=2.0,
        max_delay=timedelta(seconds=5),
        jitter="none",
    )
    delays = [policy.next_delay(n, ConnectionError()) for n in range(1, 6)]
    assert delays == [timedelta(seconds=s) for s in (1, 2, 4, 5, 5)]
    assert policy.next_delay(10, ConnectionError()) is None  # attempts exhausted
    assert policy.next_delay(1, ValueError()) is None  # terminal by taxonomy


def test_full_jitter_stays_below_the_exponential_ceiling() -> None:
    policy = RetryPolicy(max_attempts=50, initial_delay=timedelta(seconds=2))
    for attempt in range(1, 6):
        delay = policy.next_delay(attempt, ConnectionError())
        assert delay is not None
        assert timedelta(0) <= delay <= timedelta(seconds=2 * 2 ** (attempt - 1))


def test_retry_on_and_never_retry_narrow_the_taxonomy() -> None:
    only_timeouts = RetryPolicy(retry_on=(TimeoutError,), jitter="none")
    assert only_timeouts.next_delay(1, TimeoutError()) is not None
    assert only_timeouts.next_delay(1, ConnectionError()) is None
    never_conn = RetryPolicy(never_retry=(ConnectionError,))
    assert never_conn.next_delay(1, ConnectionError()) is None
    after = RetryPolicy().next_delay(1, RetryableError("x", retry_after=timedelta(seconds=42)))
    assert after == timedelta(seconds=42)


def flaky_app(failures: list[BaseException], policy: RetryPolicy) -> tuple[App, list[int]]:
    app = App()
    attempts: list[int] = []

    @app.step(retry=policy)
    def flaky() -> str:
        attempts.append(1)
        if failures:
            raise failures.pop(0)
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return flaky()

    return app, attempts


def test_long_backoffs_suspend_the_run_with_the_right_due_time() -> None:
    policy = RetryPolicy(
        max_attempts=3,
        initial_delay=timedelta(minutes=10),
        max_delay=timedelta(hours=1),
        jitter="none",
    )
    app, attempts = flaky_app([ConnectionError("down")], policy)
    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.WAITING
    assert stored.due_at == "2026-01-01T00:10:00.000Z"
    step = runner.history(run.run_id)[0]
    assert (step.status, step.wake_at, step.error_class) == (
        StepStatus.WAITING,
        "2026-01-01T00:10:00.000Z",
        "retryable",
    )
    runner.advance(minutes=9)
    assert len(attempts) == 1  # not due yet
    runner.advance(minutes=1)
    assert len(attempts) == 2 and runner.get_run(run.run_id).status == RunStatus.SUCCEEDED


def test_short_backoffs_are_served_in_process() -> None:
    policy = RetryPolicy(max_attempts=4, initial_delay=timedelta(seconds=1), jitter="none")
    app, attempts = flaky_app([ConnectionError(), ConnectionError()], policy)
    runner = LocalRunner(app, config=EngineConfig(inprocess_wait_threshold=timedelta(seconds=5)))
    run = runner.start("flow")
    outcomes = runner.run_until_idle()
    assert [o.result for o in outcomes] == ["succeeded"]  # one invocation, no suspension
    assert len(attempts) == 3
    step = runner.history(run.run_id)[0]
    assert [a.error_class for a in step.attempts] == ["retryable", "retryable", None]
    assert step.attempts[0].request_id == "local-1"


def test_exhausted_retries_raise_step_failed_into_the_workflow() -> None:
    app = App()
    seen: list[StepFailed] = []

    @app.step(retry=RetryPolicy(max_attempts=2, initial_delay=timedelta(seconds=0)))
    def broken() -> str:
        raise ConnectionError("still down")

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            broken()
        except StepFailed as failure:
            seen.append(failure)
            return f"handled {failure.attempts}"
        return "unreachable"

    runner = LocalRunner(app, config=EngineConfig(inprocess_wait_threshold=timedelta(seconds=1)))
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == '"handled 2"'
    # Caught on first execution and on replay alike, with the same details.
    assert seen[0].error_type == "ConnectionError" and seen[0].attempts == 2
    step = runner.history(run.run_id)[0]
    assert step.status == StepStatus.TERMINAL_FAILED and step.error_class == "terminal"


def test_an_uncaught_failure_fails_the_run_with_the_error() -> None:
    app, attempts = flaky_app([TerminalError("card declined")], RetryPolicy(max_attempts=5))
    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED and len(attempts) == 1
    assert stored.error is not None
    assert stored.error.type == "StepFailed" and "card declined" in stored.error.message
    assert stored.lease_owner is None and stored.due_at is None and stored.purge_at is not None


def test_the_app_default_policy_applies_to_steps_without_one() -> None:
    app = App(default_retry=RetryPolicy(max_attempts=1))
    calls: list[int] = []

    def once() -> None:
        calls.append(1)
        raise ConnectionError("retryable, but the app allows one attempt")

    @app.workflow
    def flow(ctx: Context) -> Any:
        return ctx.step(once)

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert calls == [1] and runner.get_run(run.run_id).status == RunStatus.FAILED
