"""What a run's life asks of each deployed function, as steps a test strings together.

Each helper drives a built function through a ``DeployedStack`` the way AWS would (API
Gateway's event, an asynchronous invocation, EventBridge's scheduled event, a stream
record of TTL's delete, CodeDeploy's hook event) and asserts what the function answered.
Shared by this repo's stack (``test_built_stack.py``) and a project made by ``durable
init`` (``tests/project``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from infra.local.deployed_stack import ACCOUNT, REGION, DeployedStack

DAY = 86_400.0


def start(stack: DeployedStack, workflow: str, given: Any) -> str:
    """A run started through the built API; the worker's hand-off queued, not yet run."""
    status, body = stack.api("POST", f"/workflows/{workflow}/runs", given)
    assert status == 202, body
    run_id: str = body["run_id"]
    return run_id


def shown(stack: DeployedStack, run_id: str) -> dict[str, Any]:
    status, body = stack.api("GET", f"/runs/{run_id}")
    assert status == 200, body
    run: dict[str, Any] = body
    return run


def waiting_on(stack: DeployedStack, run_id: str) -> list[dict[str, Any]]:
    """The run's steps that wait (a sleep, a callback)."""
    run = shown(stack, run_id)
    assert run["status"] == "WAITING", run
    return [s for s in run["steps"] if s["status"] == "WAITING"]


def answer(stack: DeployedStack, run_id: str, wait: str, result: Any) -> None:
    """An operator answers a callback by its name through the built API."""
    status, body = stack.api("POST", f"/runs/{run_id}/waits/{wait}", {"result": result})
    assert status == 202, body


def timers_of(stack: DeployedStack, run_id: str) -> list[dict[str, Any]]:
    """The one-time schedules the worker armed for ``run_id`` (on moto's Scheduler)."""
    scheduler = stack._moto["scheduler"]
    group = stack.intrinsics.resource("TimerGroup")
    listed = scheduler.list_schedules(GroupName=group)["Schedules"]
    found: list[dict[str, Any]] = []
    for entry in listed:
        schedule = scheduler.get_schedule(Name=entry["Name"], GroupName=group)
        if run_id in schedule["Target"]["Input"]:
            found.append(dict(schedule))
    return found


def wake_by_sweeper(stack: DeployedStack, seconds: float) -> list[Any]:
    """``seconds`` pass with the timer lost (nothing here fires Scheduler's schedules): the
    built sweeper finds the run due and hands it to the worker, which runs it."""
    stack.advance(seconds)
    swept = stack.sweep()
    assert swept, swept
    return stack.drain()


def start_by_event(stack: DeployedStack, workflow: str, given: Any, source: str) -> str:
    """EventBridge's StartWorkflowRun event to the built events function."""
    key = f"order-{uuid.uuid4().hex[:8]}"
    event = {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "StartWorkflowRun",
        "source": source,
        "account": ACCOUNT,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stack.now())),
        "region": REGION,
        "resources": [],
        "detail": {"workflow": workflow, "input": given, "idempotency_key": key},
    }
    started = stack.invoke("EventsFunction", event)
    run_id: str = started["run_id"]
    return run_id


def deploy_gate(stack: DeployedStack) -> dict[str, Any]:
    """CodeDeploy's PreTraffic hook event to the built deploy hook: it asks the new worker
    version (the same build) to replay the runs in flight, then reports its verdict."""
    execution = str(uuid.uuid4())
    stack.invoke(
        "DeployHookFunction",
        {"DeploymentId": "d-LOCAL0001", "LifecycleEventHookExecutionId": execution},
    )
    (verdict,) = [
        v for v in stack.lambda_api.verdicts if v["lifecycleEventHookExecutionId"] == execution
    ]
    return verdict


def purge(stack: DeployedStack, run_id: str, retention_days: float) -> None:
    """The run's retention passes; TTL deletes its item and the built purge function
    deletes every step and signal it left: nothing of the run remains."""
    stack.advance(retention_days * DAY + 60)
    answered = stack.expire(run_id)
    assert answered == {"batchItemFailures": []}, answered
    left = stack.dynamodb.query(
        TableName=stack.table("LedgerTable"),
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"RUN#{run_id}"}},
        ConsistentRead=True,
    )["Items"]
    assert left == [], left
    assert payloads_of(stack, run_id) == [], "the purge left the run's large values"


def payloads_of(stack: DeployedStack, run_id: str) -> list[str]:
    """The keys of the run's large values in the stack's PayloadBucket (on moto)."""
    bucket = stack.intrinsics.resource("PayloadBucket")
    listed = stack._moto["s3"].list_objects_v2(Bucket=bucket, Prefix=f"runs/{run_id}/")
    return [item["Key"] for item in listed.get("Contents", [])]
