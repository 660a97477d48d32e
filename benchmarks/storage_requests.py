"""Figure 3: storage requests per completed step on DynamoDB, inside one invocation.

A run of N trivial steps is driven by one ``resume`` on ``DynamoLedger`` against
DynamoDB Local. botocore event hooks count the client's requests by operation (and by
the ledger method that issued them) and ask each request for its consumed capacity. The
fixed per-run requests (create_run, claim, load, final update) are measured on a run of
0 steps in the same session and subtracted:

    writes per step = (writes(N) - writes(0)) / N        target: exactly 1
    reads per step  = (reads(N) - reads(0)) / N          target: exactly 0

    python -m benchmarks.storage_requests
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from benchmarks.common import (
    Figure,
    RequestCounter,
    build_app,
    dynamo_client,
    dynamo_engine,
    dynamo_main,
    fresh_tables,
    say,
)
from durable.engine.engine import Engine

N_STEPS = 200
PHASE_ORDER = ("create_run", "claim", "load", "write_step", "update_run")
PLANNED = [
    ("DynamoDB writes/step (1 invocation)", "= 1"),
    ("DynamoDB reads/step (1 invocation)", "= 0"),
    ("DynamoDB write capacity/step", "(report)"),
]


@dataclass(frozen=True, slots=True)
class Tally:
    writes: int
    reads: int
    write_capacity: float
    http_attempts: int
    by_phase: dict[str, Counter[str]]
    step_item_bytes: int


def counted_run(engine: Engine, counter: RequestCounter, n: int) -> Tally:
    counter.reset()
    run = engine.start("sequential", n)
    outcome = engine.resume(run.run_id)
    if outcome.result != "succeeded":
        raise RuntimeError(f"run of {n} steps ended {outcome.result}")
    phases = {p for p, _ in counter.ops}
    by_phase = {p: counter.in_phase(p) for p in PHASE_ORDER if p in phases}
    by_phase.update({p: counter.in_phase(p) for p in sorted(phases - set(PHASE_ORDER))})
    step_puts = counter.put_sizes[1:]  # the first PutItem is create_run's run item
    return Tally(
        writes=counter.writes(),
        reads=counter.reads(),
        write_capacity=counter.write_capacity(),
        http_attempts=counter.http_attempts,
        by_phase=by_phase,
        step_item_bytes=max(step_puts) if step_puts else 0,
    )


def _phases(tally: Tally) -> str:
    return ", ".join(
        f"{phase}: " + "+".join(f"{n} {op}" for op, n in sorted(ops.items()))
        for phase, ops in tally.by_phase.items()
    )


def measure(endpoint: str) -> list[Figure]:
    say(f"storage requests: {N_STEPS}-step run on DynamoDB Local ({endpoint}) ...")
    client = dynamo_client(endpoint)
    table = fresh_tables(client)
    engine, _, counter = dynamo_engine(build_app(), client, table)
    counted_run(engine, counter, 3)  # warm-up: connection open, endpoint resolved
    base = counted_run(engine, counter, 0)
    full = counted_run(engine, counter, N_STEPS)
    writes = (full.writes - base.writes) / N_STEPS
    reads = (full.reads - base.reads) / N_STEPS
    wcu = (full.write_capacity - base.write_capacity) / N_STEPS
    retries = full.http_attempts - sum(sum(c.values()) for c in full.by_phase.values())
    return [
        Figure.exactly(
            "DynamoDB writes/step (1 invocation)",
            writes,
            1,
            ".2f",
            note=(
                f"fixed per run (0-step run): {_phases(base)}; the {N_STEPS}-step run: "
                f"{_phases(full)}; HTTP retries: {retries}"
            ),
        ),
        Figure.exactly("DynamoDB reads/step (1 invocation)", reads, 0, ".2f"),
        Figure.info(
            "DynamoDB write capacity/step",
            f"{wcu:.2f} WCU",
            note=(
                "ConsumedCapacity (TOTAL) as DynamoDB Local reports it for the steps' "
                f"conditional PutItems; the largest step item is {full.step_item_bytes} bytes "
                "(1 WCU per started KB on DynamoDB)"
            ),
        ),
    ]


def main() -> None:
    dynamo_main("storage requests per step (DynamoDB Local)", measure, PLANNED)


if __name__ == "__main__":
    main()
