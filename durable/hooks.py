"""Who may start a workflow through ``POST /hooks/{name}``: a signature scheme per hook.

Real senders sign their own way and post their own JSON. A workflow names its sender:

    @app.workflow(name="new-order", hook=shopify(to_input=lambda order, headers: ...))

and the hook accepts only deliveries that sender signed with the hook's key (stored per
hook in the webhook secret, ``{"new-order": "<key>"}``). Built in:

* ``durable()``, the default: ``X-Durable-Signature: v2=<hex>``, HMAC-SHA256 over ``v2``,
  the time (``X-Durable-Timestamp``), POST, the hook's path and the body; the key is the
  ``Idempotency-Key`` header.
* ``github()``: ``X-Hub-Signature-256: sha256=<hex>`` of the body; no time bound; the key
  is the signed body's digest (``body_key``).
* ``stripe()``: ``Stripe-Signature: t=<time>,v1=<hex>`` of ``{t}.{body}``; the key is the
  event's ``id``.
* ``slack()``: ``X-Slack-Signature: v0=<hex>`` of ``v0:{ts}:{body}`` with ``ts`` from
  ``X-Slack-Request-Timestamp``; the key is the event's ``event_id``.
* ``shopify()``: ``X-Shopify-Hmac-Sha256: <base64>`` of the body; no time bound; the key is
  the signed body's digest.

A scheme with a time bound also refuses a replay inside it (one marker per hook and signed
message, whichever of its signatures matched). One without (GitHub, Shopify) deduplicates
by the signed body instead: a replayed delivery gets the run it started, never a second.
Every MAC is compared in constant time against every key of the hook (a rotation keeps
two).
``to_input(payload, headers)`` maps the sender's JSON to the workflow's input (default:
the payload as it is, validated against the input's type).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from durable.errors import DurableError

Headers = Mapping[str, str]
ToInput = Callable[[Any, Headers], Any]

DURABLE_SCHEME = "v2"
TIMESTAMP_HEADER = "X-Durable-Timestamp"
SIGNATURE_HEADER = "X-Durable-Signature"


class HookRejected(DurableError):
    """A delivery whose signature is missing, wrong, stale or replayed (401)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """What a verified delivery is: its single-use marker (None: the key dedupes), until
    when the marker must be kept, and the sender's idempotency key. ``bound``: the key is
    derived from what is signed (a scheme with no signed time), so no header of the
    caller's may replace it."""

    marker: str | None
    keep_until: int
    idempotency_key: str | None
    bound: bool = False


def body_key(body: bytes) -> str:
    """The idempotency key of a delivery whose scheme signs no time (GitHub, Shopify): the
    signed body's own digest. Headers such as a delivery id are not signed: anyone who
    saw one delivery could re-post it with a new id and start a run each time; a digest
    of the signed body makes every re-post of it the same run, for as long as that run is
    kept (its retention)."""
    return "body-sha256:" + hashlib.sha256(body).hexdigest()


class Verifier(Protocol):
    @property
    def name(self) -> str: ...

    def verify(
        self, keys: list[bytes], hook: str, headers: Headers, body: bytes, now: float
    ) -> Delivery:
        """The delivery, if one of ``keys`` signed it; ``HookRejected`` otherwise."""
        ...


@dataclass(frozen=True, slots=True)
class HookSpec:
    """How a workflow's hook authenticates deliveries and reads their payload."""

    verifier: Verifier
    to_input: ToInput | None = field(default=None)


