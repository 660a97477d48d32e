"""Internal signals and helpers shared by the execution and step modules."""

from __future__ import annotations

from typing import Any

from durable.core.retry import error_type_name
from durable.errors import DurableError, TerminalError


class InboxChanged(BaseException):
    """An event arrived while the run was being driven: reload and replay again.

    ``inbox`` is the count the failed suspension found, read before the reload: every
    event it counts is in what the reload returns, so it is the next suspend's guard.
    """

    def __init__(self, inbox: int) -> None:
        super().__init__(inbox)
        self.inbox = inbox


class ContinueAsNew(BaseException):
    def __init__(self, input_value: Any) -> None:
        self.input_value = input_value


class DryRunComplete(BaseException):
    """A dry replay (checking an upgrade) reached the first position without a record."""


class WorkerInterrupted(DurableError):
    """An attempt was found RUNNING: its worker died, timed out or lost its lease."""


class HistoryLimitExceeded(TerminalError):
    """A run passed ``max_history`` positions; use ``ctx.continue_as_new`` for long loops."""


def summarize(error: BaseException, limit: int = 1000) -> str:
    """``Type: message``, for a text that stands alone (a step's error summary)."""
    return _cut(f"{error_type_name(error)}: {error}", limit)


def message_of(error: BaseException, limit: int = 1000) -> str:
    """The error's message alone, for a record that stores its type beside it (a run's
    ``RunError``): readers print ``type: message``, so the type is not repeated here."""
    return _cut(str(error), limit)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class BranchParked(BaseException):
    """A branch of a batch reached a wait that is not over (its timer is armed): the
    branch stops here, and the batch suspends the run once no branch can go on."""

    def __init__(self, due_at: str | None) -> None:
        super().__init__(due_at)
        self.due_at = due_at


class BranchStopped(BaseException):
    """A branch was told to stop (its batch was decided, or another branch stopped the
    run), or a replay that only rebuilds its compensations reached the end of its
    records: it ends at its next durable call without doing new work."""
