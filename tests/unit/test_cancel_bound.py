"""A canceled run starts no body after the cancel plus the check interval, however the
worker's own calls are delayed (found by the simulation explorer, seed 436 and kin)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, RetryPolicy, RunStatus, current_step
from durable.adapters.memory import MemoryLedger
from durable.core.model import StepStatus
from durable.engine.engine import Engine
from durable.testing import LocalRunner

LEASE = timedelta(seconds=60)


class Hooked(MemoryLedger):
    """A memory ledger that runs ``hooks[name]`` once, right after that call (what a slow
    network or a paused worker looks like from outside)."""

    def __init__(self) -> None:
        super().__init__()
        self.hooks: dict[str, Callable[[Any], None]] = {}

    def _after(self, name: str, result: Any) -> Any:
        hook = self.hooks.pop(name, None)
        if hook is not None:
            hook(result)
        return result

    def load(self, run_id: str) -> Any:
        return self._after("load", super().load(run_id))

    def claim(self, run_id: str, owner: str, **kwargs: Any) -> Any:
        return self._after("claim", super().claim(run_id, owner, **kwargs))

    def update_run(self, run_id: str, guard: Any, changes: Any) -> Any:
        stored = super().update_run(run_id, guard, changes)
        if "lease_until" in changes and changes["lease_until"] is not None:
            return self._after("renewal", stored)
        return stored

    def write_step(self, step: Any, guard: Any = None) -> Any:
        stored = super().write_step(step, guard)
        if step.status == StepStatus.RUNNING:
            return self._after("running", stored)
        return stored


def build(app: App) -> tuple[LocalRunner, Hooked, Engine]:
    runner = LocalRunner(app, determinism_guard=False)
    ledger = Hooked()
    engine = Engine(
        app,
        ledger,
        runner.invoker,
        runner.effect_store,
        clock=runner.clock,
        config=runner.config,
        timers=runner.timers,
    )
    return runner, ledger, engine


def charge_app(bodies: list[str], semantics: Any = "at_least_once") -> App:
    app = App()

    def charge() -> str:
        bodies.append("charge")
        return "ch_1"

    @app.workflow
    def pay(ctx: Context) -> str:
        return ctx.step(
            charge,
            semantics=semantics,
            retry=RetryPolicy(max_attempts=1),
            timeout=timedelta(seconds=1),  # the lease covers it: only the cancel check looks
        )

    return app


# A fresh run's first invocation reads nothing after its claim; a keyed one loads its
# partition (its id may hold an expired run's records): the stall is tried after each.
STALLS = [(None, "claim"), ("order-1", "claim"), ("order-1", "load")]


@pytest.mark.parametrize(("key", "stalled"), STALLS)
def test_the_first_cancel_check_counts_from_when_the_claim_read_the_run(
    key: str | None, stalled: str
) -> None:
    """GIVEN a worker that stalls 20 s after its claim (or its load: its lease still
    covers the step), during which a cancel lands
    WHEN it reaches its first step
    THEN it looks at the run again (the claim's view is 20 s old, past the 5 s cancel
    check interval) and starts no body."""
    bodies: list[str] = []
    runner, ledger, engine = build(charge_app(bodies))
    run = engine.start("pay", idempotency_key=key)

    def slow_load(_: Any) -> None:
        engine.cancel(run.run_id, "customer left")
        runner.clock.advance(timedelta(seconds=20))

    ledger.hooks[stalled] = slow_load
    engine.resume(run.run_id)
    stored = ledger.get_run(run.run_id)
    assert stored is not None and stored.status == RunStatus.CANCELED
    assert bodies == []


def test_an_at_most_once_body_never_starts_after_a_cancel_that_beat_its_mark() -> None:
    """GIVEN an at-most-once step whose lease check passed
    WHEN a cancel lands before its RUNNING mark is written
    THEN the mark is refused, the run is canceled and the body never runs."""
    bodies: list[str] = []
    _runner, ledger, engine = build(charge_app(bodies, "at_most_once_per_attempt"))
    run = engine.start("pay")
    original = ledger.write_step

    def cancel_first(step: Any, guard: Any = None) -> Any:
        if step.status == StepStatus.RUNNING and not ledger.hooks.get("done"):
            ledger.hooks["done"] = lambda _: None
            engine.cancel(run.run_id, "stop")
        return original(step, guard)

    ledger.write_step = cancel_first  # type: ignore[method-assign]
    engine.resume(run.run_id)
    stored = ledger.get_run(run.run_id)
    assert stored is not None and stored.status == RunStatus.CANCELED
    assert bodies == [] and ledger.get_step(run.run_id, "0001") is None


def test_a_worker_that_stalls_writing_its_mark_does_not_start_the_body_late() -> None:
    """GIVEN an at-most-once step whose RUNNING mark is written
    WHEN the worker stalls past the end of its lease before the write returns
    THEN the body does not start then; the next worker finds the attempt interrupted and
    (one attempt allowed) fails it for good rather than running it blindly."""
    bodies: list[str] = []
    runner, ledger, engine = build(charge_app(bodies, "at_most_once_per_attempt"))
    run = engine.start("pay")

    def stall(_: Any) -> None:
        runner.clock.advance(timedelta(days=1))

    ledger.hooks["running"] = stall
    assert engine.resume(run.run_id).result == "lease_lost"
    assert bodies == []
    runner.clock.advance(LEASE + timedelta(seconds=10))
    engine.resume(run.run_id)
    stored = ledger.get_run(run.run_id)
    assert stored is not None and stored.status == RunStatus.FAILED
    assert bodies == []


def test_a_mark_answered_late_within_the_lease_is_not_trusted_to_start_a_body() -> None:
    """GIVEN an at-most-once step whose RUNNING mark is written (no cancel then)
    WHEN a cancel lands and the write's answer reaches the worker 20 s later, its lease
    still running (found by the simulation explorer, seed 1356 of the fan-out generator)
    THEN the mark's view is past the 5 s cancel check interval: the worker looks again,
    sees the cancel and starts no body."""
    bodies: list[str] = []
    runner, ledger, engine = build(charge_app(bodies, "at_most_once_per_attempt"))
    run = engine.start("pay")

    def late_answer(_: Any) -> None:
        engine.cancel(run.run_id, "stop")
        runner.clock.advance(timedelta(seconds=20))

    ledger.hooks["running"] = late_answer
    engine.resume(run.run_id)
    stored = ledger.get_run(run.run_id)
    assert stored is not None and stored.status == RunStatus.CANCELED
    assert bodies == []


@pytest.mark.parametrize(("key", "stalled"), STALLS)
def test_a_renewal_answered_late_is_not_trusted_to_start_a_body(
    key: str | None, stalled: str
) -> None:
    """GIVEN a lease renewal that reads the run before a cancel lands, and whose answer
    reaches the worker 6 s later (past the 5 s cancel check interval)
    WHEN the worker is about to start a body
    THEN it looks again, sees the cancel and starts nothing."""
    bodies: list[str] = []
    runner, ledger, engine = build(charge_app(bodies))
    run = engine.start("pay", idempotency_key=key)

    def late_answer(_: Any) -> None:
        engine.cancel(run.run_id, "stop")
        runner.clock.advance(timedelta(seconds=6))

    def slow_load(_: Any) -> None:
        runner.clock.advance(timedelta(seconds=6))  # the claim's view is stale: renew
        ledger.hooks["renewal"] = late_answer

    ledger.hooks[stalled] = slow_load
    engine.resume(run.run_id)
    stored = ledger.get_run(run.run_id)
    assert stored is not None and stored.status == RunStatus.CANCELED
    assert bodies == []


def test_a_worker_that_stalls_after_persisting_an_effect_key_does_not_call() -> None:
    """GIVEN a step that persisted its effect key and then stalled past its lease (a new
    owner may have reconciled and called meanwhile)
    WHEN it wakes
    THEN it does not make the call."""
    calls: list[str] = []
    app = App()

    def call(key: str) -> str:
        calls.append(key)
        return "ch_1"

    def charge() -> str:
        return str(current_step().effect("charge", call))

    @app.workflow
    def pay(ctx: Context) -> str:
        return ctx.step(charge)

    runner = LocalRunner(app, determinism_guard=False)
    original = runner.effect_store.begin

    def stalling_begin(key: str, expiration: int, *, now: int) -> Any:
        found = original(key, expiration, now=now)
        runner.clock.advance(LEASE + timedelta(seconds=10))
        return found

    runner.effect_store.begin = stalling_begin  # type: ignore[method-assign]
    run = runner.start("pay")
    runner.run_until_idle()
    assert calls == []
    assert runner.get_run(run.run_id).status != RunStatus.SUCCEEDED


def test_a_mark_answered_in_time_counts_as_the_look_and_costs_no_renewal() -> None:
    """GIVEN an at-most-once step started 4 s after the claim read the run (its view
    still fresh), whose RUNNING mark is answered 2 s later
    WHEN the body is about to start
    THEN the mark's own "no cancel" (2 s old) vouches for it: no lease renewal is written
    (lease_keeping-85ed6327: counted from the claim instead, 6 s, it would renew)."""
    bodies: list[str] = []
    runner, ledger, engine = build(charge_app(bodies, "at_most_once_per_attempt"))
    run = engine.start("pay")
    renewals: list[Any] = []
    real = ledger.update_run

    def update_run(run_id: str, guard: Any, changes: Any) -> Any:
        if changes.get("lease_until"):
            renewals.append(changes)
        return real(run_id, guard, changes)

    ledger.update_run = update_run  # type: ignore[method-assign]

    def after(seconds: int) -> Callable[[Any], None]:
        def hook(_: Any) -> None:
            runner.clock.advance(timedelta(seconds=seconds))

        return hook

    ledger.hooks["claim"] = after(4)
    ledger.hooks["running"] = after(2)
    engine.resume(run.run_id)
    assert bodies == ["charge"]
    assert renewals == []
