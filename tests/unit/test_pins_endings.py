"""Pins on how an invocation ends (durable/engine/endings.py).

Through ``LocalRunner``; where the ledger must answer otherwise (a final write refused
as invalid, a successor id taken), the engine's ledger is wrapped (``Ledger``). Each test
names the mutants it kills (ids of ``python -m tests.mutation --module durable/engine/endings.py
--list``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, EngineConfig, RetryPolicy, RunStatus, StepFailed
from durable.adapters.memory import MemoryLedger
from durable.core.model import RunRecord, format_time, parse_time
from durable.core.ports import RunExists, RunGuard
from durable.core.serde import identity_hash
from durable.engine.endings import failed_position
from durable.engine.engine import Engine
from durable.errors import RunCanceled, StorageError
from durable.testing import LocalRunner, SimulatedCrash

LEASE = timedelta(seconds=60)


class Ledger:
    """The runner's memory ledger, with ``refuse_final`` final writes (a status among
    SUCCEEDED/FAILED/CANCELED) answered by ``error`` (by default a non-retryable
    StorageError: a request the store calls invalid), and ``continue_run`` answered by
    ``RunExists`` when ``taken``; with ``crash_on_success`` a success write kills the
    worker."""

    def __init__(
        self,
        inner: MemoryLedger,
        refuse_final: int = 0,
        taken: bool = False,
        error: Exception | None = None,
        crash_on_success: bool = False,
    ) -> None:
        self.inner = inner
        self.crash_on_success = crash_on_success
        self.refuse_final = refuse_final
        self.taken = taken
        self.error = error or StorageError("invalid request", retryable=False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        if self.crash_on_success and changes.get("status") == "SUCCEEDED":
            raise SimulatedCrash("the worker died writing the result")
        if self.refuse_final and changes.get("status") in ("SUCCEEDED", "FAILED", "CANCELED"):
            self.refuse_final -= 1
            raise self.error
        return self.inner.update_run(run_id, guard, changes)

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
        if self.taken:
            raise RunExists(successor)
        self.inner.continue_run(run_id, guard, changes, successor)


def wrapped(runner: LocalRunner, ledger: Ledger) -> None:
    runner.engine.ledger = ledger
    runner.engine.endings.ledger = ledger


def test_a_final_write_refused_as_invalid_fails_the_run_with_attention() -> None:
    """GIVEN a workflow that succeeds, and a store that refuses its final write as an
    invalid request (a non-retryable StorageError) WHEN the worker concludes THEN the run
    ends FAILED with that StorageError and needs_attention; nothing escapes resume.

    Kills endings-ebf0616f (that ``return`` -> ``return None``), endings-d69024bd
    (attention -> False) and endings-eb16ee94 (_finish_failed's ``compensated`` default ->
    True: nothing was compensated)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        return "done"

    runner = LocalRunner(app)
    wrapped(runner, Ledger(runner.memory_ledger, refuse_final=1))
    run = runner.start("flow")
    outcomes = runner.run_until_idle()

    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.needs_attention) == (RunStatus.FAILED, True)
    assert stored.error is not None and stored.error.type == "StorageError"
    assert stored.compensated is False
    assert [o.result for o in outcomes if o.run_id == run.run_id] == ["failed"]


