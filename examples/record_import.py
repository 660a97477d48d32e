"""A nightly import of thousands of records: one child run per record, 100 at a time.

``nightly-import`` lists the ids to import (one step), then maps ``import-record`` over
them with ``distributed=True``: each record is a run of its own (its own lease, retries
and ledger), at most ``max_concurrency`` run at once across all workers, and the import
tolerates a small share of bad records instead of failing on the first. A crash of any
worker, the parent's included, loses nothing and imports nothing twice: the parent's
window and each record's outcome are in the ledger.

    durable dev --app examples.app:app
    curl -X POST localhost:8787/workflows/nightly-import/runs \\
         -d '{"source": "crm", "count": 10000}'
"""

from __future__ import annotations

import threading

from pydantic import BaseModel, Field

from durable import App, Context, RetryPolicy

app = App()


class ImportRequest(BaseModel):
    source: str
    count: int = Field(ge=0, le=100_000)
    window: int = Field(default=100, ge=1, le=1000)


class ImportSummary(BaseModel):
    imported: int
    failed: list[int]
    skipped: int


class FakeWarehouse:
    """The source system and the warehouse: records ``id % 997 == 996`` are malformed
    (a permanent failure), and every upsert is keyed, so a repeat changes nothing."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: dict[int, str] = {}

    def fetch(self, source: str, record_id: int) -> dict[str, str]:
        if record_id % 997 == 996:
            raise ValueError(f"record {record_id} from {source} is malformed")
        return {"id": str(record_id), "sku": f"{source}-{record_id:06d}"}

    def upsert(self, record: dict[str, str]) -> str:
        with self.lock:
            self.rows[int(record["id"])] = record["sku"]
        return record["sku"]


warehouse = FakeWarehouse()


@app.step(retry=RetryPolicy(max_attempts=1))
def list_record_ids(source: str, count: int) -> list[int]:
    return list(range(count))


@app.step(retry=RetryPolicy(max_attempts=2, never_retry=(ValueError,)))
def fetch_record(source: str, record_id: int) -> dict[str, str]:
    return warehouse.fetch(source, record_id)


@app.step
def upsert_record(record: dict[str, str]) -> str:
    return warehouse.upsert(record)


class RecordJob(BaseModel):
    source: str
    record_id: int


@app.workflow(name="import-record")
def import_record(ctx: Context, job: RecordJob) -> str:
    """One record: fetch it, write it. A run of its own, started by the import."""
    record = fetch_record(job.source, job.record_id)
    sku: str = upsert_record(record)
    return sku


@app.workflow(name="nightly-import")
def nightly_import(ctx: Context, request: ImportRequest) -> ImportSummary:
    ids = list_record_ids(request.source, request.count)
    result = ctx.map(
        import_record,
        [RecordJob(source=request.source, record_id=i) for i in ids],
        name="records",
        distributed=True,
        max_concurrency=request.window,
        completion={"tolerated_failures": "1%"},
    )
    failed = [ids[item.index] for item in result.failed]
    return ImportSummary(
        imported=len(result.succeeded), failed=failed, skipped=len(result.canceled)
    )
