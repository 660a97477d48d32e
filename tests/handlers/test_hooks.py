"""POST /hooks/{name}: HMAC-SHA256 over time, method, the hook's path and the raw body, with
a key per hook; stale deliveries, replays and deliveries meant for another hook refused
(issue 13, findings 1-3)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable.api.hooks import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from tests.handlers.conftest import WEBHOOK_SECRET, Reply, Stack, build_stack
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
    signed_for: str | None = None,
    extra: dict[str, str] | None = None,
) -> Reply:
    stamp = int(time.time()) if at is None else at
    headers = {
        TIMESTAMP_HEADER: str(stamp),
        SIGNATURE_HEADER: signature
        or sign(secret.encode(), stamp, body.encode(), signed_for or hook),
        **(extra or {}),
    }
    # Webhooks carry no IAM identity: the signature is the authorization.
    return stack.call(api_event("POST", f"/hooks/{hook}", raw=body, headers=headers, caller=None))


def shared_key(stack: Stack) -> Stack:
    """The same tables behind a stack whose hooks share one plain key (it opted in, as
    durable dev does)."""
    shared = build_stack(stack.client, None, tables=stack.tables, webhook_shared_secret=True)
    shared.secrets["durable/webhook"] = WEBHOOK_SECRET
    return shared


def test_a_valid_signature_starts_the_run_and_tells_the_sender_only_its_run(stack: Stack) -> None:
    reply = deliver(stack)
    assert reply.status == 202, reply.body
    assert set(reply.body) == {"run_id", "status"} and reply.body["status"] == "PENDING"
    assert [w["result"] for w in stack.drain()] == ["succeeded"]


@pytest.mark.parametrize(
    "case",
    ["wrong-secret", "tampered-body", "stale", "future", "missing", "old-scheme", "bad-stamp"],
)
def test_bad_signatures_are_401_and_write_nothing(stack: Stack, case: str) -> None:
    now = int(time.time())
    before = stack.snapshot()
    if case == "wrong-secret":
        reply = deliver(stack, secret="not-the-secret")
    elif case == "tampered-body":
        good = sign(WEBHOOK_SECRET.encode(), now, BODY.encode(), "greet")
        reply = deliver(stack, BODY.replace("u9", "u0"), signature=good, at=now)
    elif case == "stale":
        reply = deliver(stack, at=now - stack.settings.webhook_tolerance_seconds - 5)
    elif case == "future":
        reply = deliver(stack, at=now + stack.settings.webhook_tolerance_seconds + 5)
    elif case == "missing":
        reply = stack.call(api_event("POST", "/hooks/greet", raw=BODY, caller=None))
    elif case == "old-scheme":
        reply = deliver(stack, signature="v1=" + "0" * 64)
    else:
        headers = {TIMESTAMP_HEADER: "yesterday", SIGNATURE_HEADER: "v2=00"}
        reply = stack.call(api_event("POST", "/hooks/greet", raw=BODY, headers=headers))
    assert reply.status == 401, reply.body
    assert reply.error["type"] == "Unauthorized"
    assert stack.snapshot() == before
    assert stack.invoker.pop() is None


def test_a_replayed_signature_is_refused(stack: Stack) -> None:
    now = int(time.time())
    signature = sign(WEBHOOK_SECRET.encode(), now, BODY.encode(), "greet")
    assert deliver(stack, at=now, signature=signature).status == 202
    before = stack.snapshot()
    replay = deliver(stack, at=now, signature=signature)
    assert replay.status == 401
    assert "replayed" in replay.error["message"]
    assert stack.snapshot() == before


def test_a_delivery_for_one_hook_is_refused_at_another_even_with_a_shared_key(
    stack: Stack,
) -> None:
    """GIVEN a stack whose hooks share one key (opted in)
    WHEN a delivery signed for /hooks/greet is sent to /hooks/signalled
    THEN it is refused: the signature covers the hook's path (finding 1)."""
    stack = shared_key(stack)
    now = int(time.time())
    body = json.dumps(None)
    signature = sign(WEBHOOK_SECRET.encode(), now, body.encode(), "signalled")
    before = stack.snapshot()
    moved = deliver(stack, body, at=now, signature=signature, hook="greet")
    assert moved.status == 401 and stack.snapshot() == before
    assert deliver(stack, body, at=now, signature=signature, hook="signalled").status == 202


def test_one_plain_key_signs_nothing_unless_the_stack_shares_it(stack: Stack) -> None:
    """GIVEN a deployed stack (no shared-key setting) whose secret is one plain key or a
    "*" entry
    WHEN a delivery is signed with it
    THEN it is refused: a key handed to one sender must not start every workflow."""
    for stored in (WEBHOOK_SECRET, json.dumps({"*": WEBHOOK_SECRET})):
        stack.secrets["durable/webhook"] = stored
        assert deliver(stack).status == 401


