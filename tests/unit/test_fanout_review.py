"""Fan-out bugs an attacker review found, one test each, pinned on the memory ledger.

Each test is a review's reproduction turned into an assertion of the right behaviour:
canceled branches' undos that were lost or raised out of the run, stopped branches and
nested batches that went on working, a dry replay that missed a divergence, a decision
written by a diverged replay, crash injection that let a dead worker write. Where an
outcome depends on which thread is faster, an event makes the order explicit.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, RetryPolicy, RunStatus, StepFailed, StepStatus
from durable.core.config import EngineConfig
from durable.core.model import StepKind
from durable.engine.deploy_check import dry_replay
from durable.errors import NonDeterminismError
from durable.testing import LocalRunner

ONCE = RetryPolicy(max_attempts=1)


def records(runner: LocalRunner, run_id: str) -> dict[str, tuple[StepKind, StepStatus]]:
    return {s.position: (s.kind, s.status) for s in runner.history(run_id)}


# --- a canceled branch's undos ------------------------------------------------------------


def test_a_canceled_branchs_undo_that_backs_off_durably_waits_like_the_caller() -> None:
    """r1: an undo that needed a durable retry raised ``BranchParked`` out of the run; it
    now suspends the run as the caller would, and the undo finishes on a later wake-up."""
    app = App()
    refunds: list[int] = []

    @app.step
    def charge() -> str:
        return "ch-1"

    @app.step(retry=RetryPolicy(max_attempts=6))
    def refund(charge_id: str) -> None:
        refunds.append(len(refunds) + 1)
        if len(refunds) <= 4:
            raise ConnectionError("payment API blip")

    @app.step
    def quick() -> int:
        return 1

    def held(c: Context) -> str:
        c.step(charge, compensate=refund)
        return str(c.wait_for_signal("never"))

    @app.workflow
    def wf(ctx: Context) -> str:
        result = ctx.parallel(
            held, lambda c: c.step(quick), completion="first_successful", max_concurrency=1
        )
        return str(result.ok)

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()  # nothing escapes the engine
    assert runner.get_run(run_id).status == RunStatus.WAITING
    assert records(runner, run_id)["0001.0001.0003"] == (StepKind.COMPENSATION, StepStatus.WAITING)
    for _ in range(12):
        if runner.get_run(run_id).terminal:
            break
        runner.advance(timedelta(seconds=120))
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED and run.output == '"True"'
    assert refunds == [1, 2, 3, 4, 5]  # four blips, then the refund went through once
    assert records(runner, run_id)["0001.0001.0003"] == (StepKind.COMPENSATION, StepStatus.DONE)


@pytest.mark.parametrize("max_concurrency", [1, None])
def test_a_parked_branch_decided_before_it_replayed_still_runs_its_undo(
    max_concurrency: int | None,
) -> None:
    """r2: branch 2 charged and parked; on the next invocation branch 1 decided the batch
    before branch 2 replayed its records, so branch 2's refund was never known or run."""
    app = App()
    log: list[str] = []

    @app.step
    def charge() -> str:
        log.append("charge")
        return "ch-1"

    @app.step
    def refund(charge_id: str) -> None:
        log.append(f"refund {charge_id}")

    def first(c: Context) -> str:
        return str(c.wait_for_signal("go"))

    def second(c: Context) -> str:
        c.step(charge, compensate=refund)
        return str(c.wait_for_signal("never"))

    @app.workflow
    def wf(ctx: Context) -> str:
        result = ctx.parallel(
            first, second, completion="first_successful", max_concurrency=max_concurrency
        )
        return str([i.status for i in result])

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    runner.signal(run_id, "go", "x")
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.output == "\"['succeeded', 'canceled']\""
    assert log == ["charge", "refund ch-1"]
    assert records(runner, run_id)["0001.0002.0003"] == (StepKind.COMPENSATION, StepStatus.DONE)


