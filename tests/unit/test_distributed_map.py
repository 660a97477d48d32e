"""Distributed maps (``ctx.map(workflow, items, distributed=True)``) through LocalRunner:
each item a child run, a durable window, batched starts, the completion rules."""

from __future__ import annotations

from typing import Any

import pytest

from durable import App, BatchFailed, BatchResult, ChildFailed, Context, RunStatus, StepStatus
from durable.core.model import StepKind
from durable.core.ports import MAX_CHILDREN_PER_START
from durable.errors import InvalidInput, TerminalError
from durable.testing import LocalRunner


def make_app(bad: frozenset[int] = frozenset()) -> App:
    app = App()

    @app.workflow(name="square")
    def square(ctx: Context, n: int) -> int:
        def compute() -> int:
            if n in bad:
                raise TerminalError(f"item {n} is bad")
            return n * n

        return int(ctx.step(compute, name="compute"))

    @app.workflow(name="squares")
    def squares(ctx: Context, spec: dict[str, Any]) -> list[int]:
        result = ctx.map(
            square,
            spec["items"] if "items" in spec else range(spec["n"]),
            name="squares",
            distributed=True,
            max_concurrency=spec.get("window"),
            completion=spec.get("rule"),
        )
        return result.values()

    @app.workflow(name="summary")
    def summary(ctx: Context, spec: dict[str, Any]) -> list[Any]:
        result = ctx.map(
            square,
            range(spec["n"]),
            name="squares",
            distributed=True,
            max_concurrency=spec.get("window"),
            completion=spec.get("rule"),
        )
        return [result.ok, [(i.status, i.value) for i in result]]

    return app


class Window:
    """The most children of one parent that were running at once, after each write."""

    def __init__(self, runner: LocalRunner) -> None:
        self.runner = runner
        self.most = 0

    def look(self) -> None:
        ledger = self.runner.memory_ledger
        running = sum(
            1
            for run_id in ledger.all_run_ids()
            if (run := ledger.get_run(run_id)) is not None
            and run.parent is not None
            and not run.terminal
        )
        self.most = max(self.most, running)


def invoke_once(runner: LocalRunner) -> bool:
    """Run the next queued invocation (or a sweep when none is queued); False when idle."""
    item = runner.invoker.pop()
    if item is None:
        return runner.engine.sweep().invoked > 0
    runner._invoke(item.run_id, item.hop, item.reason)
    return True


def items_of(runner: LocalRunner, run_id: str) -> list[Any]:
    return [s for s in runner.history(run_id) if s.kind == StepKind.CHILD]


def test_every_item_runs_as_a_child_and_the_values_come_back_in_item_order() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("squares", {"n": 12, "window": 5})
    runner.run_until_idle()
    parent = runner.get_run(run.run_id)
    assert parent.status == RunStatus.SUCCEEDED
    assert parent.output == "[" + ",".join(str(i * i) for i in range(12)) + "]"
    kids = items_of(runner, run.run_id)
    assert [k.position for k in kids] == [f"0001.{i:04d}" for i in range(1, 13)]
    assert all(k.status == StepStatus.DONE for k in kids)
    assert parent.children == 12
    decision = next(s for s in runner.history(run.run_id) if s.kind == StepKind.BATCH)
    assert decision.position == "0001" and '"started":12' in (decision.output or "")


def test_the_window_is_never_exceeded() -> None:
    runner = LocalRunner(make_app())
    window = Window(runner)
    run = runner.start("squares", {"n": 30, "window": 4})
    # One invocation at a time, looking at the running children after each.
    while invoke_once(runner):
        window.look()
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert window.most == 4


