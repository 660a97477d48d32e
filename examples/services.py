"""Stand-ins for the external systems the examples call (email, workspaces, payments).

They count every side effect per idempotency key so tests and the demo can show that a
crash or a retry did not repeat one. Real code would call SES, an internal API, etc.,
passing the same key so the remote side deduplicates too.

``FakeServices`` keeps its books in memory (tests in one process); ``FileServices`` in a
JSON file under a lock, for ``durable dev`` whose workers are separate processes. The
examples use the file when ``DURABLE_EXAMPLE_EFFECTS`` names one.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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


class FileServices:
    """The same books in a JSON file, shared by processes (flock serializes them)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _books(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            books: dict[str, Any] = (
                json.loads(self.path.read_text())
                if self.path.exists()
                else {"calls": {}, "effects": {}, "by_key": {}, "flaky": 0}
            )
            yield books
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(books))
            os.replace(tmp, self.path)

    def perform(self, kind: str, key: str, result: str) -> str:
        with self._books() as books:
            books["calls"][kind] = books["calls"].get(kind, 0) + 1
            if key in books["by_key"]:
                return str(books["by_key"][key])
            books["effects"][kind] = books["effects"].get(kind, 0) + 1
            books["by_key"][key] = result
            return result

    def lookup(self, key: str) -> str | None:
        with self._books() as books:
            found = books["by_key"].get(key)
            return None if found is None else str(found)

    def fail_next(self, times: int) -> None:
        with self._books() as books:
            books["flaky"] = times

    def maybe_fail(self) -> None:
        with self._books() as books:
            fail = books["flaky"] > 0
            if fail:
                books["flaky"] -= 1
        if fail:  # raised after the books are written back, so the count really drops
            raise ConnectionError("upstream timed out (simulated)")

    @property
    def effects(self) -> Counter[str]:
        with self._books() as books:
            return Counter(books["effects"])

    @property
    def calls(self) -> Counter[str]:
        with self._books() as books:
            return Counter(books["calls"])

    def reset(self) -> None:
        self.path.unlink(missing_ok=True)


_shared = os.environ.get("DURABLE_EXAMPLE_EFFECTS")
services: FakeServices | FileServices = FileServices(Path(_shared)) if _shared else FakeServices()


def demo_pause() -> None:
    """Lets the demo catch a step in the act (``DURABLE_EXAMPLE_STEP_SECONDS``)."""
    seconds = float(os.environ.get("DURABLE_EXAMPLE_STEP_SECONDS", "0") or 0)
    if seconds > 0:
        import time

        time.sleep(seconds)
