"""Every write a worker makes is fenced, and the suspend guard is the inbox its events were
loaded at (issue 12, holes 1 and 2). Each test plays one interleaving by hand: an outside
event or a second worker acts from inside a step body, where a real one could land."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, EngineConfig, RunStatus, StepStatus
from durable.adapters.memory import MemoryLedger
from durable.core.model import RunRecord, StepKind, StepRecord
from durable.core.ports import ConditionFailed, RunGuard
from durable.engine.engine import Engine
from durable.engine.waits import Callback
from durable.testing import LocalRunner

LEASE = timedelta(seconds=60)
T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-01T00:01:00.000Z", "2026-01-01T00:02:00.000Z"


def busy_wakeups(runner: LocalRunner) -> None:
    """Deliver the queued invocations now: while the owner runs, each finds the run busy."""
    while (item := runner.invoker.pop()) is not None:
        assert runner.engine.resume(item.run_id).result == "busy"


def test_a_callback_answered_mid_step_wakes_the_run_after_a_lease_renewal() -> None:
    """GIVEN a run that created a callback and then runs steps
    WHEN the callback is answered during a step, and the next step renews the lease (whose
    returned item already counts the answer)
    THEN the run still sees the answer instead of suspending with no wake-up (hole 1)."""
    app = App()
    runner: LocalRunner
    tokens: list[str] = []

    def answer_then_take_time() -> None:
        if len(tokens) == 1:
            runner.complete_callback(tokens[0], "approved")
            busy_wakeups(runner)  # the invocation it sent finds the run busy
            runner.clock.advance(timedelta(seconds=6))  # past the cancel-check interval

    def other() -> str:
        return "x"

    @app.workflow
    def flow(ctx: Context) -> Any:
        cb = ctx.create_callback("approval")
        tokens.append(cb.token)
        ctx.step(answer_then_take_time)
        ctx.step(other)  # renews the lease: 6 s passed since the last look at the run
        return cb.result()

    runner = LocalRunner(app, determinism_guard=False)
    run = runner.start("flow")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.output) == (RunStatus.SUCCEEDED, '"approved"')


def test_a_signal_sent_mid_step_is_consumed_after_a_lease_renewal() -> None:
    """GIVEN a run about to wait for a signal
    WHEN the signal arrives during the step before, and a lease renewal returns the bumped
    inbox
    THEN the wait consumes the signal in this run's life instead of waiting forever (hole 1)."""
    app = App()
    runner: LocalRunner
    sent: list[str] = []

    def send_then_take_time() -> None:
        if not sent:
            runner.signal(run_id[0], "go", {"n": 1})
            sent.append("go")
            busy_wakeups(runner)
            runner.clock.advance(timedelta(seconds=6))

    def other() -> None:
        return None

    @app.workflow
    def flow(ctx: Context) -> Any:
        ctx.step(send_then_take_time)
        ctx.step(other)
        return ctx.wait_for_signal("go")

    runner = LocalRunner(app, determinism_guard=False)
    run_id: list[str] = []
    run = runner.start("flow")
    run_id.append(run.run_id)
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.output) == (RunStatus.SUCCEEDED, '{"n":1}')


class EventOnTakeoverCount(MemoryLedger):
    """A ledger where a signal lands right before the takeover counter is written: after
    the worker loaded the partition, before the write that returns the bumped inbox."""

    def __init__(self) -> None:
        super().__init__()
        self.deliver: list[Any] = []

    def update_run(self, run_id: str, guard: RunGuard, changes: Any) -> Any:
        if "takeover_mark" in changes and self.deliver:
            self.deliver.pop()()
        return super().update_run(run_id, guard, changes)


def test_a_signal_landing_while_a_takeover_is_counted_is_not_hidden() -> None:
    """GIVEN a run whose owner died, taken over by a new worker
    WHEN a signal lands between the new worker's load and its takeover-count write
    THEN the worker still consumes it (the count's returned inbox is not the guard; hole 1)."""
    app = App()
    died: list[int] = []

    def dies_once() -> None:
        if not died:
            died.append(1)
            raise KeyboardInterrupt  # stands for the process dying mid-step

    def first() -> int:
        return 1

    @app.workflow
    def flow(ctx: Context) -> Any:
        ctx.step(first)  # progress past the last takeover mark: the takeover writes a count
        ctx.step(dies_once)
        return ctx.wait_for_signal("go")

    ledger = EventOnTakeoverCount()
    runner = LocalRunner(app, determinism_guard=False)
    engine = Engine(
        app,
        ledger,
        runner.invoker,
        runner.effect_store,
        clock=runner.clock,
        config=runner.config,
        timers=runner.timers,
    )
    run = engine.start("flow")
    with pytest.raises(KeyboardInterrupt):
        engine.resume(run.run_id)
    runner.clock.advance(LEASE + timedelta(seconds=10))
    ledger.deliver.append(lambda: engine.signal(run.run_id, "go", "late"))
    engine.resume(run.run_id)
    assert not ledger.deliver  # the signal did land mid-takeover
    runner.invoker.queue.clear()  # its wake-up found the run busy
    stored = ledger.get_run(run.run_id)
    assert stored is not None
    assert (stored.status, stored.output) == (RunStatus.SUCCEEDED, '"late"')


