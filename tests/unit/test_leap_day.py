"""Time at its edges, as examples: the 29th of February, the ends of months and years, a
rate counted across a daylight-saving change, and the extremes of what an expression may
say (the smallest and largest rate, a cron that fires only on leap days, years near the
end of the search). Each one is a moment a schedule must answer without an error other
than ``InvalidExpression``; ``test_recurrence_properties.py`` checks the same rules
against an independent cron library."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from durable.core.recurrence import SEARCH_YEARS, Cron, InvalidExpression, Rate, parse
from durable.engine.schedules import Schedule

pytestmark = pytest.mark.unit

NEW_YORK = ZoneInfo("America/New_York")


def cron(expression: str, timezone: str = "UTC") -> Cron:
    rule = parse(expression, timezone)
    assert isinstance(rule, Cron)
    return rule


def rate(expression: str) -> Rate:
    rule = parse(expression)
    assert isinstance(rule, Rate)
    return rule


def test_a_daily_cron_answers_on_the_29th_of_february() -> None:
    """The search's end was the same date five years on, which a 29th of February lacks."""
    leap_day = datetime(2028, 2, 29, 10, 0, tzinfo=UTC)
    assert cron("cron(0 9 * * ? *)").next_after(leap_day) == datetime(2028, 3, 1, 9, tzinfo=UTC)
    before_nine = leap_day.replace(hour=8)
    assert cron("cron(0 9 * * ? *)").next_after(before_nine) == leap_day.replace(hour=9)


def test_every_schedule_shows_its_next_fire_on_the_29th_of_february() -> None:
    """``GET /schedules``, the dev timers and the test kit all ask ``next_fire``."""
    leap_day = datetime(2028, 2, 29, 12, 0, tzinfo=UTC)
    for expression in ("cron(0 9 * * ? *)", "cron(0/15 * * * ? *)", "cron(0 0 L * ? *)"):
        fire = Schedule("s", "w", expression).next_fire(leap_day)
        assert fire is not None and fire > leap_day


def test_the_local_date_decides_not_the_utc_one() -> None:
    """At 02:00 UTC on the 1st of March it is still the 29th of February in New York."""
    late_evening = datetime(2028, 3, 1, 2, 0, tzinfo=UTC)
    rule = cron("cron(30 21 * * ? *)", "America/New_York")
    assert rule.next_after(late_evening) == datetime(2028, 3, 1, 2, 30, tzinfo=UTC)
    nine = cron("cron(0 9 * * ? *)", "America/New_York").next_after(late_evening)
    assert nine == datetime(2028, 3, 1, 14, 0, tzinfo=UTC)  # 09:00 EST on the 1st


def test_a_leap_day_cron_fires_every_fourth_year() -> None:
    rule = cron("cron(0 0 29 2 ? *)")
    assert rule.next_after(datetime(2026, 6, 1, tzinfo=UTC)) == datetime(2028, 2, 29, tzinfo=UTC)
    assert rule.next_after(datetime(2028, 2, 29, tzinfo=UTC)) == datetime(2032, 2, 29, tzinfo=UTC)
    # the day before the 1st of March 2032 counts
    last = datetime(2032, 2, 29, 23, 59, tzinfo=UTC)
    assert rule.next_after(last - timedelta(days=1)) == datetime(2032, 2, 29, tzinfo=UTC)


def test_a_leap_day_cron_across_2100_is_refused_clearly() -> None:
    """2100 is not a leap year: from March 2096 the next 29th of February is in 2104, eight
    years on, past the search. The refusal is the documented one, not a ValueError."""
    rule = cron("cron(0 0 29 2 ? *)")
    assert rule.next_after(datetime(2096, 2, 28, tzinfo=UTC)) == datetime(2096, 2, 29, tzinfo=UTC)
    for refused in (datetime(2096, 3, 1, tzinfo=UTC), datetime(2099, 2, 28, 23, 59, tzinfo=UTC)):
        with pytest.raises(InvalidExpression, match="never fires in the next five years"):
            rule.next_after(refused)
    # from March 2099 the window reaches the 29th of February 2104
    assert rule.next_after(datetime(2099, 3, 1, tzinfo=UTC)) == datetime(2104, 2, 29, tzinfo=UTC)


