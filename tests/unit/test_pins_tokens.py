"""Pins on callback tokens (durable/core/tokens.py): each test names the mutants it kills.

Mutant ids are those of ``python -m tests.mutation --module durable/core/tokens.py --list``.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, EngineConfig, RunStatus
from durable.core.tokens import (
    check_secret,
    make_token,
    new_nonce,
    parse_token,
    rebuild_token,
    token_hash,
    verify,
)
from durable.errors import CallbackNotFound, InvalidInput
from durable.testing import LocalRunner

RUN_ID = "01KDVDNA00AHM72KCA2JD6B05G"
OLD_KEY, NEW_KEY, OTHER_KEY = b"o" * 32, b"n" * 32, b"x" * 32


def test_a_secret_needs_at_least_16_bytes() -> None:
    """GIVEN secrets of 15 and 16 bytes, and none WHEN checked (and used to sign) THEN 15
    bytes and None are refused naming callback_secret, 16 bytes are accepted as they are.

    Kills tokens-c936aacb (``len(secret) < MIN_SECRET_BYTES`` -> ``<=``), tokens-a1e58d5c
    (``MIN_SECRET_BYTES = 16`` -> 17), tokens-6ab2cb93, tokens-e8c4278e (the raise
    deleted), tokens-674e51b3 (return None), tokens-08ebdb02 / c4b5d655 (the None check)."""
    for short in (b"k" * 15, None):
        with pytest.raises(InvalidInput) as info:
            check_secret(short)
        assert info.value.field == "callback_secret"
    assert check_secret(b"k" * 16) == b"k" * 16
    with pytest.raises(InvalidInput):
        make_token(b"k" * 15, RUN_ID, "0001", "nonce")
    assert parse_token(make_token(b"k" * 16, RUN_ID, "0001", "nonce"))[0] == RUN_ID


def test_a_nonce_is_128_random_bits() -> None:
    """GIVEN two new nonces WHEN compared THEN each is 32 hex digits (16 random bytes, the
    unguessable part the MAC covers) and they differ.

    Kills tokens-a94219f9 (``os.urandom(16)`` -> 17) and tokens-f7a24b4a (return None)."""
    first, second = new_nonce(), new_nonce()
    assert len(first) == len(second) == 32
    int(first, 16)  # hex digits only
    assert first != second


def test_rebuild_token_finds_the_key_that_signed_it_or_none() -> None:
    """GIVEN a token signed with the old key, and its stored hash
    WHEN it is rebuilt with the keys of a rotation THEN any order of keys that still holds
    the old one gives it back; without the old key, None (never a token of another key).

    Kills tokens-7d26aec6 (the hash comparison negated), tokens-951f8fdc (return None),
    tokens-1fb2c952 (the candidate not made)."""
    sent = make_token(OLD_KEY, RUN_ID, "0001", "n1")
    stored = token_hash(sent)
    assert rebuild_token([OLD_KEY], RUN_ID, "0001", "n1", stored) == sent
    assert rebuild_token([NEW_KEY, OLD_KEY], RUN_ID, "0001", "n1", stored) == sent
    assert rebuild_token([NEW_KEY, OTHER_KEY], RUN_ID, "0001", "n1", stored) is None
    assert rebuild_token([], RUN_ID, "0001", "n1", stored) is None


def test_verify_accepts_any_key_of_the_rotation_and_nothing_else() -> None:
    """GIVEN a token signed with the old key WHEN verified THEN it passes with the old key
    anywhere in the list, fails without it, and fails for another nonce or position.

    Kills tokens-a1c21744 (return None) and tokens-a610a2e4 / 0d887adb."""
    token = make_token(OLD_KEY, RUN_ID, "0001", "n1")
    assert verify([NEW_KEY, OLD_KEY], token, "n1") is True
    assert verify([NEW_KEY], token, "n1") is False
    assert verify([OLD_KEY], token, "n2") is False
    other_position = make_token(OLD_KEY, RUN_ID, "0002", "n1")
    assert parse_token(other_position)[1] == "0002"
    assert verify([OLD_KEY], other_position.replace(".0002.", ".0001."), "n1") is False


def signing_app(tokens: list[str]) -> App:
    app = App()

    @app.workflow(name="sign")
    def sign(ctx: Context) -> Any:
        callback = ctx.create_callback("signature", timeout=timedelta(days=7))
        tokens.append(callback.token)
        return callback.result()

    return app


def test_a_pending_callback_whose_key_left_the_rotation_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """GIVEN a run waiting on a callback signed with the old key
    WHEN the old key is dropped from the secret (not kept verify-only) and the run replays
    THEN the replay cannot rebuild the URL (rebuild_token finds no key: None): it warns,
    naming the callback and the run, the run keeps waiting, and the token sent is refused.

    Kills the ``rebuild_token`` -> None path in waits.create_callback going unnoticed, and
    tokens-7d26aec6 / 951f8fdc (a rebuilt token of the wrong key, or none when one fits)."""
    tokens: list[str] = []
    runner = LocalRunner(signing_app(tokens), config=EngineConfig(callback_secret=OLD_KEY))
    run_id = runner.start("sign").run_id
    runner.run_until_idle()
    sent = tokens[-1]
    runner.engine.config = replace(
        runner.engine.config, callback_secret=NEW_KEY, callback_verify_only_secrets=()
    )
    with caplog.at_level(logging.WARNING, logger="durable.waits"):
        runner.engine.resume(run_id, reason="replay")
    assert tokens[-1] != sent  # the URL could not be rebuilt
    warned = [r.getMessage() for r in caplog.records if r.name == "durable.waits"]
    assert len(warned) == 1 and "signature" in warned[0] and run_id in warned[0]
    assert runner.get_run(run_id).status == RunStatus.WAITING
    with pytest.raises(CallbackNotFound):
        runner.complete_callback(sent, "late")
