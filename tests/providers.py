"""Deliveries signed by the providers' own libraries, not by our reading of their docs.

A verifier checked only against signatures we computed ourselves proves that we agree
with ourselves. These signers are the providers' code: Stripe's ``stripe`` package
(``WebhookSignature.generate_signature_header``, what its docs say to use in tests),
Slack's ``slack_sdk`` (``SignatureVerifier.generate_signature``) and GitHub's
``@octokit/webhooks-methods`` (``sign``, the function Octokit's own webhook server uses),
run in Node. Shopify publishes no signing library: its documented scheme (base64
HMAC-SHA256 of the raw body) is computed here, the one exception (issue 32).

The Octokit package is installed from the npm registry on first use into the local
cache (``DURABLE_LOCAL_HOME``), pinned, as DynamoDB Local is.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import shutil
import subprocess
import time
from functools import cache
from pathlib import Path

from durable.local.servers.dynamodb_local import local_home

OCTOKIT_METHODS = "@octokit/webhooks-methods@6.0.0"

_SIGN_SCRIPT = """
import { sign } from "@octokit/webhooks-methods";
import { readFileSync } from "node:fs";
const { secret, payload } = JSON.parse(readFileSync(0, "utf8"));
process.stdout.write(await sign(secret, payload));
"""


@cache
def _octokit() -> Path:
    """A folder holding the pinned package and a script that signs with it."""
    home = local_home() / ("npm-" + OCTOKIT_METHODS.replace("/", "+").replace("@", ""))
    script = home / "sign.mjs"
    if not (home / "node_modules" / "@octokit" / "webhooks-methods").is_dir():
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("GitHub's signer needs Node and npm (Node 20 or later) on PATH")
        home.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(home), OCTOKIT_METHODS],
            check=True,
            capture_output=True,
            timeout=300,
        )
    script.write_text(_SIGN_SCRIPT)
    return script


def github_signature(secret: str, body: str) -> str:
    """``X-Hub-Signature-256`` as Octokit computes it for ``body``."""
    script = _octokit()
    done = subprocess.run(
        ["node", str(script)],
        input=json.dumps({"secret": secret, "payload": body}),
        capture_output=True,
        text=True,
        check=True,
        cwd=script.parent,
        timeout=60,
    )
    return done.stdout


def stripe_signature(secret: str, body: str, at: int | None = None) -> str:
    """``Stripe-Signature`` as Stripe's library computes it (``t=...,v1=...``)."""
    from stripe import WebhookSignature

    return str(WebhookSignature.generate_signature_header(body, secret, timestamp=at))


def slack_headers(secret: str, body: str, at: int | None = None) -> dict[str, str]:
    """``X-Slack-Request-Timestamp`` and ``X-Slack-Signature`` as slack_sdk computes them."""
    from slack_sdk.signature import SignatureVerifier

    stamp = str(int(time.time()) if at is None else at)
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature}


def shopify_signature(secret: str, body: str) -> str:
    """``X-Shopify-Hmac-Sha256`` by Shopify's documented scheme (no official signer)."""
    digest = hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()
