"""Pins on one invocation's replay (durable/execution.py): each test names the mutants it
kills (ids of ``python -m tests.mutation --module durable/execution.py --list``)."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, EngineConfig, RunStatus, StepFailed
from durable.errors import InvalidState, NonDeterminismError, RunCanceled
from durable.testing import LocalRunner


def run_once(app: App, **runner_options: Any) -> tuple[LocalRunner, str]:
    runner = LocalRunner(app, **runner_options)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    return runner, run_id


# --- positions and replay ---------------------------------------------------------------


def test_a_run_with_no_waits_cancels_no_timers_and_one_that_slept_does() -> None:
    """GIVEN a run of steps only, and one that slept WHEN each finishes THEN only the one
    that armed a timer asks the timer service to cancel the run's timers (a Scheduler
    request saved on every run that never waited).

    Kills execution-32201d97 (``self.armed = False`` -> True)."""
    plain = App()

    @plain.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(lambda: "ok", name="work")

    runner, run_id = run_once(plain)
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert runner.call_count("timers.cancel_run") == 0

    napping = App()

    @napping.workflow(name="flow")
    def nap(ctx: Context) -> str:
        ctx.sleep(timedelta(minutes=1))
        return "rested"

    runner, run_id = run_once(napping)
    runner.advance(minutes=1)
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert runner.call_count("timers.cancel_run") == 1


def test_an_undecorated_step_is_recorded_as_version_one() -> None:
    """GIVEN a plain function run with ctx.step WHEN it is recorded THEN its step_version is
    1 (the default a decorated step has too).

    Kills execution-0b698d7d (``version=... else 1`` -> 0)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(lambda: "ok", name="work")

    runner, run_id = run_once(app)
    (step,) = runner.history(run_id)
    assert (step.position, step.step_version) == ("0001", 1)


def test_a_replayed_failure_keeps_its_error_type() -> None:
    """GIVEN a step that failed for good (ValueError), caught by the workflow, then a sleep
    WHEN the run wakes and replays the failure THEN StepFailed carries "ValueError" again.

    Kills execution-347174b8 (``rec.error_type or "Error"`` -> ``and``)."""
    app = App()

    def broken() -> str:
        raise ValueError("bad input")

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            ctx.step(broken, name="broken")
        except StepFailed as failed:
            kind = failed.error_type
        ctx.sleep(timedelta(hours=1))
        return kind

    runner, run_id = run_once(app)
    runner.advance(hours=1)
    assert runner.get_run(run_id).output == '"ValueError"'


