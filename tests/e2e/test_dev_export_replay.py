"""A run recorded on durable dev, exported and replayed on this machine.

GIVEN an order on durable dev (DynamoDB Local, its payload folder, its key file) asleep
      after a sealed card, a value kept in the payload folder, a codec's value and a signal
WHEN ``durable export RUN -o run.json`` reads it from the stack's ledger
THEN the file holds the large value and no secret, and ``durable replay`` runs the same
     code over it cleanly (exit 0) and names the renamed step of changed code (exit 1).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from durable.adapters.memory import MemoryLedger
from durable.engine.replay_file import replay
from durable.local.harness import DevProcess
from tests.unit import replay_apps

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("java") is None, reason="durable dev persists with Java"),
]

ROOT = Path(__file__).resolve().parents[2]
APPS = "tests.unit.replay_apps"


def _asleep(dev: DevProcess, run_id: str) -> None:
    """Wait until the run records its sleep (position 0007), after the signal."""
    deadline = time.time() + 90
    while time.time() < deadline:
        run = dev.http("GET", f"/runs/{run_id}")
        if any(s["position"] == "0007" for s in run["steps"]):
            return
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} never slept; log:\n{dev.log_tail()}")


def test_a_run_of_durable_dev_exported_and_replayed(tmp_path: Path) -> None:
    with DevProcess(tmp_path, app=f"{APPS}:old", env={"PYTHONPATH": str(ROOT)}) as dev:
        run_id = dev.http("POST", "/workflows/order/runs", "o-9")["run_id"]
        dev.wait_for(run_id, {"WAITING"})
        dev.http("POST", f"/runs/{run_id}/signals/go", {"n": 2})
        _asleep(dev, run_id)
        said = dev.cli("export", run_id, "-o", "run.json")
        assert f"wrote run {run_id}" in said.stdout, said.stdout + said.stderr
        printed = dev.cli("export", run_id).stdout  # the same document on standard output
        clean = dev.cli("replay", "run.json", "--app", f"{APPS}:same", check=False)
        changed = dev.cli("replay", "run.json", "--app", f"{APPS}:renamed", check=False)
    text = (tmp_path / "run.json").read_text()
    assert json.loads(printed)["runs"] == json.loads(text)["runs"]
    assert replay_apps.CARD not in text and "$sealed" not in text
    assert "$durable.payload" not in text and "c" * replay_apps.CATALOGUE_BYTES in text
    assert "unresolved" not in json.loads(text)
    assert clean.returncode == 0 and "replays cleanly, up to position 0007" in clean.stdout, (
        clean.stdout + clean.stderr
    )
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "diverges at position 0003: recorded step 'charge', now step 'bill'" in changed.stdout
    replay_apps.SEEN.clear()
    assert replay(replay_apps.same, tmp_path / "run.json", empty=MemoryLedger()).ok
    assert replay_apps.SEEN == {
        "card": "***",
        "goods": replay_apps.CATALOGUE_BYTES,
        "cents": 1250,
        "go": {"n": 2},
    }
