"""The test kit skips time as time would pass: ``advance`` stops at every wake-up on the
way, ``fire_schedule`` delivers a schedule's fire, ``result`` decodes a run's output
(issue 33, item 5)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from durable import App, Context, RetryPolicy, RunStatus
from durable.core.clock import FakeClock
from durable.testing import LocalRunner, RunNotSucceeded

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Receipt(BaseModel):
    order: str
    cents: int


def flaky_app(calls: list[datetime], fails: int, clock: FakeClock) -> App:
    app = App()

    retry = RetryPolicy(3, timedelta(hours=1), max_delay=timedelta(hours=6), jitter="none")

    @app.step(retry=retry)
    def charge(order: str) -> Receipt:
        calls.append(clock.now())
        if len(calls) <= fails:
            raise ConnectionError("the provider timed out")
        return Receipt(order=order, cents=1250)

    @app.workflow
    def pay(ctx: Context, order: str) -> Receipt:
        return charge(order)

    return app


def flaky_runner(calls: list[datetime], fails: int) -> LocalRunner:
    clock = FakeClock(T0)
    return LocalRunner(flaky_app(calls, fails, clock), clock=clock)


def test_one_advance_runs_every_retry_at_its_own_time() -> None:
    """GIVEN a step that fails twice, with retries an hour and then two hours later
    WHEN the test advances two days at once
    THEN the run SUCCEEDED on its third attempt, each attempt at the time its backoff
    said (not all at the end), and the clock is at the target."""
    calls: list[datetime] = []
    runner = flaky_runner(calls, fails=2)
    run = runner.start("pay", "o-1")
    runner.run_until_idle()
    runner.advance(days=2)
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert len(calls) == 3 and calls[0] == T0
    assert [b - a for a, b in itertools.pairwise(calls)] == [
        timedelta(hours=1),
        timedelta(hours=2),
    ]
    assert runner.clock.now() == T0 + timedelta(days=2)


def test_a_sleep_wakes_at_its_time_inside_a_long_advance() -> None:
    app = App()

    @app.workflow
    def nap(ctx: Context) -> str:
        ctx.sleep(timedelta(hours=3))
        return ctx.now().isoformat()

    runner = LocalRunner(app)
    run = runner.start("nap")
    runner.advance(days=1)
    assert runner.result(run.run_id) == (T0 + timedelta(hours=3)).isoformat()


def test_result_decodes_the_output_by_the_workflows_type() -> None:
    calls: list[datetime] = []
    runner = flaky_runner(calls, fails=0)
    run = runner.start("pay", "o-2")
    runner.run_until_idle()
    assert runner.result(run.run_id) == Receipt(order="o-2", cents=1250)


def test_result_of_a_run_that_did_not_succeed_says_what_it_is() -> None:
    calls: list[datetime] = []
    runner = flaky_runner(calls, fails=5)
    run = runner.start("pay", "o-3")
    runner.run_until_idle()
    with pytest.raises(RunNotSucceeded, match="WAITING") as waiting:
        runner.result(run.run_id)
    assert waiting.value.status == RunStatus.WAITING
    runner.advance(days=1)
    with pytest.raises(RunNotSucceeded, match=r"FAILED.*timed out") as failed:
        runner.result(run.run_id)
    assert failed.value.error is not None and "ConnectionError" in failed.value.error.message


def nightly_app() -> App:
    app = App()

    @app.workflow
    def nightly_import(ctx: Context, source: str) -> str:
        return f"imported {source} at {ctx.now():%H:%M}"

    app.schedule("nightly_import", "cron(0 2 * * ? *)", name="nightly", input="crm")
    return app


def test_fire_schedule_starts_one_run_per_fire_time() -> None:
    runner = LocalRunner(nightly_app())
    at = T0 + timedelta(hours=2)
    fired = runner.fire_schedule("nightly", at)
    assert fired.result == "started" and fired.run_id is not None
    assert runner.clock.now() == at  # a fire in the future is delivered when it comes
    assert runner.result(fired.run_id) == "imported crm at 02:00"
    again = runner.fire_schedule("nightly", at)  # Scheduler delivers at least once
    assert (again.result, again.run_id) == ("duplicate", fired.run_id)
    run = runner.get_run(fired.run_id)
    assert run.idempotency_key == "schedule/nightly/2026-01-01T02:00:00.000Z"


def test_fire_schedule_names_the_schedules_there_are() -> None:
    runner = LocalRunner(nightly_app())
    with pytest.raises(ValueError, match=r"no schedule 'nightli'.*nightly"):
        runner.fire_schedule("nightli")


def test_advance_with_schedules_fires_each_fire_time_on_the_way() -> None:
    runner = LocalRunner(nightly_app())
    outcomes = runner.advance(days=3, schedules=True)
    runs = sorted(runner.memory_ledger.all_run_ids())
    assert len(runs) == 3 and len(outcomes) == 3
    assert sorted(runner.result(r) for r in runs) == ["imported crm at 02:00"] * 3
    keys = sorted(runner.get_run(r).idempotency_key or "" for r in runs)
    assert keys == [f"schedule/nightly/2026-01-0{d}T02:00:00.000Z" for d in (1, 2, 3)]
    assert runner.advance(hours=1) == []  # without schedules=True, the clock alone


def test_the_documented_example_runs() -> None:
    """docs/reference/testing.md's example, as written (a doc that drifts fails here)."""
    import re
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "reference" / "testing.md").read_text()
    section = page.split("## Skipping time", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    exec(compile(code, "docs/reference/testing.md", "exec"), {"__name__": "doc_example"})
