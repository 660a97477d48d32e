"""The ledger table as every DynamoDB writer sees it: one-item reads, transactions, and
the update expression that keeps the sparse index keys exact. The run, step and event
writers (``dynamodb``, ``dynamodb_steps``, ``dynamodb_events``) build on it."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from durable.adapters.dynamodb_items import (
    ATTENTION_PK,
    RUN_SK,
    STEP_PREFIX,
    item_to_run,
    item_to_step,
    list_sk,
    run_attribute_value,
    run_pk,
)
from durable.adapters.dynamodb_support import Expr, guard_condition, s, storage_error
from durable.core.ids import due_shard
from durable.core.leases import normalize_changes, wants_a_person
from durable.core.model import RunRecord, StepRecord
from durable.core.ports import RunGuard
from durable.errors import StorageError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


# A transaction that meets another writer on one of its items is tried again this many
# times, after a pause that doubles each time (a random share of it, against lockstep).
CONFLICT_TRIES = 8
CONFLICT_PAUSE = 0.02  # seconds
# BatchGetItem takes 100 keys a request; unprocessed keys are asked again this often.
_BATCH_GET = 100
_BATCH_GET_ROUNDS = 8

# Placeholder hints of the derived keys, as they were named before (cosmetic).
_HINTS = {"due_shard": "sh", "attention_pk": "att", "list_sk": "lsk"}


class TableBase:
    client: DynamoDBClient
    table: str
    shards: int

    def get_run(self, run_id: str) -> RunRecord | None:
        try:
            response = self.client.get_item(
                TableName=self.table,
                Key={"pk": s(run_pk(run_id)), "sk": s(RUN_SK)},
                ConsistentRead=True,
            )
        except Exception as e:
            storage_error(e, "reading the run")
        item = response.get("Item")
        return item_to_run(item) if item else None

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

    def get_steps(self, run_id: str, positions: list[str]) -> dict[str, StepRecord]:
        """BatchGetItem, strongly consistent, 100 keys a request; keys DynamoDB leaves
        unprocessed (throttling) are asked again."""
        out: dict[str, StepRecord] = {}
        pk = s(run_pk(run_id))
        for low in range(0, len(positions), _BATCH_GET):
            chunk = positions[low : low + _BATCH_GET]
            keys: list[Any] = [{"pk": pk, "sk": s(STEP_PREFIX + p)} for p in chunk]
            for _ in range(_BATCH_GET_ROUNDS):
                try:
                    response: Any = self.client.batch_get_item(
                        RequestItems={self.table: {"Keys": keys, "ConsistentRead": True}}
                    )
                except Exception as err:
                    storage_error(err, "reading steps")
                for item in response.get("Responses", {}).get(self.table, []):
                    step = item_to_step(item)
                    out[step.position] = step
                unprocessed = response.get("UnprocessedKeys", {}).get(self.table, {})
                keys = list(unprocessed.get("Keys", []))
                if not keys:
                    break
                time.sleep(CONFLICT_PAUSE)
            else:
                raise StorageError(
                    "reading steps: keys left unprocessed; try again", retryable=True
                )
        return out

    def _transact(self, items: list[dict[str, Any]], what: str) -> list[dict[str, Any]] | None:
        """Run a transaction; return the cancellation reasons when a condition failed.

        One that met another writer on one of its items (TransactionConflict: a parent's
        run item while its children report, say) is tried again after a short random
        pause, a few times; then it is a retryable storage error (the invocation is
        retried), never a failure of the run."""
        for attempt in range(CONFLICT_TRIES):
            try:
                self.client.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
            except self.client.exceptions.TransactionCanceledException as err:
                reasons: list[dict[str, Any]] = getattr(err, "response", {}).get(
                    "CancellationReasons", []
                )
                if any(r.get("Code") == "ConditionalCheckFailed" for r in reasons):
                    return reasons
                if any(r.get("Code") == "TransactionConflict" for r in reasons):
                    if attempt < CONFLICT_TRIES - 1:
                        time.sleep(CONFLICT_PAUSE * 2**attempt * (0.5 + random.random()))
                        continue
                    raise StorageError(
                        f"{what} failed: it met other writers {CONFLICT_TRIES} times "
                        "(TransactionConflict); try again",
                        retryable=True,
                    ) from err
                storage_error(err, what)
            except Exception as err:
                storage_error(err, what)
            return None
        raise AssertionError("unreachable: the last try returns or raises")  # pragma: no cover

    def _run_update(self, run_id: str, condition: str, update: str, e: Expr) -> dict[str, Any]:
        """A transaction's conditional update of the run item (the stored item comes back
        when the condition fails)."""
        return {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": s(run_pk(run_id)), "sk": s(RUN_SK)},
                "ConditionExpression": f"attribute_exists(pk) AND {condition}",
                "UpdateExpression": update,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                **e.kwargs(),
            }
        }

    def _run_check(self, run_id: str, guard: RunGuard) -> dict[str, Any]:
        """A transaction's ConditionCheck of ``guard`` on the run item."""
        e = Expr()
        condition = guard_condition(e, guard)
        return {
            "ConditionCheck": {
                "TableName": self.table,
                "Key": {"pk": s(run_pk(run_id)), "sk": s(RUN_SK)},
                "ConditionExpression": f"attribute_exists(pk) AND {condition}",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                **e.kwargs(),
            }
        }

    def run_assignments(
        self, run_id: str, changes: Mapping[str, Any]
    ) -> dict[str, dict[str, Any] | None]:
        """What an update of the run item by ``changes`` sets (attribute -> value) or
        removes (-> None), derived index keys included: the update expression, and the
        units such an update costs (``durable.adapters.dynamodb_units``)."""
        normalized = normalize_changes(dict(changes))
        out: dict[str, dict[str, Any] | None] = {
            field: None if value is None else run_attribute_value(field, value)
            for field, value in normalized.items()
        }
        # Derived index keys (DESIGN section 4): keep the sparse indexes exact.
        if "due_at" in normalized:
            out["due_shard"] = (
                None if normalized["due_at"] is None else s(due_shard(run_id, self.shards))
            )
        if "status" in normalized:
            # A new status says whether a person should look (``wants_a_person``): a
            # write that sets a status carries the flag and the wait it parks on, or
            # neither (a live run is never flagged; normalize_changes clears the wait).
            wanted = wants_a_person(
                normalized["status"],
                bool(normalized.get("needs_attention", False)),
                normalized.get("waiting_for"),
            )
            out["attention_pk"] = s(ATTENTION_PK) if wanted else None
        elif normalized.get("needs_attention"):
            out["attention_pk"] = s(ATTENTION_PK)
        if "status" in normalized and "updated_at" in normalized:
            status = normalized["status"].value
            out["list_sk"] = s(list_sk(status, normalized["updated_at"]))
        return out

    def _change_expression(
        self,
        e: Expr,
        run_id: str,
        changes: Mapping[str, Any],
        extra_sets: list[str] | None = None,
    ) -> str:
        sets: list[str] = list(extra_sets or [])
        removes: list[str] = []
        for field, value in self.run_assignments(run_id, changes).items():
            if value is None:
                removes.append(e.name(field))
            else:
                sets.append(f"{e.name(field)} = {e.value(value, _HINTS.get(field, field))}")
        expression = ""
        if sets:
            expression += "SET " + ", ".join(sets)
        if removes:
            expression += " REMOVE " + ", ".join(removes)
        return expression.strip()
