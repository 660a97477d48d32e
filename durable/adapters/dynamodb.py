"""The DynamoDB ledger: every engine write is one conditional request.

Condition expressions here mirror the pure rules in ``durable.core.leases``; the contract
suite runs the same tests against this adapter (moto, DynamoDB Local, LocalStack) and the
memory ledger so the two cannot drift. Vendor errors are translated at this boundary.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from durable.adapters import item_boundary
from durable.adapters.dynamodb_children import ChildrenMixin
from durable.adapters.dynamodb_events import EventsMixin
from durable.adapters.dynamodb_gates import GatesMixin
from durable.adapters.dynamodb_items import (
    INPUT_PREFIX,
    RUN_SK,
    SIGNAL_PREFIX,
    STEP_PREFIX,
    attribute_value,
    item_to_signal,
    item_to_step,
    run_pk,
    run_to_item,
    step_to_item,
)
from durable.adapters.dynamodb_listing import ListingMixin
from durable.adapters.dynamodb_steps import StepsMixin
from durable.adapters.dynamodb_support import (
    Expr,
    error_code,
    guard_condition,
    n,
    s,
    storage_error,
)
from durable.core.ids import DUE_SHARDS, due_shard
from durable.core.leases import apply_changes, claim_kind, claimed, reopening
from durable.core.limits import check_item_size, value_size
from durable.core.model import (
    TERMINAL_RUN_STATUSES,
    RunHistory,
    RunRecord,
    RunStatus,
    SignalRecord,
    StepRecord,
    StepStatus,
    signal_order,
)
from durable.core.ports import Claim, ConditionFailed, RunExists, RunGuard
from durable.core.sleeps import with_sleeps
from durable.errors import PayloadTooLarge, StorageError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Changes up to this size cannot take an item past the limit on their own account (the
# limit keeps 2 KB of head room); larger ones are checked against the stored item first.
_SMALL_CHANGE = 1024
_CLAIM_FREE_STATUSES = (RunStatus.PENDING.value, RunStatus.RUNNING.value, RunStatus.WAITING.value)


class DynamoLedger(StepsMixin, EventsMixin, GatesMixin, ChildrenMixin, ListingMixin):
    """The single-table ledger on DynamoDB (see DESIGN section 4 and ``template.yaml``)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        due_shards: int = DUE_SHARDS,
        inputs_apart: bool = True,
    ) -> None:
        """``inputs_apart``: whether this ledger writes a large input in an item of its
        own (``dynamodb_items.input_apart``); it reads both layouts either way. A deployed
        stack turns it on once every function reads that layout (``Settings.inputs_apart``)."""
        # Every request this ledger sends crosses the stored-bytes rule (``item_boundary``).
        self.client = item_boundary.install(client)
        self.table = table_name
        self.shards = due_shards
        self.inputs_apart = inputs_apart
        self._stored = OrderedDict()
        self._stored_lock = threading.Lock()

    # --- runs ----------------------------------------------------------------------

    def create_run(self, run: RunRecord) -> RunRecord:
        check_item_size(run, f"the input of run {run.run_id}")
        name = self._put_input(run)
        try:
            self.client.put_item(
                TableName=self.table,
                Item=run_to_item(run, self.shards, input_item=name),
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as e:
            # Refused for certain (unlike a timeout, whose write may have landed): the
            # input item written for it belongs to no run.
            old = getattr(e, "response", {}).get("Item")
            self._drop_input(run, name, old)
            existing = self._whole(old) if old else self.get_run(run.run_id)
            if existing is None:  # deleted meanwhile (TTL): treat as a transient conflict
                raise StorageError("run id conflict; try again", retryable=True) from e
            raise RunExists(existing) from e
        except Exception as e:
            storage_error(e, "creating the run")
        self._created(run, name)
        return run

    def _partition(self, run_id: str, projection: str | None = None) -> Iterator[dict[str, Any]]:
        """Every item of the run's partition, page after page, read consistently."""
        start: dict[str, Any] | None = None
        while True:
            request: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": s(run_pk(run_id))},
                "ConsistentRead": True,
            }
            if projection:
                request["ProjectionExpression"] = projection
            if start:
                request["ExclusiveStartKey"] = start
            try:
                response = self.client.query(**request)
            except Exception as e:
                storage_error(e, "reading the run's items")
            yield from response.get("Items", [])
            start = response.get("LastEvaluatedKey")
            if not start:
                return

    def load(self, run_id: str) -> RunHistory | None:
        steps: dict[str, StepRecord] = {}
        signals: list[SignalRecord] = []
        run_item: dict[str, Any] | None = None
        inputs: dict[str, str] = {}
        for item in self._partition(run_id):
            sk = item["sk"]["S"]
            if sk == RUN_SK:
                run_item = item
            elif sk.startswith(INPUT_PREFIX):
                inputs[sk] = item["input"]["S"]
            elif sk.startswith(STEP_PREFIX):
                step = item_to_step(item)
                steps[step.position] = step
            elif sk.startswith(SIGNAL_PREFIX):
                signals.append(item_to_signal(item))
        if run_item is None:
            return None
        run = self._whole(run_item, inputs)
        with_sleeps(run, steps)  # the open sleeps the run item holds, as their records
        # Arrival order, as the memory ledger keeps them: the sort key orders a keyed
        # signal by its key's hash (SIGNAL#<name>#K#...), not by when it arrived.
        signals.sort(key=signal_order)
        return RunHistory(run, steps, signals)

    def purge_leftovers(self, run_id: str, *, before: str, keep_expiring: bool = False) -> int:
        # Keys and times only; then one conditional delete per old item (BatchWriteItem
        # cannot be conditional, and an item rewritten meanwhile must stay).
        old: list[tuple[dict[str, Any], str]] = []
        for item in self._partition(run_id, "pk, sk, updated_at, received_at, purge_at"):
            sk = item["sk"]["S"]
            if keep_expiring and "purge_at" in item:
                continue  # TTL deletes it, for no write unit (``durable.core.lifetime``)
            field = "received_at" if sk.startswith(SIGNAL_PREFIX) else "updated_at"
            written = item.get(field, {}).get("S")
            if sk != RUN_SK and written is not None and written < before:
                old.append(({"pk": item["pk"], "sk": item["sk"]}, field))
        deleted = 0
        for key, field in old:
            try:
                self.client.delete_item(
                    TableName=self.table,
                    Key=key,
                    ConditionExpression="#t < :before",
                    ExpressionAttributeNames={"#t": field},
                    ExpressionAttributeValues={":before": s(before)},
                )
                deleted += 1
            except self.client.exceptions.ConditionalCheckFailedException:
                continue  # rewritten since the query: it belongs to the current run
            except Exception as e:
                storage_error(e, "deleting leftovers")
        return deleted

    def delete_run(self, run_id: str, *, created_at: str) -> bool:
        e = Expr()
        statuses = ", ".join(e.value(s(v), "st") for v in TERMINAL_RUN_STATUSES)
        try:
            self.client.delete_item(
                TableName=self.table,
                Key={"pk": s(run_pk(run_id)), "sk": s(RUN_SK)},
                ConditionExpression=(
                    f"{e.name('created_at')} = {e.value(s(created_at), 'c')} "
                    f"AND {e.name('status')} IN ({statuses})"
                ),
                **e.kwargs(),
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        except Exception as e2:
            storage_error(e2, "deleting the run item")
        return True

    # --- the lease protocol ----------------------------------------------------------

    def claim(
        self,
        run_id: str,
        owner: str,
        *,
        now: str,
        lease_until: str,
        stale_before: str,
        due_at: str | None = None,
    ) -> Claim | None:
        # Fast path (one request): the lease is free or ours and the run is not
        # compensating. Anything else is decided from the item the failure returns.
        # The due time stays unless it is later than the takeover moment or absent
        # (``durable.core.leases.keeps_due``): a later one fails this condition and is
        # moved by the exact-state claim below.
        e = Expr()
        st, lo, due = e.name("status"), e.name("lease_owner"), e.name("due_at")
        statuses = ", ".join(e.value(s(v), "st") for v in _CLAIM_FREE_STATUSES)
        me = e.value(s(owner), "me")
        takeover = e.value(s(due_at or lease_until), "due")
        # Likewise the stamp of the claim's time (``durable.core.sleeps``) never moves back:
        # a claimer whose clock is behind the last one's goes the exact-state way too.
        # (An outside event's write makes its run due at once, so the claim it brings
        # keeps that in this one write.)
        woke, at = e.name("woke_at"), e.value(s(now), "now")
        condition = (
            f"{st} IN ({statuses}) AND (attribute_not_exists({lo}) OR {lo} = {me})"
            f" AND (attribute_not_exists({due}) OR {due} <= {takeover})"
            f" AND (attribute_not_exists({woke}) OR {woke} <= {at})"
        )
        sets = self._claim_sets(e, run_id, RunStatus.RUNNING.value, now, lease_until, me)
        sets += f", {due} = if_not_exists({due}, {takeover}), {woke} = {at}"
        try:
            new = self._update(run_id, condition, f"SET {sets} REMOVE {e.name('attention_pk')}", e)
            return Claim(new, took_over=False)
        except ConditionFailed as failed:
            current = failed.current
        if current is None:
            return None
        kind = claim_kind(current, owner, stale_before)
        if kind is None:
            return None
        target = claimed(current, owner, now, lease_until, kind, due_at, stale_before=stale_before)
        # Exact-state claim: nothing may have changed the lease since we read it.
        e = Expr()
        fence, st, lo, lu = (
            e.name("fence"),
            e.name("status"),
            e.name("lease_owner"),
            e.name("lease_until"),
        )
        parts = [
            f"{fence} = {e.value(n(current.fence), 'f')}",
            f"{st} = {e.value(s(current.status.value), 'st')}",
        ]
        for name, value in (("due_at", current.due_at), ("woke_at", current.woke_at)):
            # the due time and the stamp decided on are the ones read
            if value is None:
                parts.append(f"attribute_not_exists({e.name(name)})")
            else:
                parts.append(f"{e.name(name)} = {e.value(s(value), 'c' + name)}")
        if current.lease_owner is None:
            parts.append(f"attribute_not_exists({lo})")
        else:
            parts.append(f"{lo} = {e.value(s(current.lease_owner), 'lo')}")
            if current.lease_until is not None:
                parts.append(f"{lu} = {e.value(s(current.lease_until), 'lu')}")
        me = e.value(s(owner), "me")
        sets = self._claim_sets(e, run_id, target.status.value, now, lease_until, me)
        if target.due_at != current.due_at and target.due_at is not None:
            sets += f", {e.name('due_at')} = {e.value(s(target.due_at), 'due')}"
        if target.woke_at != current.woke_at and target.woke_at is not None:
            sets += f", {e.name('woke_at')} = {e.value(s(target.woke_at), 'woke')}"
        if kind == "takeover":
            sets += f", {e.name('takeovers')} = {e.name('takeovers')} + {e.value(n(1), 'one')}"
        try:
            new = self._update(
                run_id, " AND ".join(parts), f"SET {sets} REMOVE {e.name('attention_pk')}", e
            )
        except ConditionFailed:
            return None
        return Claim(new, took_over=kind == "takeover")

    def _claim_sets(self, e: Expr, run_id: str, status: str, now: str, until: str, me: str) -> str:
        """What every claim sets, the due time aside (whether it moves is the caller's)."""
        assignments = [
            f"{e.name('status')} = {e.value(s(status), 'nst')}",
            f"{e.name('lease_owner')} = {me}",
            f"{e.name('lease_until')} = {e.value(s(until), 'until')}",
            f"{e.name('due_shard')} = {e.value(s(due_shard(run_id, self.shards)), 'sh')}",
            f"{e.name('fence')} = {e.name('fence')} + {e.value(n(1), 'inc')}",
            f"{e.name('updated_at')} = {e.value(s(now), 'now')}",
        ]
        return ", ".join(assignments)

    def operate(
        self,
        run_id: str,
        *,
        statuses: tuple[str, ...],
        changes: Mapping[str, Any],
        operation: Mapping[str, str] | None = None,
        bump_inbox: bool = False,
        unleased: bool = False,
        reopen: StepRecord | None = None,
    ) -> RunRecord:
        e = Expr()
        allowed = ", ".join(e.value(s(v), "st") for v in statuses)
        parts = [f"{e.name('status')} IN ({allowed})"]
        if unleased:
            parts.append(f"attribute_not_exists({e.name('lease_owner')})")
        extra: list[str] = []
        if operation is not None:
            ops = e.name("operations")
            empty = e.value({"L": []}, "empty")
            entry = e.value({"L": [attribute_value(dict(operation))]}, "op")
            extra.append(f"{ops} = list_append(if_not_exists({ops}, {empty}), {entry})")
        if bump_inbox:
            inbox = e.name("inbox")
            zero, one = e.value(n(0), "zero"), e.value(n(1), "one")
            extra.append(f"{inbox} = if_not_exists({inbox}, {zero}) + {one}")
        reopens = reopening(statuses, changes)
        update = self._change_expression(e, run_id, changes, extra, reopens=reopens)
        if not update:  # nothing to change: still a conditional check that the run fits
            update = f"SET {e.name('status')} = {e.name('status')}"
        if reopen is not None:
            return self._operate_reopening(run_id, " AND ".join(parts), update, e, reopen)
        new = self._update(run_id, " AND ".join(parts), update, e)
        check_item_size(new, f"run {run_id}")
        return new

    def _operate_reopening(
        self, run_id: str, condition: str, update: str, e: Expr, step: StepRecord
    ) -> RunRecord:
        """The run's change and the step's reopening in one transaction: a retry never
        leaves a reopened step under a run that stayed FAILED, nor a PENDING run whose
        failed step would fail it again on replay."""
        check_item_size(step, f"the record of step {step.name!r} at {step.position}")
        reasons = self._transact(
            [
                self._run_update(run_id, condition, update, e),
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": step_to_item(step),
                        "ConditionExpression": "#status = :failed",
                        "ExpressionAttributeNames": {"#status": "status"},
                        "ExpressionAttributeValues": {
                            ":failed": s(StepStatus.TERMINAL_FAILED.value)
                        },
                    }
                },
            ],
            f"retrying run {run_id}",
        )
        if reasons is not None:  # the run changed, or the step is not failed any more
            old = (
                reasons[0].get("Item")
                if reasons[0].get("Code") == "ConditionalCheckFailed"
                else None
            )
            raise ConditionFailed(self._whole(old) if old else self.get_run(run_id))
        new = self.get_run(run_id)  # a transaction returns no item: read it back
        if new is None:  # deleted between the two calls (a TTL purge): as if it never was
            raise ConditionFailed(None)
        check_item_size(new, f"run {run_id}")
        return new

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        self._check_projected_size(run_id, changes)
        e = Expr()
        condition = guard_condition(e, guard)
        update = self._change_expression(e, run_id, changes)
        return self._update(run_id, condition, update, e)

    def _check_projected_size(self, run_id: str, changes: Mapping[str, Any]) -> None:
        """Refuse, before writing, a change that would take the run item past the limit,
        as the memory ledger does. Only large changes (a result, an error) can: those pay
        one consistent read to project the item; every other update sends no read."""
        if value_size(dict(changes)) <= _SMALL_CHANGE:
            return
        current = self.get_run(run_id)
        if current is not None:
            check_item_size(apply_changes(current, dict(changes)), f"run {run_id}")

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
        check_item_size(successor, f"the input of run {successor.run_id}")
        self._check_projected_size(run_id, changes)
        name = self._put_input(successor)
        e = Expr()
        condition = guard_condition(e, guard)
        update = self._change_expression(e, run_id, changes)
        reasons = self._transact(
            [
                self._run_update(run_id, condition, update, e),
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": run_to_item(successor, self.shards, input_item=name),
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
            ],
            f"continuing run {run_id} as new",
        )
        if reasons is None:
            self._created(successor, name)
            return
        self._drop_input(successor, name, None)
        if reasons[0].get("Code") == "ConditionalCheckFailed":
            old = reasons[0].get("Item")
            raise ConditionFailed(self._whole(old) if old else self.get_run(run_id))
        old = reasons[1].get("Item")
        existing = self._whole(old) if old else self.get_run(successor.run_id)
        if existing is None:
            raise StorageError("successor id conflict; try again", retryable=True)
        raise RunExists(existing)

    def _update(self, run_id: str, condition: str, update: str, e: Expr) -> RunRecord:
        try:
            response = self.client.update_item(
                TableName=self.table,
                Key={"pk": s(run_pk(run_id)), "sk": s(RUN_SK)},
                ConditionExpression=f"attribute_exists(pk) AND {condition}",
                UpdateExpression=update,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **e.kwargs(),
            )
        except self.client.exceptions.ConditionalCheckFailedException as err:
            old = getattr(err, "response", {}).get("Item")
            raise ConditionFailed(self._whole(old) if old else None) from err
        except Exception as err:
            if error_code(err) == "ValidationException" and "Item size" in str(err):
                raise PayloadTooLarge(f"run {run_id}", 400 * 1024 + 1, 400 * 1024) from err
            storage_error(err, "updating the run")
        return self._whole(response["Attributes"])

    # --- steps ---------------------------------------------------------------------
