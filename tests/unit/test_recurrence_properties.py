"""The pure time rules of ``durable.core.recurrence`` against an independent oracle.

A cron's next fire is compared with ``cronsim``'s (a cron library kept for Healthchecks;
a test dependency only) on the dialect the two share: minutes, hours, day of month with
``L``, month, day of week with ``nL`` and ``#``, written Scheduler's way (six fields,
``?``, Sunday = 1) and translated into cronsim's (five fields, ``*``, Sunday = 0). What
cronsim is asked is the calendar: the wall times a cron names, read without a time zone.
What a wall time means in a zone is Scheduler's rule, written out here on its own: a wall
time a spring-forward skips does not fire, one a fall back repeats fires at its first
occurrence. (cronsim's own reading of a zone is Debian cron's, which runs a skipped time
at once and differs on purpose: ``test_the_oracle_differs_from_debian_cron_on_purpose``.)
The year field, which cronsim lacks, and the five-year search are checked here too.

The starting moments cluster where calendars break: around the 28th and 29th of February
of leap years and of years that are not (2100), the ends of months and years, and the
daylight-saving changes of New York, London, Lord Howe Island (whose clocks move by half an
hour) and Kolkata (none). ``W`` (the weekday nearest a day), which cronsim lacks, is
checked against a brute-force reading of its definition, and ``rate(...)`` against its
arithmetic: strictly after, a whole number of periods from the creation, the first such.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import MAXYEAR, UTC, date, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim, CronSimError
from hypothesis import given, settings
from hypothesis import strategies as st

from durable.core.recurrence import SEARCH_YEARS, Cron, InvalidExpression, Rate, parse

pytestmark = pytest.mark.unit

ZONES = ("UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")  # Scheduler's 1-7
MONTH_NAMES = tuple(calendar.month_abbr[1:])
FAST = settings(max_examples=150, deadline=None, derandomize=True)


# -- where calendars break -------------------------------------------------------------


@cache
def transitions(name: str, years: tuple[int, ...] = (2026, 2027, 2028)) -> tuple[datetime, ...]:
    """The UTC hours at which ``name``'s offset changes in ``years`` (none for Kolkata)."""
    tz = ZoneInfo(name)
    found = []
    moment = datetime(years[0], 1, 1, tzinfo=UTC)
    before = moment.astimezone(tz).utcoffset()
    while moment.year <= years[-1]:
        moment += timedelta(hours=1)
        offset = moment.astimezone(tz).utcoffset()
        if offset != before:
            found.append(moment)
            before = offset
    return tuple(found)


def calendar_edges() -> list[datetime]:
    edges = []
    for year in (2024, 2027, 2028, 2096, 2100):  # leap, not, leap, leap, not (a century)
        edges += [
            datetime(year, 2, day, tzinfo=UTC) for day in (28, calendar.monthrange(year, 2)[1])
        ]
        edges.append(datetime(year, 3, 1, tzinfo=UTC))
    for year in (2026, 2028):
        edges += [
            datetime(year, month, calendar.monthrange(year, month)[1], tzinfo=UTC)
            for month in (1, 4, 6, 9, 12)
        ]
    return edges


def dst_edges() -> list[datetime]:
    return [moment for name in ZONES for moment in transitions(name)]


ANCHORS = calendar_edges() + dst_edges()


@st.composite
def moments(
    draw: st.DrawFn,
    anchors: list[datetime] = ANCHORS,
    before: int = 2 * 86400,
    since: int = 2 * 86400,
) -> datetime:
    """An instant from ``before`` seconds before a calendar or daylight-saving edge to
    ``since`` after it, written in any zone."""
    anchor = draw(st.sampled_from(anchors))
    seconds = draw(st.integers(-before, since))
    on_the_minute = draw(st.booleans())
    shift = timedelta(seconds=seconds - seconds % 60 if on_the_minute else seconds)
    micro = 0 if on_the_minute else draw(st.sampled_from([0, 1, 500_000, 999_999]))
    moment = anchor + shift + timedelta(microseconds=micro)
    return moment.astimezone(ZoneInfo(draw(st.sampled_from(ZONES))))


