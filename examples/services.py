"""Stand-ins for the external systems the examples call (email, workspaces, an API).

They count every side effect per idempotency key so tests and the demo can show that a
crash or a retry did not repeat one. Real code would call SES, an internal API, etc.,
passing the same key so the remote side deduplicates too.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class FakeServices:
    """Thread-safe counters of effects, by kind and by idempotency key."""

    calls: Counter[str] = field(default_factory=Counter)  # every request we sent
    effects: Counter[str] = field(default_factory=Counter)  # what actually happened
    by_key: dict[str, str] = field(default_factory=dict)
    flaky_failures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def perform(self, kind: str, key: str, result: str) -> str:
        with self.lock:
            self.calls[kind] += 1
            if key in self.by_key:  # the remote side deduplicates by key
                return self.by_key[key]
            self.effects[kind] += 1
            self.by_key[key] = result
            return result

    def lookup(self, key: str) -> str | None:
        with self.lock:
            return self.by_key.get(key)

    def fail_next(self, times: int) -> None:
        with self.lock:
            self.flaky_failures = times

    def maybe_fail(self) -> None:
        with self.lock:
            if self.flaky_failures > 0:
                self.flaky_failures -= 1
                raise ConnectionError("upstream timed out (simulated)")

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.effects.clear()
            self.by_key.clear()
            self.flaky_failures = 0


services = FakeServices()
