"""Issue 47 item 6: ``parse_time`` reads the ledger's timestamps with
``datetime.fromisoformat`` and gives the same results, and the same errors, as the slicing
implementation it replaced (kept below as the oracle) for any text at all. How much faster
it is is a figure, not a test: ``python -m benchmarks.parse_time``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from durable.core.model import format_time, parse_time

pytestmark = pytest.mark.unit


def old_parse_time(text: str) -> datetime:
    """The implementation before issue 47, verbatim."""
    if len(text) != 24 or text[10] != "T" or text[23] != "Z":
        raise ValueError(f"not a ledger timestamp: {text!r}")
    return datetime(
        int(text[0:4]),
        int(text[5:7]),
        int(text[8:10]),
        int(text[11:13]),
        int(text[14:16]),
        int(text[17:19]),
        int(text[20:23]) * 1000,
        tzinfo=UTC,
    )


def outcome(parse: Callable[[str], datetime], text: str) -> tuple[str, object]:
    try:
        parsed = parse(text)
    except (ValueError, TypeError) as error:
        return type(error).__name__, str(error)
    return "ok", (parsed, parsed.tzinfo)


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
def test_every_formatted_time_parses_as_before(when: datetime) -> None:
    text = format_time(when.replace(tzinfo=UTC))
    assert outcome(parse_time, text) == outcome(old_parse_time, text)
    assert parse_time(text) == when.replace(microsecond=when.microsecond // 1000 * 1000, tzinfo=UTC)
    assert parse_time(text).tzinfo is UTC


# Texts of the ledger's length, each character from the ledger's alphabet or one of the
# things int() or fromisoformat read differently: signs, spaces, underscores, other digits
# (Arabic-Indic), a week date's W, the comma fromisoformat takes for a decimal point.
_CHARS = st.sampled_from([*"0123456789-:.TZ +_W,z", "\u0663"])
_TEMPLATE = "2026-12-06T07:10:32.224Z"


@st.composite
def near_ledger_times(draw: st.DrawFn) -> str:
    chars = list(_TEMPLATE)
    for index in draw(st.lists(st.integers(0, 23), max_size=4)):
        chars[index] = draw(_CHARS)
    return "".join(chars)


@settings(max_examples=3000)
@given(near_ledger_times())
@example("2026-W01-1T07:10:32.224Z")  # an ISO week date: fromisoformat reads it, we refuse
@example("2026-12-06T071032.22400Z")  # a compact time
@example("2026-12-06T24:00:00.000Z")  # midnight as 24:00
@example("2026-13-06T07:10:32.224Z")  # out of range: the datetime's own message
@example("2026-12-06T07:10:32,224Z")  # a comma: the old code never looked at it
@example("2026- 2-06T07:10:32.224Z")  # int() skips the space
@example("2026-1_-06T07:10:32.224Z")  # int() refuses a trailing underscore
@example("2026-12-06T07:10:32.224z")
def test_near_ledger_texts_parse_or_fail_as_before(text: str) -> None:
    assert outcome(parse_time, text) == outcome(old_parse_time, text)


@given(st.text(max_size=30))
def test_any_text_parses_or_fails_as_before(text: str) -> None:
    assert outcome(parse_time, text) == outcome(old_parse_time, text)
