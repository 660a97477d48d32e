"""Run every benchmark and print one table: figure, measured, target, verdict.

    python -m benchmarks.run_all
    python -m benchmarks.run_all --dev-stack   # plus the local stack (about 3 more minutes)

The memory-ledger figures run first; one DynamoDB Local server (or the one at
``DURABLE_TEST_DYNAMODB_ENDPOINT``) then serves every DynamoDB figure. Without Java the
DynamoDB figures are listed as not measured, with the reason. A benchmark that fails is
reported the same way (its traceback goes to stderr) so the others still print.
See docs/performance.md for what each figure means.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence

from benchmarks import (
    cold_import,
    engine_overhead,
    replay,
    step_vs_put,
    storage_requests,
    throughput,
    wakeup,
)
from benchmarks.common import (
    DynamoUnavailable,
    Figure,
    dynamodb_endpoint,
    format_table,
    not_measured,
    say,
    warm_up,
)

Planned = Sequence[tuple[str, str]]

MEMORY_PLANNED: list[tuple[str, str]] = [
    ("engine overhead/step, memory", "<= 50.0 us"),
    ("cost/step N=1000 / N=100 (memory)", "<= 1.20"),
]
REPLAY_MEMORY_PLANNED = [("replay/execute per step, memory", "<= 0.100")]
COLD_PLANNED = [(f"cold import handlers.{n} / boto3", "<= 1.50") for n in cold_import.HANDLERS]


def guarded(planned: Planned, measure: Callable[[], list[Figure]]) -> list[Figure]:
    try:
        return measure()
    except Exception as e:
        traceback.print_exc()
        return not_measured(planned, f"the benchmark failed: {type(e).__name__}: {e}")


def load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dev-stack",
        action="store_true",
        help="also measure durable dev (benchmarks.dev_stack): about 3 more minutes",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    say(
        f"durable benchmarks: Python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {load()}"
    )
    # Collected by figure number (DESIGN section 8 order), printed together at the end.
    overhead = guarded(MEMORY_PLANNED, engine_overhead.run)
    replay_memory = guarded(REPLAY_MEMORY_PLANNED, replay.measure_memory)
    dynamo: dict[str, list[Figure]] = {}
    benches: list[tuple[str, Planned, Callable[[str], list[Figure]]]] = [
        ("requests", storage_requests.PLANNED, storage_requests.measure),
        ("put", step_vs_put.PLANNED, step_vs_put.measure),
        ("replay", replay.PLANNED, replay.measure_dynamo),
        ("wakeup", wakeup.PLANNED, wakeup.measure),
        ("throughput", throughput.PLANNED, throughput.measure),
    ]
    try:
        with dynamodb_endpoint() as endpoint:
            say(f"DynamoDB Local at {endpoint}")
            warm_up(endpoint)
            for key, planned, measure in benches:
                dynamo[key] = guarded(planned, functools.partial(measure, endpoint))
    except DynamoUnavailable as e:
        say(f"DynamoDB figures not measured: {e}")
        for key, planned, _ in benches:
            dynamo[key] = not_measured(planned, str(e))
    cold = guarded(COLD_PLANNED, cold_import.run)
    figures = [
        *overhead,
        *dynamo["requests"],
        *dynamo["put"],
        *replay_memory,
        *dynamo["replay"],
        *dynamo["wakeup"],
        *dynamo["throughput"],
        *cold,
    ]
    print("\n== durable benchmarks (DESIGN section 8) ==")
    print(format_table(figures))
    print(f"\n{time.perf_counter() - started:.0f} s in all; {load()}")
    missed = [f.name for f in figures if f.verdict == "MISSED"]
    if missed:
        print("missed: " + "; ".join(n.strip() for n in missed))
    sys.stdout.flush()
    if args.dev_stack:
        dev_stack_section()


# --- optional: the local stack (durable dev) ---------------------------------------------
# Separate from the table above: it launches whole `durable dev` stacks (each with its
# own DynamoDB Local) for minutes, so it runs only when asked for, after the main table.


def dev_stack_section() -> None:
    from benchmarks import dev_stack

    started = time.perf_counter()
    say("\ndurable dev: start-up, timer lateness, throughput, recovery, storage per sleep ...")
    figures = guarded(dev_stack.PLANNED, dev_stack.measure)
    print("\n== durable dev: the local stack (optional, --dev-stack) ==")
    print(format_table(figures))
    print(f"\n{time.perf_counter() - started:.0f} s; {load()}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
