"""Side-effect records of ``StepContext.effect`` in the idempotency table.

The table has AWS Lambda Powertools' idempotency schema (``id``, ``expiration``,
``status``, ``data``), so Powertools' own records (webhook deliveries, event-source
starts) and these live side by side. An expired record counts as absent, as in
Powertools, because DynamoDB's TTL deletes lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durable.adapters import item_boundary
from durable.adapters.dynamodb_support import storage_error
from durable.core.ports import EffectRecord

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def _record(item: dict[str, Any]) -> EffectRecord:
    return EffectRecord(
        key=item["id"]["S"],
        status=item.get("status", {}).get("S", "INPROGRESS"),
        reference=item.get("data", {}).get("S"),
        expiration=int(item.get("expiration", {}).get("N", "0")),
    )


class DynamoEffectStore:
    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        # Every record crosses the stored-bytes rule: a reference is redacted, a key
        # holding a token refused (``item_boundary``).
        self.client = item_boundary.install(client)
        self.table = table_name

    def begin(self, key: str, expiration: int, *, now: int) -> EffectRecord | None:
        try:
            self.client.put_item(
                TableName=self.table,
                Item={
                    "id": {"S": key},
                    "status": {"S": "INPROGRESS"},
                    "expiration": {"N": str(expiration)},
                },
                ConditionExpression="attribute_not_exists(id) OR expiration < :now",
                ExpressionAttributeValues={":now": {"N": str(now)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as e:
            old = getattr(e, "response", {}).get("Item")
            if old:
                return _record(old)
            return self._get(key)
        except Exception as e:
            storage_error(e, f"persisting side-effect key {key}")
        return None

    def _get(self, key: str) -> EffectRecord | None:
        try:
            response = self.client.get_item(
                TableName=self.table, Key={"id": {"S": key}}, ConsistentRead=True
            )
        except Exception as e:
            storage_error(e, f"reading side-effect key {key}")
        item = response.get("Item")
        return _record(item) if item else None

    def complete(self, key: str, reference: str, expiration: int) -> None:
        try:
            self.client.put_item(
                TableName=self.table,
                Item={
                    "id": {"S": key},
                    "status": {"S": "COMPLETED"},
                    "data": {"S": reference},
                    "expiration": {"N": str(expiration)},
                },
            )
        except Exception as e:
            storage_error(e, f"storing the reference of side-effect key {key}")
