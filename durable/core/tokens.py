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
import copy
import dataclasses
import hashlib
import hmac
import json
import os
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, SecretBytes, SecretStr

from durable.core.token_shape import MAC_PART, POSITION_PART, RUN_ID_PART, scrub_bytes, scrub_text
from durable.errors import InvalidInput

# Exactly one token, from the same parts the scans look for (``token_shape``).
_TOKEN = re.compile(rf"({RUN_ID_PART})\.({POSITION_PART})\.({MAC_PART})")
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
    match = _TOKEN.fullmatch(token or "")
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


def refuse_token(value: object, field: str, what: str | None = None, carrier: str = "") -> None:
    """Refuse a name, id or key that holds a callback token (``InvalidInput`` naming
    ``field``), before anything is written.

    Values are scrubbed on their way to storage (``durable.core.write_boundary``); names,
    ids and keys cannot be: they are stored in clear because they identify what they name
    (a position's name is compared on every replay, a key derives its run's id), so one
    redacted would no longer be the same name. A token must travel in a value instead,
    typed as a secret, which seals it. The message never repeats the value: it is a
    credential, and an error is shown and stored."""
    if not isinstance(value, str) or scrub_text(value) == value:
        return
    where = carrier or "the input of the step or run that needs it"
    raise InvalidInput(
        f"{what or field} holds a callback token: names and keys are stored in clear and "
        "must be the same on every replay, so they are never redacted; pass the token in "
        f"{where}, typed as SecretStr",
        field=field,
    )


def scrub_value(value: Any, *, secrets: bool = True) -> Any:
    """``value`` with every callback token in its texts redacted, for an encoder whose text
    no scan can read (a codec that compresses, a serializer that encodes a field): what
    such an encoder writes holds no token because what it was given held none.

    Texts are redacted wherever they stand in a ``str``, ``bytes``, a ``dict`` (keys and values), a
    ``list``, ``tuple``, ``set`` or ``frozenset``, a dataclass instance (a copy by
    ``dataclasses.replace``) and a pydantic model (a copy by ``model_copy``), at any depth;
    with ``secrets``, in a ``SecretStr`` too (a codec's value is stored unsealed). Any other
    object is returned as it is, and so is a value that holds no token: the same object,
    not a copy."""
    return _scrub_value(value, secrets, set())


def _scrub_value(value: Any, secrets: bool, path: set[int]) -> Any:
    if isinstance(value, str):
        scrubbed = scrub_text(value)
        return value if scrubbed == value else scrubbed  # unchanged: the same object
    if id(value) in path:  # a cycle: left as it is (JSON has none; a codec that writes
        return value  # one meets what it met before)
    path.add(id(value))
    try:
        return _scrub_container(value, secrets, path)
    finally:
        path.discard(id(value))


def _scrub_container(value: Any, secrets: bool, path: set[int]) -> Any:
    if isinstance(value, dict):
        pairs = [
            (_scrub_value(k, secrets, path), _scrub_value(v, secrets, path))
            for k, v in value.items()
        ]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)):
            return value
        scrubbed = copy.copy(value)  # its own class (a defaultdict keeps its factory)
        scrubbed.clear()
        scrubbed.update(pairs)
        return scrubbed
    if isinstance(value, list | tuple | set | frozenset):
        items = [_scrub_value(v, secrets, path) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        if isinstance(value, list):
            scrubbed_list = copy.copy(value)
            scrubbed_list[:] = items
            return scrubbed_list
        if isinstance(value, tuple) and hasattr(value, "_make"):  # a named tuple
            return value._make(items)
        return type(value)(items)
    if isinstance(value, BaseModel):
        fields = dict(value)  # declared fields and extras, by attribute name
        update = {k: s for k, v in fields.items() if (s := _scrub_value(v, secrets, path)) is not v}
        return value.model_copy(update=update) if update else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _scrub_dataclass(value, secrets, path)
    if isinstance(value, bytes | bytearray):  # an encoder may write them as base64 or hex
        scrubbed_bytes = scrub_bytes(bytes(value))
        return value if scrubbed_bytes == value else type(value)(scrubbed_bytes)
    if secrets and isinstance(value, SecretStr):
        text = value.get_secret_value()
        scrubbed_text = scrub_text(text)
        return value if scrubbed_text == text else SecretStr(scrubbed_text)
    if secrets and isinstance(value, SecretBytes):
        data = value.get_secret_value()
        scrubbed_data = scrub_bytes(data)
        return value if scrubbed_data == data else SecretBytes(scrubbed_data)
    return value


def _scrub_dataclass(value: Any, secrets: bool, path: set[int]) -> Any:
    changed = {}
    for field in dataclasses.fields(value):
        current = getattr(value, field.name)
        scrubbed = _scrub_value(current, secrets, path)
        if scrubbed is not current:
            changed[field.name] = (field.init, scrubbed)
    if not changed:
        return value
    copied = dataclasses.replace(value, **{k: v for k, (init, v) in changed.items() if init})
    for name, (init, scrubbed) in changed.items():
        if not init:  # not an argument of replace: set on the copy (frozen or not)
            object.__setattr__(copied, name, scrubbed)
    return copied
