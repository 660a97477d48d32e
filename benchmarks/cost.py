"""Dollars per million runs, from counted requests and units (issue 15, target 6).

Each workflow runs once on DynamoDB Local, driven as AWS drives it: the start's worker
invocation, a Scheduler timer's invocation per durable wait, a callback answered
through the API. Every DynamoDB request asks for ``ReturnConsumedCapacity=INDEXES``;
worker invocations, timers fired and the client's CPU time are counted. The bill is
those counts times the list prices below, plus what the run costs later: its step and
signal items deleted by the purge when its retention ends (one write each; TTL's own
delete of the run item is free).

The same workflow shapes are priced on AWS Step Functions (Standard) and on Lambda
durable functions from the formulas in ``peers()``: the counts there are the workflow's
steps and waits, not a measurement. Every assumption is printed with the table.

    python -m benchmarks.cost            (docs/performance.md, "What a run costs")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from benchmarks import provisioned
from benchmarks.common import Figure, dynamo_client, dynamodb_endpoint, print_figures, say
from benchmarks.write_units import UnitCounter
from benchmarks.write_units import build_app as build_ten_and_sleep
from durable import App, RunStatus
from durable.adapters.memory import MemoryInvoker, MemoryTimers
from durable.core.clock import FakeClock
from durable.core.config import EngineConfig
from durable.engine.engine import Engine

# US East (N. Virginia) list prices in USD, as published in 2026; edit here, rerun.
PRICES = {
    "dynamodb_write_request_unit": 0.625e-6,  # on-demand
    "dynamodb_read_request_unit": 0.125e-6,
    "dynamodb_wcu_hour": 0.00065,  # provisioned capacity, per unit and hour
    "dynamodb_rcu_hour": 0.00013,
    "lambda_request": 0.20e-6,
    "lambda_gb_second_arm": 0.0000133334,
    "scheduler_invocation": 1.00e-6,  # EventBridge Scheduler, past the free tier
    "stepfunctions_transition": 0.025e-3,  # Standard workflows
    "durable_operation": 8.00e-6,  # Lambda durable functions
    "durable_data_written_gb": 0.25,
}
MEMORY_GB = 0.5  # template.yaml: MemorySize 512, arm64
REQUEST_MS = 5.0  # assumed in-region DynamoDB round trip billed as Lambda duration
INVOCATION_MS = 10.0  # assumed fixed time of a warm invocation outside our code
# The steady load the provisioned column prices: about 10 million runs a month, evenly.
STEADY_RUNS_PER_SECOND = 4.0
PROVISIONED_TARGET = 8.0  # issue 48: the first row, provisioned at a steady load, $/M runs
ON_DEMAND_TARGET = 17.0  # issue 48: the first row on-demand, its workflow declaring a lifetime
LIFETIME = timedelta(days=7)  # what the second row's workflow declares
STEADY = provisioned.template_load(STEADY_RUNS_PER_SECOND)
ASSUMPTIONS = [
    "prices: us-east-1 list prices (PRICES in benchmarks/cost.py), no free tier",
    f"Lambda: arm64, {MEMORY_GB * 1024:.0f} MB, warm; each invocation bills {INVOCATION_MS:g} ms "
    f"plus the client CPU measured here plus {REQUEST_MS:g} ms per DynamoDB request",
    "the steps do no work of their own (it costs the same on every platform), and the "
    "request that starts a run or answers a callback is left out of every column",
    "Step Functions: one transition per step, wait and callback state, plus the start and "
    "the end; each step is a Lambda task (one request, the same fixed time)",
    "Lambda durable functions: one operation per step, wait and callback, plus the start; "
    "one invocation per start and wake-up (as here); each step checkpoints its result "
    f"({REQUEST_MS:g} ms); data written = the results' bytes",
    "ours: the purge later deletes each step and signal item (one write each)",
    f"ours provisioned (TableBillingMode=PROVISIONED): a steady {STEADY_RUNS_PER_SECOND:g} runs "
    f"a second (about {STEADY_RUNS_PER_SECOND * 86400 * 30 / 1e6:.1f} million a month); auto "
    f"scaling keeps the table and each index at {STEADY.utilization:.0%} utilization (the "
    f"template's TargetUtilization) and at least {STEADY.min_write:g} WCU and "
    f"{STEADY.min_read:g} RCU each (MinWriteCapacity, MinReadCapacity: what an index this "
    "run leaves idle still costs); the rest of the bill as on-demand",
]


@dataclass
class Shape:
    """A workflow to price: its name, input and the outside answer it waits for."""

    title: str
    workflow: str
    payload: Any
    steps: int  # bodies that run (for the peers' formulas)
    waits: int  # durable sleeps
    callbacks: int = 0
    answer: Callable[[Engine, str], None] | None = None


@dataclass
class Counted:
    units: UnitCounter
    invocations: int = 0
    timers: int = 0
    cpu_seconds: float = 0.0
    purge_writes: int = 0
    result_bytes: int = 0
    lines: list[str] = field(default_factory=list)


def build_app() -> App:
    """The seed workflows and the ten-step shape, on the effect store of the benchmark."""
    from examples.app import app as examples_app

    lived = build_ten_and_sleep(LIFETIME, name="ten_and_sleep_lived")
    return App().include(examples_app).include(build_ten_and_sleep()).include(lived)


def _approve(engine: Engine, run_id: str) -> None:
    engine.complete_wait(run_id, "manager-approval", "bob", requested_by="cost-benchmark")


SHAPES = [
    Shape("10 steps + 1 sleep", "ten_and_sleep", {"user": "u1"}, steps=10, waits=1),
    # The same, declaring a lifetime: its items carry their own TTL, so the purge deletes
    # nothing (durable.core.lifetime; docs/operations.md, "Declared lifetimes").
    Shape(
        "the same, max_lifetime=7 days",
        "ten_and_sleep_lived",
        {"user": "u1"},
        steps=10,
        waits=1,
    ),
    Shape(
        "onboarding (4 steps, 3-day sleep)",
        "onboarding",
        {"user_id": "u1", "email": "u1@example.com"},
        steps=4,
        waits=1,
    ),
    Shape(
        "paginated pull (1 step, 5 pages)",
        "data-pull",
        {"source": "crm", "total_items": 50},
        steps=1,
        waits=0,
    ),
    Shape(
        "expense approval (callback, 2 steps)",
        "expense-approval",
        {"employee": "ann", "amount": 120, "manager": "bob"},
        steps=2,
        waits=0,
        callbacks=1,
        answer=_approve,
    ),
]


def run_shape(endpoint: str, shape: Shape) -> Counted:
    from benchmarks.common import fresh_tables
    from durable.adapters.dynamodb import DynamoLedger
    from durable.adapters.idempotency import DynamoEffectStore

    client = dynamo_client(endpoint)
    table = fresh_tables(client)
    idempotency = table.replace("bench-ledger-", "bench-idem-")
    clock, invoker, timers = FakeClock(), MemoryInvoker(), MemoryTimers()
    engine = Engine(
        build_app(),
        DynamoLedger(client, table),
        invoker,
        DynamoEffectStore(client, idempotency),
        clock=clock,
        config=EngineConfig(callback_secret=b"k" * 32),
        timers=timers,
    )
    counted = Counted(UnitCounter(client))
    run = engine.start(shape.workflow, shape.payload)
    answer = shape.answer
    for _ in range(1000):
        item = invoker.pop()
        if item is not None:
            began = time.process_time()
            engine.resume(item.run_id, hop=item.hop, reason=item.reason)
            counted.cpu_seconds += time.process_time() - began
            counted.invocations += 1
            continue
        current = engine.get_run(run.run_id)
        if current is not None and current.status.terminal:
            break
        if answer is not None:  # the approver answers before any timeout fires
            answer(engine, run.run_id)
            answer = None
            continue
        if timers.armed:
            clock.advance(min(at for _, at in timers.armed.values()) - clock.now())
            for run_id in timers.due(clock.now()):
                counted.timers += 1
                invoker.invoke(run_id, "timer")
            continue
        raise RuntimeError(f"{shape.workflow}: nothing due and no answer to give")
    history = engine.history(run.run_id)
    final = engine.get_run(run.run_id)
    if final is None or final.status != RunStatus.SUCCEEDED or "expired" in (final.output or ""):
        raise RuntimeError(f"{shape.workflow}: the run did not succeed ({final})")
    # a client of its own: this read is not the run's
    counted.purge_writes = _purged_items(dynamo_client(endpoint), table, run.run_id)
    counted.result_bytes = sum(len(s.output or "") for s in history)
    return counted


def _purged_items(client: Any, table: str, run_id: str) -> int:
    """The items the purge deletes when the run's retention ends: every item of its
    partition but the run item (TTL deletes that one) and those carrying a TTL of their
    own (a declared lifetime's: TTL deletes them too, for nothing). Counted as stored, not
    from the history: a sleep kept in the run item (``durable.core.sleeps``) has no item."""
    from durable.adapters.dynamodb_items import RUN_SK, run_pk

    request: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": run_pk(run_id)}},
        "ProjectionExpression": "sk, purge_at",
    }
    items = client.query(**request)["Items"]
    return sum(1 for item in items if item["sk"]["S"] != RUN_SK and "purge_at" not in item)


def ours(counted: Counted) -> float:
    p = PRICES
    requests = sum(counted.units.requests.values())
    writes = sum(counted.units.writes.values()) + counted.purge_writes
    reads = sum(counted.units.reads.values())
    seconds = counted.invocations * INVOCATION_MS / 1000 + counted.cpu_seconds
    seconds += requests * REQUEST_MS / 1000
    return (
        writes * p["dynamodb_write_request_unit"]
        + reads * p["dynamodb_read_request_unit"]
        + counted.invocations * p["lambda_request"]
        + seconds * MEMORY_GB * p["lambda_gb_second_arm"]
        + counted.timers * p["scheduler_invocation"]
    )


def on_demand_units(counted: Counted) -> float:
    """The DynamoDB part of ``ours``: the run's units at on-demand prices."""
    p = PRICES
    writes = sum(counted.units.writes.values()) + counted.purge_writes
    reads = sum(counted.units.reads.values())
    return writes * p["dynamodb_write_request_unit"] + reads * p["dynamodb_read_request_unit"]


def ours_provisioned(counted: Counted, load: provisioned.SteadyLoad = STEADY) -> float:
    """``ours`` with the tables provisioned under a steady load: the same units priced as
    the capacity that carries them (``benchmarks.provisioned``), the rest unchanged."""
    writes = dict(counted.units.writes)
    # the purge deletes step and signal items, which carry no index key: the table's units
    writes[provisioned.TABLE] = writes.get(provisioned.TABLE, 0.0) + counted.purge_writes
    capacity = provisioned.dollars_per_run(
        writes,
        counted.units.reads,
        provisioned.capacity_holders(),
        load,
        wcu_hour=PRICES["dynamodb_wcu_hour"],
        rcu_hour=PRICES["dynamodb_rcu_hour"],
    )
    return ours(counted) - on_demand_units(counted) + capacity


def peers(shape: Shape, counted: Counted) -> tuple[float, float]:
    """(Step Functions Standard, Lambda durable functions) for the same shape."""
    p = PRICES
    task_seconds = INVOCATION_MS / 1000
    transitions = shape.steps + shape.waits + shape.callbacks + 2
    step_functions = transitions * p["stepfunctions_transition"] + shape.steps * (
        p["lambda_request"] + task_seconds * MEMORY_GB * p["lambda_gb_second_arm"]
    )
    operations = shape.steps + shape.waits + shape.callbacks + 1
    invocations = counted.invocations
    seconds = invocations * INVOCATION_MS / 1000 + shape.steps * REQUEST_MS / 1000
    durable_functions = (
        operations * p["durable_operation"]
        + invocations * p["lambda_request"]
        + seconds * MEMORY_GB * p["lambda_gb_second_arm"]
        + counted.result_bytes / 1e9 * p["durable_data_written_gb"]
    )
    return step_functions, durable_functions


def table(rows: list[tuple[Shape, Counted]]) -> str:
    head = (
        "| workflow | ours: WCU, RCU, invocations, timers | ours $/M runs "
        "| ours provisioned, steady load $/M "
        "| Step Functions Standard $/M | Lambda durable functions $/M |"
    )
    out = [head, "|---|---|---|---|---|---|"]
    for shape, counted in rows:
        sf, ldf = peers(shape, counted)
        writes = sum(counted.units.writes.values()) + counted.purge_writes
        reads = sum(counted.units.reads.values())
        detail = f"{writes:g} ({counted.purge_writes} at purge), {reads:g}, "
        detail += f"{counted.invocations}, {counted.timers}"
        out.append(
            f"| {shape.title} | {detail} | {ours(counted) * 1e6:.2f} "
            f"| {ours_provisioned(counted) * 1e6:.2f} | {sf * 1e6:.2f} | {ldf * 1e6:.2f} |"
        )
    return "\n".join(out)


def main() -> None:
    with dynamodb_endpoint() as endpoint:
        rows = []
        for shape in SHAPES:
            say(f"cost: {shape.title} ...")
            rows.append((shape, run_shape(endpoint, shape)))
    print("\n== what a run costs, dollars per million runs ==")
    print(table(rows))
    print("\nassumptions:")
    for line in ASSUMPTIONS:
        print(f"  - {line}")
    first, lived = rows[0][1], rows[1][1]
    label = f"{rows[0][0].title}, max_lifetime={LIFETIME.days} days"
    at_90 = replace(STEADY, utilization=0.9)
    print_figures(
        "targets",
        [
            Figure.at_most(
                f"{label}: on-demand $/M runs",
                ours(lived) * 1e6,
                ON_DEMAND_TARGET,
                ".2f",
                note=f"without a declared lifetime {ours(first) * 1e6:.2f}",
            ),
            Figure.at_most(
                f"{label}: provisioned at a steady load, $/M runs",
                ours_provisioned(lived) * 1e6,
                PROVISIONED_TARGET,
                ".2f",
                note=f"on-demand {ours(lived) * 1e6:.2f}; at TargetUtilization=90: "
                f"{ours_provisioned(lived, at_90) * 1e6:.2f}; without a declared lifetime "
                f"{ours_provisioned(first) * 1e6:.2f}",
            ),
        ],
    )


if __name__ == "__main__":
    main()
