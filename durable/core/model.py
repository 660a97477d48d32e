"""Value types of the ledger: runs, steps, attempts and signals.

Plain dataclasses with console-readable fields: statuses are words, times are ISO-8601
UTC strings (``2026-01-02T03:04:05.678Z``; fixed width so string order is time order,
which the due and listing indexes rely on), payloads are JSON text.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any, TypeVar


class RunStatus(enum.StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    WAITING = "WAITING"
    COMPENSATING = "COMPENSATING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL_RUN


_TERMINAL_RUN = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELED})
TERMINAL_RUN_STATUSES: tuple[str, ...] = tuple(s.value for s in _TERMINAL_RUN)


class StepStatus(enum.StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    WAITING = "WAITING"
    RETRYABLE_FAILED = "RETRYABLE_FAILED"
    TERMINAL_FAILED = "TERMINAL_FAILED"
    DONE = "DONE"
    COMPENSATED = "COMPENSATED"
    TIMED_OUT = "TIMED_OUT"

    @property
    def final(self) -> bool:
        """A final step record is never overwritten (first writer wins)."""
        return self in _FINAL_STEP


_FINAL_STEP = frozenset(
    {StepStatus.DONE, StepStatus.TERMINAL_FAILED, StepStatus.COMPENSATED, StepStatus.TIMED_OUT}
)
FINAL_STEP_STATUSES: tuple[str, ...] = tuple(s.value for s in _FINAL_STEP)


class StepKind(enum.StrEnum):
    STEP = "step"
    SLEEP = "sleep"
    CALLBACK = "callback"
    SIGNAL = "signal"
    CONDITION = "condition"
    COMPENSATION = "compensation"
    VALUE = "value"
    BATCH = "batch"  # a parallel or map: its decision (each branch's outcome)
    CHILD = "child"  # a child run this run started (``durable.engine.children``)


# --- time encoding ------------------------------------------------------------------


def format_time(when: datetime) -> str:
    """ISO-8601 UTC with milliseconds and a ``Z``: fixed width, so it sorts as text."""
    if when.tzinfo is None:
        raise ValueError("naive datetime: pass an aware datetime (for example datetime.now(UTC))")
    u = when if when.tzinfo is UTC else when.astimezone(UTC)
    # Hand-formatted: strftime costs several microseconds and this runs on every step.
    return (
        f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:"
        f"{u.second:02d}.{u.microsecond // 1000:03d}Z"
    )


_fromisoformat = datetime.fromisoformat


def parse_time(text: str) -> datetime:
    """Inverse of ``format_time``. ``datetime.fromisoformat`` (C; it reads the ``Z`` since
    3.11) takes the ledger's own shape, ``YYYY-MM-DDTHH:MM:SS.mmmZ``, several times faster
    than slicing; anything else goes the old way (slices and ``int``), so what parsed before
    parses the same and what failed fails with the same error."""
    # The separators at 4, 7, 10, 13, 16 and 19 checked in one slice: fromisoformat also
    # reads ISO week dates (2024-W01-1) and compact times (HHMMSS), which are no ledger
    # times. An hour from 24 on is left to the slices, whatever a later Python makes of 24:00.
    if text[4:20:3] == "--T::." and text[23:] == "Z" and len(text) == 24 and text[11:13] < "24":
        try:
            return _fromisoformat(text)
        except ValueError:
            pass  # a field out of range or not ASCII digits: the slices say which, as before
    return _parse_time_sliced(text)


def _parse_time_sliced(text: str) -> datetime:
    if len(text) != 24 or text[10] != "T" or text[23] != "Z":
        raise ValueError(f"not a ledger timestamp: {text!r}")
    return datetime(
        int(text[0:4]),
        int(text[5:7]),
        int(text[8:10]),
        int(text[11:13]),
        int(text[14:16]),
        int(text[17:19]),
        int(text[20:23]) * 1000,
        tzinfo=UTC,
    )


def position_path(*indexes: int) -> str:
    """``0003`` or ``0003.0001``: zero-padded so the sort key orders like the code up to
    9999; past it (``10000``) text order is wrong, so code compares ``position_key``."""
    if len(indexes) == 1:  # a top-level position: once per step of every replay
        return f"{indexes[0]:04d}"
    return ".".join(f"{i:04d}" for i in indexes)


def position_key(position: str) -> tuple[int, ...]:
    """A position as numbers, for ordering and comparing (``"10000"`` after ``"9999"``)."""
    return tuple(int(part) for part in position.split("."))


def top_index(position: str) -> int:
    """The workflow-level call a position belongs to (``0003.0001`` -> 3)."""
    return int(position.split(".", 1)[0])


# --- records ------------------------------------------------------------------------


@dataclass(slots=True)
class RunError:
    type: str
    message: str
    retryable: bool = False
    # The step whose failure ended the run (None when the workflow's own code raised):
    # an operator's retry reopens that step and no other.
    position: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "type": self.type,
            "message": self.message,
            "retryable": self.retryable,
        }
        if self.position is not None:
            data["position"] = self.position
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunError:
        position = data.get("position")
        return cls(
            str(data["type"]),
            str(data["message"]),
            bool(data.get("retryable", False)),
            str(position) if position is not None else None,
        )


@dataclass(slots=True)
class RunRecord:
    """The run item (``RUN#<id>`` / ``RUN``): status plus the lease protocol's fields."""

    run_id: str
    workflow: str
    version: int
    status: RunStatus
    input: str
    input_hash: str
    created_at: str
    updated_at: str
    output: str | None = None
    error: RunError | None = None
    requested_by: str | None = None
    idempotency_key: str | None = None
    needs_attention: bool = False
    # What a WAITING run waits for, written with the suspension that parks it:
    # "<kind> <name>[ until <time>][ (+N more)]" (``durable.core.leases.waiting_for``). A run
    # waiting on a person's answer (a callback) is one a person should look at.
    waiting_for: str | None = None
    # Lease protocol (DESIGN section 3): fence increments on every claim so a stale
    # owner's conditional writes fail; inbox increments on every external event.
    lease_owner: str | None = None
    lease_until: str | None = None
    fence: int = 0
    takeovers: int = 0
    takeover_mark: int = 0
    inbox: int = 0
    cancel_requested: bool = False
    cancel_reason: str | None = None
    cancel_compensate: bool = False
    due_at: str | None = None
    purge_at: int | None = None
    # The TTL (epoch seconds) every other item of the run carries from its first write,
    # for a workflow that declares ``max_lifetime`` (``durable.core.lifetime``); None: its
    # items carry none, and the purge deletes them after the run item expired.
    items_purge_at: int | None = None
    continued_from: str | None = None
    forked_from: str | None = None  # "<run_id>@<position>"
    # A child run's parent and the position that started it ("<run_id>@<position>"):
    # its final write settles that position's record (``durable.engine.children``).
    parent: str | None = None
    # Children this run started: a cancel of a run with children goes through a worker,
    # which cancels them too (``durable.engine.operations``).
    children: int = 0
    # Invocations that found no code for this workflow version (a deploy in progress):
    # each defers the run a little longer instead of failing it.
    deferrals: int = 0
    # Its compensations ran: the state its steps built was undone, so it cannot be
    # retried (only forked).
    compensated: bool = False
    # The run's data key, wrapped by the key service (``durable.core.secrets``): only present
    # once a secret-typed value of this run was sealed.
    data_key: str | None = None
    # Operator decisions on this run (cancel, retry, fork): who, when, what, why.
    operations: list[dict[str, str]] = field(default_factory=list)
    # What the run has used so far (``durable.core.usage``): request units, invocations, Lambda
    # time; added to by the last write of each invocation, priced when shown.
    usage: dict[str, float] | None = None
    # Flow control (``durable.core.flow``): the concurrency gate it takes a slot in (set when
    # it is created, kept to the end: it leaves the gate it entered), since when it waits
    # in line for a slot (None while it holds one or needs none), and the start time a
    # rate limit booked for it.
    gate: str | None = None
    queued_at: str | None = None
    start_at: str | None = None
    # The run's open sleeps, written with the suspension that parks it (position ->
    # {name, wake_at, at, fence}; ``durable.core.sleeps``): every reader presents each as
    # its WAITING step record.
    sleeps: dict[str, dict[str, Any]] | None = None
    # The time of the latest claim (never moved back): a sleep kept on the run item whose
    # wake time is not later is over (``durable.core.sleeps.sleep_over``).
    woke_at: str | None = None
    # What the workflow code last reported with ``ctx.set_progress``: {"done", "total",
    # "note", "at"} (``durable.core.progress``). Not a write of its own: it rides in the
    # next write the run makes, so it is as fresh as the run item.
    progress: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        return self.status.terminal


@dataclass(slots=True)
class Attempt:
    n: int
    started_at: str
    finished_at: str | None = None
    error_class: str | None = None  # "retryable" | "terminal"
    error: str | None = None
    request_id: str | None = None
    log_stream: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in _attempt_items(self) if v is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attempt:
        return cls(
            n=int(data["n"]),
            started_at=str(data["started_at"]),
            finished_at=data.get("finished_at"),
            error_class=data.get("error_class"),
            error=data.get("error"),
            request_id=data.get("request_id"),
            log_stream=data.get("log_stream"),
        )


def _attempt_items(a: Attempt) -> list[tuple[str, Any]]:
    return [
        ("n", a.n),
        ("started_at", a.started_at),
        ("finished_at", a.finished_at),
        ("error_class", a.error_class),
        ("error", a.error),
        ("request_id", a.request_id),
        ("log_stream", a.log_stream),
    ]


@dataclass(slots=True)
class StepRecord:
    """A step item (``RUN#<id>`` / ``STEP#<position>``)."""

    run_id: str
    position: str
    name: str
    kind: StepKind
    status: StepStatus
    updated_at: str
    step_version: int = 1
    attempt: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    output: str | None = None
    error_type: str | None = None
    error_class: str | None = None
    error_summary: str | None = None
    checkpoint: dict[str, Any] | None = None  # {"payload_version": int, "state": JSON text}
    idempotency_key: str | None = None
    refs: list[dict[str, str]] = field(default_factory=list)
    wake_at: str | None = None
    expires_at: str | None = None
    token_nonce: str | None = None
    token_hash: str | None = None
    detail: dict[str, Any] | None = None  # kind-specific extras (wait reason, compensation)
    # Its TTL (epoch seconds): its run's ``items_purge_at`` (``durable.core.lifetime``).
    purge_at: int | None = None
    # The lease fence of the worker that wrote this record (``durable.fencing``): a worker
    # never replaces a pending record written under a newer fence than its own.
    fence: int = 0


@dataclass(slots=True)
class SignalRecord:
    """A signal item (``RUN#<id>`` / ``SIGNAL#<name>#<ulid>``), consumed in order.

    A signal sent with an idempotency key is stored at ``SIGNAL#<name>#K#<key_hash>``
    instead (so a repeat finds it); ``signal_id`` stays the ULID of its arrival, which
    orders consumption for both kinds. ``payload_hash`` tells a repeat from a reuse.
    """

    run_id: str
    name: str
    signal_id: str
    payload: str
    received_at: str
    consumed_by: str | None = None
    key_hash: str | None = None
    payload_hash: str | None = None
    # The run's inbox count this signal's arrival made: arrival order as the ledger
    # committed it, which orders consumption (two sends in one millisecond included).
    seq: int = 0
    # Who sent it through the management API (the IAM caller): the run's audit trail.
    sent_by: str | None = None
    # Its TTL (epoch seconds): its run's ``items_purge_at`` (``durable.core.lifetime``).
    purge_at: int | None = None


def signal_order(signal: SignalRecord) -> tuple[int, str]:
    """Arrival order: the ledger's sequence, then (for signals stored before it had one)
    the arrival ULID."""
    return (signal.seq, signal.signal_id)


@dataclass(slots=True)
class RunHistory:
    """Everything one consistent load of a run's partition returns."""

    run: RunRecord
    steps: dict[str, StepRecord]
    signals: list[SignalRecord]


# --- copies ------------------------------------------------------------------------------

_T = TypeVar("_T")


def _copier(cls: type[_T]) -> Callable[[_T], _T]:
    """A shallow copy of a record by its constructor, fields in order. ``replace`` costs
    ~5x as much (it rebuilds the keyword arguments by name): these copies are on the hot
    path of every record a memory ledger or a warm worker's view hands out or takes in."""
    get = attrgetter(*(f.name for f in fields(cls)))  # type: ignore[arg-type]
    return lambda record: cls(*get(record))


_copy_run, _copy_step, _copy_attempt = _copier(RunRecord), _copier(StepRecord), _copier(Attempt)


def copy_run(run: RunRecord) -> RunRecord:
    """A copy that shares nothing mutable with ``run`` (records are mutable)."""
    from dataclasses import replace

    new = _copy_run(run)
    new.error = replace(run.error) if run.error else None
    new.operations = [dict(o) for o in run.operations]
    new.usage = dict(run.usage) if run.usage is not None else None
    new.sleeps = {p: dict(e) for p, e in run.sleeps.items()} if run.sleeps else None
    new.progress = dict(run.progress) if run.progress is not None else None
    return new


def copy_step(step: StepRecord) -> StepRecord:
    """A copy that shares nothing mutable with ``step`` (records are mutable)."""
    new = _copy_step(step)
    new.attempts = [_copy_attempt(a) for a in step.attempts]
    new.refs = [dict(r) for r in step.refs]
    new.checkpoint = dict(step.checkpoint) if step.checkpoint is not None else None
    new.detail = dict(step.detail) if step.detail is not None else None
    return new
