"""Issue 46 item 3: every fire's verdict is kept where it can be listed, and under
``durable dev --time-scale`` a fire is not missed because the clock runs fast.

The engine side (``durable.engine.schedules``): each verdict (started, duplicate, skipped
for overlap, missed, a run now) lands in the schedule's recent fires, newest first and
bounded; lateness is judged in real seconds under a time scale. The dev timer loop side
(``durable.local.timers``): at x3600 every fire time is delivered and started, and a time
the loop does not deliver is said."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest

from durable.adapters.scheduler import SchedulerRecurring
from durable.core.clock import Epoch, FakeClock, ScaledClock
from durable.engine.schedules import (
    RECENT_FIRES,
    FireVerdict,
    Schedule,
    fire,
    fires_gate,
    lateness,
    recent_fires,
    reconcile,
)
from durable.local.timers import MAX_CATCH_UP, SchedulerLoop
from tests.unit.test_schedules import T0, World

pytestmark = pytest.mark.unit
RUSH = 3600.0  # the scaffold's `make dev TIME_SCALE=3600`


class RushedClock(FakeClock):
    """A fake clock that says it runs at x3600, as durable dev's ScaledClock does."""

    scale = RUSH


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")  # as Scheduler fills it in


def _recent(w: World, name: str) -> list[tuple[str, str, str | None]]:
    return [
        (f.scheduled_time, f.result, f.run_id) for f in recent_fires(w.ledger, w.declared[name])
    ]


# --- the engine records every verdict ------------------------------------------------------


def test_a_started_fire_is_listed_with_its_run() -> None:
    w = World()
    result, run_id = w.fire("report", T0)
    assert result == "started" and run_id is not None
    assert _recent(w, "report") == [("2026-12-04T12:00:00.000Z", "started", run_id)]
    (entry,) = recent_fires(w.ledger, w.declared["report"])
    assert entry.decided_at == "2026-12-04T12:00:00.000Z" and not entry.manual


def test_a_repeat_delivery_is_listed_as_a_duplicate() -> None:
    w = World()
    _, run_id = w.fire("report", T0)
    w.fire("report", T0)
    assert _recent(w, "report") == [
        ("2026-12-04T12:00:00.000Z", "duplicate", run_id),
        ("2026-12-04T12:00:00.000Z", "started", run_id),
    ]


def test_a_fire_skipped_for_overlap_is_listed_with_the_run_that_held_it_back() -> None:
    w = World()
    _, first = w.fire("sync-crm", T0)
    assert first is not None
    w.engine.resume(first)  # waits for its signal: still going
    w.clock.advance(timedelta(hours=1))
    assert w.fire("sync-crm", T0 + timedelta(hours=1)) == ("skipped_overlap", first)
    (newest, _) = recent_fires(w.ledger, w.declared["sync-crm"])
    assert (newest.result, newest.run_id) == ("skipped_overlap", first)
    assert newest.detail == "an earlier run is going"


def test_a_missed_fire_is_listed_with_how_late_it_came() -> None:
    w = World()
    w.clock.advance(timedelta(hours=3))
    assert w.fire("sync-crm", T0)[0] == "skipped_missed"
    (missed,) = recent_fires(w.ledger, w.declared["sync-crm"])
    assert (missed.result, missed.run_id, missed.detail) == ("skipped_missed", None, "3:00:00 late")


def test_a_caught_up_fire_says_it_was_late() -> None:
    w = World()
    w.clock.advance(timedelta(hours=3))
    assert w.fire("sync-erp", T0)[0] == "started"  # missed="catch_up"
    (caught,) = recent_fires(w.ledger, w.declared["sync-erp"])
    assert caught.detail == "3:00:00 late, caught up"


def test_a_run_now_is_listed_as_one() -> None:
    w = World()
    result, run_id = w.fire("report", T0, manual="now-ops-1")
    assert result == "started"
    (entry,) = recent_fires(w.ledger, w.declared["report"])
    assert (entry.result, entry.run_id, entry.manual, entry.detail) == (
        "started",
        run_id,
        True,
        "run now",
    )


