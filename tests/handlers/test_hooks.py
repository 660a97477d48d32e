"""POST /hooks/{name}: HMAC-SHA256 over timestamp and raw body; stale and replays refused."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from durable.api.hooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from tests.handlers.conftest import WEBHOOK_SECRET, Reply, Stack
from tests.handlers.events import api_event

BODY = json.dumps({"user_id": "u9", "email": "u9@example.com"})


def deliver(
    stack: Stack,
    body: str = BODY,
    *,
    secret: str = WEBHOOK_SECRET,
    at: int | None = None,
    signature: str | None = None,
    hook: str = "greet",
    extra: dict[str, str] | None = None,
) -> Reply:
    stamp = int(time.time()) if at is None else at
    headers = {
        TIMESTAMP_HEADER: str(stamp),
        SIGNATURE_HEADER: signature or sign(secret.encode(), stamp, body.encode()),
        **(extra or {}),
    }
    # Webhooks carry no IAM identity: the signature is the authorization.
    return stack.call(api_event("POST", f"/hooks/{hook}", raw=body, headers=headers, caller=None))


def test_a_valid_signature_starts_the_run(stack: Stack) -> None:
    reply = deliver(stack)
    assert reply.status == 202, reply.body
    assert reply.body["requested_by"] == "hook:greet"
    assert [w["result"] for w in stack.drain()] == ["succeeded"]


@pytest.mark.parametrize(
    "case",
    ["wrong-secret", "tampered-body", "stale", "future", "missing", "bad-scheme", "bad-stamp"],
)
def test_bad_signatures_are_401_and_write_nothing(stack: Stack, case: str) -> None:
    now = int(time.time())
    before = stack.snapshot()
    if case == "wrong-secret":
        reply = deliver(stack, secret="not-the-secret")
    elif case == "tampered-body":
        good = sign(WEBHOOK_SECRET.encode(), now, BODY.encode())
        reply = deliver(stack, BODY.replace("u9", "u0"), signature=good, at=now)
    elif case == "stale":
        reply = deliver(stack, at=now - stack.settings.webhook_tolerance_seconds - 5)
    elif case == "future":
        reply = deliver(stack, at=now + stack.settings.webhook_tolerance_seconds + 5)
    elif case == "missing":
        reply = stack.call(api_event("POST", "/hooks/greet", raw=BODY, caller=None))
    elif case == "bad-scheme":
        reply = deliver(stack, signature="sha1=abc")
    else:
        headers = {TIMESTAMP_HEADER: "yesterday", SIGNATURE_HEADER: "v1=00"}
        reply = stack.call(api_event("POST", "/hooks/greet", raw=BODY, headers=headers))
    assert reply.status == 401, reply.body
    assert reply.error["type"] == "Unauthorized"
    assert stack.snapshot() == before
    assert stack.invoker.pop() is None


def test_a_replayed_signature_is_refused(stack: Stack) -> None:
    now = int(time.time())
    signature = sign(WEBHOOK_SECRET.encode(), now, BODY.encode())
    assert deliver(stack, at=now, signature=signature).status == 202
    before = stack.snapshot()
    replay = deliver(stack, at=now, signature=signature)
    assert replay.status == 401
    assert "replayed" in replay.error["message"]
    assert stack.snapshot() == before


def test_a_delivery_that_failed_can_be_sent_again(stack: Stack) -> None:
    # GIVEN a correctly signed delivery refused for its content (invalid input)
    now = int(time.time())
    bad = json.dumps({"user_id": "u9"})
    signature = sign(WEBHOOK_SECRET.encode(), now, bad.encode())
    before = stack.snapshot()
    assert deliver(stack, bad, at=now, signature=signature).status == 422
    # THEN its signature was not used up, and nothing was written
    assert stack.snapshot() == before
    assert deliver(stack, bad, at=now, signature=signature).status == 422


def test_signed_malformed_json_is_400_and_unsigned_is_401(stack: Stack) -> None:
    assert deliver(stack, '{"user_id": ').status == 400
    unsigned = stack.call(api_event("POST", "/hooks/greet", raw='{"user_id": ', caller=None))
    assert unsigned.status == 401


def test_unknown_workflow_behind_a_valid_signature_is_404(stack: Stack) -> None:
    assert deliver(stack, hook="nope").status == 404


def test_per_hook_secrets_and_rotation(stack: Stack) -> None:
    stack.secrets["durable/webhook"] = json.dumps({"greet": ["new-secret", "old-secret"]})
    assert deliver(stack, secret="old-secret").status == 202
    assert deliver(stack, BODY.replace("u9", "u8"), secret="new-secret").status == 202
    assert deliver(stack, BODY.replace("u9", "u7"), secret=WEBHOOK_SECRET).status == 401
    assert deliver(stack, secret="new-secret", hook="signalled").status == 401


def test_webhook_redelivery_with_its_idempotency_key_returns_the_same_run(stack: Stack) -> None:
    key: dict[str, Any] = {"Idempotency-Key": "delivery-77"}
    first = deliver(stack, extra=key)
    # The sender re-signs a redelivery: a new timestamp, the same delivery key.
    again = deliver(stack, at=int(time.time()) + 1, extra=key)
    assert again.status == 202
    assert again.body["run_id"] == first.body["run_id"]
