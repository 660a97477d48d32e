"""Every error the library raises or lets users raise.

Standard library only: this module sits at the bottom of the import graph so that
adapters, handlers and user code can all depend on it without pulling in the engine.

Two families live here:

* ``DurableError`` subclasses are ordinary exceptions users may catch.
* Control-flow signals (``Suspend``, ``Handoff``, ``LeaseLost``, ``RunCanceled``) derive
  from ``BaseException`` so that an ``except Exception`` in workflow code cannot swallow
  the engine's decision to stop the current invocation.
"""

from __future__ import annotations

from datetime import timedelta


class DurableError(Exception):
    """Root of every error this library raises on purpose."""


class TerminalError(DurableError):
    """Raise from a step to fail it for good: the retry policy is not consulted."""


class RetryableError(DurableError):
    """Raise from a step to ask for another attempt, optionally after ``retry_after``."""

    def __init__(self, message: str = "", *, retry_after: timedelta | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StepFailed(DurableError):
    """A step failed for good. Raised into the workflow on first execution and on replay.

    ``step`` and ``position`` name the step; ``error_type`` and ``error_message`` are
    those of its last attempt's error; ``attempts`` counts the attempts it had. Catch it
    to handle the failure in the workflow; left uncaught, it fails the run (and runs the
    registered compensations).
    """

    def __init__(
        self, step: str, position: str, error_type: str, message: str, attempts: int
    ) -> None:
        detail = message if message.startswith(error_type) else f"{error_type}: {message}"
        super().__init__(
            f"step {step!r} at position {position} failed after {attempts} attempt(s): {detail}"
        )
        self.step = step
        self.position = position
        self.error_type = error_type
        self.error_message = message
        self.attempts = attempts


class ChildFailed(DurableError):
    """A child run (``ctx.run_child``, ``ChildHandle.result()``) ended without a result:
    it failed (``error_type`` and ``error_message`` are its error's) or was canceled
    (``error_type`` "Canceled"). Catch it to handle the failure in the parent; left
    uncaught, it fails the parent at the child's position, so an operator's retry of the
    parent retries the failed child there and waits for it again."""

    def __init__(
        self, child_id: str, workflow: str, position: str, error_type: str, message: str
    ) -> None:
        detail = message if message.startswith(error_type) else f"{error_type}: {message}"
        super().__init__(f"child run {child_id} ({workflow}) at position {position}: {detail}")
        self.child_id = child_id
        self.workflow = workflow
        self.position = position
        self.error_type = error_type
        self.error_message = message


class CallbackTimeout(DurableError):
    """A callback or signal wait passed its timeout before anybody answered."""


class CallbackFailed(DurableError):
    """The callback's sender reported a failure (for example a rejected approval)."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.error_message = message


class NonDeterminismError(DurableError):
    """Replay reached a recorded position whose name or kind differs from the code's call."""

    def __init__(self, position: str, recorded: str, called: str) -> None:
        super().__init__(
            f"non-determinism at position {position}: the ledger recorded {recorded} "
            f"but the workflow now calls {called}. Keep old runs on the version they "
            "started on (register a new version) or fork the run from an earlier step."
        )
        self.position = position
        self.recorded = recorded
        self.called = called


class PayloadTooLarge(DurableError):
    """A value would push a ledger item past DynamoDB's 400 KB item limit with no payload
    store configured, or is larger than the store's own limit (terminal)."""

    def __init__(self, what: str, size: int, limit: int, *, hint: str | None = None) -> None:
        super().__init__(
            f"{what} is {size} bytes; "
            + (
                f"a value may be at most {limit} bytes. {hint}"
                if hint
                else f"a ledger item may hold at most {limit} bytes. Configure a payload "
                "store (DURABLE_PAYLOAD_BUCKET: the template's PayloadBucket) so large "
                "values are kept in S3, or store the data elsewhere and pass a reference."
            )
        )
        self.what = what
        self.size = size
        self.limit = limit


class SerdesError(TerminalError):
    """A custom codec (``serdes=``, ``durable.Serdes``) failed to encode or decode a value:
    terminal, naming the call and the codec. A step whose result its codec cannot encode
    (or decode back) fails for good with it (``StepFailed``, ``error_type``
    "SerdesError"); a recorded value its codec cannot decode raises it where the workflow
    reads the value, on every replay."""


class CallbackNotFound(DurableError):
    """No pending callback matches the token (unknown, or forged): HTTP 404."""


class CallbackAlreadyCompleted(DurableError):
    """The callback was already answered: HTTP 409."""


class AmbiguousWait(DurableError):
    """Several callbacks of that name are waiting (map branches that each wait on it): the
    answer must name one by its position. HTTP 409; ``positions`` lists them."""

    def __init__(self, message: str, positions: list[str]) -> None:
        super().__init__(message)
        self.positions = positions


class CallbackExpired(DurableError):
    """The callback's timeout passed before the answer arrived: HTTP 410."""


class WorkflowNotFound(DurableError):
    """No workflow (or no such version of it) is registered under that name."""


class RunNotFound(DurableError):
    """No run with that id exists in the ledger."""


class InvalidInput(DurableError):
    """Input failed validation; ``field`` names the offending location."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class IdempotencyConflict(DurableError):
    """An idempotency key was reused with a different input."""


class RegistrationError(DurableError):
    """A workflow or step definition cannot be registered as written."""


class InvalidCursor(InvalidInput):
    """A listing cursor this service did not hand out (or one for another listing)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="cursor")


class InvalidState(DurableError):
    """The requested operation does not apply to the run's current status."""


class StorageError(DurableError):
    """The ledger or another store failed; ``retryable`` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class PayloadMissing(StorageError):
    """An object a ledger item refers to is not in the payload store: deleted (a run's
    erasure or purge, the bucket's lifecycle) or never readable by this role. Retrying
    cannot bring it back."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


# --- control flow -----------------------------------------------------------------


class ControlFlow(BaseException):
    """Base of the engine's internal signals; never meant to be caught by user code."""


class Suspend(ControlFlow):
    """The run waits for a timer or an event; the invocation ends."""


class Handoff(ControlFlow):
    """The invocation's budget is spent; the run continues in a fresh invocation."""


class LeaseLost(ControlFlow):
    """Another owner holds the run now; this invocation must start no further step."""


class RunCanceled(ControlFlow):
    """A cancel was accepted for the run; the workflow stops at this durable call."""
