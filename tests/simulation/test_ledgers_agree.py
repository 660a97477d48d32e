"""The memory and DynamoDB ledgers agree: a sample of schedules replayed on DynamoDB Local
take the same decisions and end with the same ledger, item by item (integration tier).

``--sim-dynamo-seeds N`` (env ``SIM_DYNAMO_SEEDS``) sets the sample; ``--seed N`` replays
that one seed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from durable.adapters.dynamodb import DynamoLedger
from durable.core.ports import Page
from tests.conftest import MakeTables
from tests.simulation.compare import first_divergence, ledger_differences
from tests.simulation.conftest import SimOptions
from tests.simulation.explore import run_schedule

pytestmark = pytest.mark.integration


class DynamoSimLedger(DynamoLedger):
    """The DynamoDB ledger, plus what the simulation asks of the table itself."""

    def due_runs(
        self, shard: int, *, before: str, limit: int, cursor: str | None = None
    ) -> Page[tuple[str, str]]:
        # The index orders entries by due time only; ties come back in an order the
        # contract leaves open. The memory ledger breaks them by run id: so do we, so
        # the two replays take the same decisions.
        page = super().due_runs(shard, before=before, limit=limit, cursor=cursor)
        return Page(sorted(page.items, key=lambda item: (item[1], item[0])), page.cursor)

    def expire(self, now: datetime) -> list[str]:
        """DynamoDB's TTL, which DynamoDB Local does not run: delete every item whose
        ``purge_at`` passed (run items, and the items of a declared lifetime); returns
        the run ids whose run items went, as the stream reports them."""
        gone: list[str] = []
        request: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "purge_at <= :now",
            "ExpressionAttributeValues": {":now": {"N": str(int(now.timestamp()))}},
            "ProjectionExpression": "pk, sk",
        }
        while True:
            page = self.client.scan(**request)
            for item in page.get("Items", []):
                self.client.delete_item(TableName=self.table, Key=item)
                if item["sk"]["S"] == "RUN":
                    gone.append(item["pk"]["S"].removeprefix("RUN#"))
            if "LastEvaluatedKey" not in page:
                return gone
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def sample(options: SimOptions) -> list[int]:
    if options.seed is not None:
        return [options.seed]
    return [options.seed_start + 37 * i for i in range(options.dynamo_seeds)]


def test_memory_and_dynamodb_ledgers_agree(
    ddb_local_client: Any, make_tables: MakeTables, sim_options: SimOptions
) -> None:
    """GIVEN a sample of seeded schedules
    WHEN each runs on the memory ledger and again on DynamoDB Local
    THEN both take the same decisions, fire the same invariants and end with the same
    ledger, item by item"""
    problems: list[str] = []
    for seed in sample(sim_options):
        memory = run_schedule(seed, skip=sim_options.skip)
        table, _ = make_tables(ddb_local_client)
        ledger = DynamoSimLedger(ddb_local_client, table)
        dynamo = run_schedule(seed, ledger=ledger, skip=sim_options.skip)
        run_ids = sorted(set(memory.run_ids) | set(dynamo.run_ids))
        diverged = first_divergence(memory.trace, dynamo.trace)
        differences = ledger_differences(memory.ledger, dynamo.ledger, run_ids)
        if memory.names != dynamo.names:
            differences.append(f"invariants fired: {memory.names} != {dynamo.names}")
        if diverged or differences:
            lines = [f"seed {seed}: the traces diverge at {diverged}" if diverged else ""]
            lines += differences[:20]
            problems.append("\n  ".join(line for line in lines if line))
    assert not problems, "memory and DynamoDB disagree:\n" + "\n".join(problems)
