"""Schedules on ``durable dev``: set up at start, fired on its (scaled) clock, each fire
once, paused and resumed and run now through the CLI.

GIVEN an app with a ``rate(1 minute)`` schedule and the dev clock at 120x (a minute in
half a second)
WHEN the stack runs for a few seconds, then the schedule is paused, then run now
THEN one run per fire, keyed by its fire time a minute apart; none while paused; one
for "run now"; the schedule still paused after a restart of the stack.
"""

from __future__ import annotations

import itertools
import shutil
import time
from collections.abc import Iterator
from datetime import datetime
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
        tmp_path,
        app="tests.e2e.scheduled_app:app",
        time_scale=120,
        env={"PYTHONPATH": str(ROOT)},
    )
    process.start()
    yield process
    process.stop()


def runs(dev: DevProcess) -> list[dict[str, Any]]:
    page = dev.http("GET", "/workflows/tick/runs?limit=100")
    return list(page["runs"])


def wait_for_runs(dev: DevProcess, at_least: int, timeout: float = 60) -> list[dict[str, Any]]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = runs(dev)
        if len(found) >= at_least:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{len(runs(dev))} runs after {timeout} s; log:\n{dev.log_tail()}")


def test_a_schedule_fires_on_the_dev_clock_once_per_fire(dev: DevProcess) -> None:
    assert "schedules: tick" in dev.log_tail(200)
    shown = dev.cli("schedules").stdout
    assert "tick" in shown and "rate(1 minute)" in shown and "enabled" in shown

    # The timer loop delivers every fire that fell due in a tick, each its own invocation:
    # a later fire's run may be listed before an earlier one's. So look again until the
    # fires seen so far are a minute apart with none missing; one that never comes (a fire
    # dropped) still fails, when the wait ends.
    deadline = time.time() + 60
    while True:
        found = wait_for_runs(dev, 3)
        keys = sorted(str(r["idempotency_key"]) for r in found)
        assert all(k.startswith("schedule/tick/") for k in keys), keys
        times = [k.rsplit("/", 1)[1] for k in keys]
        assert len(set(times)) == len(times)  # each fire once
        moments = [datetime.fromisoformat(t.replace("Z", "+00:00")) for t in times]
        gaps = {(b - a).total_seconds() for a, b in itertools.pairwise(moments)}
        if gaps == {60.0} or time.time() > deadline:
            break
        time.sleep(0.2)
    assert gaps == {60.0}, times  # a minute apart on the dev clock

    assert "paused" in dev.cli("schedules", "pause", "tick").stdout
    time.sleep(0.6)  # a fire may be in flight
    before = len(runs(dev))
    time.sleep(2.5)  # five dev minutes
    assert len(runs(dev)) == before  # none while paused

    out = dev.cli("schedules", "run", "tick", "--key", "by-hand").stdout
    assert "started" in out
    assert len(wait_for_runs(dev, before + 1)) == before + 1
    again = dev.cli("schedules", "run", "tick", "--key", "by-hand").stdout
    assert "duplicate" in again

    dev.stop()
    dev.start()  # a restart reconciles again: the schedule stays paused
    assert "paused, as when durable dev last stopped: tick" in dev.log_tail(30)
    assert "paused" in dev.cli("schedules").stdout
