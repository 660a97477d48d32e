"""``durable dev`` end to end, driven only through HTTP and the CLI.

GIVEN the whole local stack in a subprocess (DynamoDB Local persisted on disk, time 8640x)
WHEN a worker is SIGKILLed mid-step and the whole dev server is restarted mid-sleep
THEN every run completes, each side effect happened exactly once, the ledger matches.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from durable.local.harness import DevProcess

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("java") is None, reason="durable dev persists with Java"),
]

ROOT = Path(__file__).resolve().parents[2]


def within(seconds: float, done: Callable[[], bool]) -> bool:
    """Whether ``done`` holds within ``seconds`` (an exited child may take a moment to be
    reaped)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if done():
            return True
        time.sleep(0.1)
    return False


def group_gone(pgid: int, within_s: float) -> bool:
    """No process left in the group."""

    def empty() -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        return False

    return within(within_s, empty)


def gone(pid: int, within_s: float) -> bool:
    return within(within_s, lambda: not Path(f"/proc/{pid}").exists())


def stores_of(pid: int) -> list[int]:
    """The DynamoDB Local servers (JVMs) process ``pid`` started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            args = (entry / "cmdline").read_bytes()
        except OSError:  # it exited meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid and b"DynamoDBLocal" in args:
            found.append(int(entry.name))
    return found


def books(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return data


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[DevProcess]:
    process = DevProcess(
        tmp_path,
        app="examples.app:app",
        # 3 days = 30 s: longer than a killed worker's recovery (about 6 s: the 4 s
        # timeout, the lease's 0.5 s past it, a sweep), so the restart below lands while
        # the runs sleep.
        time_scale=8640,
        worker_timeout=4,
        env={
            "PYTHONPATH": str(ROOT),
            "DURABLE_EXAMPLE_EFFECTS": str(tmp_path / "effects.json"),
            "DURABLE_EXAMPLE_STEP_SECONDS": "1.5",
        },
    )
    process.start()
    # The HTTP server starts last: no connection is accepted before it can be answered.
    assert process.dropped_while_starting == 0, process.log_tail()
    yield process
    process.stop()


def test_runs_survive_a_killed_worker_and_a_restart(dev: DevProcess, tmp_path: Path) -> None:
    effects = tmp_path / "effects.json"
    first = dev.http("POST", "/workflows/onboarding/runs", {"user_id": "a", "email": "a@x"})
    second = dev.http(
        "POST",
        "/workflows/onboarding/runs",
        {"user_id": "b", "email": "b@x"},
        headers={"Idempotency-Key": "signup-b"},
    )
    again = dev.http(
        "POST",
        "/workflows/onboarding/runs",
        {"user_id": "b", "email": "b@x"},
        headers={"Idempotency-Key": "signup-b"},
    )
    assert again["run_id"] == second["run_id"]

    # Kill the worker running the first run while it is inside a step (a warm worker
    # 0.5 s into its invocation is in the 1.5 s welcome step: past its claim, before its
    # hand-off; a kill in a hand-off would leave the run to the 30 s hand-off grace).
    victim = None
    deadline = time.time() + 60
    while victim is None and time.time() < deadline:
        victim = dev.worker_running(first["run_id"], min_busy=0.5, warm=True)
        time.sleep(0.05)
    assert victim is not None, dev.log_tail()
    os.kill(victim, signal.SIGKILL)

    approval = dev.http(
        "POST",
        "/workflows/expense-approval/runs",
        {"employee": "ann", "amount": 5, "manager": "bob"},
    )
    for run in (first, second, approval):
        dev.wait_for(run["run_id"], {"WAITING"}, timeout=120)
    assert dev.status()["stats"]["died"] == 1  # the killed worker was noticed and replaced

    # Restart the whole stack while the onboarding runs sleep their three days.
    dev.stop()
    dev.start()
    assert dev.dropped_while_starting == 0, dev.log_tail()
    link = next(str(v) for v in books(effects)["by_key"].values() if "/callbacks/" in str(v))
    token = link.rsplit("/callbacks/", 1)[1]
    # An answer over the offload size (64 KiB): durable dev keeps it in its state folder
    # (S3 on AWS) and the ledger holds a reference; the run and the API see the value.
    signature = "bob " + "~" * (70 * 1024)
    out = dev.cli("approve", token, "--result", json.dumps(signature))
    assert "approved" in out.stdout

    for run in (first, second, approval):
        final = dev.wait_for(run["run_id"], {"SUCCEEDED", "FAILED"}, timeout=120)
        assert final["status"] == "SUCCEEDED", final
        assert all(step["status"] == "DONE" for step in final["steps"])
    paid = dev.http("GET", f"/runs/{approval['run_id']}")
    assert paid["output"]["approved_by"] == signature
    kept = list((tmp_path / ".durable" / "payloads" / approval["run_id"]).iterdir())
    assert len(kept) == 2, kept  # the answer, and the run's result that holds it
    # Exactly once: 2 workspaces, 2 projects, 2 welcome + 2 nudge + 1 approval emails, 1 payout.
    assert books(effects)["effects"] == {"workspace": 2, "email": 5, "project": 2, "payment": 1}
    detail = dev.http("GET", f"/runs/{first['run_id']}")
    assert [s["name"] for s in detail["steps"]] == [
        "provision_workspace",
        "send_welcome_email",
        "create_starter_project",
        "sleep",
        "send_follow_up_nudge",
    ]

    listing = dev.cli("runs")
    assert first["run_id"] in listing.stdout and approval["run_id"] in listing.stdout
    timeline = dev.cli("show", first["run_id"], "--timeline").stdout
    assert "sleep" in timeline and "░" in timeline


def test_bad_cli_input_gets_one_line_with_the_fix(dev: DevProcess) -> None:
    unknown = dev.cli("start", "no-such-workflow", "--input", "{}", check=False)
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("error: ") and len(unknown.stderr.strip().splitlines()) == 1
    assert "no-such-workflow" in unknown.stderr

    bad_json = dev.cli("start", "onboarding", "--input", "{not json", check=False)
    assert bad_json.returncode == 1 and "not valid JSON" in bad_json.stderr

    missing = dev.cli("show", "0" * 26, check=False)
    assert missing.returncode == 1 and "no run" in missing.stderr.lower()

    invalid = dev.cli("start", "onboarding", "--input", '{"user_id": 5}', check=False)
    assert invalid.returncode == 1 and "user_id" in invalid.stderr


def test_a_page_elsewhere_cannot_read_or_change_the_stack(dev: DevProcess) -> None:
    """A rebound name, another site's form post and a body that is not JSON are refused
    by a running ``durable dev`` (issue 32, finding 6): ``Host: rebind.attacker.test`` got
    200, and a cross-origin POST without a content type canceled a run. The CLI works."""
    started = dev.cli("start", "onboarding", "--input", '{"user_id": "u1", "email": "e@x"}', "-q")
    run_id = started.stdout.strip()
    cancel = f"/runs/{run_id}/cancel"
    for method, path, headers, data in (
        ("GET", "/runs?workflow=onboarding", {"Host": "rebind.attacker.test"}, None),
        (
            "POST",
            cancel,
            {"Origin": "http://127.0.0.1:3000", "Content-Type": "text/plain"},
            b'{"reason": "x"}',
        ),
        ("POST", cancel, {}, b'{"reason": "x"}'),
    ):
        request = urllib.request.Request(dev.base + path, data=data, method=method, headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code in (403, 415)
    assert dev.http("GET", f"/runs/{run_id}")["cancel_requested"] is False
    assert dev.cli("cancel", run_id, "--reason", "the CLI still works").returncode == 0


CONSOLE_LINE = re.compile(r"^\d\d:\d\d:\d\d  \S")


def test_ctrl_c_with_invocations_in_flight_is_quiet(dev: DevProcess) -> None:
    # GIVEN every worker inside a step (1.5 s each) and more runs queued
    runs = [
        dev.http("POST", "/workflows/onboarding/runs", {"user_id": f"q{i}", "email": "q@x"})
        for i in range(6)
    ]
    deadline = time.time() + 60
    while time.time() < deadline:
        busy = [w for w in dev.status()["workers"] if (w["busy_seconds"] or 0) > 0.2]
        if len(busy) == dev.workers:
            break
        time.sleep(0.05)
    assert len(busy) == dev.workers, dev.log_tail()
    assert len(runs) == 6
    logged = dev.log_path.read_text(errors="replace")
    pid = dev.process.pid if dev.process is not None else 0
    # The store is out of the Ctrl-C's reach (its own process group): were it stopped by
    # the signal at once, the workers and the sweeper would log connection errors until
    # the stop reached them (seen under load). durable dev stops it last.
    stores = stores_of(pid)
    assert stores and all(os.getpgid(store) != pid for store in stores), dev.log_tail()
    # WHEN the developer presses Ctrl-C (SIGINT to the whole process group)
    dev.stop()
    # THEN everything it started is gone, and the stop logged nothing but its own line:
    # no slot-thread error, no traceback from a worker hit by the SIGINT, no worker
    # reported dead for being stopped
    assert not dev.killed, "Ctrl-C did not stop durable dev: stop() had to SIGKILL it"
    assert group_gone(pid, within_s=10)
    assert all(gone(store, within_s=10) for store in stores), "durable dev left its store running"
    after = dev.log_path.read_text(errors="replace")[len(logged) :]
    # The console's event lines (a step that finished before the stop reached it) are
    # what the stack did, not noise.
    lines = [
        line
        for line in after.splitlines()
        if '"_aws":' not in line and not CONSOLE_LINE.match(line)
    ]
    noise = [
        line
        for line in lines
        if line.strip() not in ("• stopping…", "• stopped")
        and '"level":"INFO"' not in line
        and line.strip()
    ]
    assert noise == [], after
