"""Runs started by the senders a team already has: GitHub, Stripe, Slack and Shopify post
their own JSON, signed their own way, to ``POST /hooks/<workflow>``. Each workflow names
its sender (``durable.hooks``) and maps the sender's event to its input; the webhook
secret holds each hook's key: ``{"deploy-on-push": "<GitHub secret>", ...}``.

A redelivery (the sender retried after a timeout) finds the run the first delivery
started: the sender's delivery id is the idempotency key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from durable import App, Context
from durable.hooks import github, shopify, slack, stripe

app = App()


class Push(BaseModel):
    repository: str
    branch: str
    head: str


def push_of(event: Any, headers: Any) -> dict[str, str]:
    """A GitHub ``push`` event as the deploy needs it."""
    return {
        "repository": event["repository"]["full_name"],
        "branch": event["ref"].removeprefix("refs/heads/"),
        "head": event["after"],
    }


@app.workflow(name="deploy-on-push", hook=github(to_input=push_of))
def deploy_on_push(ctx: Context, push: Push) -> str:
    return f"deploying {push.repository}@{push.head[:7]} from {push.branch}"


class Payment(BaseModel):
    event_id: str
    customer: str
    amount: int
    currency: str


def payment_of(event: Any, headers: Any) -> dict[str, Any]:
    """A Stripe ``payment_intent.succeeded`` event."""
    intent = event["data"]["object"]
    return {
        "event_id": event["id"],
        "customer": intent["customer"],
        "amount": intent["amount_received"],
        "currency": intent["currency"],
    }


@app.workflow(name="fulfil-payment", hook=stripe(to_input=payment_of))
def fulfil_payment(ctx: Context, payment: Payment) -> str:
    return f"fulfilling {payment.amount} {payment.currency} for {payment.customer}"


class Mention(BaseModel):
    channel: str
    user: str
    text: str


@app.workflow(
    name="answer-mention",
    hook=slack(
        to_input=lambda event, headers: {k: event["event"][k] for k in Mention.model_fields}
    ),
)
def answer_mention(ctx: Context, mention: Mention) -> str:
    return f"answering {mention.user} in {mention.channel}"


class ShopOrder(BaseModel):
    id: int
    email: str
    total_price: str


@app.workflow(name="ship-order", hook=shopify())  # the order payload is the input
def ship_order(ctx: Context, order: ShopOrder) -> str:
    return f"shipping order {order.id} ({order.total_price}) to {order.email}"
