"""Which workflow context and which step are running on this thread: the context
variables the engine binds around workflow code and step bodies, ``active_context()``
and ``current_step()``. A leaf: it imports nothing of the engine, so steps, waits,
logging and the adapters read it without importing the authoring API.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

from durable.errors import DurableError

if TYPE_CHECKING:
    from durable.engine.context import Context
    from durable.engine.step_context import StepContext

_active_context: ContextVar[Context | None] = ContextVar("durable_context", default=None)
_active_step: ContextVar[StepContext | None] = ContextVar("durable_step", default=None)


def active_context() -> Context | None:
    """The workflow context when called from workflow code (not inside a step body)."""
    return _active_context.get()


def current_step() -> StepContext:
    """The running step's context; only valid inside a step body."""
    step = _active_step.get()
    if step is None:
        raise DurableError(
            "durable.current_step() is only available inside a step body that the engine is "
            "running (call it from a function passed to ctx.step or decorated with @app.step)"
        )
    return step


def bind_context(ctx: Context | None) -> object:
    return _active_context.set(ctx)


def bind_step(step: StepContext | None) -> object:
    return _active_step.set(step)


def reset_context(token: object) -> None:
    _active_context.reset(token)  # type: ignore[arg-type]


def reset_step(token: object) -> None:
    _active_step.reset(token)  # type: ignore[arg-type]
