"""What a keyed start leaves in the idempotency table lets nobody guess a secret back
(issue 32, finding 2): the duplicate check stored an unsalted hash of the raw input, and a
4-digit PIN sealed in the run came back by trying all 10,000 in a tenth of a second."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from durable.core import serde
from tests.handlers.conftest import Stack
from tests.handlers.events import api_event


def start(stack: Stack, pin: str, key: str) -> Any:
    body = {"door": "front", "pin": pin}
    event = api_event("POST", "/workflows/unlock/runs", body, headers={"Idempotency-Key": key})
    return stack.call(event)


def test_no_stored_value_is_a_hash_a_guessed_pin_reproduces(stack: Stack) -> None:
    first = start(stack, "4821", "door-1")
    assert first.status == 202, first.body
    stored = json.dumps(stack.snapshot()[1])  # the idempotency table
    guessable = set()
    for guess in (f"{n:04d}" for n in range(10_000)):
        raw = serde.sha256_hex(serde.canonical_json({"door": "front", "pin": guess}))
        # Powertools stores the hash of the JSON of the value it validates.
        guessable |= {raw, hashlib.sha256(json.dumps(raw).encode()).hexdigest()}
    assert not [h for h in guessable if h in stored]
    # The same request again is the same run; a different PIN under the same key is the
    # same start too (secrets are masked, as the run's own input hash masks them).
    again = start(stack, "4821", "door-1")
    assert again.status == 202 and again.body["run_id"] == first.body["run_id"]