def test_a_zombie_never_replaces_the_live_owners_pending_callback() -> None:
    """GIVEN a worker that stalls mid-step past its lease (a zombie)
    WHEN a second worker takes over, finishes that step, creates a callback and sends its
    URL, and then the zombie wakes, adopts the step's result and reaches the callback
    THEN the callback record still carries the live owner's token: the URL the approver got
    works (hole 2)."""
    app = App()
    runner: LocalRunner
    sent: list[Callback] = []
    stalls: list[int] = []

    def slow() -> str:
        if not stalls:
            stalls.append(1)
            runner.clock.advance(LEASE + timedelta(seconds=10))
            runner.engine.resume(run_id[0])  # the takeover, while this body still runs
        return "done"

    def email(cb: Callback) -> None:
        sent.append(cb)

    @app.workflow
    def flow(ctx: Context) -> Any:
        ctx.step(slow)
        return ctx.wait_for_callback("approval", submit=email)

    runner = LocalRunner(app, determinism_guard=False, config=EngineConfig(lease=LEASE))
    run_id: list[str] = []
    run = runner.start("flow")
    run_id.append(run.run_id)
    runner.run_until_idle()
    assert [s.kind for s in runner.history(run.run_id)] == ["step", "callback", "step"]
    assert len(sent) == 1
    runner.complete_callback(sent[0].token, "yes")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == '"yes"'


def test_a_stale_owner_cannot_write_a_wait_record() -> None:
    """GIVEN a run claimed by a newer owner
    WHEN the previous owner writes a WAITING record under its old fence
    THEN the write is refused with the stored run and nothing is recorded (hole 2)."""
    ledger = MemoryLedger()
    ledger.create_run(RunRecord("R1", "wf", 1, RunStatus.PENDING, "null", "h", T0, T0))
    old = ledger.claim("R1", "old", now=T0, lease_until=T1, stale_before=T0)
    assert old is not None
    new = ledger.claim("R1", "new", now=T1, lease_until=T2, stale_before=T2)
    assert new is not None and new.took_over
    wait = StepRecord(
        "R1", "0001", "approval", StepKind.CALLBACK, StepStatus.WAITING, T2, fence=old.run.fence
    )
    with pytest.raises(ConditionFailed):
        ledger.write_step(wait, RunGuard(fence=old.run.fence, owner="old"))
    assert ledger.get_step("R1", "0001") is None


def test_a_reload_that_finds_the_run_taken_over_runs_nothing() -> None:
    """GIVEN a worker whose suspension is refused because the callback it waits for was
    answered meanwhile (it reloads and replays), and whose lease ran out so that a second
    worker took the run over before that reload
    WHEN the reload shows the answer, and the new owner's lease
    THEN the first worker stops (lease lost): it does not run the next step's body on a
    lease that is not its own (found by the explorer, seed 1146 of issue 35's changes).

    Before the fix the replay trusted the reloaded run item's lease as if it were its own
    and ran the body beside the new owner."""
    app = App()
    bodies: list[str] = []

    @app.workflow(name="flow")
    def flow(ctx: Context) -> str:
        ctx.wait_for_callback("approval", result_type=str)

        def charge() -> str:
            bodies.append("charge")
            return "charged"

        return ctx.step(charge, name="charge")

    clock_box: list[Any] = []
    engine_box: list[Engine] = []

    class Racing(MemoryLedger):
        answered = taken = False

        def update_run(self, run_id: str, guard: RunGuard, changes: Any) -> RunRecord:
            if changes.get("status") == "WAITING" and not self.answered:
                # the answer lands between the load and the suspension
                engine_box[0].complete_wait(run_id, "approval", "yes")
                self.answered = True
                clock_box[0].advance(LEASE + timedelta(seconds=10))  # the lease ran out
            return super().update_run(run_id, guard, changes)

        def load(self, run_id: str) -> Any:
            if self.answered and not self.taken:
                self.taken = True  # ... and another worker took the run over
                now = clock_box[0].now()
                taken = self.claim(
                    run_id,
                    "w2",
                    now=format_time(now),
                    lease_until=format_time(now + LEASE),
                    stale_before=format_time(now - timedelta(seconds=5)),
                )
                assert taken is not None and taken.took_over
            return super().load(run_id)

    from durable.adapters.memory import MemoryEffectStore, MemoryInvoker
    from durable.core.clock import FakeClock
    from durable.core.model import format_time

    clock = FakeClock()
    clock_box.append(clock)
    ledger = Racing()
    engine = Engine(
        app,
        ledger,
        MemoryInvoker(),
        MemoryEffectStore(),
        clock=clock,
        config=EngineConfig(inprocess_wait_threshold=timedelta(0), callback_secret=b"k" * 32),
    )
    engine_box.append(engine)
    run_id = engine.start("flow").run_id
    outcome = engine.resume(run_id)
    assert ledger.taken
    assert outcome.result == "lease_lost"
    assert bodies == []
    run = ledger.get_run(run_id)
    assert run is not None and run.lease_owner == "w2" and run.status == RunStatus.RUNNING
