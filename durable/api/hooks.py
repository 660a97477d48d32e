"""Webhook keys and replay markers (the signature schemes are ``durable.hooks``).

The stored secret is a JSON object mapping hook names to a key or a list of keys (several
are accepted during a rotation, the newest first). One plain key for every hook (or a
``"*"`` entry) is accepted only where the settings say hooks share a key
(``webhook_shared_secret``): a deployed stack gets a key per hook unless it opts out.
"""

from __future__ import annotations

import json
from typing import Protocol

from durable.hooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, header, sign

__all__ = ["SIGNATURE_HEADER", "TIMESTAMP_HEADER", "NonceStore", "header", "secrets_for", "sign"]


class NonceStore(Protocol):
    def claim(self, key: str, expiration: int, now: int) -> bool:
        """Record ``key`` until ``expiration``; False when it is still recorded at ``now``."""
        ...

    def release(self, key: str) -> None: ...


def secrets_for(hook: str, secret_text: str, *, shared: bool) -> list[bytes]:
    """The keys that may sign ``hook``, from the stored secret's text; none when the hook
    has no key of its own and hooks do not share one (``shared``)."""
    text = secret_text.strip()
    table: object = None
    if text.startswith("{"):
        try:
            table = json.loads(text)
        except ValueError:
            table = None
    if not isinstance(table, dict):
        return [text.encode()] if shared and text else []
    value = table.get(hook, table.get("*") if shared else None)
    if isinstance(value, str):
        return [value.encode()]
    if isinstance(value, list):
        return [v.encode() for v in value if isinstance(v, str) and v]
    return []
