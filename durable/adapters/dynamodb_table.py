"""The ledger table as every DynamoDB writer sees it: one-item reads, transactions, and
the update expression that keeps the sparse index keys exact. The run, step and event
writers (``dynamodb``, ``dynamodb_steps``, ``dynamodb_events``) build on it."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from durable.adapters.dynamodb_items import (
    RUN_SK,
    STEP_PREFIX,
    input_apart,
    input_to_item,
    item_to_run,
    item_to_step,
    new_input_sk,
    run_attribute_value,
    run_pk,
)
from durable.adapters.dynamodb_support import Expr, guard_condition, s, storage_error
from durable.core.ids import due_shard
from durable.core.leases import (
    attention_partition,
    normalize_changes,
    relisted,
    wants_a_person,
)
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

log = logging.getLogger("durable.ledger")

# Placeholder hints of the derived keys, as they were named before (cosmetic).
_HINTS = {"due_shard": "sh", "attention_pk": "att", "list_sk": "lsk"}


# How the runs a ledger last wrote or read store their input, by run id: inline (None),
# or apart under a sort key, with the input (it never changes, so a claim or an update in
# the container that wrote or read it does not read it again). A worker serves one run at
# a time, the API a few.
_STORED_KEPT = 64


class TableBase:
    client: DynamoDBClient
    table: str
    shards: int
    inputs_apart: bool
    _stored: OrderedDict[str, tuple[str, str] | None]
    _stored_lock: threading.Lock

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
        return self._whole(item) if item else None

    def _whole(self, item: dict[str, Any], inputs: dict[str, str] | None = None) -> RunRecord:
        """The run an item holds, with its input: a run item whose input is kept apart
        names it (``input_item``); ``inputs`` (sort key -> input) are the ones a load
        read with the partition, else the ledger's memory, else one consistent read.
        A run item of the layout before (the input inline) is read as it is."""
        run = item_to_run(item)
        name = item.get("input_item", {}).get("S")
        if name is None:
            self._remember(run.run_id, None)
            return run
        known = (inputs or {}).get(name)
        if known is None:
            with self._stored_lock:
                kept = self._stored.get(run.run_id)
            known = kept[1] if kept is not None and kept[0] == name else None
        if known is None:
            known = self._read_input(run.run_id, name)
        self._remember(run.run_id, (name, known))
        run.input = known
        return run

    def stored_apart(self, run: RunRecord) -> bool:
        """Whether ``run``'s item, as stored, leaves its input out (what a write of it
        costs depends on it): as this ledger last read or wrote it, else as it would
        write it now. A run created inline (the layout before, or ``inputs_apart`` off)
        stays inline for life, whatever the setting says today."""
        with self._stored_lock:
            if run.run_id in self._stored:
                return self._stored[run.run_id] is not None
        return self.inputs_apart and input_apart(run)

    def _remember(self, run_id: str, apart: tuple[str, str] | None) -> None:
        with self._stored_lock:  # the lease keeper updates the run from its own thread
            self._stored[run_id] = apart
            self._stored.move_to_end(run_id)
            while len(self._stored) > _STORED_KEPT:
                self._stored.popitem(last=False)

    def _read_input(self, run_id: str, name: str) -> str:
        try:
            response = self.client.get_item(
                TableName=self.table,
                Key={"pk": s(run_pk(run_id)), "sk": s(name)},
                ConsistentRead=True,
            )
        except Exception as e:
            storage_error(e, "reading the run's input")
        item = response.get("Item")
        if item is None:  # written before the run item, deleted only after it: a purge
            raise StorageError(f"the input of run {run_id} is gone ({name})", retryable=True)
        return str(item["input"]["S"])

    def _put_input(self, run: RunRecord) -> str | None:
        """Write a large input's own item (``input_apart``) before the run item that
        names it: a plain put, once; returns its sort key (None: the input stays inline).
        The key is new for each call (``new_input_sk``), so this put never replaces
        another write's input. Nothing is remembered until the run item is written: a
        refused create's input belongs to no run (``_drop_input``)."""
        if not (self.inputs_apart and input_apart(run)):
            return None
        name = new_input_sk(run)
        try:
            self.client.put_item(TableName=self.table, Item=input_to_item(run, name))
        except Exception as e:
            storage_error(e, "writing the run's input")
        return name

    def _created(self, run: RunRecord, name: str | None) -> None:
        """``run``'s item is written: remember its layout and input (they never change)."""
        self._remember(run.run_id, None if name is None else (name, run.input))

    def _drop_input(self, run: RunRecord, name: str | None, stored: dict[str, Any] | None) -> None:
        """Delete the input item a refused create wrote (``_put_input``). Its key is its
        own (``new_input_sk``): only this create's run item can name it, which happens
        when a first try landed and a retry of the same request was refused, so the run
        item under that id (``stored``, the raw item the refusal returned; None: read)
        is checked first. Only a refusal drops it, never a timeout, whose write may have
        landed. A leftover under a live run is never purged (it is younger than the run)
        and every load of the run would read it. Best effort: an item this misses (a
        crash between the two writes, a failed delete) is alone in a partition no run
        took, or younger than the run beside it, and the purge of that run's partition
        when it expires deletes it with the rest."""
        if name is None:
            return
        try:
            if stored is None:
                stored = self.client.get_item(
                    TableName=self.table,
                    Key={"pk": s(run_pk(run.run_id)), "sk": s(RUN_SK)},
                    ProjectionExpression="input_item",
                    ConsistentRead=True,
                ).get("Item")
            if (stored or {}).get("input_item", {}).get("S") == name:
                return
            self.client.delete_item(
                TableName=self.table, Key={"pk": s(run_pk(run.run_id)), "sk": s(name)}
            )
        except Exception:  # the create's own outcome is what its caller gets
            log.warning("could not delete the input item of a refused start of run %s", run.run_id)

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
        self, run_id: str, changes: Mapping[str, Any], *, reopens: bool = False
    ) -> dict[str, dict[str, Any] | None]:
        """What an update of the run item by ``changes`` sets (attribute -> value) or
        removes (-> None), derived index keys included: the update expression, and the
        units such an update costs (``durable.adapters.dynamodb_units``). ``reopens``: a
        retry moves a failed run back among the open ones (``relisted``)."""
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
            out["attention_pk"] = s(attention_partition(run_id)) if wanted else None
        elif normalized.get("needs_attention"):
            out["attention_pk"] = s(attention_partition(run_id))
        moved = relisted(run_id, normalized, reopens=reopens)
        if moved is not None:  # the run ends or reopens: its listing entry changes phase
            out["list_sk"] = s(moved)
        return out

    def _change_expression(
        self,
        e: Expr,
        run_id: str,
        changes: Mapping[str, Any],
        extra_sets: list[str] | None = None,
        *,
        reopens: bool = False,
    ) -> str:
        sets: list[str] = list(extra_sets or [])
        removes: list[str] = []
        for field, value in self.run_assignments(run_id, changes, reopens=reopens).items():
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
