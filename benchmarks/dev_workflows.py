"""The workflows the local-stack benchmarks and the load test run under ``durable dev``.

    durable dev --app benchmarks.dev_workflows:app

Their steps do (almost) nothing, so what is measured is the stack: the HTTP API, the
worker processes, the ledger on DynamoDB Local, the timer loop and the sweeper.

Every step body that runs appends one line ``<run_id> <position> <attempt>`` to the file
named by ``DURABLE_BENCH_COUNTER`` (when set). The workers are separate processes, and
a single ``write`` to a file opened with ``O_APPEND`` lands whole and never interleaves
with another, so the file counts every step-body execution without a lock. The load
test counts it to prove that no step ran twice, which the ledger alone cannot show: a
body that ran but whose record was lost would leave no trace there.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

from durable import App, Context, current_step

app = App()

COUNTER_ENV = "DURABLE_BENCH_COUNTER"
STEPS = 10


def count_execution() -> None:
    path = os.environ.get(COUNTER_ENV)
    if not path:
        return
    step = current_step()
    line = f"{step.run_id} {step.position} {step.attempt}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@app.step
def tick(i: int) -> int:
    """The trivial step: counted, then returns."""
    count_execution()
    return i + 1


@app.step
def hold(seconds: float) -> float:
    """A step that takes real time, so a worker can be killed in the middle of it."""
    count_execution()
    time.sleep(seconds)
    return seconds


@app.workflow(name="ten-steps")
def ten_steps(ctx: Context, tag: int) -> int:
    """Ten trivial steps: the short run of the throughput figures and the load test."""
    total = tag
    for i in range(STEPS):
        total += tick(i)
    return total


@app.workflow(name="nap")
def nap(ctx: Context, seconds: float) -> int:
    """One durable sleep of ``seconds`` (virtual), then one step: its first attempt's
    ``started_at`` against the sleep's ``wake_at`` is the end-to-end timer lateness."""
    ctx.sleep(timedelta(seconds=seconds))
    return tick(0)


@app.workflow(name="slow-step")
def slow_step(ctx: Context, seconds: float) -> int:
    """A step that holds its worker for ``seconds`` of real time, then a trivial one."""
    hold(seconds)
    return tick(0)


SPANS_ENV = "DURABLE_BENCH_SPANS"


@app.step
def busy(seconds: float) -> float:
    """Holds its worker ``seconds`` and appends ``<run_id> <start> <end>`` (``time.time()``)
    to the file ``DURABLE_BENCH_SPANS`` names: how many bodies overlapped, for the
    flow-control figures."""
    count_execution()
    started = time.time()
    time.sleep(seconds)
    path = os.environ.get(SPANS_ENV)
    if path:
        line = f"{current_step().run_id} {started:.6f} {time.time():.6f}\n".encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    return seconds


@app.workflow(name="limited", concurrency=2)
def limited(ctx: Context, seconds: float) -> float:
    """One busy step, at most two runs at a time (``durable.core.flow``)."""
    return busy(seconds)


@app.workflow(name="unlimited")
def unlimited(ctx: Context, seconds: float) -> float:
    """The same without a limit: the baseline of the flow-control figures."""
    return busy(seconds)


@app.workflow(name="map-item")
def map_item(ctx: Context, i: int) -> int:
    """One item of a distributed map: one trivial step (a child run of ``map-all``)."""
    result: int = tick(i)
    return result


@app.workflow(name="map-all")
def map_all(ctx: Context, spec: dict[str, int]) -> int:
    """A distributed map of ``spec["items"]`` items, ``spec["window"]`` at a time."""
    values = ctx.map(
        map_item,
        range(spec["items"]),
        name="items",
        distributed=True,
        max_concurrency=spec["window"],
    ).values()
    return len(values)
