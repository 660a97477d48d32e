"""What a run costs: the usage each invocation records on the run, and its price.

Cost is the reason to run workflows on Lambda and DynamoDB, so each run carries its own
bill: DynamoDB request units (as DynamoDB reports them, ``ReturnConsumedCapacity``),
worker invocations and their Lambda time, timers fired by EventBridge Scheduler, and the
API request that started it. Keeping it costs no extra write: each invocation ends with
one write of the run item (it releases its lease), and ``UsageLedger`` adds what the
invocation used to that same write.

That write's own units are only known once it returns, too late to be part of it; the
ledger adapter computes them beforehand from the item before and after, by DynamoDB's
rules (``Meter.units_of_run_write``; ``durable.adapters.dynamodb_units``), and a test
checks the recorded total against the units DynamoDB Local reports for a whole run.

Not counted: an outside event's own request (a callback answered, a signal: the API's
Lambda time and its one write), reads by operators, the purge's deletes after the
retention, storage. ``docs/operations.md`` ("What a run costs") has the table.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from durable.core.flow import GateState
from durable.core.ledger_forward import ForwardReads
from durable.core.model import RunRecord, SignalRecord, StepRecord
from durable.core.ports import ChildReport, Claim, Ledger, RunGuard

# The keys of ``RunRecord.usage`` (numbers, added up over the run's invocations).
# Short: the map is stored on the run item, and every byte of that item is paid for on
# each of its writes (a run item past a KB boundary costs a unit more per write).
WRITE_UNITS = "wcu"  # DynamoDB write request units
READ_UNITS = "rcu"  # DynamoDB read request units
REQUESTS = "ddb"  # DynamoDB requests
INVOCATIONS = "inv"  # worker invocations
LAMBDA_MS = "ms"  # their duration, billed milliseconds
GB_SECONDS = "gbs"  # their duration times memory, GB-seconds
TIMER_FIRES = "timers"  # EventBridge Scheduler deliveries
API_REQUESTS = "api"  # API Gateway requests (the start)
KEYS = (
    WRITE_UNITS,
    READ_UNITS,
    REQUESTS,
    INVOCATIONS,
    LAMBDA_MS,
    GB_SECONDS,
    TIMER_FIRES,
    API_REQUESTS,
)

# What a child's report to its parent uses after the child's final write
# (``UsageLedger.finish_child``).
REPORT_USAGE = {REQUESTS: 3.0, READ_UNITS: 1.0, WRITE_UNITS: 2.0}

# List prices in USD per unit, by region (on-demand DynamoDB, Lambda on arm64, EventBridge
# Scheduler past its free tier, API Gateway REST APIs' first tier), as published in 2026.
# A region not listed is priced as us-east-1 (and says so); DURABLE_PRICES overrides any.
_US = {
    WRITE_UNITS: 0.625e-6,
    READ_UNITS: 0.125e-6,
    INVOCATIONS: 0.20e-6,
    GB_SECONDS: 0.0000133334,
    TIMER_FIRES: 1.00e-6,
    API_REQUESTS: 3.50e-6,
}
PRICES: dict[str, dict[str, float]] = {
    "us-east-1": _US,
    "us-east-2": _US,
    "us-west-2": _US,
}
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class Prices:
    region: str  # whose prices these are (may differ from the deployment's region)
    per_unit: Mapping[str, float]

    @classmethod
    def of(cls, region: str | None, overrides: Mapping[str, float] | None = None) -> Prices:
        known = region if region in PRICES else DEFAULT_REGION
        unknown = set(overrides or {}) - set(_US)
        if unknown:
            raise ValueError(
                f"DURABLE_PRICES: unknown keys {sorted(unknown)}; use {sorted(_US)} (USD per unit)"
            )
        return cls(known, {**PRICES[known], **(overrides or {})})

    def dollars(self, usage: Mapping[str, float] | None) -> float:
        return sum(self.per_unit.get(k, 0.0) * float(v) for k, v in (usage or {}).items())


def added(base: Mapping[str, float] | None, more: Mapping[str, float]) -> dict[str, float]:
    """``base`` plus ``more``, key by key (rounded: these are sums of small floats)."""
    out = dict(base or {})
    for key, value in more.items():
        if value:
            out[key] = round(out.get(key, 0.0) + float(value), 6)
    return out


# --- measuring an invocation ---------------------------------------------------------


def _free_create(run: RunRecord) -> float:
    return 0.0


def _free_update(before: RunRecord, changes: Mapping[str, Any]) -> float:
    return 0.0


def _one_request(run: RunRecord) -> float:
    return 1.0


class Meter:
    """What one container's current invocation has used so far.

    The ledger adapter adds each request's consumed units (``add``, from any thread: the
    lease keeper renews from its own); the worker opens an invocation (``invocation``) and
    ``UsageLedger`` reads the total at the invocation's last write.
    """

    def __init__(
        self,
        units_of_create: Callable[[RunRecord], float] = _free_create,
        units_of_update: Callable[[RunRecord, Mapping[str, Any]], float] = _free_update,
        clock: Callable[[], float] = time.monotonic,
        requests_of_create: Callable[[RunRecord], float] = _one_request,
        units_of_input: Callable[[RunRecord], float] = _free_create,
    ) -> None:
        # The write units the storage will charge for creating a run item, and for
        # updating one (as ``before`` holds it) by ``changes``: the ledger adapter's rule
        # (``durable.adapters.dynamodb_units``); nothing for the memory ledger.
        self.units_of_create = units_of_create
        self.units_of_update = units_of_update
        # The requests a create sends: one, or two when the adapter writes a large input
        # in an item of its own first (``durable.adapters.dynamodb_items.input_apart``).
        self.requests_of_create = requests_of_create
        # The units of that input item's put (nothing when the input stays inline): a
        # plain put before the run item's, never part of a transaction, so never billed
        # twice even when the run item's put is (a continue-as-new's successor).
        self.units_of_input = units_of_input
        self._clock = clock
        self._lock = threading.Lock()
        self._open: _Open | None = None  # the invocation being counted

    @contextmanager
    def invocation(self, *, memory_mb: float, timer: bool) -> Iterator[None]:
        with self._lock:
            self._open = _Open(self._clock(), memory_mb / 1024.0, timer)
        try:
            yield
        finally:
            with self._lock:
                self._open = None

    def add(self, key: str, amount: float) -> None:
        with self._lock:
            if self._open is not None:
                used = self._open.used
                used[key] = used.get(key, 0.0) + amount

    def so_far(self) -> dict[str, float]:
        """This invocation's usage up to now (nothing outside an invocation)."""
        with self._lock:
            now = self._open
            if now is None:
                return {}
            # Lambda bills whole milliseconds, at least one.
            ms = float(max(1, round((self._clock() - now.began) * 1000.0)))
            return {
                **now.used,
                INVOCATIONS: 1.0,
                LAMBDA_MS: ms,
                GB_SECONDS: round(ms / 1000.0 * now.memory_gb, 4),
                TIMER_FIRES: 1.0 if now.timer else 0.0,
            }