@pytest.mark.parametrize("max_concurrency", [1, None])
def test_a_nested_batch_that_parked_in_a_canceled_branch_keeps_its_undos(
    max_concurrency: int | None,
) -> None:
    """r3: a nested batch parked inside branch X, the outer rule was decided by Y and X
    canceled: the refund its nested branch registered was dropped."""
    app = App()
    log: list[str] = []

    @app.step
    def charge() -> str:
        log.append("charge")
        return "ch-1"

    @app.step
    def refund(charge_id: str) -> None:
        log.append(f"refund {charge_id}")

    @app.step
    def quick() -> int:
        return 1

    def inner(c: Context) -> str:
        c.step(charge, compensate=refund)
        return str(c.wait_for_signal("never"))

    def x_branch(c: Context) -> list[str]:
        return c.parallel(inner, max_concurrency=max_concurrency).values()

    @app.workflow
    def wf(ctx: Context) -> str:
        result = ctx.parallel(
            x_branch, lambda c: c.step(quick), completion="first_successful", max_concurrency=1
        )
        return str([i.status for i in result])

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.output == "\"['canceled', 'succeeded']\""
    assert log == ["charge", "refund ch-1"]
    # the undo is the canceled branch X's, after its own record (the nested batch's)
    assert records(runner, run_id)["0001.0001.0002"] == (StepKind.COMPENSATION, StepStatus.DONE)


def test_a_batch_nested_in_a_stopped_branch_stops_too(decided: threading.Event) -> None:
    """r4: the outer batch was decided while X's nested batch ran a body; X was canceled,
    yet its nested branch went on running its next steps."""
    app = App()
    bodies: list[str] = []
    s1_started = threading.Event()

    @app.step
    def s1() -> int:
        s1_started.set()
        assert decided.wait(10)  # the outer rule is decided while this body runs
        bodies.append("s1")
        return 1

    @app.step
    def s2() -> int:
        bodies.append("s2")
        return 2

    @app.step
    def s3() -> int:
        bodies.append("s3")
        return 3

    @app.step
    def quick() -> int:
        assert s1_started.wait(10)  # Y wins while X's nested branch is in s1
        return 0

    def inner(c: Context) -> int:
        c.step(s1)
        c.step(s2)
        return c.step(s3)

    def x_branch(c: Context) -> list[int]:
        return c.parallel(inner, lambda c2: 0).values()

    @app.workflow
    def wf(ctx: Context) -> str:
        result = ctx.parallel(x_branch, lambda c: c.step(quick), completion="first_successful")
        return str([i.status for i in result])

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.output == "\"['canceled', 'succeeded']\""
    assert bodies == ["s1"]
    positions = set(records(runner, run_id))
    assert "0001.0001.0001.0001.0001" in positions  # s1's result, recorded
    assert not {"0001.0001.0001.0001.0002", "0001.0001.0001.0001.0003"} & positions


def test_a_cancel_after_a_batch_with_an_answered_callback_runs_the_branchs_undo() -> None:
    """r5 (in a batch): a branch charged, then waited on a callback that was answered; a
    cancel with compensation came later and the replay of the decided batch stopped at
    the cancel before the branch's refund was known: the refund never ran."""
    app = App()
    log: list[str] = []

    @app.step
    def charge() -> str:
        log.append("charge")
        return "ch-1"

    @app.step
    def refund(charge_id: str) -> None:
        log.append(f"refund {charge_id}")

    def approved(c: Context) -> Any:
        c.step(charge, compensate=refund)
        return c.wait_for_callback("approve")

    @app.workflow
    def wf(ctx: Context) -> str:
        ctx.parallel(approved, lambda c: 2).values()
        ctx.sleep(timedelta(hours=1))
        return "done"

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    runner.complete_wait(run_id, "approve", "yes")
    runner.run_until_idle()
    runner.cancel(run_id, compensate=True)
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.CANCELED
    assert log == ["charge", "refund ch-1"]