def test_a_non_retryable_storage_error_in_the_workflow_fails_the_run() -> None:
    """GIVEN workflow code that raises a non-retryable StorageError itself WHEN the worker
    concludes THEN the run ends FAILED with it (a failure of the workflow, not of the
    ledger), without attention.

    Kills endings-4ca3e1b6 (``return self._after_failure(...)`` -> ``return None``)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        raise StorageError("the workflow's own store said no", retryable=False)

    runner = LocalRunner(app)
    run = runner.start("flow")
    outcomes = runner.run_until_idle()

    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.needs_attention) == (RunStatus.FAILED, False)
    assert stored.error is not None and stored.error.type == "StorageError"
    assert [o.result for o in outcomes if o.run_id == run.run_id] == ["failed"]


def test_a_result_that_cannot_be_encoded_fails_the_run() -> None:
    """GIVEN a workflow returning a value JSON cannot hold WHEN the worker concludes THEN
    the run ends FAILED with the encoding error (nothing was written as its output).

    Kills endings-f4d3a74a (``return self._after_failure(...)`` -> ``return None``)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> Any:
        return object()

    runner = LocalRunner(app)
    run = runner.start("flow")
    outcomes = runner.run_until_idle()

    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert stored.output is None
    assert stored.error is not None and stored.error.type in ("TypeError", "ValueError")
    assert [o.result for o in outcomes if o.run_id == run.run_id] == ["failed"]


def test_a_cancel_whose_compensation_fails_ends_failed_naming_both() -> None:
    """GIVEN a run that booked something (with an undo that always fails) and then waits
    WHEN it is canceled with compensation THEN the undo runs, fails for good, and the run
    ends FAILED: type Canceled, "<the cancel reason> | then: <the compensation's failure>",
    not retryable, with needs_attention and compensated.

    Kills endings-bc9748d8 / a88fbfc2 / 0dc9ed03 / 21ed9d99 (the Canceled cause), endings-
    82e9e2ef (its ``return`` -> ``return None``), endings-19f0550c (attention -> False),
    endings-f7e6b782 (cancel_ok -> False: the cancel request refuses the write),
    endings-2633fcdb (compensated -> False), endings-23e9921f (the "then:" message
    deleted), endings-c658c9c7 (its retryable -> True)."""
    app = App()

    @app.step
    def book() -> str:
        return "ref-1"

    @app.step(retry=RetryPolicy(max_attempts=1))
    def unbook(ref: str) -> None:
        raise RuntimeError(f"cannot cancel {ref}")

    @app.workflow
    def trip(ctx: Context) -> None:
        ctx.step(book, compensate=unbook)
        ctx.sleep(timedelta(hours=1))

    runner = LocalRunner(app)
    run = runner.start("trip")
    runner.run_until_idle()
    runner.cancel(run.run_id, "customer changed plans", compensate=True)
    outcomes = runner.run_until_idle()

    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert (stored.needs_attention, stored.compensated) == (True, True)
    assert stored.error is not None and stored.error.type == "Canceled"
    assert stored.error.message.startswith("customer changed plans | then: StepFailed: ")
    assert stored.error.message.endswith("RuntimeError: cannot cancel ref-1")
    assert (stored.error.retryable, stored.error.position) == (False, None)
    assert [o.result for o in outcomes if o.run_id == run.run_id] == ["failed"]


