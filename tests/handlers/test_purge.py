"""The purge on the ledger table's stream: what an expired run leaves, it deletes.

DynamoDB's TTL deletes only the run item (the one item carrying ``purge_at``); the table's
stream reports that delete to the purge function, which deletes the run's steps and
signals. Neither moto nor DynamoDB Local runs TTL, so a test expires a run as TTL would
(the clock past the retention, then the run item deleted) and hands the purge handler the
record the stream would deliver: ``KEYS_ONLY``, with TTL's ``userIdentity``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders

from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.nonces import DynamoNonceStore
from durable.aws import LambdaHandler, purge_handler
from durable.errors import InvalidInput
from durable.runtime import Services
from tests.conftest import aws_client
from tests.handlers import workflows
from tests.handlers.conftest import Stack, later
from tests.handlers.events import (
    LambdaContext,
    api_event,
    eventbridge_event,
    stream_event,
    stream_record,
    ttl_removal,
)

RETENTION_DAYS = 30


def purge(stack: Stack, client: Any = None) -> LambdaHandler:
    """The purge handler over the stack's tables (through ``client`` when given) and clock,
    composed as the other handlers of the stack are."""
    client = client or stack.client
    ledger_table, idem_table = stack.tables
    services = Services(
        ledger=DynamoLedger(client, ledger_table, due_shards=stack.settings.due_shards),
        effects=DynamoEffectStore(client, idem_table),
        invoker=stack.invoker,
        nonces=DynamoNonceStore(client, idem_table),
        timers=stack.timers,
        secrets=stack.secrets.__getitem__,
        clock=stack.clock,
    )
    return purge_handler(workflows.app, stack.settings, services=services)


def deliver(handler: LambdaHandler, *records: dict[str, Any], remaining_ms: int = 60_000) -> Any:
    context = LambdaContext(function_name="durable-purge-test", remaining_ms=remaining_ms)
    return handler(stream_event(*records), context)


def partition(stack: Stack, run_id: str) -> list[str]:
    """The sort keys stored under the run's partition key, in order."""
    items = stack.client.query(
        TableName=stack.settings.ledger_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"RUN#{run_id}"}},
        ConsistentRead=True,
    )["Items"]
    return [item["sk"]["S"] for item in items]


def start_keyed(stack: Stack, key: str) -> str:
    """A keyed start (the run id derives from the key), as the events function makes it."""
    envelope = {"workflow": "signalled", "idempotency_key": key}
    context = LambdaContext(function_name="durable-events-test")
    run_id: str = stack.handlers["events"](eventbridge_event(envelope), context)["run_id"]
    return run_id


def send(stack: Stack, run_id: str, payload: Any) -> None:
    reply = stack.call(api_event("POST", f"/runs/{run_id}/signals/go", payload))
    assert reply.status == 202, reply.body


def finished_run(stack: Stack, key: str = "signup-42") -> str:
    """A keyed run that waited for a signal, got it and succeeded: run, step and signal."""
    run_id = start_keyed(stack, key)
    stack.drain()
    send(stack, run_id, {"n": 1})
    stack.drain()
    run = stack.call(api_event("GET", f"/runs/{run_id}")).body
    assert (run["status"], run["output"]) == ("SUCCEEDED", {"n": 1})
    return run_id


def expire(stack: Stack, run_id: str) -> None:
    """What DynamoDB does once the retention has passed: TTL deletes the run item alone."""
    later(stack, days=RETENTION_DAYS, hours=1)
    stack.client.delete_item(
        TableName=stack.settings.ledger_table,
        Key={"pk": {"S": f"RUN#{run_id}"}, "sk": {"S": "RUN"}},
    )


