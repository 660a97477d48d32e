"""What the engine's collaborators use of it: ``EngineParts``, a protocol that ``Engine``
satisfies.

Admission, endings, events, operations, children, the sweeper and the execution are
given the engine and call back into it (its ledger, clock, configuration, the worker
invoker, a few of its operations). They name this protocol, not ``Engine``, so none of
them imports ``durable.engine.engine``, and the engine imports them all at the top: the engine
sits above its parts, with no import circle. It imports nothing of the engine at run
time (the types below are named for the type checker only).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from durable.core.callables import WorkflowDef
    from durable.core.clock import Clock
    from durable.core.config import EngineConfig
    from durable.core.model import RunHistory, RunRecord
    from durable.core.ports import Ledger, Page
    from durable.core.retry import RetryPolicy
    from durable.core.secrets import KeyService, Sealer
    from durable.engine.determinism import Guard
    from durable.engine.effects import Effects

# What a start does when a run with the same derived id is under way (``Engine.start``).
IfRunning = Literal["fail", "attach"]
# Whether a key names one run for its retention, or a new one once that run has ended
# (``durable.engine.keys``).
Reuse = Literal["never", "after_end"]


class AppParts(Protocol):
    """The registered workflows (``durable.engine.registry.App``)."""

    @property
    def default_retry(self) -> RetryPolicy | None: ...

    def get_workflow(self, name: str, version: int | None = None) -> WorkflowDef: ...

    def workflows(self) -> list[WorkflowDef]: ...


class AdmissionParts(Protocol):
    """``durable.engine.admission.Admission``, as the others use it."""

    def gate_for(self, wf: WorkflowDef, input_text: str) -> str | None: ...


class EndingsParts(Protocol):
    """``durable.engine.endings.Endings``, as the others use it."""

    def final_changes(self, run: RunRecord, changes: dict[str, Any]) -> dict[str, Any]: ...


class EngineParts(Protocol):
    """The engine, as its collaborators use it (``durable.engine.engine.Engine``)."""

    @property
    def app(self) -> AppParts: ...

    @property
    def ledger(self) -> Ledger: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def config(self) -> EngineConfig: ...

    @property
    def guard(self) -> Guard: ...

    @property
    def keys(self) -> KeyService | None: ...

    @property
    def effects(self) -> Effects: ...

    @property
    def admission(self) -> AdmissionParts: ...

    @property
    def endings(self) -> EndingsParts: ...

    def arm_timer(
        self, run_id: str, position: str, wake_at: datetime, *, rearm_at: datetime | None = None
    ) -> None: ...

    def cancel_timers(self, run_id: str) -> None: ...

    def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        idempotency_key: str | None = None,
        requested_by: str | None = None,
        version: int | None = None,
        key_scope: str | None = None,
        gate: str | None = None,
        if_running: IfRunning = "fail",
        reuse: Reuse = "never",
    ) -> RunRecord: ...

    def new_run(
        self,
        wf: WorkflowDef,
        input: Any,
        run_id: str,
        *,
        idempotency_key: str | None = None,
        requested_by: str | None = None,
        gate: str | None = None,
        parent: str | None = None,
        after: str | None = None,
    ) -> RunRecord: ...

    def new_sealer(self, run_id: str, annotation: Any) -> tuple[Sealer | None, str | None]: ...

    def answer_sealer(self, run_id: str) -> Sealer: ...

    def invoke_worker(self, run_id: str, reason: str, hop: int = 0) -> None: ...

    def leave_gate(self, run: RunRecord) -> None: ...

    def cancel(
        self,
        run_id: str,
        reason: str,
        compensate: bool = False,
        requested_by: str | None = None,
    ) -> RunRecord: ...

    def retry(
        self, run_id: str, upgrade_to: int | None = None, requested_by: str | None = None
    ) -> RunRecord: ...

    def load(self, run_id: str) -> RunHistory: ...

    def list_runs(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        needs_attention: bool | None = None,
        version: int | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[RunRecord]: ...
