"""Identifiers: ULIDs for runs and signals, derived ids for idempotent starts."""

from __future__ import annotations

import hashlib
import os
from datetime import datetime
from typing import Any

from durable.errors import InvalidInput

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, rem = divmod(value, 32)
        chars.append(_CROCKFORD[rem])
    return "".join(reversed(chars))


def time_token(now: datetime) -> str:
    """Milliseconds since the epoch in 10 sortable base-32 characters (a ULID's first 10)."""
    return _base32(int(now.timestamp() * 1000), 10)


def new_ulid(now: datetime) -> str:
    """A ULID: 48-bit millisecond time then 80 random bits, 26 sortable characters."""
    randomness = int.from_bytes(os.urandom(10), "big")
    return time_token(now) + _base32(randomness, 16)


# One rule for every idempotency key (a start's, a signal's): it travels in an HTTP
# header, where control characters cannot be sent faithfully.
MAX_KEY_CHARS = 256


def has_control_characters(text: str) -> bool:
    """C0 and C1 controls and DEL: they cannot travel in a header or a schedule name."""
    return any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text)


def check_idempotency_key(key: Any, field: str) -> str:
    """Refuse an empty, overlong or control-character key, naming ``field``."""
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_CHARS:
        raise InvalidInput(f"{field} must be 1-{MAX_KEY_CHARS} characters, not blank", field=field)
    if has_control_characters(key):
        raise InvalidInput(f"{field} must not contain control characters", field=field)
    return key


def derived_run_id(workflow: str, idempotency_key: str, scope: str | None = None) -> str:
    """Deterministic 26-character id from (workflow, key): the run item's put dedupes.

    ``scope`` gives a caller (a hook) keys of its own: keys hold no control characters
    (``check_idempotency_key``), so a scoped key's text can never be an unscoped one's."""
    text = f"{workflow}\x00{idempotency_key}"
    if scope is not None:
        text = f"{workflow}\x00{scope}\x00{idempotency_key}"
    digest = hashlib.sha256(text.encode()).digest()
    return _base32(int.from_bytes(digest[:17], "big") >> 6, 26)


def due_shard(run_id: str, shards: int) -> str:
    """The due index's partition for a run: spreads sweeper reads over ``shards`` keys."""
    return str(
        int(hashlib.md5(run_id.encode(), usedforsecurity=False).hexdigest()[:8], 16) % shards
    )


def timer_name(run_id: str, position: str, rearm_at: datetime | None = None) -> str:
    """A schedule name, ``[0-9A-Za-z_.-]{1,64}``: deterministic per wait, so arming twice
    is harmless; a re-arm after an early wake-up gets a fresh name (its time)."""
    name = f"{run_id}-{position}"
    if rearm_at is not None:
        name += f"-r{int(rearm_at.timestamp())}"
    return name