def test_a_deferral_by_a_worker_that_lost_the_run_writes_nothing() -> None:
    """GIVEN a run held by another worker WHEN a worker without the lease defers it (no
    code for its version) THEN the outcome is lease_lost and the run is untouched.

    Kills endings-27765ff0 (``return Outcome(..., "lease_lost")`` -> ``return None``) and
    endings-c29d1501 ("lease_lost" -> "")."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> None:
        ctx.sleep(timedelta(hours=1))

    runner = LocalRunner(app)
    run = runner.start("flow")
    history = runner.memory_ledger.load(run.run_id)
    assert history is not None
    before = runner.get_run(run.run_id)

    outcome = runner.engine.endings.defer(history, "not-the-owner", LookupError("v2"))

    assert (outcome.run_id, outcome.result, outcome.status) == (run.run_id, "lease_lost", None)
    assert runner.get_run(run.run_id) == before


def test_a_successor_id_already_taken_is_a_retryable_storage_error() -> None:
    """GIVEN a workflow that continues as new, and a successor id the ledger reports taken
    (a ULID collision) WHEN the worker concludes THEN a retryable StorageError escapes
    resume (try again with a fresh id): the existing run is never adopted.

    Kills endings-4042fac8 (that ``raise`` deleted) and endings-35670800 (retryable ->
    False: the run would fail for good)."""
    app = App()

    @app.workflow
    def loop(ctx: Context, n: int) -> None:
        ctx.continue_as_new(n + 1)

    runner = LocalRunner(app)
    wrapped(runner, Ledger(runner.memory_ledger, taken=True))
    run = runner.start("loop", 0)

    with pytest.raises(StorageError) as info:
        runner.run_until_idle()
    assert info.value.retryable is True
    stored = runner.get_run(run.run_id)
    assert stored.status not in (RunStatus.SUCCEEDED, RunStatus.FAILED)
    assert runner.memory_ledger.all_run_ids() == [run.run_id]


def test_a_run_that_slept_and_then_failed_or_was_canceled_cancels_its_timers() -> None:
    """GIVEN runs that armed a timer WHEN one then fails and the other is canceled while
    asleep THEN each finished invocation asks the timer service to cancel the run's timers
    (a failed or canceled ending is finished, as a success is).

    Kills endings-fa7af6b1 ("failed" -> "" in FINISHED) and endings-77de3f3e ("canceled"
    -> "")."""
    app = App()

    @app.workflow
    def fails(ctx: Context) -> None:
        ctx.sleep(timedelta(minutes=1))
        raise ValueError("woke up cross")

    @app.workflow
    def sleeps(ctx: Context) -> None:
        ctx.sleep(timedelta(hours=1))

    runner = LocalRunner(app)
    failing = runner.start("fails").run_id
    runner.run_until_idle()
    runner.advance(minutes=1)
    assert runner.get_run(failing).status == RunStatus.FAILED
    assert runner.call_count("timers.cancel_run") == 1

    sleeping = runner.start("sleeps").run_id
    runner.run_until_idle()
    # With compensation asked for, a worker ends it (not the cancel request's own write,
    # which cancels the timers itself).
    runner.cancel(sleeping, "not needed", compensate=True)
    outcomes = runner.run_until_idle()
    assert [o.result for o in outcomes if o.run_id == sleeping] == ["canceled"]
    assert runner.get_run(sleeping).status == RunStatus.CANCELED
    assert runner.call_count("timers.cancel_run") == 2


def test_a_deferred_run_backs_off_from_15_seconds_doubling_to_15_minutes() -> None:
    """GIVEN a run of a version no worker here knows WHEN it is deferred again and again
    THEN it is due 15 s later, then 30 s, 60 s, ... doubling, and never more than 15
    minutes later.

    Kills endings-d207dba8 (DEFER_FIRST 15 s -> 16 s) and endings-379dce0d (DEFER_MAX 15 min
    -> 16 min)."""
    new = App()

    @new.workflow(name="flow", version=2)
    def flow_v2(ctx: Context) -> None:
        return None

    old = App()

    @old.workflow(name="flow", version=1)
    def flow_v1(ctx: Context) -> None:
        return None

    runner = LocalRunner(new)
    run_id = runner.start("flow").run_id
    runner.invoker.queue.clear()
    worker = Engine(
        old,
        runner.memory_ledger,
        runner.invoker,
        runner.effect_store,
        clock=runner.clock,
        config=runner.config,
    )
    delays = []
    for _ in range(8):
        assert worker.resume(run_id).result == "deferred"
        due = runner.get_run(run_id).due_at
        assert due is not None
        delays.append((parse_time(due) - runner.clock.now()).total_seconds())
        runner.clock.set(parse_time(due))
    assert delays == [15, 30, 60, 120, 240, 480, 900, 900]


@pytest.mark.parametrize(
    "error",
    [StorageError("invalid request", retryable=False), RuntimeError("a bug while concluding")],
    ids=["invalid-request", "bug"],
)
def test_a_conclusion_that_breaks_while_a_cancel_is_pending_still_fails(error: Exception) -> None:
    """GIVEN a cancel requested while the run's last step ran WHEN the final write breaks
    (an invalid request, or any other error) THEN the run ends FAILED with that error and
    needs_attention: the failure is written over the pending cancel, not turned into it.

    Kills endings-8eee1e50 and endings-f0582d49 (cancel_ok -> False in either branch of
    drive: the cancel request would refuse the failure)."""
    app = App()
    runner: LocalRunner
    started: list[str] = []

    def work() -> str:
        runner.cancel(started[0], "stop")
        return "done"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(work)

    runner = LocalRunner(app, determinism_guard=False)
    wrapped(runner, Ledger(runner.memory_ledger, refuse_final=1, error=error))
    started.append(runner.start("flow").run_id)
    runner.run_until_idle()

    stored = runner.get_run(started[0])
    assert (stored.status, stored.needs_attention) == (RunStatus.FAILED, True)
    assert stored.error is not None and stored.error.type == type(error).__name__


def test_a_retryable_storage_error_while_concluding_gives_the_lease_back() -> None:
    """GIVEN a store that throttles the final write WHEN the worker concludes THEN the
    retryable StorageError escapes resume (crash-only), and the lease was given back first
    with the run due after the hand-off grace, so the next worker need not wait for it.

    Kills endings-90d76bd9 (``self._release(x)`` deleted)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        return "done"

    runner = LocalRunner(app)
    wrapped(
        runner,
        Ledger(
            runner.memory_ledger, refuse_final=1, error=StorageError("slow down", retryable=True)
        ),
    )
    run_id = runner.start("flow").run_id

    with pytest.raises(StorageError):
        runner.run_until_idle()

    stored = runner.get_run(run_id)
    assert stored.status == RunStatus.RUNNING
    assert (stored.lease_owner, stored.lease_until) == (None, None)
    assert stored.due_at == format_time(runner.clock.now() + runner.config.handoff_grace)