# -- crons, written twice --------------------------------------------------------------


@dataclass(frozen=True)
class Expression:
    """One cron in Scheduler's words and in cronsim's, and the years it may fire in."""

    aws: str
    five_fields: str
    years: frozenset[int] | None


def plain(low: int, high: int, names: tuple[str, ...] = ()) -> st.SearchStrategy[tuple[str, str]]:
    """A field both dialects read alike: the text for Scheduler, the text for cronsim (the
    same but for day-of-week, shifted by ``shift_day``)."""

    def value() -> st.SearchStrategy[str]:
        numbers = st.integers(low, high).map(str)
        if names:
            return numbers | st.integers(low, high).map(lambda v: names[v - low])
        return numbers

    single = value()
    listed = st.lists(st.integers(low, high), min_size=2, max_size=4, unique=True).map(
        lambda vs: ",".join(map(str, sorted(vs)))
    )
    spans = st.tuples(st.integers(low, high), st.integers(low, high)).map(
        lambda ab: f"{min(ab)}-{max(ab)}"
    )
    steps = st.tuples(
        st.sampled_from(["*", str(low)]) | st.integers(low, high).map(str),
        st.integers(1, max(1, high - low)),
    ).map(lambda ts: f"{ts[0]}/{ts[1]}")
    text = st.one_of(st.just("*"), single, listed, spans, steps)
    return text.map(lambda t: (t, t))


def shift_day(text: str) -> str:
    """Scheduler's day-of-week field (1-7 from Sunday) as cronsim's (0-6 from Sunday)."""

    def one(token: str) -> str:
        return token if token in ("*", "") or token in DAY_NAMES else str(int(token) - 1)

    parts = []
    for part in text.split(","):
        base, slash, step = part.partition("/")
        if slash and base != "*" and "-" not in base:
            # cronsim runs ``a/s`` up to 7 (Sunday again): bound it at Saturday, as ours is
            base = f"{base}-7"
        bounds = "-".join(one(b) for b in base.split("-"))
        parts.append(bounds + slash + step)
    return ",".join(parts)


@st.composite
def crons(draw: st.DrawFn) -> Expression:
    minute = draw(st.sampled_from([("0", "0"), ("30", "30"), ("59", "59")]) | plain(0, 59))
    # hours 1-3 are the ones daylight saving moves in the zones above
    hour = draw(st.sampled_from([(h, h) for h in ("0", "1", "2", "3", "23")]) | plain(0, 23))
    month = draw(
        st.sampled_from([("*", "*"), ("2", "2"), ("FEB", "FEB")]) | plain(1, 12, MONTH_NAMES)
    )
    if draw(st.booleans()):
        dom = draw(
            st.sampled_from([(d, d) for d in ("28", "29", "30", "31", "L", "L", "1", "7")])
            | plain(1, 31)
        )
        dow = ("?", "*")
    else:
        dom = ("?", "*")
        aws = draw(
            st.one_of(
                plain(1, 7, DAY_NAMES).map(lambda t: t[0]),
                st.integers(1, 7).map(lambda d: f"{d}L"),
                st.tuples(st.integers(1, 7), st.integers(1, 5)).map(lambda t: f"{t[0]}#{t[1]}"),
                st.tuples(st.integers(1, 7), st.integers(1, 5)).map(lambda t: f"{t[0]}#{t[1]}"),
            )
        )
        if aws.endswith("L"):
            dow = (aws, f"{int(aws[:-1]) - 1}L")
        elif "#" in aws:
            day, n = aws.split("#")
            dow = (aws, f"{int(day) - 1}#{n}")
        else:
            dow = (aws, shift_day(aws))
    year_text = draw(
        st.sampled_from(["*", "*", "*", "near", "span"])
    )  # mostly any year; else years about the search's end (2026-2110 are drawn below)
    years: frozenset[int] | None = None
    if year_text == "near":
        first = draw(st.integers(2024, 2106))
        years = frozenset({first})
        year_text = str(first)
    elif year_text == "span":
        first = draw(st.integers(2024, 2106))
        last = first + draw(st.integers(0, 3))
        years = frozenset(range(first, last + 1))
        year_text = f"{first}-{last}"
    aws = f"cron({minute[0]} {hour[0]} {dom[0]} {month[0]} {dow[0]} {year_text})"
    five = f"{minute[1]} {hour[1]} {dom[1]} {month[1]} {dow[1]}"
    return Expression(aws, five, years)


