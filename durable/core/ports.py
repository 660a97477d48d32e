"""The engine's ports: what it needs from storage, invocation and side-effect records.

Adapters (``durable.adapters``) implement these Protocols for DynamoDB, Lambda and the
in-memory test doubles. Every method documents the conditional semantics the engine
relies on; the contract suite in ``tests/contract`` holds each implementation to them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

from durable.core.flow import GateState
from durable.core.model import RunHistory, RunRecord, SignalRecord, StepRecord, StepStatus
from durable.errors import DurableError

T = TypeVar("T")


class RunExists(DurableError):
    """``create_run`` found an item with that run id; ``existing`` is what is stored."""

    def __init__(self, existing: RunRecord) -> None:
        super().__init__(f"run {existing.run_id} already exists")
        self.existing = existing


class ConditionFailed(DurableError):
    """A conditional write on the run item failed; ``current`` is the stored item.

    ``current`` is None when the run item no longer exists.
    """

    def __init__(self, current: RunRecord | None) -> None:
        super().__init__("conditional write on the run item failed")
        self.current = current


class WaitNotPending(DurableError):
    """A completion found the step no longer WAITING (or the token/expiry did not match).

    ``current`` is the stored step record (None when there is none).
    """

    def __init__(self, current: StepRecord | None) -> None:
        super().__init__("the step is not waiting for this completion")
        self.current = current


class RunFinished(DurableError):
    """An event was addressed to a run that is missing or already finished."""

    def __init__(self, current: RunRecord | None) -> None:
        super().__init__("the run is missing or finished")
        self.current = current


class SignalExists(DurableError):
    """``add_signal`` found a signal stored under the same idempotency key (same run and
    name); ``existing`` is what is stored. Nothing was written."""

    def __init__(self, existing: SignalRecord) -> None:
        super().__init__(f"signal {existing.name!r} with that key is already stored")
        self.existing = existing


# A DynamoDB transaction holds 100 actions (the parent's run item, then a record and a
# run item per child) and 4 MB in all (kept under it, for the keys and attribute names).
MAX_CHILDREN_PER_START = 49
TRANSACTION_BYTES = 3_900_000


@dataclass(frozen=True, slots=True)
class ChildReport:
    """What a child run's final write tells its parent (``durable.engine.children``): the
    parent's record at ``position`` (WAITING for ``child_id``) becomes ``status`` (DONE
    with the child's ``output``, or TERMINAL_FAILED with its error), and names the
    ``version`` the child ran."""

    parent_id: str
    position: str
    child_id: str
    status: StepStatus
    output: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    # The version of its workflow the child ran: the parent decodes its result by that
    # version's annotation, not the newest's (a v1 child may end after v2 is deployed).
    version: int | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    run: RunRecord
    took_over: bool


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class RunGuard:
    """Conditions on the run item for a fenced write by the current owner.

    ``fence`` and ``owner`` are always checked. ``inbox`` (suspension) requires no event
    arrived since the worker's view of events was loaded; ``statuses`` and ``no_cancel``
    guard the final result; ``alive_at`` (the writer's clock) requires the lease not to
    have ended by then, for a write that starts work (a body's RUNNING mark).
    """

    fence: int
    owner: str
    inbox: int | None = None
    statuses: tuple[str, ...] = ()
    no_cancel: bool = False
    alive_at: str | None = None


class LedgerReads(Protocol):
    """The ledger's reads: nothing here changes what is stored."""

    @property
    def shards(self) -> int:
        """Partitions of the due index; the sweeper reads each. (Read-only here, so a
        wrapper can forward it as a property and an adapter hold it as an attribute.)"""
        ...

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def load(self, run_id: str) -> RunHistory | None:
        """One strongly consistent read of the whole partition (all pages)."""
        ...

    def get_step(self, run_id: str, position: str) -> StepRecord | None:
        """One step record, strongly consistent."""
        ...

    def get_steps(self, run_id: str, positions: list[str]) -> dict[str, StepRecord]:
        """The records at ``positions`` that exist, strongly consistent, by position: a
        parent's look at its open children without loading its whole history."""
        ...

    def read_gate(self, name: str) -> GateState:
        """A flow-control gate (``durable.core.flow``), strongly consistent; version 0 when
        none is stored."""
        ...

    def due_runs(
        self, shard: int, *, before: str, limit: int, cursor: str | None = None
    ) -> Page[tuple[str, str]]:
        """(run_id, due_at) of runs in one due-index shard with ``due_at <= before``.

        Read from an eventually consistent index: callers confirm with ``claim_trigger``.
        """
        ...

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
        """Runs from the listing or attention index (never a scan): a workflow's unfinished
        runs first (newest created first), then its ended ones (latest ended first);
        those needing attention latest changed first (``durable.core.leases.listing_key``).
        The status a listing shows and filters on is the run's own, read for the page."""
        ...

    def open_runs(
        self, workflow: str, *, limit: int = 100, cursor: str | None = None
    ) -> Page[RunRecord]:
        """A workflow's unfinished runs, whatever their status, newest created first, as
        ``list_runs`` shows a run.

        Read from the listing index's range a run stays in from its creation to its end
        (``durable.core.leases.listing_key``), with no filter on the status: a run a
        worker moves between unfinished statuses meanwhile (a claim, a suspension) is
        listed at one or the other, where a listing per status can miss it between two
        of them. The unfinished runs of a workflow are few: no ended run is read."""
        ...


class LedgerWrites(Protocol):
    """The ledger's writes: every method that can change what is stored. A wrapper that
    must see each write (the write boundary, the claim check, the history cache, ...)
    subclasses ``Ledger`` explicitly, so mypy refuses to instantiate it while one of
    these is left unimplemented, this one added later included."""

    def create_run(self, run: RunRecord) -> RunRecord:
        """Put the run item if no item has its id; else raise ``RunExists``."""
        ...

    def purge_leftovers(self, run_id: str, *, before: str, keep_expiring: bool = False) -> int:
        """Delete the step and signal items under ``run_id`` last written before ``before``
        (never the run item): what an earlier run with the same id left behind when its
        run item expired (TTL). Each delete is conditional on that time, so an item written
        meanwhile stays. ``keep_expiring`` leaves the items that carry a TTL of their own
        (``purge_at``, a declared lifetime: ``durable.core.lifetime``): DynamoDB deletes
        those for free. Returns how many were deleted."""
        ...

    def delete_run(self, run_id: str, *, created_at: str) -> bool:
        """Delete the run item of ``run_id`` if it is the run created at ``created_at`` and
        it has finished: an erasure (``Engine.erase``), after its other items went.
        False when there is no such item (gone, another run of the id, or still going)."""
        ...

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
        """Take the run's lease with one conditional update.

        Succeeds when the run is not terminal and the lease is absent, released, already
        ``owner``'s, or expired before ``stale_before`` (``now`` minus the clock-skew
        margin). Bumps ``fence``, sets ``lease_owner``/``lease_until``, stamps ``woke_at``
        (``durable.core.leases.woke_stamp``) and sets ``due_at`` to ``due_at`` (default
        ``lease_until``; the engine passes the moment the lease can be taken over, so the
        sweeper finds a dead owner when a claim would succeed), unless the run's due time is
        no later than that (``durable.core.leases.keeps_due``: the sweeper looks by then
        anyway). Taking over an expired, unreleased lease also
        increments ``takeovers`` and reports ``took_over``. Returns None when the run is
        missing, terminal or busy.
        """
        ...

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        """Apply ``changes`` (RunRecord field -> value; None removes) under ``guard``.

        Returns the new item; raises ``ConditionFailed`` with the stored item otherwise.
        ``updated_at`` must be among the changes when the status changes (listing index).
        """
        ...

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
        """End a run and create its continue-as-new successor in one atomic write.

        ``changes`` apply under ``guard`` (the final write of the run) and ``successor``
        is created only if no run has its id; neither happens without the other, so a
        run canceled meanwhile starts nothing. Raises ``ConditionFailed`` (the guard) or
        ``RunExists`` (the id); ``PayloadTooLarge`` before writing anything.
        """
        ...

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
        """An operator's change to a run that no worker may be holding (retry, cancel).

        Conditional on the status being one of ``statuses`` (and, with ``unleased``, no
        lease held); appends ``operation`` to the run's ``operations`` log; with
        ``bump_inbox`` increments ``inbox`` like every external event so a running owner
        notices. With ``reopen`` (a retry), the same atomic write replaces that step's
        TERMINAL_FAILED record: the only write that touches a final record, and never
        without the run changing with it. Returns the new item or raises
        ``ConditionFailed`` with the stored one (nothing written), also when the step is
        not TERMINAL_FAILED any more.
        """
        ...

    def start_child(self, step: StepRecord, guard: RunGuard, child: RunRecord) -> StepRecord:
        """Record a parent's WAITING ``step`` for ``child`` and create the child run, in
        one atomic write under the parent's ``guard``; the parent's ``children`` count
        goes up by one in it.

        ``step`` follows ``write_step``'s rule: when it is refused (a final record is
        stored there) nothing is written and the stored record comes back. Raises
        ``ConditionFailed`` (the guard) or ``RunExists`` (a run has the child's id);
        nothing is written then either. Returns ``step`` when all three were written.
        """
        ...

    def start_children(
        self, steps: list[StepRecord], guard: RunGuard, children: list[RunRecord]
    ) -> bool:
        """``start_child`` for several children at once (``steps[i]`` waits for
        ``children[i]``; at most ``MAX_CHILDREN_PER_START``), all or nothing: True when
        every record and child was written (the parent's count up by their number);
        False, writing nothing, when any record is refused or any child id is taken (the
        caller then starts them one by one to learn which). Raises ``ConditionFailed``
        when the guard fails."""
        ...

    def finish_child(
        self,
        run_id: str,
        guard: RunGuard,
        changes: Mapping[str, Any],
        report: ChildReport,
        *,
        now: str,
    ) -> tuple[RunRecord, bool]:
        """A child run's final write, then its report to its parent: three writes, each
        alone, in this order (a transaction over them costs twice the units).

        ``changes`` apply under ``guard`` as ``update_run``'s do (``ConditionFailed``
        otherwise, nothing written). Then, unless the parent is seen ended (a finished
        run's records do not change), when its record at ``report.position`` is still a
        WAITING record naming this child, it is settled as ``report`` says; then, while
        the parent goes on, its ``inbox`` is bumped (its due time left alone), so a
        running parent's suspension is refused and it reloads. A record settles once
        (from a report or from the parent's own look at the child): a completion is
        never counted twice. A worker stopped between the writes loses the report or the
        wake-up, never the outcome: the parent looks at a child whose report is overdue
        (``durable.engine.children.look_for_ends``).
        Returns the new run item and whether the parent took the report (settled and
        woken); an error writing the report is logged and counts as not taken.
        """
        ...

    def write_gate(self, name: str, state: GateState) -> bool:
        """Store the gate as ``state`` if its stored version is still ``state.version``
        (0: none stored); the stored version becomes one more. False when another writer
        was first (nothing written): read again and decide again."""
        ...

    def write_step(self, step: StepRecord, guard: RunGuard | None = None) -> StepRecord:
        """Put a step item unless ``durable.core.leases.step_replaceable`` refuses it.

        First writer wins: a final record (DONE, TERMINAL_FAILED, ...) is never
        overwritten, and a pending record written under a newer fence than
        ``step.fence`` is not either; the writer gets the stored record back (it adopts a
        final one; a newer owner's pending one means its own lease is gone). With
        ``guard`` the write also requires the run item to satisfy it, in the same atomic
        request, raising ``ConditionFailed`` with the stored run otherwise (nothing
        written). Returns ``step`` itself when it was written, else the stored record.
        """
        ...

    def write_step_fenced(
        self, step: StepRecord, guard: RunGuard, run_changes: Mapping[str, Any]
    ) -> bool:
        """Atomically write a non-final step and update the run item under ``guard``.

        Used for checkpoints (which also renew the lease). Raises ``ConditionFailed``
        when the run guard fails; returns False, writing nothing, when a final record is
        already stored at the step's position; True when both writes happened.
        """
        ...

    def complete_waiting(self, step: StepRecord, *, token_hash: str | None, now: str) -> None:
        """Deliver a callback completion: one transaction of two writes.

        The step item is replaced by ``step`` only if it is WAITING, carries
        ``token_hash`` (when given) and has not expired at ``now``; the run item's
        ``inbox`` is incremented and ``due_at`` set to ``now`` only if the run is not
        terminal. Raises ``WaitNotPending`` or ``RunFinished``; nothing is written then.
        """
        ...

    def extend_wait(
        self,
        step: StepRecord,
        *,
        token_hash: str,
        now: str,
        waiting_for: tuple[str, str] | None = None,
    ) -> None:
        """A callback's heartbeat: the step item is replaced by ``step`` (the same wait, a
        later ``expires_at``) only if it is WAITING, carries ``token_hash`` and has not
        expired at ``now``, and only while the run is not terminal, in one transaction. No
        inbox bump, no wake-up (``durable.engine.events``). ``waiting_for`` (the run item's
        ``waiting_for`` as the caller read it, and the same with the new expiry:
        ``durable.core.leases.waiting_for_extended``): the run item takes the second in the
        same write if it still holds the first, so a listing shows the new expiry; a text
        changed since (the run parked again) is left as it is and the wait still moves.
        Raises ``WaitNotPending`` or ``RunFinished``; nothing is written then.
        """
        ...

    def add_signal(self, signal: SignalRecord, *, now: str) -> None:
        """Store a signal item and bump the run's inbox (``due_at = now``) atomically.

        A keyed signal (``key_hash`` set) is stored only if no signal of that run and name
        carries the same ``key_hash``; otherwise raises ``SignalExists`` with the stored
        one, and neither the signal nor the inbox is written. That check comes first: a
        repeat of a signal the run received before it finished is still a repeat.
        Raises ``RunFinished`` (nothing written) when the run is missing or terminal.
        """
        ...

    def consume_signal(self, step: StepRecord, signal: SignalRecord, guard: RunGuard) -> StepRecord:
        """Record ``step`` and mark ``signal`` consumed by it, atomically, under ``guard``.

        The step follows ``write_step``'s rule (returns the stored record when refused);
        a signal already consumed at another position (a stale view) writes nothing and
        returns the stored step (``WaitNotPending`` when there is none). Raises
        ``ConditionFailed`` when the run guard fails.
        """
        ...

    def claim_trigger(
        self, run_id: str, due_at: str, new_due_at: str, *, stale_before: str, skew: timedelta
    ) -> bool:
        """The sweeper's claim of a due entry on the base table, by
        ``durable.core.leases.sweep_trigger``: True (invoke a worker) when the run is not
        terminal, still due at ``due_at`` and held by no live lease (its due time moves to
        ``new_due_at``); a run whose lease is live (``stale_before``: now minus ``skew``)
        is not invoked but becomes due when the lease can be taken over (``lease_until``
        plus ``skew``). Exactly one sweeper wins a due entry, and an entry the index
        showed stale (already moved) is skipped.
        """
        ...


class Ledger(LedgerReads, LedgerWrites, Protocol):
    """The single-table step ledger: its reads and its writes."""


LEDGER_READS: tuple[str, ...] = (
    "get_run",
    "load",
    "get_step",
    "get_steps",
    "read_gate",
    "due_runs",
    "list_runs",
    "open_runs",
)
LEDGER_WRITES: tuple[str, ...] = (
    "create_run",
    "purge_leftovers",
    "delete_run",
    "claim",
    "update_run",
    "continue_run",
    "operate",
    "start_child",
    "start_children",
    "finish_child",
    "write_gate",
    "write_step",
    "write_step_fenced",
    "complete_waiting",
    "extend_wait",
    "add_signal",
    "consume_signal",
    "claim_trigger",
)
"""The names of ``LedgerReads``' and ``LedgerWrites``' methods: between them, every method
of ``Ledger`` (a unit test holds them to the Protocols), for code that treats each kind
alike (crash targets, a read-only ledger's refusals)."""


class Timers(Protocol):
    """Durable timers (EventBridge Scheduler one-time schedules on AWS)."""

    def arm(
        self, run_id: str, position: str, wake_at: datetime, *, rearm_at: datetime | None = None
    ) -> None:
        """Create a one-time wake-up for the run. ``rearm_at`` (the time of re-arming)
        names a fresh schedule when a wait is re-armed after an early wake-up. An
        existing schedule of the same name counts as armed."""
        ...

    def cancel_run(self, run_id: str) -> None:
        """Delete the run's pending schedules; a missing one is not an error."""
        ...


class NoTimers:
    """No timer service: the sweeper alone wakes runs from the due index."""

    def arm(
        self, run_id: str, position: str, wake_at: datetime, *, rearm_at: datetime | None = None
    ) -> None:
        return None

    def cancel_run(self, run_id: str) -> None:
        return None


class Invoker(Protocol):
    """Starts a worker invocation for a run, asynchronously (fire and forget)."""

    def invoke(self, run_id: str, reason: str, hop: int = 0) -> None: ...


@dataclass(slots=True)
class EffectRecord:
    key: str
    status: str  # "INPROGRESS" | "COMPLETED"
    reference: str | None  # JSON text of what ``call`` returned
    expiration: int  # epoch seconds


class EffectStore(Protocol):
    """Side-effect keys of ``StepContext.effect`` (the idempotency table)."""

    def begin(self, key: str, expiration: int, *, now: int) -> EffectRecord | None:
        """Persist the key as in progress unless a record of it exists that has not
        expired at ``now`` (epoch seconds, the engine's clock); return that record."""
        ...

    def complete(self, key: str, reference: str, expiration: int) -> None: ...


class PayloadStore(Protocol):
    """Where values too large for a ledger item are kept (``durable.core.claim_check``): S3 on
    AWS, a folder under ``durable dev``, memory in tests. Keys are ``<run id>/<sha256>``:
    content-addressed, so a put is idempotent and a zombie's put of the same value is
    the same object."""

    def put(self, key: str, data: bytes, *, expire_days: int | None = None) -> None:
        """Store ``data`` under ``key``; ``expire_days`` (a class of
        ``durable.core.lifetime.LIFECYCLE_DAYS``) lets the store delete it that many days
        after this write, for nothing, as TTL does the items of a declared lifetime."""
        ...

    def get(self, key: str) -> bytes:
        """The object's bytes; ``StorageError`` when it is missing."""
        ...

    def delete_older(self, prefix: str, before: datetime) -> int:
        """Delete the objects under ``prefix`` written before ``before``; their count."""
        ...


@dataclass(frozen=True, slots=True)
class Invocation:
    """What the engine knows of the current compute invocation (a Lambda context)."""

    request_id: str | None = None
    log_stream: str | None = None
    remaining_seconds: Callable[[], float] | None = None  # None: unbounded (tests)


# --- crash injection ----------------------------------------------------------------------

CRASH_TARGETS: tuple[str, ...] = (
    "effects.begin",
    "effects.complete",
    "invoker.invoke",
    "ledger.add_signal",
    "ledger.claim",
    "ledger.claim_trigger",
    "ledger.complete_waiting",
    "ledger.consume_signal",
    "ledger.continue_run",
    "ledger.create_run",
    "ledger.delete_run",
    "ledger.due_runs",
    "ledger.extend_wait",
    "ledger.finish_child",
    "ledger.get_run",
    "ledger.get_step",
    "ledger.get_steps",
    "ledger.list_runs",
    "ledger.load",
    "ledger.open_runs",
    "ledger.operate",
    "ledger.purge_leftovers",
    "ledger.read_gate",
    "ledger.start_child",
    "ledger.start_children",
    "ledger.update_run",
    "ledger.write_gate",
    "ledger.write_step",
    "ledger.write_step_fenced",
    "payloads.delete_older",
    "payloads.get",
    "payloads.put",
    "timers.arm",
    "timers.cancel_run",
)
"""Where a crash can be injected: every method of the five ports, as ``port.method``.

``LocalRunner.crash_at`` (``durable.testing``) and the local-only ``DURABLE_CRASH_AT``
setting kill the worker right before or right after the k-th call of one of these. The
ports are ``ledger`` (``Ledger``), ``effects`` (``EffectStore``), ``timers`` (``Timers``),
``invoker`` (``Invoker``) and ``payloads`` (``PayloadStore``).
"""


def check_crash_target(target: str) -> str:
    """``target`` when it is one of ``CRASH_TARGETS``; a ``ValueError`` naming them otherwise.

    A crash point on a method the engine never calls would never fire, and a test relying
    on it would pass without testing anything: so an unknown name is refused up front.
    """
    if target not in CRASH_TARGETS:
        raise ValueError(
            f"unknown crash target {target!r}: the targets are port.method, one of "
            + ", ".join(CRASH_TARGETS)
        )
    return target
