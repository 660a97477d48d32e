"""Child runs at the edges a reviewer found (issue 31, holes 1 and 2): a keyed child that
an operator already ran, and a child that ends after a new version of its workflow."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from durable import App, Context, RunStatus, StepStatus
from durable.core.model import StepKind
from durable.testing import LocalRunner


def test_a_keyed_child_adopts_the_finished_run_an_operator_started_with_that_key() -> None:
    """GIVEN ``price`` already ran to SUCCEEDED with key K and input "abcd", started by an
    operator (``durable start --key K``: not anybody's child) WHEN a workflow runs
    ``ctx.run_child(price, "abcd", id=K)`` THEN it gets that run's result without running
    it again, and succeeds (it failed with "is not a child run")."""
    app = App()
    ran: list[str] = []

    @app.workflow(name="price")
    def price(ctx: Context, sku: str) -> int:
        ran.append(sku)
        return len(sku)

    @app.workflow(name="order")
    def order(ctx: Context, key: str) -> int:
        return int(ctx.run_child("price", "abcd", id=key)) * 10

    runner = LocalRunner(app)
    operator = runner.start("price", "abcd", idempotency_key="sku-1")
    runner.run_until_idle()
    assert runner.get_run(operator.run_id).status == RunStatus.SUCCEEDED
    parent = runner.start("order", "sku-1")
    runner.run_until_idle()
    done = runner.get_run(parent.run_id)
    assert (done.status, done.output) == (RunStatus.SUCCEEDED, "40"), done.error
    assert ran == ["abcd"]  # the child's body ran once: for the operator
    (record,) = [s for s in runner.history(parent.run_id) if s.kind == StepKind.CHILD]
    assert record.detail == {"child": operator.run_id, "version": 1}


class QuoteV1(BaseModel):
    cents: int


class QuoteV2(BaseModel):
    amount: float
    currency: str


def _versions(app: App, *, with_v2: bool) -> None:
    @app.workflow(name="quote", version=1)
    def quote_v1(ctx: Context, sku: str) -> QuoteV1:
        ctx.wait_for_signal("go")
        return QuoteV1(cents=len(sku) * 100)

    if with_v2:

        @app.workflow(name="quote", version=2)
        def quote_v2(ctx: Context, sku: str) -> QuoteV2:
            ctx.wait_for_signal("go")
            return QuoteV2(amount=len(sku), currency="EUR")


def test_a_childs_result_is_decoded_by_the_version_the_child_ran() -> None:
    """GIVEN a parent whose v1 child is still running WHEN v2 of the child's workflow
    (another result type) is deployed and the v1 child then succeeds THEN the parent
    decodes the result as v1 wrote it and succeeds (it failed with a ValidationError:
    the newest version's annotation was used), in ``run_child`` and in a distributed map."""
    before, after = App(), App()
    _versions(before, with_v2=False)
    _versions(after, with_v2=True)
    for app in (before, after):

        @app.workflow(name="order")
        def order(ctx: Context, sku: str) -> int:
            quote: QuoteV1 = ctx.run_child("quote", sku)
            return int(quote.cents)

        @app.workflow(name="orders")
        def orders(ctx: Context, skus: list[str]) -> list[int]:
            quotes: list[QuoteV1] = ctx.map("quote", skus, distributed=True).values()
            return [int(q.cents) for q in quotes]

    runner = LocalRunner(before)
    one = runner.start("order", "abc")
    many = runner.start("orders", ["a", "bb"])
    runner.run_until_idle()
    kids = [s for r in (one, many) for s in runner.history(r.run_id) if s.kind == StepKind.CHILD]
    assert len(kids) == 3 and all(k.status == StepStatus.WAITING for k in kids)

    runner.deploy(after)  # v2 is the newest now; the v1 children are still waiting
    for kid in kids:
        runner.signal(str((kid.detail or {})["child"]), "go")
    runner.run_until_idle()
    assert runner.get_run(one.run_id).output == "300", runner.get_run(one.run_id).error
    assert runner.get_run(many.run_id).output == "[100,200]", runner.get_run(many.run_id).error


def _map_app(items: list[str]) -> App:
    app = App()

    @app.workflow(name="greet")
    def greet(ctx: Context, name: str) -> str:
        ctx.wait_for_signal("go")
        return f"hi {name}"

    @app.workflow(name="greet-all")
    def greet_all(ctx: Context) -> list[str]:
        return ctx.map("greet", items, distributed=True, max_concurrency=2).values()

    return app


def _open_map(items: list[str]) -> tuple[LocalRunner, str]:
    runner = LocalRunner(_map_app(items))
    run = runner.start("greet-all")
    runner.run_until_idle()
    kids = [s for s in runner.history(run.run_id) if s.kind == StepKind.CHILD]
    assert len(kids) == 2 and runner.get_run(run.run_id).status == RunStatus.WAITING
    return runner, run.run_id


def _replayed_on(runner: LocalRunner, run_id: str, items: list[str]) -> str:
    runner.deploy(_map_app(items))
    runner.signal(run_id, "wake")  # any event: the parent replays on the new code
    runner.run_until_idle()
    return str(runner.get_run(run_id).status.value)


def test_a_distributed_map_replayed_with_fewer_items_is_nondeterministic() -> None:
    """GIVEN a distributed map whose first two children are running WHEN its code now
    maps one item THEN the run is parked as nondeterministic (it succeeded over the
    shorter list, leaving the dropped item's child waiting for ever)."""
    runner, run_id = _open_map(["ada", "bob", "cy"])
    assert _replayed_on(runner, run_id, ["ada"]) == "FAILED"
    run = runner.get_run(run_id)
    assert run.needs_attention and run.error is not None
    assert run.error.type == "NonDeterminismError" and "map item 2" in run.error.message


def test_a_distributed_map_replayed_with_another_item_is_nondeterministic() -> None:
    runner, run_id = _open_map(["ada", "bob", "cy"])
    assert _replayed_on(runner, run_id, ["ada", "eve", "cy"]) == "FAILED"
    run = runner.get_run(run_id)
    assert run.error is not None and run.error.type == "NonDeterminismError"
    assert "item 2 changed" in run.error.message


def test_the_same_items_replay_and_children_of_an_older_engine_are_taken_as_they_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Children whose ids an older engine derived from their position alone are the
    map's own: a replay with the same items goes on and the map completes."""
    from durable.engine import distributed

    monkeypatch.setattr(distributed, "_item_digest", lambda wf, item: None)
    runner, run_id = _open_map(["ada", "bob", "cy"])
    monkeypatch.undo()
    assert _replayed_on(runner, run_id, ["ada", "bob", "cy"]) == "WAITING"
    for _ in range(3):
        for kid in [s for s in runner.history(run_id) if s.kind == StepKind.CHILD]:
            if kid.status == StepStatus.WAITING:
                runner.signal(str((kid.detail or {})["child"]), "go")
        runner.run_until_idle()
    done = runner.get_run(run_id)
    assert (done.status, done.output) == (RunStatus.SUCCEEDED, '["hi ada","hi bob","hi cy"]')


def test_a_canceled_inline_branch_cancels_the_child_it_waits_for_with_its_undo() -> None:
    """GIVEN ``ctx.parallel(..., completion="first_successful")`` whose slower branch waits
    for a child run WHEN the other branch wins THEN the losing branch's child is canceled
    and its compensation runs (it stayed WAITING for ever), as a distributed map's open
    items are."""
    app = App()
    undone: list[str] = []

    def release(hold: str) -> None:
        undone.append(hold)

    @app.workflow(name="hold-room")
    def hold_room(ctx: Context, room: str) -> str:
        ctx.step(lambda: f"held {room}", name="hold", compensate=release)
        ctx.wait_for_signal("confirm")
        return room

    @app.workflow(name="book")
    def book(ctx: Context) -> str:
        result = ctx.parallel(
            lambda c: c.wait_for_signal("walk-in"),
            lambda c: c.run_child("hold-room", "blue"),
            completion="first_successful",
        )
        return str(result.values()[0])

    runner = LocalRunner(app)
    run = runner.start("book")
    runner.run_until_idle()  # the child holds the room and waits; so does the parent
    runner.signal(run.run_id, "walk-in", "lobby")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    (record,) = [s for s in runner.history(run.run_id) if s.kind == StepKind.CHILD]
    child = runner.get_run(str((record.detail or {})["child"]))
    assert child.status == RunStatus.CANCELED, child.status
    assert undone == ["held blue"]