def test_the_list_keeps_the_last_fires_newest_first() -> None:
    w = World()
    times = [T0 + timedelta(days=d) for d in range(RECENT_FIRES + 3)]
    for at in times:
        w.clock.set(at)
        assert w.fire("sync-erp", at)[0] == "started"
    listed = [f.scheduled_time for f in recent_fires(w.ledger, w.declared["sync-erp"])]
    expected = [f"{_stamp(at)[:19]}.000Z" for at in reversed(times)]
    assert listed == expected[:RECENT_FIRES]
    # One small item a schedule, bounded: the gate's version counts the writes.
    gate = w.ledger.read_gate(fires_gate(w.declared["sync-erp"]))
    assert len(gate.booked) == RECENT_FIRES and gate.version == len(times)
    assert gate.holders == () and gate.queue == ()


def test_each_schedule_has_its_own_list() -> None:
    w = World()
    w.fire("report", T0)
    assert recent_fires(w.ledger, w.declared["sync-crm"]) == []


def test_a_failed_write_of_the_list_does_not_fail_the_fire() -> None:
    w = World()

    def refused(name: str, state: object) -> bool:
        raise RuntimeError("the ledger is throttled")

    w.ledger.write_gate = refused  # type: ignore[method-assign]
    assert w.fire("report", T0)[0] == "started"


def test_a_line_a_later_version_wrote_is_passed_over() -> None:
    assert FireVerdict.from_json('{"what": 1}') is None
    entry = FireVerdict("2026-12-04T12:00:00.000Z", "started", "r1", "x" * 400, "t", True)
    back = FireVerdict.from_json(entry.to_json())
    assert back is not None and back.run_id == "r1" and len(back.detail) == 160


# --- lateness under a time scale ------------------------------------------------------------


def _rushed_world() -> World:
    w = World()
    w.clock = RushedClock(T0)
    w.engine.clock = w.clock
    return w


def test_under_x3600_a_fire_late_by_normal_latency_is_started_not_missed() -> None:
    """GIVEN x3600 WHEN the fire reaches the worker half a real second after its time
    (30 minutes on the stack's clock: a tick, a queued worker) THEN it starts, its detail
    saying both; before, it was recorded as missed (past the 15-minute grace)."""
    w = _rushed_world()
    w.clock.advance(timedelta(seconds=0.5 * RUSH))
    assert w.fire("sync-crm", T0)[0] == "started"
    (entry,) = recent_fires(w.ledger, w.declared["sync-crm"])
    assert entry.detail == "0:30:00 (0.5 s real) late"


def test_under_x3600_a_fire_later_than_its_grace_in_real_time_is_missed() -> None:
    w = _rushed_world()
    w.clock.advance(timedelta(minutes=16) * RUSH)  # 16 real minutes: the stack was stuck
    assert w.fire("sync-crm", T0)[0] == "skipped_missed"


def test_lateness_divides_by_the_clocks_scale_and_is_unchanged_at_real_time() -> None:
    late = timedelta(hours=1)
    assert lateness(FakeClock(T0), late) == late
    assert lateness(RushedClock(T0), late) == timedelta(seconds=1)
    scaled = ScaledClock(Epoch(RUSH, time.time(), T0.timestamp()))
    assert lateness(scaled, late) == timedelta(seconds=1)
    assert lateness(ScaledClock(Epoch(1.0, time.time(), T0.timestamp())), late) == late


# --- the dev timer loop at x3600 -------------------------------------------------------------

TARGET = "arn:aws:lambda:us-east-1:123456789012:function:durable-worker"
ROLE = "arn:aws:iam::123456789012:role/durable-scheduler"


@pytest.fixture
def client() -> Iterator[Any]:
    from moto import mock_aws

    with mock_aws():
        scheduler = boto3.client("scheduler", region_name="us-east-1")
        scheduler.create_schedule_group(Name="dev")
        yield scheduler