@dataclass
class _Open:
    began: float
    memory_gb: float
    timer: bool
    used: dict[str, float] = field(default_factory=dict)


class UsageLedger(ForwardReads, Ledger):
    """``ledger`` whose writes that end an invocation carry the invocation's usage.

    Every invocation ends by releasing its lease (a suspension, a hand-off, the final
    result, a deferral, continue-as-new): that write adds what the meter counted, plus
    its own units, to the usage the claim read. A write refused (a fence lost) wrote
    nothing; the next one adds again from the claim's figure, so nothing counts twice.
    A start (the API's) records its own write and its request.

    Every write of the port is written out (``durable.core.ledger_forward``), so a write
    added to the port later is a decision here: does it end an invocation?
    """

    def __init__(self, ledger: Ledger, meter: Meter) -> None:
        super().__init__(ledger)
        self._meter = meter
        self._claimed: dict[str, RunRecord] = {}

    def create_run(self, run: RunRecord) -> RunRecord:
        usage = added(run.usage, {API_REQUESTS: 1.0, REQUESTS: self._meter.requests_of_create(run)})
        apart = self._meter.units_of_input(run)
        own = _fixed_point(
            lambda units: self._meter.units_of_create(_with(run, _plus(usage, units))) + apart
        )
        return self._ledger.create_run(_with(run, _plus(usage, own)))

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
        claim = self._ledger.claim(
            run_id,
            owner,
            now=now,
            lease_until=lease_until,
            stale_before=stale_before,
            due_at=due_at,
        )
        if claim is not None:
            self._claimed.pop(run_id, None)
            self._claimed[run_id] = claim.run
            while len(self._claimed) > 16:  # a container serves one run at a time
                del self._claimed[next(iter(self._claimed))]
        return claim

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        return self._ledger.update_run(run_id, guard, self._billed(run_id, changes))

    def finish_child(
        self,
        run_id: str,
        guard: RunGuard,
        changes: Mapping[str, Any],
        report: ChildReport,
        *,
        now: str,
    ) -> tuple[RunRecord, bool]:
        # This run's update, then its report (``Ledger.finish_child``): a read of the
        # parent, an update of its record and one of its run item, sent after the write
        # that records the bill, so billed here as DynamoDB counts them when the parent
        # takes the report (a consistent read and two updates of items under 1 KB; a
        # parent's item past a KB, or a report not taken, is a unit or two off).
        billed = self._billed(run_id, changes, extra=REPORT_USAGE)
        return self._ledger.finish_child(run_id, guard, billed, report, now=now)

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
        # One transaction: the run's update and the successor's put, each billed twice
        # (DynamoDB's price of a transactional write, index writes included); a large
        # input's own item is put before it, outside the transaction, once.
        def units(before: RunRecord, billed: Mapping[str, Any]) -> float:
            own = self._meter.units_of_update(before, billed)
            apart = self._meter.units_of_input(successor)
            return 2.0 * (own + self._meter.units_of_create(successor)) + apart

        billed = self._billed(run_id, changes, units)
        self._ledger.continue_run(run_id, guard, billed, successor)

    # --- writes that never end an invocation nor start a run: passed on as they are. Their
    # units reach the meter from the adapter, and the invocation's releasing write above
    # records them (an outside event's own request is not counted: the module's note).

    def delete_run(self, run_id: str, *, created_at: str) -> bool:
        return self._ledger.delete_run(run_id, created_at=created_at)

    def purge_leftovers(self, run_id: str, *, before: str, keep_expiring: bool = False) -> int:
        return self._ledger.purge_leftovers(run_id, before=before, keep_expiring=keep_expiring)

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

    def write_gate(self, name: str, state: GateState) -> bool:
        return self._ledger.write_gate(name, state)

    def write_step(self, step: StepRecord, guard: RunGuard | None = None) -> StepRecord:
        return self._ledger.write_step(step, guard)

    def write_step_fenced(
        self, step: StepRecord, guard: RunGuard, run_changes: Mapping[str, Any]
    ) -> bool:
        return self._ledger.write_step_fenced(step, guard, run_changes)

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

    # --- the usage a releasing write records ---------------------------------------------

    def _billed(
        self,
        run_id: str,
        changes: Mapping[str, Any],
        units: Callable[[RunRecord, Mapping[str, Any]], float] | None = None,
        *,
        extra: Mapping[str, float] | None = None,
    ) -> Mapping[str, Any]:
        """``extra``: what requests sent after this write will use (billed now: the
        invocation's usage is recorded by this write)."""
        claimed = self._claimed.get(run_id)
        ends = "lease_owner" in changes and changes["lease_owner"] is None
        if not ends or claimed is None:
            return changes
        used = self._meter.so_far()
        if not used:
            return changes
        used[REQUESTS] = used.get(REQUESTS, 0.0) + 1.0  # this write
        used = added(used, dict(extra or {}))
        total = added(claimed.usage, used)
        cost = units or self._meter.units_of_update
        own = _fixed_point(lambda n: cost(claimed, {**changes, "usage": _plus(total, n)}))
        return {**changes, "usage": _plus(total, own)}


def _plus(usage: dict[str, float], write_units: float) -> dict[str, float]:
    return added(usage, {WRITE_UNITS: write_units})


def _fixed_point(units_with: Callable[[float], float]) -> float:
    """A write's units, when the write records them: the figure is part of the item, so
    a larger figure can make the item cross a unit boundary. Settles in a step or two."""
    own = 0.0
    for _ in range(4):
        units = units_with(own)
        if units == own:
            break
        own = units
    return own


def _with(run: RunRecord, usage: dict[str, float]) -> RunRecord:
    from dataclasses import replace

    return replace(run, usage=usage)
