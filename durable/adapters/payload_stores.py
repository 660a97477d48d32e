"""Payload stores without a cloud: memory (tests, ``LocalRunner``) and a folder
(``durable dev``). Both take the engine's clock, so a purge's cutoff, which is in the
engine's time (virtual time under ``durable dev --time-scale``), compares with the time
each object was written in the same terms."""

from __future__ import annotations

import os
import threading
from datetime import datetime, timedelta
from pathlib import Path

from durable.core.clock import Clock, SystemClock
from durable.core.stored_bytes import check_object
from durable.errors import PayloadMissing, StorageError


def _missing(key: str) -> PayloadMissing:
    return PayloadMissing(f"payload {key} is missing from the payload store")


class MemoryPayloads:
    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self.objects: dict[str, tuple[bytes, datetime]] = {}
        # The lifecycle class each tagged object was written with (``expire``).
        self.expire_days: dict[str, int] = {}
        self._lock = threading.Lock()

    def put(self, key: str, data: bytes, *, expire_days: int | None = None) -> None:
        check_object("the memory payload store", key, data)  # the stored-bytes rule
        with self._lock:
            self.objects[key] = (data, self.clock.now())
            if expire_days is not None:
                self.expire_days[key] = expire_days

    def expire(self, now: datetime) -> int:
        """Do what the bucket's lifecycle rules do: delete every object whose class's days
        since its write have passed (S3 rounds up to the next midnight UTC: later, never
        sooner). Returns how many."""
        with self._lock:
            gone = [
                key
                for key, days in self.expire_days.items()
                if key in self.objects and self.objects[key][1] + timedelta(days=days) <= now
            ]
            for key in gone:
                del self.objects[key]
                del self.expire_days[key]
        return len(gone)

    def get(self, key: str) -> bytes:
        with self._lock:
            held = self.objects.get(key)
        if held is None:
            raise _missing(key)
        return held[0]

    def delete_older(self, prefix: str, before: datetime) -> int:
        with self._lock:
            old = [k for k, (_, at) in self.objects.items() if k.startswith(prefix) and at < before]
            for key in old:
                del self.objects[key]
        return len(old)


class FolderPayloads:
    """One file per object under ``root`` (``<run id>/<sha256>``), written atomically; its
    modification time is the clock's time of the write."""

    def __init__(self, root: Path, clock: Clock | None = None) -> None:
        self.root = root
        self.clock = clock or SystemClock()

    def _path(self, key: str) -> Path:
        run_id, _, digest = key.partition("/")
        # Keys are made by ``durable.core.claim_check`` from a run id and a hex digest; anything
        # else (a separator, a dot-dot) would leave the folder, so it is refused.
        if not (run_id.isalnum() and digest.isalnum()):
            raise StorageError(f"payload key {key!r} is not <run id>/<sha256>", retryable=False)
        return self.root / run_id / digest

    def put(self, key: str, data: bytes, *, expire_days: int | None = None) -> None:
        # ``durable dev`` keeps every value until the run's purge or the folder is deleted
        # (DynamoDB Local runs no TTL either): ``expire_days`` has nothing to do here.
        check_object("the folder payload store", key, data)  # the stored-bytes rule
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        partial.write_bytes(data)
        at = self.clock.now().timestamp()
        os.utime(partial, (at, at))
        partial.replace(path)

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise _missing(key) from None

    def delete_older(self, prefix: str, before: datetime) -> int:
        folder = self.root / prefix.rstrip("/")
        if not prefix.rstrip("/").isalnum() or not folder.is_dir():
            return 0
        deleted = 0
        for path in folder.iterdir():
            if not path.name.startswith(".") and path.stat().st_mtime < before.timestamp():
                path.unlink(missing_ok=True)
                deleted += 1
        return deleted
