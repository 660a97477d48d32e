"""Versions of the workflows a recorded run is replayed on (``durable export`` /
``durable replay``, ``LocalRunner.replay``): the CLI imports them by module:attribute."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, SecretStr

from durable import App, Context, Serdes

CARD = "tok_4242-do-not-export"
CATALOGUE_BYTES = 300_000  # past the item limit: kept in the payload store
# Steps whose body ran: a replay runs none.
BODIES: list[str] = []


class Payment(BaseModel):
    customer: str
    card: SecretStr


class Money:
    """A class pydantic has no schema for: stored by its codec only."""

    def __init__(self, cents: int) -> None:
        self.cents = cents


class MoneyCodec:
    def serialize(self, value: Money) -> str:
        return json.dumps(f"{value.cents // 100}.{value.cents % 100:02d} EUR")

    def deserialize(self, data: str) -> Money:
        units, cents = json.loads(data).split()[0].split(".")
        return Money(int(units) * 100 + int(cents))


CODEC: Serdes[Money] = MoneyCodec()
# What the workflow code saw on its last run (a replay included): the test reads it.
SEEN: dict[str, Any] = {}


def _app(second: str, *, last_tick: str = "tick") -> App:
    app = App()

    def reserve(order: str) -> str:
        BODIES.append("reserve")
        return f"reserved {order}"

    def payment(order: str) -> Payment:
        BODIES.append("payment")
        return Payment(customer=order, card=SecretStr(CARD))

    def charge(order: str) -> str:
        BODIES.append("charge")
        return f"charged {order}"

    def catalogue(order: str) -> str:
        BODIES.append("catalogue")
        return "c" * CATALOGUE_BYTES

    def price() -> Money:
        BODIES.append("price")
        return Money(1250)

    @app.workflow(name="order")
    def order(ctx: Context, order: str) -> str:
        ctx.step(reserve, order, name="reserve")
        paid = ctx.step(payment, order, name="payment")
        ctx.step(charge, order, name=second)
        goods = ctx.step(catalogue, order, name="catalogue")
        money = ctx.step(price, name="price", serdes=CODEC)
        go = ctx.wait_for_signal("go", timeout=timedelta(hours=1))
        SEEN.update(card=paid.card.get_secret_value(), goods=len(goods), cents=money.cents, go=go)
        ctx.sleep(timedelta(hours=1))
        return f"{paid.customer}: {money.cents} cents"

    def tick(n: int) -> int:
        BODIES.append("tick")
        return n

    @app.workflow(name="counter")
    def counter(ctx: Context, n: int) -> int:
        # The chain's last link (n == 2) calls its step by ``last_tick``.
        ctx.step(tick, n, name="tick" if n < 2 else last_tick)
        if n < 2:
            ctx.continue_as_new(n + 1)
        return n

    return app


old = _app("charge")
same = _app("charge")
renamed = _app("bill")  # the third call under another name: the recorded run diverges
last_link_renamed = _app("charge", last_tick="count")
