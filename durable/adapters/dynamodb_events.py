"""DynamoDB ledger, part two: external events (callbacks, signals) and the due index.

Every external event is one ``TransactWriteItems``: its own record plus the run item's
``inbox`` increment and ``due_at = now``, so an event that lands while the owner runs
is never lost (the owner's suspension requires the inbox unchanged).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from durable.adapters.dynamodb_items import (
    RUN_SK,
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
from durable.adapters.dynamodb_table import TableBase
from durable.core.ids import due_shard
from durable.core.leases import sweep_trigger
from durable.core.limits import check_item_size
from durable.core.model import TERMINAL_RUN_STATUSES, SignalRecord, StepRecord, StepStatus
from durable.core.ports import Page, RunFinished, SignalExists, WaitNotPending
from durable.errors import StorageError

if TYPE_CHECKING:
    pass

# Rounds of read-then-write a signal tries before it reports contention (each lost round
# means another event reached the run in between).
_SEQ_ROUNDS = 20
_TERMINAL = {f":t{i}": s(v) for i, v in enumerate(TERMINAL_RUN_STATUSES)}
_NOT_TERMINAL = f"attribute_exists(pk) AND NOT (#status IN ({', '.join(_TERMINAL)}))"


class EventsMixin(TableBase):
    def _bump_inbox(
        self, run_id: str, now: str, expected: int | None = None, *, due: bool = True
    ) -> dict[str, Any]:
        """The run item's ``inbox`` up by one, while the run goes on; ``due``: the run due
        now, so the sweeper invokes a waiting run should the event's invocation be lost.
        A child's report leaves the due time alone: moving it is a delete and a put in
        the due index (2 units a report), and a parent waiting for children is due at
        its next look at them anyway (``durable.engine.children.report_look_due``)."""
        condition = _NOT_TERMINAL
        values: dict[str, Any] = {}
        if due:
            values.update({":now": s(now), ":shard": s(due_shard(run_id, self.shards))})
        if expected is not None:
            unset = "attribute_not_exists(inbox) OR " if expected == 0 else ""
            condition += f" AND ({unset}inbox = :expected)"
            values[":expected"] = n(expected)
        return {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": s(run_pk(run_id)), "sk": s(RUN_SK)},
                "ConditionExpression": condition,
                "UpdateExpression": "SET inbox = if_not_exists(inbox, :zero) + :one"
                + (", due_at = :now, due_shard = :shard" if due else ""),
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    **_TERMINAL,
                    ":zero": n(0),
                    ":one": n(1),
                    **values,
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def complete_waiting(self, step: StepRecord, *, token_hash: str | None, now: str) -> None:
        check_item_size(step, f"the completion of step {step.name!r} at {step.position}")
        self._replace_pending(
            step, token_hash, now, self._bump_inbox(step.run_id, now), "completing"
        )

    def extend_wait(
        self,
        step: StepRecord,
        *,
        token_hash: str,
        now: str,
        waiting_for: tuple[str, str] | None = None,
    ) -> None:
        check_item_size(step, f"the heartbeat of step {step.name!r} at {step.position}")
        # The run still going, and nothing about it changed but (given ``waiting_for``)
        # the expiry its listing shows: no inbox bump, no wake-up.
        key = {"pk": s(run_pk(step.run_id)), "sk": s(RUN_SK)}
        names = {"#status": "status"}
        still_going: dict[str, Any] = {
            "ConditionCheck": {
                "TableName": self.table,
                "Key": key,
                "ConditionExpression": _NOT_TERMINAL,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": _TERMINAL,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        if waiting_for is None:
            self._replace_pending(step, token_hash, now, still_going, "a heartbeat of")
            return
        shown = {
            "Update": {
                "TableName": self.table,
                "Key": key,
                "ConditionExpression": f"{_NOT_TERMINAL} AND waiting_for = :shown",
                "UpdateExpression": "SET waiting_for = :extended",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": {
                    **_TERMINAL,
                    ":shown": s(waiting_for[0]),
                    ":extended": s(waiting_for[1]),
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        try:
            self._replace_pending(step, token_hash, now, shown, "a heartbeat of")
        except RunFinished as refused:
            # Refused for the run's text alone (the run parked again since it was read,
            # and its worker wrote what is true now): the wait moves all the same. The
            # refusal carries the run item where the server returns it (DynamoDB does; an
            # older moto leaves it out of a transaction's reasons): else it is read.
            current = refused.current or self.get_run(step.run_id)
            if current is None or current.terminal:
                raise
            self._replace_pending(step, token_hash, now, still_going, "a heartbeat of")

    def _replace_pending(
        self,
        step: StepRecord,
        token_hash: str | None,
        now: str,
        on_run: dict[str, Any],
        what: str,
    ) -> None:
        """One transaction: ``step`` replaces a wait still WAITING, unexpired at ``now``
        and (when given) with ``token_hash``; ``on_run`` is the run item's part (an inbox
        bump, or a check that the run goes on). ``WaitNotPending`` or ``RunFinished``
        when refused; nothing is written then."""
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
                on_run,
            ],
            f"{what} step {step.position}",
        )
        if reasons is None:
            return
        if reasons[0].get("Code") == "ConditionalCheckFailed":
            old = reasons[0].get("Item")
            raise WaitNotPending(item_to_step(old) if old else None)
        old_run = reasons[1].get("Item")
        raise RunFinished(self._whole(old_run) if old_run else None)

    def add_signal(self, signal: SignalRecord, *, now: str) -> None:
        check_item_size(signal, f"signal {signal.name!r}")
        # The signal takes the run's next inbox count as its sequence number, so its
        # consumption order is the order the ledger committed arrivals in. A transaction
        # cannot read, so it reads the count first and writes on the condition that the
        # count did not move; another event in between means one more round.
        for _ in range(_SEQ_ROUNDS):
            run = self.get_run(signal.run_id)
            if run is None or run.terminal:
                if signal.key_hash is not None and (old := self._get_signal_item(signal)):
                    raise SignalExists(item_to_signal(old))
                raise RunFinished(run)
            numbered = replace(signal, seq=run.inbox + 1)
            put: dict[str, Any] = {
                "TableName": self.table,
                "Item": signal_to_item(numbered),
                "ConditionExpression": "attribute_not_exists(sk)",
            }
            if signal.key_hash is not None:
                # A keyed signal's sort key is derived from its key: a failed condition
                # means an earlier send with that key, returned in the same call.
                put["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            reasons = self._transact(
                [{"Put": put}, self._bump_inbox(signal.run_id, now, expected=run.inbox)],
                f"storing signal {signal.name}",
            )
            if reasons is None:
                return
            if signal.key_hash is not None and reasons[0].get("Code") == "ConditionalCheckFailed":
                old = reasons[0].get("Item") or self._get_signal_item(signal)
                if old is not None:
                    raise SignalExists(item_to_signal(old))
        raise StorageError(
            f"signal {signal.name!r} lost {_SEQ_ROUNDS} races with other events to run "
            f"{signal.run_id}; send it again",
            retryable=True,
        )

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
        start = decode_cursor(
            cursor, ("pk", "sk", "due_shard", "due_at"), {"due_shard": str(shard)}
        )
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

    def claim_trigger(
        self, run_id: str, due_at: str, new_due_at: str, *, stale_before: str, skew: timedelta
    ) -> bool:
        # One conditional write for the common case (no live lease: invoke); the item a
        # failure returns says whether a live lease was the reason, and then the run's
        # due time moves to its takeover moment (``durable.core.leases.sweep_trigger``).
        key = {"pk": s(run_pk(run_id)), "sk": s(RUN_SK)}
        unheld = (
            "(attribute_not_exists(lease_owner) OR attribute_not_exists(lease_until)"
            " OR lease_until < :stale)"
        )
        try:
            self.client.update_item(
                TableName=self.table,
                Key=key,
                ConditionExpression=f"due_at = :due AND {_NOT_TERMINAL} AND {unheld}",
                UpdateExpression="SET due_at = :new",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    **_TERMINAL,
                    ":due": s(due_at),
                    ":new": s(new_due_at),
                    ":stale": s(stale_before),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as err:
            old = getattr(err, "response", {}).get("Item")
        except Exception as err:
            storage_error(err, "claiming a due trigger")
        else:
            return True
        run = item_to_run(old) if old else None
        invoke, takeover = sweep_trigger(run, due_at, new_due_at, stale_before, skew)
        if invoke or takeover is None or run is None:
            return False  # ended, moved on, or its lease ended since: the next sweep sees it
        try:
            self.client.update_item(
                TableName=self.table,
                Key=key,
                ConditionExpression="due_at = :due AND lease_owner = :lo AND lease_until = :lu",
                UpdateExpression="SET due_at = :takeover",
                ExpressionAttributeValues={
                    ":due": s(due_at),
                    ":lo": s(run.lease_owner or ""),
                    ":lu": s(run.lease_until or ""),
                    ":takeover": s(takeover),
                },
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            pass  # the lease or the due time moved meanwhile: either way it is seen again
        except Exception as err:
            storage_error(err, "moving a due time to a lease's end")
        return False