def test_the_first_invocation_starts_exactly_one_window_in_batched_writes() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("squares", {"n": 200, "window": 120})
    assert invoke_once(runner)  # the parent's first invocation only
    assert len(items_of(runner, run.run_id)) == 120
    batches = -(-120 // MAX_CHILDREN_PER_START)
    assert runner.call_count("ledger.start_children") == batches
    assert runner.call_count("ledger.start_child") == 0


def test_a_failed_item_fails_the_all_rule_and_cancels_the_running_ones() -> None:
    runner = LocalRunner(make_app(bad=frozenset({1})))
    run = runner.start("summary", {"n": 6, "window": 3})
    runner.run_until_idle()
    parent = runner.get_run(run.run_id)
    assert parent.status == RunStatus.SUCCEEDED
    assert parent.output is not None and parent.output.startswith("[false,")
    statuses = [s for s, _ in __import__("json").loads(parent.output)[1]]
    assert statuses[1] == "failed"
    assert "canceled" in statuses  # items 4-6 never started (or were canceled)
    # No child of the map is left running.
    for kid in items_of(runner, run.run_id):
        assert runner.get_run(str(kid.detail["child"])).terminal


def test_values_raises_batch_failed_caused_by_the_childs_failure() -> None:
    runner = LocalRunner(make_app(bad=frozenset({2})))
    run = runner.start("squares", {"n": 4, "window": 2})
    runner.run_until_idle()
    parent = runner.get_run(run.run_id)
    assert parent.status == RunStatus.FAILED and parent.error is not None
    assert parent.error.type == BatchFailed.__name__
    assert "item 2 is bad" in parent.error.message


def test_tolerated_failures_lets_the_map_succeed_with_the_failures_recorded() -> None:
    runner = LocalRunner(make_app(bad=frozenset({0, 3})))
    run = runner.start("summary", {"n": 8, "window": 3, "rule": {"tolerated_failures": 2}})
    runner.run_until_idle()
    output = __import__("json").loads(runner.get_run(run.run_id).output or "null")
    assert output[0] is True
    assert [s for s, _ in output[1]] == [
        "failed", "succeeded", "succeeded", "failed", "succeeded", "succeeded", "succeeded",
        "succeeded",
    ]  # fmt: skip


def test_first_successful_decides_at_once_and_cancels_the_rest() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("summary", {"n": 10, "window": 2, "rule": "first_successful"})
    runner.run_until_idle()
    output = __import__("json").loads(runner.get_run(run.run_id).output or "null")
    assert output[0] is True
    statuses = [s for s, _ in output[1]]
    assert statuses.count("succeeded") >= 1 and statuses.count("canceled") >= 8


def test_a_crash_after_a_batched_start_replays_without_starting_twice() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("squares", {"n": 60, "window": 60})
    runner.crash_at("ledger.start_children", call=1, when="after")
    runner.run_until_idle()
    runner.advance(minutes=10)
    parent = runner.get_run(run.run_id)
    assert parent.status == RunStatus.SUCCEEDED
    assert parent.children == 60
    assert len(items_of(runner, run.run_id)) == 60


def test_canceling_the_parent_cancels_every_running_child() -> None:
    app = make_app()

    @app.workflow(name="nap")
    def nap(ctx: Context, n: int) -> int:
        from datetime import timedelta

        ctx.sleep(timedelta(hours=1))
        return n

    @app.workflow(name="naps")
    def naps(ctx: Context) -> list[int]:
        return ctx.map(nap, range(5), distributed=True, max_concurrency=3).values()

    runner = LocalRunner(app)
    run = runner.start("naps")
    runner.run_until_idle()
    assert len(items_of(runner, run.run_id)) == 3
    runner.cancel(run.run_id, "stop the import")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.CANCELED
    kids = [runner.get_run(str(k.detail["child"])) for k in items_of(runner, run.run_id)]
    assert [k.status for k in kids] == [RunStatus.CANCELED] * 3


def test_a_function_that_is_not_a_workflow_is_refused_with_the_fix() -> None:
    app = App()

    @app.workflow(name="bad-map")
    def bad_map(ctx: Context) -> None:
        ctx.map(lambda c, i: i, range(3), distributed=True)

    runner = LocalRunner(app)
    run = runner.start("bad-map")
    runner.run_until_idle()
    error = runner.get_run(run.run_id).error
    assert error is not None and error.type == InvalidInput.__name__
    assert "registered workflow" in error.message or "@app.workflow" in error.message


def test_past_the_inline_limit_a_plain_function_is_refused_naming_distributed() -> None:
    app = App()

    @app.workflow(name="huge")
    def huge(ctx: Context) -> None:
        ctx.map(lambda c, i: i, range(1001))

    runner = LocalRunner(app)
    run = runner.start("huge")
    runner.run_until_idle()
    error = runner.get_run(run.run_id).error
    assert error is not None and "distributed=True" in error.message


def test_past_the_inline_limit_a_workflow_runs_distributed_by_default() -> None:
    app = make_app()

    @app.workflow(name="many")
    def many(ctx: Context) -> int:
        return len(ctx.map("square", range(1001), max_concurrency=500).values())

    runner = LocalRunner(app)
    run = runner.start("many")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == "1001"


@pytest.mark.parametrize("n", [0, 1])
def test_tiny_maps(n: int) -> None:
    runner = LocalRunner(make_app())
    run = runner.start("squares", {"n": n})
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == ("[]" if n == 0 else "[0]")


def test_a_child_failure_reads_as_child_failed_in_the_result() -> None:
    app = make_app(bad=frozenset({0}))

    @app.workflow(name="inspect")
    def inspect_(ctx: Context) -> str:
        result: BatchResult[int] = ctx.map(
            "square", [0], distributed=True, completion={"tolerated_failures": 1}
        )
        error = result[0].error
        assert isinstance(error, ChildFailed)
        return error.error_type

    runner = LocalRunner(app)
    run = runner.start("inspect")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == '"StepFailed"'
