"""Callback tokens: ``<run_id>.<position>.<mac>``, unguessable and stored hashed.

The MAC is HMAC-SHA256(secret, run_id|position|nonce) with a random nonce recorded on
the step: a replayed ``submit`` rebuilds the same URL, while the ledger alone (nonce and
token hash) cannot forge one without the secret. Only the token's SHA-256 is stored.

Rotation: the secret's value is one key, or a JSON array of keys while rotating: the
first signs new tokens, the others only verify. A token signed by any of them verifies,
and a replay rebuilds a recorded token with whichever key reproduces its stored hash, so
a callback pending across a rotation keeps its URL.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
from collections.abc import Sequence

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


def parse_secret(value: str) -> tuple[bytes, tuple[bytes, ...]]:
    """(signing key, verify-only keys) from the secret's value: a JSON array of keys is a
    rotation in progress, the signing key first (the shape webhook secrets use for
    theirs); anything else, even a generated password that starts with ``[``, is one key
    (checked where it is used, as before). A rotation's keys are checked here, so a bad
    one stops the function at its cold start rather than failing runs later."""
    try:
        keys = json.loads(value) if value.lstrip().startswith("[") else None
    except ValueError:
        keys = None
    if not isinstance(keys, list):
        return value.encode(), ()
    if not keys or not all(isinstance(k, str) for k in keys):
        raise InvalidInput(
            'the callback secret is a JSON array but not of keys: store ["<signing key>", '
            '"<other key>"] while rotating, or one plain key',
            field="callback_secret",
        )
    signing, *others = (check_secret(k.encode()) for k in keys)
    return signing, tuple(others)


def _mac(secret: bytes, run_id: str, position: str, nonce: str) -> str:
    digest = hmac.new(secret, f"{run_id}|{position}|{nonce}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def make_token(secret: bytes, run_id: str, position: str, nonce: str) -> str:
    return f"{run_id}.{position}.{_mac(check_secret(secret), run_id, position, nonce)}"


def rebuild_token(
    secrets: Sequence[bytes], run_id: str, position: str, nonce: str, stored_hash: str
) -> str | None:
    """The token a recorded callback was sent with: made with the first key (the signing
    one, then the others) that reproduces the stored hash; None if a key retired meanwhile
    signed it (answers to it are then refused as unknown)."""
    for key in secrets:
        token = make_token(key, run_id, position, nonce)
        if hmac.compare_digest(token_hash(token), stored_hash):
            return token
    return None


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


def verify(secrets: Sequence[bytes], token: str, nonce: str) -> bool:
    """Whether any key (current or one a rotation retired) signed ``token``."""
    run_id, position, mac = parse_token(token)
    matches = [
        hmac.compare_digest(_mac(check_secret(key), run_id, position, nonce), mac)
        for key in secrets
    ]
    return any(matches)  # every key tried: the time taken does not tell which one matched
