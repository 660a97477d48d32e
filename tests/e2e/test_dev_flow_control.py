"""Flow control on ``durable dev``: a concurrency limit per account holds across its
worker processes, the runs held back wait in line (shown by the CLI), in order, and get
their slot when the run ahead ends.

GIVEN ``export`` limited to one run per account, on the dev stack (DynamoDB Local, two
worker processes)
WHEN three exports of one account and one of another are started
THEN one per account runs, the other two wait in line in the order they reached it, and
signaling the running one lets exactly the next in line run.
"""

from __future__ import annotations

import shutil
import time
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


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[DevProcess]:
    process = DevProcess(
        tmp_path, app="tests.e2e.limited_app:app", workers=2, env={"PYTHONPATH": str(ROOT)}
    )
    process.start()
    yield process
    process.stop()


def until(check: Callable[[], bool], dev: DevProcess, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"not reached in {timeout} s; log:\n{dev.log_tail()}")


def test_runs_over_the_limit_wait_in_line_on_the_dev_stack(dev: DevProcess) -> None:
    def start(account: str) -> str:
        return str(dev.http("POST", "/workflows/export/runs", {"account": account})["run_id"])

    acme = [start("acme"), start("acme"), start("acme")]
    b1 = start("bolt")

    def show(run_id: str) -> dict[str, Any]:
        return dict(dev.http("GET", f"/runs/{run_id}"))

    def settled() -> bool:
        # One acme run holds the slot (which one depends on which of the two workers
        # reached the gate first), the other two wait in line; bolt's runs on its own.
        shown = {r: show(r) for r in (*acme, b1)}
        holding = [r for r in acme if shown[r]["status"] == "WAITING"]
        return (
            shown[b1]["status"] == "WAITING"
            and len(holding) == 1
            and all(shown[r]["queued_at"] for r in acme if r not in holding)
        )

    until(settled, dev)
    [a1] = [r for r in acme if show(r)["status"] == "WAITING"]
    waiting = [r for r in acme if r != a1]
    assert sorted(show(r)["place_in_line"] for r in waiting) == [1, 2]

    def listed_in_line() -> bool:
        # A waiter a sweep re-invokes shows RUNNING while its worker looks at the gate.
        listing = dev.cli("runs", "--workflow", "export").stdout
        return sum("PENDING (in line)" in line for line in listing.splitlines()) == 2

    until(listed_in_line, dev)
    dev.http("POST", f"/runs/{a1}/signals/go", {})
    first_in_line = next(r for r in waiting if show(r)["place_in_line"] == 1)
    last = next(r for r in waiting if r != first_in_line)
    until(
        lambda: show(first_in_line)["status"] == "WAITING" and show(a1)["status"] == "SUCCEEDED",
        dev,
    )
    assert show(last)["status"] == "PENDING" and show(last)["place_in_line"] == 1
