"""What the modules an ``Execution`` drives use of it: ``ExecutionParts``, a protocol that
``durable.execution.Execution`` satisfies.

Endings and compensation (``durable.endings``, ``durable.sagas``) are given the execution
and read or move its state; they name this protocol, not ``Execution``, so neither imports
``durable.execution`` (which imports them). It imports nothing of the engine at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from durable.model import StepKind

if TYPE_CHECKING:
    from durable.callables import Semantics, WorkflowDef
    from durable.clock import Clock
    from durable.codecs import Serdes
    from durable.cursor import Compensation
    from durable.errors import NonDeterminismError
    from durable.model import RunRecord, StepRecord
    from durable.ports import Ledger, RunGuard
    from durable.retry import RetryPolicy


class ExecutionParts(Protocol):
    """One invocation's replay of a run, as endings and compensation use it."""

    run: RunRecord
    compensated: bool
    compensating: bool
    poison_failed: bool

    @property
    def workflow(self) -> WorkflowDef: ...

    @property
    def steps(self) -> dict[str, StepRecord]: ...

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
    def nondeterminism(self) -> NonDeterminismError | None: ...

    @property
    def compensations(self) -> list[Compensation]: ...

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
