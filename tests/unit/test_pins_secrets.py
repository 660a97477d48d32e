"""Pins on sealed secrets (durable/core/secrets.py).

Each test names the mutants it kills (ids of ``python -m tests.mutation --module
durable/core/secrets.py --list``).
"""

from __future__ import annotations

import base64
import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from durable.core.secrets import MASK, SEALED, LocalKeys, Sealer, masked


def test_a_value_sealed_as_stored_opens_nonce_first_12_bytes() -> None:
    """GIVEN a value sealed the way stored items hold it (base64 of a 12-byte nonce, then
    AES-256-GCM ciphertext and tag, the run id as associated data), made here without the
    engine WHEN the run's sealer opens it THEN the plaintext comes back, and what the
    sealer itself seals has that layout. (Items written by one version must open in the
    next.) Kills secrets-791967b2 (a 13-byte nonce)."""
    key = os.urandom(32)
    nonce = os.urandom(12)
    stored = base64.b64encode(nonce + AESGCM(key).encrypt(nonce, b"4242", b"run-1")).decode()

    sealer = Sealer(key, "run-1")

    assert sealer.open(stored) == b"4242"
    raw = base64.b64decode(sealer.seal(b"card"))
    assert len(raw) == 12 + len(b"card") + 16
    assert AESGCM(key).decrypt(raw[:12], raw[12:], b"run-1") == b"card"


def test_a_data_key_wrapped_by_local_keys_has_the_same_layout() -> None:
    """GIVEN LocalKeys with a known master key WHEN it wraps a data key THEN the wrapped
    form is base64 of a 12-byte nonce then the sealed key, under the run id."""
    master = os.urandom(32)
    key, wrapped = LocalKeys(master).new_data_key("run-1")

    raw = base64.b64decode(wrapped)
    assert AESGCM(master).decrypt(raw[:12], raw[12:], b"run-1") == key
    assert LocalKeys(master).open_data_key("run-1", wrapped) == key


def test_masked_reaches_sealed_values_inside_lists_and_tuples() -> None:
    """GIVEN stored data with sealed values inside a list, a tuple and a nested object
    WHEN masked for a reader THEN each sealed value reads ``***`` and the rest is kept
    (tuples come back as lists, as JSON holds them). Kills secrets-5b717f33 (a list
    answered None)."""
    sealed = {SEALED: "c2VhbGVk"}
    value = {
        "cards": [sealed, "plain", 3],
        "pair": (sealed, {"inner": [sealed]}),
        "not_sealed": {SEALED: 1},
    }

    assert masked(value) == {
        "cards": [MASK, "plain", 3],
        "pair": [MASK, {"inner": [MASK]}],
        "not_sealed": {SEALED: 1},
    }
    assert masked([sealed]) == [MASK]


def test_a_sealed_node_is_its_text_alone_or_with_its_keys_record() -> None:
    """Kills secrets-457b5702 (``len == 2 and isinstance(KEY, str)`` -> ``or``): a dict
    that merely holds ``$sealed`` beside another field is data, not a sealed node."""
    from durable.core.secrets import is_sealed

    assert is_sealed({"$sealed": "AAAA"})
    assert is_sealed({"$sealed": "AAAA", "$key": "01J:wrapped"})
    assert not is_sealed({"$sealed": "AAAA", "note": "x"})
    assert not is_sealed({"$sealed": "AAAA", "$key": 7})
    assert not is_sealed({"$sealed": 1})
