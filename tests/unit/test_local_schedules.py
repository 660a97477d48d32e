"""``durable dev``'s timer loop fires recurring schedules on its own clock."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from durable.adapters.scheduler import SchedulerRecurring
from durable.core.clock import FakeClock
from durable.engine.schedules import Schedule, reconcile
from durable.local.timers import MAX_CATCH_UP, SchedulerLoop

pytestmark = pytest.mark.unit
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:durable-worker"
ROLE = "arn:aws:iam::123456789012:role/durable-scheduler"
T0 = datetime(2026, 12, 4, 8, 59, 30, tzinfo=UTC)


@pytest.fixture
def client() -> Iterator[Any]:
    from moto import mock_aws

    with mock_aws():
        scheduler = boto3.client("scheduler", region_name="us-east-1")
        scheduler.create_schedule_group(Name="dev")
        yield scheduler


def _loop(
    client: Any, clock: FakeClock, schedules: list[Schedule]
) -> tuple[SchedulerLoop, list[Any]]:
    port = SchedulerRecurring(client, group="dev", target_arn=TARGET, role_arn=ROLE)
    reconcile(port, schedules)
    fired: list[Any] = []
    return SchedulerLoop(client, "dev", clock, fired.append), fired


def test_a_cron_fires_at_its_times_with_the_time_filled_in(client: Any) -> None:
    clock = FakeClock(T0)
    loop, fired = _loop(client, clock, [Schedule("daily", "w", "cron(0 9 * * ? *)")])
    assert loop.tick() == 0  # first sight: its next time is 09:00
    clock.advance(timedelta(seconds=29))
    assert loop.tick() == 0
    clock.advance(timedelta(seconds=1))
    assert loop.tick() == 1
    assert fired == [{"schedule": "daily", "scheduled_time": "2026-12-04T09:00:00Z"}]
    assert loop.tick() == 0  # once
    clock.advance(timedelta(days=1))
    loop.tick()
    assert fired[-1]["scheduled_time"] == "2026-12-05T09:00:00Z"


def test_a_fast_clock_fires_a_few_missed_times_not_all(client: Any) -> None:
    clock = FakeClock(T0)
    loop, fired = _loop(client, clock, [Schedule("tick", "w", "rate(1 minute)")])
    loop.tick()
    clock.advance(timedelta(hours=1))  # sixty fires due at once
    assert loop.tick() == MAX_CATCH_UP
    times = [f["scheduled_time"] for f in fired]
    assert times[0] == "2026-12-04T09:00:30Z" and len(set(times)) == MAX_CATCH_UP
    clock.advance(timedelta(seconds=59))
    assert loop.tick() == 0  # the rest were skipped; the next is a minute on
    clock.advance(timedelta(seconds=1))
    assert loop.tick() == 1


def test_a_paused_schedule_does_not_fire_and_resumes_on_its_next_time(client: Any) -> None:
    clock = FakeClock(T0)
    loop, fired = _loop(client, clock, [Schedule("tick", "w", "rate(1 minute)")])
    port = SchedulerRecurring(client, group="dev", target_arn=TARGET, role_arn=ROLE)
    loop.tick()
    port.set_enabled("tick", False)
    clock.advance(timedelta(minutes=3))
    assert loop.tick() == 0
    port.set_enabled("tick", True)
    clock.advance(timedelta(minutes=1))
    assert loop.tick() == 1 and json.dumps(fired[0]).count("2026-12-04T09:03:30Z") == 1


def test_a_changed_expression_starts_over_and_a_deleted_one_stops(client: Any) -> None:
    clock = FakeClock(T0)
    loop, fired = _loop(client, clock, [Schedule("s", "w", "rate(1 hour)")])
    port = SchedulerRecurring(client, group="dev", target_arn=TARGET, role_arn=ROLE)
    loop.tick()
    reconcile(port, [Schedule("s", "w", "rate(1 minute)")])  # a redeploy changed it
    loop.tick()
    clock.advance(timedelta(minutes=1))
    assert loop.tick() == 1 and fired[0]["scheduled_time"] == "2026-12-04T09:00:30Z"
    reconcile(port, [])
    clock.advance(timedelta(minutes=5))
    assert loop.tick() == 0 and loop._recurring == {}


def _arm(client: Any, name: str, when: datetime, run_id: str) -> None:
    client.create_schedule(
        Name=name,
        GroupName="dev",
        ScheduleExpression=f"at({when.strftime('%Y-%m-%dT%H:%M:%S')})",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": TARGET, "RoleArn": ROLE, "Input": json.dumps({"run_id": run_id})},
    )


def test_a_timer_the_woken_run_already_deleted_counts_as_fired(client: Any) -> None:
    # Issue 45: the run the timer woke deletes its own timers (Engine.cancel_timers) before
    # the loop's delete: a schedule already gone is success, not a failed tick.
    clock = FakeClock(T0)
    _arm(client, "r1-0001", T0, "r1")

    def fire(payload: dict[str, Any]) -> None:
        fired.append(payload)
        client.delete_schedule(Name="r1-0001", GroupName="dev")

    fired: list[Any] = []
    loop = SchedulerLoop(client, "dev", clock, fire)
    assert loop.tick() == 1
    assert fired == [{"run_id": "r1"}]
    assert loop.tick() == 0  # gone, and not fired again


def test_one_failed_timer_does_not_hold_back_the_others_due_in_its_tick(client: Any) -> None:
    clock = FakeClock(T0)
    for i in range(3):
        _arm(client, f"r{i}-0001", T0, f"r{i}")
    fired: list[str] = []

    def fire(payload: dict[str, Any]) -> None:
        if payload["run_id"] == "r0":
            raise RuntimeError("the worker could not be reached")
        fired.append(payload["run_id"])

    loop = SchedulerLoop(client, "dev", clock, fire)
    assert loop.tick() == 2
    assert sorted(fired) == ["r1", "r2"]
    # The one that failed stays armed and is tried again on the next tick.
    assert loop.tick() == 0 and "r0-0001" in loop._known


def test_a_schedule_with_no_fire_in_the_window_waits_and_the_others_fire(client: Any) -> None:
    clock = FakeClock(datetime(2096, 3, 1, 8, 59, tzinfo=UTC))
    schedules = [
        Schedule("leap", "w", "cron(0 0 29 2 ? *)"),
        Schedule("daily", "w", "cron(0 9 * * ? *)"),
    ]
    loop, fired = _loop(client, clock, schedules)
    assert loop.tick() == 0
    clock.advance(timedelta(minutes=1))
    assert loop.tick() == 1
    assert fired == [{"schedule": "daily", "scheduled_time": "2096-03-01T09:00:00Z"}]
    clock.set(datetime(2099, 3, 1, tzinfo=UTC))  # from here the window reaches 2104
    loop.tick()
    assert loop._recurring["schedule.leap"][1] == datetime(2104, 2, 29, tzinfo=UTC)
