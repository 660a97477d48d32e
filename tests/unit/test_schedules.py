"""Schedules (``durable.engine.schedules``, ``durable.core.recurrence``): expressions, fires,
reconcile."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from durable import App, Context
from durable.adapters.memory import (
    MemoryEffectStore,
    MemoryInvoker,
    MemoryLedger,
    MemoryRecurring,
)
from durable.core.clock import FakeClock
from durable.core.recurrence import Cron, InvalidExpression, parse
from durable.engine.engine import Engine
from durable.engine.schedules import Schedule, fire, fire_key, reconcile
from durable.errors import RegistrationError, WorkflowNotFound

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)  # a Friday


def cron(expression: str, tz: str = "UTC") -> Cron:
    rule = parse(expression, tz)
    assert isinstance(rule, Cron)
    return rule


def nexts(expression: str, after: datetime, n: int = 3, tz: str = "UTC") -> list[str]:
    rule = cron(expression, tz)
    out = []
    for _ in range(n):
        after = rule.next_after(after)
        out.append(after.strftime("%Y-%m-%d %H:%M"))
    return out


@pytest.mark.parametrize(
    ("expression", "tz", "after", "expected"),
    [
        # weekdays at 9 in Berlin (CET, UTC+1 in December): Friday's has passed
        (
            "cron(0 9 ? * MON-FRI *)",
            "Europe/Berlin",
            T0,
            ["2026-12-07 08:00", "2026-12-08 08:00", "2026-12-09 08:00"],
        ),
        (
            "cron(*/20 * * * ? *)",
            "UTC",
            T0,
            ["2026-12-04 12:20", "2026-12-04 12:40", "2026-12-04 13:00"],
        ),
        (
            "cron(0 12 L * ? *)",
            "UTC",
            datetime(2026, 2, 3, tzinfo=UTC),
            ["2026-02-28 12:00", "2026-03-31 12:00", "2026-04-30 12:00"],
        ),
        (
            "cron(0 12 ? * 6#3 *)",
            "UTC",
            T0,
            ["2026-12-18 12:00", "2027-01-15 12:00", "2027-02-19 12:00"],
        ),
        (
            "cron(0 12 ? * 2L *)",
            "UTC",
            T0,
            ["2026-12-28 12:00", "2027-01-25 12:00", "2027-02-22 12:00"],
        ),
        # the weekday nearest the 1st: Aug 1 2026 is a Saturday, so Monday the 3rd
        (
            "cron(0 6 1W * ? *)",
            "UTC",
            datetime(2026, 7, 15, tzinfo=UTC),
            ["2026-08-03 06:00", "2026-09-01 06:00", "2026-10-01 06:00"],
        ),
        (
            "cron(15 10 ? JAN,JUL SUN 2027)",
            "UTC",
            T0,
            ["2027-01-03 10:15", "2027-01-10 10:15", "2027-01-17 10:15"],
        ),
        # 02:30 does not exist in Berlin on 2026-03-29 (clocks go 02:00 -> 03:00)
        (
            "cron(30 2 * * ? *)",
            "Europe/Berlin",
            datetime(2026, 3, 28, 12, tzinfo=UTC),
            ["2026-03-30 00:30", "2026-03-31 00:30", "2026-04-01 00:30"],
        ),
        # 02:30 happens twice on 2026-10-25: it fires once, at the first
        (
            "cron(30 2 * * ? *)",
            "Europe/Berlin",
            datetime(2026, 10, 24, 12, tzinfo=UTC),
            ["2026-10-25 00:30", "2026-10-26 01:30", "2026-10-27 01:30"],
        ),
    ],
)
def test_cron_fires_when_scheduler_would(
    expression: str, tz: str, after: datetime, expected: list[str]
) -> None:
    assert nexts(expression, after, tz=tz) == expected


def test_a_fire_is_strictly_after_the_given_moment() -> None:
    rule = cron("cron(0 9 * * ? *)")
    at_nine = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
    assert rule.next_after(at_nine - timedelta(seconds=1)) == at_nine
    assert rule.next_after(at_nine) == at_nine + timedelta(days=1)


def test_a_rate_counts_from_its_creation() -> None:
    created = datetime(2026, 12, 4, 12, 7, 30, tzinfo=UTC)
    s = Schedule("tick", "w", "rate(5 minutes)")
    assert s.next_fire(created - timedelta(hours=1), created) == created
    assert s.next_fire(created, created) == created + timedelta(minutes=5)
    assert s.next_fire(created + timedelta(minutes=12), created) == created + timedelta(minutes=15)


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        ("rate(1 minutes)", "write 'rate(1 minute)'"),
        ("rate(5 minute)", "write 'rate(5 minutes)'"),
        ("rate(0 hours)", "at least 1"),
        ("rate(2 weeks)", "'cron(0 9 * * ? *)' or 'rate(1 hour)'"),
        ("at(2026-12-24T18:00:00)", "a sleep in a workflow"),
        ("cron(0 9 * * *)", "6 fields"),
        ("cron(0 9 * * MON *)", "exactly one of day-of-month and day-of-week must be '?'"),
        ("cron(0 9 ? * ? *)", "exactly one"),
        ("cron(60 9 * * ? *)", "minutes 60 is outside 0-59"),
        ("cron(0 25 * * ? *)", "hours 25 is outside 0-23"),
        ("cron(0 9 * FOO ? *)", "'FOO' is not a valid month value"),
        ("cron(0 9 ? * 8 *)", "day-of-week 8 is outside 1-7"),
        ("cron(0 9-5 * * ? *)", "runs backwards"),
        ("cron(0 9 30 2 ? *)", "never fires"),
    ],
)
def test_a_bad_expression_says_what_to_write(expression: str, said: str) -> None:
    with pytest.raises(InvalidExpression) as caught:
        cron(expression).next_after(T0)
    assert said in str(caught.value)


# --- declaring ---------------------------------------------------------------------------


def _app() -> App:
    app = App()

    @app.step
    def note(text: str) -> str:
        return text

    @app.workflow(name="report", schedule="cron(0 9 ? * MON-FRI *)", timezone="Europe/Berlin")
    def report(ctx: Context) -> str:
        return note("sent")

    @app.workflow(name="sync")
    def sync(ctx: Context, source: str) -> str:
        ctx.wait_for_signal("done")
        return note(source)

    app.schedule("sync", "rate(1 hour)", name="sync-crm", input="crm", overlap="skip")
    app.schedule("sync", "rate(1 day)", name="sync-erp", input="erp", missed="catch_up")
    return app


def test_schedules_are_declared_in_code_and_checked_there() -> None:
    app = _app()
    declared = app.schedules()
    assert sorted(declared) == ["report", "sync-crm", "sync-erp"]
    assert declared["report"].timezone == "Europe/Berlin" and declared["report"].input is None
    assert declared["sync-crm"].overlap == "skip" and declared["sync-erp"].missed == "catch_up"
    with pytest.raises(RegistrationError, match="already declared; give this one name="):
        app.schedule("sync", "rate(2 hours)", name="sync-crm", input="x")
    with pytest.raises(RegistrationError, match="schedule 'bad': 'rate\\(1 hours\\)'"):
        app.schedule("sync", "rate(1 hours)", name="bad")
    with pytest.raises(RegistrationError, match="unknown time zone 'Mars/Olympus'"):
        app.schedule("sync", "rate(1 hour)", name="tz", timezone="Mars/Olympus")
    with pytest.raises(RegistrationError, match="overlap is 'allow', 'skip' or 'buffer_one'"):
        app.schedule("sync", "rate(1 hour)", name="ov", overlap="queue")  # type: ignore[arg-type]
    with pytest.raises(RegistrationError, match="a schedule name is 1-48"):
        app.schedule("sync", "rate(1 hour)", name="no spaces")
    with pytest.raises(RegistrationError, match="input must be JSON"):
        app.schedule("sync", "rate(1 hour)", name="obj", input=object())
    app.schedule("report", "rate(1 hour)", name="report-with-input", input={"x": 1})
    with pytest.raises(RegistrationError, match="workflow 'report' takes no input"):
        app.schedules()


def test_a_schedules_input_must_fit_its_workflow() -> None:
    app = App()

    @app.workflow(name="count")
    def count(ctx: Context, n: int) -> int:
        return n

    app.schedule("count", "rate(1 hour)", input="many")
    with pytest.raises(RegistrationError, match=r"schedule 'count': .*input"):
        app.schedules()


def test_a_schedule_of_an_unknown_workflow_is_refused_when_listed() -> None:
    app = App()
    app.schedule("missing", "rate(1 hour)")
    with pytest.raises(WorkflowNotFound, match="no workflow named 'missing'"):
        app.schedules()


def test_apps_compose_with_their_schedules() -> None:
    combined = App().include(_app())
    assert sorted(combined.schedules()) == ["report", "sync-crm", "sync-erp"]
    with pytest.raises(RegistrationError, match="declared in both apps"):
        combined.include(_app())


# --- firing ------------------------------------------------------------------------------


class World:
    def __init__(self) -> None:
        self.clock = FakeClock(T0)
        self.ledger = MemoryLedger()
        self.app = _app()
        self.engine = Engine(
            self.app, self.ledger, MemoryInvoker(), MemoryEffectStore(), clock=self.clock
        )
        self.declared = self.app.schedules()

    def fire(self, name: str, at: datetime, **kw: str) -> tuple[str, str | None]:
        stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")  # as Scheduler fills it in
        fired = fire(self.engine, self.declared[name], stamp, **kw)
        return fired.result, fired.run_id


def test_a_fire_delivered_twice_starts_one_run() -> None:
    w = World()
    first = w.fire("report", T0)
    again = w.fire("report", T0)
    assert first[0] == "started" and again == ("duplicate", first[1])
    run = w.ledger.get_run(first[1] or "")
    assert run is not None and run.idempotency_key == fire_key("report", "2026-12-04T12:00:00.000Z")


def test_a_late_fire_is_skipped_or_caught_up_by_policy() -> None:
    w = World()
    w.clock.advance(timedelta(hours=3))
    assert w.fire("sync-crm", T0)[0] == "skipped_missed"  # 3 h late: dropped
    assert w.fire("sync-erp", T0)[0] == "started"  # catch_up
    assert w.fire("sync-crm", T0 + timedelta(hours=2, minutes=50))[0] == "started"  # in grace


def test_overlap_skip_waits_for_the_schedules_own_run_to_end() -> None:
    w = World()
    result, run_id = w.fire("sync-crm", T0)
    assert result == "started" and run_id is not None
    w.engine.resume(run_id)  # waits for its signal: still going
    w.clock.advance(timedelta(hours=1))
    assert w.fire("sync-crm", T0 + timedelta(hours=1)) == ("skipped_overlap", run_id)
    # another schedule's runs of the same workflow do not count
    assert w.fire("sync-erp", T0 + timedelta(hours=1))[0] == "started"
    from durable.engine.events import send_signal

    send_signal(w.engine, run_id, "done")
    assert w.engine.resume(run_id, reason="event").result == "succeeded"
    w.clock.advance(timedelta(hours=1))
    assert w.fire("sync-crm", T0 + timedelta(hours=2))[0] == "started"


def test_run_now_is_keyed_by_its_request_not_the_clock() -> None:
    w = World()
    w.clock.advance(timedelta(days=3))
    first = w.fire("sync-crm", T0, manual="req-1")  # late and overlapping rules do not apply
    assert first[0] == "started"
    assert w.fire("sync-crm", T0, manual="req-1") == ("duplicate", first[1])
    assert w.fire("sync-crm", T0, manual="req-2")[0] == "started"


# --- reconciling --------------------------------------------------------------------------


def test_reconcile_makes_scheduler_match_the_code_and_keeps_pauses() -> None:
    port = MemoryRecurring(lambda: T0)
    app = _app()
    done = reconcile(port, app.schedules().values())
    assert done.created == ["report", "sync-crm", "sync-erp"] and not done.deleted
    port.set_enabled("sync-crm", False)  # an operator paused it
    port.held["stale"] = port.held["report"].__class__("stale", "rate(1 day)", "UTC", True)
    changed = App().include(app)
    changed._schedules["report"] = Schedule(
        "report", "report", "cron(0 10 ? * MON-FRI *)", "Europe/Berlin"
    )
    done = reconcile(port, changed.schedules().values())
    assert done.updated == ["report"] and done.deleted == ["stale"]
    assert done.unchanged == ["sync-crm", "sync-erp"] and not done.created
    assert port.held["report"].expression == "cron(0 10 ? * MON-FRI *)"
    assert port.held["sync-crm"].enabled is False  # still paused
    again = reconcile(port, changed.schedules().values())
    assert again.unchanged == ["report", "sync-crm", "sync-erp"]


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        # the 15th of March 2026 is a Sunday: the nearest weekday is Monday the 16th
        ("cron(0 6 15W * ? *)", datetime(2026, 3, 1, tzinfo=UTC), "2026-03-16 06:00"),
        # the 14th of March 2026 is a Saturday: Friday the 13th
        ("cron(0 6 14W * ? *)", datetime(2026, 3, 1, tzinfo=UTC), "2026-03-13 06:00"),
        # the 31st of May 2026 is a Sunday, the month's last day: Friday the 29th
        ("cron(0 6 31W * ? *)", datetime(2026, 5, 1, tzinfo=UTC), "2026-05-29 06:00"),
        # the 31st of October 2026 is a Saturday: Friday the 30th
        ("cron(0 6 31W * ? *)", datetime(2026, 10, 1, tzinfo=UTC), "2026-10-30 06:00"),
        # 30W in February means its last day, the 28th (a Saturday in 2026): Friday the 27th
        ("cron(0 6 30W * ? *)", datetime(2026, 2, 1, tzinfo=UTC), "2026-02-27 06:00"),
        # a weekday: that day itself
        ("cron(0 6 10W * ? *)", datetime(2026, 3, 1, tzinfo=UTC), "2026-03-10 06:00"),
        # the first Sunday of a month whose 1st is a Sunday (March 2026)
        ("cron(0 6 ? * SUN#1 *)", datetime(2026, 2, 10, tzinfo=UTC), "2026-03-01 06:00"),
        # the last Saturday of February 2026 (the 28th, the month's last day)
        ("cron(0 6 ? * 7L *)", datetime(2026, 2, 10, tzinfo=UTC), "2026-02-28 06:00"),
    ],
)
def test_nearest_weekdays_and_nth_days(expression: str, after: datetime, expected: str) -> None:
    assert nexts(expression, after, n=1) == [expected]


def test_steps_from_a_start_and_within_a_range() -> None:
    assert cron("cron(5/15 * * * ? *)").minutes == frozenset({5, 20, 35, 50})
    assert cron("cron(10-50/20 * * * ? *)").minutes == frozenset({10, 30, 50})
    assert cron("cron(0 8-10,20 * * ? *)").hours == frozenset({8, 9, 10, 20})
    assert cron("cron(0 9 ? * MON-WED,FRI *)").weekdays.values == frozenset({2, 3, 4, 6})
    assert cron("cron(0 9 1 JAN-DEC/3 ? *)").months == frozenset({1, 4, 7, 10})


def test_a_cron_that_next_fires_past_five_years_is_refused() -> None:
    """Searching further would let a typo (a year long past) hang a request."""
    year = T0.year + 5
    with pytest.raises(InvalidExpression, match="never fires in the next five years"):
        cron(f"cron(0 0 1 1 ? {year + 1})").next_after(T0)
    assert cron(f"cron(0 0 1 1 ? {year})").next_after(T0).year == year


def test_a_rate_checks_its_time_zone_too() -> None:
    with pytest.raises(InvalidExpression, match="unknown time zone"):
        parse("rate(1 day)", "Nowhere/Else")
    assert parse("rate(1 day)", "Asia/Tokyo") == parse("rate(24 hours)")


def test_a_fire_time_must_be_a_time_and_a_bare_one_is_utc() -> None:
    w = World()
    from durable.errors import InvalidInput

    with pytest.raises(InvalidInput, match="scheduled_time 'soon' is not an ISO time"):
        fire(w.engine, w.declared["report"], "soon")
    fired = fire(w.engine, w.declared["report"], "2026-12-04T12:00:00")  # no zone: UTC
    run = w.ledger.get_run(fired.run_id or "")
    assert run is not None
    assert run.idempotency_key == "schedule/report/2026-12-04T12:00:00.000Z"


def test_lateness_is_measured_against_the_grace_exactly() -> None:
    w = World()
    w.clock.advance(timedelta(minutes=15))  # exactly the grace: still on time
    assert w.fire("sync-crm", T0)[0] == "started"
    w.clock.advance(timedelta(seconds=1))
    late = fire(w.engine, w.declared["sync-crm"], "2026-12-04T12:00:00Z")
    assert late.result == "duplicate"  # the same fire: reported before any rule
    later = fire(w.engine, w.declared["sync-crm"], "2026-12-04T11:59:59Z")
    assert (later.result, later.detail) == ("skipped_missed", "0:15:02 late")


def test_overlap_finds_the_schedules_run_past_the_first_page() -> None:
    """The schedule's going run is older than a hundred others of its workflow."""
    w = World()
    started, run_id = w.fire("sync-crm", T0)
    assert started == "started"
    for i in range(100):
        w.clock.advance(timedelta(seconds=1))
        w.engine.start("sync", "other", idempotency_key=f"manual-{i}")
    w.clock.advance(timedelta(minutes=1))
    skipped = fire(w.engine, w.declared["sync-crm"], "2026-12-04T12:02:00Z")
    assert (skipped.result, skipped.run_id) == ("skipped_overlap", run_id)
    assert skipped.detail == "an earlier run is going"


