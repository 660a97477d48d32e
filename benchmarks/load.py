"""Load: N runs of a 10-step workflow on the local stack, with nothing lost or duplicated.

``durable dev`` in a scratch directory (DynamoDB Local, 4 worker processes by default,
``--worker-timeout 60``) serves ``benchmarks.dev_workflows:app``. N ``ten-steps`` runs are
POSTed through the HTTP API, then the listing is polled until every one is SUCCEEDED.
The wall time is from the first POST to that moment. Then every run is checked:

- through the API (GET /runs/{id}): SUCCEEDED, exactly the positions 0001-0010, each
  step DONE on its first attempt with one attempt recorded;
- through the execution counter every step body appends to (``dev_workflows``): each
  (run, position) body ran exactly once, so no step was run twice, even one whose
  record was lost or overwritten, which the ledger alone could not show.

    python -m benchmarks.load [--runs 1000] [--workers 4]

It prints the wall time and asserts nothing; ``tests/e2e/test_load.py`` runs the same
function and asserts that no problem was found.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import stack
from benchmarks.common import Figure, print_figures, say
from benchmarks.dev_workflows import STEPS
from durable.local.harness import DevProcess

WORKER_TIMEOUT = 60.0  # the template's minimum: one invocation per run, as on AWS
POSITIONS = [f"{i:04d}" for i in range(1, STEPS + 1)]
SHOWN = 20  # problems kept in words; the rest are only counted


@dataclass(slots=True)
class LoadReport:
    runs: int
    workers: int
    ready_seconds: float = 0.0
    start_seconds: float = 0.0  # first POST until the last was answered
    wall_seconds: float = 0.0  # first POST until every run was seen SUCCEEDED
    check_seconds: float = 0.0
    invocations: int = 0
    executions: int = 0  # step bodies run, from the counter
    problem_count: int = 0
    usage: stack.Usage | None = None  # CPU seconds spent during the runs
    problems: list[str] = field(default_factory=list)  # the first few, in words

    def summary(self) -> str:
        verdict = (
            "every run SUCCEEDED, every step DONE exactly once"
            if not self.problems
            else f"{self.problem_count} PROBLEMS, e.g. {self.problems[0]}"
        )
        rate = self.runs / max(self.wall_seconds, 1e-9)
        return (
            f"{self.runs} runs x {STEPS} steps on {self.workers} workers: "
            f"{self.wall_seconds:.1f} s wall ({rate:.1f} runs/s; "
            f"starts {self.start_seconds:.1f} s; "
            f"{self.invocations} invocations, {self.executions} step bodies"
            + (f"; CPU s: {self.usage.describe()}" if self.usage else "")
            + f"); {verdict}"
        )


def check(dev: DevProcess, run_ids: Sequence[str], counter: Path) -> tuple[int, list[str]]:
    """Every way a run could be lost or a step duplicated; returns (executions, problems)."""
    problems: list[str] = []
    counts = stack.executions(counter)
    wanted = set(run_ids)
    for run in stack.get_runs(dev, run_ids):
        rid = run["run_id"]
        if run["status"] != "SUCCEEDED":
            problems.append(f"run {rid} is {run['status']}")
        positions = [s["position"] for s in run["steps"]]
        if positions != POSITIONS:
            problems.append(f"run {rid} has steps {positions}")
        for step in run["steps"]:
            where = f"run {rid} step {step['position']}"
            if step["status"] != "DONE":
                problems.append(f"{where} is {step['status']}")
            if step["attempt"] != 1 or len(step["attempts"]) != 1:
                problems.append(f"{where} took attempt {step['attempt']}: {step['attempts']}")
            ran = counts[(rid, step["position"])]
            if ran != 1:
                problems.append(f"{where}: its body ran {ran} times")
    strays = sorted(key for key in counts if key[0] not in wanted)
    if strays:
        problems.append(f"{len(strays)} step bodies ran for runs never started, e.g. {strays[0]}")
    executed = sum(n for (rid, _), n in counts.items() if rid in wanted)
    return executed, problems


def run_load(workdir: Path, runs: int, workers: int = 4, timeout: float = 900) -> LoadReport:
    """Start ``durable dev`` in ``workdir``, drive ``runs`` runs, check them, stop it."""
    counter = workdir / "executions.log"
    report = LoadReport(runs, workers)
    dev = stack.dev_process(
        workdir, workers=workers, worker_timeout=WORKER_TIMEOUT, counter=counter
    )
    try:
        report.ready_seconds = dev.start()
        invoked = stack.invocations(dev)
        usage = stack.Usage.begin(dev)
        t0 = time.perf_counter()
        run_ids = stack.start_runs(dev, "ten-steps", list(range(runs)))
        report.start_seconds = time.perf_counter() - t0
        report.wall_seconds = stack.wait_succeeded(dev, "ten-steps", run_ids, timeout=timeout) - t0
        report.invocations = stack.invocations(dev) - invoked
        report.usage = usage.end()
        checked = time.perf_counter()
        report.executions, found = check(dev, run_ids, counter)
        report.check_seconds = time.perf_counter() - checked
        report.problem_count, report.problems = len(found), found[:SHOWN]
    finally:
        dev.stop()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    why = stack.why_unavailable()
    name = f"{args.runs} ten-step runs, {args.workers} workers"
    if why is not None:
        print_figures("load", [Figure.not_measured(name, "nothing lost", why)])
        return
    say(f"load: {name} on durable dev ...")
    with tempfile.TemporaryDirectory(prefix="durable-bench-load-") as tmp:
        report = run_load(Path(tmp), args.runs, args.workers)
    say(report.summary())
    figures = [
        Figure.info(
            f"wall time, {name}",
            f"{report.wall_seconds:.1f} s",
            note=(
                f"first POST until the listing showed all SUCCEEDED; starts took "
                f"{report.start_seconds:.1f} s; {report.invocations} worker invocations; the "
                f"check of every ledger and counter took {report.check_seconds:.1f} s. CPU "
                f"seconds meanwhile (of {report.wall_seconds * (os.cpu_count() or 1):.0f} on "
                f"{os.cpu_count()} cores): "
                + (report.usage.describe() if report.usage else "not read")
            ),
        ),
        Figure.info(f"throughput, {name}", f"{report.runs / report.wall_seconds:.1f} runs/s"),
        Figure(
            "runs lost or steps duplicated",
            str(report.problem_count),
            "= 0",
            "met" if not report.problems else "MISSED",
            note="; ".join(report.problems[:3]),
        ),
    ]
    print_figures("load: the local stack under many runs", figures)


if __name__ == "__main__":
    main()
