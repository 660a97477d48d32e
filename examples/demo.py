"""The demo: the whole local stack, a killed worker, an approval and a three-day timer.

    python -m examples.demo          (what `make demo` runs)

1. starts ``durable dev`` (DynamoDB Local, Scheduler on moto, the API, two worker
   processes, the timer loop and the sweeper) in a scratch folder, with time running
   43200x faster so three days pass in six seconds;
2. starts seed 002's onboarding through the HTTP API and SIGKILLs the worker process in
   the middle of the welcome-email step; another worker takes the run over when the
   dead one's lease runs out, and the email is sent once;
3. starts an expense approval, finds the approval link in the manager's (fake) inbox and
   approves it with ``durable approve``;
4. lets the three-day timer fire and prints both ledgers and a timeline.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCALE = 43200.0  # virtual seconds per real second: 3 days in 6 s


def say(text: str) -> None:
    print(text, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Demo:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.effects = workdir / "effects.json"
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "DURABLE_EXAMPLE_EFFECTS": str(self.effects),
            "DURABLE_EXAMPLE_STEP_SECONDS": "2",
            "DURABLE_ENDPOINT": self.base,
        }
        self.dev: subprocess.Popen[bytes] | None = None

    # --- plumbing -----------------------------------------------------------------

    def http(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def cli(self, *args: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "durable.cli", *args],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"durable {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout

    def start_dev(self) -> None:
        say(f"• starting durable dev on 127.0.0.1:{self.port} (time x{SCALE:g})…")
        self.dev = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "durable.cli",
                "dev",
                "--app",
                "examples.app:app",
                "--port",
                str(self.port),
                "--workers",
                "2",
                "--worker-timeout",
                "4",
                "--time-scale",
                str(SCALE),
            ],
            cwd=self.workdir,
            env=self.env,
        )
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.dev.poll() is not None:
                raise RuntimeError("durable dev exited during start; see its output above")
            try:
                self.http("GET", "/_local/status")
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("durable dev did not become ready within 120 s")

    def stop_dev(self) -> None:
        if self.dev is not None and self.dev.poll() is None:
            self.dev.send_signal(signal.SIGINT)
            try:
                self.dev.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.dev.kill()

    def books(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.effects.read_text()) if self.effects.exists() else {}
        return data

    def watch(self, run_id: str, until: set[str], timeout: float = 90) -> dict[str, Any]:
        """Print each step as its status changes; return the run once it is in ``until``."""
        seen: dict[str, str] = {}
        deadline = time.time() + timeout
        while time.time() < deadline:
            run = self.http("GET", f"/runs/{run_id}")
            for step in run["steps"]:
                key = step["position"]
                if seen.get(key) != step["status"]:
                    seen[key] = step["status"]
                    say(f"    {key} {step['name']:<26} {step['status']}")
            if run["status"] in until:
                return dict(run)
            time.sleep(0.2)
        raise RuntimeError(f"run {run_id} did not reach {until} in {timeout:.0f} s")

    # --- the story ----------------------------------------------------------------

    def onboarding(self) -> str:
        say("\n== seed 002: onboarding (workspace, welcome email, project, 3-day nudge) ==")
        run = self.http(
            "POST", "/workflows/onboarding/runs", {"user_id": "u42", "email": "u42@example.com"}
        )
        run_id = str(run["run_id"])
        say(f"• started run {run_id}; waiting for a worker to be in the welcome-email step…")
        victim = None
        deadline = time.time() + 60
        while victim is None and time.time() < deadline:
            status = self.http("GET", "/_local/status")
            detail = self.http("GET", f"/runs/{run_id}")
            in_email = len([s for s in detail["steps"] if s["status"] == "DONE"]) == 1
            for worker in status["workers"]:
                if worker["run_id"] == run_id and in_email and (worker["busy_seconds"] or 0) > 0.5:
                    victim = worker["pid"]
            time.sleep(0.1)
        if victim is None:
            raise RuntimeError("never caught a worker mid-step")
        os.kill(victim, signal.SIGKILL)
        say(f"• SIGKILLed worker process {victim} in the middle of send_welcome_email")
        say("  (its lease holds until its 4 s deadline; then the sweeper hands the run on)")
        self.watch(run_id, {"WAITING"})
        say(
            f"• now sleeping for three virtual days; emails sent: "
            f"{self.books().get('effects', {}).get('email', 0)}"
        )
        return run_id

    def approval(self) -> str:
        say("\n== expense approval (a callback answered through the CLI) ==")
        run = self.http(
            "POST",
            "/workflows/expense-approval/runs",
            {"employee": "ann", "amount": 120, "manager": "bob"},
        )
        run_id = str(run["run_id"])
        self.watch(run_id, {"WAITING"})
        link = next(v for v in self.books()["by_key"].values() if "/callbacks/" in str(v))
        token = str(link).rsplit("/callbacks/", 1)[1]
        say(f"• the manager's inbox has: {str(link)[:70]}…")
        say("• $ durable approve <token> --result '\"bob\"'")
        say("  " + self.cli("approve", token, "--result", '"bob"').strip())
        self.watch(run_id, {"SUCCEEDED", "FAILED"})
        return run_id

    def run(self) -> int:
        self.start_dev()
        try:
            onboarding = self.onboarding()
            approval = self.approval()
            say("\n• back to the onboarding run: its timer fires on the scaled clock…")
            final = self.watch(onboarding, {"SUCCEEDED", "FAILED"})
            for run_id in (onboarding, approval):
                say("\n$ durable show " + run_id)
                say(self.cli("show", run_id))
            say("$ durable show " + onboarding + " --timeline")
            say(self.cli("show", onboarding, "--timeline"))
            effects = self.books().get("effects", {})
            say(f"effects performed: {effects}")
            expected = {"workspace": 1, "email": 3, "project": 1, "payment": 1}
            ok = final["status"] == "SUCCEEDED" and effects == expected
            say(
                "demo finished: "
                + (
                    "every run succeeded, no effect repeated"
                    if ok
                    else f"UNEXPECTED (wanted {expected})"
                )
            )
            return 0 if ok else 1
        finally:
            self.stop_dev()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="durable-demo-") as workdir:
        return Demo(Path(workdir)).run()


if __name__ == "__main__":
    sys.exit(main())
