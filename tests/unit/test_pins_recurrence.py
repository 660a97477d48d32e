"""Pins for ``durable.core.recurrence``'s parser: every field's bounds, the names in its errors,
steps, and the special forms (``L``, ``W``, ``#``, ``?``). Each case is a mutant of the
parser that the broader tests in ``test_schedules.py`` let through (a bound moved by one,
a field name blanked, ``?`` read where it does not belong)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from durable.core.recurrence import Cron, Field, InvalidExpression, parse

pytestmark = pytest.mark.unit


def cron(expression: str) -> Cron:
    rule = parse(expression)
    assert isinstance(rule, Cron)
    return rule


@pytest.mark.parametrize(
    ("expression", "attribute", "expected"),
    [
        ("cron(0 0 * * ? *)", "minutes", {0}),
        ("cron(59 0 * * ? *)", "minutes", {59}),
        ("cron(* 0 * * ? *)", "minutes", set(range(60))),
        ("cron(0 0 * * ? *)", "hours", {0}),
        ("cron(0 23 * * ? *)", "hours", {23}),
        ("cron(0 * * * ? *)", "hours", set(range(24))),
        ("cron(0 9-9 * * ? *)", "hours", {9}),
        ("cron(0 9 * 1 ? *)", "months", {1}),
        ("cron(0 9 * 12 ? *)", "months", {12}),
        ("cron(0 9 * * ? *)", "months", set(range(1, 13))),
        ("cron(0 9 * */12 ? *)", "months", {1}),
        ("cron(0 9 * DEC ? *)", "months", {12}),
        ("cron(0 9 * * ? 1970)", "years", {1970}),
        ("cron(0 9 * * ? 2199)", "years", {2199}),
        ("cron(0 9 * * ? 2030-2032)", "years", {2030, 2031, 2032}),
        ("cron(0 9 * * ? *)", "years", None),
        ("cron(0 9 * * ? ?)", "years", None),
    ],
)
def test_each_field_takes_its_whole_range(
    expression: str, attribute: str, expected: object
) -> None:
    value = getattr(cron(expression), attribute)
    assert (value if value is None else set(value)) == expected


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        ("cron(x 9 * * ? *)", "'x' is not a valid minutes value"),
        ("cron(*/60 9 * * ? *)", "minutes step 60 is outside 1-59"),
        ("cron(0 24 * * ? *)", "hours 24 is outside 0-23"),
        ("cron(0 9 0 * ? *)", "day-of-month 0 is outside 1-31"),
        ("cron(0 9 32 * ? *)", "day-of-month 32 is outside 1-31"),
        ("cron(0 9 0W * ? *)", "day-of-month 0 is outside 1-31"),
        ("cron(0 9 32W * ? *)", "day-of-month 32 is outside 1-31"),
        ("cron(0 9 * 0 ? *)", "month 0 is outside 1-12"),
        ("cron(0 9 * 13 ? *)", "month 13 is outside 1-12"),
        ("cron(0 9 ? * 0 *)", "day-of-week 0 is outside 1-7"),
        ("cron(0 9 ? * 0L *)", "day-of-week 0 is outside 1-7"),
        ("cron(0 9 ? * 8L *)", "day-of-week 8 is outside 1-7"),
        ("cron(0 9 ? * L *)", "'L' is not a valid day-of-week value"),
        ("cron(0 9 ? * 0#1 *)", "day-of-week 0 is outside 1-7"),
        ("cron(0 9 ? * 8#1 *)", "day-of-week 8 is outside 1-7"),
        ("cron(0 9 ? * 6#0 *)", "week of the month 0 is outside 1-5"),
        ("cron(0 9 ? * 6#6 *)", "week of the month 6 is outside 1-5"),
        ("cron(0 9 * * ? 1969)", "year 1969 is outside 1970-2199"),
        ("cron(0 9 * * ? 2200)", "year 2200 is outside 1970-2199"),
        ("cron(*/0 9 * * ? *)", "minutes step 0 is outside 1-59"),
        ("cron(0 */24 * * ? *)", "hours step 24 is outside 1-23"),
        ("cron(0 9 * */13 ? *)", "month step 13 is outside 1-12"),
        ("cron(0 9 */32 * ? *)", "day-of-month step 32 is outside 1-31"),
        ("cron(0 9 ? * */8 *)", "day-of-week step 8 is outside 1-7"),
        ("cron(0 9 * * ? */2200)", "year step 2200 is outside 1-2199"),
        ("cron(? 9 * * ? *)", "'?' is not a valid minutes value"),
        ("cron(0 ? * * ? *)", "'?' is not a valid hours value"),
        ("cron(0 9 * ? ? *)", "'?' is not a valid month value"),
        ("cron(0 9 * * ? 2031-2030)", "the year range '2031-2030' runs backwards"),
        ("cron(0 9 ? * FRI-MON *)", "the day-of-week range 'FRI-MON' runs backwards"),
    ],
)
def test_an_out_of_range_value_names_its_field_and_bounds(expression: str, said: str) -> None:
    with pytest.raises(InvalidExpression, match=said.replace("?", r"\?").replace("*", r"\*")):
        parse(expression)


def test_steps_count_from_the_start_and_default_to_one() -> None:
    assert cron("cron(0 9 ? * */2 *)").weekdays.values == frozenset({1, 3, 5, 7})
    assert cron("cron(0 9 */10 * ? *)").days.values == frozenset({1, 11, 21, 31})
    assert cron("cron(0 9 * * ? 2030/100)").years == frozenset({2030, 2130})
    assert cron("cron(0 9-12 * * ? *)").hours == frozenset({9, 10, 11, 12})
    assert cron("cron(45 9 * * ? *)").minutes == frozenset({45})  # no step: the one value


def test_the_day_fields_special_forms() -> None:
    assert cron("cron(0 9 * * ? *)").days == Field(None)
    assert cron("cron(0 9 * * ? *)").weekdays == Field(None)
    assert cron("cron(0 9 ? * * *)").days == Field(None)
    assert cron("cron(0 9 ? * * *)").weekdays == Field(None)
    assert cron("cron(0 9 L * ? *)").days == Field(frozenset(), last=True)
    assert cron("cron(0 9 1W * ? *)").days == Field(frozenset(), weekday_near=1)
    assert cron("cron(0 9 31W * ? *)").days == Field(frozenset(), weekday_near=31)
    assert cron("cron(0 9 ? * 1L *)").weekdays == Field(frozenset(), last_weekday=1)
    assert cron("cron(0 9 ? * FRIL *)").weekdays == Field(frozenset(), last_weekday=6)
    assert cron("cron(0 9 ? * 7#5 *)").weekdays == Field(frozenset(), nth=(7, 5))
    assert cron("cron(0 9 ? * SUN#1 *)").weekdays == Field(frozenset(), nth=(1, 1))
    assert cron("cron(0 9 ? * 1,7 *)").weekdays == Field(frozenset({1, 7}))


def test_day_names_and_the_nth_weekday_of_a_month() -> None:
    assert cron("cron(0 9 ? * TUE,THU,SAT *)").weekdays.values == frozenset({3, 5, 7})
    assert cron("cron(0 9 ? * SUN,MON,WED,FRI *)").weekdays.values == frozenset({1, 2, 4, 6})
    # September 2026 starts on a Tuesday: its first Monday is the 7th, its second the 14th
    after = datetime(2026, 9, 1, tzinfo=UTC)
    assert cron("cron(0 6 ? * 2#1 *)").next_after(after) == datetime(2026, 9, 7, 6, tzinfo=UTC)
    assert cron("cron(0 6 ? * 2#2 *)").next_after(after) == datetime(2026, 9, 14, 6, tzinfo=UTC)
    assert cron("cron(0 6 ? * 3#1 *)").next_after(after) == datetime(2026, 9, 1, 6, tzinfo=UTC)


def test_a_fire_exactly_five_years_ahead_is_still_found() -> None:
    after = datetime(2026, 12, 4, 12, tzinfo=UTC)
    found = cron("cron(0 13 4 12 ? 2031)").next_after(after)
    assert found == datetime(2031, 12, 4, 13, tzinfo=UTC)
    with pytest.raises(InvalidExpression, match="never fires"):
        cron("cron(0 13 5 12 ? 2031)").next_after(after)
