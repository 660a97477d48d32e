"""A ledger wrapper that sees every step record its worker writes and the run item's
changes, for observers that read what happened off the writes (the ``durable dev``
console, OpenTelemetry spans) instead of instrumenting the engine: the core stays free of
presentation and telemetry, and an observer reports only writes that took effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from durable.core.flow import GateState
from durable.core.ledger_forward import ForwardReads
from durable.core.model import RunRecord, SignalRecord, StepRecord
from durable.core.ports import ChildReport, Claim, Ledger, RunGuard
from durable.core.sleeps import sleeps_recorded_by


class WatchedLedger(ForwardReads, Ledger):
    """``ledger``, with ``on_step`` called for each step record written as given (not
    for a write that adopted another worker's record, nor one refused); everything else
    passes through. Subclasses add the run-item methods they watch.

    Every write of the port is written out here (``durable.core.ledger_forward``), so a
    write added to the port later is not passed on unseen: it is decided here whether
    it reports a step record or a run's change to the observers."""

    def on_step(self, step: StepRecord) -> None:
        """A step record this worker wrote took effect."""

    def on_run(self, run: RunRecord, changes: Mapping[str, Any]) -> None:
        """A change of the run item by this worker took effect (``run``: the item after)."""

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        run = self._ledger.update_run(run_id, guard, changes)
        if changes.get("sleeps"):
            # A sleep recorded with the suspension (``durable.core.sleeps``) is a step
            # record written, as one in a step item is.
            for step in sleeps_recorded_by(run, guard.fence):
                self.on_step(step)
        self.on_run(run, changes)
        return run

    def write_step(self, step: StepRecord, guard: RunGuard | None = None) -> StepRecord:
        stored = self._ledger.write_step(step, guard)
        if stored is step:  # ours won; a loser's adoption is not news
            self.on_step(step)
        return stored

    def write_step_fenced(
        self, step: StepRecord, guard: RunGuard, run_changes: Mapping[str, Any]
    ) -> bool:
        written = self._ledger.write_step_fenced(step, guard, run_changes)
        if written:
            self.on_step(step)
        return written

    # --- writes passed on as they are: the subclasses watch those they report ----------

    def create_run(self, run: RunRecord) -> RunRecord:
        return self._ledger.create_run(run)

    def delete_run(self, run_id: str, *, created_at: str) -> bool:
        return self._ledger.delete_run(run_id, created_at=created_at)

    def purge_leftovers(self, run_id: str, *, before: str, keep_expiring: bool = False) -> int:
        return self._ledger.purge_leftovers(run_id, before=before, keep_expiring=keep_expiring)

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
        return self._ledger.claim(
            run_id,
            owner,
            now=now,
            lease_until=lease_until,
            stale_before=stale_before,
            due_at=due_at,
        )

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
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
        return self._ledger.operate(
            run_id,
            statuses=statuses,
            changes=changes,
            operation=operation,
            bump_inbox=bump_inbox,
            unleased=unleased,
            reopen=reopen,
        )

    def start_child(self, step: StepRecord, guard: RunGuard, child: RunRecord) -> StepRecord:
        return self._ledger.start_child(step, guard, child)

    def start_children(
        self, steps: list[StepRecord], guard: RunGuard, children: list[RunRecord]
    ) -> bool:
        return self._ledger.start_children(steps, guard, children)

    def finish_child(
        self,
        run_id: str,
        guard: RunGuard,
        changes: Mapping[str, Any],
        report: ChildReport,
        *,
        now: str,
    ) -> tuple[RunRecord, bool]:
        return self._ledger.finish_child(run_id, guard, changes, report, now=now)

    def write_gate(self, name: str, state: GateState) -> bool:
        return self._ledger.write_gate(name, state)

    def complete_waiting(self, step: StepRecord, *, token_hash: str | None, now: str) -> None:
        self._ledger.complete_waiting(step, token_hash=token_hash, now=now)

    def extend_wait(
        self,
        step: StepRecord,
        *,
        token_hash: str,
        now: str,
        waiting_for: tuple[str, str] | None = None,
    ) -> None:
        self._ledger.extend_wait(step, token_hash=token_hash, now=now, waiting_for=waiting_for)

    def add_signal(self, signal: SignalRecord, *, now: str) -> None:
        self._ledger.add_signal(signal, now=now)

    def consume_signal(self, step: StepRecord, signal: SignalRecord, guard: RunGuard) -> StepRecord:
        return self._ledger.consume_signal(step, signal, guard)

    def claim_trigger(
        self, run_id: str, due_at: str, new_due_at: str, *, stale_before: str, skew: timedelta
    ) -> bool:
        return self._ledger.claim_trigger(
            run_id, due_at, new_due_at, stale_before=stale_before, skew=skew
        )
