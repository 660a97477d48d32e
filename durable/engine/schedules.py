"""Schedules: runs started on a clock (``@app.workflow(schedule="cron(0 9 * * ? *)")``).

Each schedule declared in code becomes an EventBridge Scheduler recurring schedule whose
target is the worker with ``{"schedule": name, "scheduled_time": <fire time>}``. The
stack creates, updates and deletes them to match the code (``reconcile``): the deploy's
gate does it once the new version passed its check, ``durable dev`` at start. Nobody
makes one by hand, and a schedule paused by an operator stays paused across deploys.

A fire starts the run with an idempotency key made of the schedule's name and its fire
time (``fire_key``), so a fire delivered twice (Scheduler delivers at least once) starts
one run. Per schedule:

* ``overlap``: ``"allow"`` (default) starts every fire; ``"skip"`` drops a fire while a
  run the schedule started earlier is still going; ``"buffer_one"`` starts it, but it
  waits (in the schedule's own gate, ``durable.core.flow``, one slot) until the run before
  it has ended, and a fire that finds one already waiting is dropped;
* ``missed``: a fire delivered more than ``grace`` late (an outage, Scheduler's retries)
  is dropped with ``"skip"`` (default), started anyway with ``"catch_up"``.

"Run now" (the CLI, the API) starts one with a key of its own, outside the clock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from durable.core.flow import gate_name
from durable.core.ids import derived_run_id
from durable.core.model import format_time
from durable.core.recurrence import Cron, InvalidExpression, Rate, next_fire, parse
from durable.errors import InvalidInput, RegistrationError, StorageError

if TYPE_CHECKING:
    from durable.core.ports import EffectRecord
    from durable.engine.engine_parts import EngineParts

Overlap = Literal["allow", "skip", "buffer_one"]
Missed = Literal["skip", "catch_up"]
_NAME = re.compile(r"^[0-9A-Za-z_.-]{1,48}$")  # fits Scheduler's 64 with our prefix
KEY_PREFIX = "schedule/"
FIRED_BY_PREFIX = "schedule:"  # the requested_by of a schedule's runs (``fired_by``)


@dataclass(frozen=True)
class Schedule:
    """A recurring start of ``workflow`` with ``input``."""

    name: str
    workflow: str
    expression: str
    timezone: str = "UTC"
    input: Any = None
    overlap: Overlap = "allow"
    missed: Missed = "skip"
    grace: timedelta = timedelta(minutes=15)
    recurrence: Rate | Cron = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"schedule {self.name!r}"
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise RegistrationError(
                f"{where}: a schedule name is 1-48 letters, digits, '.', '_' or '-'"
            )
        try:
            object.__setattr__(self, "recurrence", parse(self.expression, self.timezone))
        except InvalidExpression as e:
            raise RegistrationError(f"{where}: {e}") from None
        if self.overlap not in ("allow", "skip", "buffer_one"):
            raise RegistrationError(
                f"{where}: overlap is 'allow', 'skip' or 'buffer_one', not {self.overlap!r}"
            )
        if self.missed not in ("skip", "catch_up"):
            raise RegistrationError(f"{where}: missed is 'skip' or 'catch_up', not {self.missed!r}")
        try:
            json.dumps(self.input)
        except (TypeError, ValueError):
            raise RegistrationError(f"{where}: input must be JSON (a dict, list, ...)") from None

    def next_fire(self, after: datetime, created: datetime | None = None) -> datetime | None:
        """When it fires next after ``after`` (a rate counts from ``created``); None when
        it does not fire within the search's five years (``recurrence.next_fire``)."""
        return next_fire(self.recurrence, after, created or after)

    @property
    def spec(self) -> dict[str, Any]:
        """What Scheduler holds for it (compared by ``reconcile``)."""
        return {"expression": self.expression, "timezone": self.timezone}


def fire_key(schedule: str, scheduled_time: str) -> str:
    return f"{KEY_PREFIX}{schedule}/{scheduled_time}"


@dataclass(frozen=True)
class Fired:
    schedule: str
    result: Literal["started", "duplicate", "skipped_overlap", "skipped_missed"]
    run_id: str | None = None
    detail: str = ""


