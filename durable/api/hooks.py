"""Webhook signatures: HMAC-SHA256 over the request's method, path, time and raw body.

A sender signs ``b"v2\n" + f"{timestamp}\nPOST\n/hooks/{name}\n".encode() + body`` with
the hook's secret (``sign`` below) and sends

    X-Durable-Timestamp: 1767225600              (Unix seconds)
    X-Durable-Signature: v2=<hex digest>[,v2=<hex digest with the previous secret>]

The signature names the hook it is for, so a delivery to one hook is worthless at another;
the timestamp bounds its life (``tolerance``: stale ones are refused); and a single-use
marker per delivery (its digest, across every hook) refuses a replay inside that window.

The stored secret is a JSON object mapping hook names to a key or a list of keys (several
are accepted during a rotation, the newest first). One plain key for every hook (or a
``"*"`` entry) is accepted only where the settings say hooks share a key
(``webhook_shared_secret``): a deployed stack gets a key per hook unless it opts out.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Protocol

from durable.api.errors import HttpError

TIMESTAMP_HEADER = "X-Durable-Timestamp"
SIGNATURE_HEADER = "X-Durable-Signature"
SCHEME = "v2"


class NonceStore(Protocol):
    def claim(self, key: str, expiration: int, now: int) -> bool:
        """Record ``key`` until ``expiration``; False when it is still recorded at ``now``."""
        ...

    def release(self, key: str) -> None: ...


def _unauthorized(message: str) -> HttpError:
    return HttpError(401, "Unauthorized", message)


def signed_bytes(hook: str, timestamp: int, body: bytes) -> bytes:
    """What a signature covers: scheme, time, method, the hook's path and the raw body."""
    return f"{SCHEME}\n{timestamp}\nPOST\n/hooks/{hook}\n".encode() + body


def sign(secret: bytes, timestamp: int, body: bytes, hook: str) -> str:
    """The ``X-Durable-Signature`` value for ``body`` sent to ``/hooks/<hook>`` at
    ``timestamp``."""
    message = signed_bytes(hook, timestamp, body)
    return f"{SCHEME}={hmac.new(secret, message, hashlib.sha256).hexdigest()}"


def header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def parse(headers: Mapping[str, str]) -> tuple[int, list[str]]:
    """(timestamp, hex digests) from the request headers; 401 when missing or malformed."""
    stamp = header(headers, TIMESTAMP_HEADER)
    signature = header(headers, SIGNATURE_HEADER)
    if not stamp or not signature:
        raise _unauthorized(
            f"missing {TIMESTAMP_HEADER} or {SIGNATURE_HEADER}: sign the request (see docs)"
        )
    try:
        timestamp = int(stamp)
    except ValueError:
        raise _unauthorized(f"{TIMESTAMP_HEADER} must be Unix seconds") from None
    digests = []
    for part in signature.split(","):
        scheme, _, digest = part.strip().partition("=")
        if scheme == SCHEME and digest:
            digests.append(digest)
    if not digests:
        raise _unauthorized(f"{SIGNATURE_HEADER} must be '{SCHEME}=<hex HMAC-SHA256>'")
    return timestamp, digests


def check_fresh(timestamp: int, now: float, tolerance: int) -> None:
    if abs(now - timestamp) > tolerance:
        raise _unauthorized(
            f"stale signature: the timestamp is more than {tolerance} s from the server's "
            "clock; sign each delivery when it is sent"
        )


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


def verify(secrets: list[bytes], hook: str, timestamp: int, body: bytes, digests: list[str]) -> str:
    """The digest that matches one of ``secrets``; 401 when none does (also when the hook
    has no key: an outsider cannot tell a hook that exists from one that does not)."""
    matched = None
    for secret in secrets:
        expected = sign(secret, timestamp, body, hook).partition("=")[2]
        for digest in digests:
            # Every pair compared in constant time, none skipped: the time taken does not
            # tell which key or which digest matched.
            if hmac.compare_digest(expected, digest) and matched is None:
                matched = digest
    if matched is None:
        raise _unauthorized(
            "signature does not match: sign v2 over the time, POST, the hook's path and the "
            "raw body with this hook's key"
        )
    return matched


def nonce_key(digest: str) -> str:
    """The single-use marker of one delivery. The digest covers the hook's path, so it is
    one marker per delivery across every hook; hashing it again keeps the key short."""
    return "hook-signature#" + hashlib.sha256(digest.encode()).hexdigest()