def test_a_ttl_removal_of_a_run_item_purges_its_steps_and_signals(stack: Stack) -> None:
    # GIVEN a finished run whose item TTL deleted: its step and signal are left behind
    run_id = finished_run(stack)
    other = finished_run(stack, key="signup-43")
    expire(stack, run_id)
    left = partition(stack, run_id)
    assert len(left) == 2 and left[0].startswith("SIGNAL#go#") and left[1] == "STEP#0001"
    # WHEN the stream delivers that delete to the purge
    result = deliver(purge(stack), ttl_removal(run_id))
    # THEN nothing of the run is left, and nothing else was touched
    assert result == {"batchItemFailures": []}
    assert partition(stack, run_id) == []
    assert len(partition(stack, other)) == 3


def test_records_other_than_ttl_removals_of_run_items_are_ignored(stack: Stack) -> None:
    # GIVEN an expired run's leftovers, and records the filter would not pass
    run_id = finished_run(stack)
    expire(stack, run_id)
    before = stack.snapshot()
    pk = f"RUN#{run_id}"
    records = [
        stream_record("REMOVE", pk, "RUN"),  # a delete by a user or the engine, not TTL
        stream_record("INSERT", pk, "RUN"),  # a start
        stream_record("MODIFY", pk, "RUN"),
        stream_record("REMOVE", pk, "STEP#0001", by_ttl=True),  # not a run item
        stream_record("REMOVE", "RUN#", "RUN", by_ttl=True),  # no run id
    ]
    # WHEN they reach the handler anyway
    result = deliver(purge(stack), *records)
    # THEN it writes nothing and fails nothing
    assert result == {"batchItemFailures": []}
    assert stack.snapshot() == before


def test_a_run_recreated_under_the_same_id_keeps_its_own_items(stack: Stack) -> None:
    # GIVEN an expired keyed run, and a new run started with the same key (same run id)
    # that received its own signal before the stream's record of the expiry was handled
    first = finished_run(stack)
    expire(stack, first)
    second = start_keyed(stack, "signup-42")
    assert second == first
    send(stack, second, {"n": 2})
    old_signal, new_signal = [sk for sk in partition(stack, first) if sk.startswith("SIGNAL#")]
    # WHEN the (late) record of the first run's expiry is purged
    result = deliver(purge(stack), ttl_removal(first))
    # THEN the first run's step and signal are gone, the new run's item and signal stay
    assert result == {"batchItemFailures": []}
    assert partition(stack, first) == ["RUN", new_signal]
    # AND the new run does its own work with its own signal
    stack.drain()
    run = stack.call(api_event("GET", f"/runs/{first}")).body
    assert (run["status"], run["output"]) == ("SUCCEEDED", {"n": 2})
    assert old_signal != new_signal


class ThrottledDeletes:
    """Answers ``client``'s DeleteItem requests on one run's partition with DynamoDB's
    throttling error, and lets every other request through.

    Answered at ``before-call``, before the request is built: botocore then raises the
    modelled ``ProvisionedThroughputExceededException`` exactly as for DynamoDB's answer.
    (``tests.support.faults.Throttle`` answers at ``before-send``, where moto in-process
    still executes the request, so a throttled delete would delete there.)"""

    def __init__(self, client: Any, run_id: str) -> None:
        self.pk = f"RUN#{run_id}"
        self.throttled = 0
        self.on = True
        client.meta.events.register_first("before-call.dynamodb.DeleteItem", self._answer)

    def _answer(self, params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]] | None:
        if not self.on or self.pk not in str(params.get("body")):
            return None
        self.throttled += 1
        error = {
            "Code": "ProvisionedThroughputExceededException",
            "Message": "Rate of requests exceeds the allowed throughput (injected)",
        }
        metadata = {"HTTPStatusCode": 400, "RequestId": f"injected-{self.throttled}"}
        http = AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 400, HTTPHeaders(), None)
        return http, {"Error": error, "ResponseMetadata": metadata}


