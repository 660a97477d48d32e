"""The EventBridge Scheduler timer adapter against moto (schedules, names, deletion)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from durable.adapters.scheduler import SchedulerTimers, at_expression, check_name
from durable.errors import StorageError

TARGET = "arn:aws:lambda:us-east-1:123456789012:function:durable-worker"
ROLE = "arn:aws:iam::123456789012:role/durable-scheduler"
RUN = "01KDVDNA00JRMGKZF444M11TB4"


@pytest.fixture
def client() -> Iterator[Any]:
    from moto import mock_aws

    with mock_aws():
        scheduler = boto3.client("scheduler", region_name="us-east-1")
        scheduler.create_schedule_group(Name="durable-test")
        yield scheduler


@pytest.fixture
def timers(client: Any) -> SchedulerTimers:
    return SchedulerTimers(client, group="durable-test", target_arn=TARGET, role_arn=ROLE)


def test_a_wait_becomes_a_one_time_schedule(timers: SchedulerTimers, client: Any) -> None:
    timers.arm(RUN, "0004", datetime(2026, 1, 4, 0, 0, 0, 250_000, tzinfo=UTC))
    schedule = client.get_schedule(Name=f"{RUN}-0004", GroupName="durable-test")
    assert schedule["ScheduleExpression"] == "at(2026-01-04T00:00:01)"  # rounded up
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["Target"]["Arn"] == TARGET and schedule["Target"]["RoleArn"] == ROLE
    assert json.loads(schedule["Target"]["Input"]) == {"run_id": RUN, "reason": "timer"}


def test_arming_twice_is_harmless_and_a_rearm_gets_a_new_name(
    timers: SchedulerTimers, client: Any
) -> None:
    when = datetime(2026, 1, 4, tzinfo=UTC)
    timers.arm(RUN, "0004", when)
    timers.arm(RUN, "0004", when)  # ConflictException means it exists
    timers.arm(RUN, "0004", when, rearm_at=datetime(2026, 1, 3, 23, 59, tzinfo=UTC))
    names = sorted(s["Name"] for s in client.list_schedules(GroupName="durable-test")["Schedules"])
    assert names == [f"{RUN}-0004", f"{RUN}-0004-r1767484740"]


def test_cancel_deletes_every_schedule_of_the_run_only(
    timers: SchedulerTimers, client: Any
) -> None:
    when = datetime(2026, 1, 4, tzinfo=UTC)
    timers.arm(RUN, "0001", when)
    timers.arm(RUN, "0003", when)
    other = "01KDVDNA00JRMGKZF444M11TB5"
    timers.arm(other, "0001", when)
    timers.cancel_run(RUN)
    timers.cancel_run(RUN)  # nothing left: not an error
    names = [s["Name"] for s in client.list_schedules(GroupName="durable-test")["Schedules"]]
    assert names == [f"{other}-0001"]


def test_names_and_expressions_are_validated_locally() -> None:
    with pytest.raises(ValueError, match="must match"):
        check_name("bad name with spaces")
    with pytest.raises(ValueError, match="must match"):
        check_name("x" * 65)
    with pytest.raises(ValueError, match="timezone-aware"):
        at_expression(datetime(2026, 1, 1))
    assert at_expression(datetime(2026, 1, 1, 12, 0, tzinfo=UTC)) == "at(2026-01-01T12:00:00)"


def test_an_invalid_group_is_refused_before_any_call(client: Any) -> None:
    with pytest.raises(ValueError):
        SchedulerTimers(client, group="no spaces allowed", target_arn=TARGET, role_arn=ROLE)


def test_vendor_errors_become_storage_errors(client: Any) -> None:
    timers = SchedulerTimers(client, group="missing-group", target_arn=TARGET, role_arn=ROLE)
    with pytest.raises(StorageError):
        timers.arm(RUN, "0001", datetime(2026, 1, 4, tzinfo=UTC))


# --- recurring schedules (durable.engine.schedules) ---------------------------------------------


def test_recurring_schedules_are_reconciled_and_paused(client: Any) -> None:
    from durable.adapters.scheduler import SchedulerRecurring
    from durable.engine.schedules import Schedule, reconcile

    port = SchedulerRecurring(client, group="durable-test", target_arn=TARGET, role_arn=ROLE)
    timers = SchedulerTimers(client, group="durable-test", target_arn=TARGET, role_arn=ROLE)
    timers.arm(RUN, "0004", datetime(2030, 1, 4, tzinfo=UTC))  # a timer: not a schedule
    report = Schedule("report", "report", "cron(0 9 ? * MON-FRI *)", "Europe/Berlin")
    sync = Schedule("sync", "sync", "rate(1 hour)", input="crm")
    done = reconcile(port, [report, sync])
    assert done.created == ["report", "sync"]
    held = client.get_schedule(Name="schedule.report", GroupName="durable-test")
    assert held["ScheduleExpression"] == "cron(0 9 ? * MON-FRI *)"
    assert held["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert held["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert held["State"] == "ENABLED" and held["Target"]["Arn"] == TARGET
    assert json.loads(held["Target"]["Input"]) == {
        "schedule": "report",
        "scheduled_time": "<aws.scheduler.scheduled-time>",
    }
    listed = port.list()
    assert sorted(listed) == ["report", "sync"]  # the timer is not listed
    assert listed["sync"].expression == "rate(1 hour)" and listed["sync"].enabled

    port.set_enabled("sync", False)
    assert (
        client.get_schedule(Name="schedule.sync", GroupName="durable-test")["State"] == "DISABLED"
    )
    moved = Schedule("report", "report", "cron(0 10 ? * MON-FRI *)", "Europe/Berlin")
    done = reconcile(port, [moved, sync])
    assert done.updated == ["report"] and done.unchanged == ["sync"]
    assert port.list()["sync"].enabled is False  # a deploy does not resume a paused one
    assert port.list()["report"].expression == "cron(0 10 ? * MON-FRI *)"
    port.set_enabled("sync", True)
    assert port.list()["sync"].enabled is True

    done = reconcile(port, [sync])
    assert done.deleted == ["report"] and sorted(port.list()) == ["sync"]
    names = [s["Name"] for s in client.list_schedules(GroupName="durable-test")["Schedules"]]
    assert f"{RUN}-0004" in names  # the timer was left alone
    port.delete("report")  # already gone: nothing to do


def test_pausing_a_schedule_the_stack_lacks_says_so(client: Any) -> None:
    from durable.adapters.scheduler import SchedulerRecurring
    from durable.errors import InvalidInput

    port = SchedulerRecurring(client, group="durable-test", target_arn=TARGET, role_arn=ROLE)
    with pytest.raises(InvalidInput, match="no schedule 'nightly' in this stack"):
        port.set_enabled("nightly", False)
