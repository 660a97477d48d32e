"""Pins for ``durable.engine.admission``: what a claimed run's worker does at the gate when a
write fails under it (the lease lost, an event arriving meanwhile, the run gone), the
outcome it reports, the booked start's timer, a limit removed by a deploy, and the
backstop that frees a dead worker's slot. Each kills mutants the broader tests let by."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Concurrency, Context, RateLimit
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger, MemoryTimers
from durable.core.clock import FakeClock
from durable.core.config import EngineConfig
from durable.core.model import RunRecord, RunStatus, format_time, parse_time
from durable.core.ports import ConditionFailed, RunGuard
from durable.engine.engine import Engine, Outcome
from durable.engine.events import send_signal

pytestmark = pytest.mark.unit

Hook = Callable[[str, Mapping[str, Any]], None]


class HookedLedger(MemoryLedger):
    """A memory ledger that calls ``before`` ahead of each ``update_run``."""

    before: Hook | None = None

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        if self.before is not None:
            self.before(run_id, changes)
        return super().update_run(run_id, guard, changes)


def _app(*, limited: bool = True) -> App:
    app = App()

    @app.step
    def note(text: str) -> str:
        return text

    @app.workflow(name="sync", concurrency=Concurrency(1) if limited else None)
    def sync(ctx: Context, n: int) -> str:
        ctx.wait_for_signal("done")
        return note(str(n))

    @app.workflow(name="mail", rate_limit=RateLimit(1, timedelta(minutes=1), key="account"))
    def mail(ctx: Context, job: dict[str, str]) -> str:
        return note(job["account"])

    @app.workflow(name="both", concurrency=1, rate_limit=RateLimit(1, timedelta(minutes=1)))
    def both(ctx: Context, n: int) -> str:
        ctx.wait_for_signal("done")
        return note(str(n))

    return app


class World:
    def __init__(self, app: App | None = None, ledger: HookedLedger | None = None) -> None:
        self.clock = FakeClock()
        self.ledger = ledger or HookedLedger()
        self.timers = MemoryTimers()
        self.invoker = MemoryInvoker()
        self.engine = Engine(
            app or _app(),
            self.ledger,
            self.invoker,
            MemoryEffectStore(),
            clock=self.clock,
            config=EngineConfig(inprocess_wait_threshold=timedelta(0)),
            timers=self.timers,
        )

    def drain(self) -> list[Outcome]:
        out = []
        while (item := self.invoker.pop()) is not None:
            out.append(self.engine.resume(item.run_id, reason=item.reason))
        return out

    def run(self, run_id: str) -> RunRecord:
        found = self.ledger.get_run(run_id)
        assert found is not None
        return found


def test_a_run_waiting_in_line_reports_a_suspension_and_its_line() -> None:
    w = World()
    first = w.engine.start("sync", 1).run_id
    second = w.engine.start("sync", 2).run_id
    outcomes = {o.run_id: o for o in w.drain()}
    assert outcomes[second] == Outcome(second, "suspended", "PENDING")
    queued = w.run(second)
    assert queued.queued_at == format_time(w.clock.now()) and queued.lease_owner is None
    assert w.ledger.read_gate("C#sync#").holders == (first,)


def test_a_booked_start_sleeps_on_a_timer_and_takes_no_slot_meanwhile() -> None:
    w = World()
    first = w.engine.start("both", 1).run_id
    second = w.engine.start("both", 2).run_id
    outcomes = {o.run_id: o for o in w.drain()}
    assert outcomes[second] == Outcome(second, "suspended", "PENDING")
    booked = w.run(second).start_at
    assert booked is not None
    assert parse_time(booked) == w.clock.now() + timedelta(minutes=1)
    assert w.timers.armed[f"{second}-start"] == (second, parse_time(booked))
    assert w.ledger.read_gate("C#both#").holders == (first,)  # not in line yet either
    assert w.ledger.read_gate("C#both#").queue == ()
    assert len(w.ledger.read_gate("R#both#").booked) == 1


def test_a_rate_per_key_reads_the_key_from_the_stored_input() -> None:
    w = World()
    a = w.engine.start("mail", {"account": "a"}).run_id
    b = w.engine.start("mail", {"account": "b"}).run_id
    w.drain()
    assert w.run(a).status == w.run(b).status == RunStatus.SUCCEEDED  # separate gates
    assert w.ledger.read_gate("R#mail#a").booked and w.ledger.read_gate("R#mail#b").booked


def test_a_lease_lost_while_booking_or_leaving_the_line_is_reported() -> None:
    ledger = HookedLedger()
    w = World(ledger=ledger)
    run_id = w.engine.start("mail", {"account": "a"}).run_id

    def steal(rid: str, changes: Mapping[str, Any]) -> None:
        if "start_at" in changes:
            raise ConditionFailed(None)

    ledger.before = steal
    assert w.drain() == [Outcome(run_id, "lease_lost")]

    w2 = World(ledger=HookedLedger())
    first = w2.engine.start("sync", 1).run_id
    second = w2.engine.start("sync", 2).run_id
    w2.drain()

    def refuse_clear(rid: str, changes: Mapping[str, Any]) -> None:
        if changes.get("queued_at", "set") is None:
            raise ConditionFailed(None)

    w2.ledger.before = refuse_clear
    send_signal(w2.engine, first, "done")
    outcomes = {o.run_id: o for o in w2.drain()}
    assert outcomes[second] == Outcome(second, "lease_lost")


@pytest.mark.parametrize("workflow", ["sync", "both"])
def test_an_event_while_a_run_goes_to_wait_makes_it_look_again(workflow: str) -> None:
    """A signal (not a wake-up) lands between the decision to wait and the write: the
    write is refused over the inbox, the run reads itself again and waits all the same."""
    ledger = HookedLedger()
    w = World(ledger=ledger)
    first = w.engine.start(workflow, 1).run_id
    w.drain()
    if workflow == "both":
        send_signal(w.engine, first, "done")
        w.drain()
    second = w.engine.start(workflow, 2).run_id
    sent: list[str] = []

    def nudge(rid: str, changes: Mapping[str, Any]) -> None:
        if rid == second and changes.get("lease_owner", "x") is None and not sent:
            sent.append(rid)
            send_signal(w.engine, second, "other")

    ledger.before = nudge
    outcomes = w.drain()  # its own invocation, then the one the signal asked for
    assert sent and outcomes[0] == Outcome(second, "suspended", "PENDING")
    assert w.run(second).lease_owner is None


def test_a_worker_that_lost_the_lease_while_going_to_wait_stops_there() -> None:
    ledger = HookedLedger()
    w = World(ledger=ledger)
    w.engine.start("sync", 1)
    w.drain()
    second = w.engine.start("sync", 2).run_id

    def take_over(rid: str, changes: Mapping[str, Any]) -> None:
        if rid == second and changes.get("lease_owner", "x") is None:
            with ledger._lock:
                ledger._runs[rid].fence += 1  # another worker claimed it meanwhile

    ledger.before = take_over
    assert w.drain() == [Outcome(second, "lease_lost")]


def test_a_limit_removed_by_a_deploy_lets_a_gated_run_through_and_it_still_leaves() -> None:
    ledger = HookedLedger()
    old = World(ledger=ledger)
    first = old.engine.start("sync", 1).run_id
    second = old.engine.start("sync", 2).run_id
    old.drain()
    new = World(app=_app(limited=False), ledger=ledger)
    new.invoker.invoke(second, "retry")
    (outcome,) = new.drain()
    assert outcome.result == "suspended" and new.run(second).status == RunStatus.WAITING
    send_signal(new.engine, first, "done")
    new.drain()
    assert new.run(first).status == RunStatus.SUCCEEDED
    assert first not in ledger.read_gate("C#sync#").holders


def test_a_run_of_a_workflow_gone_from_the_code_still_frees_its_slot_when_canceled() -> None:
    ledger = HookedLedger()
    old = World(ledger=ledger)
    first = old.engine.start("sync", 1).run_id
    old.drain()
    gone = World(app=App(), ledger=ledger)
    gone.engine.cancel(first, "retired", requested_by="ops")
    assert gone.run(first).status == RunStatus.CANCELED
    assert ledger.read_gate("C#sync#").holders == ()


def test_the_first_in_line_with_every_holder_alive_just_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = World()
    first = w.engine.start("sync", 1).run_id
    second = w.engine.start("sync", 2).run_id
    w.drain()
    w.clock.advance(timedelta(minutes=5))
    w.invoker.invoke(second, "timer")
    assert w.drain() == [Outcome(second, "suspended", "PENDING")]
    assert w.ledger.read_gate("C#sync#").holders == (first,)
    # a holder that ended without leaving is freed by the first in line, and said so
    with w.ledger._lock:
        w.ledger._runs[first].status = RunStatus.SUCCEEDED
    w.clock.advance(timedelta(minutes=5))
    w.invoker.invoke(second, "timer")
    with caplog.at_level(logging.WARNING, logger="durable.admission"):
        w.drain()
    assert w.run(second).status == RunStatus.WAITING
    assert any(
        r.name == "durable.admission" and f"freed the slots of ended runs {first}" in r.message
        for r in caplog.records
    )


@pytest.mark.parametrize("workflow", ["sync", "both"])
def test_a_cancel_while_a_run_goes_to_wait_ends_it_in_that_invocation(workflow: str) -> None:
    """Cancel wins: a cancel that lands while the worker writes "I wait" (for a slot, or
    for its booked start) refuses that write over the inbox, and the worker ends the run
    instead of leaving it asleep until its turn."""
    ledger = HookedLedger()
    w = World(ledger=ledger)
    first = w.engine.start(workflow, 1).run_id
    w.drain()
    if workflow == "both":
        send_signal(w.engine, first, "done")
        w.drain()
    second = w.engine.start(workflow, 2).run_id
    sent: list[str] = []

    def cancel(rid: str, changes: Mapping[str, Any]) -> None:
        if rid == second and changes.get("lease_owner", "x") is None and not sent:
            sent.append(rid)
            w.engine.cancel(second, "not needed", requested_by="ops")

    ledger.before = cancel
    outcomes = w.drain()
    assert sent and outcomes[0] == Outcome(second, "canceled", "CANCELED")
    assert second not in ledger.read_gate(f"C#{workflow}#").queue


def test_a_wake_up_is_an_outside_event_and_a_named_invocation() -> None:
    """The wake bumps the waiter's inbox (so a waiter suspending at that moment looks
    again, even if the invocation is lost) and asks for a worker with reason "slot"."""
    w = World()
    first = w.engine.start("sync", 1).run_id
    second = w.engine.start("sync", 2).run_id
    w.drain()
    inbox = w.run(second).inbox
    w.engine.admission.wake(second)
    assert w.run(second).inbox == inbox + 1
    assert w.run(second).due_at == format_time(w.clock.now())
    item = w.invoker.pop()
    assert item is not None and (item.run_id, item.reason) == (second, "slot")
    assert first != second


def test_a_run_that_cannot_leave_its_gate_says_so(caplog: pytest.LogCaptureFixture) -> None:
    ledger = HookedLedger()
    w = World(ledger=ledger)
    first = w.engine.start("sync", 1).run_id
    w.drain()

    def broken(name: str, state: Any) -> bool:
        raise RuntimeError("storage down")

    ledger.write_gate = broken  # type: ignore[method-assign]
    send_signal(w.engine, first, "done")
    with caplog.at_level(logging.WARNING, logger="durable.admission"):
        w.drain()
    assert w.run(first).status == RunStatus.SUCCEEDED  # the run's end stands
    assert any(f"run {first} could not leave gate C#sync#" in r.message for r in caplog.records)
