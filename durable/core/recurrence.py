"""EventBridge Scheduler's recurring expressions, ``cron(...)`` and ``rate(...)``, read
and evaluated here: to refuse a bad one when the app is defined (not at deploy time),
and to say when a schedule fires next (``durable dev`` fires them on its own clock, the
CLI shows the next fire).

The syntax is Scheduler's: ``rate(5 minutes)`` (minute, hour or day; the singular for 1),
and ``cron(minutes hours day-of-month month day-of-week year)`` with ``*``, ``,``, ``-``,
``/``, ``?`` (one of the two day fields must be ``?``), ``L`` (the month's last day, or in
day-of-week ``5L``: its last Thursday), ``W`` (``15W``: the weekday nearest the 15th),
``#`` (``6#3``: its third Friday); days of week 1-7 from Sunday or ``SUN``-``SAT``,
months ``JAN``-``DEC``. A cron expression is read in the schedule's time zone: a wall
time that a daylight-saving change skips does not fire that day; one it repeats fires
once (at its first occurrence). A rate counts from the moment the schedule was created,
in elapsed time (an hourly rate fires every 3600 seconds across a daylight-saving change).

A cron is searched five years ahead, to the same date (the 28th of February when the
search starts on a 29th): one with no fire in that window is refused, which is what a
typo such as a year long past looks like. A leap-day cron, ``cron(0 0 29 2 ? *)``, fires
every fourth year, and across 2100 (not a leap year) it has none for eight, so it is
refused from March 2096 to February 2099 (from March 2099, 2104 is in reach). No answer
is past the year 9999: one that would be is refused too. The rules are checked against
an independent cron library, across leap days, month ends and daylight-saving changes
(``tests/unit/test_recurrence_properties.py``).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import MAXYEAR, UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_MONTHS = {name.upper(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAYS = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}
_RATE = re.compile(r"^rate\(\s*([0-9]+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_CRON = re.compile(r"^cron\((.*)\)$")
_UNIT = {"minute": 60, "hour": 3600, "day": 86400}
SEARCH_YEARS = 5  # a cron that fires less often than this is refused
_LONGEST = timedelta.max // timedelta(seconds=1)  # whole seconds; a float would round up


class InvalidExpression(ValueError):
    """A schedule expression Scheduler would refuse (the message says how to fix it)."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidExpression(
            f"unknown time zone {name!r}: use an IANA name, e.g. 'Europe/Berlin' or 'UTC'"
        ) from None


