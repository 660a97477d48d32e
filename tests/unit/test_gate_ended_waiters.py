"""A run that ended while it waited in a gate's line, and whose worker died before it left
the gate, must not keep the runs behind it out forever (``durable.core.flow.stale_ahead``,
``durable.engine.admission``).

The explorer's seed 697 found it on a ``buffer_one`` schedule: the fire waiting for the
schedule's one slot was canceled while its worker was writing "I wait"; the worker saw
the cancel, ended the run CANCELED, and was stopped at its deadline before it left the
gate. The holder then ended and left, waking the canceled run (which could not come);
the next fire joined the line behind it, found the slot free but not its turn, and
looked again every recheck, forever: only holders were checked for having ended, and
only by the first in line.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durable import App, Concurrency, Context
from durable.core.flow import GateState, stale_ahead
from durable.core.model import RunRecord, RunStatus
from durable.testing import LocalRunner, SimulatedCrash

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
GATE = "S#sync#sync-hr"


def _app() -> App:
    app = App()

    @app.workflow(name="sync")
    def sync(ctx: Context, source: str) -> str:
        ctx.wait_for_signal("done")
        return source

    @app.workflow(name="one-at-a-time", concurrency=Concurrency(1))
    def one(ctx: Context, n: int) -> int:
        ctx.wait_for_signal("done")
        return n

    @app.workflow(name="paged")
    def paged(ctx: Context, page: int) -> int:
        ctx.wait_for_signal("next" if page == 0 else "done")
        if page == 0:
            ctx.continue_as_new(1)
        return page

    app.schedule("sync", "rate(1 hour)", name="sync-hr", input="hr", overlap="buffer_one")
    app.schedule("paged", "rate(1 hour)", name="paged-hr", input=0, overlap="buffer_one")
    return app


def _runner() -> LocalRunner:
    r = LocalRunner(_app())
    r.clock.set(T0)
    return r


def _fire(r: LocalRunner, hours: int, name: str = "sync-hr") -> str:
    fired = r.fire_schedule(name, T0 + timedelta(hours=hours))
    assert fired.result == "started" and fired.run_id is not None
    return fired.run_id


def _cancel_dying_before_leaving(r: LocalRunner, run_id: str) -> None:
    """Cancel the waiting run; whoever ends it dies right after the final write, before
    it reads the gate to leave it (the seed's worker stopped at its deadline there)."""
    r.crash_at("ledger.read_gate", call=r.call_count("ledger.read_gate") + 1)
    with pytest.raises(SimulatedCrash):
        r.cancel(run_id, "not this one")
    assert r.get_run(run_id).status == RunStatus.CANCELED


def test_a_canceled_waiter_that_never_left_does_not_hold_the_next_fire_forever(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Seed 697's interleaving, made deterministic."""
    r = _runner()
    holder = _fire(r, 0)
    waiter = _fire(r, 1)
    assert r.memory_ledger.read_gate(GATE) == GateState((holder,), (waiter,), (), 2)
    _cancel_dying_before_leaving(r, waiter)
    assert r.memory_ledger.read_gate(GATE).queue == (waiter,)  # left behind, ended
    r.advance(hours=1)
    behind = _fire(r, 2)  # the canceled run is not "the buffered fire": this one starts
    assert r.memory_ledger.read_gate(GATE).queue == (waiter, behind)
    r.signal(holder, "done")  # the holder ends and leaves: it wakes the ended waiter only
    r.run_until_idle()
    assert r.get_run(holder).status == RunStatus.SUCCEEDED
    assert r.memory_ledger.read_gate(GATE).holders == ()
    with caplog.at_level(logging.WARNING, logger="durable.admission"):
        r.advance(minutes=10)  # the next fire's own look (its recheck) comes
    now = r.get_run(behind)
    assert now.status == RunStatus.WAITING and now.queued_at is None  # it has the slot
    gate = r.memory_ledger.read_gate(GATE)
    assert (gate.holders, gate.queue) == ((behind,), ())
    assert any(f"took ended runs {waiter} out of its line" in m for m in caplog.messages)
    r.signal(behind, "done")
    r.run_until_idle()
    assert r.get_run(behind).status == RunStatus.SUCCEEDED


def test_an_ended_holder_behind_an_ended_head_of_line_is_freed_too() -> None:
    """Both leaves lost: the holder's worker died after its final write as well. The run
    behind the ended head of the line becomes first in line, so it checks the holders."""
    r = LocalRunner(_app())
    ids = [r.start("one-at-a-time", n).run_id for n in range(3)]
    r.run_until_idle()
    gate = "C#one-at-a-time#"
    assert r.memory_ledger.read_gate(gate).holders == (ids[0],)
    _cancel_dying_before_leaving(r, ids[1])
    r.crash_at("ledger.write_gate", call=r.call_count("ledger.write_gate") + 1)
    r.signal(ids[0], "done")  # its worker dies after the final write, leaving
    r.run_until_idle()
    assert r.get_run(ids[0]).status == RunStatus.SUCCEEDED
    assert r.memory_ledger.read_gate(gate) == GateState((ids[0],), (ids[1], ids[2]), (), 3)
    r.advance(minutes=10)
    assert r.get_run(ids[2]).status == RunStatus.WAITING
    state = r.memory_ledger.read_gate(gate)
    assert (state.holders, state.queue) == ((ids[2],), ())


def test_a_successor_canceled_before_it_is_handed_the_slot_gives_it_up_at_once() -> None:
    """The cancel of a continue-as-new successor lands between its creation and the
    hand-over of the schedule's slot: the cancel ends it (nobody holds it) and leaves a
    gate it is not in yet; the hand-over then gives it the slot. The buffered fire gets
    the slot in that same invocation, not at its next look."""
    r = _runner()
    gate = "S#paged#paged-hr"
    first = _fire(r, 0, "paged-hr")
    buffered = _fire(r, 1, "paged-hr")
    assert r.memory_ledger.read_gate(gate) == GateState((first,), (buffered,), (), 2)
    ledger = r.memory_ledger
    real = ledger.continue_run
    successors: list[str] = []

    def continue_run(run_id: str, guard: Any, changes: Any, successor: RunRecord) -> Any:
        done = real(run_id, guard, changes, successor)
        successors.append(successor.run_id)
        r.cancel(successor.run_id, "not the next page")
        return done

    ledger.continue_run = continue_run  # type: ignore[method-assign]
    r.signal(first, "next")
    r.run_until_idle()  # no clock moves: no waiter's recheck comes
    assert successors and r.get_run(successors[0]).status == RunStatus.CANCELED
    assert r.get_run(buffered).status == RunStatus.WAITING
    state = r.memory_ledger.read_gate(gate)
    assert (state.holders, state.queue) == ((buffered,), ())


def test_the_look_ahead_stops_at_the_first_run_still_waiting() -> None:
    """The rule: ended waiters from the head of the line; the first active one stops the
    look (it looks further itself); holders only when nobody active is ahead and every
    slot is taken; nothing for a run not in line."""
    ended = {"d1", "d2", "h1"}
    reads: list[str] = []

    def active(run_id: str) -> bool:
        reads.append(run_id)
        return run_id not in ended

    line = GateState(holders=("h1", "h2"), queue=("d1", "d2", "me", "after"))
    assert stale_ahead(line, "me", 2, active) == ("d1", "d2", "h1")
    assert reads == ["d1", "d2", "h1", "h2"]
    reads.clear()
    assert stale_ahead(line, "me", 3, active) == ("d1", "d2")  # a free slot: holders stay
    assert reads == ["d1", "d2"]
    reads.clear()
    live_head = GateState(holders=("h1",), queue=("w", "d1", "me"))
    assert stale_ahead(live_head, "me", 1, active) == ()
    assert reads == ["w"]  # one read: the head is active, and it looks further itself
    reads.clear()
    assert stale_ahead(GateState(("h1",), ("me",)), "me", 1, active) == ("h1",)
    assert stale_ahead(line, "newcomer", 2, active) == ()
    assert stale_ahead(line, "after", 2, lambda r: r != "d1") == ("d1",)