def test_a_poison_step_the_workflow_catches_lets_the_run_succeed_with_attention() -> None:
    """GIVEN a step that kills every worker running it, in a workflow that catches its
    failure WHEN the third takeover fails it for good THEN the workflow goes on and the
    run ends SUCCEEDED with needs_attention (workers died on it): the ending is not
    blamed for the step's deaths.

    Kills endings-3fab327c (``not x.poison_failed`` -> ``x.poison_failed``: FAILED as a
    worker-killing ending)."""
    app = App()

    @app.step
    def oom() -> None:
        raise SimulatedCrash("the worker died (out of memory)")

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            oom()
        except StepFailed:
            return "carried on"
        return "unreachable"

    runner = LocalRunner(app, config=EngineConfig(max_takeovers=3, lease=LEASE))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    for _ in range(10):
        if runner.get_run(run_id).terminal:
            break
        runner.advance(LEASE + timedelta(seconds=10))

    stored = runner.get_run(run_id)
    assert (stored.status, stored.needs_attention) == (RunStatus.SUCCEEDED, True)
    assert stored.output == '"carried on"'


def test_a_cancel_without_compensation_runs_no_undo() -> None:
    """GIVEN a run that booked something (with an undo), whose last step is running WHEN a
    cancel not asking for compensation lands during that step THEN the worker ends it
    CANCELED (error type Canceled, with the reason) and the undo never runs.

    Kills endings-63f046d8 (``cancel_compensate and compensations`` -> ``or``) and
    endings-b577d3e5 (the error type "Canceled" -> "")."""
    app = App()
    runner: LocalRunner
    started: list[str] = []
    undone: list[str] = []

    @app.step
    def book() -> str:
        return "ref-1"

    @app.step
    def unbook(ref: str) -> None:
        undone.append(ref)

    def last() -> str:
        runner.cancel(started[0], "customer changed plans")
        return "done"

    @app.workflow
    def trip(ctx: Context) -> str:
        ctx.step(book, compensate=unbook)
        return ctx.step(last)

    runner = LocalRunner(app, determinism_guard=False)
    started.append(runner.start("trip").run_id)
    outcomes = runner.run_until_idle()

    stored = runner.get_run(started[0])
    assert (stored.status, stored.compensated) == (RunStatus.CANCELED, False)
    assert stored.error is not None
    assert (stored.error.type, stored.error.message) == ("Canceled", "customer changed plans")
    assert next(o.result for o in outcomes if o.run_id == started[0]) == "canceled"
    assert undone == []