def test_a_cancel_after_an_answered_top_level_wait_runs_the_undo_after_it() -> None:
    """r5 (top level): a wait answered before a compensable step; a cancel with
    compensation later stopped the replay at the wait, so the step's undo never ran."""
    app = App()
    log: list[str] = []

    @app.step
    def charge() -> str:
        log.append("charge")
        return "ch-1"

    @app.step
    def refund(charge_id: str) -> None:
        log.append(f"refund {charge_id}")

    @app.workflow
    def wf(ctx: Context) -> str:
        ctx.wait_for_callback("approve")
        ctx.step(charge, compensate=refund)
        ctx.sleep(timedelta(hours=1))
        return "done"

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    runner.complete_wait(run_id, "approve", "yes")
    runner.run_until_idle()
    runner.cancel(run_id, compensate=True)
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.CANCELED
    assert log == ["charge", "refund ch-1"]


# --- deploy checks, non-determinism ---------------------------------------------------------


def test_the_deploy_check_replays_every_branch_of_a_parked_batch() -> None:
    """r6: the dry replay of a run parked in a batch stopped when branch 1 reached its
    frontier, so a changed step in branch 2 went unnoticed."""

    def make(step_name: str, max_concurrency: int | None) -> App:
        app = App()

        @app.step(name=step_name)
        def work() -> int:
            return 1

        def b1(c: Context) -> str:
            return str(c.wait_for_signal("go"))

        def b2(c: Context) -> str:
            c.step(work)
            return str(c.wait_for_signal("go2"))

        @app.workflow(name="wf")
        def wf(ctx: Context) -> str:
            return str(ctx.parallel(b1, b2, max_concurrency=max_concurrency).ok)

        return app

    for max_concurrency in (1, None):
        runner = LocalRunner(make("f", max_concurrency))
        run_id = runner.start("wf").run_id
        runner.run_until_idle()
        history = runner.memory_ledger.load(run_id)
        assert history is not None
        new = make("g", max_concurrency)
        found = dry_replay(runner.engine, new.get_workflow("wf", 1), history)
        assert isinstance(found, NonDeterminismError), (max_concurrency, found)
        assert "0001.0002.0001" in str(found) and "'g'" in str(found)


def test_a_caught_non_determinism_error_decides_no_batch() -> None:
    """r11: a best-effort branch swallowed the NonDeterminismError of a changed deploy and
    the batch recorded its decision with the fallback anyway: a rollback could not undo
    the diverged replay's write."""
    app = App()
    changed = [False]

    @app.step
    def f() -> int:
        return 1

    @app.step
    def g() -> int:
        return 2

    def best_effort(c: Context) -> str:
        try:
            c.step(g if changed[0] else f)
            return str(c.wait_for_signal("go"))
        except Exception:
            return "fallback"

    def waits(c: Context) -> str:
        return str(c.wait_for_signal("go2"))

    @app.workflow
    def wf(ctx: Context) -> str:
        return str(ctx.parallel(waits, best_effort, max_concurrency=1).values())

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    changed[0] = True  # a deploy changes branch 2's step
    runner.signal(run_id, "go2", "y")
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.type == "NonDeterminismError"
    assert "0001" not in records(runner, run_id)  # no decision was written
    changed[0] = False  # the operator rolls the deploy back and retries
    runner.retry(run_id)
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.WAITING  # branch 2 waits, as recorded
    runner.signal(run_id, "go", "x")
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED and run.output == "\"['y', 'x']\""


def test_a_finished_branch_with_a_position_that_recorded_nothing_replays_cleanly() -> None:
    """r13: a finished branch used a position that recorded nothing (a refused wait it
    caught); every later replay of the decided batch reported non-determinism."""
    app = App()

    @app.step
    def charge() -> str:
        return "ch"

    @app.step
    def refund(r: str) -> None:
        pass

    def branch(c: Context) -> int:
        c.step(charge, compensate=refund)
        with contextlib.suppress(ValueError):  # past max_run_lifetime: refused, unrecorded
            c.wait_for_signal("late", timeout=timedelta(days=5000))
        return 1

    @app.workflow
    def wf(ctx: Context) -> str:
        values = ctx.parallel(branch, lambda c: 2).values()
        ctx.sleep(timedelta(minutes=1))
        return str(values)

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.WAITING
    runner.advance(timedelta(minutes=2))  # the replay rebuilds the decided batch
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output == '"[1, 2]"'


