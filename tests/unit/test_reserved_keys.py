"""A key a run shows names exactly that run (issue 43, hole 3; issue 44, finding 2).

Runs that senders and the engine start show their key with the route's namespace
(``sqs/<message id>``, ``eventbridge/<event id>``, ``hook:<name>/<key>``,
``schedule/<name>/<time>``). A key given as one's own (``Engine.start``, a keyed child's
``id=``) in one of those namespaces would make a second run showing the same key: it is
refused, nothing written, and a key resolves to the one run that can show it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from durable import App, Context, RunStatus
from durable.core.ids import derived_run_id
from durable.engine.schedules import Schedule, fire, fire_key
from durable.errors import InvalidInput, RunNotFound
from durable.testing import LocalRunner

RESERVED = [
    ("sqs/m-123", "sqs/"),
    ("eventbridge/evt-1", "eventbridge/"),
    ("hook:orders/delivery-9", "hook:"),
    ("schedule/nightly/2026-12-04T02:00:00.000Z", "schedule/"),
]


def make_app() -> App:
    app = App()

    @app.workflow
    def orders(ctx: Context, order: str) -> str:
        return f"handled {order}"

    @app.workflow
    def parent(ctx: Context, key: str) -> Any:
        try:
            return ctx.run_child(orders, "o-1", id=key)
        except InvalidInput as e:
            return {"field": e.field, "message": str(e)}

    app.schedule("orders", "cron(0 2 * * ? *)", name="nightly", input="nightly")
    return app


@pytest.mark.parametrize(("key", "prefix"), RESERVED)
def test_a_start_from_code_with_a_reserved_key_is_refused_and_writes_nothing(
    key: str, prefix: str
) -> None:
    runner = LocalRunner(make_app())
    with pytest.raises(InvalidInput) as refused:
        runner.start("orders", "mine", idempotency_key=key)
    assert refused.value.field == "idempotency_key"
    assert f"keys beginning with {prefix!r}" in str(refused.value)
    assert "choose another key" in str(refused.value)
    assert runner.memory_ledger.all_run_ids() == []


@pytest.mark.parametrize(("key", "prefix"), RESERVED)
def test_a_keyed_child_with_a_reserved_id_is_refused(key: str, prefix: str) -> None:
    runner = LocalRunner(make_app())
    run = runner.start("parent", key)
    runner.run_until_idle()
    answer = runner.result(run.run_id)
    assert answer["field"] == "id", answer
    assert f"keys beginning with {prefix!r}" in answer["message"]
    assert [r for r in runner.memory_ledger.all_run_ids() if r != run.run_id] == []


def test_a_sender_scope_the_engine_does_not_know_is_refused() -> None:
    runner = LocalRunner(make_app())
    for scope in ("mine", "child", "hook:parent", ""):
        with pytest.raises(InvalidInput) as refused:
            runner.engine.start("orders", "x", idempotency_key="k-1", key_scope=scope)
        assert refused.value.field == "key_scope", scope
    assert runner.memory_ledger.all_run_ids() == []


def test_a_reserved_key_resolves_only_in_its_route_even_beside_an_older_unscoped_run() -> None:
    """A run an earlier version let an operator start under ``sqs/m-123`` (unscoped) and
    the SQS route's run of message m-123 both show ``sqs/m-123``: the key names the SQS
    route's run, not whichever id was read first."""
    runner = LocalRunner(make_app())
    engine = runner.engine
    sent = engine.start("orders", "from the queue", idempotency_key="m-123", key_scope="sqs")
    assert sent.idempotency_key == "sqs/m-123"
    wf = engine.app.get_workflow("orders")
    legacy_id = derived_run_id("orders", "sqs/m-123")
    legacy = engine.new_run(wf, "the operator's", legacy_id)
    engine.ledger.create_run(replace(legacy, idempotency_key="sqs/m-123"))
    assert runner.run_by_key("orders", "sqs/m-123").run_id == sent.run_id


def test_every_route_s_key_finds_its_own_run_and_other_keys_keep_their_ids() -> None:
    runner = LocalRunner(make_app())
    engine = runner.engine
    by_code = runner.start("orders", "a", idempotency_key="orders/7")
    assert by_code.run_id == derived_run_id("orders", "orders/7")  # ids unchanged
    hooked = engine.start("orders", "b", idempotency_key="d-9", key_scope="hook:orders")
    evented = engine.start("orders", "c", idempotency_key="e-1", key_scope="eventbridge")
    schedule: Schedule = engine.app.schedules()["nightly"]
    fired = fire(engine, schedule, "2026-12-04T02:00:00Z", manual="now-ops")
    assert fired.result == "started"
    key = fire_key("nightly", "now-ops")
    assert fired.run_id == derived_run_id("orders", key)  # a fire's id is what it was
    for shown, run_id in [
        ("orders/7", by_code.run_id),
        ("hook:orders/d-9", hooked.run_id),
        ("eventbridge/e-1", evented.run_id),
        (key, fired.run_id),
    ]:
        found = runner.run_by_key("orders", shown)
        assert (found.run_id, found.idempotency_key) == (run_id, shown)
    # A key in one route's namespace is not another's, nor an unscoped one's.
    for shown in ("sqs/e-1", "hook:orders/e-1", "hook:parent/d-9", "d-9", "orders"):
        with pytest.raises(RunNotFound):
            runner.run_by_key("orders", shown)
    runner.run_until_idle()
    assert runner.get_run(fired.run_id or "").status == RunStatus.SUCCEEDED
