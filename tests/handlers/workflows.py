"""Small workflows the handler tests drive through real event shapes."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, SecretStr

from durable import (
    App,
    CallbackFailed,
    CallbackTimeout,
    Concurrency,
    Context,
    TerminalError,
    current_step,
)
from durable.engine.waits import Callback
from durable.hooks import github, shopify, slack, stripe

app = App()
FLAKY = {"fail": True}  # flipped by tests: the step fails for good until it is fixed


class Signup(BaseModel):
    user_id: str
    email: str


@app.step
def greet_user(user_id: str) -> str:
    logging.getLogger("durable.workflow.greet").info("greeting %s", user_id)
    return f"hello {user_id}"


@app.workflow(name="greet")
def greet(ctx: Context, signup: Signup) -> dict[str, str]:
    return {"greeting": greet_user(signup.user_id)}


# A schedule (durable.engine.schedules): every morning in Berlin, unless the last is still going.
app.schedule(
    "greet",
    "cron(0 9 * * ? *)",
    name="morning-greet",
    timezone="Europe/Berlin",
    input={"user_id": "team", "email": "team@example.com"},
    overlap="skip",
)


# The approver's inbox: run id -> the callback URL sent (the ledger never holds it).
OUTBOX: dict[str, str] = {}


def publish(callback: Callback) -> str:
    OUTBOX[current_step().run_id] = callback.url
    return callback.url  # stored as the step "manager.submit", its token redacted


@app.workflow(name="approval")
def approval(ctx: Context, request: dict[str, Any]) -> dict[str, Any]:
    try:
        answer = ctx.wait_for_callback("manager", timeout=timedelta(days=1), submit=publish)
    except CallbackFailed as e:
        return {"rejected": e.error_message}
    return {"approved": answer}


@app.workflow(name="transcode")
def transcode(ctx: Context) -> Any:
    # A long external job: it posts a heartbeat at least every 10 minutes, or the wait ends.
    try:
        return ctx.wait_for_callback(
            "transcoded",
            timeout=timedelta(hours=6),
            submit=publish,
            heartbeat_timeout=timedelta(minutes=10),
        )
    except CallbackTimeout:
        return "job lost"


@app.workflow(name="approvals")
def approvals(ctx: Context, lines: list[str]) -> list[Any]:
    """One approval per line, each branch waiting on a callback of the same name."""

    def ask(c: Context, line: str) -> Any:
        return c.wait_for_callback("approval", timeout=timedelta(days=1))

    return ctx.map(ask, lines, name="lines").values()


class Unlock(BaseModel):
    door: str
    pin: SecretStr


@app.workflow(name="unlock")
def unlock(ctx: Context, request: Unlock) -> str:
    return request.door


class Card(BaseModel):
    holder: str
    number: SecretStr


CHARGED: list[str] = []  # the card numbers the card-entry workflow charged


@app.step
def charge_card(number: str) -> str:
    CHARGED.append(number)
    return f"charged {number[-4:]}"


@app.workflow(name="card-entry")
def card_entry(ctx: Context) -> str:
    """A sender posts a card to the callback URL; its number is secret-typed."""
    card = ctx.wait_for_callback(
        "card", timeout=timedelta(days=1), submit=publish, result_type=Card
    )
    return charge_card(card.number.get_secret_value())


@app.workflow(name="signalled")
def signalled(ctx: Context) -> Any:
    return ctx.wait_for_signal("go", timeout=timedelta(days=1))


@app.workflow(name="sleeper")
def sleeper(ctx: Context) -> str:
    ctx.sleep(timedelta(hours=1))
    return "rested"


@app.step
def fragile() -> str:
    if FLAKY["fail"]:
        raise TerminalError("the upstream refused")
    return "ok"


@app.workflow(name="flaky")
def flaky(ctx: Context) -> str:
    return fragile()


@app.step
def count(i: int) -> int:
    return i


@app.workflow(name="counter")
def counter(ctx: Context, n: int) -> int:
    return sum(count(i) for i in range(n))


@app.step(timeout=timedelta(minutes=5))
def compile_report() -> str:
    return "report"


@app.workflow(name="report")
def report(ctx: Context) -> str:
    return compile_report()


# --- started by third-party webhooks, each signed its sender's way ------------------------


class Push(BaseModel):
    repository: str
    commits: int


@app.workflow(
    name="github-push",
    hook=github(
        to_input=lambda event, headers: {
            "repository": event["repository"]["full_name"],
            "commits": len(event.get("commits", [])),
        }
    ),
)
def github_push(ctx: Context, push: Push) -> str:
    return f"{push.repository}: {push.commits}"


class Charge(BaseModel):
    event: str
    amount: int


@app.workflow(
    name="stripe-payment",
    hook=stripe(
        to_input=lambda event, headers: {
            "event": event["type"],
            "amount": event["data"]["object"]["amount"],
        }
    ),
)
def stripe_payment(ctx: Context, charge: Charge) -> str:
    return f"{charge.event} {charge.amount}"


@app.workflow(name="slack-event", hook=slack(to_input=lambda event, headers: event["event"]))
def slack_event(ctx: Context, event: dict[str, Any]) -> str:
    return str(event["text"])


class Order(BaseModel):
    id: int
    email: str


@app.workflow(name="shopify-order", hook=shopify())
def shopify_order(ctx: Context, order: Order) -> int:
    return order.id


# Flow control (durable.core.flow): one export per account at a time; the rest wait in line.
@app.workflow(name="export", concurrency=Concurrency(1, key="account"))
def export(ctx: Context, request: dict[str, Any]) -> str:
    ctx.wait_for_signal("uploaded")
    return f"exported {request['account']}"
