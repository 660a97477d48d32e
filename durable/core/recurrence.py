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
once (at its first occurrence). A rate counts from the moment the schedule was created.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_MONTHS = {name.upper(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAYS = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}
_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_CRON = re.compile(r"^cron\((.*)\)$")
_UNIT = {"minute": 60, "hour": 3600, "day": 86400}
SEARCH_YEARS = 5  # a cron that fires less often than this is refused


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
        """The first fire strictly after ``after`` of a rate counted from ``origin``."""
        if after < origin:
            return origin
        periods = int((after - origin) / self.every) + 1
        return origin + periods * self.every


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
        local = after.astimezone(self.tz).replace(second=0, microsecond=0, tzinfo=None)
        day = local.date()
        end = day.replace(year=day.year + SEARCH_YEARS)
        while day <= end:
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
            day += timedelta(days=1)
        raise InvalidExpression("it never fires in the next five years")


def _instant(wall: datetime, tz: ZoneInfo) -> datetime | None:
    """``wall`` in ``tz`` as a UTC instant; None when a daylight-saving change skips it."""
    aware = wall.replace(tzinfo=tz, fold=0)
    back = aware.astimezone(UTC).astimezone(tz).replace(tzinfo=None)
    if back != wall:
        return None
    return aware.astimezone(UTC)


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
        value, unit = int(rate.group(1)), rate.group(2)
        if value < 1:
            raise InvalidExpression(f"{expression!r}: a rate must be at least 1")
        if (value == 1) != (not unit.endswith("s")):
            fixed = f"rate({value} {unit.rstrip('s')}{'' if value == 1 else 's'})"
            raise InvalidExpression(f"{expression!r}: write {fixed!r} (singular only for 1)")
        return Rate(timedelta(seconds=value * _UNIT[unit.rstrip("s")]))
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
        if not text.isdigit():
            raise InvalidExpression(f"{expr!r}: {text!r} is not a valid {what} value")
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
