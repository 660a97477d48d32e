"""How one invocation's replay ends: the fenced write that turns the way the workflow
stopped (suspended, handed off, returned, failed, canceled, continued as new) into the run
item's next state.

Two rules hold every ending together:

* **Nothing a finished run would start exists before the write that proves it may finish
  that way.** A continue-as-new successor is created in the same atomic write as the
  run's final state, so a cancel that lands first leaves no successor behind.
* **No error escapes while the lease is held.** Whatever goes wrong while concluding (a
  result or successor input the ledger cannot hold, input the workflow refuses, a bug)
  ends the run FAILED with a typed error and ``needs_attention``: a worker that died on
  it would only hand the same failure to the next one, forever.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from durable.core import serde
from durable.core.completion import BatchFailed
from durable.core.ids import new_ulid
from durable.core.lifetime import ended_purge_at, items_purge_at
from durable.core.model import RunError, RunHistory, RunRecord, RunStatus, format_time
from durable.core.ports import ConditionFailed, RunExists, RunGuard
from durable.core.retry import error_type_name
from durable.core.secrets import masked
from durable.engine.children import cancel_children, report_of
from durable.engine.events import hand_over_signals, unconsumed_signals
from durable.engine.interrupts import (
    ContinueAsNew,
    InboxChanged,
    WorkerInterrupted,
    message_of,
    summarize,
)
from durable.engine.lineage import hand_over_slot, is_schedule_gate, marker_output
from durable.engine.sagas import run_compensations
from durable.errors import (
    ChildFailed,
    Handoff,
    InvalidInput,
    LeaseLost,
    RunCanceled,
    StepFailed,
    StorageError,
    Suspend,
    TerminalError,
    WorkflowNotFound,
)

if TYPE_CHECKING:
    from durable.core.callables import WorkflowDef
    from durable.engine.engine_parts import EngineParts
    from durable.engine.execution_parts import ExecutionParts

# The execution an ending is driven for: the final writes take the run item, not the
# execution, in a dozen places, and the progress its code set rides in the one write they
# all end in (``final_write``). A context variable: workers of one process may drive
# several runs at once, and a child run driven inline nests.
_DRIVEN: ContextVar[ExecutionParts | None] = ContextVar("durable_driven", default=None)

log = logging.getLogger("durable.endings")

ACTIVE = (RunStatus.RUNNING.value, RunStatus.COMPENSATING.value)
FINISHED = frozenset({"succeeded", "failed", "canceled"})

# A worker without code for a run's workflow version defers it this long, doubling per
# deferral up to the cap: a deploy in progress finishes meanwhile (``durable.engine.engine``).
DEFER_FIRST = timedelta(seconds=15)
DEFER_MAX = timedelta(minutes=15)


class LifetimeExceeded(TerminalError):
    """A run was woken after ``max_run_lifetime``: its side-effect records may be gone."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one invocation ended, for handlers, tests and logs."""

    run_id: str
    # succeeded | failed | canceled | suspended | handed_off | busy | lease_lost | deferred
    result: str
    status: str | None = None


