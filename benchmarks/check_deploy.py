"""``durable check-deploy`` speed: unfinished runs checked per second (issue 18).

One run of 20 steps and a one-day sleep is driven for real on DynamoDB Local; its items are
then copied under new run ids with ``BatchWriteItem`` (fast to set up, the same bytes a real
run writes) up to ``RUNS`` waiting runs. The check lists them page by page, loads each
ledger and replays it against the same code, read-only, as the CLI does.

    python -m benchmarks.check_deploy            (RUNS=10000 by default; RUNS=2000 ...)
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from benchmarks.common import (
    Figure,
    benchmark_step,
    dynamo_client,
    dynamo_main,
    fresh_tables,
    make_engine,
    say,
)
from durable import App, Context
from durable.adapters.dynamodb import DynamoLedger
from durable.engine.deploy_check import ReadOnlyLedger, check_deploy

RUNS = int(os.environ.get("RUNS", "10000"))
STEPS = 20
NAME = f"check-deploy: runs of {STEPS} steps checked per second"


def build_app() -> App:
    app = App()
    step = app.step(benchmark_step)

    @app.workflow(name="twenty")
    def twenty(ctx: Context) -> int:
        total = 0
        for i in range(STEPS):
            total += step(i)
        ctx.sleep(timedelta(days=1))
        return total

    return app


def _copies(items: list[dict[str, Any]], run_id: str, n: int) -> list[dict[str, Any]]:
    new_id = f"{run_id[:-6]}{n:06d}"
    out = []
    for item in items:
        copy = dict(item)
        copy["pk"] = {"S": item["pk"]["S"].replace(run_id, new_id)}
        if "run_id" in item:
            copy["run_id"] = {"S": new_id}
        out.append(copy)
    return out


def measure(endpoint: str) -> list[Figure]:
    client: Any = dynamo_client(endpoint)  # untyped: raw items go to batch_write_item
    table = fresh_tables(client)
    app = build_app()
    engine, _ = make_engine(app, DynamoLedger(client, table))
    run = engine.start("twenty")
    if engine.resume(run.run_id).result != "suspended":
        raise RuntimeError("the model run did not reach its sleep")
    items = client.query(
        TableName=table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"RUN#{run.run_id}"}},
        ConsistentRead=True,
    )["Items"]
    say(f"check-deploy: copying a {len(items)}-item run into {RUNS} waiting runs ...")
    batch: list[dict[str, Any]] = []
    for n in range(1, RUNS):
        for item in _copies(items, run.run_id, n):
            batch.append({"PutRequest": {"Item": item}})
            if len(batch) == 25:
                client.batch_write_item(RequestItems={table: batch})
                batch = []
    if batch:
        client.batch_write_item(RequestItems={table: batch})
    checker, _ = make_engine(app, ReadOnlyLedger(DynamoLedger(client, table)))
    say(f"check-deploy: checking {RUNS} runs ...")
    began = time.perf_counter()
    report = check_deploy(checker, ["twenty"])
    seconds = time.perf_counter() - began
    verdicts = {r.verdict for r in report.runs}
    if len(report.runs) != RUNS or verdicts != {"ok"}:
        raise RuntimeError(f"expected {RUNS} clean runs, got {len(report.runs)}: {verdicts}")
    rate = RUNS / seconds
    note = f"{RUNS} runs in {seconds:.1f} s, one load and one dry replay each"
    return [Figure.info(NAME, f"{rate:.0f}", note=note)]


def main() -> None:
    dynamo_main("check-deploy (DynamoDB Local)", measure, [(NAME, "(report)")])


if __name__ == "__main__":
    main()
