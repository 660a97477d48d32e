"""Secret-typed values are stored sealed: envelope encryption with a data key per run.

A workflow marks a value secret by its type: ``pydantic.SecretStr``, ``SecretBytes`` or
``Secret[T]`` anywhere in an input, a step's or the workflow's result (a card token, an
API key, an e-mail address). Such a value is stored as ``{"$sealed": "<base64>"}``:
AES-256-GCM under the run's data key, with the run id as associated data (a sealed value
copied to another run does not open there). The data key is made once per run by a
``KeyService`` (KMS ``GenerateDataKey`` on AWS) and kept on the run item only in its
wrapped form, which only the key service can open; a worker opens it at most once per
invocation. So a reader of the table, a backup or an export sees ciphertext, and the API,
the CLI and the console show ``***`` (``masked``). Workflow code sees the secret types,
whose repr is masked too: a log line of the value shows nothing.

A callback's answer is the exception: the API receives it, and the API may make data
keys but never open one (it holds ``kms:GenerateDataKey``, not ``kms:Decrypt``), so it
cannot use the run's key. It seals the answer's secret-typed fields under a data key of
their own, whose wrapped form travels in the node, ``{"$sealed": ..., "$key": "<run>:
<wrapped>"}``; the worker opens that key when it replays the answer.

Values without secret types take the plain path (``durable.core.serde``), at no cost.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from typing import Any, Protocol

from durable.errors import TerminalError

SEALED = "$sealed"
KEY = "$key"  # a node sealed under a data key of its own: that key's record
MASK = "***"
_NONCE_BYTES = 12


class KeyService(Protocol):
    """Makes and opens the data keys of runs (KMS on AWS; ``durable.adapters.kms``)."""

    def new_data_key(self, run_id: str) -> tuple[bytes, str]:
        """(a fresh 32-byte key, its wrapped form as text) for ``run_id``."""
        ...

    def open_data_key(self, run_id: str, wrapped: str) -> bytes:
        """The key ``wrapped`` holds; only for the run it was made for."""
        ...


class SecretsNeedKeys(TerminalError):
    """A secret-typed value met a deployment without a key service to seal it."""


class Sealer:
    """Seals and opens one run's secret values with a data key. ``record``: the key's
    record, when the nodes it seals must carry it (a key of their own, not the run's)."""

    def __init__(self, key: bytes, run_id: str, record: str | None = None) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(key)
        self._aad = run_id.encode()
        self.record = record

    def seal(self, plaintext: bytes) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, plaintext, self._aad)
        return base64.b64encode(nonce + sealed).decode()

    def open(self, text: str) -> bytes:
        raw = base64.b64decode(text)
        return self._aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], self._aad)


def key_record(owner: str, wrapped: str) -> str:
    """What the run item keeps: the run the key was made for (its associated data, so a
    fork, which copies sealed values, keeps opening them), then the wrapped key."""
    return f"{owner}:{wrapped}"


def open_sealer(keys: KeyService, record: str) -> Sealer:
    owner, _, wrapped = record.partition(":")
    return Sealer(keys.open_data_key(owner, wrapped), owner)


def is_sealed(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get(SEALED), str):
        return False
    return len(value) == 1 or (len(value) == 2 and isinstance(value.get(KEY), str))


def transform(value: Any, change: Callable[[Any], Any | None]) -> Any:
    """``value`` (plain data) with every node ``change`` answers for replaced by its
    answer (None: keep walking)."""
    changed = change(value)
    if changed is not None:
        return changed
    if isinstance(value, dict):
        return {k: transform(v, change) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [transform(v, change) for v in value]
    return value


def masked(value: Any) -> Any:
    """A stored value as readers see it: every sealed secret shown as ``***``."""
    return transform(value, lambda node: MASK if is_sealed(node) else None)


class LocalKeys:
    """A key service in this process (``LocalRunner``, tests): data keys wrapped with a
    random master key that lives as long as this object."""

    def __init__(self, master: bytes | None = None) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._master = AESGCM(master or os.urandom(32))

    def new_data_key(self, run_id: str) -> tuple[bytes, str]:
        key = os.urandom(32)
        nonce = os.urandom(_NONCE_BYTES)
        wrapped = self._master.encrypt(nonce, key, run_id.encode())
        return key, base64.b64encode(nonce + wrapped).decode()

    def open_data_key(self, run_id: str, wrapped: str) -> bytes:
        raw = base64.b64decode(wrapped)
        return self._master.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], run_id.encode())
