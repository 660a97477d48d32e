"""The signature schemes of durable.hooks against the providers' published examples.

GitHub's and Slack's documentation each give a key, a body and the signature they make:
the verifiers must accept exactly those. Stripe and Shopify publish the algorithm; their
cases sign with an independent computation here (not the verifier's own code)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from durable.hooks import HookRejected, body_key, github, shopify, sign, slack, stripe
from durable.hooks import durable as durable_scheme

# docs.github.com, "Validating webhook deliveries": the example secret, payload, signature.
GITHUB_KEY = b"It's a Secret to Everybody"
GITHUB_BODY = b"Hello, World!"
GITHUB_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

# api.slack.com, "Verifying requests from Slack": the example signing secret, timestamp,
# body (a slash command, form-encoded) and signature.
SLACK_KEY = b"8f742231b10e8888abcd99yyyzzz85a5"
SLACK_TS = 1531420618
SLACK_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id="
    b"G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook"
    b"-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F3977"
    b"00885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10"
    b"d2c447fce8b6703c"
)
SLACK_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def test_githubs_published_example_verifies_and_dedupes_by_its_signed_body() -> None:
    """GitHub signs no time and not its delivery id: the key is the signed body's digest,
    bound (no header may replace it), whatever delivery id a re-post carries."""
    verifier = github().verifier
    headers = {"X-Hub-Signature-256": GITHUB_SIGNATURE, "X-GitHub-Delivery": "72d3162e"}
    delivery = verifier.verify([b"old", GITHUB_KEY], "h", headers, GITHUB_BODY, 0)
    assert (delivery.marker, delivery.idempotency_key) == (None, body_key(GITHUB_BODY))
    assert delivery.bound
    other_id = {**headers, "X-GitHub-Delivery": "another"}
    assert verifier.verify([GITHUB_KEY], "h", other_id, GITHUB_BODY, 0) == delivery
    for bad in (b"Hello, World?", GITHUB_BODY + b" "):
        with pytest.raises(HookRejected):
            verifier.verify([GITHUB_KEY], "h", headers, bad, 0)
    with pytest.raises(HookRejected, match="X-Hub-Signature-256"):
        verifier.verify([GITHUB_KEY], "h", {}, GITHUB_BODY, 0)


def test_slacks_published_example_verifies_within_its_tolerance() -> None:
    verifier = slack().verifier
    headers = {"X-Slack-Request-Timestamp": str(SLACK_TS), "X-Slack-Signature": SLACK_SIGNATURE}
    delivery = verifier.verify([SLACK_KEY], "h", headers, SLACK_BODY, SLACK_TS + 10)
    assert delivery.marker is not None and delivery.keep_until == SLACK_TS + 301
    with pytest.raises(HookRejected, match="stale"):
        verifier.verify([SLACK_KEY], "h", headers, SLACK_BODY, SLACK_TS + 301)
    with pytest.raises(HookRejected):
        verifier.verify([b"another secret"], "h", headers, SLACK_BODY, SLACK_TS)


def stripe_header(key: bytes, t: int, body: bytes) -> str:
    """Stripe's documented scheme: t=<time>,v1=HMAC-SHA256(key, f"{t}.{body}") in hex."""
    mac = hmac.new(key, f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac},v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"


def test_stripe_signatures_verify_by_the_documented_scheme() -> None:
    key, t = b"whsec_test_5d6a0b0e0c8f4e1a", 1_767_225_600
    body = json.dumps({"id": "evt_1NG8Du2eZvKYlo2CUI79vXWy", "type": "charge.succeeded"})
    verifier = stripe().verifier
    headers = {"Stripe-Signature": stripe_header(key, t, body.encode())}
    delivery = verifier.verify([key], "h", headers, body.encode(), t + 5)
    assert delivery.idempotency_key == "evt_1NG8Du2eZvKYlo2CUI79vXWy" and delivery.marker
    with pytest.raises(HookRejected, match="stale"):
        verifier.verify([key], "h", headers, body.encode(), t + 600)
    with pytest.raises(HookRejected):  # v0 (test mode's old scheme) alone is not accepted
        verifier.verify([key], "h", {"Stripe-Signature": f"t={t},v0=00"}, body.encode(), t)


def test_shopify_signatures_verify_by_the_documented_scheme() -> None:
    key = b"shpss_0123456789abcdef"
    body = json.dumps({"id": 820982911946154508, "email": "jon@example.com"}).encode()
    mac = base64.b64encode(hmac.new(key, body, hashlib.sha256).digest()).decode()
    headers = {"X-Shopify-Hmac-Sha256": mac, "X-Shopify-Webhook-Id": "b54557e4-bdd9-4b37"}
    delivery = shopify().verifier.verify([key], "h", headers, body, 0)
    assert (delivery.marker, delivery.idempotency_key) == (None, body_key(body))
    assert delivery.bound
    with pytest.raises(HookRejected):
        shopify().verifier.verify([key], "h", {**headers, "X-Shopify-Hmac-Sha256": "%%"}, body, 0)


def test_our_scheme_names_the_hook_it_was_signed_for() -> None:
    key, t, body = b"k" * 32, 1_767_225_600, b"{}"
    headers = {"X-Durable-Timestamp": str(t), "X-Durable-Signature": sign(key, t, body, "a")}
    verifier = durable_scheme().verifier
    assert verifier.verify([key], "a", headers, body, t).marker is not None
    with pytest.raises(HookRejected):
        verifier.verify([key], "b", headers, body, t)
