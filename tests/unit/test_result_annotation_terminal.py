"""A body that returned is never run again because its value fails to encode (issue 43,
hole 5).

The encoder's error is not the body's: a step whose result its return annotation rejects
(pydantic's ``ValidationError`` is a ``ValueError``, which a ``retry_on=(ValueError,)``
policy retries) fails for good at once, naming the step and saying the result did not
match its annotation. Likewise an async step, an effect whose reference is not JSON and a
condition check whose value its annotation rejects: a charge that went through is not
charged again.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, RetryPolicy, RunStatus, current_step
from durable.core.model import StepStatus
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit

# The policy of the report: ValueError retries, four attempts in all.
RETRY_VALUE_ERRORS = RetryPolicy(
    max_attempts=4,
    initial_delay=timedelta(seconds=1),
    jitter="none",
    retry_on=(ValueError, TypeError),
)


def _failed(runner: LocalRunner, run_id: str) -> str:
    runner.advance(minutes=10)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED, run.status
    assert run.error is not None
    return run.error.message


def test_a_result_its_annotation_rejects_fails_the_step_for_good_after_one_body() -> None:
    app = App()
    charges: list[int] = []

    @app.step(name="charge", retry=RETRY_VALUE_ERRORS)
    def charge(cents: int) -> int:
        charges.append(cents)
        return "ch_123"  # type: ignore[return-value]

    @app.workflow
    def pay(ctx: Context) -> int:
        return charge(1200)

    runner = LocalRunner(app)
    message = _failed(runner, runner.start("pay").run_id)
    assert charges == [1200]
    assert "'charge'" in message and "did not match its return annotation" in message
    (rec,) = runner.history(runner.outcomes[0].run_id)
    assert rec.status == StepStatus.TERMINAL_FAILED
    assert rec.attempt == 1 and rec.error_class == "terminal"
    assert rec.error_type == "ResultMismatch"


def test_a_result_that_is_not_json_without_an_annotation_is_terminal_too() -> None:
    app = App()
    calls: list[int] = []

    @app.step(name="opaque", retry=RETRY_VALUE_ERRORS)
    def opaque():  # type: ignore[no-untyped-def]
        calls.append(1)
        return object()

    @app.workflow
    def wf(ctx: Context) -> Any:
        return opaque()

    runner = LocalRunner(app)
    message = _failed(runner, runner.start("wf").run_id)
    assert calls == [1]
    assert "'opaque'" in message and "did not match its return annotation" in message


def test_an_async_step_whose_result_is_rejected_runs_once() -> None:
    app = App()
    calls: list[int] = []

    async def charge(cents: int) -> int:
        calls.append(cents)
        await asyncio.sleep(0)
        return "ch_123"  # type: ignore[return-value]

    @app.workflow
    def pay(ctx: Context) -> int:
        return ctx.step(charge, 500, name="charge", retry=RETRY_VALUE_ERRORS)

    runner = LocalRunner(app)
    message = _failed(runner, runner.start("pay").run_id)
    assert calls == [500]
    assert "'charge'" in message and "did not match its return annotation" in message


def test_an_awaited_step_in_an_async_workflow_whose_result_is_rejected_runs_once() -> None:
    app = App()
    calls: list[int] = []

    @app.step(name="charge", retry=RETRY_VALUE_ERRORS)
    async def charge(cents: int) -> int:
        calls.append(cents)
        await asyncio.sleep(0)
        return "ch_123"  # type: ignore[return-value]

    @app.workflow
    async def pay(ctx: Context) -> int:
        return await charge(700)

    runner = LocalRunner(app)
    message = _failed(runner, runner.start("pay").run_id)
    assert calls == [700]
    assert "'charge'" in message and "did not match its return annotation" in message


def test_an_effect_whose_reference_is_not_json_is_not_called_again() -> None:
    """The effect ran (the charge went through) but its reference cannot be stored: the
    step fails for good rather than calling the effect again on the next attempt."""
    app = App()
    effects: list[str] = []
    bodies: list[int] = []

    def send(key: str) -> Any:
        effects.append(key)
        return {"charge": object()}

    @app.step(name="charge", retry=RETRY_VALUE_ERRORS)
    def charge() -> str:
        bodies.append(1)
        current_step().effect("charge", send)
        return "done"

    @app.workflow
    def pay(ctx: Context) -> str:
        return charge()

    runner = LocalRunner(app)
    message = _failed(runner, runner.start("pay").run_id)
    assert len(effects) == 1 and bodies == [1]
    assert "charge" in message and "plain-JSON reference" in message


def test_a_condition_result_its_annotation_rejects_is_recorded_failed() -> None:
    """A check whose (truthy) value its annotation rejects: the wait is recorded failed,
    so a retry of the run replays the failure rather than polling the outside again."""
    app = App()
    polls: list[int] = []

    def ready() -> int:
        polls.append(1)
        return "yes"  # type: ignore[return-value]

    @app.workflow
    def wf(ctx: Context) -> Any:
        return ctx.wait_for_condition(ready, timedelta(seconds=30), name="ready")

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    message = _failed(runner, run_id)
    assert polls == [1]
    assert "'ready'" in message and "did not match its return annotation" in message
    (rec,) = runner.history(run_id)
    assert rec.status == StepStatus.TERMINAL_FAILED
    assert rec.error_type == "ResultMismatch"


def test_a_map_branch_whose_step_result_is_rejected_runs_the_body_once() -> None:
    """Each branch's steps are steps: a rejected result fails the branch's step for good
    after one body, and the batch reports that branch failed."""
    app = App()
    calls: list[int] = []

    @app.step(retry=RETRY_VALUE_ERRORS)
    def double(n: int) -> int:
        calls.append(n)
        return "four" if n == 2 else n * 2  # type: ignore[return-value]

    @app.workflow
    def wf(ctx: Context) -> list[Any]:
        batch = ctx.map(lambda c, n: double(n), [1, 2, 3], name="doubles")
        return [type(item.error).__name__ if item.error else item.value for item in batch.items]

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.advance(minutes=10)
    assert sorted(calls) == [1, 2, 3]
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert runner.result(run_id) == [2, "StepFailed", 6]
