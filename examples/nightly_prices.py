"""The nightly supplier-price import of docs/tutorial-nightly-import.md, as one module.

A schedule starts ``nightly-prices`` at 02:00 every night. It starts one child run of
``import-supplier`` per supplier, keyed by the supplier (``prices-acme``) and reusing the
key once the previous night's run has ended; each child fetches the supplier's 300
prices, checks every one in a map and stages the changes. When all are in, a buyer
approves the night's changes (a callback answered with a typed ``Approval``), the prices
are published and the night's summary is returned. tests/unit/test_tutorial_nightly.py
runs the whole tutorial, two nights and an outage, with ``LocalRunner``.

    durable dev --app examples.nightly_prices:app
"""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel

from durable import App, Callback, Context, RetryPolicy

app = App()

ITEMS_PER_SUPPLIER = 300


# --- the outside world, faked: a supplier API that can be down, and a catalogue -------


# Under `durable dev` the steps run in worker processes of their own, so an outage is
# declared in a file the workers read: one supplier a line, in the folder dev runs in.
OUTAGE_FILE = Path("suppliers-down.txt")


class SupplierApi:
    """Each supplier's price list (300 items); a supplier in ``down`` (or named in
    ``suppliers-down.txt``) fails every call, as an outage does."""

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def is_down(self, supplier: str) -> bool:
        if supplier in self.down:
            return True
        try:
            return supplier in OUTAGE_FILE.read_text().split()
        except FileNotFoundError:
            return False

    def prices(self, supplier: str, night: str) -> list[Price]:
        with self._lock:
            self.calls.append(supplier)
        if self.is_down(supplier):
            raise ConnectionError(f"{supplier}'s price API is not answering")
        # Every 7th item changes price each night; item 0 is always a price of 0 (refused).
        day = int(night[-2:])
        return [
            Price(sku=f"{supplier}-{n:03d}", cents=0 if n == 0 else 1000 + n + day * (n % 7 == 0))
            for n in range(ITEMS_PER_SUPPLIER)
        ]


class Catalogue:
    """The prices in force, and what each night staged and published (every write is
    keyed by SKU, so writing one again changes nothing)."""

    def __init__(self) -> None:
        self.current: dict[str, int] = {}
        self.staged: dict[str, int] = {}
        self.published: list[str] = []
        self._lock = threading.Lock()

    def stage(self, sku: str, cents: int) -> None:
        with self._lock:
            self.staged[sku] = cents

    def publish(self, night: str) -> int:
        with self._lock:
            count = len(self.staged)
            self.current.update(self.staged)
            self.staged.clear()
            self.published.append(night)
        return count


supplier_api = SupplierApi()
catalogue = Catalogue()
buyer_inbox: list[str] = []  # the approval links sent to the buyer


# --- the types --------------------------------------------------------------------------


class Price(BaseModel):
    sku: str
    cents: int


class SupplierReport(BaseModel):
    supplier: str
    items: int
    changed: int
    refused: int


class Approval(BaseModel):
    approved: bool
    by: str


class NightlySummary(BaseModel):
    night: str
    suppliers: list[SupplierReport]
    published: int
    approved_by: str


# --- one supplier: a child run ----------------------------------------------------------


@app.step
def list_suppliers() -> list[str]:
    return ["acme", "globex", "initech"]


@app.step(retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(minutes=1)))
def fetch_prices(supplier: str, night: str) -> list[Price]:
    return supplier_api.prices(supplier, night)


@app.step
def stage_price(price: Price) -> None:
    catalogue.stage(price.sku, price.cents)


def check_price(ctx: Context, price: Price) -> str:
    """One branch of the map: refuse a price of 0, stage a changed price."""
    if price.cents <= 0:
        return "refused"
    if catalogue.current.get(price.sku) == price.cents:
        return "same"
    ctx.step(stage_price, price)
    return "changed"


class SupplierNight(BaseModel):
    supplier: str
    night: str


@app.workflow(name="import-supplier")
def import_supplier(ctx: Context, job: SupplierNight) -> SupplierReport:
    ctx.set_progress(0, ITEMS_PER_SUPPLIER, f"fetching {job.supplier}'s prices")
    prices = ctx.step(fetch_prices, job.supplier, job.night)
    verdicts = ctx.map(check_price, prices, name="check", item_name=lambda p, _: p.sku)
    found = verdicts.values()
    ctx.set_progress(len(found), len(prices), f"{job.supplier}: checked")
    ctx.logger.info("%s: %d prices checked", job.supplier, len(found))
    return SupplierReport(
        supplier=job.supplier,
        items=len(found),
        changed=found.count("changed"),
        refused=found.count("refused"),
    )


# --- the night: the scheduled parent ----------------------------------------------------


def ask_buyer(callback: Callback[Approval]) -> None:
    """Send the buyer the link that approves the night's changes (here: an inbox)."""
    buyer_inbox.append(callback.url)


@app.step
def publish_prices(night: str) -> int:
    return catalogue.publish(night)


@app.workflow(name="nightly-prices", schedule="cron(0 2 * * ? *)", timezone="UTC")
def nightly_prices(ctx: Context) -> NightlySummary:
    night = ctx.now().date().isoformat()
    suppliers = ctx.step(list_suppliers)
    # One child per supplier, keyed by the supplier: the key is reused every night once
    # the previous night's run has ended (reuse="after_end"), and while one still runs
    # the start is refused (if_running="fail", the default) rather than doubled.
    children = [
        ctx.start_child(
            import_supplier,
            SupplierNight(supplier=supplier, night=night),
            id=f"prices-{supplier}",
            reuse="after_end",
        )
        for supplier in suppliers
    ]
    reports = []
    for done, child in enumerate(children, start=1):
        reports.append(child.result())  # a failed child fails the night here
        ctx.set_progress(done, len(children), f"{reports[-1].supplier} imported")
    approval = ctx.wait_for_callback(
        "approve-prices",
        timedelta(hours=6),
        submit=ask_buyer,
        result_type=Approval,
    )
    published = ctx.step(publish_prices, night) if approval.approved else 0
    note = f"published {published} prices" if published else "not approved"
    ctx.set_progress(len(children), len(children), note)
    return NightlySummary(
        night=night, suppliers=reports, published=published, approved_by=approval.by
    )
