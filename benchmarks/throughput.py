"""Figure 7: throughput of concurrent runs over raw conditional-put throughput.

Both sides use the same DynamoDB Local server, table, boto3 client and number of threads:

- raw: each thread issues conditional ``PutItem`` calls of the exact item and condition the
  engine writes for a step (captured from a warm-up run), each to a new sort key;
- engine: each thread starts runs of ``STEPS`` trivial steps and drives each with one
  ``resume``, back to back.

The figure is steps per second over puts per second: a step's unit of work is its one
conditional write, so 1.0 means the engine adds nothing a client would notice at that
concurrency. Both sides send their puts through boto3's ``put_item`` on the same client,
what a hand-written worker sends. The fixed requests of a run (create, claim, load, final
update) are part of the engine side, amortized over ``STEPS`` steps, as they are in real
runs. Rounds rotate which side goes first; each figure is the median of per-round ratios.

    python -m benchmarks.throughput
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.common import (
    Figure,
    build_app,
    dynamo_client,
    dynamo_main,
    make_engine,
    median,
    say,
)
from benchmarks.common import fresh_tables as create_fresh_tables
from benchmarks.step_vs_put import captured_step_put
from durable.adapters.dynamodb import DynamoLedger
from durable.engine.engine import Engine

THREADS = 4
STEPS = 20  # per run
RUNS_PER_THREAD = 5
ROUNDS = 5
TARGET = 0.8
NAME = f"concurrent runs / raw puts ({THREADS} threads)"
PLANNED = [(NAME, ">= 0.80")]


def _raw(put: Any, template: dict[str, Any], tag: str) -> None:
    base = dict(template)
    item = dict(base.pop("Item"))
    for i in range(STEPS * RUNS_PER_THREAD):
        item["pk"] = {"S": f"RAW#{tag}"}
        item["sk"] = {"S": f"STEP#{i:06d}"}
        put(Item=dict(item), **base)


def _runs(engine: Engine) -> None:
    for _ in range(RUNS_PER_THREAD):
        run = engine.start("sequential", STEPS)
        outcome = engine.resume(run.run_id)
        if outcome.result != "succeeded":
            raise RuntimeError(f"run of {STEPS} steps ended {outcome.result}")


def _rate(work: Any, units: int) -> float:
    """Units per second with ``THREADS`` threads each calling ``work(thread_index)``."""
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        t0 = time.perf_counter()
        for future in [pool.submit(work, i) for i in range(THREADS)]:
            future.result()
        return units / (time.perf_counter() - t0)


def measure(endpoint: str) -> list[Figure]:
    say(
        f"throughput: {THREADS} threads, {RUNS_PER_THREAD} runs of {STEPS} steps each vs as "
        f"many raw puts, {ROUNDS} rounds ..."
    )
    client = dynamo_client(endpoint)
    table = create_fresh_tables(client)
    template = captured_step_put(endpoint, table)
    engine, _ = make_engine(build_app(), DynamoLedger(client, table))
    units = THREADS * RUNS_PER_THREAD * STEPS
    raw_rates: list[float] = []
    run_rates: list[float] = []

    def raw_round(r: int) -> None:
        raw_rates.append(_rate(lambda i: _raw(client.put_item, template, f"r{r}t{i}"), units))

    def run_round(r: int) -> None:
        run_rates.append(_rate(lambda i: _runs(engine), units))

    sides = [raw_round, run_round]
    for side in sides:  # warm-up: connections, the server's JIT
        side(-1)
    raw_rates.clear()
    run_rates.clear()
    for r in range(ROUNDS):
        for side in sides[r % 2 :] + sides[: r % 2]:  # each side goes first in turn
            side(r)
    ratios = [s / p for s, p in zip(run_rates, raw_rates, strict=True)]
    return [
        Figure.at_least(
            NAME,
            median(ratios),
            TARGET,
            ".2f",
            note=(
                f"engine {median(run_rates):.0f} steps/s vs raw {median(raw_rates):.0f} puts/s "
                f"on one client, {THREADS} threads, runs of {STEPS} steps; per-round ratios "
                + ", ".join(f"{x:.2f}" for x in ratios)
            ),
        ),
    ]


def main() -> None:
    title = "concurrent-run throughput vs raw conditional puts (DynamoDB Local)"
    dynamo_main(title, measure, PLANNED)


if __name__ == "__main__":
    main()
