"""Webhook signatures: HMAC-SHA256 over the timestamp and the raw body.

A sender signs ``f"{timestamp}.".encode() + body`` with the shared secret and sends

    X-Durable-Timestamp: 1767225600              (Unix seconds)
    X-Durable-Signature: v1=<hex digest>[,v1=<hex digest of the previous secret>]

The timestamp bounds a signature's life (``tolerance``: stale ones are refused) and a
single-use marker per signature refuses a replay inside that window. The secret is a
string, or a JSON object mapping hook names to a string or a list of strings (several
secrets are accepted during a rotation).
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
SCHEME = "v1"


class NonceStore(Protocol):
    def claim(self, key: str, expiration: int, now: int) -> bool:
        """Record ``key`` until ``expiration``; False when it is still recorded at ``now``."""
        ...

    def release(self, key: str) -> None: ...


def _unauthorized(message: str) -> HttpError:
    return HttpError(401, "Unauthorized", message)


def sign(secret: bytes, timestamp: int, body: bytes) -> str:
    """The ``X-Durable-Signature`` value for ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"{SCHEME}={digest}"


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


def secrets_for(hook: str, secret_text: str) -> list[bytes]:
    """The secrets that may sign ``hook``, from the stored secret's text."""
    text = secret_text.strip()
    if not text.startswith("{"):
        return [text.encode()]
    try:
        table = json.loads(text)
    except ValueError:
        return [text.encode()]
    value = table.get(hook, table.get("*")) if isinstance(table, dict) else None
    if isinstance(value, str):
        return [value.encode()]
    if isinstance(value, list):
        return [v.encode() for v in value if isinstance(v, str) and v]
    return []


def verify(secrets: list[bytes], timestamp: int, body: bytes, digests: list[str]) -> str:
    """The digest that matches one of ``secrets``; 401 when none does."""
    for secret in secrets:
        expected = sign(secret, timestamp, body).partition("=")[2]
        for digest in digests:
            if hmac.compare_digest(expected, digest):
                return digest
    raise _unauthorized("signature does not match: check the secret and sign the raw body")


def nonce_key(hook: str, digest: str) -> str:
    # The digest is itself a MAC; hashing it again keeps the stored key fixed-length.
    return "hook-signature#" + hashlib.sha256(f"{hook}|{digest}".encode()).hexdigest()
