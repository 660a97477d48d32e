"""Engine operations: start runs, drive invocations, read the ledger.

``resume`` is one worker invocation (DESIGN section 3): claim first, then load, replay
the workflow, and turn the way it stopped (suspend, hand-off, result, failure, lost
lease) into exactly one conditional write on the run item.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from durable import serde
from durable.clock import Clock, SystemClock
from durable.config import EngineConfig
from durable.determinism import Guard, NoGuard
from durable.effects import Effects
from durable.errors import (
    DurableError,
    Handoff,
    IdempotencyConflict,
    InvalidInput,
    LeaseLost,
    RunCanceled,
    RunNotFound,
    StepFailed,
    StorageError,
    Suspend,
    WorkflowNotFound,
)
from durable.execution import Execution
from durable.ids import check_idempotency_key, derived_run_id, new_ulid
from durable.interrupts import ContinueAsNew, InboxChanged, summarize
from durable.model import (
    RunError,
    RunHistory,
    RunRecord,
    RunStatus,
    SignalRecord,
    StepRecord,
    format_time,
)
from durable.ports import (
    Claim,
    ConditionFailed,
    EffectStore,
    Invocation,
    Invoker,
    Ledger,
    NoTimers,
    Page,
    RunExists,
    RunGuard,
    Timers,
)
from durable.registry import App
from durable.retention import incarnation, purge_expired, without_leftovers
from durable.retry import error_type_name
from durable.sagas import run_compensations
from durable.sweeper import SweepReport, sweep

log = logging.getLogger("durable.engine")

ACTIVE = (RunStatus.RUNNING.value, RunStatus.COMPENSATING.value)
FINISHED = frozenset({"succeeded", "failed", "canceled"})


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one invocation ended, for handlers, tests and logs."""

    run_id: str
    result: str  # succeeded | failed | canceled | suspended | handed_off | busy | lease_lost
    status: str | None = None


