"""Producers of the values ``ctx.now()``, ``ctx.uuid()`` and ``ctx.random()`` record.

They draw from the clock port and ``os.urandom`` rather than the ``random`` module so the
determinism guard, which forbids workflow code to use ``random`` directly, stays out of
the engine's way.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from durable.core.clock import Clock


def _random_float(_: Clock) -> float:
    return int.from_bytes(os.urandom(7), "big") / float(1 << 56)


def _uuid4(_: Clock) -> uuid.UUID:
    return uuid.UUID(bytes=os.urandom(16), version=4)


def _now(clock: Clock) -> datetime:
    return clock.now()


RECORDED_VALUES: dict[str, tuple[Callable[[Clock], Any], Any]] = {
    "now": (_now, datetime),
    "uuid": (_uuid4, uuid.UUID),
    "random": (_random_float, float),
}


class _NoState:
    """``wait_for_condition``'s default ``initial_state``: a check without state (``None``
    is a state a check may start from)."""

    def __repr__(self) -> str:
        return "NO_STATE"


NO_STATE: Any = _NoState()