# -- the oracle ------------------------------------------------------------------------


@cache
def offsets(name: str) -> frozenset[timedelta]:
    """Every offset from UTC ``name`` uses in the years the tests draw (sampled daily:
    no daylight-saving period is shorter than a day)."""
    tz = ZoneInfo(name)
    found = set()
    moment = datetime(2020, 1, 1, tzinfo=UTC)
    while moment.year < 2112:
        found.add(moment.astimezone(tz).utcoffset())
        moment += timedelta(days=1)
    return frozenset(o for o in found if o is not None)


def first_occurrence(wall: datetime, name: str) -> datetime | None:
    """Scheduler's rule, on its own: the instants at which ``tz``'s clocks show ``wall``;
    the first of them, or None when the clocks skip it. Found by trying each offset the
    zone ever uses, not through ``fold``, which is what ``recurrence`` uses."""
    tz = ZoneInfo(name)
    shown = []
    for offset in offsets(name):
        instant = (wall - offset).replace(tzinfo=UTC)
        if instant.astimezone(tz).replace(tzinfo=None) == wall:
            shown.append(instant)
    return min(shown) if shown else None


def search_end(day: date) -> date:
    """The documented window: to the same date five years on (the 28th of February for a
    29th, whose year then has none)."""
    year = day.year + SEARCH_YEARS
    if year > MAXYEAR:
        return date.max
    return date(year, day.month, min(day.day, calendar.monthrange(year, day.month)[1]))


def walls(five_fields: str, start: datetime) -> Iterator[datetime]:
    """The wall times cronsim says the cron names, strictly after ``start`` (naive)."""
    try:
        yield from CronSim(five_fields, start)
    except CronSimError:  # e.g. the 30th of February: cronsim refuses, it never fires
        return


def oracle(expression: Expression, name: str, after: datetime) -> datetime | None:
    """The first fire strictly after ``after``, or None when there is none in the window."""
    local = after.astimezone(ZoneInfo(name)).replace(tzinfo=None)
    end = search_end(local.date())
    start = local
    while True:
        for wall in walls(expression.five_fields, start):
            if wall.date() > end:
                return None
            if expression.years is not None and wall.year not in expression.years:
                later = [y for y in expression.years if y > wall.year]
                if not later:
                    return None
                # cronsim has no year field: start it again at the next year allowed
                start = datetime(min(later), 1, 1) - timedelta(seconds=1)
                break
            instant = first_occurrence(wall, name)
            if instant is not None and instant > after:
                return instant
        else:
            return None


def ours(expression: Expression, name: str, after: datetime) -> datetime | None:
    rule = parse(expression.aws, name)
    assert isinstance(rule, Cron)
    try:
        fire = rule.next_after(after)
    except InvalidExpression as e:
        assert "never fires" in str(e)
        return None
    assert fire.tzinfo is UTC
    return fire


# -- crons -----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, derandomize=True)
@given(crons(), moments(), st.sampled_from(ZONES))
def test_a_cron_fires_when_the_oracle_says(
    expression: Expression, after: datetime, name: str
) -> None:
    assert ours(expression, name, after) == oracle(expression, name, after), expression.aws


@st.composite
def dst_crons(draw: st.DrawFn) -> Expression:
    """Crons whose wall times fall in the hours the zones above skip or repeat (between
    01:00 and 03:00; Lord Howe's half hour is 01:30-02:00 or 02:00-02:30)."""
    minute = draw(st.sampled_from(["0", "15", "30", "45", "59", "*/15", "0/30", "10-40/10", "*"]))
    hour = draw(st.sampled_from(["1", "2", "1-2", "0-3", "*", "*/2", "1,3", "2/12"]))
    days = draw(st.sampled_from([("* * ?", "* * *"), ("? * SUN", "* * SUN"), ("L * ?", "L * *")]))
    aws = f"cron({minute} {hour} {days[0]} *)"
    return Expression(aws, f"{minute} {hour} {days[1]}", None)


