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
  is dropped with ``"skip"`` (default), started anyway with ``"catch_up"``. Under
  ``durable dev --time-scale N`` the lateness is judged in real seconds (``lateness``):
  delivery latency is real time, and the fast clock would make it N times longer.

"Run now" (the CLI, the API) starts one with a key of its own, outside the clock.

Every fire's verdict (started, duplicate, skipped for overlap, missed) is kept in a short
list per schedule (``recent_fires``), newest last, that ``GET /schedules``, ``durable
schedules`` and the console show: a fire that starts nothing is said, not silent.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from durable.core.flow import GateState, gate_name
from durable.core.ids import derived_run_id
from durable.core.model import format_time
from durable.core.recurrence import Cron, InvalidExpression, Rate, next_fire, parse
from durable.errors import InvalidInput, RegistrationError, StorageError

if TYPE_CHECKING:
    from durable.core.ports import EffectRecord, LedgerReads
    from durable.engine.engine_parts import EngineParts

Overlap = Literal["allow", "skip", "buffer_one"]
Missed = Literal["skip", "catch_up"]
_NAME = re.compile(r"^[0-9A-Za-z_.-]{1,48}$")  # fits Scheduler's 64 with our prefix
KEY_PREFIX = "schedule/"
FIRED_BY_PREFIX = "schedule:"  # the requested_by of a schedule's runs (``fired_by``)
log = logging.getLogger("durable.schedules")


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


Result = Literal["started", "duplicate", "skipped_overlap", "skipped_missed"]


@dataclass(frozen=True)
class Fired:
    schedule: str
    result: Result
    run_id: str | None = None
    detail: str = ""


