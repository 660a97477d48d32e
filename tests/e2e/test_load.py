"""Load on the local stack: many runs of a 10-step workflow, nothing lost or duplicated.

GIVEN ``durable dev`` (DynamoDB Local, 4 worker processes) serving
``benchmarks/dev_workflows.py``, whose step bodies append to an execution counter
WHEN N runs of the 10-step workflow are started through the HTTP API
THEN every run ends SUCCEEDED with its 10 steps DONE on the first attempt, and each step
body ran exactly once (the counter), so nothing was lost and nothing ran twice.

The driving and the checks are ``benchmarks.load.run_load``, which also prints the wall
time (``pytest -s`` shows it; ``python -m benchmarks.load`` prints the same for 1,000).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks import load, stack

UNAVAILABLE = stack.why_unavailable()  # no Java: durable dev would not use DynamoDB Local
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or ""),
]

# The issue asks for 1,000 runs. On the 2-core CI machine they took 320 s of wall time
# (DynamoDB Local's JVM is the bottleneck; see docs/performance.md), too long for every
# `make test`, so CI runs 200 (39 s of runs, under a minute in all). `python -m
# benchmarks.load` runs the full 1,000, and DURABLE_LOAD_RUNS=1000 runs them here.
RUNS = int(os.environ.get("DURABLE_LOAD_RUNS", "200"))
WORKERS = 4


def test_many_runs_end_succeeded_with_every_step_done_once(tmp_path: Path) -> None:
    report = load.run_load(tmp_path, RUNS, WORKERS, timeout=max(300.0, RUNS * 1.0))
    print(f"\nload: {report.summary()}")

    assert report.problems == [], f"{report.problem_count} problems: {report.problems}"
    assert report.executions == RUNS * 10
