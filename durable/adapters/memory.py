"""In-memory ports with the same semantics as the DynamoDB ones (held to it by the contract
suite). Used by ``durable.testing.LocalRunner``, fast unit tests and benchmarks."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from durable.core.flow import GateState
from durable.core.ids import DUE_SHARDS, due_shard, timer_name
from durable.core.leases import (
    apply_changes,
    check_listing,
    children_batch,
    claim_kind,
    claimed,
    guard_holds,
    listed,
    listing_key,
    relisted,
    reopening,
    settle_child_record,
    step_replaceable,
    sweep_trigger,
    wants_a_person,
)
from durable.core.limits import check_item_size
from durable.core.model import (
    RunHistory,
    RunRecord,
    SignalRecord,
    StepKind,
    StepRecord,
    StepStatus,
)
from durable.core.model import copy_run as model_copy_run
from durable.core.model import copy_step as model_copy_step
from durable.core.ports import (
    ChildReport,
    Claim,
    ConditionFailed,
    EffectRecord,
    Page,
    RunExists,
    RunFinished,
    RunGuard,
    SignalExists,
    WaitNotPending,
)
from durable.core.sleeps import with_sleeps
from durable.core.stored_bytes import check_key, kept
from durable.engine.schedules import Remote, Schedule
from durable.errors import InvalidCursor, InvalidInput

# Records are mutable: the ledger never shares one with its caller (DynamoDB would not).
copy_run = model_copy_run
copy_step = model_copy_step

# The stored-bytes rule (``durable.core.stored_bytes``), as the DynamoDB ledger applies it
# to its items: every field of every record stored is scanned, a token in a value
# redacted, one in a field the DynamoDB ledger keys an item or an index by refused.
_LEDGER = "the memory ledger"
_RUN_KEYS = frozenset({"run_id", "workflow", "created_at", "updated_at", "due_at"})
_STEP_KEYS = frozenset({"run_id", "position", "updated_at"})
_SIGNAL_KEYS = frozenset({"run_id", "name", "signal_id"})


def _run(run: RunRecord) -> RunRecord:
    """``run`` as it may be stored (itself if it holds no token)."""
    stored: RunRecord = kept(run, store=_LEDGER, keys=_RUN_KEYS)
    return stored


def _step(step: StepRecord) -> StepRecord:
    """A copy of ``step`` as it may be stored."""
    stored: StepRecord = kept(copy_step(step), store=_LEDGER, keys=_STEP_KEYS)
    return stored


def _signal(signal: SignalRecord) -> SignalRecord:
    stored: SignalRecord = kept(signal, store=_LEDGER, keys=_SIGNAL_KEYS)
    return stored


class MemoryLedger:
    """A ledger in a dict, atomic under one lock."""

    def __init__(self, *, due_shards: int = DUE_SHARDS) -> None:
        self.shards = due_shards
        self._lock = threading.RLock()
        self._runs: dict[str, RunRecord] = {}
        self._steps: dict[str, dict[str, StepRecord]] = {}
        self._signals: dict[str, list[SignalRecord]] = {}
        self._gates: dict[str, GateState] = {}
        # Each run's place in its workflow's listing, as the DynamoDB index keys it
        # (``durable.core.leases.listing_key``): it moves when the run ends or reopens.
        self._listed: dict[str, str] = {}

    def create_run(self, run: RunRecord) -> RunRecord:
        check_item_size(run, f"the input of run {run.run_id}")
        stored = _run(copy_run(run))
        with self._lock:
            existing = self._runs.get(run.run_id)
            if existing is not None:
                raise RunExists(copy_run(existing))
            self._runs[run.run_id] = stored
            self._list(run)
            self._steps.setdefault(run.run_id, {})
            self._signals.setdefault(run.run_id, [])
            return copy_run(stored)

    def _list(self, run: RunRecord) -> None:
        self._listed[run.run_id] = listing_key(
            run.run_id, run.status.value, run.created_at, run.updated_at
        )

    def _relist(self, run_id: str, changes: Mapping[str, Any], *, reopens: bool = False) -> None:
        moved = relisted(run_id, changes, reopens=reopens)
        if moved is not None:
            self._listed[run_id] = moved

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._lock:
            run = self._runs.get(run_id)
            return copy_run(run) if run else None

    def load(self, run_id: str) -> RunHistory | None:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return None
            # In key order, as DynamoDB's Query returns a partition (``STEP#<position>``):
            # whoever reads the history in its order (the claim check's reads of large
            # values) then does the same on both ledgers.
            stored = self._steps[run_id]
            steps = {p: copy_step(stored[p]) for p in sorted(stored)}
            signals = [replace(s) for s in self._signals[run_id]]
            return RunHistory(copy_run(run), with_sleeps(run, steps), signals)

    def purge_leftovers(self, run_id: str, *, before: str, keep_expiring: bool = False) -> int:
        with self._lock:
            steps = self._steps.get(run_id, {})
            old = [
                p
                for p, step in steps.items()
                if step.updated_at < before and not (keep_expiring and step.purge_at)
            ]
            for position in old:
                del steps[position]
            signals = self._signals.get(run_id, [])
            kept = [
                signal
                for signal in signals
                if signal.received_at >= before or (keep_expiring and signal.purge_at)
            ]
            self._signals[run_id] = kept
            return len(old) + len(signals) - len(kept)

    def delete_run(self, run_id: str, *, created_at: str) -> bool:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run.created_at != created_at or not run.terminal:
                return False
            del self._runs[run_id]
            self._listed.pop(run_id, None)
            return True

    def expire(self, now: datetime) -> list[str]:
        """Do what DynamoDB's TTL does: delete every item whose ``purge_at`` has passed,
        and only those: run items, and the steps and signals of runs whose lifetime is
        declared (``durable.core.lifetime``); the others stay until purged. Returns the
        ids of the run items deleted, as the table's stream would report them."""
        epoch = now.timestamp()
        with self._lock:
            gone = [r for r, run in self._runs.items() if run.purge_at and run.purge_at <= epoch]
            for run_id in gone:
                del self._runs[run_id]
                self._listed.pop(run_id, None)
            for steps in self._steps.values():
                for position in [p for p, s in steps.items() if s.purge_at and s.purge_at <= epoch]:
                    del steps[position]
            for run_id, signals in self._signals.items():
                if any(s.purge_at and s.purge_at <= epoch for s in signals):
                    self._signals[run_id] = [
                        s for s in signals if not (s.purge_at and s.purge_at <= epoch)
                    ]
            return gone

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
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return None
            kind = claim_kind(run, owner, stale_before)
            if kind is None:
                return None
            new = _run(
                claimed(run, owner, now, lease_until, kind, due_at, stale_before=stale_before)
            )
            self._runs[run_id] = new
            return Claim(copy_run(new), kind == "takeover")

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        with self._lock:
            new = _run(apply_changes(self._guarded(run_id, guard), dict(changes)))
            check_item_size(new, f"run {run_id}")
            self._runs[run_id] = new
            self._relist(run_id, changes)
            return copy_run(new)

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
        check_item_size(successor, f"the input of run {successor.run_id}")
        kept_successor = _run(copy_run(successor))
        with self._lock:
            new = _run(apply_changes(self._guarded(run_id, guard), dict(changes)))
            check_item_size(new, f"run {run_id}")
            existing = self._runs.get(successor.run_id)
            if existing is not None:
                raise RunExists(copy_run(existing))
            self._runs[run_id] = new
            self._relist(run_id, changes)
            self._runs[successor.run_id] = kept_successor
            self._list(successor)
            self._steps.setdefault(successor.run_id, {})
            self._signals.setdefault(successor.run_id, [])

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
        reopened = _step(reopen) if reopen is not None else None
        with self._lock:
            run = self._runs.get(run_id)
            steps = self._steps.get(run_id, {})
            stored = steps.get(reopen.position) if reopen is not None else None
            if (
                run is None
                or run.status.value not in statuses
                or (unleased and run.lease_owner is not None)
                or (
                    reopen is not None
                    and (stored is None or stored.status != StepStatus.TERMINAL_FAILED)
                )
            ):
                raise ConditionFailed(copy_run(run) if run else None)
            new = apply_changes(run, dict(changes))
            if operation is not None:
                new = replace(new, operations=[*run.operations, dict(operation)])
            if bump_inbox:
                new = replace(new, inbox=run.inbox + 1)
            new = _run(new)
            check_item_size(new, f"run {run_id}")
            self._runs[run_id] = new
            self._relist(run_id, changes, reopens=reopening(statuses, changes))
            if reopened is not None:
                steps[reopened.position] = reopened
            return copy_run(new)

    def start_child(self, step: StepRecord, guard: RunGuard, child: RunRecord) -> StepRecord:
        children_batch([step], [child])
        stored_step, stored_child = _step(step), _run(copy_run(child))
        with self._lock:
            parent = self._guarded(step.run_id, guard)
            existing = self._steps.setdefault(step.run_id, {}).get(step.position)
            if existing is not None and not step_replaceable(existing, step):
                return copy_step(existing)
            taken = self._runs.get(child.run_id)
            if taken is not None:
                raise RunExists(copy_run(taken))
            self._add_children(parent, [stored_step], [stored_child])
            return step

    def start_children(
        self, steps: list[StepRecord], guard: RunGuard, children: list[RunRecord]
    ) -> bool:
        parent_id = children_batch(steps, children)
        new_steps = [_step(step) for step in steps]
        new_children = [_run(copy_run(child)) for child in children]
        with self._lock:
            parent = self._guarded(parent_id, guard)
            stored = self._steps.setdefault(parent.run_id, {})
            if any(not step_replaceable(stored.get(s.position), s) for s in steps) or any(
                c.run_id in self._runs for c in children
            ):
                return False
            self._add_children(parent, new_steps, new_children)
            return True

    def _add_children(
        self, parent: RunRecord, steps: list[StepRecord], children: list[RunRecord]
    ) -> None:
        """Write a checked start (call locked): the records (copies of the caller's, as
        stored: ``_step``, ``_run``), the children, the count."""
        self._runs[parent.run_id] = replace(parent, children=parent.children + len(children))
        for step, child in zip(steps, children, strict=True):
            self._steps[parent.run_id][step.position] = step
            self._runs[child.run_id] = child
            self._list(child)
            self._steps.setdefault(child.run_id, {})
            self._signals.setdefault(child.run_id, [])

    def finish_child(
        self,
        run_id: str,
        guard: RunGuard,
        changes: Mapping[str, Any],
        report: ChildReport,
        *,
        now: str,
    ) -> tuple[RunRecord, bool]:
        # As the DynamoDB ledger does: three writes, each alone (``Ledger.finish_child``).
        check_item_size(
            _step(settle_child_record(_placeholder(report, now), report, now)),
            f"the result of child run {run_id}",
        )
        new = self.update_run(run_id, guard, changes)
        parent = self.get_run(report.parent_id)  # a parent seen ended is left as it ended
        if parent is None or parent.terminal:
            return new, False
        return new, self.settle_report(report, now) and self.wake_parent(report.parent_id)

    def settle_report(self, report: ChildReport, now: str) -> bool:
        """The parent's record settled by ``report`` when it is WAITING for that child
        (one conditional write on the record alone: the caller read the parent first)."""
        with self._lock:
            waiting = self._steps.get(report.parent_id, {}).get(report.position)
            if (
                waiting is None
                or waiting.kind != StepKind.CHILD
                or waiting.status != StepStatus.WAITING
                or waiting.detail != {"child": report.child_id}
            ):
                return False
            self._steps[report.parent_id][report.position] = _step(
                settle_child_record(waiting, report, now)
            )
            return True

    def wake_parent(self, parent_id: str) -> bool:
        """The parent's inbox bumped, its due time left alone, while it goes on."""
        with self._lock:
            run = self._runs.get(parent_id)
            if run is None or run.terminal:
                return False
            self._runs[parent_id] = _run(replace(run, inbox=run.inbox + 1))
            return True

    def read_gate(self, name: str) -> GateState:
        with self._lock:
            return self._gates.get(name, GateState())

    def write_gate(self, name: str, state: GateState) -> bool:
        check_key(_LEDGER, "a gate's name", name)
        stored: GateState = kept(replace(state, version=state.version + 1), store=_LEDGER)
        with self._lock:
            if self._gates.get(name, GateState()).version != state.version:
                return False
            self._gates[name] = stored
            return True

    def _guarded(self, run_id: str, guard: RunGuard) -> RunRecord:
        """The run item, if ``guard`` holds on it; else ``ConditionFailed`` (call locked)."""
        run = self._runs.get(run_id)
        if run is None or not guard_holds(run, guard):
            raise ConditionFailed(copy_run(run) if run else None)
        return run

    def write_step(self, step: StepRecord, guard: RunGuard | None = None) -> StepRecord:
        check_item_size(step, f"the record of step {step.name!r} at {step.position}")
        stored = _step(step)
        with self._lock:
            if guard is not None:
                self._guarded(step.run_id, guard)
            steps = self._steps.setdefault(step.run_id, {})
            existing = steps.get(step.position)
            if existing is not None and not step_replaceable(existing, step):
                return copy_step(existing)
            steps[step.position] = stored
            return step

    def write_step_fenced(
        self, step: StepRecord, guard: RunGuard, run_changes: Mapping[str, Any]
    ) -> bool:
        check_item_size(step, f"the record of step {step.name!r} at {step.position}")
        stored = _step(step)
        with self._lock:
            run = self._guarded(step.run_id, guard)
            steps = self._steps.setdefault(step.run_id, {})
            if not step_replaceable(steps.get(step.position), step):
                return False
            new = _run(apply_changes(run, dict(run_changes)))
            check_item_size(new, f"run {step.run_id}")
            steps[step.position] = stored
            self._runs[step.run_id] = new
            self._relist(step.run_id, run_changes)
            return True

    def get_step(self, run_id: str, position: str) -> StepRecord | None:
        with self._lock:
            step = self._steps.get(run_id, {}).get(position)
            return copy_step(step) if step else None

    def get_steps(self, run_id: str, positions: list[str]) -> dict[str, StepRecord]:
        with self._lock:
            steps = self._steps.get(run_id, {})
            return {p: copy_step(steps[p]) for p in positions if p in steps}

    def _bump_inbox(self, run_id: str, now: str) -> int:
        run = self._runs.get(run_id)
        if run is None or run.terminal:
            raise RunFinished(copy_run(run) if run else None)
        self._runs[run_id] = _run(replace(run, inbox=run.inbox + 1, due_at=now))
        return run.inbox + 1

    def complete_waiting(self, step: StepRecord, *, token_hash: str | None, now: str) -> None:
        check_item_size(step, f"the completion of step {step.name!r} at {step.position}")
        stored = _step(step)
        with self._lock:
            self._check_pending(step, token_hash, now)
            self._bump_inbox(step.run_id, now)
            self._steps[step.run_id][step.position] = stored

    def _check_pending(self, step: StepRecord, token_hash: str | None, now: str) -> None:
        """The wait at ``step``'s position is WAITING, unexpired at ``now`` and (when given)
        carries ``token_hash``; else ``WaitNotPending`` with what is there."""
        current = self._steps.get(step.run_id, {}).get(step.position)
        pending = (
            current is not None
            and current.status == StepStatus.WAITING
            and (token_hash is None or current.token_hash == token_hash)
            and (current.expires_at is None or current.expires_at > now)
        )
        if not pending:
            raise WaitNotPending(copy_step(current) if current else None)

    def extend_wait(
        self,
        step: StepRecord,
        *,
        token_hash: str,
        now: str,
        waiting_for: tuple[str, str] | None = None,
    ) -> None:
        check_item_size(step, f"the heartbeat of step {step.name!r} at {step.position}")
        stored = _step(step)
        with self._lock:
            self._check_pending(step, token_hash, now)
            run = self._runs.get(step.run_id)
            if run is None or run.terminal:
                raise RunFinished(copy_run(run) if run else None)
            self._steps[step.run_id][step.position] = stored
            if waiting_for is not None and run.waiting_for == waiting_for[0]:
                self._runs[step.run_id] = replace(run, waiting_for=waiting_for[1])

    def add_signal(self, signal: SignalRecord, *, now: str) -> None:
        check_item_size(signal, f"signal {signal.name!r}")
        kept_signal = _signal(signal)
        with self._lock:
            if signal.key_hash is not None:
                # DynamoDB's conditional put on the key-derived sort key, checked before
                # the run (as the DynamoDB ledger reports it) and before anything changes.
                for stored in self._signals.get(signal.run_id, []):
                    if stored.name == signal.name and stored.key_hash == signal.key_hash:
                        raise SignalExists(replace(stored))
            seq = self._bump_inbox(signal.run_id, now)
            self._signals[signal.run_id].append(replace(kept_signal, seq=seq))

    def consume_signal(self, step: StepRecord, signal: SignalRecord, guard: RunGuard) -> StepRecord:
        kept_step = _step(step)
        with self._lock:
            self._guarded(step.run_id, guard)
            steps = self._steps.setdefault(step.run_id, {})
            existing = steps.get(step.position)
            if existing is not None and not step_replaceable(existing, step):
                return copy_step(existing)
            stored = self._signals.get(signal.run_id, [])
            index = next(
                (
                    i
                    for i, item in enumerate(stored)
                    if item.signal_id == signal.signal_id and item.name == signal.name
                ),
                None,
            )
            if index is None or stored[index].consumed_by not in (None, step.position):
                # Gone, or taken by another position (a stale view): as DynamoDB answers.
                if existing is None:
                    raise WaitNotPending(None)
                return copy_step(existing)
            stored[index] = replace(stored[index], consumed_by=step.position)
            steps[step.position] = kept_step
            return step

    def due_runs(
        self, shard: int, *, before: str, limit: int, cursor: str | None = None
    ) -> Page[tuple[str, str]]:
        with self._lock:
            due = sorted(
                (r.due_at, r.run_id)
                for r in self._runs.values()
                if r.due_at is not None
                and r.due_at <= before
                and int(due_shard(r.run_id, self.shards)) == shard
            )
        start = _offset(cursor)
        page = [(run_id, at) for at, run_id in due[start : start + limit]]
        more = start + limit < len(due)
        return Page(page, str(start + limit) if more else None)

    def claim_trigger(
        self, run_id: str, due_at: str, new_due_at: str, *, stale_before: str, skew: timedelta
    ) -> bool:
        with self._lock:
            run = self._runs.get(run_id)
            invoke, due = sweep_trigger(run, due_at, new_due_at, stale_before, skew)
            if run is not None and due is not None:
                self._runs[run_id] = _run(replace(run, due_at=due))
            return invoke

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
        check_listing(workflow, needs_attention)
        with self._lock:
            runs = [
                r
                for r in self._runs.values()
                if (workflow is None or r.workflow == workflow)
                and (status is None or r.status.value == status)
                and (
                    needs_attention is None
                    or (
                        wants_a_person(r.status, r.needs_attention, r.waiting_for)
                        if needs_attention
                        else not r.needs_attention
                    )
                )
                and (version is None or r.version == version)
            ]
        # The same order as the DynamoDB indexes: the attention index sorts by time, the
        # listing index by phase and when it began (``durable.core.leases.listing_key``).
        if needs_attention:
            runs.sort(key=lambda r: (r.updated_at, r.run_id), reverse=True)
        else:
            runs.sort(key=lambda r: self._listed.get(r.run_id, ""), reverse=True)
        start = _offset(cursor)
        page = runs[start : start + limit]
        more = start + limit < len(runs)
        return Page([listed(copy_run(r)) for r in page], str(start + limit) if more else None)

    def open_runs(
        self, workflow: str, *, limit: int = 100, cursor: str | None = None
    ) -> Page[RunRecord]:
        # One read under the lock: whatever a worker does, a run is seen at one status.
        with self._lock:
            runs = [r for r in self._runs.values() if r.workflow == workflow and not r.terminal]
            runs.sort(key=lambda r: self._listed.get(r.run_id, ""), reverse=True)
            start = _offset(cursor)
            page = [listed(copy_run(r)) for r in runs[start : start + limit]]
        more = start + limit < len(runs)
        return Page(page, str(start + limit) if more else None)

    # --- test helpers (not part of the port) ----------------------------------------

    def all_run_ids(self) -> list[str]:
        with self._lock:
            return list(self._runs)

    def patch_run(self, run_id: str, changes: Mapping[str, Any]) -> RunRecord:
        """Change a run without any guard: simulates another writer in tests."""
        with self._lock:
            before = self._runs[run_id]
            self._runs[run_id] = _run(apply_changes(before, dict(changes)))
            self._relist(run_id, changes, reopens=before.status.terminal)
            return copy_run(self._runs[run_id])


