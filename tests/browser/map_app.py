"""A nightly price import shaped like issue 46's: one map over the suppliers, a few of
whose prices are missing (their branch fails) and a few of which a person must check
(their branch waits on a typed approval), for the console's run page at scale."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from durable import App, Context, RetryPolicy

app = App()


class PriceMissing(Exception):
    """The supplier sent no price: retrying will not make one."""


class Check(BaseModel):
    """A person's verdict on a price that moved too much."""

    approved: bool
    note: str


# Which suppliers fail and which need a person: a few of every thousand, spread out.
def missing(i: int) -> bool:
    return i % 200 == 3


def suspicious(i: int) -> bool:
    return i % 250 == 11


@app.step(retry=RetryPolicy(max_attempts=2, never_retry=(PriceMissing,)))
def fetch_price(supplier: int) -> int:
    if missing(supplier):
        raise PriceMissing(f"supplier-{supplier} sent no price")
    return 100 + supplier % 7


@app.workflow(name="price-import")
def price_import(ctx: Context, suppliers: int) -> dict[str, int]:
    def one(c: Context, i: int) -> int:
        price = fetch_price(i)
        if suspicious(i):
            verdict = c.wait_for_callback("check", timedelta(days=1), result_type=Check)
            return price if verdict.approved else 0
        return price

    result = ctx.map(
        one,
        range(suppliers),
        name="prices",
        completion={"tolerated_failures": "10%"},
        item_name=lambda i, _: f"supplier-{i}",
    )
    return {"imported": sum(1 for item in result.items if item.status == "succeeded")}
