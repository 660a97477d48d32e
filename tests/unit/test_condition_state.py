"""Condition state and wait strategy (issue 36, item 3): a check that carries state from
poll to poll, with backoff, jitter and a maximum number of checks, recorded so a resumed
or replayed run gives the same sequence (the AWS durable SDK's ``WaitForConditionConfig
(initial_state=...)`` and ``WaitStrategyConfig``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import App, CallbackTimeout, Context, RunStatus
from durable.core.model import StepStatus
from durable.testing import LocalRunner


def export_app(seen: list[dict[str, Any]], ready_at: int = 3) -> App:
    app = App()

    def check(job: dict[str, Any]) -> dict[str, Any]:
        seen.append(dict(job))
        polls = job["polls"] + 1
        return {"polls": polls, "status": "READY" if polls >= ready_at else "RUNNING"}

    @app.workflow
    def export(ctx: Context) -> dict[str, Any]:
        return ctx.wait_for_condition(
            check,
            timedelta(minutes=1),
            initial_state={"polls": 0, "status": "STARTED"},
            until=lambda job: job["status"] == "READY",
            name="export-ready",
            backoff=2.0,
        )

    return app


def test_a_check_gets_the_previous_state_and_the_last_state_is_the_result() -> None:
    seen: list[dict[str, Any]] = []
    runner = LocalRunner(export_app(seen))
    run_id = runner.start("export").run_id
    runner.advance(minutes=10)
    assert runner.result(run_id) == {"polls": 3, "status": "READY"}
    # Each check got the state the one before returned, across suspensions (1 min, 2 min).
    assert seen == [
        {"polls": 0, "status": "STARTED"},
        {"polls": 1, "status": "RUNNING"},
        {"polls": 2, "status": "RUNNING"},
    ]


def test_the_state_is_recorded_with_each_poll_so_a_resume_goes_on_from_it() -> None:
    """A worker that resumes the run (a new invocation, nothing in memory) starts the next
    check from the recorded state, not from initial_state."""
    seen: list[dict[str, Any]] = []
    runner = LocalRunner(export_app(seen, ready_at=5))
    run_id = runner.start("export").run_id
    runner.run_until_idle()
    (waiting,) = runner.history(run_id)
    assert waiting.status == StepStatus.WAITING
    assert waiting.checkpoint == {"payload_version": 1, "state": '{"polls":1,"status":"RUNNING"}'}
    runner.advance(minutes=1)
    assert seen[-1] == {"polls": 1, "status": "RUNNING"}  # from the record, a new invocation


def test_max_attempts_ends_the_wait_as_a_timeout_saying_why() -> None:
    app = App()
    calls: list[int] = []

    def never(n: int) -> int:
        calls.append(n)
        return n + 1

    @app.workflow
    def waits(ctx: Context) -> str:
        try:
            ctx.wait_for_condition(
                never,
                timedelta(seconds=30),
                initial_state=0,
                until=lambda n: n > 99,
                max_attempts=4,
                name="never",
            )
        except CallbackTimeout as e:
            return str(e)
        return "met"

    runner = LocalRunner(app)
    run_id = runner.start("waits").run_id
    runner.advance(hours=1)
    assert calls == [0, 1, 2, 3]
    assert (
        runner.result(run_id) == "condition 'never' at 0001 not met after 4 checks (max_attempts)"
    )


def test_full_jitter_draws_each_delay_once_and_replay_reads_it() -> None:
    """Each delay is a random share of the backoff, drawn when the poll parks and recorded
    in wake_at: a replay of the run reads the recorded times and draws nothing."""
    app = App()

    def slow(n: int) -> int:
        return n + 1

    @app.workflow
    def jittered(ctx: Context) -> int:
        return ctx.wait_for_condition(
            slow, timedelta(minutes=10), initial_state=0, until=lambda n: n >= 3, jitter="full"
        )

    runner = LocalRunner(app)
    run_id = runner.start("jittered").run_id
    runner.run_until_idle()
    (first,) = runner.history(run_id)
    assert first.wake_at is not None and first.wake_at <= "2026-01-01T00:10:00.000Z"
    runner.advance(hours=2)
    assert runner.result(run_id) == 3
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"max_attempts": 0}, "max_attempts must be a positive int"),
        ({"jitter": "some"}, "jitter must be 'none' or 'full'"),
        ({"backoff": 0.5}, "backoff=1.0 polls every interval"),
    ],
)
def test_a_bad_strategy_is_refused_at_the_call(kwargs: dict[str, Any], says: str) -> None:
    app = App()

    @app.workflow
    def bad(ctx: Context) -> Any:
        return ctx.wait_for_condition(lambda: True, timedelta(seconds=1), **kwargs)

    runner = LocalRunner(app)
    run_id = runner.start("bad").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert says in run.error.message


def test_until_without_a_state_is_refused() -> None:
    app = App()

    @app.workflow
    def bad(ctx: Context) -> Any:
        return ctx.wait_for_condition(lambda: 1, timedelta(seconds=1), until=bool)  # type: ignore[call-overload]

    runner = LocalRunner(app)
    run_id = runner.start("bad").run_id
    runner.run_until_idle()
    error = runner.get_run(run_id).error
    assert error is not None and "pass initial_state= with it" in error.message


def test_the_docs_example_runs() -> None:
    """docs/reference/context.md's example, as written, through LocalRunner."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs/reference/context.md").read_text()
    section = page.split("## Waiting for a condition, with state", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, Any] = {"__name__": "docs_condition_example"}
    exec(compile(code.group(1), "context.md", "exec"), namespace)
    runner = LocalRunner(namespace["app"])
    run_id = runner.start("export", "job-7").run_id
    runner.advance(hours=1)
    result = runner.result(run_id)
    assert result["status"] == "READY" and result["polls"] == 3 and result["id"] == "job-7"


def test_an_until_that_raises_fails_the_wait_once_and_for_all() -> None:
    """`until` is workflow code: when it raises, the wait is recorded failed (StepFailed),
    so no later replay polls the outside check again."""
    from durable import StepFailed

    polls: list[int] = []
    app = App()

    def check(n: int) -> int:
        polls.append(n)
        return n + 1

    def until(n: int) -> bool:
        if n == 2:
            raise KeyError("status")
        return False

    @app.workflow
    def wf(ctx: Context) -> str:
        try:
            ctx.wait_for_condition(check, timedelta(minutes=1), initial_state=0, until=until)
        except StepFailed as e:
            ctx.sleep(timedelta(hours=1))  # replays the condition after this
            return f"failed: {e.error_type}"
        return "met"

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.advance(hours=2)
    assert runner.result(run_id) == "failed: KeyError"
    assert polls == [0, 1]  # never polled again on the replays after it
    (condition, _) = runner.history(run_id)
    assert condition.status == StepStatus.TERMINAL_FAILED