def _offset(cursor: str | None) -> int:
    """The position a cursor of this ledger encodes (as the DynamoDB ledger checks its
    own: a cursor it did not hand out is ``InvalidCursor``)."""
    if not cursor:
        return 0
    if not cursor.isdigit() or len(cursor) > 12:
        raise InvalidCursor("cursor is not one this listing returned; start again without it")
    return int(cursor)


@dataclass(slots=True)
class Invocation:
    run_id: str
    reason: str
    hop: int


def _placeholder(report: ChildReport, now: str) -> StepRecord:
    """A WAITING record at the report's position, to size what the report settles."""
    return StepRecord(
        report.parent_id, report.position, "", StepKind.CHILD, StepStatus.WAITING, now
    )


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


class MemoryTimers:
    """Armed wake-ups in a dict; ``LocalRunner`` and the local runtime fire them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.armed: dict[str, tuple[str, datetime]] = {}
        self.arm_calls = 0

    def arm(
        self, run_id: str, position: str, wake_at: datetime, *, rearm_at: datetime | None = None
    ) -> None:
        name = timer_name(run_id, position, rearm_at)
        with self._lock:
            self.arm_calls += 1
            self.armed.setdefault(name, (run_id, wake_at))

    def cancel_run(self, run_id: str) -> None:
        with self._lock:
            for name in [n for n, (r, _) in self.armed.items() if r == run_id]:
                del self.armed[name]

    def due(self, now: datetime) -> list[str]:
        """Fire (remove) every timer due at ``now``; return their run ids in time order."""
        with self._lock:
            fired = sorted(
                (at, name, run_id) for name, (run_id, at) in self.armed.items() if at <= now
            )
            for _, name, _ in fired:
                del self.armed[name]
        return [run_id for _, _, run_id in fired]


_EFFECTS = "the memory effect store"
_EFFECT_KEYS = frozenset({"key"})


def _effect(record: EffectRecord) -> EffectRecord:
    """``record`` as it may be stored (``durable.core.stored_bytes``): its reference
    redacted, a key that holds a token refused, as in the idempotency table."""
    stored: EffectRecord = kept(record, store=_EFFECTS, keys=_EFFECT_KEYS)
    return stored


class MemoryEffectStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: dict[str, EffectRecord] = {}

    def begin(self, key: str, expiration: int, *, now: int) -> EffectRecord | None:
        check_key(_EFFECTS, "the effect's key", key)
        with self._lock:
            existing = self.records.get(key)
            # Like DynamoDB TTL read through Powertools: an expired record counts as absent.
            if existing is not None and existing.expiration >= now:
                return replace(existing)
            self.records[key] = _effect(EffectRecord(key, "INPROGRESS", None, expiration))
            return None

    def complete(self, key: str, reference: str, expiration: int) -> None:
        stored = _effect(EffectRecord(key, "COMPLETED", reference, expiration))
        with self._lock:
            self.records[key] = stored


class MemoryRecurring:
    """Recurring schedules in memory (``durable.engine.schedules.RecurringSchedules``)."""

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self.held: dict[str, Remote] = {}
        self._clock = clock or (lambda: datetime.now(UTC))

    def list(self) -> dict[str, Remote]:
        return dict(self.held)

    def put(self, schedule: Schedule, *, enabled: bool) -> None:
        old = self.held.get(schedule.name)
        created = old.created if old is not None else self._clock()
        self.held[schedule.name] = Remote(
            schedule.name, schedule.expression, schedule.timezone, enabled, created
        )

    def delete(self, name: str) -> None:
        self.held.pop(name, None)

    def set_enabled(self, name: str, enabled: bool) -> None:
        if name not in self.held:
            raise InvalidInput(f"no schedule {name!r} in this stack", field="schedule")
        self.held[name] = replace(self.held[name], enabled=enabled)