def test_the_search_ends_five_years_on_even_from_a_29th_of_february() -> None:
    """From the 29th of February 2028 the search reaches the 28th of February 2033."""
    assert SEARCH_YEARS == 5
    leap_day = datetime(2028, 2, 29, 12, 0, tzinfo=UTC)
    in_reach = cron("cron(0 12 28 2 ? 2033)").next_after(leap_day)
    assert in_reach == datetime(2033, 2, 28, 12, tzinfo=UTC)
    with pytest.raises(InvalidExpression, match="never fires in the next five years"):
        cron("cron(0 12 1 3 ? 2033)").next_after(leap_day)


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        # the last day of February, leap year and not
        ("cron(0 12 L * ? *)", datetime(2028, 2, 1, tzinfo=UTC), datetime(2028, 2, 29, 12)),
        ("cron(0 12 L * ? *)", datetime(2027, 2, 1, tzinfo=UTC), datetime(2027, 2, 28, 12)),
        # the 31st: only the months that have one
        ("cron(0 0 31 * ? *)", datetime(2028, 4, 1, tzinfo=UTC), datetime(2028, 5, 31)),
        # the 30th skips February, even a leap one
        ("cron(0 0 30 * ? *)", datetime(2028, 1, 31, tzinfo=UTC), datetime(2028, 3, 30)),
        # the last Tuesday of February 2028 is the 29th
        ("cron(0 0 ? 2 3L *)", datetime(2028, 2, 1, tzinfo=UTC), datetime(2028, 2, 29)),
        # the fifth Tuesday of February: only when it has 29 days and starts on a Tuesday
        ("cron(0 0 ? 2 3#5 *)", datetime(2025, 1, 1, tzinfo=UTC), datetime(2028, 2, 29)),
        # the weekday nearest the 29th in February 2028 (a Tuesday): the 29th itself
        ("cron(0 0 29W 2 ? *)", datetime(2028, 1, 1, tzinfo=UTC), datetime(2028, 2, 29)),
        # the year's last minute, and the next year's first
        (
            "cron(59 23 31 12 ? *)",
            datetime(2028, 12, 31, 23, tzinfo=UTC),
            datetime(2028, 12, 31, 23, 59),
        ),
        ("cron(0 0 1 1 ? *)", datetime(2028, 12, 31, 23, 59, 59, tzinfo=UTC), datetime(2029, 1, 1)),
    ],
)
def test_month_and_year_ends(expression: str, after: datetime, expected: datetime) -> None:
    assert cron(expression).next_after(after) == expected.replace(tzinfo=UTC)


def test_the_year_field_up_to_its_last_year() -> None:
    """2199 is the last year Scheduler takes; after its last fire there is none to find."""
    rule = cron("cron(59 23 31 12 ? 2199)")
    assert rule.next_after(datetime(2195, 1, 1, tzinfo=UTC)) == datetime(
        2199, 12, 31, 23, 59, tzinfo=UTC
    )
    with pytest.raises(InvalidExpression, match="never fires"):
        rule.next_after(datetime(2199, 12, 31, 23, 59, tzinfo=UTC))
    with pytest.raises(InvalidExpression, match="never fires"):
        rule.next_after(datetime(2193, 12, 31, tzinfo=UTC))  # six years before: past the search


@pytest.mark.parametrize(
    "after",
    [
        datetime.max.replace(tzinfo=UTC),
        datetime(9999, 12, 31, 12, tzinfo=UTC),
        datetime(9999, 6, 1, tzinfo=UTC),
    ],
)
def test_a_cron_at_the_end_of_the_calendar_is_refused_not_crashed(after: datetime) -> None:
    """No fire can be written past the year 9999: asking from its last days says so."""
    for timezone in ("UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago"):
        with pytest.raises(InvalidExpression, match="past the year 9999"):
            cron("cron(0 0 1 1 ? *)", timezone).next_after(after)
    assert cron("cron(0 0 1 1 ? *)").next_after(datetime(9998, 6, 1, tzinfo=UTC)).year == 9999
    assert cron("cron(0 0 * * ? *)").next_after(datetime(9999, 12, 30, 12, tzinfo=UTC)) == datetime(
        9999, 12, 31, tzinfo=UTC
    )


