"""Durable timers as EventBridge Scheduler one-time schedules (DESIGN section 5).

One ``at()`` schedule per wait: UTC, rounded up to the second (never early), a
deterministic name, ``ActionAfterCompletion=DELETE``, no flexible window, targeting the
worker with ``{run_id, reason}``. Names and expressions are validated here because moto
accepts anything and real Scheduler would reject it at the worst moment.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from durable.adapters.dynamodb_support import error_code, storage_error
from durable.core.ids import timer_name
from durable.engine.schedules import Remote, Schedule
from durable.errors import InvalidInput

if TYPE_CHECKING:
    from mypy_boto3_scheduler import EventBridgeSchedulerClient

NAME = re.compile(r"^[0-9A-Za-z_.-]{1,64}$")
AT = re.compile(r"^at\(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\)$")


def at_expression(when: datetime) -> str:
    """``at(YYYY-MM-DDTHH:MM:SS)`` in UTC, rounded up to the whole second."""
    if when.tzinfo is None:
        raise ValueError("timer times must be timezone-aware")
    utc = when.astimezone(UTC)
    if utc.microsecond:
        utc = utc.replace(microsecond=0) + timedelta(seconds=1)
    expression = f"at({utc.strftime('%Y-%m-%dT%H:%M:%S')})"
    if not AT.match(expression):  # years beyond 9999 or before 1000
        raise ValueError(f"cannot express {when!r} as a one-time schedule")
    return expression


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise ValueError(f"schedule name {name!r} must match [0-9A-Za-z_.-]{{1,64}}")
    return name


class _InGroup:
    """Schedules of one Scheduler group, each invoking ``target_arn`` as ``role_arn``."""

    def __init__(
        self,
        client: EventBridgeSchedulerClient,
        *,
        group: str,
        target_arn: str,
        role_arn: str,
    ) -> None:
        check_name(group)
        self.client = client
        self.group = group
        self.target_arn = target_arn
        self.role_arn = role_arn


class SchedulerTimers(_InGroup):
    def arm(
        self, run_id: str, position: str, wake_at: datetime, *, rearm_at: datetime | None = None
    ) -> None:
        name = check_name(timer_name(run_id, position, rearm_at))
        try:
            self.client.create_schedule(
                Name=name,
                GroupName=self.group,
                ScheduleExpression=at_expression(wake_at),
                ScheduleExpressionTimezone="UTC",
                FlexibleTimeWindow={"Mode": "OFF"},
                ActionAfterCompletion="DELETE",
                Target={
                    "Arn": self.target_arn,
                    "RoleArn": self.role_arn,
                    "Input": json.dumps({"run_id": run_id, "reason": "timer"}),
                },
            )
        except Exception as err:
            if error_code(err) == "ConflictException":
                return  # already armed: arming is idempotent by name
            storage_error(err, f"creating schedule {name}")

    def cancel_run(self, run_id: str) -> None:
        names: list[str] = []
        try:
            paginator = self.client.get_paginator("list_schedules")
            for response in paginator.paginate(GroupName=self.group, NamePrefix=f"{run_id}-"):
                names += [s["Name"] for s in response.get("Schedules", [])]
        except Exception as err:
            storage_error(err, f"listing the schedules of run {run_id}")
        for name in names:
            try:
                self.client.delete_schedule(Name=name, GroupName=self.group)
            except Exception as err:
                if error_code(err) != "ResourceNotFoundException":
                    storage_error(err, f"deleting schedule {name}")


# --- recurring schedules (durable.engine.schedules) -------------------------------------------

RECURRING_PREFIX = "schedule."  # beside the timers (named <run id>-...) in the stack's group


class SchedulerRecurring(_InGroup):
    """A stack's recurring schedules (``durable.engine.schedules``) in its Scheduler group.

    Each targets the worker with ``{"schedule": name, "scheduled_time": ...}``, the fire
    time filled in by Scheduler (``<aws.scheduler.scheduled-time>``), so a fire that is
    delivered twice carries the same time.
    """

    def _definition(self, schedule: Schedule, enabled: bool) -> dict[str, Any]:
        payload = {"schedule": schedule.name, "scheduled_time": "<aws.scheduler.scheduled-time>"}
        return {
            "Name": check_name(RECURRING_PREFIX + schedule.name),
            "GroupName": self.group,
            "ScheduleExpression": schedule.expression,
            "ScheduleExpressionTimezone": schedule.timezone,
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "State": "ENABLED" if enabled else "DISABLED",
            "Description": f"durable: starts {schedule.workflow}"[:512],
            "Target": {
                "Arn": self.target_arn,
                "RoleArn": self.role_arn,
                "Input": json.dumps(payload),
            },
        }

    def list(self) -> dict[str, Remote]:
        names: list[str] = []
        try:
            paginator = self.client.get_paginator("list_schedules")
            for page in paginator.paginate(GroupName=self.group, NamePrefix=RECURRING_PREFIX):
                names += [s["Name"] for s in page.get("Schedules", [])]
        except Exception as err:
            storage_error(err, "listing the recurring schedules")
        out: dict[str, Remote] = {}
        for full in names:
            try:
                got = self.client.get_schedule(Name=full, GroupName=self.group)
            except Exception as err:
                if error_code(err) == "ResourceNotFoundException":
                    continue  # deleted meanwhile
                storage_error(err, f"reading schedule {full}")
            name = full[len(RECURRING_PREFIX) :]
            out[name] = Remote(
                name,
                str(got.get("ScheduleExpression", "")),
                str(got.get("ScheduleExpressionTimezone") or "UTC"),
                got.get("State", "ENABLED") == "ENABLED",
                got.get("CreationDate"),
            )
        return out

    def put(self, schedule: Schedule, *, enabled: bool) -> None:
        definition = self._definition(schedule, enabled)
        try:
            self.client.create_schedule(**definition)
        except Exception as err:
            if error_code(err) != "ConflictException":
                storage_error(err, f"creating schedule {definition['Name']}")
            try:
                self.client.update_schedule(**definition)
            except Exception as again:
                storage_error(again, f"updating schedule {definition['Name']}")

    def delete(self, name: str) -> None:
        full = RECURRING_PREFIX + name
        try:
            self.client.delete_schedule(Name=full, GroupName=self.group)
        except Exception as err:
            if error_code(err) != "ResourceNotFoundException":
                storage_error(err, f"deleting schedule {full}")

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Pause or resume: UpdateSchedule replaces the whole definition, so it is read
        first and written back with only its state changed."""
        full = RECURRING_PREFIX + name
        try:
            got = self.client.get_schedule(Name=full, GroupName=self.group)
        except Exception as err:
            if error_code(err) == "ResourceNotFoundException":
                raise InvalidInput(
                    f"no schedule {name!r} in this stack: deploy (or start durable dev) first",
                    field="schedule",
                ) from err
            storage_error(err, f"reading schedule {full}")
        keep = (
            "ScheduleExpression",
            "ScheduleExpressionTimezone",
            "FlexibleTimeWindow",
            "Description",
            "Target",
            "StartDate",
            "EndDate",
        )
        definition: dict[str, Any] = {k: got[k] for k in keep if k in got}  # type: ignore[literal-required]
        definition["State"] = "ENABLED" if enabled else "DISABLED"
        try:
            self.client.update_schedule(Name=full, GroupName=self.group, **definition)
        except Exception as err:
            storage_error(err, f"updating schedule {full}")