@dataclass(frozen=True)
class Rate:
    every: timedelta

    def next_after(self, after: datetime, origin: datetime) -> datetime:
        """The first fire strictly after ``after`` of a rate counted from ``origin``, in UTC.

        Both are taken as instants: Python subtracts and adds two datetimes of one zone on
        the wall clock, which would lose or repeat an hour at a daylight-saving change.
        The periods are counted in whole numbers (floor division of durations is exact;
        a float quotient is not, ten thousand years from the origin).
        """
        try:
            start, now = origin.astimezone(UTC), after.astimezone(UTC)
            if now < start:
                return start
            return start + ((now - start) // self.every + 1) * self.every
        except OverflowError:
            raise InvalidExpression(_PAST_THE_CALENDAR) from None


@dataclass(frozen=True)
class Field:
    values: frozenset[int] | None  # None: any ('*' or '?')
    last: bool = False  # L in day-of-month
    weekday_near: int | None = None  # nW in day-of-month
    last_weekday: int | None = None  # nL in day-of-week
    nth: tuple[int, int] | None = None  # d#n in day-of-week


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: Field  # of the month
    months: frozenset[int]
    weekdays: Field  # 1 = Sunday
    years: frozenset[int] | None
    tz: ZoneInfo

    def _day_matches(self, day: date) -> bool:
        last = calendar.monthrange(day.year, day.month)[1]
        d = self.days
        if d.last and day.day == last:
            return True
        if d.weekday_near is not None and day == _nearest_weekday(day, d.weekday_near, last):
            return True
        if d.values is not None and day.day in d.values:
            return True
        w = self.weekdays
        aws_weekday = (day.isoweekday() % 7) + 1  # Sunday = 1
        if w.last_weekday is not None:
            return aws_weekday == w.last_weekday and day.day + 7 > last
        if w.nth is not None:
            weekday, n = w.nth
            return aws_weekday == weekday and (day.day - 1) // 7 + 1 == n
        if w.values is not None:
            return aws_weekday in w.values
        return d.values is None and not d.last and d.weekday_near is None

    def next_after(self, after: datetime) -> datetime:
        """The first fire strictly after ``after`` (an aware datetime), in UTC."""
        try:
            local = after.astimezone(self.tz).replace(second=0, microsecond=0, tzinfo=None)
        except OverflowError:  # within hours of the calendar's end, in a zone ahead of UTC
            raise InvalidExpression(_PAST_THE_CALENDAR) from None
        day = local.date()
        end, clipped = _search_end(day)
        while True:
            if (
                (self.years is None or day.year in self.years)
                and day.month in self.months
                and self._day_matches(day)
            ):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        wall = datetime(day.year, day.month, day.day, hour, minute)
                        if wall <= local and day == local.date():
                            continue
                        moment = _instant(wall, self.tz)
                        if moment is not None and moment > after:
                            return moment
            if day >= end:  # compared before the step: date.max has no next day
                break
            day += timedelta(days=1)
        if clipped:
            raise InvalidExpression(_PAST_THE_CALENDAR)
        raise InvalidExpression("it never fires in the next five years")


_PAST_THE_CALENDAR = "its next fire would be past the year 9999"


def next_fire(rule: Rate | Cron, after: datetime, origin: datetime) -> datetime | None:
    """``rule``'s first time after ``after`` (a rate counts from ``origin``), or None when
    it has none within the search's five years (a leap-day cron in 2096-2099, a year
    field in the past): whoever lists or fires schedules shows or waits for that one and
    goes on with the others, instead of failing them all over it."""
    try:
        return rule.next_after(after, origin) if isinstance(rule, Rate) else rule.next_after(after)
    except InvalidExpression:
        return None


def _search_end(day: date) -> tuple[date, bool]:
    """The last day a search from ``day`` looks at, and whether the calendar's end cut it.

    The same date ``SEARCH_YEARS`` on; a 29th of February, whose year then has none,
    ends on the 28th (``date.replace(year=...)`` raises there instead).
    """
    year = day.year + SEARCH_YEARS
    if year > MAXYEAR:
        return date.max, True
    return date(year, day.month, min(day.day, calendar.monthrange(year, day.month)[1])), False


def _instant(wall: datetime, tz: ZoneInfo) -> datetime | None:
    """``wall`` in ``tz`` as a UTC instant; None when a daylight-saving change skips it, or
    when it is a time of the calendar's first or last day that UTC cannot write."""
    aware = wall.replace(tzinfo=tz, fold=0)
    try:
        moment = aware.astimezone(UTC)
        back = moment.astimezone(tz).replace(tzinfo=None)
    except OverflowError:
        return None
    if back != wall:
        return None
    return moment


def _nearest_weekday(day: date, target: int, last: int) -> date:
    """The weekday (Mon-Fri) nearest the ``target``th of ``day``'s month, in the month."""
    wanted = day.replace(day=min(target, last))
    if wanted.weekday() == 5:  # Saturday: Friday, unless that leaves the month
        return wanted - timedelta(days=1) if wanted.day > 1 else wanted + timedelta(days=2)
    if wanted.weekday() == 6:  # Sunday: Monday, unless that leaves the month
        return wanted + timedelta(days=1) if wanted.day < last else wanted - timedelta(days=2)
    return wanted


def parse(expression: str, timezone: str = "UTC") -> Rate | Cron:
    """The recurrence of a Scheduler expression; ``InvalidExpression`` says what is wrong."""
    text = expression.strip()
    tz = zone(timezone)  # checked for a rate too: Scheduler stores it with every schedule
    rate = _RATE.match(text)
    if rate:
        digits, unit = rate.group(1).lstrip("0") or "0", rate.group(2)
        seconds = _UNIT[unit.rstrip("s")]
        longest = _LONGEST // seconds  # what a duration can hold (about 2.7 million years)
        # Checked on the text first: int() refuses more than 4300 digits with a ValueError.
        if len(digits) > len(str(longest)) or int(digits) > longest:
            raise InvalidExpression(
                f"{expression!r}: a rate is at most {longest} {unit.rstrip('s')}s"
            )
        value = int(digits)
        if value < 1:
            raise InvalidExpression(f"{expression!r}: a rate must be at least 1")
        if (value == 1) != (not unit.endswith("s")):
            fixed = f"rate({value} {unit.rstrip('s')}{'' if value == 1 else 's'})"
            raise InvalidExpression(f"{expression!r}: write {fixed!r} (singular only for 1)")
        return Rate(timedelta(seconds=value * seconds))
    cron = _CRON.match(text)
    if not cron:
        raise InvalidExpression(
            f"{expression!r}: a recurring schedule is 'cron(0 9 * * ? *)' or 'rate(1 hour)' "
            "(a one-time at(...) is a sleep in a workflow instead)"
        )
    fields = cron.group(1).split()
    if len(fields) != 6:
        raise InvalidExpression(
            f"{expression!r}: cron takes 6 fields (minutes hours day-of-month month "
            f"day-of-week year), got {len(fields)}; e.g. 'cron(0 9 ? * MON-FRI *)'"
        )
    minute, hour, dom, month, dow, year = fields
    if (dom == "?") == (dow == "?"):
        raise InvalidExpression(
            f"{expression!r}: exactly one of day-of-month and day-of-week must be '?'"
        )
    return Cron(
        minutes=_set(minute, 0, 59, "minutes", expression),
        hours=_set(hour, 0, 23, "hours", expression),
        days=_days_of_month(dom, expression),
        months=_set(month, 1, 12, "month", expression, _MONTHS),
        weekdays=_days_of_week(dow, expression),
        years=None if year in ("*", "?") else _set(year, 1970, 2199, "year", expression),
        tz=tz,
    )


def _number(text: str, low: int, high: int, what: str, expr: str, names: dict[str, int]) -> int:
    value = names.get(text.upper()) if names else None
    if value is None:
        # str.isdigit also takes superscripts and other digits int() refuses
        if not (text.isascii() and text.isdigit()):
            raise InvalidExpression(f"{expr!r}: {text!r} is not a valid {what} value")
        if len(text.lstrip("0")) > len(str(high)):  # int() refuses past 4300 digits
            raise InvalidExpression(f"{expr!r}: {what} {text[:12]}... is outside {low}-{high}")
        value = int(text)
    if not low <= value <= high:
        raise InvalidExpression(f"{expr!r}: {what} {value} is outside {low}-{high}")
    return value


def _set(
    text: str, low: int, high: int, what: str, expr: str, names: dict[str, int] | None = None
) -> frozenset[int]:
    out: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = _number(step_text, 1, high, f"{what} step", expr, {}) if step_text else 1
        if base == "*":  # '?' is only for a day field, which reads it before this
            start, stop = low, high
        elif "-" in base:
            a, b = base.split("-", 1)
            start = _number(a, low, high, what, expr, names or {})
            stop = _number(b, low, high, what, expr, names or {})
            if stop < start:
                raise InvalidExpression(f"{expr!r}: the {what} range {base!r} runs backwards")
        else:
            start = _number(base, low, high, what, expr, names or {})
            stop = high if step_text else start
        out.update(range(start, stop + 1, step))
    return frozenset(out)


def _days_of_month(text: str, expr: str) -> Field:
    if text in ("?", "*"):
        return Field(None)
    if text == "L":
        return Field(frozenset(), last=True)
    if text.endswith("W") and text[:-1].isdigit():
        return Field(frozenset(), weekday_near=_number(text[:-1], 1, 31, "day-of-month", expr, {}))
    return Field(_set(text, 1, 31, "day-of-month", expr))


def _days_of_week(text: str, expr: str) -> Field:
    if text in ("?", "*"):
        return Field(None)
    if text.endswith("L") and len(text) > 1:
        return Field(frozenset(), last_weekday=_number(text[:-1], 1, 7, "day-of-week", expr, _DAYS))
    if "#" in text:
        day, _, n = text.partition("#")
        weekday = _number(day, 1, 7, "day-of-week", expr, _DAYS)
        return Field(frozenset(), nth=(weekday, _number(n, 1, 5, "week of the month", expr, {})))
    return Field(_set(text, 1, 7, "day-of-week", expr, _DAYS))
