"""A warm worker does not reload the history it wrote itself (``CachingLedger``).

Each invocation claims its run and loads the run's whole partition: for a long run that
hands off to itself every few hundred steps, invocation k reads and decodes everything
the k-1 before it wrote. A Lambda container that serves the next invocation of the same
run already holds that history: the view it loaded, plus every record it wrote since.

The rule that says when the view may stand in for a load is ``view_still_true``: the
next claim of the run returns its item, and the view is complete when

* the claim's ``fence`` is the view's plus one: nobody claimed the run in between (every
  claim bumps the fence), so no other owner wrote a record the view lacks;
* the claim's ``inbox`` is the view's: no outside event (a callback, a signal, a cancel,
  an operator's decision) was recorded since the view was read, since every such write
  bumps the inbox in the same atomic write as its record. One write does not: a
  callback's heartbeat (``Ledger.extend_wait``) moves a wait's expiry on and wakes
  nobody. A view may hold the earlier expiry; the worker acting on it cannot end the
  wait early, because the ledger refuses a timeout of an expiry that moved on
  (``leases.step_replaceable``), and it parks the run until the stored one. And a
  child's report bumps the inbox in a write after its record's (``Ledger.finish_child``):
  a worker that dies between them leaves a view holding the record WAITING; the
  parent's look at the child settles it (``durable.engine.children.look_for_ends``),
  and the ledger's final record, the same outcome, is the one kept. A final record the
  worker reads itself (a distributed map's look at its open items) joins the view, since
  the worker may decide on it;
* ``created_at`` is the view's (an expired run's id was not reused by a keyed start),
  and the claim is not a takeover;
* the run's items cannot have expired: a declared lifetime's TTL has not passed
  (``items_may_be_gone``; a run woken that late is failed, its items going).

Anything else, or anything this wrapper could not follow (a write that raised, a write
refused because a final record was there, a run that ended), drops the view and the next
invocation loads as before. A zombie (an owner with an older fence) can still write a
result at a position the view lacks; that is the same race as one landing just after a
load, and the engine already settles it when it writes there (``step_replaceable``: the
first final record wins, the later writer adopts it).

The view's ``inbox`` is the count the worker saw *before* its load began (the claim's, or
a refused suspension's): only events counted there are certain to be in the load.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from durable.core.flow import GateState
from durable.core.ledger_forward import ForwardReads
from durable.core.lifetime import items_may_be_gone
from durable.core.model import RunHistory, RunRecord, SignalRecord, StepRecord, copy_step
from durable.core.ports import ChildReport, Claim, ConditionFailed, Ledger, RunGuard
from durable.core.retention import nothing_recorded_yet
from durable.core.sleeps import with_sleeps

# Views kept per container, and the records all of them may hold: a worker container
# runs one invocation at a time, so a few runs cover a hand-off chain and its wake-ups.
MAX_RUNS = 16
MAX_RECORDS = 50_000


@dataclass
class View:
    fence: int  # the claim this view's records are complete for
    inbox: int  # every outside event this count includes is in the view
    created_at: str
    steps: dict[str, StepRecord]
    signals: list[SignalRecord]
    run: RunRecord | None = None  # the claim's run item, once a claim confirmed the view


def view_still_true(view: View, claim: Claim, now: str) -> bool:
    """Whether ``view`` holds every record of the run at the moment of ``claim`` (made at
    ``now``)."""
    run = claim.run
    return (
        not claim.took_over
        and run.fence == view.fence + 1
        and run.inbox == view.inbox
        and run.created_at == view.created_at
        and not items_may_be_gone(run, now)
    )


def _copy_history(
    run: RunRecord, steps: Mapping[str, StepRecord], signals: list[SignalRecord]
) -> RunHistory:
    # The engine changes the records it holds (attempts, refs); the view must not follow.
    return RunHistory(
        run, {p: copy_step(s) for p, s in steps.items()}, [replace(s) for s in signals]
    )


class CachingLedger(ForwardReads, Ledger):
    """``ledger`` with each run's history kept between one container's invocations.

    ``check`` (tests and the simulation explorer) is called with the view and the run id
    whenever a view stands in for a load, to compare it with a real one.

    Every write of the port is written out (``durable.core.ledger_forward``): a view must
    follow each write of its run, so a write added to the port later must say here what
    it does to a view before mypy lets a ``CachingLedger`` be built.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        max_runs: int = MAX_RUNS,
        max_records: int = MAX_RECORDS,
        check: Callable[[str, RunHistory], None] | None = None,
    ) -> None:
        super().__init__(ledger)
        self._max_runs = max_runs
        self._max_records = max_records
        self._check = check
        self._views: OrderedDict[str, View] = OrderedDict()
        # run id -> (fence, inbox, created_at) of the newest run item seen before a load
        self._basis: dict[str, tuple[int, int, str]] = {}
        self._ready: set[str] = set()  # views a claim just confirmed: the next load uses them
        self.hits = 0
        self.loads = 0

    # --- the rule at a claim, and loads -------------------------------------------------

    def claim(
        self,
        run_id: str,
        owner: str,
        *,
        now: str,
        lease_until: str,
        stale_before: str,
        due_at: str | None = None,
    ) -> Claim | None:
        self._ready.discard(run_id)
        claim = self._ledger.claim(
            run_id,
            owner,
            now=now,
            lease_until=lease_until,
            stale_before=stale_before,
            due_at=due_at,
        )
        if claim is None:
            return None
        run = claim.run
        view = self._views.get(run_id)
        if view is not None and view_still_true(view, claim, now):
            view.fence, view.run = run.fence, run
            self._views.move_to_end(run_id)
            self._ready.add(run_id)
        elif nothing_recorded_yet(run):
            # The engine skips the load of a run's first claim (nothing can be there yet):
            # the view starts empty and follows this invocation's writes.
            self._keep(run_id, View(run.fence, run.inbox, run.created_at, {}, [], run))
        else:
            self._views.pop(run_id, None)
        self._set_basis(run)  # (a claim never returns an ended run: claim_kind refuses it)
        return claim

    def load(self, run_id: str) -> RunHistory | None:
        view = self._views.get(run_id)
        if run_id in self._ready and view is not None and view.run is not None:
            self._ready.discard(run_id)
            history = _copy_history(view.run, view.steps, view.signals)
            with_sleeps(history.run, history.steps)  # as a ledger's load presents them
            self.hits += 1
            if self._check is not None:
                self._check(run_id, history)
            return history
        self._ready.discard(run_id)
        basis = self._basis.pop(run_id, None)  # used once: a later load needs a later read
        loaded = self._ledger.load(run_id)
        self.loads += 1
        if loaded is None or basis is None or basis[2] != loaded.run.created_at:
            self._views.pop(run_id, None)
            return loaded
        fence, inbox, created_at = basis
        copy = _copy_history(loaded.run, loaded.steps, loaded.signals)
        self._keep(run_id, View(fence, inbox, created_at, copy.steps, copy.signals))
        return loaded

    def _keep(self, run_id: str, view: View) -> None:
        self._views[run_id] = view
        self._views.move_to_end(run_id)
        while len(self._views) > self._max_runs or (
            len(self._views) > 1
            and sum(len(v.steps) + len(v.signals) for v in self._views.values()) > self._max_records
        ):
            oldest, _ = self._views.popitem(last=False)
            self._ready.discard(oldest)

    def forget(self, run_id: str) -> None:
        self._views.pop(run_id, None)
        self._ready.discard(run_id)

    def _forget_if_ended(self, run: RunRecord) -> None:
        if run.terminal:
            self.forget(run.run_id)
            self._basis.pop(run.run_id, None)

    def _seen(self, run: RunRecord | None) -> None:
        """A run item read before a reload: its inbox becomes the next view's basis."""
        if run is not None:
            self._set_basis(run)

    def _set_basis(self, run: RunRecord) -> None:
        self._basis.pop(run.run_id, None)
        self._basis[run.run_id] = (run.fence, run.inbox, run.created_at)
        while len(self._basis) > self._max_runs:  # claims never followed by a load
            del self._basis[next(iter(self._basis))]

    # --- reads the view follows ------------------------------------------------------

    def get_step(self, run_id: str, position: str) -> StepRecord | None:
        found = self._ledger.get_step(run_id, position)
        if found is not None:
            self._settled(run_id, {position: found})
        return found

    def get_steps(self, run_id: str, positions: list[str]) -> dict[str, StepRecord]:
        found = self._ledger.get_steps(run_id, positions)
        self._settled(run_id, found)
        return found

    def _settled(self, run_id: str, read: Mapping[str, StepRecord]) -> None:
        """Final records read of a run this container holds a view of, into the view.

        A child's report settles its parent's record in one write and bumps the parent's
        inbox in the next; a worker that dies between them leaves the inbox where a view
        has it. A distributed map that read the settled record itself (its look at the
        open items) decides on it, so the view must hold it too: without it, the next
        invocation replays the decision over a WAITING record and reads the item as
        canceled. Only final records are taken: a final record is never replaced (the
        first final one wins; an operator's retry reopens records only of a run that
        ended, whose view is dropped when it ends), so it is true for as long as the view
        is, where an open one read now may already be older."""
        view = self._views.get(run_id)
        if view is None:
            return
        for position, rec in read.items():
            held = view.steps.get(position)
            if rec.status.final and (held is None or not held.status.final):
                view.steps[position] = copy_step(rec)

    # --- writes the view follows -----------------------------------------------------

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        try:
            run = self._ledger.update_run(run_id, guard, changes)
        except ConditionFailed as e:
            # A refused suspension: the engine reloads next, and every event this item
            # counts was committed before that load begins.
            self._seen(e.current)
            raise
        except BaseException:
            self.forget(run_id)
            raise
        self._forget_if_ended(run)
        return run

    def write_step(self, step: StepRecord, guard: RunGuard | None = None) -> StepRecord:
        try:
            stored = self._ledger.write_step(step, guard)
        except BaseException:
            self.forget(step.run_id)
            raise
        self._record(step.run_id, stored)
        return stored

    def write_step_fenced(
        self, step: StepRecord, guard: RunGuard, run_changes: Mapping[str, Any]
    ) -> bool:
        try:
            written = self._ledger.write_step_fenced(step, guard, run_changes)
        except BaseException:
            self.forget(step.run_id)
            raise
        if written:
            self._record(step.run_id, step)
        else:  # a final record is there that this view has not seen
            self.forget(step.run_id)
        return written

    def start_child(self, step: StepRecord, guard: RunGuard, child: RunRecord) -> StepRecord:
        # The parent's children count changes, not its fence or inbox: the view stands.
        try:
            stored = self._ledger.start_child(step, guard, child)
        except BaseException:
            self.forget(step.run_id)
            raise
        self._record(step.run_id, stored)
        return stored

    def start_children(
        self, steps: list[StepRecord], guard: RunGuard, children: list[RunRecord]
    ) -> bool:
        parent_id = steps[0].run_id if steps else ""
        try:
            written = self._ledger.start_children(steps, guard, children)
        except BaseException:
            self.forget(parent_id)
            raise
        if written:
            for step in steps:
                self._record(parent_id, step)
        return written

    def finish_child(
        self,
        run_id: str,
        guard: RunGuard,
        changes: Mapping[str, Any],
        report: ChildReport,
        *,
        now: str,
    ) -> tuple[RunRecord, bool]:
        self.forget(report.parent_id)  # its record changes under any view of it
        try:
            run, taken = self._ledger.finish_child(run_id, guard, changes, report, now=now)
        except BaseException:
            self.forget(run_id)
            raise
        self._forget_if_ended(run)
        return run, taken

    def consume_signal(self, step: StepRecord, signal: SignalRecord, guard: RunGuard) -> StepRecord:
        try:
            stored = self._ledger.consume_signal(step, signal, guard)
        except BaseException:
            self.forget(step.run_id)
            raise
        view = self._views.get(step.run_id)
        if stored is not step or view is None:
            self.forget(step.run_id)  # refused: the view's signals may be stale
            return stored
        self._record(step.run_id, stored)
        for i, held in enumerate(view.signals):
            if held.signal_id == signal.signal_id and held.name == signal.name:
                view.signals[i] = replace(held, consumed_by=step.position)
        return stored

    def _record(self, run_id: str, stored: StepRecord) -> None:
        view = self._views.get(run_id)
        if view is not None:
            view.steps[stored.position] = copy_step(stored)

    # --- writes that end or change a run beyond this worker's view --------------------

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
        self.forget(run_id)
        self._ledger.continue_run(run_id, guard, changes, successor)

    def operate(
        self,
        run_id: str,
        *,
        statuses: tuple[str, ...],
        changes: Mapping[str, Any],
        operation: Mapping[str, str] | None = None,
        bump_inbox: bool = False,
        unleased: bool = False,
        reopen: StepRecord | None = None,
    ) -> RunRecord:
        self.forget(run_id)
        return self._ledger.operate(
            run_id,
            statuses=statuses,
            changes=changes,
            operation=operation,
            bump_inbox=bump_inbox,
            unleased=unleased,
            reopen=reopen,
        )

    def complete_waiting(self, step: StepRecord, *, token_hash: str | None, now: str) -> None:
        self.forget(step.run_id)
        self._ledger.complete_waiting(step, token_hash=token_hash, now=now)

    def add_signal(self, signal: SignalRecord, *, now: str) -> None:
        self.forget(signal.run_id)
        self._ledger.add_signal(signal, now=now)

    def delete_run(self, run_id: str, *, created_at: str) -> bool:
        self.forget(run_id)
        return self._ledger.delete_run(run_id, created_at=created_at)

    def purge_leftovers(self, run_id: str, *, before: str, keep_expiring: bool = False) -> int:
        self.forget(run_id)
        return self._ledger.purge_leftovers(run_id, before=before, keep_expiring=keep_expiring)

    # --- writes no view needs to follow ------------------------------------------------

    def create_run(self, run: RunRecord) -> RunRecord:
        # A new run: its first claim starts its view (a reused id's old view fails that
        # claim's rule, its ``created_at`` being another).
        return self._ledger.create_run(run)

    def extend_wait(
        self,
        step: StepRecord,
        *,
        token_hash: str,
        now: str,
        waiting_for: tuple[str, str] | None = None,
    ) -> None:
        # A heartbeat: a view may keep the earlier expiry (the module's note says why).
        self._ledger.extend_wait(step, token_hash=token_hash, now=now, waiting_for=waiting_for)

    def write_gate(self, name: str, state: GateState) -> bool:
        # A flow-control gate is no run's record: never in a view.
        return self._ledger.write_gate(name, state)

    def claim_trigger(
        self, run_id: str, due_at: str, new_due_at: str, *, stale_before: str, skew: timedelta
    ) -> bool:
        # The sweeper's move of a due time: no record of a view, and a worker woken by it
        # claims before it loads.
        return self._ledger.claim_trigger(
            run_id, due_at, new_due_at, stale_before=stale_before, skew=skew
        )
