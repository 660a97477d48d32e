"""Map errors to HTTP answers: one JSON shape, ``{"error": {"type", "message", "field"}}``.

Every error below is raised before the ledger is written (the engine decides all of them
up front), so an error answer means nothing changed. Unexpected exceptions become a
generic 500: their text may hold internals, so it goes to the log only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from durable.api.models import ErrorDetail, ErrorResponse
from durable.errors import (
    AmbiguousWait,
    CallbackAlreadyCompleted,
    CallbackExpired,
    CallbackNotFound,
    DurableError,
    IdempotencyConflict,
    InvalidCursor,
    InvalidInput,
    InvalidState,
    PayloadTooLarge,
    RunNotFound,
    StorageError,
    WorkflowNotFound,
)

log = logging.getLogger("durable.api")


class HttpError(DurableError):
    """An answer decided by the API layer itself (bad signature, malformed JSON, ...)."""

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        *,
        field: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.field = field
        # Seconds a client should wait before it asks again (a Retry-After header).
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: ErrorResponse
    headers: dict[str, str]

    def json(self) -> str:
        return self.body.model_dump_json(exclude_none=True)


_STATUS: list[tuple[type[Exception], int]] = [
    (InvalidCursor, 400),
    (InvalidInput, 422),
    (WorkflowNotFound, 404),
    (RunNotFound, 404),
    (CallbackNotFound, 404),
    (IdempotencyConflict, 409),
    (CallbackAlreadyCompleted, 409),
    (InvalidState, 409),
    (CallbackExpired, 410),
    (PayloadTooLarge, 413),
]


def answer(error: Exception) -> Answer:
    """The HTTP answer for ``error`` (logged here when it is the server's fault)."""
    if isinstance(error, HttpError):
        return _answer(
            error.status, error.kind, str(error), error.field, retry_after=error.retry_after
        )
    if isinstance(error, AmbiguousWait):
        found = _answer(409, "AmbiguousWait", str(error), "position")
        found.body.error.positions = error.positions
        return found
    for cls, status in _STATUS:
        if isinstance(error, cls):
            field = error.field if isinstance(error, InvalidInput) else None
            return _answer(status, type(error).__name__, str(error), field)
    if isinstance(error, StorageError) and error.retryable:
        log.warning("storage is unavailable: %s", error)
        return _answer(
            503, "ServiceUnavailable", "storage is busy; try again shortly", None, retry_after=5
        )
    if isinstance(error, DurableError) and not isinstance(error, StorageError):
        return _answer(400, type(error).__name__, str(error), None)
    log.exception("unexpected error while handling a request", exc_info=error)
    return _answer(500, "InternalError", "internal error; see the function's log", None)


def _answer(
    status: int, kind: str, message: str, field: str | None, *, retry_after: int | None = None
) -> Answer:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    detail = ErrorDetail(type=kind, message=message, field=field)
    return Answer(status, ErrorResponse(error=detail), headers)


def validation_answer(errors: list[dict[str, object]]) -> Answer:
    """Powertools' request validation errors: malformed JSON is 400, the rest 422."""
    first = errors[0] if errors else {}
    loc = [str(p) for p in first.get("loc", ()) or ()]  # type: ignore[attr-defined]
    if first.get("type") == "json_invalid":
        return _answer(400, "MalformedJSON", "the request body is not valid JSON", "body")
    # loc is ("body"|"query"|"path", name, ...): name the field as the client wrote it.
    # An empty key (``{"": 1}``) names no field: then the part of the request it sits in.
    field = (".".join(loc[1:]) or loc[0]) if len(loc) > 1 else (loc[0] if loc else None)
    where = loc[0] if loc else "request"
    message = f"{where} field {field!r}: {first.get('msg', 'invalid')}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more error(s))"
    return _answer(422, "InvalidInput", message, field)
