"""Callback tokens: ``<run_id>.<position>.<mac>``, unguessable and stored hashed.

The MAC is HMAC-SHA256(secret, run_id|position|nonce) with a random nonce recorded on
the step: a replayed ``submit`` rebuilds the same URL, while the ledger alone (nonce and
token hash) cannot forge one without the secret. Only the token's SHA-256 is stored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re

from durable.errors import InvalidInput

_TOKEN = re.compile(r"^([0-9A-Z]{26})\.([0-9]{4}(?:\.[0-9]{4})*)\.([A-Za-z0-9_-]{43})$")
MIN_SECRET_BYTES = 16


def new_nonce() -> str:
    return os.urandom(16).hex()


def check_secret(secret: bytes | None) -> bytes:
    if secret is None or len(secret) < MIN_SECRET_BYTES:
        raise InvalidInput(
            "callbacks need a secret of at least 16 bytes: set callback_secret in the "
            "engine settings (DURABLE_CALLBACK_SECRET, from Secrets Manager or SSM)",
            field="callback_secret",
        )
    return secret


def _mac(secret: bytes, run_id: str, position: str, nonce: str) -> str:
    digest = hmac.new(secret, f"{run_id}|{position}|{nonce}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def make_token(secret: bytes, run_id: str, position: str, nonce: str) -> str:
    return f"{run_id}.{position}.{_mac(check_secret(secret), run_id, position, nonce)}"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_token(token: str) -> tuple[str, str, str]:
    """(run_id, position, mac) of a well-formed token; ``InvalidInput`` otherwise."""
    match = _TOKEN.match(token or "")
    if match is None:
        raise InvalidInput(
            "malformed callback token: expected <run_id>.<position>.<signature> exactly as "
            "the callback URL carries it",
            field="token",
        )
    return match.group(1), match.group(2), match.group(3)


def verify(secret: bytes, token: str, nonce: str) -> bool:
    run_id, position, mac = parse_token(token)
    expected = _mac(check_secret(secret), run_id, position, nonce)
    return hmac.compare_digest(expected, mac)
