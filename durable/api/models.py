"""Request and response bodies of the HTTP API (pydantic; they feed the OpenAPI document).

Ledger payloads are JSON text; the API returns them as JSON values. Secrets never leave
through these models: a callback step's nonce and token hash stay in the ledger.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from durable.core import serde
from durable.core.model import RunRecord, RunStatus, SignalRecord, StepKind, StepRecord, StepStatus
from durable.core.progress import progress_view
from durable.core.secrets import masked

RunStatusName = Literal[
    "PENDING", "RUNNING", "WAITING", "COMPENSATING", "SUCCEEDED", "FAILED", "CANCELED"
]


def json_value(text: str | None) -> Any:
    """A stored JSON text as readers see it: sealed secrets shown as ``***``."""
    if text is None:
        return None
    try:
        return masked(json.loads(text))
    except ValueError:  # never expected: the ledger stores JSON text
        return text


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- requests -----------------------------------------------------------------------


class CallbackError(_Body):
    type: Annotated[str, Field(min_length=1, max_length=200)] = "Rejected"
    message: Annotated[str, Field(max_length=10_000)] = ""


class CallbackRequest(_Body):
    """Approve with ``{"result": ...}`` (any JSON) or reject with ``{"error": {...}}``."""

    result: Any = None
    error: CallbackError | None = None

    @model_validator(mode="after")
    def _one_of(self) -> CallbackRequest:
        if self.error is not None and self.result is not None:
            raise ValueError("send either result or error, not both")
        return self


class WaitAnswer(CallbackRequest):
    """An operator's answer to a callback by its name: ``position`` picks one when several
    of that name wait (map branches each asking for an approval; a 409 lists them)."""

    position: Annotated[str | None, Field(pattern=r"^\d{4}(\.\d{4})*$")] = None


class CancelRequest(_Body):
    reason: Annotated[str, Field(min_length=1, max_length=1000)]
    compensate: bool = False


class RetryRequest(_Body):
    # Move the run to this registered version of its workflow before retrying.
    upgrade_to: Annotated[int | None, Field(ge=1)] = None


class ForkRequest(_Body):
    # Position to re-execute from: 3 or "0003"; earlier results are copied.
    from_step: int | str


# --- responses ----------------------------------------------------------------------


class ErrorDetail(BaseModel):
    type: str
    message: str
    field: str | None = None
    # AmbiguousWait: the positions of the callbacks of that name that wait (send one).
    positions: list[str] | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class RunError(BaseModel):
    type: str
    message: str
    retryable: bool = False
    position: str | None = None  # the step whose failure ended the run, if one did


class Progress(BaseModel):
    """What the workflow code last reported with ``ctx.set_progress``, as of the run
    item's latest write (it rides in writes the run makes anyway)."""

    done: int
    total: int | None = None  # None: the code did not say how many
    note: str | None = None
    at: str  # when the code set it

    @classmethod
    def of(cls, stored: Any) -> Progress | None:
        view = progress_view(stored)
        return None if view is None else cls(**view)


class RunSummary(BaseModel):
    run_id: str
    workflow: str
    version: int
    status: RunStatusName
    needs_attention: bool
    created_at: str
    updated_at: str
    requested_by: str | None = None
    idempotency_key: str | None = None
    cancel_requested: bool = False
    continued_from: str | None = None
    # A child run's parent and the position that started it: "<run id>@<position>".
    parent: str | None = None
    error: RunError | None = None
    # Flow control: since when it waits in line for a concurrency slot, and the start
    # time its workflow's rate limit booked for it.
    queued_at: str | None = None
    start_at: str | None = None
    # What a WAITING run waits for: "callback approval until <time>", "sleep sleep until
    # <time>", "signal go", "child <name>", "retry <step> until <time>" (+N more).
    waiting_for: str | None = None
    # What the run last reported of its progress (``ctx.set_progress``). A listing shows
    # it for runs not ended (one read of the run item each); a run's view always.
    progress: Progress | None = None

    @classmethod
    def of(cls, run: RunRecord) -> RunSummary:
        return cls(
            run_id=run.run_id,
            workflow=run.workflow,
            version=run.version,
            status=run.status.value,
            needs_attention=run.needs_attention,
            created_at=run.created_at,
            updated_at=run.updated_at,
            requested_by=run.requested_by,
            idempotency_key=run.idempotency_key,
            cancel_requested=run.cancel_requested,
            continued_from=run.continued_from,
            parent=run.parent,
            error=RunError(**run.error.to_dict()) if run.error else None,
            queued_at=run.queued_at,
            start_at=run.start_at,
            waiting_for=run.waiting_for if run.status == RunStatus.WAITING else None,
            progress=Progress.of(run.progress),
        )


