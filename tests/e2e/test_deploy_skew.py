"""A deploy on durable dev, with runs in flight: version skew both ways, and the gate.

GIVEN a run of ``order`` v1 waiting for a signal, on DynamoDB Local (kept across restarts)
WHEN durable dev restarts with the API and the workers on different code (a deploy caught
     halfway: ``--worker-app``), and the deploy hook asks the workers through durable dev's
     Lambda Invoke API
THEN the API refuses (503, nothing written) the starts the workers cannot run, the gate
     fails the code that dropped version 1 and names the run, the run is deferred and never
     failed while no worker has its version, and finishes once the fixed code is deployed.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from durable.aws import deploy_hook_handler
from durable.local.harness import DevProcess
from durable.settings import Settings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("java") is None, reason="durable dev persists with Java"),
]

ROOT = Path(__file__).resolve().parents[2]
APPS = "examples.order_versions"


class Verdicts:
    """CodeDeploy's side of the hook (no local CodeDeploy exists): the statuses reported."""

    def __init__(self) -> None:
        self.reported: list[dict[str, str]] = []

    def put_lifecycle_event_hook_execution_status(self, **call: str) -> dict[str, Any]:
        self.reported.append(call)
        return {"lifecycleEventHookExecutionId": call["lifecycleEventHookExecutionId"]}


def _dev(workdir: Path, app: str, worker_app: str | None = None) -> DevProcess:
    return DevProcess(
        workdir,
        app=f"{APPS}:{app}",
        worker_app=f"{APPS}:{worker_app}" if worker_app else None,
        time_scale=10,  # a first deferral (15 s) lasts 1.5 s
        env={"PYTHONPATH": str(ROOT)},
    )


def _refused(dev: DevProcess) -> dict[str, Any]:
    with pytest.raises(urllib.error.HTTPError) as caught:
        dev.http("POST", "/workflows/order/runs", "o2")
    assert caught.value.code == 503
    assert caught.value.headers["Retry-After"] == "30"
    error: dict[str, Any] = json.loads(caught.value.read())["error"]
    return error


def _runs(dev: DevProcess) -> list[str]:
    page = dev.http("GET", "/runs?workflow=order&limit=50")
    return sorted(r["run_id"] for r in page["runs"])


def _gate(dev: DevProcess) -> tuple[dict[str, Any], Verdicts]:
    """The deploy hook handler, asking durable dev's workers as it asks a new version."""
    lambda_client = dev.lambda_client()
    verdicts = Verdicts()
    settings = Settings(
        app=dev.app,
        ledger_table="durable-ledger-dev",
        idempotency_table="durable-idempotency-dev",
        worker_function="durable-worker-dev:live",
        worker_version="arn:aws:lambda:us-east-1:000000000000:function:durable-worker-dev:8",
    )
    hook = deploy_hook_handler(settings, clients=lambda: (lambda_client, verdicts))
    event = {"DeploymentId": "d-LOCAL", "LifecycleEventHookExecutionId": "hook-1"}
    return hook(event, None), verdicts


def _deferrals(workdir: Path, run_id: str) -> int:
    import boto3

    from durable.adapters.dynamodb import DynamoLedger

    dev = json.loads((workdir / ".durable" / "dev.json").read_text())
    client = boto3.client(
        "dynamodb",
        endpoint_url=dev["dynamodb"],
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    run = DynamoLedger(client, dev["ledger_table"]).get_run(run_id)
    assert run is not None
    return run.deferrals


def test_version_skew_both_ways_and_the_gate_on_durable_dev(tmp_path: Path) -> None:
    # The old code everywhere: a run of order v1 waits for its payment.
    with _dev(tmp_path, "old") as dev:
        run_id = dev.http("POST", "/workflows/order/runs", "o1")["run_id"]
        dev.wait_for(run_id, {"WAITING"})
        gate, verdicts = _gate(dev)  # a redeploy of the same code passes
        assert gate["status"] == "Succeeded" and gate["checked"] == 1, gate
        assert verdicts.reported == [
            {
                "deploymentId": "d-LOCAL",
                "lifecycleEventHookExecutionId": "hook-1",
                "status": "Succeeded",
            }
        ]

    # The API deployed first: it has order v2, the workers still only v1.
    with _dev(tmp_path, "both", worker_app="old") as dev:
        error = _refused(dev)
        assert error["type"] == "VersionNotServed"
        assert "'order' version 2 is not served" in error["message"]
        assert "they serve version(s) 1" in error["message"]
        assert _runs(dev) == [run_id]  # nothing was written

    # The workers deployed first, on code that dropped v1; the API still starts v1.
    with _dev(tmp_path, "old", worker_app="only_v2") as dev:
        error = _refused(dev)
        assert "'order' version 1 is not served" in error["message"], error
        assert "they serve version(s) 2" in error["message"]
        gate, verdicts = _gate(dev)
        assert gate["status"] == "Failed" and verdicts.reported[0]["status"] == "Failed"
        assert gate["broken"][0]["run_id"] == run_id
        assert gate["broken"][0]["verdict"] == "unregistered"
        assert run_id in gate["reason"]
        # The payment arrives meanwhile: no worker has v1, so the run is deferred, not failed.
        dev.http("POST", f"/runs/{run_id}/signals/paid", {"amount": 10})
        deadline = time.time() + 30
        while _deferrals(tmp_path, run_id) < 2 and time.time() < deadline:
            time.sleep(0.3)
        assert _deferrals(tmp_path, run_id) >= 2, dev.log_tail()
        assert dev.http("GET", f"/runs/{run_id}")["status"] == "WAITING"

    # The fix: version 2 for new runs, version 1 kept. The gate passes, the run finishes.
    with _dev(tmp_path, "both") as dev:
        gate, _ = _gate(dev)
        assert gate["status"] == "Succeeded", gate
        assert dev.wait_for(run_id, {"SUCCEEDED"}, timeout=60)["output"] == "shipped o1"
        started = dev.http("POST", "/workflows/order/runs", "o3")
        assert started["version"] == 2
