"""The demo: the whole local stack, a killed worker, an approval and a three-day timer.

    python -m examples.demo          (what `make demo` runs)

1. starts ``durable dev`` (DynamoDB Local, Scheduler on moto, the API, two worker
   processes, the timer loop and the sweeper) in a scratch folder, with time running
   43200x faster so three days pass in six seconds;
2. starts seed 002's onboarding through the HTTP API and SIGKILLs the worker process in
   the middle of the welcome-email step; another worker takes the run over when the
   dead one's lease runs out, and the email is sent once;
3. starts an expense approval, finds the approval link in the manager's (fake) inbox and
   approves it with ``durable approve RUN_ID manager-approval`` (an operator, by IAM);
4. lets the three-day timer fire and prints both ledgers and a timeline.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from durable.local.harness import DevProcess
from durable.local.servers.dynamodb_local import DynamoDBLocal, dynamodb_local_problem

ROOT = Path(__file__).resolve().parents[1]
SCALE = 43200.0  # virtual seconds per real second: 3 days in 6 s
EXPECTED = {"workspace": 1, "email": 3, "project": 1, "payment": 1}


def say(text: str) -> None:
    print(text, flush=True)


def starting_line(server: DynamoDBLocal, problem: str | None) -> str:
    """The demo's first line. It announces the DynamoDB Local install only when this run
    makes it: not yet installed in the user cache, and nothing (Java, npm) in the way;
    with something in the way, durable dev says what and stores runs in moto instead."""
    installs = problem is None and not server.installed()
    first = f"; installing DynamoDB Local into {server.home} first, once" if installs else ""
    return f"• starting durable dev (time x{SCALE:g}{first})…"


def books(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return data


def onboarding(dev: DevProcess, effects: Path) -> str:
    say("\n== seed 002: onboarding (workspace, welcome email, project, 3-day nudge) ==")
    run_id = str(
        dev.http(
            "POST", "/workflows/onboarding/runs", {"user_id": "u42", "email": "u42@example.com"}
        )["run_id"]
    )
    say(f"• started run {run_id}; waiting for a worker to be inside send_welcome_email…")
    victim = None
    deadline = time.time() + 60
    while victim is None and time.time() < deadline:
        steps = dev.http("GET", f"/runs/{run_id}")["steps"]
        if [s["status"] for s in steps] == ["DONE"]:  # provisioned; the email step runs
            victim = dev.worker_running(run_id, min_busy=0.5)
        time.sleep(0.1)
    if victim is None:
        raise RuntimeError("never caught a worker in the middle of the step")
    os.kill(victim, signal.SIGKILL)
    say(f"• SIGKILLed worker process {victim} in the middle of the step")
    say("  its lease holds until its 4 s deadline; then the sweeper hands the run to a live worker")
    dev.wait_for(run_id, {"WAITING"}, progress=True)
    emails = books(effects).get("effects", {}).get("email", 0)
    say(f"• sleeping for three virtual days now; welcome emails sent: {emails}")
    return run_id


def approval(dev: DevProcess, effects: Path) -> str:
    say("\n== expense approval: a callback answered with the CLI ==")
    run_id = str(
        dev.http(
            "POST",
            "/workflows/expense-approval/runs",
            {"employee": "ann", "amount": 120, "manager": "bob"},
        )["run_id"]
    )
    dev.wait_for(run_id, {"WAITING"}, progress=True)
    link = next(str(v) for v in books(effects)["by_key"].values() if "/callbacks/" in str(v))
    say(f"• bob's inbox: {link[:72]}…  (the ledger keeps only the token's hash)")
    say(f"$ durable approve {run_id} manager-approval --result '\"bob\"'   # as an operator")
    say("  " + dev.cli("approve", run_id, "manager-approval", "--result", '"bob"').stdout.strip())
    dev.wait_for(run_id, {"SUCCEEDED", "FAILED"}, progress=True)
    return run_id


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="durable-demo-") as tmp:
        workdir = Path(tmp)
        effects = workdir / "effects.json"
        dev = DevProcess(
            workdir,
            app="examples.app:app",
            time_scale=SCALE,
            worker_timeout=4,
            env={
                "PYTHONPATH": str(ROOT),
                "DURABLE_EXAMPLE_EFFECTS": str(effects),
                "DURABLE_EXAMPLE_STEP_SECONDS": "2",
            },
            say=say,
        )
        say(starting_line(DynamoDBLocal(), dynamodb_local_problem()))
        ready = dev.start()
        say(f"  ready in {ready:.1f} s at {dev.base}")
        say(f"  watch the runs move in the web console: {dev.base}/console/")
        try:
            first = onboarding(dev, effects)
            second = approval(dev, effects)
            say("\n• back to the onboarding run: its timer fires on the scaled clock…")
            final = dev.wait_for(first, {"SUCCEEDED", "FAILED"}, progress=True)
            for run_id in (first, second):
                say(f"\n$ durable show {run_id}")
                say(dev.cli("show", run_id).stdout)
            say(f"$ durable show {first} --timeline")
            say(dev.cli("show", first, "--timeline").stdout)
            performed = books(effects).get("effects", {})
            say(f"effects performed: {performed}")
            ok = final["status"] == "SUCCEEDED" and performed == EXPECTED
            say(
                "demo finished: "
                + (
                    "every run succeeded, no effect repeated"
                    if ok
                    else f"UNEXPECTED: wanted {EXPECTED}"
                )
            )
            if not ok:
                say(dev.log_tail())
            return 0 if ok else 1
        finally:
            dev.stop()


if __name__ == "__main__":
    sys.exit(main())