def test_an_ending_that_kills_every_worker_fails_the_run_naming_the_ending() -> None:
    """GIVEN a workflow whose every step is recorded but whose success write kills the
    worker, every time (a result too big to serialize in memory) WHEN the third takeover
    replays it THEN the run ends FAILED with needs_attention and an error saying workers
    died 3 times in the run's ending.

    Kills endings-6b617626 ("ending" -> "") and endings-fe1f5fb6 (attention -> False)."""
    app = App()

    @app.step
    def work() -> str:
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return work()

    runner = LocalRunner(app, config=EngineConfig(max_takeovers=3, lease=LEASE))
    wrapped(runner, Ledger(runner.memory_ledger, crash_on_success=True))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    for _ in range(10):
        if runner.get_run(run_id).terminal:
            break
        runner.advance(LEASE + timedelta(seconds=10))

    stored = runner.get_run(run_id)
    assert (stored.status, stored.needs_attention) == (RunStatus.FAILED, True)
    assert stored.error is not None and stored.error.type == "WorkerInterrupted"
    assert "died 3 times in this run's ending" in stored.error.message


def test_a_cancel_with_compensation_landing_during_the_last_step_runs_the_undo() -> None:
    """GIVEN a run that booked something (with an undo), whose last step is running WHEN a
    cancel asking for compensation lands during that step THEN the success write is
    refused, the run re-enters cancellation, the undo runs, and it ends CANCELED.

    Kills endings-b8389332 (``execution is not None`` negated: canceled without the undo)
    and endings-ea4d65b2 (that ``raise RunCanceled`` deleted: canceled at once, without
    the undo)."""
    app = App()
    runner: LocalRunner
    started: list[str] = []
    undone: list[str] = []

    @app.step
    def book() -> str:
        return "ref-1"

    @app.step
    def unbook(ref: str) -> None:
        undone.append(ref)

    def last() -> str:
        runner.cancel(started[0], "stop", compensate=True)
        return "done"

    @app.workflow
    def trip(ctx: Context) -> str:
        ctx.step(book, compensate=unbook)
        return ctx.step(last)

    runner = LocalRunner(app, determinism_guard=False)
    started.append(runner.start("trip").run_id)
    runner.run_until_idle()

    stored = runner.get_run(started[0])
    assert stored.status == RunStatus.CANCELED
    assert undone == ["ref-1"]


class TakenOver(Ledger):
    """A ledger where another worker ("w2") takes the run over just before the success
    write lands: the stalled worker's final write is refused under the new fence."""

    def __init__(self, inner: MemoryLedger, runner: LocalRunner) -> None:
        super().__init__(inner)
        self.runner = runner

    def _take_over(self, run_id: str) -> None:
        now = self.runner.clock.now()
        claim = self.inner.claim(
            run_id,
            "w2",
            now=format_time(now),
            lease_until=format_time(now + LEASE),
            stale_before=format_time(now + timedelta(days=1)),
        )
        assert claim is not None

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        if changes.get("status") == "SUCCEEDED":
            self._take_over(run_id)
        return self.inner.update_run(run_id, guard, changes)

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
        self._take_over(run_id)
        self.inner.continue_run(run_id, guard, changes, successor)


