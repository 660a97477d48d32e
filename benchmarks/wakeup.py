"""Figure 6: storage requests of one wake-up of a long run (claim + load).

``waves(100)`` is a run of 1000 steps with a wake every 10: each group of 9 trivial steps
is followed by a step whose first attempt fails with a 60 s backoff, so the run suspends
(WAITING, durable) 100 times. The engine drives its first 100 invocations on the memory
ledger with a fake clock (replaying a growing history on DynamoDB Local would take
minutes on a small machine); the history it wrote (1000 step records and the WAITING
run item) is then copied into a DynamoDB Local table with the adapter's own item
encoding, and the last wake-up runs on ``DynamoLedger``. Its claim and load are counted
through botocore hooks:

    requests = 1 conditional write (the claim) + the Query pages of the load
    target:    1 write + 1 page per started MB of history (a Query page holds 1 MB)

    python -m benchmarks.wakeup
"""

from __future__ import annotations

import math
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from benchmarks.common import (
    Figure,
    build_app,
    dynamo_client,
    dynamo_engine,
    dynamo_main,
    fresh_tables,
    make_engine,
    say,
)
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.dynamodb_items import step_to_item
from durable.adapters.memory import MemoryLedger
from durable.core.clock import FakeClock
from durable.core.model import RunHistory

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

GROUPS = 100  # x 10 positions = 1000 steps, 100 suspensions
MB = 1024 * 1024
NAME = "wake-up of a 1000-step run (claim+load)"
WRITES = ("create_run", "claim", "update_run", "write_step", "write_step_fenced")
PLANNED = [(NAME, "1 write + 1 page/MB")]


def build_history(clock: FakeClock) -> tuple[RunHistory, int, dict[str, int]]:
    """Drive ``waves`` on the memory ledger up to its last wait.

    Returns the history, the invocations so far and the ledger calls they made.
    """
    memory = MemoryLedger()
    engine, timed = make_engine(build_app(), memory, clock=clock)
    run = engine.start("waves", GROUPS)
    invocations = 0
    while True:
        outcome = engine.resume(run.run_id)
        invocations += 1
        if outcome.result != "suspended":
            raise RuntimeError(f"the waves run ended {outcome.result} before its last wait")
        history = memory.load(run.run_id)
        assert history is not None
        if len(history.steps) >= GROUPS * 10:
            return history, invocations, dict(timed.stats.calls)
        clock.advance(timedelta(seconds=61))


def copy_history(client: DynamoDBClient, table: str, history: RunHistory) -> None:
    """The run item through the ledger port, the steps in batches of the adapter's items."""
    DynamoLedger(client, table).create_run(history.run)
    items = [step_to_item(history.steps[p]) for p in sorted(history.steps)]
    for i in range(0, len(items), 25):
        pending: dict[str, Any] = {
            table: [{"PutRequest": {"Item": it}} for it in items[i : i + 25]]
        }
        while pending:
            response = client.batch_write_item(RequestItems=pending)
            pending = dict(response.get("UnprocessedItems") or {})


def measure(endpoint: str) -> list[Figure]:
    say(f"wake-up: the last wake of a {GROUPS * 10}-step run (a wake every 10) ...")
    clock = FakeClock()
    history, invocations, calls = build_history(clock)
    client = dynamo_client(endpoint)
    table = fresh_tables(client)
    copy_history(client, table, history)
    clock.advance(timedelta(seconds=61))
    engine, timed, counter = dynamo_engine(build_app(), client, table, clock=clock)
    counter.reset()
    t0 = time.perf_counter()
    outcome = engine.resume(history.run.run_id)
    elapsed = time.perf_counter() - t0
    if outcome.result != "succeeded":
        raise RuntimeError(f"the last wake-up ended {outcome.result}, not succeeded")
    claim = counter.in_phase("claim")
    load = counter.in_phase("load")
    pages = load.get("Query", 0)
    history_bytes = sum(b for _, b in counter.query_pages)
    items = sum(n for n, _ in counter.query_pages)
    allowed = max(1, math.ceil(history_bytes / MB))
    claim_writes = sum(claim.values())
    met = claim_writes == 1 and pages <= allowed and not load.keys() - {"Query"}
    steps = GROUPS * 10
    writes = sum(n for m, n in calls.items() if m in WRITES)
    seconds = timed.stats.method_seconds
    return [
        Figure(
            NAME,
            f"{claim_writes} write + {pages} page",
            f"1 write + {allowed} page",
            "met" if met else "MISSED",
            note=(
                f"the load read {items} items, {history_bytes / 1024:.0f} KB of history; that "
                f"wake-up took {elapsed * 1e3:.0f} ms on DynamoDB Local (claim "
                f"{seconds.get('claim', 0.0) * 1e3:.0f} ms, load "
                f"{seconds.get('load', 0.0) * 1e3:.0f} ms, then replay of {steps - 1} steps, "
                f"1 step write and the final update). The {invocations} invocations before it "
                f"made {writes} ledger writes and {calls.get('load', 0)} loads "
                f"({writes / steps:.2f} writes per step)"
            ),
        ),
    ]


def main() -> None:
    dynamo_main("wake-up of a long run (DynamoDB Local)", measure, PLANNED)


if __name__ == "__main__":
    main()