def test_a_storage_failure_reports_that_record_only(stack: Stack) -> None:
    # GIVEN three expired runs, and a purge whose deletes in the second one are throttled
    runs = [finished_run(stack, key=f"signup-{i}") for i in range(3)]
    for run_id in runs:
        expire(stack, run_id)
    client = aws_client("dynamodb", stack.client.meta.endpoint_url)  # the purge's own
    throttle = ThrottledDeletes(client, runs[1])
    records = [ttl_removal(run_id) for run_id in runs]
    # WHEN the batch is purged
    result = deliver(purge(stack, client), *records)
    # THEN only the second record is reported failed (Lambda retries from there), and
    # the other two runs are purged
    failed = records[1]["dynamodb"]["SequenceNumber"]
    assert result == {"batchItemFailures": [{"itemIdentifier": failed}]}
    assert throttle.throttled == 1
    assert [len(partition(stack, run_id)) for run_id in runs] == [0, 2, 0]
    # AND a retry once the throttling is over purges it
    throttle.on = False
    assert deliver(purge(stack, client), records[1]) == {"batchItemFailures": []}
    assert partition(stack, runs[1]) == []


def test_the_purge_logs_one_line_per_run_and_never_an_item(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = finished_run(stack)
    expire(stack, run_id)
    capsys.readouterr()
    deliver(purge(stack), ttl_removal(run_id))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    purged = [line for line in lines if "leftover items" in str(line.get("message"))]
    assert len(purged) == 1
    assert (purged[0]["run_id"], purged[0]["purged"]) == (run_id, 2)
    everything = json.dumps(lines)
    assert '"n": 1' not in everything and "payload" not in everything


def test_an_event_that_is_not_a_stream_batch_is_refused(stack: Stack) -> None:
    with pytest.raises(InvalidInput):
        purge(stack)({"hello": "world"}, LambdaContext(function_name="durable-purge-test"))


def test_a_purge_out_of_time_hands_the_rest_of_the_batch_back(stack: Stack) -> None:
    # GIVEN two expired runs in one batch, delivered with less time left than a purge needs
    first, second = finished_run(stack), finished_run(stack, key="signup-43")
    expire(stack, first)
    expire(stack, second)
    records = [ttl_removal(first), ttl_removal(second)]
    # WHEN the purge runs THEN it purges nothing and hands back the batch from its first
    # record (Lambda retries from there), rather than timing out mid-partition
    result = deliver(purge(stack), *records, remaining_ms=5_000)
    assert result == {
        "batchItemFailures": [{"itemIdentifier": records[0]["dynamodb"]["SequenceNumber"]}]
    }
    assert len(partition(stack, first)) == 2 and len(partition(stack, second)) == 2
    # AND with time enough, the retry purges both
    assert deliver(purge(stack), *records) == {"batchItemFailures": []}
    assert partition(stack, first) == partition(stack, second) == []


def test_an_erasure_deletes_a_finished_run_now_and_refuses_a_live_one(stack: Stack) -> None:
    # GIVEN a finished run (run item, step, signal) and one still waiting
    run_id = finished_run(stack)
    waiting = start_keyed(stack, "signup-44")
    stack.drain()
    assert len(partition(stack, run_id)) == 3
    context = LambdaContext(function_name="durable-purge-test")
    # WHEN an operator invokes the purge function to erase the finished one
    answer = purge(stack)({"erase": run_id}, context)
    # THEN every item of it is gone at once, and nothing else was touched
    assert answer == {"run_id": run_id, "erased": 3}
    assert partition(stack, run_id) == []
    assert stack.call(api_event("GET", f"/runs/{run_id}")).status == 404
    # AND a run still going is refused (cancel it first), with nothing deleted
    before = partition(stack, waiting)
    with pytest.raises(Exception, match="erase a finished run"):
        purge(stack)({"erase": waiting}, context)
    assert partition(stack, waiting) == before
    with pytest.raises(InvalidInput):
        purge(stack)({"erase": "RUN#x"}, context)
