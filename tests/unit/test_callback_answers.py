"""A callback's answer is the sender's own JSON, checked against the type the workflow
declared (issue 13, "real senders")."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from durable import App, Context, RunStatus
from durable.engine.waits import Callback
from durable.errors import InvalidInput
from durable.testing import LocalRunner


class Delivery(BaseModel):
    tracking: str
    delivered: bool


def carrier_app(sent: list[Callback]) -> App:
    app = App()

    def book(cb: Callback) -> str:
        sent.append(cb)
        return "booked"

    @app.workflow
    def ship(ctx: Context) -> Any:
        delivery = ctx.wait_for_callback("delivery", submit=book, result_type=Delivery)
        assert isinstance(delivery, Delivery)  # decoded on the first run and on replay
        return delivery.tracking

    return app


def test_an_answer_that_does_not_fit_the_declared_type_is_refused_naming_the_field() -> None:
    sent: list[Callback] = []
    runner = LocalRunner(carrier_app(sent))
    run = runner.start("ship")
    runner.run_until_idle()
    token = sent[0].token
    before = runner.history(run.run_id)
    with pytest.raises(InvalidInput) as refused:
        runner.complete_callback(token, {"tracking": "1Z9", "delivered": "maybe"})
    assert refused.value.field == "delivered" and "Delivery" in str(refused.value)
    # What to send instead: a value of the type's shape (`durable approve --result` it).
    assert '(send a value like {"tracking": <text>, "delivered": <true|false>})' in str(
        refused.value
    )
    assert runner.history(run.run_id) == before  # nothing written: the sender may resend
    runner.complete_callback(token, {"tracking": "1Z9", "delivered": True})
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.output) == (RunStatus.SUCCEEDED, '"1Z9"')


def test_an_operator_answer_is_checked_the_same_way() -> None:
    runner = LocalRunner(carrier_app([]))
    run = runner.start("ship")
    runner.run_until_idle()
    with pytest.raises(InvalidInput, match="tracking"):
        runner.complete_wait(run.run_id, "delivery", {"delivered": True})
    with pytest.raises(InvalidInput, match="like ") as bare:  # `durable approve` sends true
        runner.complete_wait(run.run_id, "delivery", True)
    assert '{"tracking": <text>, "delivered": <true|false>}' in str(bare.value)