def test_a_missed_rule_must_be_known() -> None:
    with pytest.raises(RegistrationError, match="missed is 'skip' or 'catch_up', not 'later'"):
        Schedule("s", "w", "rate(1 hour)", missed="later")  # type: ignore[arg-type]


def test_the_documented_defaults_and_the_unknown_name_message() -> None:
    s = Schedule("s", "w", "rate(1 hour)")
    assert (s.overlap, s.missed, s.grace) == ("allow", "skip", timedelta(minutes=15))
    w = World()
    started = w.fire("report", T0)
    assert started[0] == "started"
    assert fire(w.engine, w.declared["report"], "2026-12-04T13:00:00Z").detail == ""
    from durable.engine.schedules import find
    from durable.errors import InvalidInput

    with pytest.raises(InvalidInput, match=r"\(known: none\)"):
        find({}, "nightly")
    with pytest.raises(InvalidInput, match=r"\(known: report, sync-crm, sync-erp\)"):
        find(w.declared, "nightly")


def test_buffer_one_keeps_one_fire_waiting_for_the_run_before_it() -> None:
    from durable.core.model import RunStatus
    from durable.engine.events import send_signal

    app = _app()
    app.schedule("sync", "rate(1 hour)", name="sync-hr", input="hr", overlap="buffer_one")
    w = World.__new__(World)
    w.clock, w.ledger, w.app = FakeClock(T0), MemoryLedger(), app
    w.engine = Engine(app, w.ledger, MemoryInvoker(), MemoryEffectStore(), clock=w.clock)
    w.declared = app.schedules()

    def drain() -> None:
        invoker = w.engine.invoker
        assert isinstance(invoker, MemoryInvoker)
        while (item := invoker.pop()) is not None:
            w.engine.resume(item.run_id, reason=item.reason)

    first = w.fire("sync-hr", T0)
    drain()
    w.clock.advance(timedelta(hours=1))
    second = w.fire("sync-hr", T0 + timedelta(hours=1))
    drain()
    w.clock.advance(timedelta(hours=1))
    third = w.fire("sync-hr", T0 + timedelta(hours=2))
    assert first[0] == second[0] == "started"
    assert third == ("skipped_overlap", second[1])  # one is buffered already
    assert first[1] and second[1]
    waiting = w.ledger.get_run(second[1])
    assert waiting is not None and waiting.status == RunStatus.PENDING and waiting.queued_at
    assert waiting.gate == "S#sync#sync-hr"
    send_signal(w.engine, first[1], "done")
    drain()
    now = w.ledger.get_run(second[1])
    assert now is not None and now.status == RunStatus.WAITING  # its turn came
    w.clock.advance(timedelta(hours=1))
    assert w.fire("sync-hr", T0 + timedelta(hours=3))[0] == "started"  # room to buffer again


def test_buffer_one_and_a_concurrency_limit_do_not_mix() -> None:
    app = App()

    @app.workflow(name="sync", concurrency=3)
    def sync(ctx: Context, source: str) -> str:
        return source

    app.schedule("sync", "rate(1 hour)", input="a", overlap="buffer_one")
    with pytest.raises(RegistrationError, match="overlap='buffer_one' keeps the schedule's"):
        app.schedules()
