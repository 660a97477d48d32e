"""examples/webhooks.py: each provider's delivery, shaped and signed as the provider sends
it, starts its workflow through POST /hooks/{name}."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import pytest

from examples import webhooks
from tests.conftest import MakeTables
from tests.handlers.conftest import Stack, build_stack
from tests.handlers.events import api_event

KEY = "example-key-0123456789"
HOOKS = ["deploy-on-push", "fulfil-payment", "answer-mention", "ship-order"]


@pytest.fixture
def examples(moto_client: Any, make_tables: MakeTables) -> Stack:
    stack = build_stack(moto_client, make_tables, app=webhooks.app)
    stack.secrets["durable/webhook"] = json.dumps(dict.fromkeys(HOOKS, KEY))
    return stack


def mac(message: bytes) -> bytes:
    return hmac.new(KEY.encode(), message, hashlib.sha256).digest()


def github_push() -> tuple[dict[str, Any], dict[str, str]]:
    event = {
        "ref": "refs/heads/main",
        "after": "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
        "repository": {"full_name": "acme/shop"},
        "commits": [],
    }
    sign = "sha256=" + mac(json.dumps(event).encode()).hex()
    return event, {"X-Hub-Signature-256": sign, "X-GitHub-Delivery": "d1", "X-GitHub-Event": "push"}


def stripe_payment() -> tuple[dict[str, Any], dict[str, str]]:
    event = {
        "id": "evt_3Nabc",
        "type": "payment_intent.succeeded",
        "data": {"object": {"customer": "cus_9", "amount_received": 2500, "currency": "eur"}},
    }
    t = int(time.time())
    v1 = mac(f"{t}.{json.dumps(event)}".encode()).hex()
    return event, {"Stripe-Signature": f"t={t},v1={v1}"}


def slack_mention() -> tuple[dict[str, Any], dict[str, str]]:
    event = {
        "type": "event_callback",
        "event_id": "Ev08",
        "event": {"type": "app_mention", "channel": "C1", "user": "U7", "text": "<@bot> hi"},
    }
    ts = str(int(time.time()))
    v0 = "v0=" + mac(f"v0:{ts}:{json.dumps(event)}".encode()).hex()
    return event, {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": v0}


def shopify_order() -> tuple[dict[str, Any], dict[str, str]]:
    event = {"id": 450789469, "email": "bob@example.com", "total_price": "49.00"}
    digest = base64.b64encode(mac(json.dumps(event).encode())).decode()
    return event, {"X-Shopify-Hmac-Sha256": digest, "X-Shopify-Webhook-Id": "w9"}


@pytest.mark.parametrize(
    ("hook", "delivery", "output"),
    [
        ("deploy-on-push", github_push, "deploying acme/shop@6113728 from main"),
        ("fulfil-payment", stripe_payment, "fulfilling 2500 eur for cus_9"),
        ("answer-mention", slack_mention, "answering U7 in C1"),
        ("ship-order", shopify_order, "shipping order 450789469 (49.00) to bob@example.com"),
    ],
)
def test_each_providers_delivery_starts_its_workflow(
    examples: Stack, hook: str, delivery: Any, output: str
) -> None:
    event, headers = delivery()
    raw = json.dumps(event)
    reply = examples.call(
        api_event("POST", f"/hooks/{hook}", raw=raw, headers=headers, caller=None)
    )
    assert reply.status == 202, reply.body
    examples.drain()
    shown = examples.call(api_event("GET", f"/runs/{reply.body['run_id']}")).body
    assert (shown["status"], shown["output"]) == ("SUCCEEDED", output)
    assert shown["requested_by"] == f"hook:{hook}"
