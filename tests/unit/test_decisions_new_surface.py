"""What the new surface does where its docs could be read two ways (issue 31, "decide and
document"): each decision with its test; docs/fan-out.md, docs/schedules.md and
docs/flow-control.md say the same."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from durable import App, BatchResult, Concurrency, Context, RetryPolicy, RunStatus, StepStatus
from durable.core.model import StepKind
from durable.errors import InvalidInput
from durable.testing import LocalRunner
from tests.unit.test_schedules import nexts


class Job(BaseModel):
    tenant: SecretStr
    region: str


def _kids(runner: LocalRunner, run_id: str) -> list[Any]:
    return [s for s in runner.history(run_id) if s.kind == StepKind.CHILD]


def test_a_fire_and_forget_child_is_canceled_with_its_parent_and_outlives_any_other_end() -> None:
    """Decided: canceling a run cancels every child it started that is still running,
    awaited or not (a cancel stops this work, and its children are part of it); a parent
    that ends any other way (succeeds, fails) leaves a fire-and-forget child running."""
    app = App()

    @app.workflow(name="slow")
    def slow(ctx: Context) -> str:
        ctx.wait_for_signal("go")
        return "done"

    @app.workflow(name="fire-then-wait")
    def fire_then_wait(ctx: Context) -> str:
        ctx.start_child("slow")  # never awaited
        ctx.wait_for_signal("stop")
        return "parent done"

    runner = LocalRunner(app)
    canceled, finished = runner.start("fire-then-wait"), runner.start("fire-then-wait")
    runner.run_until_idle()
    runner.cancel(canceled.run_id, "not needed")
    runner.signal(finished.run_id, "stop")
    runner.run_until_idle()
    assert runner.get_run(finished.run_id).status == RunStatus.SUCCEEDED
    (gone,) = _kids(runner, canceled.run_id)
    (alive,) = _kids(runner, finished.run_id)
    assert runner.get_run(gone.detail["child"]).status == RunStatus.CANCELED
    assert runner.get_run(alive.detail["child"]).status == RunStatus.WAITING


def test_an_operators_retry_of_a_failed_map_item_runs_outside_the_maps_window() -> None:
    """Decided: a map item that failed is counted failed when it reports; an operator's
    retry of its child while the map goes on runs it again outside the map's window (so
    briefly one more child than ``max_concurrency`` may run) and does not change the map's
    outcome for that item. To run failed items again, retry the parent once it failed."""
    app = App(default_retry=RetryPolicy(max_attempts=1))
    attempts: dict[str, int] = {}

    @app.workflow(name="item")
    def item(ctx: Context, name: str) -> str:
        def work() -> str:
            attempts[name] = attempts.get(name, 0) + 1
            if name == "bad" and attempts[name] == 1:
                raise ValueError("first try fails")
            return name

        done = ctx.step(work, name="work")
        ctx.wait_for_signal("go")
        return str(done)

    @app.workflow(name="all")
    def all_(ctx: Context) -> list[str]:
        result: BatchResult[str] = ctx.map(
            "item",
            ["bad", "a", "b"],
            distributed=True,
            max_concurrency=2,
            completion={"tolerated_failures": 1},
        )
        return [str(v) for v in result.values()]

    runner = LocalRunner(app)
    run = runner.start("all")
    runner.run_until_idle()
    first = _kids(runner, run.run_id)
    failed = [k for k in first if k.status == StepStatus.TERMINAL_FAILED]
    assert len(failed) == 1  # "bad" failed; "a" runs, and "b" took the freed place
    bad_child = failed[0].detail["child"]
    runner.retry(bad_child)
    runner.run_until_idle()
    running = [
        r
        for r in runner.memory_ledger.list_runs(workflow="item").items
        if r.status == RunStatus.WAITING
    ]
    assert len(running) == 3  # two in the window, and the retried one beside them
    for kid in running:
        runner.signal(kid.run_id, "go")
    runner.run_until_idle()
    done = runner.get_run(run.run_id)
    assert done.status == RunStatus.SUCCEEDED and done.output == '["a","b"]'
    assert runner.get_run(bad_child).status == RunStatus.SUCCEEDED  # its own outcome
    settled = {k.position: k.status for k in _kids(runner, run.run_id)}
    assert settled[failed[0].position] == StepStatus.TERMINAL_FAILED  # the map's, unchanged


def test_a_sub_hourly_cron_fires_each_wall_time_once_at_a_fall_back_as_scheduler_does() -> None:
    """Decided, as EventBridge Scheduler does ("when the time shifts back in the fall, the
    schedule runs only once"): each local wall time fires once, at its first occurrence;
    the repeated hour's second pass does not fire again. Berlin, 2026-10-25: 02:00-03:00
    CEST is followed by 02:00-03:00 CET."""
    start = datetime(2026, 10, 25, 0, 0, tzinfo=UTC)  # 02:00 CEST
    assert nexts("cron(0/30 * * * ? *)", start, n=3, tz="Europe/Berlin") == [
        "2026-10-25 00:30",  # 02:30 CEST
        "2026-10-25 02:00",  # 03:00 CET: 02:00 and 02:30 CET were their second pass
        "2026-10-25 02:30",
    ]


def test_a_concurrency_key_on_a_secret_field_is_refused_naming_the_field() -> None:
    """Decided: a gate's name holds its key in clear in the ledger, so a key that reads a
    secret-typed field is refused at the start (it read the sealed value, so every run got
    a gate of its own: no limit at all); key on a field that is not secret."""

    app = App()

    @app.workflow(name="secret-key", concurrency=Concurrency(1, key="tenant"))
    def secret_key(ctx: Context, job: Job) -> str:
        return job.region

    runner = LocalRunner(app)
    with pytest.raises(InvalidInput) as refused:
        runner.start("secret-key", {"tenant": "acme", "region": "eu"})
    assert refused.value.field == "input.tenant" and "secret" in str(refused.value)
    assert runner.memory_ledger.list_runs(workflow="secret-key").items == []


def test_ctx_now_is_a_datetime_under_the_determinism_guard_as_in_production() -> None:
    """The guard swaps the workflow module's ``datetime`` for a watched stand-in; a value
    of the real class must still pass ``isinstance`` against it, or date checks behave
    differently in tests than deployed."""
    app = App()

    @app.workflow(name="dates")
    def dates(ctx: Context) -> list[bool]:
        now = ctx.now()
        return [isinstance(now, datetime), isinstance(now.date(), date)]

    runner = LocalRunner(app)
    run = runner.start("dates")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == "[true,true]"
