"""Changing a workflow with runs in flight, on durable dev.

    python -m examples.deploy_demo          (what `make demo-deploy` runs)

1. starts ``durable dev`` on the deployed code (``examples.order_versions:old``) and three
   orders, which reserve stock and wait for their payment;
2. checks two changes before deploying them with ``durable check-deploy``: a renamed step
   (every run in flight would break: the check names them and where) and the same change
   as version 2 with version 1 kept (every run replays cleanly);
3. deploys halfway (the API on the new code, the workers still on the old): a start of
   version 2 is refused with 503 and nothing is written, as during a real deploy;
4. deploys the fix: the deploy gate (the real PreTraffic hook handler, asking the
   workers through durable dev's Lambda Invoke API) passes, the payments arrive and the old
   runs finish on version 1, and a new order starts on version 2.
"""

from __future__ import annotations

import json
import sys
import tempfile
import urllib.error
from pathlib import Path
from typing import Any

from durable.aws import deploy_hook_handler
from durable.local.harness import DevProcess
from durable.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
APPS = "examples.order_versions"


def say(text: str) -> None:
    print(text, flush=True)


def dev_on(workdir: Path, app: str, worker_app: str | None = None) -> DevProcess:
    return DevProcess(
        workdir,
        app=f"{APPS}:{app}",
        worker_app=f"{APPS}:{worker_app}" if worker_app else None,
        env={"PYTHONPATH": str(ROOT)},
    )


def check(dev: DevProcess, app: str) -> int:
    out = dev.cli("check-deploy", "--app", f"{APPS}:{app}", check=False)
    for line in out.stdout.strip().splitlines():
        say(f"    {line}")
    return out.returncode


def gate(dev: DevProcess) -> dict[str, Any]:
    """CodeDeploy's PreTraffic hook, run here against durable dev's workers."""
    client = dev.lambda_client()

    class CodeDeploy:  # there is no local CodeDeploy: print what the hook reports
        def put_lifecycle_event_hook_execution_status(self, **call: str) -> None:
            say(f"    hook -> CodeDeploy: {call['status']}")

    settings = Settings(
        app=dev.app,
        ledger_table="durable-ledger-dev",
        idempotency_table="durable-idempotency-dev",
        worker_function="durable-worker-dev:live",
        worker_version="2",
    )
    hook = deploy_hook_handler(settings, clients=lambda: (client, CodeDeploy()))
    result: dict[str, Any] = hook(
        {"DeploymentId": "d-DEMO", "LifecycleEventHookExecutionId": "1"}, None
    )
    return result


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="durable-deploy-demo-"))
    say(f"• durable dev in {workdir} (DynamoDB Local keeps the runs across restarts)")

    say("\n== 1. the deployed code: three orders wait for their payment ==")
    with dev_on(workdir, "old") as dev:
        runs = [dev.http("POST", "/workflows/order/runs", f"o{i}")["run_id"] for i in range(3)]
        for run_id in runs:
            dev.wait_for(run_id, {"WAITING"})
        say(f"• {len(runs)} runs of order v1 waiting: {', '.join(runs)}")

        say("\n== 2. before deploying: durable check-deploy ==")
        say("• the change as is (reserve renamed hold_stock):")
        if check(dev, "renamed") == 0:
            say("! the check should have failed")
            return 1
        say("• the change as version 2, version 1 kept:")
        if check(dev, "both") != 0:
            say("! the check should have passed")
            return 1

    say("\n== 3. a deploy caught halfway: the API on the new code, the workers not yet ==")
    with dev_on(workdir, "both", worker_app="old") as dev:
        try:
            dev.http("POST", "/workflows/order/runs", "o9")
            say("! the start should have been refused")
            return 1
        except urllib.error.HTTPError as e:
            error = json.loads(e.read())["error"]
            say(
                f"• POST /workflows/order/runs -> {e.code} {error['type']} "
                f"(Retry-After {e.headers['Retry-After']})"
            )
            say(f"  {error['message']}")

    say("\n== 4. the fixed deploy: the gate, then the payments ==")
    with dev_on(workdir, "both") as dev:
        result = gate(dev)
        say(f"• deploy gate: {result['status']}: {result['reason']}")
        for run_id in runs:
            dev.http("POST", f"/runs/{run_id}/signals/paid", {"amount": 10})
        for run_id in runs:
            run = dev.wait_for(run_id, {"SUCCEEDED"})
            say(f"• {run_id} v{run['version']} {run['status']}: {run['output']}")
        new = dev.http("POST", "/workflows/order/runs", "o10")
        say(f"• a new order starts on version {new['version']}: {new['run_id']}")
    say("\nevery run in flight finished on the code it started on.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
