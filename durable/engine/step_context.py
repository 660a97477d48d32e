"""``StepContext``: what a step body sees of its own durable state
(``durable.current_step()``). Below ``durable.engine.context``: it imports nothing of the engine
at all: the step it wraps is the engine's ``StepRun``, named by ``StepParts``, the
protocol of what ``StepContext`` uses of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from durable.engine.active import StepView, _active_step
from durable.engine.run_logging import StepLogger
from durable.errors import DurableError

T = TypeVar("T")


class StepParts(StepView, Protocol):
    """What ``StepContext`` uses of the running step (``durable.engine.steps.StepRun``)."""

    @property
    def run_id(self) -> str: ...

    @property
    def idempotency_key(self) -> str: ...

    @property
    def checkpoint_state(self) -> Any: ...

    def checkpoint(self, state: Any, payload_version: int) -> None: ...

    def heartbeat(self) -> None: ...

    def record_ref(self, kind: str, value: str) -> None: ...

    def effect(
        self,
        action: str,
        call: Callable[[str], Any],
        reconcile: Callable[[str], Any] | None,
    ) -> Any: ...


class StepContext:
    """The running step's view of its own durable state."""

    def __init__(self, step: StepParts) -> None:
        self._step = step

    @property
    def run_id(self) -> str:
        """The id of the run this step belongs to."""
        return self._step.run_id

    @property
    def step_name(self) -> str:
        """The step's name as recorded in the ledger (``name=``, else the callable's)."""
        return self._step.name

    @property
    def position(self) -> str:
        """The step's position in the run, e.g. ``0003``: with the name, its identity."""
        return self._step.position

    @property
    def attempt(self) -> int:
        """1-based attempt number of this execution of the step."""
        return self._step.attempt

    @property
    def idempotency_key(self) -> str:
        """Stable across attempts and invocations, unique to this run: ``<run id>.<run
        incarnation>:<position>:<step name>``. Pass it to APIs that deduplicate requests."""
        return self._step.idempotency_key

    @property
    def checkpoint_state(self) -> Any:
        """The state saved by the last ``checkpoint`` of this step (any attempt), or None."""
        return self._step.checkpoint_state

    def checkpoint(self, state: Any, *, payload_version: int = 1) -> None:
        """Persist ``state`` (plain JSON) so a retry or a new worker resumes from it.

        One atomic write that also renews the run's lease.
        """
        self._step.checkpoint(state, payload_version)

    def heartbeat(self) -> None:
        """Renew the run's lease during a long body (no-op when it has time left)."""
        self._step.heartbeat()

    def record_ref(self, kind: str, value: str) -> None:
        """Remember an external id this step created; written with the step's result."""
        self._step.record_ref(kind, value)

    @property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger whose records carry the run id, workflow, version, step, attempt and
        position (``durable.engine.run_logging``)."""
        return StepLogger(self._step)

    def effect(
        self,
        action: str,
        call: Callable[[str], T],
        reconcile: Callable[[str], T | None] | None = None,
    ) -> T:
        """Perform an external side effect at most once per key, across every retry.

        The key (this step's idempotency key plus ``action``) is persisted before
        ``call(key)``; the reference ``call`` returns is stored after. A later attempt
        gets the stored reference back, or, when an earlier attempt died between the two
        writes, ``reconcile(key)`` (look the effect up by key) decides: a non-None result
        is adopted; None means it did not happen and ``call(key)`` runs again with the same
        key. Without ``reconcile`` the call repeats with the same key, for APIs that
        deduplicate by it.

        The reference must be plain JSON (an id, a dict of them); it is typed as what
        ``call`` returns, and comes back as its JSON decodes (a tuple as a list).
        """
        reference: T = self._step.effect(action, call, reconcile)
        return reference


def current_step() -> StepContext:
    """The running step's context; only valid inside a step body."""
    step = _active_step.get()
    if not isinstance(step, StepContext):
        raise DurableError(
            "durable.current_step() is only available inside a step body that the engine is "
            "running (call it from a function passed to ctx.step or decorated with @app.step)"
        )
    return step