def fire(
    engine: EngineParts, schedule: Schedule, scheduled_time: str, *, manual: str = ""
) -> Fired:
    """Start the run of one fire of ``schedule`` (at most once per fire time), and add its
    verdict to the schedule's recent fires (``recent_fires``).

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
    fired = _fire(engine, schedule, stamp, when, manual)
    _remember(engine, schedule, stamp, fired, manual)
    return fired


def _fire(
    engine: EngineParts, schedule: Schedule, stamp: str, when: datetime, manual: str
) -> Fired:
    key = fire_key(schedule.name, manual or stamp)
    # A repeat of a fire (Scheduler delivers at least once) is reported as one; the keyed
    # start below is what makes a repeat start nothing, whatever this read saw.
    run_id = derived_run_id(schedule.workflow, key, None)
    if engine.ledger.get_run(run_id) is not None:
        return Fired(schedule.name, "duplicate", run_id, "its run exists already")
    if manual:  # outside the clock: no lateness rule; its own key
        return _start(engine, schedule, key, "run now")
    now = int(engine.clock.now().timestamp())
    claim = engine.effects.store.begin(_verdict_key(key), now + VERDICT_CLAIM, now=now)
    if claim is not None:
        return _repeat(engine, schedule, key, claim)
    fired = _decide(engine, schedule, key, when)
    verdict = json.dumps({"result": fired.result, "run_id": fired.run_id, "detail": fired.detail})
    engine.effects.store.complete(_verdict_key(key), verdict, now + VERDICT_KEPT)
    if fired.result == "started":
        return _start(engine, schedule, key, fired.detail)
    return fired


# A fire's verdict is recorded (the idempotency table) before it is acted on, so every
# delivery of one fire gets the same verdict: a fire skipped while an earlier run went on
# stays skipped when Scheduler delivers it again after that run ended. Kept past
# Scheduler's retry window (24 hours at most) with a day to spare; a claim not completed
# in VERDICT_CLAIM seconds (its worker died) is decided again by the next delivery.
VERDICT_KEPT = 2 * 86_400
VERDICT_CLAIM = 60


def _verdict_key(key: str) -> str:
    return f"{key}#verdict"


def lateness(clock: object, late: timedelta) -> timedelta:
    """How late a fire is, as judged against its grace: ``late`` on the stack's clock,
    divided by the clock's time scale (``durable dev --time-scale``; 1 everywhere else).

    Delivery latency (the dev timer loop's tick, an event queued behind a busy worker, a
    cold start) is real time, which a clock running N times faster shows N times longer:
    at x3600 a quarter of a second reads as the default 15-minute grace, and fires were
    recorded as missed that came as fast as the machine could bring them. Judged in real
    seconds, a fire is missed under a time scale when it comes more than ``grace`` of wall
    time late (N x ``grace`` of the stack's clock): only a stack that could not deliver
    it (stopped, or its workers jammed) misses one. At scale 1 nothing changes."""
    scale = getattr(clock, "scale", 1.0)  # ScaledClock's; the Clock port has no scale
    if not isinstance(scale, int | float) or scale <= 1:
        return late
    return late / scale


def _decide(engine: EngineParts, schedule: Schedule, key: str, when: datetime) -> Fired:
    """What a clock fire does: "started" (not yet: the caller starts it once the verdict is
    recorded), or skipped, by the schedule's rules."""
    late = engine.clock.now() - when
    judged = lateness(engine.clock, late)
    said = _late(late, judged)
    if judged > schedule.grace and schedule.missed == "skip":
        return Fired(schedule.name, "skipped_missed", detail=f"{said} late")
    if schedule.overlap == "skip":
        going = _running(engine, schedule, 1)
        if going:
            return Fired(schedule.name, "skipped_overlap", going[0], "an earlier run is going")
    if schedule.overlap == "buffer_one":
        going = _running(engine, schedule, 2)
        if len(going) > 1:  # one going, one waiting for it: this fire adds nothing
            return Fired(schedule.name, "skipped_overlap", going[0], "a fire is buffered")
    if judged > schedule.grace:
        return Fired(schedule.name, "started", detail=f"{said} late, caught up")
    return Fired(schedule.name, "started", detail=f"{said} late" if late >= _SAID_LATE else "")


_SAID_LATE = timedelta(seconds=1)  # later than this, a started fire's lateness is said


def _late(late: timedelta, judged: timedelta) -> str:
    """``0:42:00`` or, under a time scale, ``0:42:00 (0.7 s real)``."""
    whole = timedelta(seconds=round(late.total_seconds()))
    if judged == late:
        return str(whole)
    return f"{whole} ({judged.total_seconds():.1f} s real)"


def _start(engine: EngineParts, schedule: Schedule, key: str, detail: str = "") -> Fired:
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
    return Fired(schedule.name, "started", run.run_id, detail)


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
        return Fired(schedule.name, "duplicate", started.run_id, "started already")
    return Fired(schedule.name, "duplicate", verdict.get("run_id"), f"{verdict['result']} already")


def schedule_gate(schedule: Schedule) -> str:
    """The one-slot gate that keeps a ``buffer_one`` schedule's runs one at a time."""
    return gate_name("S", schedule.workflow, schedule.name)


# --- the recent fires of a schedule ---------------------------------------------------
#
# Kept in one small item per schedule, a flow-control gate item of the ledger (kind "F",
# ``durable.core.flow``), holding the last RECENT_FIRES verdicts, oldest first, as JSON
# lines in its ``booked`` list. Why there:
# * every process that fires (the deployed fire handler, ``durable dev``'s workers, "run
#   now" through the API) already holds the ledger, and every ledger (DynamoDB, memory,
#   the test kit's) stores gates: no new table, port or permission;
# * a reader lists a schedule's recent fires with one strongly consistent read of one
#   item (``GET /schedules``: one per schedule), where the idempotency table's per-fire
#   verdicts (``_verdict_key``) can only be read one fire time at a time;
# * bounded: the item never grows past RECENT_FIRES entries (about 2 KB); a gate item
#   has no expiry, and one is left per schedule ever fired.
# Cost: one read and one conditional write per fire (a conflict with a fire of the same
# schedule at the same moment reads again). The list is what it says it is, a view: the
# verdict a repeat delivery obeys stays the idempotency table's, and a list write that
# fails is logged and the fire goes on.
RECENT_FIRES = 10
_RECENT_TRIES = 3
_DETAIL_KEPT = 160  # characters of a verdict's detail kept in the list


@dataclass(frozen=True)
class FireVerdict:
    """One fire of a schedule as its recent fires list it."""

    scheduled_time: str  # the fire time (ledger format); a "run now": when it was asked
    result: Result
    run_id: str | None = None
    detail: str = ""
    decided_at: str = ""  # on the stack's clock
    manual: bool = False  # a "run now", not a fire of the clock

    def to_json(self) -> str:
        return json.dumps(
            {
                "at": self.scheduled_time,
                "result": self.result,
                "run_id": self.run_id,
                "detail": self.detail[:_DETAIL_KEPT],
                "decided": self.decided_at,
                "manual": self.manual,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> FireVerdict | None:
        try:
            raw = json.loads(text)
            return cls(
                scheduled_time=str(raw["at"]),
                result=raw["result"],
                run_id=raw.get("run_id"),
                detail=str(raw.get("detail") or ""),
                decided_at=str(raw.get("decided") or ""),
                manual=bool(raw.get("manual")),
            )
        except (ValueError, KeyError, TypeError):  # a line a later version wrote
            return None


def fires_gate(schedule: Schedule) -> str:
    """The item that keeps ``schedule``'s recent fires (see RECENT_FIRES)."""
    return gate_name("F", schedule.workflow, schedule.name)


def recent_fires(ledger: LedgerReads, schedule: Schedule) -> list[FireVerdict]:
    """The schedule's last RECENT_FIRES verdicts, newest first (one read)."""
    state = ledger.read_gate(fires_gate(schedule))
    found = [FireVerdict.from_json(line) for line in reversed(state.booked)]
    return [f for f in found if f is not None]


def _remember(
    engine: EngineParts, schedule: Schedule, stamp: str, fired: Fired, manual: str
) -> None:
    """Add ``fired`` to the schedule's recent fires; never fails the fire."""
    entry = FireVerdict(
        scheduled_time=stamp,
        result=fired.result,
        run_id=fired.run_id,
        detail=fired.detail,
        decided_at=format_time(engine.clock.now()),
        manual=bool(manual),
    ).to_json()
    name = fires_gate(schedule)
    try:
        for _ in range(_RECENT_TRIES):
            state = engine.ledger.read_gate(name)
            kept = (*state.booked, entry)[-RECENT_FIRES:]
            if engine.ledger.write_gate(name, GateState(booked=kept, version=state.version)):
                return
        log.warning("schedule %s: its recent fires were not updated (busy)", schedule.name)
    except Exception:  # the fire's run is what matters; the list is a view of it
        log.warning("schedule %s: its recent fires were not updated", schedule.name, exc_info=True)


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
