"""Branch names, an item namer and the completion reason (issue 36, item 7; issue 33,
item 7: inline map branches were labelled by position only)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, RetryPolicy, RunStatus
from durable.ops import render
from durable.testing import LocalRunner


def greet_app(bad: frozenset[str] = frozenset()) -> App:
    app = App()

    @app.step(name="send", retry=RetryPolicy(max_attempts=1))
    def send(who: str) -> str:
        if who in bad:
            raise RuntimeError(f"{who} bounced")
        return f"sent {who}"

    @app.workflow
    def greet_all(ctx: Context, people: list[dict[str, str]]) -> list[Any]:
        result = ctx.map(
            lambda c, p: send(p["email"]),
            people,
            item_name=lambda p, i: p["id"],
            completion={"tolerated_failures": 1},
        )
        return [[i.name, i.status] for i in result] + [result.completion_reason]

    def charge(c: Context) -> str:
        return send("card")

    @app.workflow
    def checkout(ctx: Context) -> Any:
        both = ctx.parallel(charge, lambda c: send("stock"), name="pay-and-reserve")
        named = ctx.parallel(
            lambda c: 1, lambda c: 2, branch_names=["left", "right"], completion="first_successful"
        )
        items: list[Any] = [7, "x" * 50, {"k": 1}]
        plain = ctx.map(lambda c, n: n, items, name="plain")
        return {
            "parallel": [i.name for i in both],
            "named": [(i.name, i.status) for i in named],
            "reason": named.completion_reason,
            "map": [i.name for i in plain],
        }

    return app


PEOPLE = [{"id": "c-1", "email": "a@x"}, {"id": "c-2", "email": "b@x"}]


def test_map_items_are_named_by_item_name_and_the_record_keeps_them() -> None:
    runner = LocalRunner(greet_app(bad=frozenset({"b@x"})))
    run_id = runner.start("greet_all", PEOPLE).run_id
    runner.run_until_idle()
    assert runner.result(run_id) == [["c-1", "succeeded"], ["c-2", "failed"], "all_completed"]
    (batch,) = [s for s in runner.history(run_id) if s.kind.value == "batch"]
    decision = json.loads(batch.output or "{}")
    assert [i["name"] for i in decision["items"]] == ["c-1", "c-2"]
    # `durable show`: the decision says which failed, each step its branch.
    steps: list[dict[str, Any]] = [
        {
            "position": s.position,
            "name": s.name,
            "kind": s.kind.value,
            "status": s.status.value,
            "output": json.loads(s.output) if s.kind.value == "batch" and s.output else s.output,
            "attempts": [],
        }
        for s in runner.history(run_id)
    ]
    shown = render.render_steps(steps)
    assert "ok (tolerated_failures=1): 1 succeeded, 1 failed; failed: c-2" in shown
    assert "send [c-1]" in shown and "send [c-2]" in shown


def test_parallel_branches_take_their_function_names_or_the_given_ones() -> None:
    runner = LocalRunner(greet_app())
    run_id = runner.start("checkout").run_id
    runner.run_until_idle()
    result = runner.result(run_id)
    assert result["parallel"] == ["charge", "branch 2"]  # a lambda has no name of its own
    assert result["named"][0] == ["left", "succeeded"]
    assert result["reason"] in ("min_successful_reached", "all_completed")
    # Without item_name no name is stored (an item's text may be personal data).
    assert result["map"] == [None, None, None]


def test_a_replay_gives_the_recorded_names_and_reason() -> None:
    runner = LocalRunner(greet_app(bad=frozenset({"b@x"})))
    run_id = runner.start("greet_all", PEOPLE).run_id
    runner.run_until_idle()
    first = runner.result(run_id)
    forked = runner.fork(run_id, 2)  # copies the decided map, replays it
    runner.run_until_idle()
    assert runner.result(forked.run_id) == first


def test_the_reason_says_why_the_batch_was_decided() -> None:
    from durable.core.completion import BatchItem, BatchResult

    done: BatchResult[Any] = BatchResult("b", "all", True, (BatchItem(0, "succeeded"),))
    early: BatchResult[Any] = BatchResult(
        "b", "first", True, (BatchItem(0, "succeeded"), BatchItem(1, "canceled"))
    )
    failed: BatchResult[Any] = BatchResult("b", "all", False, (BatchItem(0, "failed"),))
    assert done.completion_reason == "all_completed"
    assert early.completion_reason == "min_successful_reached"
    assert failed.completion_reason == "failure_tolerance_exceeded"


@pytest.mark.parametrize(
    ("names", "says"),
    [
        (["only-one"], "1 name(s) for 2 branch(es)"),
        (["a", ""], "printable text of 1 to 100"),
        (["a", "b\nc"], "printable text"),
    ],
)
def test_bad_branch_names_are_refused_naming_the_field(names: list[str], says: str) -> None:
    app = App()

    @app.workflow
    def wf(ctx: Context) -> Any:
        return ctx.parallel(lambda c: 1, lambda c: 2, branch_names=names).values()

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert says in run.error.message


def test_an_item_name_that_raises_is_an_invalid_input_naming_it() -> None:
    app = App()

    @app.workflow
    def wf(ctx: Context) -> Any:
        return ctx.map(
            lambda c, n: n, [1, 2], item_name=lambda item, i: str({"y": 1}["x" * i + "x"])
        ).values()

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    error = runner.get_run(run_id).error
    assert error is not None and "item_name raised KeyError for item 0" in error.message


def test_a_map_item_waiting_out_a_retry_gives_its_slot_to_the_next_item() -> None:
    """The documented rule (docs/fan-out.md): with max_concurrency=1, an item whose step
    waits an hour to retry parks, and the next item runs meanwhile (the AWS SDK keeps the
    slot). Here item 2 finishes before item 1's retry."""
    order: list[str] = []
    app = App()

    @app.step(
        name="work",
        retry=RetryPolicy(max_attempts=2, initial_delay=timedelta(hours=1), jitter="none"),
    )
    def work(n: int) -> int:
        order.append(f"{n}")
        if n == 1 and order.count("1") == 1:
            raise ConnectionError("try later")
        return n

    @app.workflow
    def wf(ctx: Context) -> list[int]:
        return ctx.map(lambda c, n: work(n), [1, 2], max_concurrency=1).values()

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    assert order == ["1", "2"]  # item 2 ran while item 1 waits out its backoff
    runner.advance(hours=2)
    assert runner.result(run_id) == [1, 2] and order == ["1", "2", "1"]


def test_names_that_would_crowd_the_decision_record_are_refused_at_the_call() -> None:
    """A thousand names of a hundred characters (110 KB) could push a batch's decision
    past the item limit after every branch did its work: refused before anything runs."""
    app = App()

    @app.workflow
    def wf(ctx: Context) -> Any:
        items = list(range(300))
        return ctx.map(lambda c, n: n, items, item_name=lambda n, i: f"{n:0100d}").values()

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    error = runner.get_run(run_id).error
    assert error is not None and "over 20000" in error.message
    assert runner.history(run_id) == []  # nothing ran


def test_an_empty_branch_names_list_is_refused_not_ignored() -> None:
    app = App()

    @app.workflow
    def wf(ctx: Context) -> Any:
        return ctx.parallel(lambda c: 1, branch_names=[]).values()

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    error = runner.get_run(run_id).error
    assert error is not None and "0 name(s) for 1 branch(es)" in error.message
