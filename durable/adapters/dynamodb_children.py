"""DynamoDB ledger, part four: child runs (``durable.engine.children``).

A child is started by one transaction (the parent's WAITING record, the parent's run item
under its guard, the child's run item), so a parent never waits for a child that was not
created. It ends by three plain conditional updates, in this order: its own final write,
its parent's record settled (only while it waits for this child), the parent's inbox
bumped (only while the parent goes on). A transaction over the same three items costs
twice the write units; what it bought, the report never lost, the parent gets by
looking at a child whose report is overdue (``durable.engine.children.look_for_ends``):
a worker stopped between the child's end and its report delays the parent, never loses
nor doubles the child's outcome (the record settles once: from the report or the look).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from durable.adapters.dynamodb_items import (
    RUN_SK,
    STEP_PREFIX,
    run_pk,
    run_to_item,
)
from durable.adapters.dynamodb_support import Expr, guard_condition, n, s, storage_error
from durable.adapters.dynamodb_table import TableBase
from durable.core.leases import children_batch, settle_child_record
from durable.core.limits import check_item_size
from durable.core.model import (
    TERMINAL_RUN_STATUSES,
    RunRecord,
    StepKind,
    StepRecord,
    StepStatus,
)
from durable.core.ports import ChildReport, ConditionFailed, RunExists, RunGuard
from durable.errors import StorageError

log = logging.getLogger("durable.children")
_ENDED = frozenset(TERMINAL_RUN_STATUSES)


class ChildrenMixin(TableBase):
    if TYPE_CHECKING:

        def update_run(
            self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]
        ) -> RunRecord: ...

        def _check_projected_size(self, run_id: str, changes: Mapping[str, Any]) -> None: ...

        def _step_put(self, step: StepRecord) -> dict[str, Any]: ...

        def _bump_inbox(
            self, run_id: str, now: str, expected: int | None = None, *, due: bool = True
        ) -> dict[str, Any]: ...

        def _refused(
            self, reasons: list[dict[str, Any]], step: StepRecord, run_index: int
        ) -> StepRecord: ...

    def start_child(self, step: StepRecord, guard: RunGuard, child: RunRecord) -> StepRecord:
        children_batch([step], [child])
        name = self._put_input(child)
        reasons = self._transact(
            [
                self._step_put(step),
                self._count_children(step.run_id, guard, 1),
                self._child_put(child, name),
            ],
            f"starting child run {child.run_id}",
        )
        if reasons is None:
            self._created(child, name)
            return step
        self._drop_input(child, name, None)
        failed = [r.get("Code") == "ConditionalCheckFailed" for r in reasons]
        # As the memory ledger decides: the guard first, then a refused record (the
        # stored one comes back), then a taken child id.
        if not failed[1] and not failed[0] and failed[2]:
            old = reasons[2].get("Item")
            existing = self._whole(old) if old else self.get_run(child.run_id)
            if existing is None:
                raise StorageError("child id conflict; try again", retryable=True)
            raise RunExists(existing)
        return self._refused(reasons, step, 1)

    def start_children(
        self, steps: list[StepRecord], guard: RunGuard, children: list[RunRecord]
    ) -> bool:
        parent_id = children_batch(steps, children)
        names = [self._put_input(child) for child in children]
        actions = [self._count_children(parent_id, guard, len(children))]
        for step, child, name in zip(steps, children, names, strict=True):
            actions += [self._step_put(step), self._child_put(child, name)]
        reasons = self._transact(actions, f"starting {len(children)} child runs")
        for child, name in zip(children, names, strict=True):
            if reasons is None:
                self._created(child, name)
            else:
                self._drop_input(child, name, None)
        if reasons is None:
            return True
        if reasons[0].get("Code") == "ConditionalCheckFailed":
            old = reasons[0].get("Item")
            raise ConditionFailed(self._whole(old) if old else self.get_run(parent_id))
        return False

    def _count_children(self, parent_id: str, guard: RunGuard, started: int) -> dict[str, Any]:
        """The parent's run item under its guard, its ``children`` count up by ``started``."""
        e = Expr()
        count = e.name("children")
        zero, more = e.value(n(0), "z"), e.value(n(started), "k")
        update = f"SET {count} = if_not_exists({count}, {zero}) + {more}"
        return self._run_update(parent_id, guard_condition(e, guard), update, e)

    def _child_put(self, child: RunRecord, input_item: str | None) -> dict[str, Any]:
        """A child's run item, only where no run has its id (the stored one comes back)."""
        return {
            "Put": {
                "TableName": self.table,
                "Item": run_to_item(child, self.shards, input_item=input_item),
                "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def finish_child(
        self,
        run_id: str,
        guard: RunGuard,
        changes: Mapping[str, Any],
        report: ChildReport,
        *,
        now: str,
    ) -> tuple[RunRecord, bool]:
        check_item_size(_report_record(report, now), f"the result of child run {run_id}")
        new = self.update_run(run_id, guard, changes)  # the child's end, alone
        try:
            return new, self._report(report, now)
        except StorageError:
            # The end is written; the parent finds an end nobody reported by looking at
            # the child (``durable.engine.children``): later, never lost.
            log.warning("child run %s could not report its end to %s", run_id, report.parent_id)
            return new, False

    def _report(self, report: ChildReport, now: str) -> bool:
        """The parent's record settled, then its inbox bumped: two plain conditional
        updates (half the units of one transaction over the same items). Whether the
        parent took the report (its record waited for this child and it goes on).

        A parent seen ended is left as it ended (a finished run's records do not change):
        the record's update cannot require it of the run item, so a read does, first. A
        parent that ends in the moment between that read and the update still gets the
        child's outcome in its record (a transaction would have refused it); it is not
        woken."""
        try:
            seen = self.client.get_item(
                TableName=self.table,
                Key={"pk": s(run_pk(report.parent_id)), "sk": s(RUN_SK)},
                ProjectionExpression="#s",
                ExpressionAttributeNames={"#s": "status"},
                ConsistentRead=True,
            ).get("Item")
        except Exception as err:
            storage_error(err, "reading a child's parent")
        if seen is None or seen.get("status", {}).get("S") in _ENDED:
            return False
        try:
            self.client.update_item(**self._settle(report, now)["Update"])
        except self.client.exceptions.ConditionalCheckFailedException:
            return False  # settled already, another incarnation's, or gone
        except Exception as err:
            storage_error(err, "reporting a child's end")
        bump = self._bump_inbox(report.parent_id, now, due=False)["Update"]
        bump.pop("ReturnValuesOnConditionCheckFailure", None)
        try:
            self.client.update_item(**bump)
        except self.client.exceptions.ConditionalCheckFailedException:
            return False  # the parent ended: nobody to wake
        except Exception as err:
            storage_error(err, "waking a child's parent")
        return True

    def _settle(self, report: ChildReport, now: str) -> dict[str, Any]:
        """The parent's record at the report's position, settled by an update that
        requires it to be a WAITING child record (``durable.core.leases.settle_child_record``
        names the attributes it changes)."""
        settled = _report_record(report, now)
        e = Expr()
        sets: list[str] = []
        removes: list[str] = []
        for name, value in (
            ("status", settled.status.value),
            ("output", settled.output),
            ("error_type", settled.error_type),
            ("error_summary", settled.error_summary),
            ("updated_at", settled.updated_at),
        ):
            if value is None:
                removes.append(e.name(name))
            else:
                sets.append(f"{e.name(name)} = {e.value(s(value), name)}")
        if report.version is not None:  # the child and the version it ran
            text = json.dumps(settled.detail, separators=(",", ":"))
            sets.append(f"{e.name('detail')} = {e.value(s(text), 'settled')}")
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        kind, status, detail = e.name("kind"), e.name("status"), e.name("detail")
        # The record names this child (its detail, stored as compact JSON, is exactly
        # ``durable.engine.children.child_detail``): an earlier incarnation's child never
        # settles a later one's record.
        names = json.dumps({"child": report.child_id}, separators=(",", ":"))
        condition = (
            f"{kind} = {e.value(s(StepKind.CHILD.value), 'k')} AND "
            f"{status} = {e.value(s(StepStatus.WAITING.value), 'w')} AND "
            f"{detail} = {e.value(s(names), 'd')}"
        )
        return {
            "Update": {
                "TableName": self.table,
                "Key": {"pk": s(run_pk(report.parent_id)), "sk": s(STEP_PREFIX + report.position)},
                "ConditionExpression": condition,
                "UpdateExpression": update,
                **e.kwargs(),
            }
        }


def _report_record(report: ChildReport, now: str) -> StepRecord:
    """The settled fields of the parent's record (on a placeholder record: the update
    touches only ``CHILD_REPORT_FIELDS``)."""
    placeholder = StepRecord(
        report.parent_id, report.position, "", StepKind.CHILD, StepStatus.WAITING, now
    )
    return settle_child_record(placeholder, report, now)