def test_a_parked_batch_replayed_with_fewer_branches_is_non_determinism() -> None:
    """r14: an undecided batch replayed with fewer branches went on silently, dropping the
    missing branch's records and its registered refund."""
    app = App()
    width = [3]
    log: list[str] = []

    @app.step
    def charge(n: int) -> int:
        log.append(f"charge {n}")
        return n

    @app.step
    def refund(r: int, n: int) -> None:
        log.append(f"refund {n}")

    def branch(n: int) -> Callable[[Context], str]:
        def b(c: Context) -> str:
            c.step(charge, n, compensate=refund)
            return str(c.wait_for_signal("go"))

        return b

    @app.workflow
    def wf(ctx: Context) -> str:
        ctx.parallel(*[branch(i) for i in range(width[0])], max_concurrency=1)
        ctx.step(charge, 99)
        raise ValueError("fail the run: every registered refund should run")

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    width[0] = 2  # a deploy drops the third branch
    for _ in range(3):
        runner.signal(run_id, "go", "x")
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.type == "NonDeterminismError"
    assert log == ["charge 0", "charge 1", "charge 2"]  # nothing ran past the divergence
    assert "0001" not in records(runner, run_id)


# --- stopping, retries, refusals ------------------------------------------------------------


def test_an_in_process_retry_stops_once_the_batch_is_decided(decided: threading.Event) -> None:
    """r7: rule "all": branch B failed for good while A's first attempt ran; A was
    canceled, yet its in-process retry loop went on to attempts 2 and 3."""
    app = App()
    attempts: list[int] = []

    @app.step(
        retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(milliseconds=10), jitter="none")
    )
    def flaky() -> int:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            assert decided.wait(10)  # B's failure decides the batch during this attempt
        raise ConnectionError("downstream blip")

    @app.step(retry=ONCE)
    def bad() -> int:
        raise ValueError("declined")

    @app.workflow
    def wf(ctx: Context) -> str:
        result = ctx.parallel(lambda c: c.step(flaky), lambda c: c.step(bad))
        return str([i.status for i in result])

    config = EngineConfig(inprocess_wait_threshold=timedelta(seconds=5))
    runner = LocalRunner(app, config=config)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.output == "\"['canceled', 'failed']\""
    assert attempts == [1]


@pytest.mark.parametrize("handling", ["catch", "raise"])
def test_a_failed_undo_leaves_the_other_canceled_branches_undos_to_the_caller(
    handling: str,
) -> None:
    """r8: canceled branches A and B each charged; A's undo failed for good and B's undo
    was lost: neither the batch nor the run's failure handling ever ran it."""
    app = App()
    log: list[str] = []
    caught: list[str] = []

    @app.step
    def charge(n: int) -> int:
        log.append(f"charge {n}")
        return n

    @app.step(retry=ONCE)
    def refund_a(r: int, n: int) -> None:
        log.append("refund_a fails")
        raise ValueError("refund API says no")

    @app.step
    def refund_b(r: int, n: int) -> None:
        log.append("refund_b")

    @app.step
    def quick() -> int:
        return 0

    def a(c: Context) -> str:
        c.step(charge, 1, compensate=refund_a)
        return str(c.wait_for_signal("never"))

    def b(c: Context) -> str:
        c.step(charge, 2, compensate=refund_b)
        return str(c.wait_for_signal("never"))

    @app.workflow
    def wf(ctx: Context) -> str:
        try:
            result = ctx.parallel(
                a, b, lambda c: c.step(quick), completion="first_successful", max_concurrency=1
            )
            return f"ok {result.ok}"
        except StepFailed as e:
            if handling == "raise":
                raise
            caught.append(e.position)
        raise RuntimeError("the workflow gives up later")  # B's undo is the caller's now

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None
    if handling == "raise":
        assert run.error.type == "StepFailed" and run.error.position == "0001.0001.0003"
    else:
        assert caught == ["0001.0001.0003"]  # A's undo, after A's own records
        assert run.error.type == "RuntimeError"
    assert log == ["charge 1", "charge 2", "refund_a fails", "refund_b"]


