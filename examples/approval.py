"""An expense approval: a manager gets a link, the run waits (durably, for days if need
be) for approve or reject, and pays or notifies accordingly. The callback token in the
link is unguessable, single-use and stored hashed; a week without an answer times out."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from durable import App, CallbackFailed, CallbackTimeout, Context, current_step
from durable.engine.waits import Callback
from examples.services import services

app = App()


class Expense(BaseModel):
    employee: str
    amount: int
    manager: str


@app.step
def email_manager(callback: Callback, manager: str) -> str:
    # The URL is delivered once; a replay rebuilds the same URL without resending it.
    return str(
        current_step().effect(
            "approval-email",
            lambda key: services.perform("email", key, f"to {manager}: {callback.url}"),
            reconcile=services.lookup,
        )
    )


@app.step
def pay(employee: str, amount: int) -> str:
    return str(
        current_step().effect(
            "payout",
            lambda key: services.perform("payment", key, f"paid {amount} to {employee}"),
            reconcile=services.lookup,
        )
    )


@app.workflow(name="expense-approval", version=1)
def expense_approval(ctx: Context, expense: Expense) -> dict[str, str]:
    try:
        decision = ctx.wait_for_callback(
            "manager-approval",
            timeout=timedelta(days=7),
            submit=lambda cb: email_manager(cb, expense.manager),
        )
    except CallbackFailed as rejected:
        return {"status": "rejected", "why": rejected.error_message}
    except CallbackTimeout:
        return {"status": "expired"}
    receipt = pay(expense.employee, expense.amount)
    return {"status": "paid", "receipt": receipt, "approved_by": str(decision)}
