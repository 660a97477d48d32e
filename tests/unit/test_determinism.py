"""Non-determinism is detected and parks the run; versions keep old runs on old code."""

from __future__ import annotations

import datetime as dt
import random
import time
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta

import pytest

from durable import App, Context, NonDeterminismError, RunStatus, StepStatus
from durable.core.model import copy_step
from durable.engine.determinism import NonDeterministicCall
from durable.testing import LocalRunner


def test_a_renamed_recorded_step_raises_and_writes_nothing() -> None:
    app_v1 = App()

    def charge() -> str:
        return "ch_1"

    def bill() -> str:
        return "ch_2"

    @app_v1.workflow(name="pay")
    def pay(ctx: Context) -> str:
        ref = ctx.step(charge)
        ctx.sleep(timedelta(minutes=5))
        return ref

    app_v2 = App()

    @app_v2.workflow(name="pay")
    def pay2(ctx: Context) -> str:
        ref = ctx.step(bill)  # was "charge" at position 0001
        ctx.sleep(timedelta(minutes=5))
        return ref

    runner = LocalRunner(app_v1)
    run = runner.start("pay")
    runner.run_until_idle()
    before = runner.history(run.run_id)
    items = {p: copy_step(s) for p, s in runner.memory_ledger._steps[run.run_id].items()}
    runner.engine.app = app_v2
    runner.advance(minutes=5)
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED and stored.needs_attention
    assert stored.error is not None and stored.error.type == "NonDeterminismError"
    assert "0001" in stored.error.message and "charge" in stored.error.message
    assert "bill" in stored.error.message
    assert runner.memory_ledger._steps[run.run_id] == items  # nothing written
    # the records read the same, but for the sleep the wake-up's claim ended (its stamp,
    # durable.core.sleeps: the sleep's time did pass)
    after = runner.history(run.run_id)
    assert after[0] == before[0]
    assert (
        replace(after[1], status=StepStatus.WAITING, updated_at=before[1].updated_at) == (before[1])
    )
    parked = runner.engine.list_runs(needs_attention=True).items
    assert [r.run_id for r in parked] == [run.run_id]


def test_swallowing_non_determinism_does_not_save_the_run() -> None:
    app_v1, app_v2 = App(), App()

    def a() -> int:
        return 1

    def b() -> int:
        return 2

    @app_v1.workflow(name="w")
    def w1(ctx: Context) -> int:
        x = ctx.step(a)
        ctx.sleep(timedelta(minutes=1))
        return x

    @app_v2.workflow(name="w")
    def w2(ctx: Context) -> int:
        try:
            return ctx.step(b)
        except NonDeterminismError:
            return -1

    runner = LocalRunner(app_v1)
    run = runner.start("w")
    runner.run_until_idle()
    runner.engine.app = app_v2
    runner.advance(minutes=1)
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED and stored.needs_attention


def test_runs_stay_pinned_to_the_version_they_started_on() -> None:
    app = App()

    def step_v1() -> str:
        return "v1"

    def step_v2() -> str:
        return "v2"

    @app.workflow(name="w", version=1)
    def w1(ctx: Context) -> str:
        ctx.sleep(timedelta(minutes=1))
        return ctx.step(step_v1)

    runner = LocalRunner(app)
    old = runner.start("w")
    runner.run_until_idle()

    @app.workflow(name="w", version=2)
    def w2(ctx: Context) -> str:
        ctx.sleep(timedelta(minutes=1))
        return ctx.step(step_v2)

    new = runner.start("w")
    assert new.version == 2
    runner.run_until_idle()
    runner.advance(minutes=1)
    assert runner.get_run(old.run_id).output == '"v1"'
    assert runner.get_run(new.run_id).output == '"v2"'


@pytest.mark.parametrize("culprit", ["time", "datetime", "random"])
def test_the_guard_fails_workflows_that_read_the_clock_or_randomness(culprit: str) -> None:
    app = App()

    @app.workflow(name="w")
    def w(ctx: Context) -> float:
        if culprit == "time":
            return time.time()
        if culprit == "datetime":
            return datetime.now(UTC).timestamp()
        return random.random()

    runner = LocalRunner(app)
    run = runner.start("w")
    with pytest.raises(NonDeterministicCall, match="outside a step"):
        runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert stored.error is not None and "ctx.now()" in stored.error.message


def test_the_guard_allows_the_same_calls_inside_steps() -> None:
    app = App()

    def stamp() -> float:
        return time.time() + random.random() + datetime.now(UTC).timestamp()

    @app.workflow(name="w")
    def w(ctx: Context) -> bool:
        return ctx.step(stamp) > 0 and ctx.now() is not None

    runner = LocalRunner(app)
    run = runner.start("w")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == "true"


def test_the_guard_fails_network_access_outside_steps() -> None:
    import socket

    app = App()

    @app.workflow(name="w")
    def w(ctx: Context) -> None:
        socket.getaddrinfo("localhost", 80)

    runner = LocalRunner(app)
    runner.start("w")
    with pytest.raises(NonDeterministicCall, match="network"):
        runner.run_until_idle()


@dataclass
class Stamp:
    at: datetime  # a string annotation (future import), resolved while the guard is on
    on: date
    module_style: dt.datetime


def test_a_dataclass_with_date_fields_in_a_guarded_module_encodes_and_decodes() -> None:
    # The guard swaps this module's ``datetime``/``date`` names while workflow code runs;
    # pydantic resolved the dataclass's string annotations to the guarded classes then,
    # and the step failed for good on every attempt before they were taught to be dates.
    app = App()
    when = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)

    def stamp() -> Stamp:
        return Stamp(when, when.date(), when)

    @app.workflow
    def wf(ctx: Context) -> str:
        value = ctx.step(stamp)
        return f"{value.at.isoformat()} {value.on.isoformat()} {value.module_style.hour}"

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED, runner.history(run_id)[0].error_summary
    assert run.output == '"2026-12-02T08:00:00+00:00 2026-12-02 8"'