def test_a_replay_reads_recorded_values_without_writing_them_again() -> None:
    """GIVEN a workflow that recorded ctx.now() and ctx.uuid() and then slept
    WHEN it replays after the sleep THEN it gets the recorded values and writes only the
    sleep's completion, not the values again.

    Kills execution-55356e78 (``rec.status == DONE`` negated: the replay would make new
    values and lose the write race to the recorded ones, a request each)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        stamp, ident = ctx.now(), ctx.uuid()
        ctx.sleep(timedelta(hours=1))
        return f"{stamp.isoformat()} {ident}"

    runner, run_id = run_once(app)
    writes = runner.call_count("ledger.write_step")
    first = runner.history(run_id)
    runner.advance(hours=1)
    assert runner.call_count("ledger.write_step") == writes + 1  # the sleep's DONE
    assert runner.history(run_id)[:2] == first[:2]


def test_recording_a_value_renews_the_lease_only_when_under_the_safety_margin() -> None:
    """GIVEN a 3 s lease and a step (budget 0.5 s) that takes 0.5 s, leaving 2.5 s of lease
    WHEN the workflow then records ctx.now() THEN the lease is not renewed: a value needs no
    time, only the 2 s safety margin, which 2.5 s covers. After another 1 s it is renewed.

    Kills execution-517a8d29 (record_value's ``ensure_lease(timedelta(0))`` -> 1 s) and
    execution-04965008 (the renewal deleted)."""
    app = App()
    runner: LocalRunner

    def work() -> str:
        runner.clock.advance(timedelta(milliseconds=500))
        return "ok"

    def wait() -> str:
        runner.clock.advance(timedelta(seconds=1))
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.step(work, timeout=timedelta(milliseconds=500))
        ctx.now()
        marks.append(runner.call_count("ledger.update_run"))
        ctx.step(wait, timeout=timedelta(milliseconds=100))
        ctx.now()
        marks.append(runner.call_count("ledger.update_run"))
        return "done"

    marks: list[int] = []
    config = EngineConfig(lease=timedelta(seconds=3), cancel_check_interval=timedelta(seconds=5))
    runner = LocalRunner(app, config=config)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert marks == [0, 1]


def test_invalid_step_options_fail_the_run() -> None:
    """GIVEN ctx.step with a zero timeout WHEN the workflow calls it THEN the run fails with
    the option's error and the body never runs.

    Kills execution-78da7bf1 (``check_step_options(...)`` deleted from call_step)."""
    app = App()
    bodies: list[int] = []

    def work() -> str:
        bodies.append(1)
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(work, name="work", timeout=timedelta(0))

    runner, run_id = run_once(app)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert "timeout= must be a positive" in run.error.message
    assert bodies == []


# --- non-determinism and cancellation ---------------------------------------------------

CALLS = {"n": 0}


def test_code_that_caught_non_determinism_cannot_replay_another_step() -> None:
    """GIVEN a workflow that, on replay, meets a renamed step, catches the NonDeterminismError
    and calls its next (recorded) step WHEN it replays THEN that call raises the error
    again: the workflow code after it never runs, even though the step has a recorded
    result, and the run is parked FAILED for attention.

    Kills execution-88b0d063 (next_position's ``raise self.nondeterminism`` deleted: a
    recorded result would be handed back; only new work checks again)."""
    app = App()
    CALLS["n"] = 0
    after_other: list[str] = []

    @app.workflow
    def flow(ctx: Context) -> str:
        CALLS["n"] += 1
        with contextlib.suppress(NonDeterminismError):
            ctx.step(lambda: "work", name=f"work-{CALLS['n']}")
        other = ctx.step(lambda: "other", name="other")
        after_other.append(other)
        if CALLS["n"] == 1:
            ctx.sleep(timedelta(hours=1))
        return other

    runner, run_id = run_once(app)
    assert after_other == ["other"]
    runner.advance(hours=1)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.needs_attention
    assert after_other == ["other"]


def test_a_run_canceled_before_its_first_step_never_runs_it() -> None:
    """GIVEN a started run whose worker has not run yet WHEN it is canceled THEN it is
    CANCELED and its first step's body never runs (the replay stops at the first position
    that would do new work, even with a fresh lease).

    Kills execution-7ca43222 (``self.check_cancel()`` before new work deleted)."""
    app = App()
    bodies: list[int] = []

    def work() -> str:
        bodies.append(1)
        return "done"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(work, name="work")

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.cancel(run_id, reason="changed my mind")
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.CANCELED
    assert bodies == []


def test_a_cancel_stops_a_sleeping_run_at_once() -> None:
    """GIVEN a run sleeping for a day WHEN it is canceled THEN it is CANCELED right away
    (the replay stops at the pending sleep), not when the sleep ends.

    Pins the cancel check at a pending record (recorded(), for waits)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.sleep(timedelta(days=1))
        return "rested"

    runner, run_id = run_once(app)
    runner.cancel(run_id, reason="not needed")
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.CANCELED
    assert run.error is not None and run.error.message == "not needed"


def test_the_cancel_signal_carries_the_reason() -> None:
    """GIVEN a run whose cancel (reason "customer asked") lands while a step runs
    WHEN the replay after the next wake-up stops at the pending sleep THEN the RunCanceled
    raised there carries the reason (what a traceback or a ``finally`` sees).

    Kills execution-ad06e0ba (``cancel_reason or "canceled"`` -> ``and``)."""
    app = App()
    seen: list[str] = []
    runner: LocalRunner

    def first() -> str:
        runner.memory_ledger.patch_run(
            run_id, {"cancel_requested": True, "cancel_reason": "customer asked"}
        )
        return "first"

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.step(first, name="first")
        try:
            ctx.sleep(timedelta(seconds=1))
            return ctx.step(lambda: "second", name="second")
        except RunCanceled as canceled:
            seen.append(str(canceled))
            raise

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.advance(seconds=2)
    assert runner.get_run(run_id).status == RunStatus.CANCELED
    assert seen == ["customer asked"]


def test_a_decorated_step_called_after_a_run_is_a_plain_call() -> None:
    """GIVEN a run that has finished WHEN test or application code then calls a decorated
    step directly THEN it is a plain function call: the workflow's context did not outlive
    the workflow.

    Kills execution-8fb0a3f5 (``reset_context(token)`` deleted from run_workflow)."""
    app = App()

    @app.step
    def greet(who: str) -> str:
        return f"hello {who}"

    @app.workflow
    def flow(ctx: Context) -> str:
        return greet("run")

    runner, run_id = run_once(app)
    assert runner.get_run(run_id).output == '"hello run"'
    assert greet("caller") == "hello caller"
    assert len(runner.history(run_id)) == 1