class Endings:
    """The run-item transitions that end an invocation; one per engine."""

    def __init__(self, engine: EngineParts) -> None:
        self.engine = engine
        self.ledger = engine.ledger
        self.clock = engine.clock
        self.config = engine.config

    # --- the way a replay stopped ----------------------------------------------------

    def drive(self, x: ExecutionParts) -> Outcome:
        """Run the replay and turn the way it stopped into the run item's next state.

        ``InboxChanged`` (reload and replay again) and retryable storage errors (the
        ledger is unavailable: crash-only, after releasing the lease) propagate; any
        other error while concluding fails the run for good, with attention.
        """
        driven = _DRIVEN.set(x)
        try:
            return self._settle(x, lambda: self._conclude(x))
        except StorageError as error:
            if error.retryable:
                self._release(x)
                raise
            return self._finish_failed(x.run, x.owner, error, attention=True, cancel_ok=True)
        except Exception as error:  # concluding failed: park the run, never crash-loop
            return self._finish_failed(x.run, x.owner, error, attention=True, cancel_ok=True)
        finally:
            _DRIVEN.reset(driven)

    def _settle(self, x: ExecutionParts, act: Callable[[], Outcome]) -> Outcome:
        """``act``'s outcome, the control-flow signals it raised turned into theirs. An
        ending may run workflow code again (a cancel that beat a continue-as-new runs the
        compensations, which may back off or lose the lease), so its signals are settled
        the same way."""
        run_id = x.run.run_id
        try:
            return act()
        except Suspend:
            return Outcome(run_id, "suspended", RunStatus.WAITING.value)
        except Handoff:
            return self._handoff(x)
        except LeaseLost:
            return Outcome(run_id, "lease_lost")
        except ContinueAsNew as c:
            value = c.input_value
            return self._settle(x, lambda: self._continue_as_new(x, value))

    def _conclude(self, x: ExecutionParts) -> Outcome:
        try:
            try:
                result = x.run_workflow()
            except StorageError as error:
                if error.retryable:
                    # The ledger failed, not the workflow: failing the run (and compensating)
                    # over a throttle or a lost connection would end it for good.
                    raise
                return self._after_failure(x, error)
            except Exception as error:
                return self._after_failure(x, error)
            if x.nondeterminism is not None:  # user code swallowed it: still park the run
                return self._finish_failed(x.run, x.owner, x.nondeterminism, attention=True)
            if x.poisoned and not x.poison_failed:
                # Workers died max_takeovers times with every step recorded: what kills
                # them is the ending itself (a result too big to serialize in memory).
                return self._finish_failed(
                    x.run, x.owner, _died(self.config.max_takeovers, "ending"), attention=True
                )
            try:
                output = x.redact(x.encode(result, x.workflow.return_annotation))
            except (TypeError, ValueError) as error:
                return self._after_failure(x, error)
            return self._finish(
                x.run,
                x.owner,
                {
                    "status": RunStatus.SUCCEEDED.value,
                    "output": output,
                    "needs_attention": x.poison_failed,
                },
                execution=x,
            )
        except RunCanceled:
            return self._cancel(x)

    def _after_failure(self, x: ExecutionParts, error: Exception) -> Outcome:
        """Compensate (unless the code itself is in doubt), then record the failure.

        A failure wins over a cancel that lands meanwhile: the run did fail, and its
        error and position are what an operator needs."""
        if x.nondeterminism is not None:  # never compensate on a replay we cannot trust
            return self._finish_failed(x.run, x.owner, x.nondeterminism, attention=True)
        undo_failed = run_compensations(x, mark_status=True) if x.compensations else None
        return self._finish_failed(
            x.run,
            x.owner,
            error,
            attention=x.poison_failed or undo_failed is not None,
            undo_failed=undo_failed,
            compensated=x.compensated,
            cancel_ok=True,
        )

    def _cancel(self, x: ExecutionParts) -> Outcome:
        if x.run.children:
            # Before its own end: a crash in between cancels them again (idempotent).
            cancel_children(self.engine, x.run, x.steps)
        undo_failed = None
        if x.run.cancel_compensate and x.compensations:
            undo_failed = run_compensations(x, mark_status=True)
        if undo_failed is not None:
            cause = RunError("Canceled", x.run.cancel_reason or "canceled")
            return self._finish_failed(
                x.run,
                x.owner,
                undo_failed,
                attention=True,
                cause=cause,
                cancel_ok=True,
                compensated=True,
            )
        return self.write_canceled(x.run, x.owner, compensated=x.compensated)

    # --- run-item transitions --------------------------------------------------------

    def final_changes(self, run: RunRecord, changes: dict[str, Any]) -> dict[str, Any]:
        now = self.clock.now()
        if run.items_purge_at is not None:
            # Written again unchanged, for the payload store: a large result is kept
            # as long as the items (``durable.core.claim_check``).
            changes = {**changes, "items_purge_at": run.items_purge_at}
        return {
            **changes,
            "lease_owner": None,
            "lease_until": None,
            "due_at": None,
            "updated_at": format_time(now),
            "purge_at": ended_purge_at(run, now, self.config.retention),
        }

    def _finish(
        self,
        run: RunRecord,
        owner: str,
        changes: dict[str, Any],
        *,
        execution: ExecutionParts | None = None,
        cancel_ok: bool = False,
    ) -> Outcome:
        """The final write: fenced, on an active status, and never over a cancel request
        unless ``cancel_ok``.

        A cancel that landed after the last step wins over success: with ``execution``
        (the success path) it re-enters cancellation so requested compensations run. A
        result the run item cannot hold fails the run instead (nothing was written).
        """
        guard = RunGuard(fence=run.fence, owner=owner, statuses=ACTIVE, no_cancel=not cancel_ok)
        try:
            stored = self.final_write(run, guard, self.final_changes(run, changes))
        except ConditionFailed as e:
            current = e.current
            if current is not None and current.fence == run.fence and current.cancel_requested:
                if execution is not None:
                    execution.run = current
                    raise RunCanceled(current.cancel_reason or "canceled") from e
                return self.write_canceled(current, owner)
            return Outcome(run.run_id, "lease_lost")
        return Outcome(run.run_id, stored.status.value.lower(), stored.status.value)

    def _finish_failed(
        self,
        run: RunRecord,
        owner: str,
        error: BaseException,
        *,
        attention: bool,
        undo_failed: BaseException | None = None,
        cause: RunError | None = None,
        cancel_ok: bool = False,
        compensated: bool = False,
    ) -> Outcome:
        """FAILED with the original error; a failed compensation is appended, never lost."""
        err = cause or RunError(
            type=error_type_name(error),
            message=message_of(error),
            retryable=False,
            position=failed_position(error),
        )
        if undo_failed is not None:
            err = RunError(
                err.type,
                f"{err.message} | then compensation failed: {summarize(undo_failed)}",
                False,
                err.position,
            )
        elif cause is not None:
            err = RunError(err.type, f"{err.message} | then: {summarize(error)}", False)
        changes: dict[str, Any] = {
            "status": RunStatus.FAILED.value,
            "error": err,
            "needs_attention": attention,
        }
        if compensated:
            changes["compensated"] = True
        return self._finish(run, owner, changes, cancel_ok=cancel_ok)

    def fail_for_good(self, run: RunRecord, owner: str, error: BaseException) -> Outcome:
        """End a claimed run FAILED with attention before replaying it (its lifetime is
        over)."""
        return self._finish_failed(run, owner, error, attention=True, cancel_ok=True)

    def write_canceled(self, run: RunRecord, owner: str, *, compensated: bool = False) -> Outcome:
        """CANCELED; ``compensated`` when its compensations ran (and all succeeded), so the
        run shows that its earlier steps were undone."""
        changes = self.final_changes(
            run,
            {
                "status": RunStatus.CANCELED.value,
                "error": RunError("Canceled", run.cancel_reason or "canceled"),
                **({"compensated": True} if compensated else {}),
            },
        )
        try:
            self.final_write(run, RunGuard(fence=run.fence, owner=owner), changes)
        except ConditionFailed:
            return Outcome(run.run_id, "lease_lost")
        return Outcome(run.run_id, "canceled", RunStatus.CANCELED.value)

    def final_write(self, run: RunRecord, guard: RunGuard, changes: dict[str, Any]) -> RunRecord:
        """The run's last write; a child's then reports its end to its parent and wakes
        it (``durable.engine.children``: a report lost in between, the parent finds)."""
        driven = _DRIVEN.get()
        if driven is not None and driven.run.run_id == run.run_id:
            changes = {**changes, **driven.progress_changes()}
        report = report_of(run, changes)
        if report is None:
            return self.ledger.update_run(run.run_id, guard, changes)
        now = format_time(self.clock.now())
        stored, taken = self.ledger.finish_child(run.run_id, guard, changes, report, now=now)
        if taken and self._parent_needs_a_worker(report.parent_id, now):
            self.engine.invoke_worker(report.parent_id, "child")
        return stored

    def _parent_needs_a_worker(self, parent_id: str, now: str) -> bool:
        """Whether the parent that took a report must be invoked: not while a live
        owner holds it (read after the report, so that owner's next suspension finds the
        inbox moved and reloads). A map's thousand children finishing while their parent
        runs cost a thousand reads, not a thousand invocations that cannot claim it; a
        parent waiting for a child is due at its next look at it, so the sweeper covers a
        read that lied (later)."""
        try:
            parent = self.ledger.get_run(parent_id)
        except Exception:
            return True
        if parent is None or parent.terminal:
            return False
        return parent.lease_owner is None or (parent.lease_until or "") < now

    def _handoff(self, x: ExecutionParts) -> Outcome:
        """Release the lease with a due time first, then invoke a fresh worker."""
        now = self.clock.now()
        try:
            x.run = self.ledger.update_run(
                x.run.run_id,
                x.guard(),
                {
                    "lease_owner": None,
                    "lease_until": None,
                    "due_at": format_time(now + self.config.handoff_grace),
                    "updated_at": format_time(now),
                    **x.progress_changes(),
                },
            )
        except ConditionFailed:
            return Outcome(x.run.run_id, "lease_lost")
        self.engine.invoke_worker(x.run.run_id, "continue", x.hop + 1)
        return Outcome(x.run.run_id, "handed_off", x.run.status.value)

    def _release(self, x: ExecutionParts) -> None:
        """After a transient storage failure: give the lease back with a due time, so the
        next worker need not wait for it to expire. Best effort: the storage may still be
        failing, and then the lease expires on its own."""
        due = self.clock.now() + self.config.handoff_grace
        with contextlib.suppress(ConditionFailed, StorageError):
            self.ledger.update_run(
                x.run.run_id,
                x.guard(),
                {
                    "lease_owner": None,
                    "lease_until": None,
                    "due_at": format_time(due),
                    **x.progress_changes(),
                },
            )

    def defer(self, history: RunHistory, owner: str, why: BaseException) -> Outcome:
        """No code here for the run's workflow version (a deploy in progress): give the
        run back, due again after a delay that doubles per deferral, without failing it."""
        run = history.run
        delay = min(DEFER_FIRST * 2**run.deferrals, DEFER_MAX)
        now = self.clock.now()
        status = RunStatus.WAITING if history.steps else RunStatus.PENDING
        try:
            self.ledger.update_run(
                run.run_id,
                RunGuard(fence=run.fence, owner=owner),
                {
                    "status": status.value,
                    "lease_owner": None,
                    "lease_until": None,
                    "due_at": format_time(now + delay),
                    "updated_at": format_time(now),
                    "deferrals": run.deferrals + 1,
                },
            )
        except ConditionFailed:
            return Outcome(run.run_id, "lease_lost")
        return Outcome(run.run_id, "deferred", status.value)

    def _continue_as_new(self, x: ExecutionParts, input_value: Any) -> Outcome:
        """End this run and create its successor in one atomic write (a cancel that lands
        first wins and starts nothing), then invoke the successor.

        The successor's id is a fresh ULID, never one derived from this run: anyone who
        can start keyed runs could otherwise create a run under it first.

        The write is also guarded by the inbox this replay saw: a signal (or any event)
        that arrived since is replayed first (``InboxChanged``), so the signals the run
        leaves unconsumed are exactly the ones this replay holds. Those are handed to the
        successor right after the write, before it is invoked, and the count goes in the
        marker (``durable.engine.events.hand_over_signals``): a worker that dies in
        between leaves the successor a count its own first invocation makes good.
        """
        successor = self._successor(x, input_value)
        left = unconsumed_signals(x.signals, x.steps)
        output = serde.canonical_json(marker_output(successor.run_id, len(left)))
        changes = self.final_changes(x.run, {"status": RunStatus.SUCCEEDED.value, "output": output})
        changes.update(x.progress_changes())  # the predecessor's last word; not the successor's
        guard = RunGuard(
            fence=x.run.fence,
            owner=x.owner,
            statuses=ACTIVE,
            no_cancel=True,
            inbox=x.events_inbox,
        )
        try:
            self.ledger.continue_run(x.run.run_id, guard, changes, successor)
        except ConditionFailed as e:
            current = e.current
            if current is not None and current.fence == x.run.fence and current.cancel_requested:
                x.run = current
                return self._cancel(x)
            if (
                current is not None
                and (current.fence, current.lease_owner) == (x.run.fence, x.owner)
                and current.inbox != x.events_inbox
            ):
                raise InboxChanged(current.inbox) from e  # an event came: replay with it
            return Outcome(x.run.run_id, "lease_lost")
        except RunExists as e:  # a ULID collision: never in practice, and never adopted
            raise StorageError("successor id taken; try again", retryable=True) from e
        gate = successor.gate
        # A schedule's one slot goes to the successor, not back to the gate: the buffered
        # fire waits for the chain, not for this link. A successor canceled before it got
        # the slot gives it up at once, as a canceled holder does.
        if (
            gate is not None
            and is_schedule_gate(gate)
            and gate == x.run.gate
            and hand_over_slot(self.ledger, gate, x.run.run_id, successor.run_id)
        ):
            self.engine.leave_gate(successor)
        if left:
            hand_over_signals(
                self.engine, x.run.run_id, left, successor.run_id, successor.items_purge_at
            )
        self.engine.invoke_worker(successor.run_id, "start")
        return Outcome(x.run.run_id, "succeeded", RunStatus.SUCCEEDED.value)

    def _successor(self, x: ExecutionParts, input_value: Any) -> RunRecord:
        """The successor's run item (nothing written). It runs the version a new start
        would (the newest registered here) when that version takes its input as this
        version does, so a looping chain leaves an old version once a new one is
        deployed; else the version this run ran. "Takes it as this version does": it
        validates, and what it stores keeps every field and value this version's
        encoding has (``keeps_state``). Validating alone is not enough: a model ignores
        fields it does not know and fills its own with defaults, and lax validation
        turns a 1 into True, so a changed state type would validate and the loop would
        go on from a state that lost its place. It keeps this run's schedule gate (a
        buffer_one schedule's one slot); any other gate is the one its own input names,
        as for any start."""
        now = self.clock.now()
        stamp = format_time(now)
        successor_id = new_ulid(now)
        own = x.workflow
        kept_gate = x.run.gate if is_schedule_gate(x.run.gate) else None

        def encoded(wf: WorkflowDef) -> tuple[str, str | None, str | None]:
            sealer, data_key = self.engine.new_sealer(successor_id, wf.input_annotation)
            if not wf.takes_input and input_value is not None:
                raise InvalidInput(f"workflow {wf.name!r} takes no input", field="input")
            text = serde.validate_input(input_value, wf.input_annotation, wf.name, sealer)
            return text, data_key, kept_gate or self.engine.admission.gate_for(wf, text)

        # This version's first: an input it refuses fails the run, as it always did.
        chosen, (input_text, data_key, gate) = own, encoded(own)
        try:
            newest = self.engine.app.get_workflow(own.name)
        except WorkflowNotFound:
            newest = own
        if newest.version > own.version:
            try:
                candidate = encoded(newest)
            except StorageError:
                raise  # the key service or the store, not the version: try the ending again
            except Exception as refused:  # the newest version's problem, never this run's
                log.info(
                    "run %s stays on version %s: version %s refuses its successor's input (%s)",
                    x.run.run_id,
                    own.version,
                    newest.version,
                    refused,
                )
            else:
                if keeps_state(input_text, candidate[0]):
                    chosen, (input_text, data_key, gate) = newest, candidate
        return RunRecord(
            run_id=successor_id,
            workflow=chosen.name,
            version=chosen.version,
            status=RunStatus.PENDING,
            input=input_text,
            input_hash=serde.identity_hash(input_text),
            created_at=stamp,
            updated_at=stamp,
            requested_by=x.run.requested_by,
            due_at=stamp,
            continued_from=x.run.run_id,
            data_key=data_key,
            gate=gate,
            # The successor's own lifetime, from its own start (``durable.core.lifetime``).
            items_purge_at=items_purge_at(stamp, chosen.max_lifetime, self.config.retention),
        )


