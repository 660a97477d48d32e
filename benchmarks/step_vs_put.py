"""Figure 4: engine step time on DynamoDB Local over one raw conditional PutItem.

Both sides run in the same session, on the same server, table and boto3 client:

- raw: ``client.put_item`` of the very item the engine writes for a step (captured from
  a warm-up run) with the engine's condition (``attribute_not_exists(sk) OR NOT (status
  IN (finals))``), N times in a row, each to a new sort key;
- engine: a sequential run of N trivial steps driven by one ``resume``; its wall time
  (start included) divided by N, so the run's 4 fixed requests are amortized over N.

Rounds alternate which side goes first; the figure is the median of per-round ratios.

    python -m benchmarks.step_vs_put
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchmarks.common import (
    Figure,
    TimedLedger,
    build_app,
    dynamo_client,
    dynamo_engine,
    dynamo_main,
    make_engine,
    median,
    say,
)
from benchmarks.common import fresh_tables as create_fresh_tables
from durable.adapters.dynamodb import DynamoLedger
from durable.engine.engine import Engine

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

N_STEPS = 200
ROUNDS = 5
TARGET = 1.3
PLANNED = [
    ("step time DynamoDB / raw conditional put", "<= 1.30"),
]


def captured_step_put(endpoint: str, table: str) -> dict[str, Any]:
    """The PutItem parameters of one engine step write (on a separate, hooked client)."""
    client = dynamo_client(endpoint)
    engine, _, counter = dynamo_engine(build_app(), client, table)
    run = engine.start("sequential", 2)
    engine.resume(run.run_id)
    if counter.last_put is None:
        raise RuntimeError("no step PutItem was seen")
    params = dict(counter.last_put)
    params.pop("ReturnConsumedCapacity", None)
    return params


@dataclass(frozen=True, slots=True)
class Timing:
    wall: float  # seconds per put or step
    cpu: float  # this process's CPU seconds per put or step (the client side)
    ledger: float = 0.0  # seconds inside the ledger per step (engine only)


def raw_puts(client: DynamoDBClient, template: dict[str, Any], tag: str, n: int) -> Timing:
    """Per conditional put, ``n`` in a row."""
    base = dict(template)
    item = dict(base.pop("Item"))
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(n):
        item["pk"] = {"S": f"RAW#{tag}"}
        item["sk"] = {"S": f"STEP#{i:06d}"}
        client.put_item(Item=item, **base)
    return Timing((time.perf_counter() - t0) / n, (time.process_time() - c0) / n)


def engine_steps(engine: Engine, timed: TimedLedger, n: int) -> Timing:
    """Per step of an ``n``-step run in one invocation (start included)."""
    timed.stats.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    run = engine.start("sequential", n)
    outcome = engine.resume(run.run_id)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if outcome.result != "succeeded":
        raise RuntimeError(f"run of {n} steps ended {outcome.result}")
    return Timing(wall / n, cpu / n, timed.stats.seconds / n)


def measure(endpoint: str) -> list[Figure]:
    say(f"step vs raw put: {ROUNDS} rounds of {N_STEPS} steps / puts on DynamoDB Local ...")
    client = dynamo_client(endpoint)
    table = create_fresh_tables(client)
    template = captured_step_put(endpoint, table)
    engine, timed = make_engine(build_app(), DynamoLedger(client, table))
    raw_puts(client, template, "warm", 50)  # this client's connection; see warm_up()
    engine_steps(engine, timed, 25)
    raw: list[Timing] = []
    steps: list[Timing] = []
    for r in range(ROUNDS):
        if r % 2 == 0:
            raw.append(raw_puts(client, template, f"r{r}", N_STEPS))
            steps.append(engine_steps(engine, timed, N_STEPS))
        else:
            steps.append(engine_steps(engine, timed, N_STEPS))
            raw.append(raw_puts(client, template, f"r{r}", N_STEPS))
    ratios = [s.wall / p.wall for s, p in zip(steps, raw, strict=True)]

    def ms(values: list[Timing], attr: str) -> str:
        return f"{median([getattr(v, attr) for v in values]) * 1e3:.2f} ms"

    return [
        Figure.at_most(
            "step time DynamoDB / raw conditional put",
            median(ratios),
            TARGET,
            ".2f",
            note=(
                f"engine {ms(steps, 'wall')}/step (inside DynamoLedger {ms(steps, 'ledger')}; "
                f"client CPU {ms(steps, 'cpu')}) vs raw put {ms(raw, 'wall')} (client CPU "
                f"{ms(raw, 'cpu')}); medians of {ROUNDS} rounds of {N_STEPS}; per-round ratios "
                + ", ".join(f"{x:.2f}" for x in ratios)
            ),
        )
    ]


def main() -> None:
    dynamo_main("step time vs raw conditional put (DynamoDB Local)", measure, PLANNED)


if __name__ == "__main__":
    main()
