"""Log lines from workflow and step code, each written once, each naming its run.

Workflow code runs again from the top on every invocation (that is how a run resumes), so
a plain ``logging`` call in it repeats on each replay: "order started" three times for one
order. ``ctx.logger`` writes only while the code runs for the first time
(``Execution.replaying``); a step body runs only when it executes, so
``current_step().logger`` needs no such rule. Both add the run's keys to every record, as
``extra`` fields (Powertools' JSON logger on Lambda prints them as keys):

    run_id, workflow, version, position          (ctx.logger)
    run_id, workflow, version, step, attempt, position   (current_step().logger)

A logger of your own (a library's, say) gets the same keys with ``RunKeys``, a logging
filter that reads them from the code running now::

    logging.getLogger("shop.payments").addFilter(durable.RunKeys())
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

from durable.engine.active import RunView, StepView, _active_context, _active_step

if TYPE_CHECKING:
    pass


WORKFLOW_LOGGER = logging.getLogger("durable.workflow")
STEP_LOGGER = logging.getLogger("durable.step")


def workflow_keys(execution: RunView) -> dict[str, Any]:
    return {
        "run_id": execution.run.run_id,
        "workflow": execution.workflow.name,
        "version": execution.workflow.version,
        "position": execution.position,
    }


def step_keys(step: StepView) -> dict[str, Any]:
    return {
        **workflow_keys(step.x),
        "step": step.name,
        "attempt": step.attempt,
        "position": step.position,
    }


class _Keyed(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Adds the keys of now (a position moves as the code runs) under the caller's own."""

    def keys(self) -> dict[str, Any]:
        raise NotImplementedError

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        kwargs["extra"] = {**self.keys(), **(kwargs.get("extra") or {})}
        return msg, kwargs


class WorkflowLogger(_Keyed):
    """``ctx.logger``: silent while the workflow code replays what it already ran."""

    def __init__(self, execution: RunView) -> None:
        super().__init__(WORKFLOW_LOGGER, {})
        self._exec = execution

    def keys(self) -> dict[str, Any]:
        return workflow_keys(self._exec)

    def isEnabledFor(self, level: int) -> bool:
        return not self._exec.replaying() and self.logger.isEnabledFor(level)


class StepLogger(_Keyed):
    """``current_step().logger``: a step body runs only when it executes, never on replay."""

    def __init__(self, step: StepView) -> None:
        super().__init__(STEP_LOGGER, {})
        self._step = step

    def keys(self) -> dict[str, Any]:
        return step_keys(self._step)


class RunKeys(logging.Filter):
    """A filter that adds the running workflow's or step's keys to any logger's records
    (none outside a run). It never drops a record, replay or not: for that, log through
    ``ctx.logger``."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in current_keys().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


def current_keys() -> dict[str, Any]:
    """The keys of the workflow or step code running now on this thread (none outside)."""
    step = _active_step.get()
    if step is not None:
        return step_keys(step._step)
    context = _active_context.get()
    return workflow_keys(context._exec) if context is not None else {}
