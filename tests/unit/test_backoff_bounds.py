"""Backoff that stops at its cap instead of overflowing (issue 43, hole 6).

``base * factor ** n`` passes what a float holds after about a thousand doublings and what
a ``timedelta`` holds after some fifty: a condition polled every second for an hour, or a
retry policy with many attempts, must reach its cap, not ``OverflowError``. One helper
(``durable.core.backoff``) computes the capped growth for both.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable import App, CallbackTimeout, Context, RetryableError, RetryPolicy, RunStatus
from durable.core.backoff import capped_delay, capped_growth
from durable.core.model import StepStatus
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit

bases = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False)
factors = st.floats(min_value=1.0, max_value=1000.0, allow_nan=False)
exponents = st.integers(min_value=0, max_value=10**6)
caps = st.floats(min_value=1e-6, max_value=1e12, allow_nan=False)


@given(bases, factors, exponents, caps)
def test_never_above_the_cap_and_never_an_exception(
    base: float, factor: float, n: int, cap: float
) -> None:
    grown = capped_growth(base, factor, n, cap)
    assert 0.0 <= grown <= cap
    assert math.isfinite(grown)


@given(bases, factors, st.integers(min_value=0, max_value=10**6 - 1), caps)
def test_monotone_in_the_exponent(base: float, factor: float, n: int, cap: float) -> None:
    assert capped_growth(base, factor, n, cap) <= capped_growth(base, factor, n + 1, cap)


@given(bases, st.floats(min_value=1.0, max_value=10.0), st.integers(0, 40), caps)
def test_the_exact_formula_while_it_is_below_the_cap(
    base: float, factor: float, n: int, cap: float
) -> None:
    exact = base * factor**n
    grown = capped_growth(base, factor, n, cap)
    if exact < cap * (1 - 1e-9):  # clear of the cap: the formula itself
        assert grown == exact
    elif exact > cap * (1 + 1e-9):
        assert grown == cap


@given(
    st.integers(min_value=1, max_value=10**6),
    factors,
    exponents,
    st.sampled_from([timedelta(seconds=10), timedelta(days=365), timedelta.max]),
)
def test_durations_stay_within_their_cap(
    micros: int, factor: float, n: int, cap: timedelta
) -> None:
    delay = capped_delay(timedelta(microseconds=micros), factor, n, cap)
    assert timedelta(0) < delay <= cap


def test_small_and_degenerate_cases() -> None:
    assert capped_growth(1.0, 2.0, 3, 100.0) == 8.0
    assert capped_growth(1.0, 2.0, 80, 3600.0) == 3600.0
    assert capped_growth(5.0, 1.0, 10**6, 100.0) == 5.0  # no growth: a fixed delay
    assert capped_growth(500.0, 2.0, 0, 100.0) == 100.0  # capped from the start
    assert capped_growth(0.0, 2.0, 10, 100.0) == 0.0
    assert capped_growth(1e-300, 10.0, 400, 1e308) == pytest.approx(
        1e100
    )  # 10**400 alone overflows
    assert capped_growth(1.0, 1000.0, 10**6, math.inf) == math.inf
    assert capped_delay(timedelta(seconds=1), 2.0, 10**6, timedelta.max) == timedelta.max


def test_an_uncapped_growth_at_the_largest_float_is_the_cap_not_an_overflow() -> None:
    """2 ** 1024 is the first power of two past the largest float: with no cap (inf) the
    answer is the cap, and neither the power nor ``exp`` of its logarithm is formed."""
    assert capped_growth(1.0, 2.0, 1024, math.inf) == math.inf
    assert capped_growth(1.0, 2.0, 1023, math.inf) == 2.0**1023


def test_a_retry_policy_with_many_attempts_reaches_its_maximum_delay() -> None:
    policy = RetryPolicy(max_attempts=10_000, backoff=10, jitter="none")
    assert policy.next_delay(5000, RetryableError("again")) == policy.max_delay
    jittered = RetryPolicy(max_attempts=10_000, backoff=10, jitter="full")
    delay = jittered.next_delay(9_999, RetryableError("again"))
    assert delay is not None and timedelta(0) <= delay <= jittered.max_delay
    huge = RetryPolicy(max_attempts=10_000, backoff=1000, max_delay=timedelta.max, jitter="none")
    assert huge.next_delay(9_999, RetryableError("again")) == timedelta.max


def test_a_condition_polled_every_second_for_an_hour_times_out() -> None:
    """Polled every second with ``backoff=2.0`` and a one-hour timeout: the delay reaches
    its cap (ten intervals) and stays there, and the wait ends ``CallbackTimeout``, the
    last check clamped at the timeout."""
    app = App()
    checks: list[int] = []

    def never() -> bool:
        checks.append(1)
        return False

    @app.workflow
    def wf(ctx: Context) -> str:
        try:
            ctx.wait_for_condition(
                never, timedelta(seconds=1), timedelta(hours=1), backoff=2.0, name="never"
            )
        except CallbackTimeout as e:
            return f"timed out: {e}"
        return "met"

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.advance(hours=2)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert str(runner.result(run_id)).startswith("timed out: condition 'never'")
    (rec,) = runner.history(run_id)
    assert rec.status == StepStatus.TIMED_OUT
    # 1, 2, 4, 8 s, then every 10 s (the default cap): some 360 checks in the hour.
    assert 350 <= len(checks) <= 370


def test_a_condition_with_a_long_max_interval_still_times_out() -> None:
    """``max_interval`` far past the timeout: the growth is capped at it, and the next
    check is clamped at the timeout, never a date past what the ledger holds."""
    app = App()

    @app.workflow
    def wf(ctx: Context) -> str:
        try:
            ctx.wait_for_condition(
                lambda: False,
                timedelta(seconds=1),
                timedelta(hours=1),
                backoff=1000.0,
                max_interval=timedelta.max,
                name="never",
            )
        except CallbackTimeout:
            return "timed out"
        return "met"

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.advance(hours=2)
    assert runner.result(run_id) == "timed out"