@st.composite
def near_a_change(draw: st.DrawFn) -> tuple[str, datetime]:
    """A zone with daylight saving, and an instant from a day before one of its changes
    to three hours after it."""
    name = draw(st.sampled_from(ZONES[1:4]))
    return name, draw(moments(list(transitions(name)), before=86400, since=3 * 3600))


@settings(max_examples=250, deadline=None, derandomize=True)
@given(dst_crons(), near_a_change())
def test_across_a_daylight_saving_change(
    expression: Expression, where: tuple[str, datetime]
) -> None:
    """Skipped wall times do not fire, repeated ones fire once: every fire in the day
    around the change, one after the other, as the oracle says."""
    name, after = where
    for _ in range(4):
        fire = ours(expression, name, after)
        assert fire == oracle(expression, name, after), (expression.aws, after)
        if fire is None:
            return
        after = fire


@settings(max_examples=60, deadline=None, derandomize=True)
@given(crons(), moments(dst_edges()))
def test_without_daylight_saving_the_zones_reading_is_cronsims_own(
    expression: Expression, after: datetime
) -> None:
    """Kolkata has no daylight saving: cronsim, handed the zone itself (six fields, so
    with no Debian special case), must agree outright."""
    name = "Asia/Kolkata"
    if expression.years is not None:
        return  # cronsim has no year field; the test above covers it
    expected = None
    try:
        seconds_first = "0 " + expression.five_fields
        found = next(CronSim(seconds_first, after.astimezone(ZoneInfo(name))), None)
    except CronSimError:
        found = None
    if found is not None and found.date() <= search_end(after.astimezone(ZoneInfo(name)).date()):
        expected = found.astimezone(UTC)
    assert ours(expression, name, after) == expected, expression.aws


def test_the_oracle_differs_from_debian_cron_on_purpose() -> None:
    """cronsim, given New York itself, runs a 02:30 that spring-forward skips at 03:00
    (Debian cron's rule); Scheduler, and so ``recurrence``, does not fire that day. The
    oracle above reads wall times from cronsim and applies Scheduler's rule instead."""
    tz = ZoneInfo("America/New_York")
    eve = datetime(2026, 3, 7, 12, tzinfo=tz)
    debian = next(CronSim("30 2 * * *", eve))
    assert debian == datetime(2026, 3, 8, 3, 0, tzinfo=tz)
    rule = parse("cron(30 2 * * ? *)", "America/New_York")
    assert isinstance(rule, Cron)
    assert rule.next_after(eve) == datetime(2026, 3, 9, 2, 30, tzinfo=tz)
    # a fall back: 01:30 happens twice; cronsim (six fields, no Debian case) fires at both,
    # Scheduler at the first only
    night = datetime(2026, 11, 1, 0, 0, tzinfo=tz)
    both = CronSim("0 30 1 * * *", night)
    first, second = next(both), next(both)
    # (compared in UTC: Python subtracts two times of one zone on the wall clock)
    assert second.astimezone(UTC) - first.astimezone(UTC) == timedelta(hours=1)
    assert (first.fold, second.fold) == (0, 1) and first.replace(fold=1) == second
    hourly = parse("cron(30 1 * * ? *)", "America/New_York")
    assert isinstance(hourly, Cron)
    # (compared in UTC too: Python never finds a time of a repeated hour equal to one of
    # another zone)
    assert hourly.next_after(night) == first.astimezone(UTC)
    assert hourly.next_after(first) == datetime(2026, 11, 2, 1, 30, tzinfo=tz)
    assert hourly.next_after(second) == datetime(2026, 11, 2, 1, 30, tzinfo=tz)


