"""A ledger wrapper that sees every step record its worker writes and the run item's
changes, for observers that read what happened off the writes (the ``durable dev``
console, OpenTelemetry spans) instead of instrumenting the engine: the core stays free of
presentation and telemetry, and an observer reports only writes that took effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durable.core.model import RunRecord, StepRecord
from durable.core.ports import Ledger, RunGuard
from durable.core.sleeps import sleeps_recorded_by


class WatchedLedger:
    """``ledger``, with ``on_step`` called for each step record written as given (not
    for a write that adopted another worker's record, nor one refused); everything else
    passes through. Subclasses add the run-item methods they watch."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)

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
