"""Operator decisions: cancel, retry from the failed step (same or newer version), fork."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import timedelta

import pytest

from durable import App, Context, RetryPolicy, RunStatus, StepFailed, StepStatus, current_step
from durable.engine.operations import available_decisions
from durable.errors import InvalidInput, InvalidState, RunNotFound
from durable.testing import LocalRunner

# --- cancel -----------------------------------------------------------------------


def nap_app(effects: list[str]) -> App:
    app = App()

    def reserve() -> str:
        effects.append("reserve")
        return "r1"

    def release(ref: str) -> None:
        effects.append(f"release {ref}")

    def notify() -> None:
        effects.append("notify")

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.step(reserve, compensate=release)
        ctx.sleep(timedelta(days=1))
        ctx.step(notify)
        return "done"

    return app


def test_cancel_while_waiting_is_immediate_and_deletes_timers() -> None:
    effects: list[str] = []
    runner = LocalRunner(nap_app(effects))
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.timers.armed
    canceled = runner.engine.cancel(run.run_id, "customer left", requested_by="ops@x")
    assert canceled.status == RunStatus.CANCELED
    assert canceled.error is not None and canceled.error.message == "customer left"
    assert runner.timers.armed == {}
    assert [o["action"] for o in canceled.operations] == ["cancel"]
    assert canceled.operations[0]["by"] == "ops@x"
    runner.advance(days=2)
    assert effects == ["reserve"]  # nothing after the cancel, nothing undone


def test_cancel_with_compensation_undoes_completed_steps() -> None:
    effects: list[str] = []
    runner = LocalRunner(nap_app(effects))
    run = runner.start("flow")
    runner.run_until_idle()
    runner.engine.cancel(run.run_id, "fraud", compensate=True)
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.CANCELED
    assert effects == ["reserve", "release r1"]


def test_cancel_while_running_stops_at_the_next_durable_call() -> None:
    app = App()
    effects: list[str] = []
    runner: LocalRunner

    def slow() -> str:
        effects.append("slow")
        runner.engine.cancel(run_id, "stop now")  # lands mid-step...
        runner.clock.advance(timedelta(seconds=6))  # ...of a step longer than the check interval
        return "finished anyway"

    def after() -> None:
        effects.append("after")

    @app.workflow
    def flow(ctx: Context) -> None:
        ctx.step(slow)
        ctx.step(after)

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    stored = runner.get_run(run_id)
    assert stored.status == RunStatus.CANCELED
    assert effects == ["slow"]
    assert runner.history(run_id)[0].output == '"finished anyway"'  # recorded, not lost


def test_cancel_of_a_finished_run_is_an_error_and_twice_is_harmless() -> None:
    effects: list[str] = []
    runner = LocalRunner(nap_app(effects))
    run = runner.start("flow")
    runner.run_until_idle()
    runner.engine.cancel(run.run_id, "first")
    with pytest.raises(InvalidState, match="nothing to cancel"):
        runner.engine.cancel(run.run_id, "second")
    with pytest.raises(RunNotFound):
        runner.engine.cancel("0" * 26, "x")
    with pytest.raises(InvalidInput, match="reason"):
        runner.engine.cancel(run.run_id, "")


def test_a_second_cancel_of_a_running_run_changes_nothing() -> None:
    app = App()
    runner: LocalRunner
    results: list[int] = []

    def body() -> None:
        first = runner.engine.cancel(run_id, "once")
        again = runner.engine.cancel(run_id, "twice")
        results.extend([len(first.operations), len(again.operations)])

    @app.workflow
    def flow(ctx: Context) -> None:
        ctx.step(body)

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert results == [1, 1]
    assert runner.get_run(run_id).error.message == "once"  # type: ignore[union-attr]


# --- retry ------------------------------------------------------------------------


class Bug:
    fixed = False


def buggy_app(effects: list[str]) -> App:
    app = App()

    def charge() -> str:
        effects.append("charge")
        return "ch_1"

    # Explicit step names survive refactors (a renamed function would otherwise be a
    # different step to the ledger): version 2 below reuses them.
    @app.step(name="export", retry=RetryPolicy(max_attempts=2, initial_delay=timedelta(0)))
    def export() -> str:
        step = current_step()
        done = (step.checkpoint_state or {}).get("rows", 0)
        step.checkpoint({"rows": done + 50})
        effects.append(f"export from {done}")
        if not Bug.fixed:
            raise KeyError("missing column 'email'")
        return f"exported {done + 50}"

    @app.workflow(name="billing")
    def billing(ctx: Context) -> str:
        charge_ref = ctx.step(charge, name="charge")
        return f"{charge_ref} {export()}"

    return app


def test_retry_after_a_fix_reruns_the_failed_step_from_its_checkpoint() -> None:
    Bug.fixed = False
    effects: list[str] = []
    runner = LocalRunner(buggy_app(effects))
    run = runner.start("billing")
    runner.run_until_idle()
    failed = runner.get_run(run.run_id)
    assert failed.status == RunStatus.FAILED and available_decisions(failed) == ["retry", "fork"]
    Bug.fixed = True  # the code was fixed and redeployed
    runner.engine.retry(run.run_id, requested_by="alice")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.SUCCEEDED
    assert stored.output == '"ch_1 exported 100"'
    assert effects == ["charge", "export from 0", "export from 50"]  # charged once
    assert [o["action"] for o in stored.operations] == ["retry"]
    step = runner.history(run.run_id)[1]
    assert step.status == StepStatus.DONE and step.attempt == 2


def test_retry_is_only_for_failed_runs() -> None:
    Bug.fixed = True
    runner = LocalRunner(buggy_app([]))
    run = runner.start("billing")
    runner.run_until_idle()
    with pytest.raises(InvalidState, match="only FAILED"):
        runner.engine.retry(run.run_id)


def test_retry_with_upgrade_checks_the_new_version_replays_the_ledger() -> None:
    Bug.fixed = False
    effects: list[str] = []
    app = buggy_app(effects)

    def charge() -> str:
        effects.append("charge v2")
        return "ch_2"

    def fixed_export() -> str:
        return "exported by v2"

    @app.workflow(name="billing", version=2)
    def billing_v2(ctx: Context) -> str:
        return f"{ctx.step(charge, name='charge')} {ctx.step(fixed_export, name='export')}"

    def invoice() -> str:
        return "inv"

    @app.workflow(name="billing", version=3)
    def billing_v3(ctx: Context) -> str:
        return ctx.step(invoice)  # a different first step: cannot continue old runs

    runner = LocalRunner(app)
    run = runner.start("billing", version=1)
    runner.run_until_idle()
    with pytest.raises(InvalidState, match="position 0001") as info:
        runner.engine.retry(run.run_id, upgrade_to=3)
    assert "invoice" in str(info.value)
    assert runner.get_run(run.run_id).status == RunStatus.FAILED  # nothing written
    with pytest.raises(InvalidInput, match="newer"):
        runner.engine.retry(run.run_id, upgrade_to=1)

    runner.engine.retry(run.run_id, upgrade_to=2)
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.version) == (RunStatus.SUCCEEDED, 2)
    assert stored.output == '"ch_1 exported by v2"'  # the recorded charge was kept
    assert effects == ["charge", "export from 0"]  # v1 ran export once (KeyError: terminal)


def test_a_compensated_run_cannot_be_retried() -> None:
    app = App()

    def book() -> str:
        return "b"

    def unbook(ref: str) -> None:
        return None

    def fail() -> None:
        raise ValueError("no")

    @app.workflow
    def flow(ctx: Context) -> None:
        ctx.step(book, compensate=unbook)
        ctx.step(fail, retry=RetryPolicy(max_attempts=1))

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    with pytest.raises(InvalidState, match="fork"):
        runner.engine.retry(run.run_id)


def handled_failure_app(calls: dict[str, int], *, chained: bool) -> App:
    """``probe`` fails and the workflow moves past it; ``ship`` fails until it is fixed."""
    app = App()
    once = RetryPolicy(max_attempts=1)

    @app.step(retry=once)
    def probe() -> None:
        calls["probe"] += 1
        raise ValueError("no cache")

    @app.step(retry=once)
    def ship() -> str:
        calls["ship"] += 1
        if calls["ship"] < 2:
            raise ValueError("carrier down")
        return "shipped"

    @app.workflow(name="ship-order")
    def flow(ctx: Context) -> str:
        with contextlib.suppress(StepFailed):  # handled: part of the path replay follows
            ctx.step(probe)
        if not chained:
            return ctx.step(ship)
        try:
            return ctx.step(ship)
        except StepFailed as e:
            raise RuntimeError("order could not ship") from e

    return app


@pytest.mark.parametrize("chained", [False, True], ids=["escaped", "raised-from"])
def test_retry_reruns_only_the_step_whose_failure_ended_the_run(chained: bool) -> None:
    # GIVEN a run that caught one step's failure and then failed on another (directly, or
    # through its own exception raised from the step's)
    calls = {"probe": 0, "ship": 0}
    runner = LocalRunner(handled_failure_app(calls, chained=chained))
    run = runner.start("ship-order")
    runner.run_until_idle()
    failed = runner.get_run(run.run_id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and failed.error.position == "0002"
    # WHEN an operator retries it
    runner.retry(run.run_id)
    runner.run_until_idle()
    # THEN only the step at fault ran again: the handled failure stays as recorded
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert calls == {"probe": 1, "ship": 2}
    probe, ship = runner.history(run.run_id)
    assert probe.status == StepStatus.TERMINAL_FAILED and ship.status == StepStatus.DONE


def test_a_failure_recorded_without_its_position_still_reopens_the_last_failed_step() -> None:
    # GIVEN a run failed by a step, recorded as runs were before they named the step
    calls = {"probe": 0, "ship": 0}
    runner = LocalRunner(handled_failure_app(calls, chained=False))
    run = runner.start("ship-order")
    runner.run_until_idle()
    stored = runner.memory_ledger._runs[run.run_id]
    assert stored.error is not None
    stored.error = replace(stored.error, position=None)
    # WHEN it is retried THEN the last failed step runs again and the run succeeds
    runner.retry(run.run_id)
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert calls == {"probe": 1, "ship": 2}


def test_a_run_failed_by_its_own_code_is_retried_without_reopening_a_step() -> None:
    app = App()

    @app.workflow(name="strict")
    def strict(ctx: Context) -> None:
        raise ValueError("bad config")

    runner = LocalRunner(app)
    run = runner.start("strict")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).error.position is None  # type: ignore[union-attr]
    runner.retry(run.run_id)  # replays as it is: the fix would be upgrade_to
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert [o["action"] for o in stored.operations] == ["retry"]


# --- fork -------------------------------------------------------------------------


def test_fork_copies_the_ledger_up_to_a_step_and_reexecutes_from_there() -> None:
    app = App()
    effects: list[str] = []

    def step_a() -> str:
        effects.append("a")
        return "A"

    def step_b() -> str:
        effects.append("b")
        return "B"

    def step_c() -> str:
        effects.append("c")
        return "C"

    @app.workflow
    def abc(ctx: Context) -> str:
        return ctx.step(step_a) + ctx.step(step_b) + ctx.step(step_c)

    runner = LocalRunner(app)
    source = runner.start("abc")
    runner.run_until_idle()
    effects.clear()
    forked = runner.engine.fork(source.run_id, from_step=2, requested_by="bob")
    runner.run_until_idle()
    stored = runner.get_run(forked.run_id)
    assert stored.status == RunStatus.SUCCEEDED and stored.output == '"ABC"'
    assert effects == ["b", "c"]  # step 1 came from the source's ledger
    assert stored.forked_from == f"{source.run_id}@0002"
    assert stored.operations[0]["action"] == "fork" and stored.operations[0]["by"] == "bob"
    assert [s.position for s in runner.history(forked.run_id)] == ["0001", "0002", "0003"]
    with pytest.raises(InvalidInput, match="from_step"):
        runner.engine.fork(source.run_id, from_step="zero")


def test_a_failed_batch_is_not_offered_a_retry_that_replays_it_but_a_fork() -> None:
    """A map whose completion rule failed ends the run with BatchFailed; the decision is a
    record of the run, so a plain retry replayed it and failed the same way. The run
    offers a new version or a fork, retry says which step to fork from, and that fork
    runs the batch again."""
    from durable import Completion

    broken = {"b"}
    app = App()

    @app.step(name="send", retry=RetryPolicy(max_attempts=1))
    def send(name: str) -> str:
        if name in broken:
            raise RuntimeError(f"{name} bounced")
        return f"sent {name}"

    @app.step(name="prepare")
    def prepare() -> list[str]:
        return ["a", "b"]

    @app.workflow
    def greet_all(ctx: Context) -> list[str]:
        names = prepare()
        return ctx.map(lambda c, n: send(n), names, completion=Completion.all()).values()

    runner = LocalRunner(app)
    rid = runner.start("greet_all").run_id
    runner.run_until_idle()
    failed = runner.get_run(rid)
    assert failed.status == RunStatus.FAILED and failed.error is not None
    assert failed.error.type == "BatchFailed"
    assert available_decisions(failed) == ["retry --upgrade-to <version>", "fork"]
    with pytest.raises(InvalidState, match=f"durable fork {rid} --from-step 2"):
        runner.retry(rid)
    assert runner.get_run(rid).status == RunStatus.FAILED  # nothing reopened
    broken.clear()
    forked = runner.fork(rid, 2)
    runner.run_until_idle()
    assert runner.result(forked.run_id) == ["sent a", "sent b"]
