"""Every call of the authoring API, with the types a user's checker must infer.

``tests/unit/test_types.py`` runs ``mypy --strict`` on this module (the repo's own mypy
run checks it too): each ``assert_type`` fails the check when an inference regresses to
``Any`` or to a wrong type. The test also imports it (every declaration is accepted at
run time) and runs ``pay``, whose forms of ``ctx.step`` must run as they are typed.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import uuid
from datetime import datetime, timedelta
from typing import Any, Literal, assert_type

from pydantic import BaseModel

from durable import (
    App,
    BatchItem,
    BatchResult,
    Callback,
    ChildHandle,
    Completion,
    Concurrency,
    Context,
    RateLimit,
    RetryPolicy,
    Serdes,
    StepContext,
    current_step,
)
from durable.engine.schedules import Schedule
from durable.hooks import github

app = App(default_retry=RetryPolicy(max_attempts=5))


class Decision(BaseModel):
    approved: bool
    by: str


class Order(BaseModel):
    order_id: str
    amount: int


class Receipt(BaseModel):
    order_id: str
    charge_id: str


class Cents:
    """A class pydantic has no schema for: stored by a codec (``serdes=``)."""

    def __init__(self, value: int) -> None:
        self.value = value


class CentsCodec:
    def serialize(self, value: Cents) -> str:
        return json.dumps(value.value)

    def deserialize(self, data: str) -> Cents:
        return Cents(int(json.loads(data)))


# Any object with the two methods is a codec.
cents_codec: Serdes[Cents] = CentsCodec()


# --- steps -------------------------------------------------------------------------


@app.step
def reserve(order_id: str, quantity: int = 1) -> list[str]:
    return [order_id] * quantity


@app.step(name="charge", retry=RetryPolicy(max_attempts=3), timeout=timedelta(minutes=1))
def charge(order: Order) -> str:
    step = current_step()
    assert_type(step, StepContext)
    assert_type(step.attempt, int)
    assert_type(step.idempotency_key, str)
    assert_type(step.run_id, str)
    assert_type(step.step_name, str)
    assert_type(step.position, str)
    assert_type(step.checkpoint_state, Any)
    assert_type(step.logger, logging.LoggerAdapter[logging.Logger])
    step.checkpoint({"stage": "charging"})
    step.heartbeat()
    step.record_ref("payment", order.order_id)
    # effect() is typed as what the call returns, and its reconcile may find nothing.
    charge_id = step.effect("charge", lambda key: f"ch-{key}", reconcile=lambda key: None)
    assert_type(charge_id, str)
    found = step.effect("refund-lookup", lambda key: {"id": key})
    assert_type(found, dict[str, str])
    return charge_id


@app.step(semantics="at_most_once_per_attempt", version=2)
def refund(charge_id: str, order: Order) -> None:
    del charge_id, order


# Outside a workflow a step function is a plain call, typed as the function.
assert_type(reserve("o-1", 2), list[str])


def price(order_id: str, *, currency: str = "EUR") -> float:
    del order_id, currency
    return 9.5


def undo_charge(charge_id: str, order: Order) -> None:
    del charge_id, order


def order_is_paid() -> bool:
    return True


def count_up(n: int) -> int:
    return n + 1


def in_cents(amount: int) -> Cents:
    return Cents(amount * 100)


def add_cent(c: Cents) -> Cents:
    return Cents(c.value + 1)


# --- workflows ---------------------------------------------------------------------


@app.workflow(name="pay", version=1, concurrency=Concurrency(1, key="order_id"))
def pay(ctx: Context, order: Order) -> Receipt:
    # ctx.step infers the result and checks the arguments against the function.
    assert_type(ctx.step(reserve, order.order_id), list[str])
    assert_type(ctx.step(reserve, order.order_id, quantity=2), list[str])
    assert_type(ctx.step(price, order.order_id, currency="USD"), float)
    assert_type(ctx.step(lambda: ctx.run_id, name="read-id"), str)
    # The options (name, retry, timeout, semantics, compensate) with positional arguments.
    charge_id = ctx.step(
        charge,
        order,
        name="charge-order",
        retry=RetryPolicy(max_attempts=2),
        timeout=timedelta(seconds=30),
        semantics="at_least_once",
        compensate=undo_charge,
    )
    assert_type(charge_id, str)
    # Options with a keyword argument of the function: bind it first.
    assert_type(ctx.step(functools.partial(price, currency="USD"), "o", name="price"), float)
    # A step function called in a workflow is the step itself.
    assert_type(charge(order), str)
    # A codec for a result pydantic cannot encode: typed as the step's result.
    cents = ctx.step(in_cents, order.amount, name="in-cents", serdes=CentsCodec())
    assert_type(cents, Cents)
    assert cents.value == order.amount * 100
    return Receipt(order_id=order.order_id, charge_id=charge_id)


@app.workflow
def nightly(ctx: Context) -> int:
    return 0


@app.workflow(
    name="fulfil",
    version=2,
    hook=github(),
    rate_limit=RateLimit(100, timedelta(minutes=1)),
)
def fulfil(ctx: Context, order: Order) -> dict[str, Any]:
    assert_type(ctx.run_id, str)
    assert_type(ctx.workflow, str)
    assert_type(ctx.version, int)
    ctx.logger.info("fulfilling %s", order.order_id)

    # Recorded values.
    assert_type(ctx.now(), datetime)
    assert_type(ctx.uuid(), uuid.UUID)
    assert_type(ctx.random(), float)
    assert_type(ctx.changed("fix-rounding"), bool)

    # Timers.
    ctx.sleep(timedelta(minutes=5))
    ctx.sleep_until(ctx.now() + timedelta(hours=1), name="until-open")

    # Callbacks: typed by result_type; without one, any JSON.
    def ask(callback: Callback[Decision]) -> None:
        assert_type(callback.token, str)
        assert_type(callback.url, str)

    decision = ctx.wait_for_callback(
        "approval", timedelta(days=3), submit=ask, result_type=Decision
    )
    assert_type(decision, Decision)
    assert_type(ctx.wait_for_callback("note"), Any)
    assert_type(ctx.wait_for_callback("note", submit=lambda cb: cb.url), Any)
    assert_type(ctx.wait_for_callback("ids", result_type=list[int]), list[int])
    assert_type(ctx.wait_for_callback("pick", result_type=Literal["a", "b"]), Any)
    callback = ctx.create_callback("later", timedelta(hours=1), result_type=Decision)
    assert_type(callback, Callback[Decision])
    assert_type(callback.result(), Decision)
    untyped: Callback = ctx.create_callback("any")  # a bare Callback is Callback[Any]
    assert_type(untyped.result(), Any)

    # Signals and polled conditions.
    assert_type(ctx.wait_for_signal("cancel-requested", timedelta(days=1)), Any)
    assert_type(ctx.wait_for_condition(order_is_paid, timedelta(seconds=30)), bool)
    assert_type(
        ctx.wait_for_condition(
            lambda: "ready",
            timedelta(seconds=5),
            timedelta(minutes=10),
            name="ready",
            backoff=2.0,
            max_interval=timedelta(minutes=1),
        ),
        str,
    )
    # With state: the check maps a state to the next; the result is the last state.
    assert_type(
        ctx.wait_for_condition(
            count_up,
            timedelta(seconds=5),
            initial_state=0,
            until=lambda n: n >= 3,
            max_attempts=10,
            jitter="full",
        ),
        int,
    )

    # Children: a workflow function types its input and its result; by name, Any.
    receipt = ctx.run_child(pay, order, id=f"pay-{order.order_id}", if_running="attach")
    assert_type(receipt, Receipt)
    assert_type(ctx.run_child(nightly), int)
    assert_type(ctx.run_child("pay", {"order_id": "o", "amount": 1}), Any)
    handle = ctx.start_child(pay, order)
    assert_type(handle, ChildHandle[Receipt])
    assert_type(handle.result(), Receipt)
    assert_type(handle.run_id, str)
    assert_type(ctx.start_child("nightly"), ChildHandle[Any])

    # Batches.
    def reserve_one(c: Context, order_id: str) -> list[str]:
        return c.step(reserve, order_id)

    mapped = ctx.map(
        reserve_one,
        ["o-1", "o-2"],
        name="reserve-all",
        max_concurrency=4,
        completion=Completion.tolerated_failures("10%"),
    )
    assert_type(mapped, BatchResult[list[str]])
    assert_type(mapped.values(), list[list[str]])
    assert_type(mapped[0], BatchItem[list[str]])
    assert_type(mapped.failed, list[BatchItem[list[str]]])
    assert_type(ctx.map(pay, [order], distributed=True), BatchResult[Receipt])
    both = ctx.parallel(
        lambda c: c.step(reserve, "o-1"),
        lambda c: c.run_child(nightly),
        name="both",
        completion="first_successful",
    )
    assert_type(both, BatchResult[Any])

    # Sagas and continuing.
    ctx.compensate()
    if decision.approved:
        ctx.continue_as_new(order)
    return {"receipt": receipt, "by": decision.by}


@app.workflow(name="coded")
def coded(ctx: Context, order: Order) -> int:
    """``serdes=`` on every call that records a value (a step's is in ``pay``)."""
    # A codec decodes the answer (in place of result_type): typed as what it decodes.
    assert_type(ctx.wait_for_callback("refund", serdes=cents_codec), Cents)
    assert_type(ctx.create_callback("fee", serdes=CentsCodec()), Callback[Cents])
    assert_type(
        ctx.wait_for_condition(lambda: Cents(1), timedelta(seconds=5), serdes=CentsCodec()),
        Cents,
    )
    assert_type(
        ctx.wait_for_condition(
            add_cent, timedelta(seconds=5), initial_state=Cents(0), serdes=cents_codec
        ),
        Cents,
    )
    # A child's: the parent gets what it decodes of the child's result (its JSON form).
    assert_type(ctx.run_child(nightly, serdes=cents_codec), Cents)
    assert_type(ctx.run_child(pay, order, serdes=cents_codec), Cents)
    assert_type(ctx.run_child("nightly", serdes=cents_codec), Cents)
    assert_type(ctx.start_child(pay, order, serdes=cents_codec), ChildHandle[Cents])
    # A batch's: inline, of fn's results; distributed, of what it decodes of each child's.
    mapped = ctx.map(lambda c, n: Cents(n), [1, 2], name="cents", serdes=cents_codec)
    assert_type(mapped, BatchResult[Cents])
    assert_type(ctx.map(pay, [order], distributed=True, serdes=cents_codec), BatchResult[Cents])
    assert_type(ctx.parallel(lambda c: Cents(1), name="one", serdes=cents_codec), BatchResult[Any])
    return sum(c.value for c in mapped.values())


# --- async def ----------------------------------------------------------------------


@app.step(retry=RetryPolicy(max_attempts=2))
async def fetch_rate(currency: str) -> float:
    await asyncio.sleep(0)
    return 1.25 if currency == "EUR" else 1.0


async def count_stock(sku: str, *, warehouse: str = "main") -> int:
    await asyncio.sleep(0)
    return len(sku + warehouse)


async def stock_arrived() -> bool:
    return True


async def count_restocked(seen: int) -> int:
    return seen + 1


@app.workflow(name="restock")
async def restock(ctx: Context, order: Order) -> list[float]:
    # ctx.step on an async function: the awaited value, in any workflow.
    assert_type(ctx.step(count_stock, order.order_id), int)
    assert_type(ctx.step(count_stock, order.order_id, warehouse="east"), int)
    assert_type(ctx.step(count_stock, order.order_id, name="stock", retry=None), int)
    assert_type(ctx.step(fetch_rate, "EUR"), float)
    # A decorated async step called in an async workflow is awaited, alone or gathered.
    assert_type(await fetch_rate("EUR"), float)
    rates = await asyncio.gather(fetch_rate("EUR"), fetch_rate("USD"))
    assert_type(rates, tuple[float, float])
    # An async check polls like a plain one, typed by its awaited value.
    assert_type(ctx.wait_for_condition(stock_arrived, timedelta(minutes=1)), bool)
    assert_type(ctx.wait_for_condition(count_restocked, timedelta(minutes=1), initial_state=0), int)
    return list(rates)


@app.workflow
def reorder(ctx: Context, order: Order) -> float:
    # An async workflow as a child: its input checked, its awaited result typed.
    assert_type(ctx.run_child(restock, order), list[float])
    assert_type(ctx.start_child(restock, order), ChildHandle[list[float]])
    assert_type(ctx.map(restock, [order], distributed=True), BatchResult[list[float]])
    return ctx.step(fetch_rate, "USD")


# --- schedules and composition -----------------------------------------------------

assert_type(
    app.schedule(
        "nightly",
        "cron(0 3 * * ? *)",
        name="nightly-3am",
        timezone="Europe/Paris",
        overlap="skip",
        missed="catch_up",
        grace=timedelta(minutes=5),
    ),
    Schedule,
)


@app.workflow(name="hourly", schedule="rate(1 hour)", timezone="UTC", concurrency=1)
def hourly(ctx: Context) -> None:
    return None


other = App()


@other.workflow
def audit(ctx: Context, note: str) -> str:
    return note


assert_type(app.include(other), App)
assert_type(app.schedules(), dict[str, Schedule])