@FAST
@given(
    crons(),
    st.sampled_from(ZONES),
    st.sampled_from([1970, 2096, 2195, 2199, 9994, 9999]),
    st.data(),
)
def test_a_cron_answers_at_every_year_or_refuses_clearly(
    expression: Expression, name: str, year: int, data: st.DataObject
) -> None:
    """From the first year Scheduler takes to the calendar's last: a fire strictly after,
    or ``InvalidExpression``, never an OverflowError or a ValueError."""
    day = data.draw(st.dates(date(year, 1, 1), date(year, 12, 31)))
    after = datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(
        seconds=data.draw(st.integers(0, 86399))
    )
    rule = parse(expression.aws, name)
    assert isinstance(rule, Cron)
    try:
        fire = rule.next_after(after)
    except InvalidExpression as e:
        assert "never fires" in str(e) or "past the year 9999" in str(e)
        return
    assert fire > after and fire.tzinfo is UTC
    assert fire.astimezone(ZoneInfo(name)).date() <= search_end(
        after.astimezone(ZoneInfo(name)).date()
    )


# -- W, which cronsim lacks ------------------------------------------------------------


def nearest_weekday(year: int, month: int, target: int) -> date:
    """The definition, brute force: of the month's weekdays, the nearest to the target day
    (the month's last when it has fewer days)."""
    last = calendar.monthrange(year, month)[1]
    wanted = min(target, last)
    weekdays = [
        date(year, month, d) for d in range(1, last + 1) if date(year, month, d).weekday() < 5
    ]
    return min(weekdays, key=lambda d: abs(d.day - wanted))


@FAST
@given(
    st.integers(1, 31), moments(calendar_edges()), st.sampled_from(["*", "2", "1,3,5,7,8,10,12"])
)
def test_the_weekday_nearest_a_day(target: int, after: datetime, months: str) -> None:
    rule = parse(f"cron(0 12 {target}W {months} ? *)")
    assert isinstance(rule, Cron)
    allowed = rule.months
    fire = rule.next_after(after)
    # the oracle: walk the months from the one of ``after``, each month's single day
    year, month = after.astimezone(UTC).year, after.astimezone(UTC).month
    while True:
        if month in allowed:
            day = nearest_weekday(year, month, target)
            expected = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
            if expected > after:
                break
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    assert fire == expected


# -- rates -----------------------------------------------------------------------------


@st.composite
def rates(draw: st.DrawFn) -> Rate:
    unit = draw(st.sampled_from(["minute", "hour", "day"]))
    value = draw(st.integers(1, 3) | st.integers(1, 2000))
    rule = parse(f"rate({value} {unit}{'' if value == 1 else 's'})")
    assert isinstance(rule, Rate)
    return rule


@FAST
@given(rates(), moments(), st.data(), st.integers(-86400, 86400), st.sampled_from(ZONES))
def test_a_rate_fires_on_its_grid_strictly_after(
    rule: Rate, created: datetime, data: st.DataObject, seconds: int, name: str
) -> None:
    """The first fire strictly after ``after`` on the grid of whole periods from the
    creation, counted in elapsed time: whatever zone either moment is written in."""
    periods = data.draw(st.integers(-5, max(1, timedelta(days=20_000) // rule.every)))
    # the test's own arithmetic in UTC: Python adds to a time of a zone on its wall clock
    origin = created.astimezone(UTC)
    after = (origin + periods * rule.every + timedelta(seconds=seconds)).astimezone(ZoneInfo(name))
    fire = rule.next_after(after, created)
    assert fire.tzinfo is UTC
    assert fire > after
    elapsed = fire - created
    assert elapsed >= timedelta(0) and elapsed % rule.every == timedelta(0)
    assert fire == created or fire - rule.every <= after  # no grid point between
    assert rule.next_after(after.astimezone(UTC), created.astimezone(UTC)) == fire
    # exactly on a grid point: the next one
    on_grid = origin + max(periods, 0) * rule.every
    assert rule.next_after(on_grid, created) == on_grid + rule.every


@FAST
@given(rates(), moments(dst_edges()), st.integers(1, 400))
def test_consecutive_rate_fires_are_one_period_apart(rule: Rate, created: datetime, n: int) -> None:
    """Across daylight-saving changes and leap days alike, in elapsed time."""
    fire = rule.next_after(created, created)
    for _ in range(min(n, 30)):
        following = rule.next_after(fire, created)
        assert following - fire == rule.every
        fire = following
