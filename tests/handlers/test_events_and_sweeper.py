"""Runs started by EventBridge events and SQS batches; the scheduled sweeper."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from durable.errors import InvalidInput, WorkflowNotFound
from tests.handlers.conftest import Stack, later
from tests.handlers.events import (
    ACCOUNT,
    LambdaContext,
    api_event,
    eventbridge_event,
    scheduled_sweep_event,
    sqs_record,
)

SIGNUP = {"user_id": "u5", "email": "u5@example.com"}
ENVELOPE = {"workflow": "greet", "input": SIGNUP}


def events(stack: Stack, event: Any) -> Any:
    return stack.handlers["events"](event, LambdaContext(function_name="durable-events-test"))


def greet_runs(stack: Stack) -> list[dict[str, Any]]:
    reply = stack.call(api_event("GET", "/runs", query={"workflow": "greet"}))
    runs: list[dict[str, Any]] = reply.body["runs"]
    return runs


def test_an_eventbridge_event_starts_one_run_however_often_delivered(stack: Stack) -> None:
    event = eventbridge_event(ENVELOPE)
    first = events(stack, event)
    again = events(stack, event)  # EventBridge delivers at least once
    assert first == again
    (run,) = greet_runs(stack)
    assert run["run_id"] == first["run_id"]
    assert run["requested_by"] == f"eventbridge:{ACCOUNT}/com.example.signup"
    assert run["idempotency_key"] == f"eventbridge/{event['id']}"  # the sender's namespace
    assert [w["result"] for w in stack.drain()] == ["succeeded"]


def test_an_envelope_key_dedupes_across_event_ids(stack: Stack) -> None:
    envelope = {**ENVELOPE, "idempotency_key": "signup-u5"}
    a = events(stack, eventbridge_event(envelope))
    b = events(stack, eventbridge_event(envelope))
    assert a == b
    assert len(greet_runs(stack)) == 1


@pytest.mark.parametrize(
    ("detail", "error"),
    [
        ({"input": SIGNUP}, InvalidInput),
        ({"workflow": "greet", "input": {"user_id": "u"}}, InvalidInput),
        ({**ENVELOPE, "extra": True}, InvalidInput),
        ({"workflow": "nope"}, WorkflowNotFound),
    ],
)
def test_refused_eventbridge_events_raise_and_write_nothing(
    stack: Stack, detail: Any, error: type[Exception]
) -> None:
    # Raised, so Lambda's retries and the on-failure destination keep the event.
    before = stack.snapshot()
    with pytest.raises(error):
        events(stack, eventbridge_event(detail))
    assert stack.snapshot() == before


@pytest.mark.parametrize(
    "change",
    [{"source": "com.attacker.anything"}, {"account": "999999999999"}],
)
def test_an_event_from_a_source_or_account_not_allowed_starts_nothing(
    stack: Stack, change: dict[str, str]
) -> None:
    """GIVEN events from a source, or an account, the stack does not allow (issue 13,
    finding 6: the rule accepted any source, and requested_by was the sender's choice)
    WHEN one reaches the events function anyway (a rule widened by hand, a direct invoke)
    THEN it is refused, naming the setting, and nothing is written."""
    before = stack.snapshot()
    with pytest.raises(InvalidInput, match="DURABLE_START_EVENT_SOURCES"):
        events(stack, {**eventbridge_event(ENVELOPE), **change})
    assert stack.snapshot() == before


def test_not_an_eventbridge_event_is_refused(stack: Stack) -> None:
    with pytest.raises(InvalidInput):
        events(stack, {"hello": "world"})


def test_sqs_batch_reports_only_the_failed_messages(stack: Stack) -> None:
    good = sqs_record(json.dumps(ENVELOPE))
    malformed = sqs_record("{not json")
    unknown = sqs_record(json.dumps({"workflow": "nope"}))
    result = events(stack, {"Records": [good, malformed, unknown]})
    failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
    assert failed == {malformed["messageId"], unknown["messageId"]}
    (run,) = greet_runs(stack)
    assert run["idempotency_key"] == f"sqs/{good['messageId']}"
    assert run["requested_by"] == "sqs:durable-start-test"


def test_a_redelivered_sqs_message_does_not_start_a_second_run(stack: Stack) -> None:
    record = sqs_record(json.dumps(ENVELOPE))
    assert events(stack, {"Records": [record]}) == {"batchItemFailures": []}
    before = stack.snapshot()
    redelivered = {**record, "attributes": {**record["attributes"], "ApproximateReceiveCount": "2"}}
    assert events(stack, {"Records": [redelivered]}) == {"batchItemFailures": []}
    assert stack.snapshot() == before
    assert len(greet_runs(stack)) == 1


def test_a_batch_where_every_message_fails_is_retried_whole(stack: Stack) -> None:
    with pytest.raises(BatchProcessingError):
        events(stack, {"Records": [sqs_record("[]"), sqs_record("null")]})


def test_the_sweeper_starts_a_run_whose_invocation_was_lost(stack: Stack) -> None:
    reply = stack.call(api_event("POST", "/workflows/greet/runs", SIGNUP))
    assert stack.invoker.pop() is not None  # the async invoke is lost
    later(stack, seconds=1)
    sweeper = stack.handlers["sweeper"]
    report = sweeper(scheduled_sweep_event(), LambdaContext(function_name="durable-sweeper-test"))
    assert report == {"seen": 1, "invoked": 1, "capped": False, "needs_attention": 0}
    assert [w["result"] for w in stack.drain()] == ["succeeded"]
    run = stack.call(api_event("GET", f"/runs/{reply.body['run_id']}")).body
    assert run["status"] == "SUCCEEDED"