def test_a_rate_counts_elapsed_time_whatever_the_zone_of_its_moments() -> None:
    """Python subtracts and adds two datetimes of one zone on the wall clock: a rate whose
    creation time came in a zone with daylight saving would skip a fire at a fall back."""
    hourly = rate("rate(1 hour)")
    created = datetime(2026, 11, 1, 0, 30, tzinfo=NEW_YORK)  # 04:30 UTC, EDT
    after = datetime(2026, 11, 1, 1, 40, tzinfo=NEW_YORK)  # 05:40 UTC, the first 01:40
    assert hourly.next_after(after, created) == datetime(2026, 11, 1, 6, 30, tzinfo=UTC)
    # across a spring-forward: every fire an hour of real time after the one before
    created = datetime(2026, 3, 8, 0, 30, tzinfo=NEW_YORK)
    fire = created
    for _ in range(6):
        following = hourly.next_after(fire, created)
        assert following - fire == timedelta(hours=1)
        fire = following


def test_a_rate_is_exact_far_from_its_creation() -> None:
    """Counting periods in floating point lost the microsecond: ten thousand years of
    minutes, and the fire one microsecond before a period's end must be that period's."""
    minute = rate("rate(1 minute)")
    created = datetime(1, 1, 1, tzinfo=UTC)
    after = datetime(9999, 12, 31, 23, 57, 59, 999999, tzinfo=UTC)
    assert minute.next_after(after, created) == datetime(9999, 12, 31, 23, 58, tzinfo=UTC)


def test_the_smallest_and_largest_rates() -> None:
    created = datetime(2028, 2, 29, 0, 0, 30, tzinfo=UTC)
    assert rate("rate(1 minute)").next_after(created, created) == created + timedelta(minutes=1)
    assert rate("rate(1 day)").next_after(created, created) == datetime(
        2028, 3, 1, 0, 0, 30, tzinfo=UTC
    )
    longest = rate("rate(999999999 days)")  # the most days a duration can hold
    assert longest.next_after(created - timedelta(days=1), created) == created
    with pytest.raises(InvalidExpression, match="past the year 9999"):
        longest.next_after(created, created)
    for too_long in (
        "rate(1000000000 days)",
        "rate(99999999999999 hours)",
        "rate(9999999999999999 minutes)",
    ):
        with pytest.raises(InvalidExpression, match="at most"):
            parse(too_long)


def test_a_rate_at_the_end_of_the_calendar_is_refused_not_crashed() -> None:
    created = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    with pytest.raises(InvalidExpression, match="past the year 9999"):
        rate("rate(1 hour)").next_after(created + timedelta(minutes=5), created)
    assert rate("rate(1 minute)").next_after(created, created) == created + timedelta(minutes=1)


@pytest.mark.parametrize(
    "expression",
    [
        "rate(" + "9" * 5000 + " minutes)",  # more digits than int() reads by default
        "cron(" + "1" * 5000 + " * * * ? *)",
        "cron(0 ² * * ? *)",  # a digit to str.isdigit, not to int()
        "cron(0 9 * * ? 2⁰²⁸)",
        "rate(\u0665 minutes)",  # an Arabic-Indic five: a digit to int(), not to Scheduler
    ],
)
def test_numbers_no_one_writes_are_refused_as_expressions(expression: str) -> None:
    """``Schedule`` turns an ``InvalidExpression`` into a registration error; anything
    else would escape it."""
    with pytest.raises(InvalidExpression):
        parse(expression)


def test_a_schedule_without_a_fire_in_the_window_shows_none_and_stops_nothing() -> None:
    """``GET /schedules``, the dev timers and the test kit ask every schedule for its next
    fire: one that has none in the search's window (a leap-day cron in March 2096) shows
    none, instead of failing the listing, the timer loop's tick and the test kit's clock
    for every schedule beside it."""
    from durable import App, Context
    from durable.testing import LocalRunner

    after = datetime(2096, 3, 1, tzinfo=UTC)
    assert Schedule("leap", "w", "cron(0 0 29 2 ? *)").next_fire(after) is None
    assert Schedule("daily", "w", "cron(0 9 * * ? *)").next_fire(after) == after.replace(hour=9)

    app = App()

    @app.workflow(schedule="cron(0 0 29 2 ? *)")
    def leap(ctx: Context) -> int:
        return 1

    @app.workflow(schedule="cron(0 9 * * ? *)")
    def daily(ctx: Context) -> int:
        return 2

    from durable.core.clock import FakeClock

    runner = LocalRunner(app, clock=FakeClock(after))
    runner.advance(hours=10, schedules=True)  # the daily fire at 09:00; the leap one waits
    runs = runner.engine.list_runs(workflow="daily").items
    assert [r.status.value for r in runs] == ["SUCCEEDED"]
    assert runner.engine.list_runs(workflow="leap").items == []
