"""Fires the EventBridge Scheduler schedules the app created, on the dev stack's clock.

The app arms real one-time ``at()`` schedules through the Scheduler API (moto server
locally); nothing local fires them, so this loop does: it reads the group's schedules,
fires each whose time has come on the (possibly scaled) clock by handing its target
input to the worker, and deletes it, as ``ActionAfterCompletion=DELETE`` would.

Recurring schedules (``durable.engine.schedules``, ``schedule.<name>``) fire at each time their
``cron``/``rate`` expression gives on the same clock, with the fire time filled in where
Scheduler would put it (``<aws.scheduler.scheduled-time>``), unless paused.

Every time that fell due is delivered while the loop keeps up, however fast the clock
runs: at x3600 a tick (0.1 s) spans six minutes of the stack's clock, and a
``rate(1 minute)`` schedule has six fires in it. A tick delivers, oldest first, as many of
a schedule's times as fell due in the last ``ON_TIME`` real seconds, at least
``MAX_CATCH_UP`` and at most ``MAX_PER_TICK`` (a schedule that fires faster than the
machine can start runs). More fell due only when the loop stalled (a laptop asleep, a
starved thread): the rest are skipped, as a schedule whose target was unreachable would
lose them. Each time not delivered is said (``say``), never dropped silently; the worker
says what became of each delivered one (started, skipped, missed).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from durable.adapters.dynamodb_support import error_code
from durable.core.clock import Clock
from durable.core.recurrence import next_fire, parse
from durable.ops.render import human

log = logging.getLogger("durable.local")
RECURRING = "schedule."
MAX_CATCH_UP = 5  # backlog fires of a schedule delivered per tick
ON_TIME = 1.0  # real seconds: a fire due less long ago than this is on time, not backlog
MAX_PER_TICK = 100  # fires of one schedule per tick, whatever the clock's speed
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"


def parse_at(expression: str) -> datetime:
    if not (expression.startswith("at(") and expression.endswith(")")):
        raise ValueError(f"not a one-time schedule: {expression}")
    return datetime.strptime(expression[3:-1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)


class SchedulerLoop:
    def __init__(
        self,
        client: Any,
        group: str,
        clock: Clock,
        fire: Callable[[dict[str, Any]], object],
        *,
        interval: float = 0.1,
        say: Callable[[str], object] | None = None,
    ) -> None:
        self.client = client
        self.group = group
        self.clock = clock
        # ``durable dev --time-scale``: the clock's speed (a ScaledClock's; 1 for others).
        scale = getattr(clock, "scale", 1.0)
        self.scale = float(scale) if isinstance(scale, int | float) and scale > 0 else 1.0
        self.fire = fire
        self.interval = interval
        # What the developer reads (durable dev's output): the times not delivered.
        self.say: Callable[[str], object] = say or (lambda text: log.warning("%s", text))
        self.fired = 0
        self.dropped = 0  # recurring fire times not delivered (a backlog, or a flood)
        self.lateness: list[float] = []  # virtual seconds between due time and firing
        self._known: dict[str, tuple[datetime, dict[str, Any]]] = {}
        # recurring schedule name -> (its definition, when it fires next, a rate's origin)
        self._recurring: dict[str, tuple[tuple[str, str], datetime | None, datetime]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="timer-loop", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception:  # a hiccup of the local Scheduler: the sweeper backs us up
                log.warning("timer loop tick failed", exc_info=True)

    def tick(self) -> int:
        names: list[str] = []
        paginator = self.client.get_paginator("list_schedules")
        for page in paginator.paginate(GroupName=self.group):
            names += [s["Name"] for s in page.get("Schedules", [])]
        for gone in set(self._known) - set(names):
            del self._known[gone]
        for gone in set(self._recurring) - set(names):
            del self._recurring[gone]
        now = self.clock.now()
        fired = 0
        for name in names:
            # One timer that fails (its worker unreachable, its schedule read refused) is
            # tried again next tick; it must not delay the others due in this one.
            try:
                fired += self._tick_one(name, now)
            except Exception:
                log.warning("timer %s failed; trying again next tick", name, exc_info=True)
        self.fired += fired
        return fired

    def _tick_one(self, name: str, now: datetime) -> int:
        if name.startswith(RECURRING):
            return self._recurring_tick(name, now)
        if name not in self._known:
            try:
                schedule = self.client.get_schedule(Name=name, GroupName=self.group)
            except Exception as err:
                if error_code(err) == "ResourceNotFoundException":
                    return 0  # deleted since the listing: its run needs it no more
                raise
            when = parse_at(schedule["ScheduleExpression"])
            self._known[name] = (when, json.loads(schedule["Target"].get("Input") or "{}"))
        when, payload = self._known[name]
        if when > now:
            return 0
        self.lateness.append((now - when).total_seconds())
        self.fire(payload)
        try:
            self.client.delete_schedule(Name=name, GroupName=self.group)
        except Exception as err:
            # The woken run deletes its own timers (``Engine.cancel_timers``), often
            # first: a schedule already gone is what this delete wanted.
            if error_code(err) != "ResourceNotFoundException":
                raise
        del self._known[name]
        return 1

    def _recurring_tick(self, name: str, now: datetime) -> int:
        schedule = self.client.get_schedule(Name=name, GroupName=self.group)
        definition = (
            str(schedule["ScheduleExpression"]),
            str(schedule.get("ScheduleExpressionTimezone") or "UTC"),
        )
        rule = parse(*definition)
        known = self._recurring.get(name)
        if known is None or known[0] != definition:  # new, or changed by a deploy
            self._recurring[name] = (definition, next_fire(rule, now, now), now)
            return 0
        _, due, origin = known
        if due is None:  # no fire in the search's window when last asked: ask again
            self._recurring[name] = (definition, next_fire(rule, now, origin), origin)
            return 0
        enabled = schedule.get("State", "ENABLED") == "ENABLED"
        text = schedule["Target"].get("Input") or "{}"
        # The due times, oldest first: the first MAX_PER_TICK kept, the rest counted.
        dues: list[datetime] = []
        count = on_time = 0
        last = due
        while due is not None and due <= now:
            count += 1
            last = due
            if (now - due).total_seconds() / self.scale <= ON_TIME:
                on_time += 1
            if len(dues) < MAX_PER_TICK:
                dues.append(due)
            due = next_fire(rule, due, origin)
        if not enabled or count == 0:  # paused: Scheduler fires nothing, nothing to say
            self._recurring[name] = (definition, due, origin)
            return 0
        take = min(MAX_PER_TICK, max(MAX_CATCH_UP, on_time))
        for when in dues[:take]:
            stamp = _stamp(when)
            self.lateness.append((now - when).total_seconds())
            # One that raises leaves this tick's times due: the next tick delivers them
            # again (a repeat of a fire starts nothing: its key).
            self.fire(json.loads(text.replace(SCHEDULED_TIME, stamp)))
        self._recurring[name] = (definition, due, origin)
        fired = min(take, count)
        if count > fired:
            self.dropped += count - fired
            first = dues[fired] if fired < len(dues) else last
            why = (
                f"more than {MAX_PER_TICK} a tick: the clock (x{self.scale:g}) outruns what "
                "this machine can start; a lower --time-scale delivers them all"
                if on_time > MAX_PER_TICK
                else f"the timer loop fell {human((now - dues[0]).total_seconds() / self.scale)} "
                f"behind (a stall); a tick catches up what falls due in {ON_TIME:g} s of real "
                f"time, at least {MAX_CATCH_UP}"
            )
            times = _stamp(first) if count - fired == 1 else f"{_stamp(first)} .. {_stamp(last)}"
            plural = "" if count - fired == 1 else "s"
            self.say(
                f"schedule {name.removeprefix(RECURRING)}: {count - fired} fire{plural} "
                f"not delivered ({times}): {why}"
            )
        return fired


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
