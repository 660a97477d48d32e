"""What the modules an ``Execution`` drives use of it: ``ExecutionParts``, a protocol that
``durable.engine.execution.Execution`` satisfies.

Steps, waits, child runs, distributed maps, endings and compensation (``steps``,
``waits``, ``children``, ``distributed``, ``endings``, ``sagas`` in
``durable.engine``) are given the execution and read or move its state; they name this
protocol, not ``Execution``, so none imports ``durable.engine.execution`` (which imports them).
It imports nothing of the engine at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from durable.core.model import StepKind

if TYPE_CHECKING:
    from durable.core.callables import Semantics, StepOptionsResolved, WorkflowDef
    from durable.core.clock import Clock
    from durable.core.codecs import Serdes
    from durable.core.config import EngineConfig
    from durable.core.model import RunRecord, SignalRecord, StepRecord, StepStatus
    from durable.core.ports import Invocation, Ledger, RunGuard
    from durable.core.retry import RetryPolicy
    from durable.engine.cursor import Compensation, Cursor
    from durable.engine.engine_parts import EngineParts
    from durable.engine.turns import Turn
    from durable.errors import NonDeterminismError, Suspend


class LoopRun(Protocol):
    """What an execution knows of the async run that drives it
    (``durable.engine.async_workflow.AsyncRun``)."""

    def on_loop(self) -> bool: ...


class ExecutionParts(Protocol):
    """One invocation's replay of a run, as the modules it drives use it."""

    run: RunRecord
    compensated: bool
    compensating: bool
    poison_failed: bool
    nondeterminism: NonDeterminismError | None

    @property
    def workflow(self) -> WorkflowDef: ...

    @property
    def steps(self) -> dict[str, StepRecord]: ...

    @property
    def engine(self) -> EngineParts: ...

    @property
    def config(self) -> EngineConfig: ...

    @property
    def invocation(self) -> Invocation: ...

    # Whose turn it is to run workflow code (set while a batch's branches run on threads).
    turn: Turn | None
    # The async run driving this invocation's workflow on an event loop, if any.
    aio: LoopRun | None
    # What ``ctx.set_progress`` set last, for the run item's next write.
    progress: dict[str, Any] | None
    # Why the worker was invoked: start, continue, timer, sweep, event, child, ...
    reason: str

    @property
    def root(self) -> Cursor: ...

    @property
    def ledger(self) -> Ledger: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def owner(self) -> str: ...

    @property
    def hop(self) -> int: ...

    @property
    def poisoned(self) -> bool: ...

    @property
    def compensations(self) -> list[Compensation]: ...

    @property
    def cursor(self) -> Cursor: ...

    @property
    def dry_run(self) -> bool: ...

    @property
    def signals(self) -> list[SignalRecord]: ...

    @property
    def events_inbox(self) -> int: ...

    @property
    def tokens(self) -> set[str]: ...

    @property
    def position(self) -> str | None: ...

    def replaying(self) -> bool: ...

    def guard(self, **extra: Any) -> RunGuard: ...

    def encode(self, value: Any, annotation: Any) -> str: ...

    def redact(self, text: str) -> str: ...

    def run_workflow(self) -> Any: ...

    def skip_recorded_positions(self) -> None: ...

    def call_step(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        name: str | None,
        retry: RetryPolicy | None,
        timeout: timedelta | None,
        semantics: Semantics | None,
        compensate: Callable[..., Any] | None,
        kind: StepKind = StepKind.STEP,
        serdes: Serdes[Any] | None = None,
    ) -> Any: ...

    # --- what a step's attempt loop uses (``durable.engine.steps``) ---------------------------

    def now_text(self) -> str: ...

    def replay_result(self, rec: StepRecord, annotation: Any) -> Any: ...

    def new_record(
        self,
        position: str,
        name: str,
        kind: StepKind,
        status: StepStatus,
        updated_at: str | None = None,
        **fields: Any,
    ) -> StepRecord: ...

    def decode(self, text: str | None, annotation: Any) -> Any: ...

    def write_result(self, rec: StepRecord) -> StepRecord: ...

    def write_fenced(
        self, rec: StepRecord, *, starts_body: bool = False, adopt_pending: bool = False
    ) -> StepRecord: ...

    def suspend(
        self, due_at: str | None, position: str | None = None, *, replayed: bool = False
    ) -> Suspend: ...

    def off_turn(self) -> AbstractContextManager[None]: ...

    def idle(self, seconds: float) -> None: ...

    def can_wait_in_process(self, wait: timedelta, then_needed: timedelta) -> bool: ...

    # (``durable.engine.lease_keeping.LeaseKeeping``, which Execution is)
    def remaining(self) -> float | None: ...

    def check_budget(self, budget: timedelta, *, explicit: bool = True) -> None: ...

    def ensure_lease(self, budget: timedelta) -> None: ...

    def vouched(self, sent: datetime, budget: timedelta) -> None: ...

    def check_lease_alive(self) -> None: ...

    def count_body(self) -> None: ...

    # --- what a durable call's position and record use (``durable.engine.waits``) -------------

    def next_position(self) -> str: ...

    def recorded(self, position: str, name: str, kind: StepKind) -> StepRecord | None: ...

    def kept(self, rec: StepRecord, stored: StepRecord) -> StepRecord: ...

    def check_cancel(self) -> None: ...

    def check_lifetime(self, until: datetime, what: str) -> None: ...

    def resolve_options(
        self,
        fn: Callable[..., Any],
        retry: RetryPolicy | None,
        timeout: timedelta | None,
        semantics: Semantics | None,
    ) -> StepOptionsResolved: ...

    # --- what ``Context`` and the batches call besides ---------------------------------

    def new_context(self) -> object: ...

    def record_value(self, name: str, producer: str) -> Any: ...

    def changed(self, patch_id: str) -> bool: ...

    def wake_time(self, duration: timedelta) -> datetime: ...

    def sleep_until(self, when: datetime, name: str) -> None: ...

    def continue_as_new(self, input_value: Any) -> None: ...

    def set_progress(self, done: object, total: object, note: object) -> None: ...

    def progress_changes(self) -> dict[str, Any]: ...