class Engine:
    def __init__(
        self,
        app: App,
        ledger: Ledger,
        invoker: Invoker,
        effects: EffectStore,
        *,
        clock: Clock | None = None,
        config: EngineConfig | None = None,
        guard: Guard | None = None,
        timers: Timers | None = None,
    ) -> None:
        self.app = app
        self.ledger = ledger
        self.invoker = invoker
        self.clock = clock or SystemClock()
        self.config = config or EngineConfig()
        self.effects = Effects(effects, self.config)
        self.guard: Guard = guard or NoGuard()
        self.timers: Timers = timers or NoTimers()

    # --- timers ------------------------------------------------------------------------

    def arm_timer(
        self, run_id: str, position: str, wake_at: datetime, *, rearm_at: datetime | None = None
    ) -> None:
        """Arm a wake-up; a failure is logged, not raised: the due index is the backstop."""
        try:
            self.timers.arm(run_id, position, wake_at, rearm_at=rearm_at)
        except Exception:
            log.warning(
                "arming a timer for run %s failed; the sweeper will wake it", run_id, exc_info=True
            )

    def _cancel_timers(self, run_id: str) -> None:
        try:
            self.timers.cancel_run(run_id)
        except Exception:  # a leftover schedule only causes a harmless extra invocation
            log.warning("deleting the timers of run %s failed", run_id, exc_info=True)

    # --- starting ------------------------------------------------------------------

    def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        requested_by: str | None = None,
        version: int | None = None,
    ) -> RunRecord:
        """Create a run and invoke a worker for it.

        Invalid input raises ``InvalidInput`` and writes nothing. With an idempotency key
        (scoped to the workflow) the same key and input return the same run; the same key
        with another input raises ``IdempotencyConflict``.
        """
        wf = self.app.get_workflow(workflow, version)
        if not wf.takes_input and input is not None:
            raise InvalidInput(
                f"workflow {workflow!r} takes no input; start it without one", field="input"
            )
        input_text = serde.validate_input(input, wf.input_annotation, workflow)
        input_hash = serde.sha256_hex(input_text)
        now = self.clock.now()
        stamp = format_time(now)
        if idempotency_key is not None:
            check_idempotency_key(idempotency_key, "idempotency_key")
            run_id = derived_run_id(workflow, idempotency_key)
        else:
            run_id = new_ulid(now)
        run = RunRecord(
            run_id=run_id,
            workflow=wf.name,
            version=wf.version,
            status=RunStatus.PENDING,
            input=input_text,
            input_hash=input_hash,
            created_at=stamp,
            updated_at=stamp,
            requested_by=requested_by,
            idempotency_key=idempotency_key,
            # Due at once: if the invocation below is lost, the sweeper starts the run.
            due_at=stamp,
        )
        try:
            created = self.ledger.create_run(run)
        except RunExists as e:
            if e.existing.input_hash != input_hash or e.existing.workflow != wf.name:
                raise IdempotencyConflict(
                    f"idempotency key {idempotency_key!r} was already used for run "
                    f"{e.existing.run_id} with a different input; use a new key"
                ) from e
            return e.existing
        self._invoke(run_id, "start", 0)
        return created

    def invoke_worker(self, run_id: str, reason: str) -> None:
        self._invoke(run_id, reason, 0)

    def _invoke(self, run_id: str, reason: str, hop: int) -> None:
        try:
            self.invoker.invoke(run_id, reason, hop)
        except Exception:  # the due time is already set: the sweeper will pick it up
            log.warning(
                "invoking a worker for run %s failed; the sweeper will retry", run_id, exc_info=True
            )

    # --- driving -------------------------------------------------------------------

    def resume(
        self,
        run_id: str,
        invocation: Invocation | None = None,
        hop: int = 0,
        reason: str = "",
    ) -> Outcome:
        """One worker invocation for ``run_id`` (``reason``: start, continue, timer, ...)."""
        invocation = invocation or Invocation()
        owner = uuid.uuid4().hex  # fresh per execution: Lambda retries reuse request ids
        now = self.clock.now()
        lease = self.config.lease
        if invocation.remaining_seconds is not None:
            # The lease covers the whole invocation and the overrun renewals allow too:
            # nobody takes over a worker that may still be running.
            remaining = timedelta(seconds=max(invocation.remaining_seconds(), 1.0))
            lease = remaining + self.config.deadline_overrun
        claim = self.ledger.claim(
            run_id,
            owner,
            now=format_time(now),
            lease_until=format_time(now + lease),
            stale_before=format_time(now - self.config.clock_skew),
            # Due when a takeover could succeed: the sweeper then finds a dead owner
            # exactly when a new worker can claim the run, not a skew margin too early.
            due_at=format_time(now + lease + self.config.clock_skew),
        )
        if claim is None:
            return Outcome(run_id, "busy")
        history = without_leftovers(self.ledger, self.ledger.load(run_id))
        if history is None:
            return Outcome(run_id, "busy")
        history.run = claim.run
        try:
            wf = self.app.get_workflow(claim.run.workflow, claim.run.version)
        except WorkflowNotFound as e:
            return self._finish_failed(claim.run, owner, e, attention=True)
        try:
            poisoned = self._count_takeover(claim, history, owner)
        except LeaseLost:
            return Outcome(run_id, "lease_lost")
        while True:
            x = Execution(
                self, wf, history, owner, invocation, poisoned=poisoned, hop=hop, reason=reason
            )
            try:
                outcome = self._drive(x)
            except InboxChanged:
                reloaded = self.ledger.load(run_id)
                if reloaded is None:
                    return Outcome(run_id, "lease_lost")
                history = reloaded
                poisoned = x.poisoned and not x.poison_failed
                continue
            if outcome.result in FINISHED and x.has_timers():
                self._cancel_timers(run_id)
            return outcome

    def _count_takeover(self, claim: Claim, history: RunHistory, owner: str) -> bool:
        """Whether the run's current step killed ``max_takeovers`` workers in a row."""
        if not claim.took_over:
            return False
        run = claim.run
        progress = sum(1 for s in history.steps.values() if s.status.final)
        if run.takeover_mark != progress:
            try:
                history.run = self.ledger.update_run(
                    run.run_id,
                    RunGuard(fence=run.fence, owner=owner),
                    {"takeovers": 1, "takeover_mark": progress},
                )
            except ConditionFailed as e:
                raise LeaseLost() from e
            return self.config.max_takeovers <= 1
        return run.takeovers >= self.config.max_takeovers

    def _drive(self, x: Execution) -> Outcome:
        """Turn the way this replay stopped into the run item's next state."""
        run_id = x.run.run_id
        try:
            return self._conclude(x)
        except Suspend:
            return Outcome(run_id, "suspended", RunStatus.WAITING.value)
        except Handoff:
            return self._handoff(x)
        except LeaseLost:
            return Outcome(run_id, "lease_lost")
        except ContinueAsNew as c:
            return self._continue_as_new(x, c.input_value)

    def _conclude(self, x: Execution) -> Outcome:
        try:
            try:
                result = x.run_workflow()
            except StorageError as error:
                if error.retryable:
                    # The ledger failed, not the workflow: failing the run (and compensating)
                    # over a throttle or a lost connection would end it for good. Crash-only
                    # instead: this invocation fails, the lease expires, the next one replays.
                    raise
                return self._after_failure(x, error)
            except Exception as error:
                return self._after_failure(x, error)
            if x.nondeterminism is not None:  # user code swallowed it: still park the run
                return self._finish_failed(x.run, x.owner, x.nondeterminism, attention=True)
            try:
                output = serde.encode(result, x.workflow.return_annotation)
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

    def _after_failure(self, x: Execution, error: Exception) -> Outcome:
        """Compensate (unless the code itself is in doubt), then record the failure."""
        if x.nondeterminism is not None:  # never compensate on a replay we cannot trust
            return self._finish_failed(x.run, x.owner, x.nondeterminism, attention=True)
        undo_failed = run_compensations(x, mark_status=True) if x.compensations else None
        return self._finish_failed(
            x.run,
            x.owner,
            error,
            attention=x.poison_failed or undo_failed is not None,
            undo_failed=undo_failed,
        )

    def _cancel(self, x: Execution) -> Outcome:
        undo_failed = None
        if x.run.cancel_compensate and x.compensations:
            undo_failed = run_compensations(x, mark_status=True)
        if undo_failed is not None:
            cause = RunError("Canceled", x.run.cancel_reason or "canceled")
            return self._finish_failed(
                x.run, x.owner, undo_failed, attention=True, cause=cause, cancel_ok=True
            )
        return self._write_canceled(x.run, x.owner)

    # --- run-item transitions --------------------------------------------------------

    def _final_changes(self, changes: dict[str, Any]) -> dict[str, Any]:
        now = self.clock.now()
        return {
            **changes,
            "lease_owner": None,
            "lease_until": None,
            "due_at": None,
            "updated_at": format_time(now),
            "purge_at": int((now + self.config.retention).timestamp()),
        }

    def _finish(
        self,
        run: RunRecord,
        owner: str,
        changes: dict[str, Any],
        *,
        execution: Execution | None = None,
        cancel_ok: bool = False,
    ) -> Outcome:
        """The final write: fenced, on an active status, and never over a cancel request.

        A cancel that landed after the last step wins over success: with ``execution``
        (the success path) it re-enters cancellation so requested compensations run.
        """
        guard = RunGuard(fence=run.fence, owner=owner, statuses=ACTIVE, no_cancel=not cancel_ok)
        try:
            stored = self.ledger.update_run(run.run_id, guard, self._final_changes(changes))
        except ConditionFailed as e:
            current = e.current
            if current is not None and current.fence == run.fence and current.cancel_requested:
                if execution is not None:
                    execution.run = current
                    raise RunCanceled(current.cancel_reason or "canceled") from e
                return self._write_canceled(current, owner)
            return Outcome(run.run_id, "lease_lost")
        return Outcome(run.run_id, stored.status.value.lower(), stored.status.value)

    def purge_expired(self, run_id: str) -> int:
        """What the purge on the table's stream does once a run item has expired: delete
        the steps and signals it left (``durable.retention``)."""
        return purge_expired(self.ledger, run_id, self.clock.now())

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
    ) -> Outcome:
        """FAILED with the original error; a failed compensation is appended, never lost."""
        err = cause or RunError(
            type=error_type_name(error),
            message=summarize(error),
            retryable=False,
            position=failed_position(error),
        )
        if undo_failed is not None:
            err = RunError(
                err.type,
                f"{err.message} | then compensation failed: {summarize(undo_failed)}",
                False,
            )
        elif cause is not None:
            err = RunError(err.type, f"{err.message} | then: {summarize(error)}", False)
        return self._finish(
            run,
            owner,
            {"status": RunStatus.FAILED.value, "error": err, "needs_attention": attention},
            cancel_ok=cancel_ok,
        )

    def _write_canceled(self, run: RunRecord, owner: str) -> Outcome:
        changes = self._final_changes(
            {
                "status": RunStatus.CANCELED.value,
                "error": RunError("Canceled", run.cancel_reason or "canceled"),
            }
        )
        try:
            self.ledger.update_run(run.run_id, RunGuard(fence=run.fence, owner=owner), changes)
        except ConditionFailed:
            return Outcome(run.run_id, "lease_lost")
        return Outcome(run.run_id, "canceled", RunStatus.CANCELED.value)

    def _handoff(self, x: Execution) -> Outcome:
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
                },
            )
        except ConditionFailed:
            return Outcome(x.run.run_id, "lease_lost")
        self._invoke(x.run.run_id, "continue", x.hop + 1)
        return Outcome(x.run.run_id, "handed_off", x.run.status.value)

    def _continue_as_new(self, x: Execution, input_value: Any) -> Outcome:
        """Start the successor (id derived from this run, so a retry finds it), then end."""
        wf = x.workflow
        input_text = serde.validate_input(input_value, wf.input_annotation, wf.name)
        stamp = format_time(self.clock.now())
        successor = RunRecord(
            # Derived, so a retry of this transition finds it; with the incarnation, so a
            # later run under this id (a keyed start after expiry) gets its own successor.
            run_id=derived_run_id(wf.name, f"continue:{x.run.run_id}.{incarnation(x.run)}"),
            workflow=wf.name,
            version=wf.version,
            status=RunStatus.PENDING,
            input=input_text,
            input_hash=serde.sha256_hex(input_text),
            created_at=stamp,
            updated_at=stamp,
            requested_by=x.run.requested_by,
            due_at=stamp,
            continued_from=x.run.run_id,
        )
        with contextlib.suppress(RunExists):  # created by an earlier try of this transition
            self.ledger.create_run(successor)
        output = serde.canonical_json({"continued_as_new": successor.run_id})
        outcome = self._finish(
            x.run, x.owner, {"status": RunStatus.SUCCEEDED.value, "output": output}
        )
        if outcome.result == "succeeded":
            self._invoke(successor.run_id, "start", 0)
        return outcome

    # --- external events ------------------------------------------------------------

    def complete_callback(self, token: str, result: Any = None, error: Any = None) -> str:
        """Answer a callback: ``result`` (any JSON) or ``error`` ({type, message}).

        Raises ``InvalidInput`` (malformed), ``CallbackNotFound`` (unknown or forged),
        ``CallbackAlreadyCompleted`` (used), ``CallbackExpired`` (timed out); nothing is
        written in any of these. Returns the run id.
        """
        from durable.events import complete_callback

        return complete_callback(self, token, result, error)

    def signal(
        self, run_id: str, name: str, payload: Any = None, *, key: str | None = None
    ) -> SignalRecord:
        """Deliver a named signal; buffered until the run waits for it.

        With an idempotency ``key`` (1-256 characters, no control characters; scoped to
        the run and the signal's name) the signal is stored once: a repeat with the same
        payload returns the stored signal (same ``signal_id``) and writes nothing; another
        payload raises ``IdempotencyConflict``. Without one, every call stores a new signal.
        """
        from durable.events import send_signal

        return send_signal(self, run_id, name, payload, key).signal

    def sweep(self, now: datetime | None = None) -> SweepReport:
        """Invoke a worker for every run due before ``now - sweep_grace`` (capped)."""
        return sweep(self, now)

    # --- operator decisions -----------------------------------------------------------

    def cancel(
        self,
        run_id: str,
        reason: str,
        compensate: bool = False,
        requested_by: str | None = None,
    ) -> RunRecord:
        """Ask a run to stop. A waiting run is canceled at once (timers deleted); a
        running one stops at its next lease check or durable call (its in-flight step
        finishes and is recorded). With ``compensate`` the registered compensations run
        first. Canceling a finished run raises ``InvalidState``; twice is harmless."""
        from durable.operations import cancel

        return cancel(self, run_id, reason, compensate, requested_by)

    def retry(
        self, run_id: str, upgrade_to: int | None = None, requested_by: str | None = None
    ) -> RunRecord:
        """Re-run a FAILED run from its failed step, keeping completed steps and the failed
        step's checkpoint. ``upgrade_to`` re-pins it to a newer version, only if that
        version replays the recorded steps without non-determinism."""
        from durable.operations import retry

        return retry(self, run_id, upgrade_to, requested_by)

    def fork(self, run_id: str, from_step: int | str, requested_by: str | None = None) -> RunRecord:
        """Start a new run with the ledger of ``run_id`` up to (not including) step
        ``from_step``, re-executing from there."""
        from durable.operations import fork

        return fork(self, run_id, from_step, requested_by)

    # --- reading -------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord:
        run = self.ledger.get_run(run_id)
        if run is None:
            raise RunNotFound(f"no run {run_id!r}; list runs to find its id")
        return run

    def history(self, run_id: str) -> list[StepRecord]:
        loaded = self.ledger.load(run_id)
        if loaded is None:
            raise RunNotFound(f"no run {run_id!r}; list runs to find its id")
        return [loaded.steps[p] for p in sorted(loaded.steps)]

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
        if status is not None and status not in RunStatus.__members__:
            raise DurableError(
                f"unknown status {status!r}; use one of {', '.join(RunStatus.__members__)}"
            )
        return self.ledger.list_runs(
            workflow=workflow,
            status=status,
            needs_attention=needs_attention,
            version=version,
            limit=limit,
            cursor=cursor,
        )


def failed_position(error: BaseException) -> str | None:
    """The step whose failure ended the run: the StepFailed the workflow let escape, or
    the one it was handling when it raised (``raise X from e`` and a raise inside
    ``except``). A step failure the workflow caught and moved past is not in the chain."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, StepFailed):
            return current.position
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
