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
from typing import TYPE_CHECKING

from durable.adapters.dynamodb_support import error_code, storage_error
from durable.ids import timer_name

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


class SchedulerTimers:
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
