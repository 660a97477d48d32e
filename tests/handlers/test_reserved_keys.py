"""A key a run shows names exactly that run, whatever route wrote it (issue 43, hole 3;
issue 44, finding 2).

A run an SQS message started shows ``sqs/<message id>``; the same text sent as an API
Idempotency-Key made a second run showing the same key, and the lookups by key
(``GET ?key=``, ``durable signal key:...``) reached that one. A schedule's fire key sent
the same way took the fire's place before it fired. Keys in the senders' and the
engine's namespaces are now refused from anyone else.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from durable import cli
from durable.core.model import format_time
from durable.engine.schedules import fire_key
from tests.handlers import workflows
from tests.handlers.conftest import Stack
from tests.handlers.events import LambdaContext, api_event, sqs_record
from tests.handlers.test_api_events import cli_through, show
from tests.handlers.test_events_and_sweeper import events

BASE = ["--endpoint", "http://127.0.0.1:1"]


def runs_by_key(stack: Stack, workflow: str, key: str) -> list[dict[str, Any]]:
    reply = stack.call(api_event("GET", f"/workflows/{workflow}/runs", query={"key": key}))
    assert reply.status == 200, reply.body
    runs: list[dict[str, Any]] = reply.body["runs"]
    return runs


def test_an_sqs_run_s_key_is_refused_to_the_api_and_names_the_sqs_run(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    record = sqs_record(json.dumps({"workflow": "signalled"}), message_id="m-123")
    assert events(stack, {"Records": [record]}) == {"batchItemFailures": []}
    stack.drain()
    (sent,) = runs_by_key(stack, "signalled", "sqs/m-123")
    assert sent["idempotency_key"] == "sqs/m-123" and sent["status"] == "WAITING"

    before = stack.snapshot()
    headers = {"Idempotency-Key": "sqs/m-123"}
    reply = stack.call(api_event("POST", "/workflows/signalled/runs", headers=headers))
    assert reply.status == 422, reply.body
    assert reply.error["field"] == "Idempotency-Key"
    assert "keys beginning with 'sqs/'" in reply.error["message"]
    assert stack.snapshot() == before

    assert [r["run_id"] for r in runs_by_key(stack, "signalled", "sqs/m-123")] == [sent["run_id"]]
    cli_through(stack, monkeypatch)
    signal = ["signal", "key:sqs/m-123", "go", "--workflow", "signalled", "--payload", "7"]
    assert cli.main([*BASE, *signal]) == 0
    stack.drain()
    assert show(stack, sent["run_id"])["output"] == 7

    # The CLI refuses the key before sending it, naming its own option.
    capsys.readouterr()
    start = ["start", "signalled", "--idempotency-key", "sqs/m-123"]
    assert cli.main([*BASE, *start]) != 0
    err = capsys.readouterr().err
    assert "--idempotency-key" in err and "keys beginning with 'sqs/'" in err


def test_the_api_cannot_take_a_schedule_s_future_fire(stack: Stack) -> None:
    schedule = workflows.app.schedules()["morning-greet"]
    when = schedule.next_fire(stack.clock.now())
    assert when is not None
    key = fire_key("morning-greet", format_time(when))
    before = stack.snapshot()
    mallory = {"user_id": "mallory", "email": "mallory@example.com"}
    headers = {"Idempotency-Key": key}
    reply = stack.call(api_event("POST", "/workflows/greet/runs", mallory, headers=headers))
    assert reply.status == 422, reply.body
    assert reply.error["field"] == "Idempotency-Key"
    assert "keys beginning with 'schedule/'" in reply.error["message"]
    assert stack.snapshot() == before
    assert runs_by_key(stack, "greet", key) == []

    stack.clock.set(when)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    fired = stack.worker({"schedule": "morning-greet", "scheduled_time": stamp}, LambdaContext())
    assert fired["result"] == "started"
    stack.drain()
    run = show(stack, str(fired["run_id"]))
    assert run["idempotency_key"] == key
    assert run["output"] == {"greeting": "hello team"}
    assert [r["run_id"] for r in runs_by_key(stack, "greet", key)] == [fired["run_id"]]
