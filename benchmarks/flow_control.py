"""Flow control (``durable.core.flow``): what a limit costs per start, and that it holds.

(a) cost per start, on DynamoDB Local, the engine driven in-process with a fake clock:
    200 runs of a workflow of one step and a one-minute sleep, without a limit, with a
    concurrency limit that never fills (``concurrency=1000``: one gate read and write to
    enter, one of each to leave), and with ``concurrency=1``, where every run but the
    first waits in line (its place in line, the wake-up, a second invocation, and its
    backstop looks at the gate while it waits). DynamoDB requests, write units and wall
    time per run, each against the unlimited baseline measured in the same run.
(b) the limit under load, on ``durable dev`` (DynamoDB Local, 4 worker processes):
    1,000 runs of ``limited`` (``concurrency=2``, one step that holds its worker 200 ms)
    started back to back, then the same with ``unlimited``. Each step body appends its
    real start and end time to a file; the most bodies running at once must be 2 for
    ``limited`` (the 4 workers could run 4), and every run must succeed.

    python -m benchmarks.flow_control [--runs 1000] [--engine-only]

It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks import stack
from benchmarks.common import (
    DynamoUnavailable,
    Figure,
    dynamo_client,
    dynamo_engine,
    dynamodb_endpoint,
    fresh_tables,
    not_measured,
    print_figures,
    say,
    warm_up,
)
from durable import App, Concurrency, Context
from durable.adapters.memory import MemoryInvoker
from durable.core.clock import FakeClock
from durable.engine.engine import Engine

ENGINE_RUNS = 200
HOLD = 0.2  # seconds each dev-stack step body holds its worker: long enough to overlap
LIMIT = 2  # benchmarks.dev_workflows.limited


def _app() -> App:
    """One step and a one-minute sleep: a run holds its slot across two invocations, so
    with ``concurrency=1`` the others really wait in line."""
    app = App()

    @app.step
    def one(n: int) -> int:
        return n + 1

    def body(ctx: Context, n: int) -> int:
        out = one(n)
        ctx.sleep(timedelta(minutes=1))  # over the in-process threshold: it suspends
        return out

    app.workflow(name="free")(body)
    app.workflow(name="roomy", concurrency=Concurrency(1000))(body)
    app.workflow(name="single", concurrency=1)(body)
    return app


def _engine_pass(endpoint: str, workflow: str) -> dict[str, float]:
    client = dynamo_client(endpoint)
    table = fresh_tables(client)
    clock = FakeClock()
    engine, _timed, counter = dynamo_engine(_app(), client, table, clock=clock)
    counter.reset()
    t0 = time.perf_counter()
    for n in range(ENGINE_RUNS):
        engine.start(workflow, n)
    invoker = engine.invoker
    assert isinstance(invoker, MemoryInvoker)
    for _ in range(100_000):
        item = invoker.pop()
        if item is not None:
            engine.resume(item.run_id, reason=item.reason)
            continue
        if not engine.sweep(clock.now()).invoked:  # the sleeps that are due
            if _succeeded(engine, workflow) == ENGINE_RUNS:
                break
            clock.advance(timedelta(minutes=1))
    wall = time.perf_counter() - t0
    done = _succeeded(engine, workflow)
    if done != ENGINE_RUNS:
        raise RuntimeError(f"{workflow}: {done}/{ENGINE_RUNS} runs succeeded")
    ops = counter.by_operation()
    return {
        "requests": sum(ops.values()) / ENGINE_RUNS,
        "writes": counter.writes() / ENGINE_RUNS,
        "wcu": counter.write_capacity() / ENGINE_RUNS,
        "ms": wall * 1000 / ENGINE_RUNS,
    }


def _succeeded(engine: Engine, workflow: str) -> int:
    counter_off = engine.list_runs(workflow=workflow, status="SUCCEEDED", limit=1000)
    return len(counter_off.items)


def engine_figures(endpoint: str) -> list[Figure]:
    warm_up(endpoint)
    base = _engine_pass(endpoint, "free")
    figures = [
        Figure.info(
            "no limit (baseline)",
            f"{base['requests']:.1f} req/run",
            note=f"{base['writes']:.1f} writes, {base['wcu']:.1f} WCU, {base['ms']:.1f} ms per run",
        )
    ]
    for workflow, label in (("roomy", "limit never full"), ("single", "limit 1: all but one wait")):
        got = _engine_pass(endpoint, workflow)
        figures.append(
            Figure.info(
                label,
                f"+{got['requests'] - base['requests']:.1f} req/run",
                note=(
                    f"{got['requests']:.1f} requests ({got['writes']:.1f} writes, "
                    f"{got['wcu']:.1f} WCU) and {got['ms']:.1f} ms per run: "
                    f"x{got['ms'] / base['ms']:.2f} the baseline's time"
                ),
            )
        )
    return figures


def _most_at_once(spans: Path) -> tuple[int, int]:
    """The most step bodies running at the same moment, and how many bodies ran."""
    edges: list[tuple[float, int]] = []
    lines = spans.read_text().splitlines() if spans.exists() else []
    for line in lines:
        _run, start, end = line.split()
        edges += [(float(start), 1), (float(end), -1)]
    most = current = 0
    for _, delta in sorted(edges, key=lambda e: (e[0], e[1])):  # an end before a start
        current += delta
        most = max(most, current)
    return most, len(lines)


def _dev_pass(workdir: Path, workflow: str, runs: int) -> dict[str, Any]:
    spans = workdir / f"{workflow}-spans.log"
    dev = stack.dev_process(workdir / workflow, workers=4, worker_timeout=60, spans=spans)
    (workdir / workflow).mkdir()
    try:
        dev.start()
        t0 = time.perf_counter()
        run_ids = stack.start_runs(dev, workflow, [HOLD] * runs)
        started = time.perf_counter() - t0
        ended = stack.wait_succeeded(dev, workflow, run_ids, timeout=1800)
    finally:
        dev.stop()
    most, bodies = _most_at_once(spans)
    return {"wall": ended - t0, "starts": started, "most": most, "bodies": bodies}


def dev_figures(runs: int) -> list[Figure]:
    why = stack.why_unavailable()
    if why is not None:
        return [Figure.not_measured("limit holds on durable dev", f"<= {LIMIT} at once", why)]
    with tempfile.TemporaryDirectory(prefix="durable-bench-flow-") as tmp:
        say(f"flow control: {runs} limited runs on durable dev ...")
        limited = _dev_pass(Path(tmp), "limited", runs)
        say(f"flow control: {runs} unlimited runs on durable dev ...")
        free = _dev_pass(Path(tmp), "unlimited", runs)
    return [
        Figure.at_most(
            f"bodies at once, {runs} runs, concurrency={LIMIT}, 4 workers",
            limited["most"],
            LIMIT,
            "d",
            note=(
                f"{limited['bodies']} bodies ran; all {runs} runs SUCCEEDED in "
                f"{limited['wall']:.1f} s (starts took {limited['starts']:.1f} s)"
            ),
        ),
        Figure.info(
            f"bodies at once, {runs} runs, no limit, 4 workers",
            str(free["most"]),
            note=f"all SUCCEEDED in {free['wall']:.1f} s (starts took {free['starts']:.1f} s)",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--engine-only", action="store_true")
    args = parser.parse_args()
    try:
        with dynamodb_endpoint() as endpoint:
            figures = engine_figures(endpoint)
    except DynamoUnavailable as e:
        figures = not_measured([("cost per start", "measured")], str(e))
    if not args.engine_only:
        figures += dev_figures(args.runs)
    print_figures("flow control", figures)


if __name__ == "__main__":
    main()