# --- the invocation's budget ------------------------------------------------------------


@pytest.mark.parametrize(("remaining", "runs"), [(12.0, True), (11.9, False)])
def test_a_step_runs_when_the_invocation_has_exactly_its_budget_and_margin(
    remaining: float, runs: bool
) -> None:
    """GIVEN a step with timeout=10 s (plus the 2 s safety margin) in a fresh invocation
    WHEN 12 s are left THEN it runs; with 11.9 s it fails for good saying so.

    Kills execution-241aab45 (``budget + safety_margin`` -> ``-``) and execution-7e246dbe
    (``remaining >= needed`` -> ``>``)."""
    app = App()
    bodies: list[int] = []

    def work() -> str:
        bodies.append(1)
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(work, name="work", timeout=timedelta(seconds=10))

    runner, run_id = run_once(app, remaining_seconds=lambda: remaining)
    run = runner.get_run(run_id)
    assert bodies == ([1] if runs else [])
    assert run.status == (RunStatus.SUCCEEDED if runs else RunStatus.FAILED)


# --- the upgrade check (a dry-run replay) -----------------------------------------------


class Bug:
    fixed = False


def upgradable_app(new_work: list[str]) -> App:
    app = App()

    def charge() -> str:
        return "ch_1"

    def export() -> str:
        if not Bug.fixed:
            raise KeyError("export column")
        return "exported"

    @app.workflow(name="flow", version=1)
    def v1(ctx: Context) -> str:
        return ctx.step(charge, name="charge") + ctx.step(export, name="export")

    def invoice() -> str:
        new_work.append("invoice")
        return "inv"

    @app.workflow(name="flow", version=2)
    def v2(ctx: Context) -> str:
        charged = ctx.step(charge, name="charge")
        try:
            exported = ctx.step(export, name="export")
        except StepFailed:
            exported = "-not-exported-"
        ctx.sleep(timedelta(minutes=1))
        return charged + exported + ctx.step(invoice, name="invoice")

    @app.workflow(name="flow", version=3)
    def v3(ctx: Context) -> str:
        return ctx.step(charge, name="charge") + ctx.step(export, name="export-v3")

    return app


def failed_run(new_work: list[str]) -> tuple[LocalRunner, str]:
    Bug.fixed = False
    runner = LocalRunner(upgradable_app(new_work))
    run_id = runner.start("flow", version=1).run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.FAILED
    return runner, run_id


def test_an_upgrade_that_adds_work_after_the_failed_step_is_accepted_without_running_it() -> None:
    """GIVEN a run failed at its second step WHEN it is retried on a version that keeps both
    recorded steps, catches the second one's failure and goes on to sleep and a third step
    THEN the check accepts it and writes nothing (it stops at the failed step, where the
    retry resumes); the retry then runs the fixed step, the sleep and the new step.

    Kills execution-0d9b16d4 (the dry run's stop test ``or`` -> ``and``) and
    execution-ac45df80 (``raise DryRunComplete()`` deleted): either lets the check replay
    the recorded failure into the new code and go on to new work, where the sleep writes
    its WAITING record (unfenced) before the check's lease-less suspension stops it."""
    new_work: list[str] = []
    runner, run_id = failed_run(new_work)
    Bug.fixed = True
    runner.retry(run_id, upgrade_to=2)
    assert [s.position for s in runner.history(run_id)] == ["0001", "0002"]
    assert new_work == []
    runner.run_until_idle()
    runner.advance(minutes=1)
    run = runner.get_run(run_id)
    assert (run.status, run.output) == (RunStatus.SUCCEEDED, '"ch_1exportedinv"')
    assert new_work == ["invoice"]


def test_an_upgrade_renaming_the_failed_step_is_refused_at_its_position() -> None:
    """GIVEN a run failed at its second step WHEN it is retried on a version that calls a
    different step there THEN the check refuses it, naming position 0002; nothing changes.

    Kills execution-7f8aed04 / ec088f74 / 6ae17396 (the dry run stopping at the first,
    recorded step), execution-e7ad9019 / 24c5aa7f (the name/kind check at the stop),
    execution-9e9108fb / 6ad8762f (the error not built or not raised)."""
    runner, run_id = failed_run([])
    with pytest.raises(InvalidState, match="position 0002"):
        runner.retry(run_id, upgrade_to=3)
    assert runner.get_run(run_id).status == RunStatus.FAILED
