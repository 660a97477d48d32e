"""Listing 10,000 runs from the sharded, keys-only listing index (issue 48) against the
same listing from one partition, in the same run on DynamoDB Local.

Two tables get the same 10,000 runs of one workflow (a 1 KB input each, every tenth failed
and needing attention): one keyed as the ledger keys it (``LISTING_SHARDS`` shards of the
workflow's listing and of the attention index, a page merged from them), one with a
single shard of each (what the listing was keyed by before, ``WF#<workflow>`` and
``ATTENTION``). Both read a page's run items for what it shows. Then ``durable runs``'s
call, ``list_runs(workflow=..., limit=50)``, pages through the first 20 pages, the open
runs and a status are listed, and the attention listing reads its 100; median of rounds,
and the read units a page consumes:

    sharded / one partition (time)        reported: what merging the shards costs a reader
    read units per page of 50             reported

    python -m benchmarks.listing
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from benchmarks.common import Figure, dynamo_client, dynamo_main, median, say
from benchmarks.write_units import UnitCounter
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.schema import LEDGER, create_table_request, table_definitions
from durable.core import leases
from durable.core.clock import FakeClock
from durable.core.model import RunError, RunRecord, RunStatus, format_time

RUNS = 10_000
PAGES = 20
ROUNDS = 5
NAME = "listing 10,000 runs: sharded / one partition"
UNITS = "read units per page of 50 (sharded; one partition)"
PLANNED = [(NAME, "(report)"), (UNITS, "(report)")]


@contextmanager
def shards(count: int) -> Iterator[None]:
    """The listing's and the attention index's shard counts, for the baseline table's
    writes and reads alike."""
    saved = leases.LISTING_SHARDS, leases.ATTENTION_SHARDS
    leases.LISTING_SHARDS = leases.ATTENTION_SHARDS = count
    try:
        yield
    finally:
        leases.LISTING_SHARDS, leases.ATTENTION_SHARDS = saved


def _table(client: Any) -> str:
    props = copy.deepcopy(table_definitions()[LEDGER])
    name = f"bench-listing-{uuid.uuid4().hex[:6]}"
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


def _list(ledger: DynamoLedger) -> dict[str, float]:
    """Seconds of each part: the pages, a status, the open runs, the attention page."""
    parts: dict[str, float] = {}
    began = time.perf_counter()
    cursor = None
    for _ in range(PAGES):
        page = ledger.list_runs(workflow="onboarding", limit=50, cursor=cursor)
        cursor = page.cursor
    parts["pages"] = time.perf_counter() - began
    began = time.perf_counter()
    ledger.list_runs(workflow="onboarding", status="FAILED", limit=50)
    parts["FAILED"] = time.perf_counter() - began
    began = time.perf_counter()
    ledger.open_runs("onboarding")
    parts["open"] = time.perf_counter() - began
    began = time.perf_counter()
    ledger.list_runs(needs_attention=True, limit=100)
    parts["attention"] = time.perf_counter() - began
    return parts


def _page_units(endpoint: str, table: str) -> float:
    """The read units of one page of 50, on a client of its own (the counter asks every
    request it sees for its consumed capacity)."""
    client = dynamo_client(endpoint)
    counter = UnitCounter(client)
    DynamoLedger(client, table).list_runs(workflow="onboarding", limit=50)
    return sum(counter.reads.values())


def measure(endpoint: str) -> list[Figure]:
    ledgers: dict[int, DynamoLedger] = {}
    units: dict[int, float] = {}
    for count in (leases.LISTING_SHARDS, 1):
        client = dynamo_client(endpoint)
        say(f"listing: {RUNS} runs into a table keyed by {count} shard(s) ...")
        with shards(count):
            ledgers[count] = DynamoLedger(client, _table(client))
            _fill(ledgers[count])
            _list(ledgers[count])  # warm
            units[count] = _page_units(endpoint, ledgers[count].table)
    sharded = leases.LISTING_SHARDS
    now: list[dict[str, float]] = []
    before: list[dict[str, float]] = []
    ratios: list[float] = []
    for _ in range(ROUNDS):
        with shards(sharded):
            now.append(_list(ledgers[sharded]))
        with shards(1):
            before.append(_list(ledgers[1]))
        ratios.append(sum(now[-1].values()) / sum(before[-1].values()))

    def parts(rounds: list[dict[str, float]]) -> str:
        return ", ".join(f"{k} {median([r[k] for r in rounds]) * 1000:.0f}" for k in rounds[0])

    note = (
        f"{PAGES} pages of 50, a status (FAILED), the open runs and the attention page, ms: "
        f"{sharded} shards {parts(now)}; one {parts(before)}; per-round ratios "
        f"{', '.join(f'{r:.2f}' for r in ratios)}"
    )
    return [
        Figure.info(NAME, f"{median(ratios):.2f}", note=note),
        Figure.info(UNITS, f"{units[sharded]:g}; {units[1]:g}"),
    ]


def main() -> None:
    dynamo_main("listing (DynamoDB Local)", measure, PLANNED)


if __name__ == "__main__":
    main()