def fire(
    engine: EngineParts, schedule: Schedule, scheduled_time: str, *, manual: str = ""
) -> Fired:
    """Start the run of one fire of ``schedule`` (at most once per fire time).

    ``manual``: a "run now" request's id (not a clock fire: no overlap or lateness rule).
    """
    try:
        when = datetime.fromisoformat(scheduled_time)  # Scheduler's: 2026-12-04T09:00:00Z
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
    except ValueError:
        raise InvalidInput(
            f"scheduled_time {scheduled_time[:40]!r} is not an ISO time", field="scheduled_time"
        ) from None
    stamp = format_time(when)
    key = fire_key(schedule.name, manual or stamp)
    # A repeat of a fire (Scheduler delivers at least once) is reported as one; the keyed
    # start below is what makes a repeat start nothing, whatever this read saw.
    run_id = derived_run_id(schedule.workflow, key, None)
    if engine.ledger.get_run(run_id) is not None:
        return Fired(schedule.name, "duplicate", run_id)
    if manual:  # outside the clock: no lateness rule; its own key
        return _start(engine, schedule, key)
    now = int(engine.clock.now().timestamp())
    claim = engine.effects.store.begin(_verdict_key(key), now + VERDICT_CLAIM, now=now)
    if claim is not None:
        return _repeat(engine, schedule, key, claim)
    fired = _decide(engine, schedule, key, when)
    verdict = json.dumps({"result": fired.result, "run_id": fired.run_id, "detail": fired.detail})
    engine.effects.store.complete(_verdict_key(key), verdict, now + VERDICT_KEPT)
    return _start(engine, schedule, key) if fired.result == "started" else fired


# A fire's verdict is recorded (the idempotency table) before it is acted on, so every
# delivery of one fire gets the same verdict: a fire skipped while an earlier run went on
# stays skipped when Scheduler delivers it again after that run ended. Kept past
# Scheduler's retry window (24 hours at most) with a day to spare; a claim not completed
# in VERDICT_CLAIM seconds (its worker died) is decided again by the next delivery.
VERDICT_KEPT = 2 * 86_400
VERDICT_CLAIM = 60


def _verdict_key(key: str) -> str:
    return f"{key}#verdict"


def _decide(engine: EngineParts, schedule: Schedule, key: str, when: datetime) -> Fired:
    """What a clock fire does: "started" (not yet: the caller starts it once the verdict is
    recorded), or skipped, by the schedule's rules."""
    late = engine.clock.now() - when
    if late > schedule.grace and schedule.missed == "skip":
        return Fired(schedule.name, "skipped_missed", detail=f"{late} late")
    if schedule.overlap == "skip":
        going = _running(engine, schedule, 1)
        if going:
            return Fired(schedule.name, "skipped_overlap", going[0], "an earlier run is going")
    if schedule.overlap == "buffer_one":
        going = _running(engine, schedule, 2)
        if len(going) > 1:  # one going, one waiting for it: this fire adds nothing
            return Fired(schedule.name, "skipped_overlap", going[0], "a fire is buffered")
    return Fired(schedule.name, "started")


def _start(engine: EngineParts, schedule: Schedule, key: str) -> Fired:
    """The fire's keyed start: at most one run per key, however often it is called."""
    gate = schedule_gate(schedule) if schedule.overlap == "buffer_one" else None
    # The schedule's own namespace: a key beginning "schedule/" from anyone else is refused.
    given = key.removeprefix(KEY_PREFIX)
    run = engine.start(
        schedule.workflow,
        schedule.input,
        idempotency_key=given,
        key_scope="schedule",
        requested_by=fired_by(schedule),
        gate=gate,
    )
    return Fired(schedule.name, "started", run.run_id)


def _repeat(engine: EngineParts, schedule: Schedule, key: str, claim: EffectRecord) -> Fired:
    """Another delivery of a fire already decided: its verdict, not a new one. A fire
    decided "started" whose start a crash cut short is started now (the keyed start
    makes that once)."""
    if claim.reference is None:  # being decided by another delivery right now
        raise StorageError(
            f"fire {key} is being decided by another delivery; try again", retryable=True
        )
    verdict = json.loads(claim.reference)
    if verdict["result"] == "started":
        started = _start(engine, schedule, key)
        return Fired(schedule.name, "duplicate", started.run_id)
    return Fired(schedule.name, "duplicate", verdict.get("run_id"), f"{verdict['result']} already")


