"""DynamoDB ledger, part three: step records, each fenced by ``durable.core.leases``'s rule.

A plain write is one conditional put (``step_replaceable`` as its condition). A write that
needs the lease itself (a wait, a value, a consumed signal, a checkpoint) is one
transaction of that put and a check (or update) of the run item under the worker's guard.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durable.adapters.dynamodb_items import (
    item_to_step,
    run_pk,
    signal_sk,
    step_to_item,
)
from durable.adapters.dynamodb_support import (
    Expr,
    guard_condition,
    s,
    step_condition,
    storage_error,
)
from durable.adapters.dynamodb_table import TableBase
from durable.core.limits import check_item_size
from durable.core.model import SignalRecord, StepRecord
from durable.core.ports import ConditionFailed, RunGuard, WaitNotPending
from durable.errors import StorageError


class StepsMixin(TableBase):
    def write_step(self, step: StepRecord, guard: RunGuard | None = None) -> StepRecord:
        check_item_size(step, f"the record of step {step.name!r} at {step.position}")
        if guard is not None:
            return self._write_step_guarded(step, guard)
        e = Expr()
        condition = step_condition(e, step)
        try:
            self.client.put_item(
                TableName=self.table,
                Item=step_to_item(step),
                ConditionExpression=condition,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **e.kwargs(),
            )
        except self.client.exceptions.ConditionalCheckFailedException as err:
            old = getattr(err, "response", {}).get("Item")
            if not old:  # cannot happen: the condition only fails on an existing item
                raise StorageError("step write lost to a vanished item", retryable=True) from err
            return item_to_step(old)
        except Exception as err:
            storage_error(err, f"writing step {step.position}")
        return step

    def _step_put(self, step: StepRecord) -> dict[str, Any]:
        e = Expr()
        return {
            "Put": {
                "TableName": self.table,
                "Item": step_to_item(step),
                "ConditionExpression": step_condition(e, step),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                **e.kwargs(),
            }
        }

    def _refused(
        self, reasons: list[dict[str, Any]], step: StepRecord, run_index: int
    ) -> StepRecord:
        """Turn a canceled fenced write into the port's answer: ``ConditionFailed`` when
        the run guard failed (it wins: the lease is gone), else the stored step."""
        if reasons[run_index].get("Code") == "ConditionalCheckFailed":
            old = reasons[run_index].get("Item")
            raise ConditionFailed(self._whole(old) if old else self.get_run(step.run_id))
        failed = reasons[0].get("Code") == "ConditionalCheckFailed"
        old = reasons[0].get("Item") if failed else None
        stored = item_to_step(old) if old else self.get_step(step.run_id, step.position)
        if stored is None:
            raise WaitNotPending(None)
        return stored

    def _write_step_guarded(self, step: StepRecord, guard: RunGuard) -> StepRecord:
        reasons = self._transact(
            [self._step_put(step), self._run_check(step.run_id, guard)],
            f"writing step {step.position}",
        )
        return step if reasons is None else self._refused(reasons, step, 1)

    def write_step_fenced(
        self, step: StepRecord, guard: RunGuard, run_changes: Mapping[str, Any]
    ) -> bool:
        check_item_size(step, f"the record of step {step.name!r} at {step.position}")
        e = Expr()
        update = self._change_expression(e, step.run_id, run_changes)
        reasons = self._transact(
            [
                self._step_put(step),
                self._run_update(step.run_id, guard_condition(e, guard), update, e),
            ],
            f"checkpointing step {step.position}",
        )
        if reasons is None:
            return True
        if reasons[1].get("Code") == "ConditionalCheckFailed":
            old = reasons[1].get("Item")
            raise ConditionFailed(self._whole(old) if old else self.get_run(step.run_id))
        return False  # the step turned final meanwhile: nothing to checkpoint

    def consume_signal(self, step: StepRecord, signal: SignalRecord, guard: RunGuard) -> StepRecord:
        reasons = self._transact(
            [
                self._step_put(step),
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": {"pk": s(run_pk(signal.run_id)), "sk": s(signal_sk(signal))},
                        "UpdateExpression": "SET consumed_by = :pos",
                        "ConditionExpression": "attribute_exists(sk) AND "
                        "(attribute_not_exists(consumed_by) OR consumed_by = :pos)",
                        "ExpressionAttributeValues": {":pos": s(step.position)},
                    }
                },
                self._run_check(step.run_id, guard),
            ],
            f"consuming signal {signal.name}",
        )
        # A signal consumed at another position (a stale view) leaves the step as stored.
        return step if reasons is None else self._refused(reasons, step, 2)