def test_a_crash_between_the_decision_and_the_undo_loses_no_undo() -> None:
    """r9: a canceled branch created a callback, reserved (compensable), then awaited the
    callback; the worker died right after the decision write. The takeover's rebuild
    stopped at the pending callback, so the release was never run."""
    app = App()
    log: list[str] = []

    @app.step
    def reserve(url: str) -> str:
        log.append("reserve")
        return "r-1"

    @app.step
    def release(r: str, url: str) -> None:
        log.append(f"release {r}")

    @app.step
    def quick() -> int:
        return 0

    def b1(c: Context) -> Any:
        cb = c.create_callback("approval")
        c.step(reserve, "(url)", compensate=release)
        return cb.result()

    @app.workflow
    def wf(ctx: Context) -> str:
        result = ctx.parallel(
            b1, lambda c: c.step(quick), completion="first_successful", max_concurrency=1
        )
        return str([i.status for i in result])

    runner = LocalRunner(app)
    runner.crash_at("ledger.write_step", call=4, when="after")  # the 4th write: the decision
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    assert runner.crashes, "the crash point never fired"
    for _ in range(3):
        runner.advance(timedelta(minutes=5))
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.output == "\"['canceled', 'succeeded']\""
    assert log == ["reserve", "release r-1"]
    assert records(runner, run_id)["0001.0001.0003"] == (StepKind.COMPENSATION, StepStatus.DONE)


def test_min_successful_over_too_few_branches_is_refused_at_the_call() -> None:
    """r10: {"min_successful": 3} over 2 branches is decided before any branch runs; in
    order no body ran, yet threaded every body ran. The call is now refused (the refusal
    is new: the old code accepted it)."""

    def refused(max_concurrency: int | None) -> None:
        app = App()
        ran: list[int] = []

        @app.step
        def charge(n: int) -> int:
            ran.append(n)
            return n

        @app.workflow(name="wf")
        def wf(ctx: Context) -> str:
            result = ctx.parallel(
                lambda c: c.step(charge, 1),
                lambda c: c.step(charge, 2),
                completion={"min_successful": 3},
                max_concurrency=max_concurrency,
            )
            return str(result.ok)

        runner = LocalRunner(app)
        run_id = runner.start("wf").run_id
        runner.run_until_idle()
        run = runner.get_run(run_id)
        assert run.status == RunStatus.FAILED, max_concurrency
        assert run.error is not None and run.error.type == "InvalidInput"
        assert "completion" in run.error.message
        assert ran == []
        assert records(runner, run_id) == {}

    refused(1)  # in order
    refused(None)  # threads


def test_a_crash_in_one_branch_stops_the_dead_workers_other_branch(
    decided: threading.Event,
) -> None:
    """r12: LocalRunner's crash injection made a crash one branch's outcome: the dead
    worker's other branch went on and wrote its result after the crash."""
    app = App()
    bodies: list[str] = []
    slow_started = threading.Event()

    @app.step
    def fast() -> int:
        assert slow_started.wait(10)  # the crash comes while slow's body runs
        bodies.append("fast")
        return 1

    @app.step
    def slow() -> int:
        slow_started.set()
        assert decided.wait(10)  # the crash (a signal) stops the batch while this runs
        bodies.append("slow")
        return 2

    @app.workflow
    def wf(ctx: Context) -> str:
        return str(ctx.parallel(lambda c: c.step(fast), lambda c: c.step(slow)).values())

    runner = LocalRunner(app)
    runner.crash_at("ledger.write_step", call=1, when="before")  # fast's result
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    assert len(runner.crashes) == 1
    assert sorted(bodies) == ["fast", "slow"]
    assert runner.history(run_id) == []  # slow's result was not written by a dead worker
    assert runner.call_count("ledger.write_step") == 1