def schedule_gate(schedule: Schedule) -> str:
    """The one-slot gate that keeps a ``buffer_one`` schedule's runs one at a time."""
    return gate_name("S", schedule.workflow, schedule.name)


def fired_by(schedule: Schedule) -> str:
    """The ``requested_by`` of the runs a schedule starts. A continue-as-new successor
    copies it (and has no key), so the schedule knows every run of its chains by it;
    no caller of the API can give it (theirs is an IAM identity, a hook's or a source's
    name with a prefix of its own)."""
    return f"{FIRED_BY_PREFIX}{schedule.name}"


def not_the_schedule_s(requested_by: str | None, run_id: str) -> str | None:
    """The ``requested_by`` of a run made from run ``run_id`` by an operator who gave no
    identity (a fork): a schedule's mark is not copied, or the fork's continue-as-new
    successors would count as the schedule's chain and hold back its fires."""
    if requested_by is not None and requested_by.startswith(FIRED_BY_PREFIX):
        return f"fork of {run_id}"
    return requested_by


def _running(engine: EngineParts, schedule: Schedule, enough: int) -> list[str]:
    """Up to ``enough`` runs this schedule started that have not ended, newest first.

    A run of the schedule is one its fire keyed, or a continue-as-new successor of one:
    the chain is the run the overlap rule is about (an hourly sync that pages with
    ``continue_as_new`` is still going). Both are among the workflow's open runs.

    One listing of the open runs, whatever their status (``Ledger.open_runs``): a run
    stays under one listing key from its creation to its end, so a worker claiming or
    suspending it meanwhile cannot hide it. A listing per status read PENDING, RUNNING,
    WAITING and COMPENSATING one after the other, and a run a worker moved from WAITING
    to RUNNING between the RUNNING read and the WAITING one was in neither: a second run
    of a ``skip`` schedule started beside it (the explorer's seed 1289). The open runs of
    a workflow are few, and none of its ended ones is read."""
    prefix = f"{KEY_PREFIX}{schedule.name}/"
    marker = fired_by(schedule)
    found: list[str] = []
    cursor: str | None = None
    while True:
        page = engine.ledger.open_runs(schedule.workflow, limit=100, cursor=cursor)
        for run in page.items:
            if (run.idempotency_key or "").startswith(prefix) or (
                run.continued_from is not None and run.requested_by == marker
            ):
                found.append(run.run_id)
                if len(found) >= enough:
                    return found
        cursor = page.cursor
        if cursor is None:
            return found


# --- making Scheduler match the code ------------------------------------------------------


@dataclass(frozen=True)
class Remote:
    """A recurring schedule as Scheduler holds it."""

    name: str
    expression: str
    timezone: str
    enabled: bool
    created: datetime | None = None

    @property
    def spec(self) -> dict[str, Any]:
        return {"expression": self.expression, "timezone": self.timezone}


class RecurringSchedules(Protocol):
    """The schedules of one stack (one Scheduler group): the adapter's port."""

    def list(self) -> dict[str, Remote]: ...

    def put(self, schedule: Schedule, *, enabled: bool) -> None: ...

    def delete(self, name: str) -> None: ...

    def set_enabled(self, name: str, enabled: bool) -> None: ...


@dataclass
class Reconciled:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def reconcile(port: RecurringSchedules, declared: Iterable[Schedule]) -> Reconciled:
    """Create, update and delete schedules until Scheduler holds what the code declares.
    A paused schedule stays paused (its state is the operator's, not the code's)."""
    wanted = {s.name: s for s in declared}
    have = port.list()
    done = Reconciled()
    for name, schedule in sorted(wanted.items()):
        remote = have.get(name)
        if remote is None:
            port.put(schedule, enabled=True)
            done.created.append(name)
        elif remote.spec != schedule.spec:
            port.put(schedule, enabled=remote.enabled)
            done.updated.append(name)
        else:
            done.unchanged.append(name)
    for name in sorted(set(have) - set(wanted)):
        port.delete(name)
        done.deleted.append(name)
    return done


def find(declared: Mapping[str, Schedule], name: str) -> Schedule:
    try:
        return declared[name]
    except KeyError:
        known = ", ".join(sorted(declared)) or "none"
        raise InvalidInput(
            f"no schedule named {name[:64]!r} in this app (known: {known})", field="schedule"
        ) from None