class StartedRun(RunSummary):
    """A start's answer: the run, and whether this request started it. ``existing``: the
    Idempotency-Key (or ``if_running=attach``) found a run that an earlier request
    started; nothing new was started."""

    existing: bool = False


class StepView(BaseModel):
    position: str
    name: str
    kind: str
    status: str
    updated_at: str
    step_version: int = 1
    attempt: int = 0
    attempts: list[dict[str, Any]] = Field(default_factory=list)
    output: Any = None
    error_type: str | None = None
    error_class: str | None = None
    error_summary: str | None = None
    refs: list[dict[str, str]] = Field(default_factory=list)
    wake_at: str | None = None
    expires_at: str | None = None
    # Who answered a callback without its token (an operator's IAM identity).
    completed_by: str | None = None
    # The run a child record started (``ctx.run_child``): open it for its own steps.
    child: str | None = None
    # A waiting callback's declared answer type (``module:Class``) and its shape with a
    # placeholder per field (not JSON: ``serde.example_answer``), shown by the console.
    result_type: str | None = None
    answer_example: str | None = None

    @classmethod
    def of(cls, step: StepRecord) -> StepView:
        return cls(
            position=step.position,
            name=step.name,
            kind=step.kind.value,
            status=step.status.value,
            updated_at=step.updated_at,
            step_version=step.step_version,
            attempt=step.attempt,
            attempts=[a.to_dict() for a in step.attempts],
            output=json_value(step.output),
            error_type=step.error_type,
            error_class=step.error_class,
            error_summary=step.error_summary,
            refs=list(step.refs),
            wake_at=step.wake_at,
            expires_at=step.expires_at,
            completed_by=(step.detail or {}).get("completed_by"),
            child=(step.detail or {}).get("child"),
            **_answer_shape(step),
        )


def _answer_shape(step: StepRecord) -> dict[str, str]:
    reference = (step.detail or {}).get("result_type")
    if step.kind != StepKind.CALLBACK or step.status != StepStatus.WAITING or not reference:
        return {}
    annotation = serde.resolve_reference(str(reference))
    shape = {"result_type": str(reference)}
    return (
        shape
        if annotation is None
        else {**shape, "answer_example": serde.example_answer(annotation)}
    )


class SignalView(BaseModel):
    name: str
    signal_id: str
    received_at: str
    payload: Any = None
    consumed_by: str | None = None
    # Who sent it through the management API (the IAM caller), when the API knew.
    sent_by: str | None = None

    @classmethod
    def of(cls, signal: SignalRecord) -> SignalView:
        return cls(
            name=signal.name,
            signal_id=signal.signal_id,
            received_at=signal.received_at,
            payload=json_value(signal.payload),
            consumed_by=signal.consumed_by,
            sent_by=signal.sent_by,
        )


class AuditEntry(BaseModel):
    """One action someone outside the workflow took on the run, and who took it."""

    at: str
    action: str  # cancel, retry, fork, approved, rejected, signal
    by: str
    what: str = ""


class RunCost(BaseModel):
    """The run's usage at list prices (USD): an estimate, not an invoice."""

    usd: float
    prices_of: str  # the region whose list prices were used


