"""A reply lost after DynamoDB applied a transaction (a connection closed on the way back,
a read timeout: the client's budget is seconds, issue 45) is sent again by botocore's
retry. Every ``TransactWriteItems`` carries a ``ClientRequestToken`` (botocore fills it once
per call: the service model marks it an idempotency token, so its retries repeat it), so
the repeat finds the first one's effect as its own and succeeds, instead of failing its
own conditions (a signal answered "lost races" although stored, a continuation ended as a
lost lease). These tests hold that: a client built without it would fail them.

On DynamoDB Local over HTTP: moto in-process neither honours the token nor lets a request
through a ``before-send`` handler (``tests.support.faults``).
"""

from __future__ import annotations

from typing import Any

import pytest

from durable.adapters.dynamodb import DynamoLedger
from durable.core.model import RunStatus, SignalRecord
from durable.core.ports import RunGuard
from tests.conftest import MakeTables, aws_client
from tests.support.faults import LostReply
from tests.support.records import make_run, t

pytestmark = pytest.mark.integration


@pytest.fixture
def ledger(dynamodb_local_endpoint: str, make_tables: MakeTables) -> DynamoLedger:
    client = aws_client("dynamodb", dynamodb_local_endpoint, retries={"mode": "standard"})
    table, _ = make_tables(client)
    return DynamoLedger(client, table)


def test_a_signal_whose_reply_was_lost_is_stored_once_and_answered_ok(
    ledger: DynamoLedger,
) -> None:
    ledger.create_run(make_run(status=RunStatus.WAITING))
    lost = LostReply(ledger.client, "TransactWriteItems")
    ledger.add_signal(SignalRecord("RUN1", "go", "01A", '"payload"', t(13)), now=t(13))
    assert lost.dropped == 1
    loaded = ledger.load("RUN1")
    assert loaded is not None
    assert [s.signal_id for s in loaded.signals] == ["01A"]
    assert loaded.run.inbox == 1


def test_a_continuation_whose_reply_was_lost_is_not_a_lost_lease(ledger: DynamoLedger) -> None:
    ledger.create_run(make_run(status=RunStatus.RUNNING, fence=3, lease_owner="w1"))
    successor = make_run("RUN2", continued_from="RUN1")
    lost = LostReply(ledger.client, "TransactWriteItems")
    guard = RunGuard(fence=3, owner="w1", statuses=(RunStatus.RUNNING,))
    changes: dict[str, Any] = {"status": RunStatus.SUCCEEDED.value, "updated_at": t(14)}
    ledger.continue_run("RUN1", guard, changes, successor)  # no ConditionFailed
    assert lost.dropped == 1
    first, second = ledger.get_run("RUN1"), ledger.get_run("RUN2")
    assert first is not None and first.status == RunStatus.SUCCEEDED
    assert second is not None and second.continued_from == "RUN1"
