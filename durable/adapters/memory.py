"""In-memory ports with the same semantics as the DynamoDB ones (held to it by the contract
suite). Used by ``durable.testing.LocalRunner``, fast unit tests and benchmarks."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from durable.leases import apply_changes, claim_kind, claimed, guard_holds
from durable.limits import check_item_size
from durable.model import RunHistory, RunRecord, SignalRecord, StepRecord
from durable.ports import (
    Claim,
    ConditionFailed,
    EffectRecord,
    Page,
    RunExists,
    RunGuard,
)


def copy_run(run: RunRecord) -> RunRecord:
    return replace(run, error=replace(run.error) if run.error else None)


def copy_step(step: StepRecord) -> StepRecord:
    return replace(
        step,
        attempts=[replace(a) for a in step.attempts],
        refs=[dict(r) for r in step.refs],
        checkpoint=dict(step.checkpoint) if step.checkpoint is not None else None,
        detail=dict(step.detail) if step.detail is not None else None,
    )


class MemoryLedger:
    """A ledger in a dict, atomic under one lock."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._runs: dict[str, RunRecord] = {}
        self._steps: dict[str, dict[str, StepRecord]] = {}
        self._signals: dict[str, list[SignalRecord]] = {}

    def create_run(self, run: RunRecord) -> RunRecord:
        check_item_size(run, f"the input of run {run.run_id}")
        with self._lock:
            existing = self._runs.get(run.run_id)
            if existing is not None:
                raise RunExists(copy_run(existing))
            self._runs[run.run_id] = copy_run(run)
            self._steps.setdefault(run.run_id, {})
            self._signals.setdefault(run.run_id, [])
            return copy_run(run)

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._lock:
            run = self._runs.get(run_id)
            return copy_run(run) if run else None

    def load(self, run_id: str) -> RunHistory | None:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return None
            steps = {p: copy_step(s) for p, s in self._steps[run_id].items()}
            signals = [replace(s) for s in self._signals[run_id]]
            return RunHistory(copy_run(run), steps, signals)

    def claim(
        self, run_id: str, owner: str, *, now: str, lease_until: str, stale_before: str
    ) -> Claim | None:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return None
            kind = claim_kind(run, owner, stale_before)
            if kind is None:
                return None
            new = claimed(run, owner, now, lease_until, kind)
            self._runs[run_id] = new
            return Claim(copy_run(new), kind == "takeover")

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or not guard_holds(run, guard):
                raise ConditionFailed(copy_run(run) if run else None)
            new = apply_changes(run, dict(changes))
            check_item_size(new, f"run {run_id}")
            self._runs[run_id] = new
            return copy_run(new)

    def write_step(self, step: StepRecord) -> StepRecord:
        check_item_size(step, f"the record of step {step.name!r} at {step.position}")
        with self._lock:
            steps = self._steps.setdefault(step.run_id, {})
            existing = steps.get(step.position)
            if existing is not None and existing.status.final:
                return copy_step(existing)
            steps[step.position] = copy_step(step)
            return step

    def write_step_fenced(
        self, step: StepRecord, guard: RunGuard, run_changes: Mapping[str, Any]
    ) -> bool:
        check_item_size(step, f"the record of step {step.name!r} at {step.position}")
        with self._lock:
            run = self._runs.get(step.run_id)
            if run is None or not guard_holds(run, guard):
                raise ConditionFailed(copy_run(run) if run else None)
            steps = self._steps.setdefault(step.run_id, {})
            existing = steps.get(step.position)
            if existing is not None and existing.status.final:
                return False
            steps[step.position] = copy_step(step)
            self._runs[step.run_id] = apply_changes(run, dict(run_changes))
            return True

    def list_runs(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        needs_attention: bool | None = None,
        version: int | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[RunRecord]:
        if not needs_attention and workflow is None:
            raise ValueError(
                "list_runs needs workflow= or needs_attention=True (served by an index, "
                "never a table scan)"
            )
        with self._lock:
            runs = [
                r
                for r in self._runs.values()
                if (workflow is None or r.workflow == workflow)
                and (status is None or r.status.value == status)
                and (needs_attention is None or r.needs_attention == needs_attention)
                and (version is None or r.version == version)
            ]
        # The same order as the DynamoDB indexes: the attention index sorts by time, the
        # listing index by "<status>#<updated_at>".
        if needs_attention:
            runs.sort(key=lambda r: (r.updated_at, r.run_id), reverse=True)
        else:
            runs.sort(key=lambda r: (r.status.value, r.updated_at, r.run_id), reverse=True)
        start = int(cursor) if cursor else 0
        page = runs[start : start + limit]
        more = start + limit < len(runs)
        return Page([copy_run(r) for r in page], str(start + limit) if more else None)

    # --- test helpers (not part of the port) ----------------------------------------

    def all_run_ids(self) -> list[str]:
        with self._lock:
            return list(self._runs)

    def patch_run(self, run_id: str, changes: Mapping[str, Any]) -> RunRecord:
        """Change a run without any guard: simulates another writer in tests."""
        with self._lock:
            self._runs[run_id] = apply_changes(self._runs[run_id], dict(changes))
            return copy_run(self._runs[run_id])


@dataclass(slots=True)
class Invocation:
    run_id: str
    reason: str
    hop: int


class MemoryInvoker:
    """Queues invocations; ``LocalRunner`` drains the queue in-process."""

    def __init__(self) -> None:
        self.queue: deque[Invocation] = deque()
        self._lock = threading.Lock()

    def invoke(self, run_id: str, reason: str, hop: int = 0) -> None:
        with self._lock:
            self.queue.append(Invocation(run_id, reason, hop))

    def pop(self) -> Invocation | None:
        with self._lock:
            return self.queue.popleft() if self.queue else None


class MemoryEffectStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: dict[str, EffectRecord] = {}

    def begin(self, key: str, expiration: int) -> EffectRecord | None:
        with self._lock:
            existing = self.records.get(key)
            # Like DynamoDB TTL read through Powertools: an expired record counts as absent.
            if existing is not None and existing.expiration >= time.time():
                return replace(existing)
            self.records[key] = EffectRecord(key, "INPROGRESS", None, expiration)
            return None

    def complete(self, key: str, reference: str, expiration: int) -> None:
        with self._lock:
            self.records[key] = EffectRecord(key, "COMPLETED", reference, expiration)