def test_the_dev_loop_at_x3600_delivers_every_fire_and_none_is_missed(client: Any) -> None:
    """GIVEN durable dev at x3600 with an hourly and a minutely schedule, each tick's
    fires reaching the worker 0.3 s later (18 minutes of the stack's clock: a busy
    worker) and the next tick 0.1 s after that WHEN two real seconds pass (two hours of
    the stack) THEN every fire time is delivered once and every one starts its run.

    Before: the loop delivered five of the six minute fires a tick and said nothing of
    the sixth, and the worker judged the 18 minutes against the 15-minute grace and
    recorded every delivered fire as missed."""
    w = _rushed_world()
    w.app.schedule("sync", "rate(1 minute)", name="minutely", input="m")
    w.app.schedule("sync", "cron(0 * * * ? *)", name="hourly", input="h")
    w.declared = w.app.schedules()
    port = SchedulerRecurring(client, group="dev", target_arn=TARGET, role_arn=ROLE)
    ours = [w.declared["minutely"], w.declared["hourly"]]
    reconcile(port, ours)
    said: list[str] = []
    delivered: list[dict[str, Any]] = []
    loop = SchedulerLoop(client, "dev", w.clock, delivered.append, say=said.append)
    verdicts: dict[tuple[str, str], str] = {}
    tick, latency = timedelta(seconds=0.1 * RUSH), timedelta(seconds=0.3 * RUSH)
    loop.tick()  # first sight of each: its next time
    for _ in range(6):  # 0.4 s real (24 minutes) each: ticks at 12:06, 12:30 .. 14:06
        w.clock.advance(tick)
        loop.tick()
        w.clock.advance(latency)  # the worker takes the events up
        for event in delivered:
            fired = fire(w.engine, w.declared[event["schedule"]], event["scheduled_time"])
            verdicts[(event["schedule"], event["scheduled_time"])] = fired.result
        delivered.clear()
    minutes = [t for (name, t) in verdicts if name == "minutely"]
    assert len(minutes) == 126 and len(set(minutes)) == 126  # every minute to 14:06
    assert [t for (name, t) in verdicts if name == "hourly"] == [
        "2026-12-04T13:00:00Z",
        "2026-12-04T14:00:00Z",
    ]
    assert set(verdicts.values()) == {"started"}, set(verdicts.values())
    assert said == [] and loop.dropped == 0
    newest = recent_fires(w.ledger, w.declared["hourly"])[0]
    assert newest.result == "started" and newest.detail.endswith("s real) late")


def test_the_loop_says_the_backlog_it_does_not_deliver(client: Any) -> None:
    """A loop that stalled (a laptop asleep for ten real seconds at x3600) delivers, oldest
    first, as many times as fall due in a real second (60 of a minutely schedule; at
    least MAX_CATCH_UP), skips the rest and says how many and which: never silently."""
    clock = RushedClock(T0)
    port = SchedulerRecurring(client, group="dev", target_arn=TARGET, role_arn=ROLE)
    reconcile(port, [Schedule("minutely", "w", "rate(1 minute)")])
    said: list[str] = []
    delivered: list[dict[str, Any]] = []
    loop = SchedulerLoop(client, "dev", clock, delivered.append, say=said.append)
    loop.tick()
    clock.advance(timedelta(seconds=10 * RUSH))  # 600 fire times, the last 61 in a second
    assert loop.tick() == 61 > MAX_CATCH_UP
    assert delivered[0]["scheduled_time"] == "2026-12-04T12:01:00Z"
    assert loop.dropped == 600 - 61
    (line,) = said
    assert line.startswith(
        "schedule minutely: 539 fires not delivered "
        "(2026-12-04T13:02:00Z .. 2026-12-04T22:00:00Z): the timer loop fell 10.0 s behind"
    ), line


def test_a_clock_faster_than_the_machine_is_said_too(client: Any) -> None:
    class Flooded(FakeClock):
        scale = 86400.0

    clock = Flooded(T0)
    port = SchedulerRecurring(client, group="dev", target_arn=TARGET, role_arn=ROLE)
    reconcile(port, [Schedule("minutely", "w", "rate(1 minute)")])
    said: list[str] = []
    loop = SchedulerLoop(client, "dev", clock, lambda event: None, say=said.append)
    loop.tick()
    clock.advance(timedelta(seconds=0.2 * 86400))  # one slow tick: 288 fire times
    assert loop.tick() == 100 and loop.dropped == 188
    assert "outruns what this machine can start" in said[0]


def test_a_paused_schedule_says_nothing(client: Any) -> None:
    clock = RushedClock(T0)
    port = SchedulerRecurring(client, group="dev", target_arn=TARGET, role_arn=ROLE)
    reconcile(port, [Schedule("minutely", "w", "rate(1 minute)")])
    said: list[str] = []
    loop = SchedulerLoop(client, "dev", clock, lambda event: None, say=said.append)
    loop.tick()
    port.set_enabled("minutely", False)
    clock.advance(timedelta(seconds=10 * RUSH))
    assert loop.tick() == 0 and said == [] and loop.dropped == 0