def header(headers: Headers, name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def _required(headers: Headers, name: str, scheme: str) -> str:
    value = header(headers, name)
    if not value:
        raise HookRejected(f"missing {name}: this hook takes {scheme} deliveries")
    return value


def _mac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _matching(keys: list[bytes], message: bytes, given: list[bytes]) -> bytes | None:
    """The given MAC some key made for ``message``; every pair compared in constant time,
    none skipped, so the time taken does not tell which key or which MAC matched."""
    matched = None
    for key in keys:
        expected = _mac(key, message)
        for mac in given:
            if hmac.compare_digest(expected, mac) and matched is None:
                matched = mac
    return matched


def _fresh(stamp: str, now: float, tolerance: int, name: str) -> int:
    try:
        at = int(stamp)
    except ValueError:
        raise HookRejected(f"{name} must be Unix seconds") from None
    if abs(now - at) > tolerance:
        raise HookRejected(
            f"stale signature: {name} is more than {tolerance} s from the server's clock; "
            "sign each delivery when it is sent"
        )
    return at


def _hexes(values: list[str]) -> list[bytes]:
    out = []
    for value in values:
        try:
            out.append(bytes.fromhex(value))
        except ValueError:
            continue
    return out


def _marker(hook: str, signed: bytes) -> str:
    """A delivery's single-use marker: a digest of the hook and of what was signed, not of
    the MAC that matched. Mid-rotation a sender signs with both keys; were the marker the
    matched MAC, the same delivery re-posted with only the other signature would name a
    new marker and pass as new (issue 32). The hook is named because a provider's scheme
    (Stripe, Slack) does not sign it: one event sent to two endpoints in the same second
    is two deliveries."""
    digest = hashlib.sha256(hook.encode() + b"\n" + signed).hexdigest()
    return "hook-signature#" + digest


def _refused(scheme: str) -> HookRejected:
    return HookRejected(
        f"signature does not match: sign the raw body as {scheme} does, with this hook's key"
    )


# --- our own scheme --------------------------------------------------------------------


def durable_signed_bytes(hook: str, timestamp: int, body: bytes) -> bytes:
    """What a ``durable`` signature covers: scheme, time, method, the hook's path, body."""
    return f"{DURABLE_SCHEME}\n{timestamp}\nPOST\n/hooks/{hook}\n".encode() + body


def sign(key: bytes, timestamp: int, body: bytes, hook: str) -> str:
    """The ``X-Durable-Signature`` value for ``body`` sent to ``/hooks/<hook>`` at
    ``timestamp`` (what a sender of the default scheme computes)."""
    return f"{DURABLE_SCHEME}={_mac(key, durable_signed_bytes(hook, timestamp, body)).hex()}"


@dataclass(frozen=True, slots=True)
class _Durable:
    tolerance: int = 300
    name: str = "durable"

    def verify(
        self, keys: list[bytes], hook: str, headers: Headers, body: bytes, now: float
    ) -> Delivery:
        stamp = _required(headers, TIMESTAMP_HEADER, "durable v2")
        signature = _required(headers, SIGNATURE_HEADER, "durable v2")
        timestamp = _fresh(stamp, now, self.tolerance, TIMESTAMP_HEADER)
        given = [
            digest
            for scheme, _, digest in (p.strip().partition("=") for p in signature.split(","))
            if scheme == DURABLE_SCHEME and digest
        ]
        if not given:
            raise HookRejected(f"{SIGNATURE_HEADER} must be '{DURABLE_SCHEME}=<hex HMAC-SHA256>'")
        signed = durable_signed_bytes(hook, timestamp, body)
        if _matching(keys, signed, _hexes(given)) is None:
            raise _refused("durable v2 (time, POST, the hook's path and the body)")
        return Delivery(_marker(hook, signed), timestamp + self.tolerance + 1, None)


def durable(*, tolerance: int = 300, to_input: ToInput | None = None) -> HookSpec:
    """Our own scheme (the default of every workflow): see ``sign``."""
    return HookSpec(_Durable(tolerance), to_input)


# --- providers -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _GitHub:
    name: str = "github"

    def verify(
        self, keys: list[bytes], hook: str, headers: Headers, body: bytes, now: float
    ) -> Delivery:
        signature = _required(headers, "X-Hub-Signature-256", "GitHub")
        scheme, _, digest = signature.partition("=")
        mac = _matching(keys, body, _hexes([digest]) if scheme == "sha256" else [])
        if mac is None:
            raise _refused("GitHub (X-Hub-Signature-256)")
        return Delivery(None, 0, body_key(body), bound=True)


def github(*, to_input: ToInput | None = None) -> HookSpec:
    """GitHub webhooks: ``X-Hub-Signature-256`` (no signed time); the signed body's
    digest dedupes redeliveries and replays (``body_key``)."""
    return HookSpec(_GitHub(), to_input)


@dataclass(frozen=True, slots=True)
class _Stripe:
    tolerance: int = 300
    name: str = "stripe"

    def verify(
        self, keys: list[bytes], hook: str, headers: Headers, body: bytes, now: float
    ) -> Delivery:
        signature = _required(headers, "Stripe-Signature", "Stripe")
        parts = [p.strip().partition("=") for p in signature.split(",")]
        stamps = [v for k, _, v in parts if k == "t"]
        if len(stamps) != 1:
            raise HookRejected("Stripe-Signature must carry one t=<timestamp>")
        timestamp = _fresh(stamps[0], now, self.tolerance, "Stripe-Signature t")
        given = _hexes([v for k, _, v in parts if k == "v1"])
        signed = f"{timestamp}.".encode() + body
        if _matching(keys, signed, given) is None:
            raise _refused("Stripe (Stripe-Signature v1)")
        key = _json_field(body, "id")
        return Delivery(_marker(hook, signed), timestamp + self.tolerance + 1, key)


def stripe(*, tolerance: int = 300, to_input: ToInput | None = None) -> HookSpec:
    """Stripe webhooks: ``Stripe-Signature`` within ``tolerance``; the event id dedupes."""
    return HookSpec(_Stripe(tolerance), to_input)


@dataclass(frozen=True, slots=True)
class _Slack:
    tolerance: int = 300
    name: str = "slack"

    def verify(
        self, keys: list[bytes], hook: str, headers: Headers, body: bytes, now: float
    ) -> Delivery:
        stamp = _required(headers, "X-Slack-Request-Timestamp", "Slack")
        signature = _required(headers, "X-Slack-Signature", "Slack")
        timestamp = _fresh(stamp, now, self.tolerance, "X-Slack-Request-Timestamp")
        scheme, _, digest = signature.partition("=")
        given = _hexes([digest]) if scheme == "v0" else []
        signed = f"v0:{timestamp}:".encode() + body
        if _matching(keys, signed, given) is None:
            raise _refused("Slack (X-Slack-Signature v0)")
        key = _json_field(body, "event_id")
        return Delivery(_marker(hook, signed), timestamp + self.tolerance + 1, key)


def slack(*, tolerance: int = 300, to_input: ToInput | None = None) -> HookSpec:
    """Slack (Events API, JSON bodies): ``X-Slack-Signature``; ``event_id`` dedupes."""
    return HookSpec(_Slack(tolerance), to_input)


@dataclass(frozen=True, slots=True)
class _Shopify:
    name: str = "shopify"

    def verify(
        self, keys: list[bytes], hook: str, headers: Headers, body: bytes, now: float
    ) -> Delivery:
        signature = _required(headers, "X-Shopify-Hmac-Sha256", "Shopify")
        try:
            given = [base64.b64decode(signature, validate=True)]
        except ValueError:
            given = []
        mac = _matching(keys, body, given)
        if mac is None:
            raise _refused("Shopify (X-Shopify-Hmac-Sha256)")
        return Delivery(None, 0, body_key(body), bound=True)


def shopify(*, to_input: ToInput | None = None) -> HookSpec:
    """Shopify webhooks: ``X-Shopify-Hmac-Sha256`` (no signed time); the signed body's
    digest dedupes redeliveries and replays (``body_key``)."""
    return HookSpec(_Shopify(), to_input)


def _json_field(body: bytes, name: str) -> str | None:
    import json

    try:
        data = json.loads(body)
    except ValueError:
        return None
    value = data.get(name) if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


__all__ = [
    "Delivery",
    "HookRejected",
    "HookSpec",
    "Verifier",
    "durable",
    "github",
    "shopify",
    "sign",
    "slack",
    "stripe",
]
