"""Exponential growth with a ceiling that never overflows.

A retry's delay and a condition's poll interval grow as ``base * factor ** n`` up to a
cap. Written as that formula, a float overflows (``OverflowError``) after a few hundred
doublings and a ``timedelta`` long before: a condition polled every second for an hour
with ``backoff=2.0`` reaches ``2 ** 80`` seconds, past what a ``timedelta`` holds. The
cap is known before the multiplication, so the comparison is made on logarithms and the
power is only computed when its result is below the cap.
"""

from __future__ import annotations

import math
from datetime import timedelta

# exp() of more than this is past the largest float.
_LARGEST_EXPONENT = math.log(2.0) * 1024


def capped_growth(base: float, factor: float, n: int, cap: float) -> float:
    """``min(base * factor ** n, cap)`` for ``base >= 0``, ``factor >= 1``, ``n >= 0``
    and ``cap >= 0``, whatever their size: never ``OverflowError``, never above ``cap``,
    non-decreasing in ``n``, and exactly the formula whenever it is below the cap (a
    factor of 1 or less, or NaN, is no growth: ``base``, capped)."""
    if base <= 0.0 or cap <= 0.0:
        return max(0.0, min(base, cap))
    if base >= cap:
        return cap
    if n <= 0 or not factor > 1.0:  # (a NaN factor grows nothing)
        return base
    # log(base * factor ** n) >= log(cap): capped, without forming the power. Below the
    # cap (or past what a float holds, with an infinite cap) the product is finite;
    # ``factor ** n`` alone may still overflow when ``base`` is tiny, and then the
    # logarithm's value is the answer.
    exponent = math.log(base) + n * math.log(factor)
    if exponent >= math.log(cap) or exponent >= _LARGEST_EXPONENT:
        return cap
    try:
        grown = base * float(factor) ** n
    except OverflowError:
        grown = math.exp(exponent)
    return min(grown, cap)


def capped_delay(base: timedelta, factor: float, n: int, cap: timedelta) -> timedelta:
    """``capped_growth`` on durations: ``cap`` itself once the growth reaches it (a
    ``timedelta`` rebuilt from a large float of seconds may round past ``timedelta.max``)."""
    if base >= cap:
        return cap
    seconds = capped_growth(base.total_seconds(), factor, n, cap.total_seconds())
    if seconds >= cap.total_seconds():
        return cap
    return min(timedelta(seconds=seconds), cap)
