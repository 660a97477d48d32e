"""Admission: a claimed run starts its workflow only when the workflow's limits let it
(``durable.core.flow`` holds the rules and says why no wake-up is lost).

Before a worker replays a run whose workflow has a rate limit, the run books its start
time once (``start_at``) and sleeps until then; with a concurrency limit it takes a slot
in its gate or joins the gate's line (``queued_at``) and gives its lease back. When the
run ends, ``leave`` frees its slot and wakes the waiters that now fit.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from durable.core.flow import (
    MAX_QUEUE,
    GateState,
    book,
    enter,
    gate_name,
    key_value,
    leave,
    stale_ahead,
)
from durable.core.model import TERMINAL_RUN_STATUSES, RunRecord, RunStatus, format_time, parse_time
from durable.core.ports import ConditionFailed, RunGuard
from durable.engine.endings import Outcome

if TYPE_CHECKING:
    from durable.core.callables import WorkflowDef
    from durable.core.config import EngineConfig
    from durable.engine.engine_parts import EngineParts

log = logging.getLogger("durable.admission")

ACTIVE = tuple(s.value for s in RunStatus if s.value not in TERMINAL_RUN_STATUSES)
START_TIMER = "start"  # the timer position of a run's booked start


MAX_RECHECK = timedelta(hours=1)


def recheck_after(queued_at: datetime, now: datetime, config: EngineConfig) -> timedelta:
    """When a waiter looks at its gate again on its own: ``slot_recheck`` at first, then
    as long as it has waited so far (up to an hour). A look is only the backstop for a
    wake-up lost with its worker, and a later ``leave`` wakes whoever fits anyway, so a
    long wait costs a handful of looks, not one per period."""
    return min(max(config.slot_recheck, now - queued_at), MAX_RECHECK)


class Admission:
    def __init__(self, engine: EngineParts) -> None:
        self.engine = engine
        self.ledger = engine.ledger
        self.clock = engine.clock
        self.config = engine.config

    def gate_for(self, wf: WorkflowDef, input_text: str) -> str | None:
        """The concurrency gate a new run of ``wf`` with this input takes a slot in. Its
        rate limit's key is read too: an input that lacks either key is ``InvalidInput``
        naming the field here, when the run is started, before anything is written (not
        a failure of the run when a worker admits it)."""
        if wf.concurrency is None and wf.rate_limit is None:
            return None
        value = json.loads(input_text) if input_text else None
        if wf.rate_limit is not None:
            key_value(wf.rate_limit.key, value, wf.name)
        if wf.concurrency is None:
            return None
        return gate_name("C", wf.name, key_value(wf.concurrency.key, value, wf.name))

    # --- before the replay -------------------------------------------------------------

    def admit(
        self, wf: WorkflowDef, run: RunRecord, owner: str, inbox: int
    ) -> tuple[Outcome | None, RunRecord]:
        """(None, the run item to replay from) when ``run`` may go on; else the outcome of
        an invocation that made it wait (its lease given back). ``inbox``: the events the
        worker has seen, which guards the waiting write exactly as it guards a suspension.

        The run item handed back may be newer than ``run``: one read after a wait was
        cut short by an event. When that event was a cancel, the replay must start from
        that read, or it would not see the cancel and would run a body without a slot."""
        if run.cancel_requested:
            return None, run  # the replay cancels it at its first durable call
        if wf.rate_limit is not None:
            waiting, run = self._booked(wf, run, owner, inbox)
            if waiting is not None or run.cancel_requested:
                return waiting, run
        limit = self.limit_of(wf, run)
        if limit is None or run.gate is None:
            return None, run
        return self._slot(limit, run, owner, inbox)

    @staticmethod
    def limit_of(wf: WorkflowDef | None, run: RunRecord) -> int | None:
        """The slots of the gate ``run`` entered: one for a buffer_one schedule's gate,
        else its workflow's concurrency limit (None: no limit known here)."""
        if run.gate is not None and run.gate.startswith("S#"):
            return 1
        if wf is None or wf.concurrency is None:
            return None
        return wf.concurrency.limit

    def _booked(
        self, wf: WorkflowDef, run: RunRecord, owner: str, inbox: int
    ) -> tuple[Outcome | None, RunRecord]:
        """Book the run's start once; wait until the booked time (a timer) if it is ahead."""
        assert wf.rate_limit is not None
        now = self.clock.now()
        start_at = run.start_at
        guard = RunGuard(fence=run.fence, owner=owner)
        if start_at is None:
            limit = wf.rate_limit
            value = json.loads(run.input) if run.input else None
            name = gate_name("R", wf.name, key_value(limit.key, value, wf.name))
            while True:
                state = self.ledger.read_gate(name)
                new, at = book(state, now, limit.limit, limit.period)
                if self.ledger.write_gate(name, new):
                    break
            start_at = format_time(at)
            try:
                run = self.ledger.update_run(run.run_id, guard, {"start_at": start_at})
            except ConditionFailed:
                return Outcome(run.run_id, "lease_lost"), run
        if parse_time(start_at) <= now:
            return None, run
        while True:  # an event meanwhile changes nothing: sleep on with the new inbox
            guard = RunGuard(fence=run.fence, owner=owner, inbox=inbox)
            waited = self._wait(run, guard, {"due_at": start_at}, timer=parse_time(start_at))
            if waited is not None:
                return waited, run
            current = self.ledger.get_run(run.run_id)
            if current is None:
                return Outcome(run.run_id, "lease_lost"), run
            if current.cancel_requested:  # cancel wins: the replay ends it now
                return None, current
            run, inbox = current, current.inbox

    def _slot(
        self, limit: int, run: RunRecord, owner: str, inbox: int
    ) -> tuple[Outcome | None, RunRecord]:
        assert run.gate is not None
        while True:
            state = self.ledger.read_gate(run.gate)
            if run.run_id in state.queue and not enter(state, run.run_id, limit)[1]:
                state = self._free_stale(run.gate, state, run.run_id, limit)
            if run.run_id not in state.queue and len(state.queue) >= MAX_QUEUE:
                # The line is as long as one item holds: come back later, not in line.
                return self._wait(
                    run,
                    RunGuard(fence=run.fence, owner=owner, inbox=inbox),
                    {"due_at": format_time(self.clock.now() + self.config.slot_recheck)},
                ), run
            new, holds = enter(state, run.run_id, limit)
            if new is not None and not self.ledger.write_gate(run.gate, new):
                continue
            guard = RunGuard(fence=run.fence, owner=owner, inbox=inbox)
            if holds:
                if run.queued_at is None:
                    return None, run
                try:
                    run = self.ledger.update_run(
                        run.run_id, RunGuard(fence=run.fence, owner=owner), {"queued_at": None}
                    )
                except ConditionFailed:
                    return Outcome(run.run_id, "lease_lost"), run
                return None, run
            now = self.clock.now()
            queued_at = run.queued_at or format_time(now)
            changes = {
                "queued_at": queued_at,
                "due_at": format_time(now + recheck_after(parse_time(queued_at), now, self.config)),
            }
            waited = self._wait(run, guard, changes)
            if waited is not None:
                return waited, run
            # A waker bumped the inbox while we were deciding: look at the gate again.
            current = self.ledger.get_run(run.run_id)
            if current is None:
                return Outcome(run.run_id, "lease_lost"), run
            if current.cancel_requested:  # cancel wins: the replay ends it now
                return None, current
            run, inbox = current, current.inbox

    def _wait(
        self,
        run: RunRecord,
        guard: RunGuard,
        changes: dict[str, Any],
        timer: datetime | None = None,
    ) -> Outcome | None:
        """Give the lease back with ``changes``; None when an event arrived meanwhile
        (the caller decides again), lease_lost when the run is not ours any more."""
        now = self.clock.now()
        all_changes = {
            **changes,
            # Not started (the claim made it RUNNING): a listing shows it waits to start.
            "status": RunStatus.PENDING.value,
            "lease_owner": None,
            "lease_until": None,
            "updated_at": format_time(now),
        }
        try:
            self.ledger.update_run(run.run_id, guard, all_changes)
        except ConditionFailed as e:
            current = e.current
            if (
                current is not None
                and guard.inbox is not None
                and current.fence == guard.fence
                and current.lease_owner == guard.owner
                and current.inbox != guard.inbox
            ):
                return None
            return Outcome(run.run_id, "lease_lost")
        if timer is not None:
            self.engine.arm_timer(run.run_id, START_TIMER, timer)
        return Outcome(run.run_id, "suspended", RunStatus.PENDING.value)

    def _free_stale(self, name: str, state: GateState, run_id: str, limit: int) -> GateState:
        """A waiter kept out: take out of the gate the runs ahead of it that ended without
        leaving (a worker died between its final write and ``leave``): waiters at the
        head of the line and, once it is first, holders (``stale_ahead``)."""

        def active(other: str) -> bool:
            held = self.ledger.get_run(other)
            return held is not None and not held.terminal and held.gate == name

        stale = stale_ahead(state, run_id, limit, active)
        if not stale:
            return state
        new, _ = leave(state, stale, limit)
        if new is not None and self.ledger.write_gate(name, new):
            freed = [r for r in stale if r in state.holders]
            dropped = [r for r in stale if r not in state.holders]
            if dropped:
                log.warning("gate %s: took ended runs %s out of its line", name, ", ".join(dropped))
            if freed:
                log.warning("gate %s: freed the slots of ended runs %s", name, ", ".join(freed))
        return self.ledger.read_gate(name)

    # --- after the end -----------------------------------------------------------------

    def leave(self, run: RunRecord, limit: int | None) -> None:
        """Free ``run``'s slot (or its place in line) and wake the waiters that now fit.
        Best effort after the final write: a failure leaves a slot (or a place at the
        head of the line) that a waiter behind it frees on its next look (``_free_stale``).

        The run is read after the gate: an operator's retry may have reopened it since
        it ended (the retry left the gate first, so the reopened run entered again with
        a write of its own). A reopened run's slot is its own; and the gate write is
        conditional on the version read, so a re-entry between the two reads makes it
        fail and look again."""
        if run.gate is None:
            return
        try:
            while True:
                state = self.ledger.read_gate(run.gate)
                current = self.ledger.get_run(run.run_id)
                if current is not None and not current.terminal:
                    return  # reopened since it ended
                new, wake = leave(state, (run.run_id,), limit or len(state.holders))
                if new is None or self.ledger.write_gate(run.gate, new):
                    break
            for run_id in wake:
                self.wake(run_id)
        except Exception:
            log.warning("run %s could not leave gate %s", run.run_id, run.gate, exc_info=True)

    def wake(self, run_id: str) -> None:
        """Tell a waiter a slot may be free: an outside event (its inbox is bumped), due
        now, and a worker invoked."""
        now = format_time(self.clock.now())
        try:
            self.ledger.operate(run_id, statuses=ACTIVE, changes={"due_at": now}, bump_inbox=True)
        except ConditionFailed:
            return  # it ended meanwhile
        self.engine.invoke_worker(run_id, "slot")