class RunDetail(RunSummary):
    input: Any = None
    output: Any = None
    # What an operator may do now ("retry", "fork", "cancel", ...).
    decisions: list[str] = Field(default_factory=list)
    # Operator actions taken on the run so far (cancel, retry, fork), oldest first.
    operations: list[dict[str, Any]] = Field(default_factory=list)
    steps: list[StepView] = Field(default_factory=list)
    signals: list[SignalView] = Field(default_factory=list)
    # Who acted on this run, oldest first: the operations above, callbacks answered by
    # name and signals sent through the API (what `durable show` prints as its audit).
    audit: list[AuditEntry] = Field(default_factory=list)
    # What the run has used so far (DynamoDB request units, worker invocations and their
    # Lambda time, timers fired, the start request), and that at list prices.
    usage: dict[str, float] | None = None
    cost: RunCost | None = None
    # The concurrency gate it takes a slot in, and while it waits, its place in line
    # (1 = next to get a slot).
    gate: str | None = None
    place_in_line: int | None = None


class RunPage(BaseModel):
    runs: list[RunSummary]
    # Pass as ``cursor`` for the next page; absent on the last page.
    next_cursor: str | None = None


class HookAccepted(BaseModel):
    """What a webhook sender gets back: its run's id and status, nothing else."""

    run_id: str
    status: RunStatusName


class HookChallenge(BaseModel):
    """Slack's URL verification, answered: its challenge back (no run is started)."""

    challenge: str


class CallbackAccepted(BaseModel):
    run_id: str
    outcome: Literal["result", "error"]


class HeartbeatAccepted(BaseModel):
    """A callback's heartbeat taken: the wait now times out at ``expires_at`` unless
    another heartbeat (or the answer) comes first."""

    run_id: str
    expires_at: str


class SignalAccepted(BaseModel):
    run_id: str
    name: str
    signal_id: str
    received_at: str
    # True when this request repeated an earlier one (same Idempotency-Key and payload):
    # the fields above are the earlier signal's, and nothing new was stored.
    duplicate: bool = False


class WorkflowView(BaseModel):
    name: str
    versions: list[int]
    # JSON Schema of the start input (the workflow's parameter type); null: no input.
    input_schema: dict[str, Any] | None = None
    takes_input: bool


class WorkflowList(BaseModel):
    workflows: list[WorkflowView]


# --- schedules ---------------------------------------------------------------------


FireResult = Literal["started", "duplicate", "skipped_overlap", "skipped_missed"]


class FireView(BaseModel):
    """One fire of a schedule and what became of it (``durable.engine.schedules``)."""

    scheduled_time: str  # the fire time, UTC; a "run now": when it was asked
    # started; duplicate (a repeat delivery of a fire already decided); skipped_overlap
    # (an earlier run of the schedule is going: run_id names it); skipped_missed (later
    # than the schedule's grace)
    result: FireResult
    run_id: str | None = None  # the run it started, or the one that held it back
    detail: str = ""  # how late it came, which rule skipped it
    decided_at: str = ""
    manual: bool = False  # a "run now", not a fire of the clock


class ScheduleView(BaseModel):
    name: str
    workflow: str
    expression: str  # cron(...) or rate(...)
    timezone: str
    input: Any = None
    overlap: Literal["allow", "skip", "buffer_one"]
    missed: Literal["skip", "catch_up"]
    # enabled, paused, or "not deployed" (declared in code, not yet in Scheduler)
    state: Literal["enabled", "paused", "not deployed"]
    next_fire: str | None = None  # UTC, while enabled
    # The last fires (at most durable.engine.schedules.RECENT_FIRES), newest first.
    recent_fires: list[FireView] = []


class ScheduleList(BaseModel):
    schedules: list[ScheduleView]


class ScheduleFired(BaseModel):
    schedule: str
    result: FireResult
    run_id: str | None = None
