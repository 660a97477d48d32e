"""Compensation (sagas): undo completed steps in reverse when a run fails or is canceled.

Each compensation is a durable step of kind ``compensation`` at the next positions after
the failure, with its own record, idempotency key and retry policy, so a crash during
compensation resumes it without repeating an undo that was recorded: the replay fails at
the same point and reaches the same positions. An undo whose worker died before its record
was written runs again: compensations are at least once, like every step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from durable.core.callables import callable_name
from durable.core.model import RunStatus, StepKind, format_time
from durable.core.ports import ConditionFailed
from durable.errors import LeaseLost, StepFailed

if TYPE_CHECKING:
    from durable.engine.execution_parts import ExecutionParts


def compensation_name(undo_name: str) -> str:
    return f"compensate:{undo_name}"


def run_compensations(x: ExecutionParts, *, mark_status: bool) -> StepFailed | None:
    """Run every registered compensation, newest first; stop at one that fails for good.

    Returns that failure (never skipped: the caller parks the run), or None. With
    ``mark_status`` (the run is ending: failed or canceled) the run item shows COMPENSATING
    while they run, and they take positions past everything the interrupted code path
    recorded.
    """
    if mark_status:
        x.skip_recorded_positions()
        x.compensated = True
    if mark_status and x.run.status != RunStatus.COMPENSATING:
        try:
            x.run = x.ledger.update_run(
                x.run.run_id,
                x.guard(),
                {"status": RunStatus.COMPENSATING.value, "updated_at": format_time(x.clock.now())},
            )
        except ConditionFailed as e:
            raise LeaseLost() from e
    pending = list(reversed(x.compensations))
    x.compensations.clear()
    previous = x.compensating
    x.compensating = True  # a cancel request must not interrupt the undo itself
    try:
        for position, undo, result, args, kwargs in pending:
            try:
                x.call_step(
                    undo,
                    (result, *args),
                    kwargs,
                    name=compensation_name(callable_name(undo, None)),
                    retry=None,
                    timeout=None,
                    semantics=None,
                    compensate=None,
                    kind=StepKind.COMPENSATION,
                )
            except StepFailed as failure:
                failure.compensated_position = position  # type: ignore[attr-defined]
                return failure
    finally:
        x.compensating = previous
    return None
