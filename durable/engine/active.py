"""Which workflow context and which step are running on this thread: the context
variables the engine binds around workflow code and step bodies.

A leaf: it imports nothing of the engine. The variables are typed by what the readers
below the authoring API use of them (``ActiveWorkflow``, ``ActiveStep``: the views a log
line reads), so logging, steps and waits read them without importing ``Context`` or
``StepContext``. The typed accessors live with their types, above this module:
``durable.engine.context.active_context()`` and ``durable.engine.step_context.current_step()``
(which ``durable.current_step`` is).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from durable.core.callables import WorkflowDef
    from durable.core.model import RunRecord


class RunView(Protocol):
    """What a log line reads of the running workflow (``durable.engine.execution.Execution``)."""

    @property
    def run(self) -> RunRecord: ...

    @property
    def workflow(self) -> WorkflowDef: ...

    @property
    def position(self) -> str | None: ...

    def replaying(self) -> bool: ...


class StepView(Protocol):
    """What a log line reads of the running step (``durable.engine.steps.StepRun``)."""

    @property
    def x(self) -> RunView: ...

    @property
    def name(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    @property
    def position(self) -> str: ...


class ActiveWorkflow(Protocol):
    """The running workflow context as code below it reads it (``Context``)."""

    @property
    def _exec(self) -> RunView: ...


class ActiveStep(Protocol):
    """The running step's context as code below it reads it (``StepContext``)."""

    @property
    def _step(self) -> StepView: ...


_active_context: ContextVar[ActiveWorkflow | None] = ContextVar("durable_context", default=None)
_active_step: ContextVar[ActiveStep | None] = ContextVar("durable_step", default=None)


def in_workflow_code() -> bool:
    """Whether workflow code (not a step body) is running on this thread."""
    return _active_context.get() is not None


def bind_context(ctx: ActiveWorkflow | None) -> object:
    return _active_context.set(ctx)


def bind_step(step: ActiveStep | None) -> object:
    return _active_step.set(step)


def reset_context(token: object) -> None:
    _active_context.reset(token)  # type: ignore[arg-type]


def reset_step(token: object) -> None:
    _active_step.reset(token)  # type: ignore[arg-type]