def keeps_state(old_text: str, new_text: str) -> bool:
    """Whether the input ``new_text`` (a successor's, encoded for the newest version)
    holds everything ``old_text`` (the same value encoded for the run's own version)
    does: each field with the same value, lists of the same length, numbers equal and
    never a number read as a boolean. New fields are allowed (a default the newest
    version added). Sealed secrets are compared by their place only: each encoding
    seals under a data key of its own."""
    return _holds(masked(json.loads(old_text)), masked(json.loads(new_text)))


def _holds(old: Any, new: Any) -> bool:
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and _holds(v, new[k]) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(old) == len(new) and all(map(_holds, old, new))
    if isinstance(old, bool) or isinstance(new, bool):
        return type(old) is type(new) and old == new
    if isinstance(old, int | float) and isinstance(new, int | float):
        return old == new
    return type(old) is type(new) and bool(old == new)


def _died(times: int, where: str) -> WorkerInterrupted:
    return WorkerInterrupted(
        f"the worker died {times} times in this run's {where} (timeout, out of memory or "
        "crash); fix it and retry the run"
    )


def failed_position(error: BaseException) -> str | None:
    """The step whose failure ended the run: the StepFailed (or ChildFailed) the workflow
    let escape, or the one it was handling when it raised (``raise X from e`` and a raise
    inside ``except``). A step failure the workflow caught and moved past is not in the
    chain; one inside a decided batch (under a ``BatchFailed``) is not the run's to redo."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, BatchFailed):
            # Decided: the batch's decision is a fact of the run, which a retry replays
            # (it fails the same way); nothing under it is reopened.
            return None
        if isinstance(current, StepFailed | ChildFailed):
            return current.position
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
