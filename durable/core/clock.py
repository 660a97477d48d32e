"""Time as a port: the engine never calls ``datetime.now`` or ``time.sleep`` directly.

``ScaledClock`` is ``durable dev``'s virtual clock (``durable.local.clock`` keeps its
file); here because the deployed composition (``durable.adapters.aws_services``) reads it
when ``DURABLE_CLOCK_FILE`` is set, and adapters do not import ``durable.local``."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds`` (served in-process short waits and retry backoffs)."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A manually advanced clock; ``sleep`` advances it instead of blocking."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        self.advance(timedelta(seconds=max(0.0, seconds)))

    def advance(self, delta: timedelta) -> datetime:
        with self._lock:
            self._now += delta
            return self._now

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = when


@dataclass(frozen=True, slots=True)
class Epoch:
    scale: float
    real_epoch: float  # time.time() when the clock was created
    virtual_epoch: float  # virtual POSIX seconds at that moment


class ScaledClock:
    def __init__(self, epoch: Epoch) -> None:
        if epoch.scale <= 0:
            raise ValueError("time scale must be positive")
        self.epoch = epoch

    @property
    def scale(self) -> float:
        return self.epoch.scale

    def now(self) -> datetime:
        e = self.epoch
        virtual = e.virtual_epoch + (time.time() - e.real_epoch) * e.scale
        return datetime.fromtimestamp(virtual, UTC)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds / self.epoch.scale)

    def real(self, virtual: timedelta) -> float:
        """Real seconds a virtual duration takes."""
        return virtual.total_seconds() / self.epoch.scale


def read(path: Path) -> Epoch:
    return Epoch(**json.loads(path.read_text()))
