"""Inline fan-out (issue 16): what ``ctx.parallel`` costs in time and in DynamoDB requests.

1. Wall time: a run whose ``ctx.parallel`` has 3 branches, each one step whose body
   waits 200 ms (I/O: ``time.sleep`` releases the GIL like a socket read), divided by
   200 ms. The baseline in the same run is the same three steps one after another
   (~3.0). Median of 5 runs on DynamoDB Local. Target <= 1.2.
2. Requests per branch step: the same 3-branch parallel with 1 and with 6 steps per
   branch; the difference in requests, divided by the 15 extra branch steps. Target 1
   (one conditional PutItem, as for any step).

    python -m benchmarks.fanout
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from benchmarks.common import (
    Figure,
    dynamo_client,
    dynamo_main,
    fresh_tables,
    make_engine,
    median,
    say,
)
from durable import App, Context

BODY_SECONDS = 0.2
RUNS = 5
PLANNED = [
    ("parallel of 3 x 200 ms steps: wall / 200 ms", "<= 1.2"),
    ("requests per inline branch step", "= 1"),
]


def io_step(i: int) -> int:
    time.sleep(BODY_SECONDS)
    return i


def tick(i: int) -> int:
    return i + 1


def build_app() -> App:
    app = App()

    @app.workflow(name="three_at_once")
    def three_at_once(ctx: Context) -> list[int]:
        return ctx.parallel(
            lambda c: c.step(io_step, 1), lambda c: c.step(io_step, 2), lambda c: c.step(io_step, 3)
        ).values()

    @app.workflow(name="three_in_a_row")
    def three_in_a_row(ctx: Context) -> list[int]:
        return [ctx.step(io_step, i) for i in (1, 2, 3)]

    def counter(steps: int) -> Any:
        def branch(c: Context) -> int:
            total = 0
            for i in range(steps):
                total = c.step(tick, i)
            return total

        return branch

    @app.workflow(name="wide")
    def wide(ctx: Context, steps: int) -> list[int]:
        return ctx.parallel(counter(steps), counter(steps), counter(steps)).values()

    return app


def _wall(engine: Any, workflow: str) -> float:
    run = engine.start(workflow)
    began = time.perf_counter()
    outcome = engine.resume(run.run_id)
    took = time.perf_counter() - began
    if outcome.result != "succeeded":
        raise RuntimeError(f"{workflow}: expected success, got {outcome.result}")
    return took


def measure(endpoint: str) -> list[Figure]:
    from durable.adapters.dynamodb import DynamoLedger

    client = dynamo_client(endpoint)
    table = fresh_tables(client)
    engine, _ = make_engine(build_app(), DynamoLedger(client, table))
    say(f"fan-out: {RUNS} runs of a 3-branch parallel and of 3 steps in a row ...")
    parallel = [_wall(engine, "three_at_once") for _ in range(RUNS)]
    serial = [_wall(engine, "three_in_a_row") for _ in range(RUNS)]
    ratio = median(parallel) / BODY_SECONDS
    baseline = median(serial) / BODY_SECONDS

    calls: Counter[str] = Counter()
    client.meta.events.register(
        "before-call.dynamodb.*", lambda model, **_: calls.update([model.name])
    )
    counts = []
    for steps in (1, 6):
        calls.clear()
        run = engine.start("wide", steps)
        if engine.resume(run.run_id).result != "succeeded":
            raise RuntimeError("the wide parallel did not finish")
        counts.append(Counter(calls))
    extra = counts[1] - counts[0]
    per_step = sum(extra.values()) / 15
    return [
        Figure.at_most(
            PLANNED[0][0],
            ratio,
            1.2,
            ".2f",
            note=f"median of {RUNS}: {median(parallel) * 1000:.0f} ms; the same 3 steps in a row: "
            f"{median(serial) * 1000:.0f} ms ({baseline:.2f} x 200 ms)",
        ),
        Figure.exactly(
            PLANNED[1][0],
            per_step,
            1.0,
            ".2f",
            note="15 more branch steps cost "
            + ", ".join(f"{n} {op}" for op, n in sorted(extra.items()))
            + f"; a 3x1 parallel: {sum(counts[0].values())} requests in all",
        ),
    ]


def main() -> None:
    dynamo_main("inline fan-out (DynamoDB Local)", measure, PLANNED)


if __name__ == "__main__":
    main()
