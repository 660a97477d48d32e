"""The worker handler: async self-invocation events, Scheduler wake-ups, hop counter."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from durable.adapters.lambda_invoker import LambdaInvoker
from tests.conftest import MakeTables
from tests.handlers.conftest import WORKER_ARN, Stack, build_stack, later
from tests.handlers.events import LambdaContext, api_event


def start(stack: Stack, workflow: str, body: Any = None) -> str:
    reply = stack.call(api_event("POST", f"/workflows/{workflow}/runs", body))
    assert reply.status == 202, reply.body
    run_id: str = reply.body["run_id"]
    return run_id


def status(stack: Stack, run_id: str) -> str:
    value: str = stack.call(api_event("GET", f"/runs/{run_id}")).body["status"]
    return value


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"run_id": "too-short"},
        {"run_id": "01JDURABLE0000000000000000", "hop": -1},
        {"run_id": "01JDURABLE0000000000000000", "hop": "many"},
        "not an object",
        None,
        {"Records": []},
    ],
)
def test_malformed_events_are_dropped_not_raised(stack: Stack, event: Any) -> None:
    before = stack.snapshot()
    result = stack.worker(event, LambdaContext())
    assert result["result"] == "dropped"
    assert result["error"]
    assert stack.snapshot() == before


def test_an_unknown_run_is_busy_not_an_error(stack: Stack) -> None:
    result = stack.worker({"run_id": "01JDURABLE0000000000000000"}, LambdaContext())
    assert result["result"] == "busy"


def test_a_scheduler_wake_up_resumes_a_sleeping_run(stack: Stack) -> None:
    run_id = start(stack, "sleeper")
    stack.drain()
    assert status(stack, run_id) == "WAITING"
    assert stack.fire_timers() == []  # not due yet
    later(stack, hours=1, seconds=1)
    assert [r["result"] for r in stack.fire_timers()] == ["succeeded"]
    assert status(stack, run_id) == "SUCCEEDED"


def test_hand_offs_chain_self_invocations_with_a_hop_counter(
    moto_client: Any, make_tables: MakeTables
) -> None:
    stack = build_stack(moto_client, make_tables, steps_per_invocation=1)
    run_id = start(stack, "counter", 3)
    hops = []
    while (item := stack.invoker.pop()) is not None:
        hops.append(item.hop)
        event = {"run_id": item.run_id, "reason": item.reason, "hop": item.hop}
        stack.worker(event, LambdaContext())
    assert hops == [0, 1, 2]  # one step per invocation; the last one also finishes
    assert status(stack, run_id) == "SUCCEEDED"


def test_past_max_hops_the_sweeper_takes_over(moto_client: Any, make_tables: MakeTables) -> None:
    stack = build_stack(moto_client, make_tables, steps_per_invocation=1, max_hops=1)
    run_id = start(stack, "counter", 3)
    results = [r["result"] for r in stack.drain()]
    assert results == ["handed_off", "handed_off", "deferred"]
    assert status(stack, run_id) == "RUNNING"
    # WHEN the hand-off's grace has passed, the sweeper wakes it at hop 0
    later(stack, minutes=1)
    stack.handlers["sweeper"]({}, LambdaContext(function_name="durable-sweeper-test"))
    assert [r["result"] for r in stack.drain()] == ["succeeded"]


def test_the_lambda_remaining_time_is_the_invocation_budget(stack: Stack) -> None:
    # GIVEN a fresh invocation with less time left than a step's declared budget (5 min)
    run_id = start(stack, "report")
    assert stack.invoker.pop() is not None
    short = LambdaContext(remaining_ms=1500)
    result = stack.worker({"run_id": run_id, "reason": "start", "hop": 0}, short)
    # THEN the step is refused for good with the fix in the message (it could never fit)
    assert result["result"] == "failed"
    detail = stack.call(api_event("GET", f"/runs/{run_id}")).body
    assert "the step needs 300s but a fresh invocation has only 2s" in detail["error"]["message"]


def test_a_step_without_a_declared_budget_runs_in_a_short_invocation(stack: Stack) -> None:
    run_id = start(stack, "greet", {"user_id": "u", "email": "e"})
    assert stack.invoker.pop() is not None
    short = LambdaContext(remaining_ms=1500)
    result = stack.worker({"run_id": run_id, "reason": "start", "hop": 0}, short)
    assert result["result"] == "succeeded"


def test_the_lambda_invoker_sends_an_async_event_with_the_hop() -> None:
    client = boto3.client("lambda", region_name="us-east-1")
    expected = {
        "FunctionName": WORKER_ARN,
        "InvocationType": "Event",
        "Payload": json.dumps({"run_id": "R", "reason": "continue", "hop": 4}).encode(),
    }
    with Stubber(client) as stub:
        stub.add_response("invoke", {"StatusCode": 202}, expected)
        LambdaInvoker(client, WORKER_ARN).invoke("R", "continue", 4)
        stub.assert_no_pending_responses()


def test_scheduler_schedules_target_the_worker_with_its_input(
    moto_client: Any, make_tables: MakeTables
) -> None:
    from durable.adapters.scheduler import SchedulerTimers

    scheduler = boto3.client("scheduler", region_name="us-east-1")
    scheduler.create_schedule_group(Name="durable-test")
    timers = SchedulerTimers(
        scheduler,
        group="durable-test",
        target_arn=WORKER_ARN,
        role_arn="arn:aws:iam::123456789012:role/durable-scheduler-test",
    )
    stack = build_stack(moto_client, make_tables, timers=timers)
    run_id = start(stack, "sleeper")
    stack.drain()
    (listed,) = scheduler.list_schedules(GroupName="durable-test")["Schedules"]
    schedule = scheduler.get_schedule(Name=listed["Name"], GroupName="durable-test")
    assert schedule["Target"]["Arn"] == WORKER_ARN
    assert schedule["ActionAfterCompletion"] == "DELETE"
    # WHEN Scheduler fires, the worker receives the target's Input as its event
    later(stack, hours=1, seconds=1)
    event = json.loads(schedule["Target"]["Input"])
    assert stack.worker(event, LambdaContext())["result"] == "succeeded"
    assert status(stack, run_id) == "SUCCEEDED"


def test_log_lines_inside_a_step_carry_run_step_and_attempt(
    moto_client: Any, make_tables: MakeTables, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = build_stack(moto_client, make_tables)
    run_id = start(stack, "greet", {"user_id": "u42", "email": "e"})
    stack.drain()
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    (inside,) = [x for x in lines if x.get("message") == "greeting u42"]
    assert (inside["run_id"], inside["step"], inside["attempt"]) == (run_id, "greet_user", 1)
    assert inside["function_request_id"]
    assert "_aws" in {k for x in lines for k in x}  # metrics went out as EMF


def test_a_run_of_a_version_this_worker_lacks_is_deferred_and_counted(
    moto_client: Any, make_tables: MakeTables, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a run pinned to a workflow version this worker's code does not have (the API
    is already on new code mid-deploy)
    WHEN the worker gets it
    THEN the run is deferred, not failed: still PENDING, due later, and RunsDeferred is
    counted for the alarm."""
    stack = build_stack(moto_client, make_tables)
    run_id = start(stack, "greet", {"user_id": "u1", "email": "e"})
    moto_client.update_item(
        TableName=stack.tables[0],
        Key={"pk": {"S": f"RUN#{run_id}"}, "sk": {"S": "RUN"}},
        UpdateExpression="SET version = :v",
        ExpressionAttributeValues={":v": {"N": "99"}},
    )
    (result,) = stack.drain()
    assert result["result"] == "deferred"
    assert status(stack, run_id) == "PENDING"
    metrics = [
        json.loads(x)["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        for x in capsys.readouterr().out.splitlines()
        if x.startswith("{") and "_aws" in x
    ]
    assert {"Name": "RunsDeferred", "Unit": "Count"} in [m for ms in metrics for m in ms]
