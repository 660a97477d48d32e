"""DynamoDB ledger, part two: external events (callbacks, signals) and the due index.

Every external event is one ``TransactWriteItems``: its own record plus the run item's
``inbox`` increment and ``due_at = now``, so an event that lands while the owner runs
is never lost (the owner's suspension requires the inbox unchanged).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durable.adapters.dynamodb_items import (
    RUN_SK,
    STEP_PREFIX,
    item_to_run,
    item_to_signal,
    item_to_step,
    run_pk,
    signal_sk,
    signal_to_item,
    step_to_item,
)
from durable.adapters.dynamodb_support import (
    decode_cursor,
    encode_cursor,
    n,
    s,
    storage_error,
)
from durable.ids import due_shard
from durable.limits import check_item_size
from durable.model import TERMINAL_RUN_STATUSES, SignalRecord, StepRecord, StepStatus
from durable.ports import Page, RunFinished, SignalExists, WaitNotPending

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_TERMINAL = {f":t{i}": s(v) for i, v in enumerate(TERMINAL_RUN_STATUSES)}
_NOT_TERMINAL = f"attribute_exists(pk) AND NOT (#status IN ({', '.join(_TERMINAL)}))"


class EventsMixin:
    client: DynamoDBClient
    table: str
    shards: int

    def _bump_inbox(self, run_id: str, now: str) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": s(run_pk(run_id)), "sk": s(RUN_SK)},
                "ConditionExpression": _NOT_TERMINAL,
                "UpdateExpression": "SET inbox = if_not_exists(inbox, :zero) + :one, "
                "due_at = :now, due_shard = :shard",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    **_TERMINAL,
                    ":zero": n(0),
                    ":one": n(1),
                    ":now": s(now),
                    ":shard": s(due_shard(run_id, self.shards)),
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _transact(self, items: list[dict[str, Any]], what: str) -> list[dict[str, Any]] | None:
        """Run a transaction; return the cancellation reasons when a condition failed."""
        try:
            self.client.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
        except self.client.exceptions.TransactionCanceledException as err:
            reasons: list[dict[str, Any]] = getattr(err, "response", {}).get(
                "CancellationReasons", []
            )
            if any(r.get("Code") == "ConditionalCheckFailed" for r in reasons):
                return reasons
            storage_error(err, what)
        except Exception as err:
            storage_error(err, what)
        return None

    def get_step(self, run_id: str, position: str) -> StepRecord | None:
        try:
            response = self.client.get_item(
                TableName=self.table,
                Key={"pk": s(run_pk(run_id)), "sk": s(STEP_PREFIX + position)},
                ConsistentRead=True,
            )
        except Exception as err:
            storage_error(err, "reading the step")
        item = response.get("Item")
        return item_to_step(item) if item else None

    def complete_waiting(self, step: StepRecord, *, token_hash: str | None, now: str) -> None:
        check_item_size(step, f"the completion of step {step.name!r} at {step.position}")
        condition = "#status = :waiting AND (attribute_not_exists(expires_at) OR expires_at > :now)"
        values: dict[str, Any] = {":waiting": s(StepStatus.WAITING.value), ":now": s(now)}
        if token_hash is not None:
            condition += " AND token_hash = :hash"
            values[":hash"] = s(token_hash)
        reasons = self._transact(
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": step_to_item(step),
                        "ConditionExpression": condition,
                        "ExpressionAttributeNames": {"#status": "status"},
                        "ExpressionAttributeValues": values,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                self._bump_inbox(step.run_id, now),
            ],
            f"completing step {step.position}",
        )
        if reasons is None:
            return
        if reasons[0].get("Code") == "ConditionalCheckFailed":
            old = reasons[0].get("Item")
            raise WaitNotPending(item_to_step(old) if old else None)
        old_run = reasons[1].get("Item")
        raise RunFinished(item_to_run(old_run) if old_run else None)

    def add_signal(self, signal: SignalRecord, *, now: str) -> None:
        check_item_size(signal, f"signal {signal.name!r}")
        put: dict[str, Any] = {
            "TableName": self.table,
            "Item": signal_to_item(signal),
            "ConditionExpression": "attribute_not_exists(sk)",
        }
        if signal.key_hash is not None:
            # A keyed signal's sort key is derived from its key: a failed condition means
            # an earlier send with that key, returned in the same call (no extra read).
            put["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        reasons = self._transact(
            [{"Put": put}, self._bump_inbox(signal.run_id, now)],
            f"storing signal {signal.name}",
        )
        if reasons is None:
            return
        if signal.key_hash is not None:
            if reasons[0].get("Code") == "ConditionalCheckFailed":
                old = reasons[0].get("Item")
            else:
                # Only the run's condition (finished) was reported. DynamoDB reports every
                # failed condition of a transaction, but the port promises that a repeat
                # is a repeat even then: look rather than trust every backend to.
                old = self._get_signal_item(signal)
            if old is not None:
                raise SignalExists(item_to_signal(old))
        old_run = reasons[1].get("Item") if len(reasons) > 1 else None
        raise RunFinished(item_to_run(old_run) if old_run else None)

    def _get_signal_item(self, signal: SignalRecord) -> dict[str, Any] | None:
        try:
            response = self.client.get_item(
                TableName=self.table,
                Key={"pk": s(run_pk(signal.run_id)), "sk": s(signal_sk(signal))},
                ConsistentRead=True,
            )
        except Exception as err:
            storage_error(err, "reading the signal")
        item: dict[str, Any] | None = response.get("Item")
        return item

    def consume_signal(self, step: StepRecord, signal: SignalRecord) -> StepRecord:
        finals = {f":f{i}": s(v.value) for i, v in enumerate(StepStatus) if v.final}
        reasons = self._transact(
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": step_to_item(step),
                        "ConditionExpression": "attribute_not_exists(sk) OR NOT (#status IN "
                        f"({', '.join(finals)}))",
                        "ExpressionAttributeNames": {"#status": "status"},
                        "ExpressionAttributeValues": finals,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": {
                            "pk": s(run_pk(signal.run_id)),
                            "sk": s(signal_sk(signal)),
                        },
                        "UpdateExpression": "SET consumed_by = :pos",
                        "ConditionExpression": "attribute_exists(sk) AND "
                        "(attribute_not_exists(consumed_by) OR consumed_by = :pos)",
                        "ExpressionAttributeValues": {":pos": s(step.position)},
                    }
                },
            ],
            f"consuming signal {signal.name}",
        )
        if reasons is None:
            return step
        old = reasons[0].get("Item")
        if reasons[0].get("Code") == "ConditionalCheckFailed" and old:
            return item_to_step(old)
        # The signal was consumed by another position: a zombie's view; re-read the step.
        stored = self.get_step(step.run_id, step.position)
        if stored is None:
            raise WaitNotPending(None)
        return stored

    def due_runs(
        self, shard: int, *, before: str, limit: int, cursor: str | None = None
    ) -> Page[tuple[str, str]]:
        request: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "due-index",
            "KeyConditionExpression": "due_shard = :shard AND due_at <= :before",
            "ExpressionAttributeValues": {":shard": s(str(shard)), ":before": s(before)},
            "Limit": limit,
        }
        start = decode_cursor(cursor)
        if start:
            request["ExclusiveStartKey"] = start
        try:
            response = self.client.query(**request)
        except Exception as err:
            storage_error(err, "reading the due index")
        items = [
            (i["pk"]["S"].removeprefix("RUN#"), i["due_at"]["S"]) for i in response.get("Items", [])
        ]
        return Page(items, encode_cursor(response.get("LastEvaluatedKey")))

    def claim_trigger(self, run_id: str, due_at: str, new_due_at: str) -> bool:
        try:
            self.client.update_item(
                TableName=self.table,
                Key={"pk": s(run_pk(run_id)), "sk": s(RUN_SK)},
                ConditionExpression=f"due_at = :due AND {_NOT_TERMINAL}",
                UpdateExpression="SET due_at = :new",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={**_TERMINAL, ":due": s(due_at), ":new": s(new_due_at)},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        except Exception as err:
            storage_error(err, "claiming a due trigger")
        return True
