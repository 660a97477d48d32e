"""Third-party senders through POST /hooks/{name}: each workflow names its sender's scheme
and maps the sender's JSON to its input (issue 13, "real senders"). Every delivery here is
signed by the provider's own library (``tests/providers.py``: stripe, slack_sdk, Octokit's
webhooks-methods; Shopify's documented scheme), so a verifier that drifts from what the
providers send fails here (issue 32)."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.handlers.conftest import Reply, Stack
from tests.handlers.events import api_event
from tests.providers import (
    github_signature,
    shopify_signature,
    slack_headers,
    stripe_signature,
)

KEYS = {
    "github-push": "gh-key-0123456789",
    "stripe-payment": "whsec_0123456789",
    "slack-event": "slack-key-0123456789",
    "shopify-order": "shopify-key-0123456789",
}


def post(stack: Stack, hook: str, body: str, headers: dict[str, str]) -> Reply:
    stack.secrets["durable/webhook"] = json.dumps(KEYS)
    return stack.call(api_event("POST", f"/hooks/{hook}", raw=body, headers=headers, caller=None))


def result(stack: Stack, reply: Reply) -> Any:
    assert reply.status == 202, reply.body
    stack.drain()
    return stack.call(api_event("GET", f"/runs/{reply.body['run_id']}")).body["output"]


def github_delivery(
    key: str = KEYS["github-push"], delivery: str = "d-1"
) -> tuple[str, dict[str, str]]:
    body = json.dumps(
        {"ref": "refs/heads/main", "repository": {"full_name": "acme/shop"}, "commits": [{}, {}]}
    )
    headers = {
        "X-Hub-Signature-256": github_signature(key, body),
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Event": "push",
    }
    return body, headers


def test_a_github_push_starts_its_workflow_and_a_redelivery_gets_the_same_run(
    stack: Stack,
) -> None:
    body, headers = github_delivery()
    first = post(stack, "github-push", body, headers)
    assert result(stack, first) == "acme/shop: 2"
    again = post(stack, "github-push", body, headers)  # GitHub redelivers on a timeout
    assert again.status == 202 and again.body["run_id"] == first.body["run_id"]


def test_a_github_delivery_signed_with_another_key_or_for_our_scheme_is_401(
    stack: Stack,
) -> None:
    body, headers = github_delivery(key="not-the-key")
    before = stack.snapshot()
    assert post(stack, "github-push", body, headers).status == 401
    now = int(time.time())
    ours = {"X-Durable-Timestamp": str(now), "X-Durable-Signature": "v2=" + "0" * 64}
    assert post(stack, "github-push", body, ours).status == 401
    assert stack.snapshot() == before


def test_a_stripe_event_starts_its_workflow_once_per_event(stack: Stack) -> None:
    event = {
        "id": "evt_1Nxyz",
        "type": "charge.succeeded",
        "data": {"object": {"id": "ch_1", "amount": 2000}},
    }
    body = json.dumps(event)
    t = int(time.time())
    headers = {"Stripe-Signature": stripe_signature(KEYS["stripe-payment"], body, t)}
    first = post(stack, "stripe-payment", body, headers)
    assert result(stack, first) == "charge.succeeded 2000"
    assert post(stack, "stripe-payment", body, headers).status == 401  # a replay
    # Stripe's retry signs anew: the event id finds the first run
    resigned = {"Stripe-Signature": stripe_signature(KEYS["stripe-payment"], body, t + 1)}
    retry = post(stack, "stripe-payment", body, resigned)
    assert retry.body["run_id"] == first.body["run_id"]


def test_a_slack_event_starts_its_workflow(stack: Stack) -> None:
    body = json.dumps(
        {"type": "event_callback", "event_id": "Ev01", "event": {"type": "message", "text": "hi"}}
    )
    headers = slack_headers(KEYS["slack-event"], body)
    assert result(stack, post(stack, "slack-event", body, headers)) == "hi"


def test_a_shopify_order_starts_its_workflow_and_a_bad_payload_is_422(stack: Stack) -> None:
    def signed(payload: dict[str, Any], webhook_id: str) -> tuple[str, dict[str, str]]:
        body = json.dumps(payload)
        digest = shopify_signature(KEYS["shopify-order"], body)
        return body, {"X-Shopify-Hmac-Sha256": digest, "X-Shopify-Webhook-Id": webhook_id}

    body, headers = signed({"id": 820982911946154508, "email": "jon@example.com"}, "w-1")
    assert result(stack, post(stack, "shopify-order", body, headers)) == 820982911946154508
    bad_body, bad_headers = signed({"email": "no id"}, "w-2")
    before = stack.snapshot()
    bad = post(stack, "shopify-order", bad_body, bad_headers)
    assert bad.status == 422 and bad.error["field"] == "id"
    assert stack.snapshot() == before


def test_unsigned_deliveries_get_one_answer_whatever_the_hook(stack: Stack) -> None:
    """An unsigned POST to a GitHub hook, a Stripe hook, a hook of our scheme and a name
    no workflow has are answered alike (issue 32, finding 9): the answer tells an
    outsider neither which hook names exist nor which provider each expects."""
    body = json.dumps({"hello": "world"})
    answers = {
        hook: post(stack, hook, body, {"Content-Type": "application/json"})
        for hook in ("github-push", "stripe-payment", "signalled", "no-such-hook")
    }
    assert {r.status for r in answers.values()} == {401}
    assert len({json.dumps(r.body, sort_keys=True) for r in answers.values()}) == 1


def test_a_github_delivery_form_encoded_is_accepted_as_github_sends_it(stack: Stack) -> None:
    """GitHub's default content type is form-encoded, the JSON in a ``payload`` field,
    signed over the raw form body (issue 32, finding 7: it was refused, 415, before its
    signature was even checked)."""
    from urllib.parse import urlencode

    payload = {"ref": "refs/heads/main", "repository": {"full_name": "acme/shop"}, "commits": []}
    body = urlencode({"payload": json.dumps(payload)})
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Hub-Signature-256": github_signature(KEYS["github-push"], body),
        "X-GitHub-Delivery": "d-form-1",
        "X-GitHub-Event": "push",
    }
    assert result(stack, post(stack, "github-push", body, headers)) == "acme/shop: 0"
    unsigned = {**headers, "X-Hub-Signature-256": "sha256=" + "0" * 64}
    assert post(stack, "github-push", body, unsigned).status == 401
    bare = urlencode({"other": "x"})
    fieldless = {
        **headers,
        "X-Hub-Signature-256": github_signature(KEYS["github-push"], bare),
    }
    missing = post(stack, "github-push", bare, {**fieldless, "X-GitHub-Delivery": "d-form-2"})
    assert missing.status == 422 and missing.body["error"]["field"] == "payload"


def test_slacks_url_verification_is_answered_with_its_challenge(stack: Stack) -> None:
    """Slack checks an Events API URL with a signed ``url_verification`` request and
    expects its challenge back; it started a run instead, so the subscription could not
    be enabled (issue 32, finding 7). An unsigned one is refused as any delivery is."""
    body = json.dumps({"type": "url_verification", "challenge": "3eZbrw1aB", "token": "t"})
    headers = slack_headers(KEYS["slack-event"], body)
    before = stack.snapshot()
    reply = post(stack, "slack-event", body, headers)
    assert (reply.status, reply.body) == (200, {"challenge": "3eZbrw1aB"})
    assert stack.snapshot() == before  # no run
    forged = {**headers, "X-Slack-Signature": "v0=" + "0" * 64}
    assert post(stack, "slack-event", body, forged).status == 401


def test_a_signed_github_or_shopify_body_reposted_starts_no_second_run(stack: Stack) -> None:
    """GitHub and Shopify sign no time, and their delivery ids are unsigned headers: one
    genuinely signed body re-posted with a new delivery id, none, or an Idempotency-Key
    of the caller's started a new run each time (issue 32, finding 4). The key is now the
    signed body's digest: every re-post is the first delivery's run."""
    body, headers = github_delivery(delivery="d-original")
    first = post(stack, "github-push", body, headers)
    assert first.status == 202
    without = {k: v for k, v in headers.items() if k != "X-GitHub-Delivery"}
    for replay in (
        {**headers, "X-GitHub-Delivery": "d-forged"},
        without,
        {**headers, "Idempotency-Key": "attacker-chosen"},
    ):
        again = post(stack, "github-push", body, replay)
        assert again.status == 202 and again.body["run_id"] == first.body["run_id"]
    order = json.dumps({"id": 42, "email": "a@example.com", "line_items": [{"sku": "x"}]})
    digest = shopify_signature(KEYS["shopify-order"], order)
    signed = {"X-Shopify-Hmac-Sha256": digest, "X-Shopify-Webhook-Id": "w-1"}
    shop = post(stack, "shopify-order", order, signed)
    resent = post(stack, "shopify-order", order, {**signed, "X-Shopify-Webhook-Id": "w-2"})
    assert shop.status == resent.status == 202 and shop.body["run_id"] == resent.body["run_id"]


def test_provider_signed_deliveries_tampered_stale_or_for_another_hook_are_401(
    stack: Stack,
) -> None:
    """What each provider's library signed, changed by a byte, signed too long ago, or
    signed with another hook's key: refused, nothing written."""
    event = json.dumps({"id": "evt_2", "type": "charge.succeeded", "data": {"object": {}}})
    slack = json.dumps({"type": "event_callback", "event_id": "Ev02", "event": {"text": "x"}})
    push, _ = github_delivery()
    old = int(time.time()) - 301
    stripe_key, slack_key, github_key = (
        KEYS["stripe-payment"],
        KEYS["slack-event"],
        KEYS["github-push"],
    )
    refused = [
        ("stripe-payment", event + " ", {"Stripe-Signature": stripe_signature(stripe_key, event)}),
        ("stripe-payment", event, {"Stripe-Signature": stripe_signature(stripe_key, event, old)}),
        ("stripe-payment", event, {"Stripe-Signature": stripe_signature(slack_key, event)}),
        ("slack-event", slack.replace("x", "y"), slack_headers(slack_key, slack)),
        ("slack-event", slack, slack_headers(slack_key, slack, old)),
        ("slack-event", slack, slack_headers(stripe_key, slack)),
        ("github-push", push.replace("main", "prod"), github_delivery()[1]),
        ("github-push", push, github_delivery(key=stripe_key)[1]),
        ("shopify-order", "{}", {"X-Shopify-Hmac-Sha256": shopify_signature(github_key, "{}")}),
    ]
    before = stack.snapshot()
    for hook, body, headers in refused:
        reply = post(stack, hook, body, headers)
        assert reply.status == 401, (hook, body, reply.body)
    assert stack.snapshot() == before and stack.invoker.pop() is None


def test_stripes_rotation_header_with_two_signatures_is_single_use(stack: Stack) -> None:
    """While an endpoint's secret rolls, Stripe sends one ``v1`` per secret; the delivery
    is accepted once, and re-posted with either signature alone it is a replay."""
    stack.secrets["durable/webhook"] = json.dumps(
        {**KEYS, "stripe-payment": ["whsec_new", "whsec_old"]}
    )
    body = json.dumps(
        {"id": "evt_3", "type": "charge.succeeded", "data": {"object": {"amount": 1}}}
    )
    t = int(time.time())
    new = stripe_signature("whsec_new", body, t)
    old = stripe_signature("whsec_old", body, t)
    both = new + "," + old.split(",", 1)[1]
    assert (
        stack.call(
            api_event(
                "POST",
                "/hooks/stripe-payment",
                raw=body,
                headers={"Stripe-Signature": both},
                caller=None,
            )
        ).status
        == 202
    )
    for alone in (new, old):
        replay = stack.call(
            api_event(
                "POST",
                "/hooks/stripe-payment",
                raw=body,
                headers={"Stripe-Signature": alone},
                caller=None,
            )
        )
        assert replay.status == 401 and "replayed" in replay.error["message"], replay.body
