"""Issue 15, target 2: a long run costs per step what a short one does.

A run of N trivial steps, in invocations of 1,000 steps (each hands off to the next, as a
long run does on AWS), on DynamoDB Local. Without the warm cache invocation k loads and
decodes the (k-1) x 1,000 records before it; with it (``durable.core.history_cache``, what a
worker container keeps between invocations of the same run) it loads nothing it wrote.

    per-step ratio = (seconds per step at N=10,000) / (seconds per step at N=1,000)

both measured in the same round, cached and uncached, median of ROUNDS rounds; the
storage requests of each invocation are counted.

    python -m benchmarks.long_run            (LONG_STEPS=10000 by default)
"""

from __future__ import annotations

import os
import time
from typing import Any

from benchmarks.common import (
    Figure,
    build_app,
    dynamo_client,
    dynamo_main,
    fresh_tables,
    make_engine,
    median,
    say,
)
from durable.core.config import EngineConfig
from durable.core.history_cache import CachingLedger

SHORT = 1_000
LONG = int(os.environ.get("LONG_STEPS", "10000"))
ROUNDS = int(os.environ.get("LONG_ROUNDS", "2"))
CHUNK = EngineConfig(steps_per_invocation=SHORT)
TARGET = 1.05
NAME = f"per-step time, {LONG} steps in invocations of {SHORT} / {SHORT} steps (warm cache)"
PLANNED = [(NAME, f"<= {TARGET}")]


def one_run(endpoint: str, table: str, steps: int, *, cached: bool) -> tuple[float, int, int]:
    """Seconds per step of a whole run, its invocations and the loads that hit storage."""
    from durable.adapters.dynamodb import DynamoLedger

    ledger: Any = DynamoLedger(dynamo_client(endpoint), table)
    cache = CachingLedger(ledger) if cached else None
    engine, _ = make_engine(build_app(), cache or ledger, config=CHUNK)
    began = time.perf_counter()
    run = engine.start("sequential", steps)
    invocations = 0
    while True:
        invocations += 1
        outcome = engine.resume(run.run_id, reason="continue")
        if outcome.result == "succeeded":
            break
        if outcome.result != "handed_off":
            raise RuntimeError(f"expected a hand-off, got {outcome.result}")
    seconds = time.perf_counter() - began
    loads = cache.loads if cache is not None else invocations - 1  # the first skips it
    return seconds / steps, invocations, loads


def measure(endpoint: str) -> list[Figure]:
    client = dynamo_client(endpoint)
    table = fresh_tables(client)
    say(f"long runs: {SHORT} and {LONG} steps in invocations of {SHORT}, {ROUNDS} rounds ...")
    one_run(endpoint, table, 100, cached=True)  # this client's connection, the code paths
    ratios: dict[bool, list[float]] = {True: [], False: []}
    notes: dict[bool, str] = {}
    for _ in range(ROUNDS):
        for cached in (True, False):
            short, _, _ = one_run(endpoint, table, SHORT, cached=cached)
            long, invocations, loads = one_run(endpoint, table, LONG, cached=cached)
            ratios[cached].append(long / short)
            notes[cached] = (
                f"{long * 1e3:.2f} ms/step at {LONG} ({invocations} invocations, {loads} "
                f"loads from storage) vs {short * 1e3:.2f} at {SHORT}"
            )
    return [
        Figure.at_most(
            NAME,
            median(ratios[True]),
            TARGET,
            ".3f",
            note=f"cached: {notes[True]}; without the cache the same run: "
            f"{median(ratios[False]):.3f} ({notes[False]})",
        )
    ]


def main() -> None:
    dynamo_main("long runs (DynamoDB Local)", measure, PLANNED)


if __name__ == "__main__":
    main()