def test_a_final_write_after_a_takeover_is_lease_lost() -> None:
    """GIVEN a worker whose run was taken over by another just before its success write
    WHEN it concludes THEN its write is refused and the outcome is lease_lost: the run is
    the new owner's, still RUNNING, with no output.

    Kills endings-24cfcb43 ("lease_lost" -> "") and endings-0d1d1fad (its ``return`` ->
    ``return None``)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        return "done"

    runner = LocalRunner(app)
    wrapped(runner, TakenOver(runner.memory_ledger, runner))
    run_id = runner.start("flow").run_id
    runner.invoker.queue.clear()

    outcome = runner.engine.resume(run_id)

    assert (outcome.run_id, outcome.result, outcome.status) == (run_id, "lease_lost", None)
    stored = runner.get_run(run_id)
    assert (stored.status, stored.lease_owner, stored.output) == (RunStatus.RUNNING, "w2", None)


def test_a_cancel_requested_while_workers_die_in_the_ending_wins() -> None:
    """GIVEN a run whose success write kills every worker, and a cancel requested after the
    first death WHEN the third takeover gives up on the ending THEN its FAILED write is
    refused by the cancel request and the run ends CANCELED with the cancel's reason.

    Kills endings-a59a5dd0 (``return self.write_canceled(current, owner)`` -> ``return
    None``: the run would stay RUNNING) and endings-9b04ff41 (_finish_failed's
    ``cancel_ok`` default -> True: FAILED over the cancel) and endings-8668f1a0 (the
    "canceled" outcome -> "")."""
    app = App()

    @app.step
    def work() -> str:
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return work()

    runner = LocalRunner(app, config=EngineConfig(max_takeovers=3, lease=LEASE))
    wrapped(runner, Ledger(runner.memory_ledger, crash_on_success=True))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.cancel(run_id, "stop")
    outcomes = []
    for _ in range(10):
        if runner.get_run(run_id).terminal:
            break
        outcomes += runner.advance(LEASE + timedelta(seconds=10))

    stored = runner.get_run(run_id)
    assert stored.status == RunStatus.CANCELED
    assert stored.error is not None and stored.error.message == "stop"
    # ``advance`` stops at each due time on the way: a wake-up while a dead worker's lease
    # still holds finds the run busy, as a sweeper's would.
    ended = [o.result for o in outcomes if o.run_id == run_id and o.result != "busy"]
    assert ended == ["canceled"]


def test_a_deferred_run_that_has_steps_waits_rather_than_pends() -> None:
    """GIVEN a run of version 2 that recorded a step and sleeps WHEN a worker that only
    knows version 1 wakes it THEN the run is deferred as WAITING (it has history), its
    lease released and a deferral counted."""
    new = App()

    @new.step
    def work() -> str:
        return "ok"

    @new.workflow(name="flow", version=2)
    def flow_v2(ctx: Context) -> None:
        work()
        ctx.sleep(timedelta(minutes=1))

    old = App()

    @old.workflow(name="flow", version=1)
    def flow_v1(ctx: Context) -> None:
        return None

    runner = LocalRunner(new)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.WAITING
    runner.clock.advance(timedelta(minutes=1))
    worker = Engine(
        old,
        runner.memory_ledger,
        runner.invoker,
        runner.effect_store,
        clock=runner.clock,
        config=runner.config,
    )

    outcome = worker.resume(run_id)

    stored = runner.get_run(run_id)
    assert (outcome.result, outcome.status) == ("deferred", "WAITING")
    assert (stored.status, stored.lease_owner, stored.deferrals) == (RunStatus.WAITING, None, 1)


def test_a_failure_whose_compensation_fails_is_not_retryable() -> None:
    """GIVEN a workflow that fails after a step whose undo fails too WHEN it ends THEN the
    run is FAILED with the original error, then the compensation's, not retryable.

    Kills endings-a33fa400 (retryable -> True in the joined error)."""
    app = App()

    @app.step
    def book() -> str:
        return "ref-1"

    @app.step(retry=RetryPolicy(max_attempts=1))
    def unbook(ref: str) -> None:
        raise RuntimeError(f"cannot cancel {ref}")

    @app.workflow
    def trip(ctx: Context) -> None:
        ctx.step(book, compensate=unbook)
        raise ValueError("card declined")

    runner = LocalRunner(app)
    run_id = runner.start("trip").run_id
    runner.run_until_idle()

    stored = runner.get_run(run_id)
    assert (stored.status, stored.needs_attention) == (RunStatus.FAILED, True)
    assert stored.error is not None
    assert (stored.error.type, stored.error.retryable) == ("ValueError", False)
    # The type is the type field; the message is the error's own text (not repeated).
    assert stored.error.message.startswith("card declined | then compensation failed: StepFailed: ")


def test_a_plain_failure_is_recorded_not_retryable() -> None:
    """GIVEN a workflow that raises WHEN it ends THEN its error is recorded not retryable
    (a retry is an operator's decision).

    Kills endings-5d1174b5 (retryable -> True)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> None:
        raise ValueError("no")

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()

    stored = runner.get_run(run_id)
    assert stored.error is not None
    assert (stored.error.type, stored.error.message, stored.error.retryable) == (
        "ValueError",
        "no",  # the type is the type field, not repeated in the message
        False,
    )


def test_a_run_past_its_lifetime_fails_even_with_a_cancel_pending() -> None:
    """GIVEN a run asleep past its max_run_lifetime, with a cancel asking for compensation
    pending WHEN a worker claims it THEN it ends FAILED with LifetimeExceeded (its effect
    records may be gone: nothing of it runs again, not even compensations), over the
    cancel request.

    Kills endings-6cb14b0c (fail_for_good's cancel_ok -> False: CANCELED instead)."""
    app = App()

    @app.step
    def book() -> str:
        return "ref-1"

    @app.step
    def unbook(ref: str) -> None:
        return None

    @app.workflow
    def trip(ctx: Context) -> None:
        ctx.step(book, compensate=unbook)
        ctx.sleep(timedelta(hours=23))

    runner = LocalRunner(
        app,
        config=EngineConfig(
            inprocess_wait_threshold=timedelta(0), max_run_lifetime=timedelta(days=1)
        ),
    )
    run_id = runner.start("trip").run_id
    runner.run_until_idle()
    runner.clock.advance(timedelta(days=1, hours=1))
    runner.cancel(run_id, "stop", compensate=True)
    runner.run_until_idle()

    stored = runner.get_run(run_id)
    assert (stored.status, stored.needs_attention) == (RunStatus.FAILED, True)
    assert stored.error is not None and stored.error.type == "LifetimeExceeded"


def test_workflow_code_raising_the_internal_cancel_signal_ends_canceled() -> None:
    """GIVEN workflow code that raises the engine's RunCanceled itself, with no cancel
    requested WHEN the run ends THEN it is CANCELED with the generic reason "canceled"
    (there is no requested one to record).

    Kills endings-bee93751 (write_canceled's fallback "canceled" -> "")."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> None:
        raise RunCanceled("from workflow code")

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()

    stored = runner.get_run(run_id)
    assert stored.status == RunStatus.CANCELED
    assert stored.error is not None
    assert (stored.error.type, stored.error.message) == ("Canceled", "canceled")


def test_a_cancel_write_by_a_worker_that_lost_the_run_writes_nothing() -> None:
    """GIVEN a run held by another worker WHEN a worker without the lease writes it
    CANCELED THEN the outcome is lease_lost and the run is untouched.

    Kills endings-8540bf23 ("lease_lost" -> "")."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> None:
        ctx.sleep(timedelta(hours=1))

    runner = LocalRunner(app)
    run = runner.start("flow")
    before = runner.get_run(run.run_id)

    outcome = runner.engine.endings.write_canceled(before, "not-the-owner")

    assert (outcome.run_id, outcome.result, outcome.status) == (run.run_id, "lease_lost", None)
    assert runner.get_run(run.run_id) == before


def test_a_successor_starts_pending_and_due_with_its_predecessors_identity() -> None:
    """GIVEN a run started by "alice" that continues as new WHEN it concludes THEN the
    outcome is succeeded, and the successor is a PENDING run of the same workflow and
    version, requested by alice, continued from it, created, updated and due at the same
    instant, its input hashed as a start would, and a worker is invoked to start it."""
    app = App()

    @app.workflow(version=3)
    def loop(ctx: Context, n: int) -> int:
        if n == 1:
            ctx.continue_as_new(2)
        return n

    runner = LocalRunner(app)
    run = runner.start("loop", 1, requested_by="alice")
    runner.invoker.queue.clear()

    outcome = runner.engine.resume(run.run_id)

    assert (outcome.result, outcome.status) == ("succeeded", "SUCCEEDED")
    (successor_id,) = [r for r in runner.memory_ledger.all_run_ids() if r != run.run_id]
    successor = runner.get_run(successor_id)
    assert (successor.workflow, successor.version, successor.status) == (
        "loop",
        3,
        RunStatus.PENDING,
    )
    assert (successor.requested_by, successor.continued_from) == ("alice", run.run_id)
    assert successor.created_at == successor.updated_at == successor.due_at
    assert successor.input_hash == identity_hash(successor.input)
    queued = runner.invoker.pop()
    assert queued is not None and (queued.run_id, queued.reason) == (successor_id, "start")


def test_a_cancel_that_beats_continue_as_new_is_written_by_the_same_worker() -> None:
    """GIVEN a loop that continues as new after a step WHEN a cancel lands while that step
    runs THEN the worker whose continue-as-new was refused cancels the run itself, in the
    same invocation: the outcome is canceled (not lease_lost, leaving it to a later
    worker), and no successor exists.

    Kills endings-0aa04337 (that cancel test negated)."""
    app = App()
    runner: LocalRunner
    started: list[str] = []

    def work(n: int) -> int:
        runner.cancel(started[0], "stop the loop")
        return n + 1

    @app.workflow
    def loop(ctx: Context, n: int) -> int:
        n = ctx.step(work, n)
        ctx.continue_as_new(n)
        return n

    runner = LocalRunner(app, determinism_guard=False)
    started.append(runner.start("loop", 0).run_id)
    runner.invoker.queue.clear()

    outcome = runner.engine.resume(started[0])

    assert (outcome.result, outcome.status) == ("canceled", "CANCELED")
    assert runner.get_run(started[0]).status == RunStatus.CANCELED
    assert runner.memory_ledger.all_run_ids() == [started[0]]


def test_a_continue_as_new_after_a_takeover_is_lease_lost() -> None:
    """GIVEN a worker whose run was taken over just before its continue-as-new write WHEN
    it concludes THEN the write is refused, the outcome is lease_lost, and no successor
    exists.

    Kills endings-bce4976c ("lease_lost" -> "")."""
    app = App()

    @app.workflow
    def loop(ctx: Context, n: int) -> None:
        ctx.continue_as_new(n + 1)

    runner = LocalRunner(app)
    wrapped(runner, TakenOver(runner.memory_ledger, runner))
    run_id = runner.start("loop", 0).run_id
    runner.invoker.queue.clear()

    outcome = runner.engine.resume(run_id)

    assert (outcome.run_id, outcome.result, outcome.status) == (run_id, "lease_lost", None)
    assert runner.memory_ledger.all_run_ids() == [run_id]


def test_the_failed_position_of_a_cyclic_error_chain_is_none() -> None:
    """GIVEN two errors each the cause of the other (code can build such a chain) and no
    step failure among them WHEN the run's failed position is looked for THEN it is None:
    each error is looked at once.

    Catches endings-049f519f (``seen.add`` deleted: the walk never ends; a time-out)."""
    first, second = ValueError("a"), RuntimeError("b")
    first.__cause__, second.__cause__ = second, first

    assert failed_position(first) is None
