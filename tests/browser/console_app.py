"""The demo's workflows plus a checkout that retries and can fail, for the console's
browser test (and the README's screenshot of a run)."""

from __future__ import annotations

from datetime import timedelta

from durable import App, Concurrency, Context, RetryPolicy, current_step
from examples.app import app as demo

app = App().include(demo)


class CardDeclined(Exception):
    """The payment provider said no: retrying will not change its mind."""


@app.step
def reserve_stock(sku: str) -> str:
    return f"reserved {sku}"


@app.step(retry=RetryPolicy(max_attempts=4, initial_delay=timedelta(seconds=0.3), jitter="none"))
def fraud_check(amount: int) -> str:
    if current_step().attempt < 3:  # the scoring service times out twice, then answers
        raise TimeoutError("fraud scoring timed out")
    return "low risk"


@app.step(retry=RetryPolicy(max_attempts=3, never_retry=(CardDeclined,)))
def charge_card(amount: int) -> str:
    if amount > 1000:
        raise CardDeclined(f"card declined for {amount}: over the limit")
    return f"charged {amount}"


@app.workflow(name="stock-check", schedule="cron(0 6 ? * MON-FRI *)", timezone="Europe/Berlin")
def stock_check(ctx: Context) -> str:
    return reserve_stock("audit")


@app.workflow(name="checkout")
def checkout(ctx: Context, amount: int) -> str:
    reserve_stock("sku-1")
    fraud_check(amount)
    return charge_card(amount)


# Flow control: one rebuild per store at a time; the others wait in line.
@app.workflow(name="rebuild-index", concurrency=Concurrency(1, key="store"))
def rebuild_index(ctx: Context, job: dict[str, str]) -> str:
    ctx.wait_for_signal("done")
    return reserve_stock(job["store"])


# Fan-out: one branch per SKU, recorded under the map's position.
@app.workflow(name="restock")
def restock(ctx: Context, skus: list[str]) -> list[str]:
    return ctx.map(lambda c, sku: reserve_stock(sku), skus, name="reserve").values()


# Progress: a long sync that says how far it has got (ctx.set_progress), shown as a bar;
# each signal lets it go on to its next report.
@app.workflow(name="price-sync")
def price_sync(ctx: Context) -> str:
    ctx.set_progress(1, 4, "supplier 1 of 4 synced")
    ctx.wait_for_signal("go-on")
    ctx.set_progress(3, 4, "supplier 3 of 4 synced")
    ctx.wait_for_signal("finish")
    ctx.set_progress(4, 4, "all synced")
    return "synced"