def test_a_signed_delivery_to_a_hook_without_a_workflow_lists_nothing(stack: Stack) -> None:
    stack = shared_key(stack)
    reply = deliver(stack, hook="nope")
    assert reply.status == 404
    assert reply.error["message"] == "no such hook"
    assert "greet" not in json.dumps(reply.body)


def test_a_delivery_that_failed_can_be_sent_again(stack: Stack) -> None:
    # GIVEN a correctly signed delivery refused for its content (invalid input)
    now = int(time.time())
    bad = json.dumps({"user_id": "u9"})
    signature = sign(WEBHOOK_SECRET.encode(), now, bad.encode(), "greet")
    before = stack.snapshot()
    assert deliver(stack, bad, at=now, signature=signature).status == 422
    # THEN its signature was not used up, and nothing was written
    assert stack.snapshot() == before
    assert deliver(stack, bad, at=now, signature=signature).status == 422


def test_signed_malformed_json_is_400_and_unsigned_is_401(stack: Stack) -> None:
    assert deliver(stack, '{"user_id": ').status == 400
    unsigned = stack.call(api_event("POST", "/hooks/greet", raw='{"user_id": ', caller=None))
    assert unsigned.status == 401


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


def test_hook_keys_never_meet_an_operators_keys(stack: Stack) -> None:
    """GIVEN a hook delivery keyed order-42
    WHEN an operator starts the same workflow with key order-42 and another input
    THEN the operator gets a run of their own, not a 409, and the sender's earlier answer
    never held the operator's identity (finding 2)."""
    hooked = deliver(stack, extra={"Idempotency-Key": "order-42"})
    body = json.dumps({"user_id": "u1", "email": "u1@example.com"})
    operator = stack.call(
        api_event(
            "POST", "/workflows/greet/runs", raw=body, headers={"Idempotency-Key": "order-42"}
        )
    )
    assert (hooked.status, operator.status) == (202, 202), operator.body
    assert operator.body["run_id"] != hooked.body["run_id"]
    again = deliver(stack, at=int(time.time()) + 1, extra={"Idempotency-Key": "order-42"})
    assert again.body == {"run_id": hooked.body["run_id"], "status": again.body["status"]}


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    target=st.sampled_from(["greet", "signalled", "approval", "sleeper"]),
    signed_for=st.sampled_from(["greet", "signalled", "approval", "sleeper"]),
    user=st.text(alphabet="abcdefgh", min_size=1, max_size=8),
)
def test_no_signed_delivery_is_accepted_on_another_hook_or_twice(
    stack: Stack, target: str, signed_for: str, user: str
) -> None:
    """Property (finding 1): with one key shared by every hook, a delivery is accepted at
    most once, and only at the hook it was signed for."""
    stack = shared_key(stack)
    now = int(time.time())
    body = json.dumps({"user_id": user, "email": f"{user}@example.com"})
    signature = sign(WEBHOOK_SECRET.encode(), now, body.encode(), signed_for)
    first = deliver(stack, body, at=now, signature=signature, hook=target)
    second = deliver(stack, body, at=now, signature=signature, hook=target)
    if target != signed_for:
        assert first.status == 401
    assert not (first.status == 202 and second.status == 202)
    if first.status == 202:
        assert second.status == 401


@pytest.mark.parametrize("kept", ["new", "old", "both reversed"])
def test_a_delivery_signed_with_both_keys_of_a_rotation_is_single_use(
    stack: Stack, kept: str
) -> None:
    """GIVEN a hook mid-rotation (two keys) and a delivery carrying a signature by each
    WHEN it is replayed carrying only one of them (or both, in the other order)
    THEN it is refused as a replay: single use belongs to what was signed (time, path,
    body), not to whichever MAC matched first (issue 32)."""
    stack.secrets["durable/webhook"] = json.dumps({"greet": ["new-secret", "old-secret"]})
    now = int(time.time())
    old = sign(b"old-secret", now, BODY.encode(), "greet")
    new = sign(b"new-secret", now, BODY.encode(), "greet")
    assert deliver(stack, at=now, signature=f"{old},{new}").status == 202
    stack.drain()
    before = stack.snapshot()
    replayed = {"new": new, "old": old, "both reversed": f"{new},{old}"}[kept]
    replay = deliver(stack, at=now, signature=replayed)
    assert replay.status == 401 and "replayed" in replay.error["message"], replay.body
    assert stack.snapshot() == before and stack.invoker.pop() is None
