"""Moving a table's runs to the sharded listing (issue 48), once per table after the
upgrade's deploy (docs/operations.md, "Upgrading to the sharded listing").

A run written before the upgrade is keyed in the first listing index (``list_pk`` =
``WF#<workflow>``) and, when it wants a person, in the attention index's one partition
(``ATTENTION``). The upgraded ledger reads the shards only, so such a run is listed once
this has given it the keys a new run gets: its shard of the listing
(``durable.core.leases.listing_partition``), a phase key when it still has a key of the
listing's first layout (``<STATUS>#<updated_at>``), and its attention shard. Removing
``list_pk`` takes it out of the old index.

    python -m durable.adapters.listing_migration --table durable-ledger-prod

Each run is one conditional UpdateItem (about 3 write units: the run item and both
listing indexes): the condition is the status it was read with, so a run a worker moved
meanwhile is left for the next pass, and a purged one is not brought back. Run it until it
says nothing is left; a run already moved is not read again.
"""

from __future__ import annotations

import argparse
from typing import Any

from durable.adapters.dynamodb_items import RUN_SK
from durable.adapters.dynamodb_support import Expr, s
from durable.core.leases import (
    DONE_LISTING,
    OPEN_LISTING,
    attention_partition,
    listing_key,
    listing_partition,
)
from durable.core.model import RunStatus

LEGACY_ATTENTION = "ATTENTION"
_READ = ("pk", "sk", "run_id", "workflow", "status", "created_at", "updated_at", "list_sk")


def moved_keys(item: dict[str, Any]) -> dict[str, str]:
    """The keys of the sharded layout a run item of the first one gets (attribute -> value)."""
    run_id, status = item["run_id"]["S"], item["status"]["S"]
    out = {"listing_pk": listing_partition(item["workflow"]["S"], run_id)}
    key = item.get("list_sk", {}).get("S", "")
    phase = DONE_LISTING if RunStatus(status).terminal else OPEN_LISTING
    if not key.startswith(phase):  # the first layout's, or a phase its status left
        created, updated = item["created_at"]["S"], item["updated_at"]["S"]
        out["list_sk"] = listing_key(run_id, status, created, updated)
    if item.get("attention_pk", {}).get("S") == LEGACY_ATTENTION:
        out["attention_pk"] = attention_partition(run_id)
    return out


def migrate(client: Any, table: str) -> tuple[int, int]:
    """One pass over the table: (runs moved, runs left for another pass)."""
    moved = left = 0
    scan: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": ("sk = :run AND (attribute_exists(list_pk) OR attention_pk = :legacy)"),
        "ExpressionAttributeValues": {":run": s(RUN_SK), ":legacy": s(LEGACY_ATTENTION)},
        "ProjectionExpression": ", ".join(f"#{a}" for a in (*_READ, "attention_pk")),
        "ExpressionAttributeNames": {f"#{a}": a for a in (*_READ, "attention_pk")},
    }
    while True:
        page = client.scan(**scan)
        for item in page.get("Items", []):
            if _move(client, table, item):
                moved += 1
            else:
                left += 1
        if "LastEvaluatedKey" not in page:
            return moved, left
        scan["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _move(client: Any, table: str, item: dict[str, Any]) -> bool:
    e = Expr()
    sets = ", ".join(f"{e.name(a)} = {e.value(s(v), a)}" for a, v in moved_keys(item).items())
    condition = f"attribute_exists(pk) AND {e.name('status')} = {e.value(item['status'], 'st')}"
    try:
        client.update_item(
            TableName=table,
            Key={"pk": item["pk"], "sk": item["sk"]},
            UpdateExpression=f"SET {sets} REMOVE {e.name('list_pk')}",
            ConditionExpression=condition,
            **e.kwargs(),
        )
    except client.exceptions.ConditionalCheckFailedException:
        return False  # moved by a worker meanwhile (or purged): the next pass sees it
    return True


def main(argv: list[str] | None = None) -> None:
    import boto3

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", required=True, help="the ledger table's name")
    parser.add_argument("--passes", type=int, default=5, help="passes at most (5)")
    args = parser.parse_args(argv)
    client = boto3.client("dynamodb")
    for _ in range(args.passes):
        moved, left = migrate(client, args.table)
        print(f"moved {moved} runs to the sharded listing; {left} changed meanwhile")
        if not left:
            print("nothing left: the first listing index can go in the next release")
            return
    raise SystemExit("runs are still changing under the migration: run it again")


if __name__ == "__main__":
    main()
