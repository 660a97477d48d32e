"""Each kind of sender keys runs in a namespace of its own (issue 32, finding 5): a queue
message or an EventBridge event that names a schedule fire's key cannot take that fire's
place (the fire was a duplicate of the sender's run, and the scheduled run never ran)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from durable.engine.schedules import fire_key
from tests.handlers.conftest import Stack
from tests.handlers.events import LambdaContext, eventbridge_event, sqs_record
from tests.handlers.test_events_and_sweeper import ENVELOPE, events, greet_runs


@pytest.mark.parametrize("sender", ["sqs", "eventbridge"])
def test_a_sender_naming_a_schedule_fires_key_does_not_squat_the_fire(
    stack: Stack, sender: str
) -> None:
    when = stack.clock.now() - timedelta(minutes=1)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    squat = {**ENVELOPE, "idempotency_key": fire_key("morning-greet", when.isoformat())}
    squat["idempotency_key"] = fire_key("morning-greet", when.strftime("%Y-%m-%dT%H:%M:%S.000Z"))
    event: Any = (
        {"Records": [sqs_record(json.dumps(squat))]}
        if sender == "sqs"
        else eventbridge_event(squat)
    )
    events(stack, event)
    (squatter,) = greet_runs(stack)
    assert squatter["idempotency_key"].startswith(f"{sender}/schedule/")
    fired = stack.worker({"schedule": "morning-greet", "scheduled_time": stamp}, LambdaContext())
    assert fired["result"] == "started" and fired["run_id"] != squatter["run_id"]
    assert len(greet_runs(stack)) == 2
