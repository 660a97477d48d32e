"""Listing 10,000 runs: the listing index as the template defines it against projecting
every attribute (what it did before issue 15), in the same run on DynamoDB Local.

Two tables, identical but for the projection of ``list-index`` and ``attention-index``,
get the same 10,000 runs of one workflow (a 1 KB input each, every tenth failed and needing
attention). Then ``durable runs``'s call, ``list_runs(workflow=..., limit=50)``, pages
through the first 20 pages, and the attention listing reads its 100; median of rounds:

    listing now / listing with ALL projected        target: <= 1.0 (no slower)

    python -m benchmarks.listing
"""

from __future__ import annotations

import copy
import time
import uuid
from datetime import timedelta
from typing import Any

from benchmarks.common import Figure, dynamo_client, dynamo_main, median, say
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.schema import LEDGER, create_table_request, table_definitions
from durable.core.clock import FakeClock
from durable.core.model import RunError, RunRecord, RunStatus, format_time

RUNS = 10_000
PAGES = 20
ROUNDS = 5
NAME = "listing 10,000 runs: now / ALL projected"
PLANNED = [(NAME, "<= 1.00")]


def _table(client: Any, projection: str) -> str:
    props = copy.deepcopy(table_definitions()[LEDGER])
    if projection == "ALL":
        for index in props["GlobalSecondaryIndexes"]:
            if index["IndexName"] in ("list-index", "attention-index"):
                index["Projection"] = {"ProjectionType": "ALL"}
    name = f"bench-listing-{projection.lower()}-{uuid.uuid4().hex[:6]}"
    client.create_table(**create_table_request(props, name))
    client.get_waiter("table_exists").wait(TableName=name)
    return name


def _fill(ledger: DynamoLedger) -> None:
    clock = FakeClock()
    payload = '{"notes": "' + "x" * 1000 + '"}'
    for i in range(RUNS):
        stamp = format_time(clock.now())
        failed = i % 10 == 0
        ledger.create_run(
            RunRecord(
                run_id=f"run-{i:05d}",
                workflow="onboarding",
                version=1,
                status=RunStatus.FAILED if failed else RunStatus.SUCCEEDED,
                input=payload,
                input_hash="h",
                created_at=stamp,
                updated_at=stamp,
                output='"done"',
                error=RunError("ValueError", "bad input", False) if failed else None,
                needs_attention=failed,
            )
        )
        clock.advance(timedelta(seconds=1))


def _list(ledger: DynamoLedger) -> float:
    began = time.perf_counter()
    cursor = None
    for _ in range(PAGES):
        page = ledger.list_runs(workflow="onboarding", limit=50, cursor=cursor)
        cursor = page.cursor
    ledger.list_runs(needs_attention=True, limit=100)
    return time.perf_counter() - began


def measure(endpoint: str) -> list[Figure]:
    client = dynamo_client(endpoint)
    ledgers: dict[str, DynamoLedger] = {}
    for projection in ("INCLUDE", "ALL"):
        say(f"listing: {RUNS} runs into a table whose listing indexes project {projection} ...")
        ledgers[projection] = DynamoLedger(client, _table(client, projection))
        _fill(ledgers[projection])
        _list(ledgers[projection])  # warm
    now: list[float] = []
    before: list[float] = []
    ratios: list[float] = []
    for _ in range(ROUNDS):
        now.append(_list(ledgers["INCLUDE"]))
        before.append(_list(ledgers["ALL"]))
        ratios.append(now[-1] / before[-1])
    note = (
        f"{PAGES} pages of 50 + the attention page: {median(now) * 1000:.0f} ms vs "
        f"{median(before) * 1000:.0f} ms; per-round ratios {', '.join(f'{r:.2f}' for r in ratios)}"
    )
    return [Figure.at_most(NAME, median(ratios), 1.0, ".2f", note=note)]


def main() -> None:
    dynamo_main("listing (DynamoDB Local)", measure, PLANNED)


if __name__ == "__main__":
    main()
