"""EventBridge events and SQS batches that start runs (Powertools parser and batch).

Each event or message carries a start envelope (``durable.ingress.triggers``). The idempotency
key defaults to the event id / message id, which a redelivery keeps: the engine derives
the run id from (workflow, key), so the second delivery returns the first run.

SQS batches report partial failures: only the failed messages return to the queue, and
after the queue's ``maxReceiveCount`` they move to its dead-letter queue. Refused
messages (not an envelope, unknown workflow, invalid input) are reported failed too
rather than deleted, so nothing that was sent is lost without a trace: they end in the
dead-letter queue after a few receives, where an operator can look at them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from durable.errors import DurableError, InvalidInput, StorageError
from durable.ingress.triggers import envelope, first_error


@dataclass(frozen=True, slots=True)
class StartCall:
    workflow: str
    input: Any
    idempotency_key: str
    requested_by: str
    version: int | None
    # Each kind of sender keys runs in a namespace of its own (``Engine.start``'s
    # ``key_scope``), as hooks do: a queue message or an event naming a schedule fire's
    # key (``schedule/<name>/<time>``) or an operator's cannot take that run's place.
    key_scope: str = ""


def eventbridge_start(
    event: Any, *, sources: frozenset[str], accounts: frozenset[str]
) -> StartCall:
    """The start an EventBridge event asks for, from an allowed source and account only.

    The rule's pattern admits only those too; checking again here means a rule widened
    by hand (or an event invoked directly) still cannot start a run. ``requested_by``
    records the account EventBridge vouches for and the source the sender named.
    """
    from aws_lambda_powertools.utilities.parser.models import EventBridgeModel

    try:
        parsed = EventBridgeModel.model_validate(event)
    except ValidationError as e:
        raise InvalidInput(
            f"not an EventBridge event ({first_error(e)[1]})", field=first_error(e)[0]
        ) from e
    if parsed.source not in sources or parsed.account not in accounts:
        raise InvalidInput(
            f"event {parsed.id} from source {parsed.source!r} in account {parsed.account} may "
            "not start runs: allow it in DURABLE_START_EVENT_SOURCES and "
            "DURABLE_START_EVENT_ACCOUNTS (the StartEventSources/StartEventAccounts parameters)",
            field="source",
        )
    start = envelope(parsed.detail, f"the detail of event {parsed.id}")
    return StartCall(
        workflow=start.workflow,
        input=start.input,
        idempotency_key=start.idempotency_key or parsed.id,
        requested_by=f"eventbridge:{parsed.account}/{parsed.source}",
        version=start.version,
        key_scope="eventbridge",
    )


def sqs_start(record: Any) -> StartCall:
    """``record``: Powertools' ``SqsRecordModel``."""
    start = envelope(record.body, f"message {record.messageId}")
    queue = str(record.eventSourceARN).rsplit(":", 1)[-1]
    return StartCall(
        workflow=start.workflow,
        input=start.input,
        idempotency_key=start.idempotency_key or record.messageId,
        requested_by=f"sqs:{queue}",
        version=start.version,
        key_scope="sqs",
    )


def sqs_batch(
    runtime: Any,
    telemetry: Any,
    event: dict[str, Any],
    context: Any,
    start: Callable[[Any, StartCall], str],
) -> dict[str, Any]:
    from aws_lambda_powertools.utilities.batch import (
        BatchProcessor,
        EventType,
        process_partial_response,
    )
    from aws_lambda_powertools.utilities.parser.models import SqsRecordModel

    def handle(record: SqsRecordModel) -> str:
        try:
            return start(runtime, sqs_start(record))
        except DurableError as e:
            if not (isinstance(e, StorageError) and e.retryable):
                telemetry.logger.error(
                    f"message {record.messageId} refused: {e}",
                    extra={"error_type": type(e).__name__, "message_id": record.messageId},
                )
                telemetry.count("EventsRefused")
            raise

    processor = BatchProcessor(event_type=EventType.SQS, model=SqsRecordModel)
    result = process_partial_response(
        event=event, record_handler=handle, processor=processor, context=context
    )
    return dict(result)
