"""Pins on the lease checks, suspension and waiting in-process (durable/engine/execution.py).

The lease tests drive ``Execution.ensure_lease`` directly on a run claimed in the memory
ledger, with the engine's fake clock: renewing is a decision on times, tested at its
boundaries. Each test names the mutants it kills (ids of ``python -m tests.mutation
--module durable/engine/execution.py --list``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import timedelta

import pytest

from durable import App, Context, EngineConfig, RetryPolicy, RunStatus
from durable.core.model import StepKind, StepRecord, StepStatus, format_time
from durable.core.ports import Invocation
from durable.engine.execution import Execution
from durable.errors import LeaseLost, NonDeterminismError, RunCanceled
from durable.testing import LocalRunner

LEASE = timedelta(seconds=60)
S = timedelta(seconds=1)


class Claimed:
    """A run claimed by "w1" at the clock's start with a 60 s lease, and the Execution that
    would replay it (``remaining``: the invocation's seconds left, None for no deadline)."""

    def __init__(
        self, config: EngineConfig | None = None, remaining: Callable[[], float] | None = None
    ) -> None:
        app = App()

        @app.workflow
        def flow(ctx: Context) -> None:
            return None

        self.runner = LocalRunner(app, config=config or EngineConfig(lease=LEASE))
        self.ledger = self.runner.memory_ledger
        self.start = self.runner.clock.now()
        self.run_id = self.runner.start("flow").run_id
        lease = self.runner.config.lease
        claim = self.ledger.claim(
            self.run_id,
            "w1",
            now=format_time(self.start),
            lease_until=format_time(self.start + lease),
            stale_before=format_time(self.start),
        )
        assert claim is not None
        history = self.ledger.load(self.run_id)
        assert history is not None
        history.run = claim.run
        workflow = app.get_workflow("flow")
        invocation = Invocation(remaining_seconds=remaining)
        self.x = Execution(self.runner.engine, workflow, history, "w1", invocation)

    def at(self, seconds: float) -> None:
        """Move the clock to ``seconds`` after the claim."""
        self.runner.clock.advance(self.start + seconds * S - self.runner.clock.now())

    def lease_until(self) -> str | None:
        run = self.ledger.get_run(self.run_id)
        assert run is not None
        return run.lease_until

    def renews(self, budget: timedelta) -> bool:
        before = self.lease_until()
        self.x.ensure_lease(budget)
        return self.lease_until() != before

    def t(self, seconds: float) -> str:
        return format_time(self.start + seconds * S)


def test_a_fresh_lease_that_covers_the_budget_is_not_renewed() -> None:
    """GIVEN a lease checked 4 s ago that ends at 60 s WHEN a step with a 30 s budget starts
    THEN nothing is written; the lease already outlives budget and margin.

    Kills execution-c6cc275b (``_checked_at is not None`` negated: never fresh),
    execution-d79c4201 (``until >= must_cover`` -> ``<``)."""
    claimed = Claimed()
    claimed.at(4)
    assert not claimed.renews(30 * S)


def test_a_lease_ending_exactly_when_the_budget_does_is_enough() -> None:
    """GIVEN a fresh lease ending at 60 s, at 4 s WHEN a step needs 54 s plus the 2 s margin
    (to exactly 60 s) THEN it is not renewed; one more second of budget and it is.

    Kills execution-bcf92798 (``until >= must_cover`` -> ``>``)."""
    claimed = Claimed()
    claimed.at(4)
    assert not claimed.renews(54 * S)
    assert claimed.renews(55 * S)


def test_the_margin_is_added_to_the_budget() -> None:
    """GIVEN a lease ending at 60 s, checked at the claim, and freshness lasting an hour
    WHEN a 30 s step starts at 29 s (needing 32 s: past the lease) THEN the lease is
    renewed to a full lease from now.

    Kills execution-fa8300d5 (``budget + safety_margin`` -> ``-``: 28 s would fit)."""
    claimed = Claimed(EngineConfig(lease=LEASE, cancel_check_interval=timedelta(hours=1)))
    claimed.at(29)
    assert claimed.renews(30 * S)
    assert claimed.lease_until() == claimed.t(89)


def test_a_lease_checked_exactly_the_check_interval_ago_is_checked_again() -> None:
    """GIVEN a lease that covers the budget, last checked exactly 5 s (the cancel check
    interval) ago WHEN a step starts THEN the run item is read and the lease renewed (a
    cancel request is looked for at least that often); a second step a second later is
    not checked again.

    Kills execution-f4c319cd (``now - checked_at < interval`` -> ``<=``), execution-1c91c4ab
    (``self._checked_at = now`` deleted: every later step would write again)."""
    claimed = Claimed()
    claimed.at(5)
    assert claimed.renews(S)
    assert claimed.lease_until() == claimed.t(65)
    claimed.at(6)
    assert not claimed.renews(S)


def test_a_renewal_never_runs_past_the_invocation_deadline() -> None:
    """GIVEN an invocation with 20 s left (the fake clock does not shorten it) WHEN the lease
    (to 60 s) is renewed 50 s after the claim THEN it ends at the deadline plus the 2 s
    overrun: 22 s from now (72 s), not a full lease (110 s).

    Kills execution-356905d9 (``+ deadline_overrun`` -> ``-``), execution-77a40393
    (``now + remaining`` -> ``-``)."""
    claimed = Claimed(remaining=lambda: 20.0)
    claimed.at(50)
    assert claimed.renews(S)
    assert claimed.lease_until() == claimed.t(72)


def test_a_renewal_that_finds_a_cancel_request_raises_it_with_the_reason() -> None:
    """GIVEN a cancel request ("customer asked") written while the owner ran
    WHEN its next lease check reads the run item THEN RunCanceled carries the reason.

    Kills execution-743bb662 (``cancel_reason or "canceled"`` -> ``and``)."""
    claimed = Claimed()
    claimed.ledger.patch_run(
        claimed.run_id, {"cancel_requested": True, "cancel_reason": "customer asked"}
    )
    claimed.at(10)
    with pytest.raises(RunCanceled) as info:
        claimed.x.ensure_lease(S)
    assert str(info.value) == "customer asked"


# --- suspension ---------------------------------------------------------------------------


def test_a_worker_whose_run_was_taken_over_loses_the_lease_when_it_suspends() -> None:
    """GIVEN a worker whose run another worker took over while a step ran
    WHEN the workflow then sleeps (a suspension, fenced) THEN the worker stops: its
    outcome is lease_lost, and the other worker's lease stands.

    Kills execution-3b04adcb (``raise LeaseLost()`` deleted) and execution-f4b2e633 (the
    "is it still mine" test's ``and`` -> ``or``: it would reload and retry forever)."""
    app = App()
    runner: LocalRunner

    def work() -> str:
        runner.memory_ledger.patch_run(run_id, {"fence": 7, "lease_owner": "w2"})
        return "done"

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.step(work, name="work")
        ctx.sleep(timedelta(hours=1))
        return "rested"

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    outcomes = runner.run_until_idle()
    assert [o.result for o in outcomes] == ["lease_lost"]
    assert runner.get_run(run_id).lease_owner == "w2"


def test_a_backoff_scheduled_after_a_timer_wake_up_gets_the_plain_timer_name() -> None:
    """GIVEN a run woken by its timer after a sleep WHEN its next step fails and schedules a
    10-minute backoff THEN that timer has the wait's own name (only a wait that was already
    pending when an early timer fired gets a re-armed name).

    Kills execution-ba0a8ea1 (suspend's ``replayed=False`` default -> True) and
    execution-5a5733fe (``replayed and reason == "timer"`` -> ``or``)."""
    app = App()

    @app.step(retry=RetryPolicy(initial_delay=timedelta(minutes=10), jitter="none"))
    def flaky() -> str:
        raise ConnectionError("down")

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.sleep(timedelta(minutes=1))
        return flaky()

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert list(runner.timers.armed) == [f"{run_id}-0001"]
    runner.advance(minutes=1)  # the sleep's timer fires (and is gone): reason "timer"
    assert list(runner.timers.armed) == [f"{run_id}-0002"]


# --- sleeping and retrying in-process -----------------------------------------------------


def sleeper(seen: list[object], duration: timedelta) -> App:
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        before = ctx.now()
        ctx.sleep(duration)
        after = ctx.now()
        seen.append(after - before)
        return "rested"

    return app


IN_PROCESS = EngineConfig(inprocess_wait_threshold=timedelta(seconds=5))


@pytest.mark.parametrize(("remaining", "in_process"), [(7.0, True), (6.9, False)])
def test_a_sleep_at_the_threshold_is_served_in_process_when_time_allows(
    remaining: float, in_process: bool
) -> None:
    """GIVEN a 5 s sleep (exactly the in-process threshold) in an invocation with 7 s left
    (the sleep plus the 2 s margin), or 6.9 s
    WHEN the workflow sleeps THEN with 7 s it sleeps in-process: the clock moves 5 s and the
    run finishes in this invocation without a timer; with 6.9 s the run suspends instead.

    Kills execution-d4785efc (``wait > threshold`` -> ``>=``), execution-dcba80dd
    (``remaining >= needed`` -> ``>``), execution-0d9eab6a / 750f0c33, execution-9574ed4f /
    da61cdd0 (the margin), execution-f6a040e6 (``then_needed`` of 0 -> a day),
    execution-c0416044 (the in-process ``clock.sleep`` deleted)."""
    seen: list[object] = []
    runner = LocalRunner(
        sleeper(seen, 5 * S), config=IN_PROCESS, remaining_seconds=lambda: remaining
    )
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    if in_process:
        assert run.status == RunStatus.SUCCEEDED and seen == [5 * S]
        assert runner.timers.arm_calls == 0
    else:
        assert run.status == RunStatus.WAITING and runner.timers.arm_calls == 1


def test_a_sleep_that_is_already_over_never_suspends() -> None:
    """GIVEN an invocation with 1 s left (less than the 2 s margin) WHEN the workflow sleeps
    for zero time THEN the sleep is simply over: the run finishes now, no timer.

    Kills execution-95c08459 (``wait > timedelta(0)`` -> ``>=``: it would suspend)."""
    seen: list[object] = []
    runner = LocalRunner(sleeper(seen, timedelta(0)), remaining_seconds=lambda: 1.0)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert runner.timers.arm_calls == 0


@pytest.mark.parametrize(("remaining", "in_process"), [(13.0, True), (12.9, False)])
def test_an_in_process_retry_needs_time_for_the_backoff_the_next_attempt_and_the_margin(
    remaining: float, in_process: bool
) -> None:
    """GIVEN a step (budget 10 s) failing once with a 1 s backoff, in an invocation with 13 s
    left (1 + 10 + the 2 s margin), or 12.9 s WHEN it fails THEN with 13 s it retries in
    this invocation; with 12.9 s it waits out the backoff suspended.

    Kills execution-3c907939 (``wait + then_needed`` -> ``-``)."""
    app = App()
    bodies: list[int] = []

    @app.step(
        timeout=10 * S,
        retry=RetryPolicy(max_attempts=2, initial_delay=S, jitter="none"),
    )
    def flaky() -> str:
        bodies.append(1)
        if len(bodies) == 1:
            raise ConnectionError("down")
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return flaky()

    runner = LocalRunner(app, config=IN_PROCESS, remaining_seconds=lambda: remaining)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    status = runner.get_run(run_id).status
    assert status == (RunStatus.SUCCEEDED if in_process else RunStatus.WAITING)


CALLS = {"n": 0}


def test_continue_as_new_after_caught_non_determinism_raises_it_again() -> None:
    """GIVEN a workflow that, on replay, catches the NonDeterminismError of a renamed step
    WHEN it then continues as new THEN the error is raised again: the run is parked FAILED
    for attention, never continued.

    Kills execution-bbbdbb82 (continue_as_new's ``self.check_cancel()`` deleted)."""
    app = App()
    CALLS["n"] = 0

    @app.workflow
    def flow(ctx: Context, state: int = 0) -> str:
        CALLS["n"] += 1
        with contextlib.suppress(NonDeterminismError):
            ctx.step(lambda: "work", name=f"work-{CALLS['n']}")
        if CALLS["n"] == 1:
            ctx.sleep(timedelta(hours=1))
        ctx.continue_as_new(state + 1)
        return "unreachable"

    runner = LocalRunner(app)
    run_id = runner.start("flow", 0).run_id
    runner.run_until_idle()
    runner.advance(hours=1)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.needs_attention
    assert run.continued_from is None


def _done_record(claimed: Claimed, output: str) -> StepRecord:
    return StepRecord(
        run_id=claimed.run_id,
        position="0001",
        name="work",
        kind=StepKind.STEP,
        status=StepStatus.DONE,
        output=output,
        updated_at=claimed.t(1),
    )


def test_a_result_written_after_the_lease_ended_is_not_handed_to_the_workflow() -> None:
    """GIVEN a worker whose result write stalled past the end of its lease, and the run
    meanwhile ended and expired (its records purged: nothing stops the late write)
    WHEN the write comes back accepted THEN the worker stops (``LeaseLost``) rather than
    return its own value to the workflow code: the run's first value was another worker's,
    so a replay's value would differ (explorer seed 7317, ``replay_values_equal``).

    A write accepted while the lease holds is returned as before."""
    claimed = Claimed()
    claimed.at(30)  # within the 60 s lease
    mine = _done_record(claimed, '"first"')
    assert claimed.x.write_result(mine) is mine

    stalled = Claimed()
    stalled.at(61)  # the lease ended a second ago by this worker's clock
    with pytest.raises(LeaseLost):
        stalled.x.write_result(_done_record(stalled, '"late"'))
    assert "0001" not in stalled.x.steps  # nothing the workflow code could read
