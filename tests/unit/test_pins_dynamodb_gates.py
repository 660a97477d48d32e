"""Pins for the DynamoDB gate store (``durable.adapters.dynamodb_gates``): a gate is read
strongly consistent (a waiter deciding from a stale gate could overtake or overfill), and
a failed request is a ``StorageError`` naming what failed, retryable when DynamoDB says so
(a throttle). The contract suite covers the rest on real servers."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from durable.adapters.dynamodb import DynamoLedger
from durable.core.flow import GateState
from durable.errors import StorageError

pytestmark = pytest.mark.unit


class _Exceptions:
    class ConditionalCheckFailedException(Exception):
        pass


class FakeClient:
    """Records each request; answers from ``reply`` or raises ``error``."""

    exceptions = _Exceptions

    def __init__(self, error: Exception | None = None, reply: dict[str, Any] | None = None) -> None:
        self.error, self.reply = error, reply or {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _call(self, name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((name, kwargs))
        if self.error is not None:
            raise self.error
        return self.reply

    def get_item(self, **kwargs: Any) -> dict[str, Any]:
        return self._call("get_item", kwargs)

    def put_item(self, **kwargs: Any) -> dict[str, Any]:
        return self._call("put_item", kwargs)


def _throttled() -> ClientError:
    return ClientError(
        {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "GetItem"
    )


def test_a_gate_is_read_strongly_consistent() -> None:
    client = FakeClient()
    ledger = DynamoLedger(client, "ledger")  # type: ignore[arg-type]
    assert ledger.read_gate("C#wf#") == GateState()
    ((name, kwargs),) = client.calls
    assert name == "get_item" and kwargs["ConsistentRead"] is True
    assert kwargs["Key"] == {"pk": {"S": "GATE#C#wf#"}, "sk": {"S": "GATE"}}


def test_a_failed_gate_request_is_a_storage_error_that_says_which() -> None:
    ledger = DynamoLedger(FakeClient(error=_throttled()), "ledger")  # type: ignore[arg-type]
    with pytest.raises(StorageError, match=r"^reading the flow-control gate failed") as read:
        ledger.read_gate("C#wf#")
    assert read.value.retryable is True
    with pytest.raises(StorageError, match=r"^writing the flow-control gate failed") as write:
        ledger.write_gate("C#wf#", GateState())
    assert write.value.retryable is True
