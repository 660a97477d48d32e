"""What the non-HTTP handlers accept: worker events and run-start envelopes.

Worker events (``{run_id, reason, hop}``) come from the worker's own hand-offs, from
EventBridge Scheduler timers and from the sweeper. Start envelopes come inside an
EventBridge event's ``detail`` or an SQS message body::

    {"workflow": "onboarding", "input": {...}, "version": 1, "idempotency_key": "..."}

Without ``idempotency_key`` the key is derived from the event id or SQS message id, so a
redelivery of the same event finds the run it started instead of starting another.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from durable.errors import InvalidInput

Name = Annotated[str, Field(min_length=1, max_length=200)]


class WorkerEvent(BaseModel):
    # Extra keys are tolerated: a target may add its own (Scheduler adds none today).
    model_config = ConfigDict(extra="ignore")

    run_id: Annotated[str, Field(pattern=r"^[0-9A-Z]{26}$")]
    reason: Annotated[str, Field(max_length=64)] = ""
    hop: Annotated[int, Field(ge=0)] = 0


class StartEnvelope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workflow: Name
    input: Any = None
    version: Annotated[int | None, Field(ge=1)] = None
    idempotency_key: Annotated[str | None, Field(min_length=1, max_length=200)] = None


def first_error(error: ValidationError) -> tuple[str, str]:
    """(field, message) of a validation error, for a log line or an ``InvalidInput``."""
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "event"
    return where, f"field {where!r}: {first['msg']}"


def envelope(value: Any, what: str) -> StartEnvelope:
    """Validate a start envelope (a dict, or JSON text of one)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise InvalidInput(f"{what} is not JSON: {e}", field="body") from e
    try:
        return StartEnvelope.model_validate(value)
    except ValidationError as e:
        field, message = first_error(e)
        raise InvalidInput(
            f"{what} is not a start envelope ({message}); send "
            '{"workflow": <name>, "input": <JSON>}',
            field=field,
        ) from e
