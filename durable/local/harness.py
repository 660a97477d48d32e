"""Drive a ``durable dev`` subprocess from Python: for end-to-end tests and the demo.

    with DevProcess(workdir, app="examples.app:app", time_scale=3600) as dev:
        run = dev.http("POST", "/workflows/onboarding/runs", {...})
        dev.wait_for(run["run_id"], {"SUCCEEDED"})

Everything goes through the same doors a user has: the HTTP API, the ``durable`` CLI and
the local status route (``/_local/status``: worker processes and what they run).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def with_default_sigint(command: list[str]) -> list[str]:
    """``command`` started with Ctrl-C's default action, as a terminal's foreground job
    has it: a shell without job control starts background jobs with SIGINT ignored, and
    an ignored signal stays ignored through exec (CI runners do this). A launcher resets
    it and execs ``command`` (``preexec_fn`` is not safe in a process with threads)."""
    return [sys.executable, "-c", _DEFAULT_SIGINT, *command]


class DevProcess:
    def __init__(
        self,
        workdir: Path,
        *,
        app: str,
        time_scale: float = 1.0,
        workers: int = 2,
        worker_timeout: float = 60.0,  # durable dev's default
        env: Mapping[str, str] | None = None,
        say: Callable[[str], None] | None = None,
        worker_app: str | None = None,
    ) -> None:
        self.workdir = workdir
        self.app = app
        self.worker_app = worker_app
        self.time_scale = time_scale
        self.workers = workers
        self.worker_timeout = worker_timeout
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        # Unbuffered, so the log shows what happened up to a failure.
        self.env = {
            **os.environ,
            **(env or {}),
            "DURABLE_ENDPOINT": self.base,
            "PYTHONUNBUFFERED": "1",
        }
        self.say = say or (lambda text: None)
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "durable-dev.log"
        self.killed = False  # stop() had to SIGKILL: the Ctrl-C did not stop it
        # Connections the server accepted but dropped without an answer while starting
        # (it must not answer before it is ready, nor take a request it cannot serve).
        self.dropped_while_starting = 0

    # --- lifecycle -----------------------------------------------------------------

    def start(self, timeout: float = 120) -> float:
        """Start ``durable dev``; return the seconds it took to answer."""
        started = time.perf_counter()
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its life
        self.process = subprocess.Popen(
            with_default_sigint(
                [
                    sys.executable,
                    "-m",
                    "durable.cli",
                    "dev",
                    "--app",
                    self.app,
                    "--port",
                    str(self.port),
                    "--workers",
                    str(self.workers),
                    "--worker-timeout",
                    str(self.worker_timeout),
                    "--time-scale",
                    str(self.time_scale),
                    *(["--worker-app", self.worker_app] if self.worker_app else []),
                ]
            ),
            cwd=self.workdir,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            # Its own process group, as a terminal gives a foreground command: stop() sends
            # the Ctrl-C to the whole group (its worker processes and DynamoDB Local too).
            start_new_session=True,
        )
        log.close()
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"durable dev exited; its log:\n{self.log_tail()}")
            try:
                self.status()
                return time.perf_counter() - started
            except OSError as e:
                reason = e.reason if isinstance(e, urllib.error.URLError) else e
                if not isinstance(reason, ConnectionRefusedError):  # accepted, then dropped
                    self.dropped_while_starting += 1
                time.sleep(0.2)
        raise RuntimeError(f"durable dev not ready in {timeout:.0f} s; log:\n{self.log_tail()}")

    def stop(self) -> None:
        """Ctrl-C, as a developer's terminal sends it (to the whole process group); kill
        the group if it does not stop (``killed`` says so)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.killed = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        # Metric lines (Powertools' EMF) would drown what happened: leave them out.
        kept = [
            line
            for line in self.log_path.read_text(errors="replace").splitlines()
            if '"_aws":' not in line
        ]
        return "\n".join(kept[-lines:])

    # --- doors -------------------------------------------------------------------------

    def http(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def lambda_client(self) -> Any:
        """A boto3 Lambda client on this stack's Invoke API (the worker processes answer
        it): what a deploy hook or another function would invoke the worker with."""
        import boto3

        return boto3.client(
            "lambda",
            endpoint_url=self.base,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )

    def status(self) -> dict[str, Any]:
        data: dict[str, Any] = self.http("GET", "/_local/status")
        return data

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [sys.executable, "-m", "durable.cli", *args],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"durable {' '.join(args)} failed: {out.stderr.strip()}")
        return out

    # --- waiting ---------------------------------------------------------------------

    def wait_for(
        self, run_id: str, statuses: set[str], timeout: float = 90, progress: bool = False
    ) -> dict[str, Any]:
        """Poll the run until its status is in ``statuses``; print step changes if asked."""
        seen: dict[str, str] = {}
        deadline = time.time() + timeout
        while time.time() < deadline:
            run: dict[str, Any] = self.http("GET", f"/runs/{run_id}")
            for step in run.get("steps", []):
                if progress and seen.get(step["position"]) != step["status"]:
                    seen[step["position"]] = step["status"]
                    self.say(f"    {step['position']} {step['name']:<26} {step['status']}")
            if run["status"] in statuses:
                return run
            time.sleep(0.2)
        raise RuntimeError(
            f"run {run_id} not in {statuses} after {timeout:.0f} s; log:\n{self.log_tail()}"
        )

    def worker_running(self, run_id: str, min_busy: float = 0.0, warm: bool = False) -> int | None:
        """The pid of a worker process currently running ``run_id``, if any. With ``warm``,
        only a worker that has composed its handler: past ``min_busy``, it is inside the
        run's step rather than composing (and a kill then lands after its claim)."""
        for worker in self.status()["workers"]:
            if worker["run_id"] != run_id or (worker["busy_seconds"] or 0) < min_busy:
                continue
            if warm and not worker.get("warm"):
                continue
            pid: int = worker["pid"]
            return pid
        return None

    def wait_idle(self, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.status()["idle"]:
                return
            time.sleep(0.1)
        raise RuntimeError("the worker pool did not go idle")
