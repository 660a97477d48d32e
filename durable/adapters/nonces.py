"""Single-use markers (webhook signatures) in the idempotency table.

A webhook signature may be presented once: ``claim`` is a conditional put that succeeds
only if no live marker exists, so two concurrent replays cannot both pass. A marker
expires with the signature's tolerance window (after that the timestamp check refuses the
signature anyway), and ``release`` removes it when the request it guarded failed, so the
sender's retry of the same request is not mistaken for a replay.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from durable.adapters import item_boundary
from durable.adapters.dynamodb_support import storage_error
from durable.core.stored_bytes import check_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class DynamoNonceStore:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self.client = item_boundary.install(client)  # the stored-bytes rule
        self.table = table_name

    def claim(self, key: str, expiration: int, now: int) -> bool:
        """Store ``key`` until ``expiration`` (epoch seconds); False if it is live at ``now``."""
        try:
            self.client.put_item(
                TableName=self.table,
                Item={
                    "id": {"S": key},
                    "status": {"S": "COMPLETED"},
                    "expiration": {"N": str(expiration)},
                },
                # TTL deletes lazily: an expired marker counts as absent.
                ConditionExpression="attribute_not_exists(id) OR expiration < :now",
                ExpressionAttributeValues={":now": {"N": str(now)}},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        except Exception as e:
            storage_error(e, "recording a webhook signature")
        return True

    def release(self, key: str) -> None:
        try:
            self.client.delete_item(TableName=self.table, Key={"id": {"S": key}})
        except Exception as e:
            storage_error(e, "releasing a webhook signature")


class MemoryNonceStore:
    def __init__(self) -> None:
        self.items: dict[str, int] = {}
        self._lock = threading.Lock()

    def claim(self, key: str, expiration: int, now: int) -> bool:
        # The stored-bytes rule: the marker's key is the only thing it stores.
        check_key("the memory nonce store", "the nonce's key", key)
        with self._lock:
            current = self.items.get(key)
            if current is not None and current >= now:
                return False
            self.items[key] = expiration
            return True

    def release(self, key: str) -> None:
        with self._lock:
            self.items.pop(key, None)
