"""A retried child and its parent's view of it (issue 46, item 7).

A child's failure is written into its parent's record at the child's position, in the
same write that ends the child: the parent's view is final from then on. Retrying the
child alone leaves that record as it was; retrying the parent reopens it, and the
parent then takes the child's outcome as it is now: the retried child's result, without
running the child again."""

from __future__ import annotations

from typing import Any

from durable import App, ChildFailed, Context, RunStatus, StepStatus
from durable.errors import TerminalError
from durable.testing import LocalRunner


def supplier_app(outage: dict[str, bool], calls: list[str]) -> App:
    app = App()

    @app.workflow
    def import_prices(ctx: Context, supplier: str) -> int:
        def fetch() -> int:
            calls.append(supplier)
            if outage["down"]:
                raise TerminalError(f"{supplier}'s feed is down")
            return 300

        return int(ctx.step(fetch, name="fetch"))

    @app.workflow
    def nightly(ctx: Context, supplier: str) -> dict[str, Any]:
        ctx.step(lambda: "opened", name="open")
        rows = ctx.run_child(import_prices, supplier, id=f"prices-{supplier}")
        return {"supplier": supplier, "rows": rows}

    return app


def child_id(runner: LocalRunner, parent_id: str) -> str:
    (record,) = [s for s in runner.history(parent_id) if s.kind == "child"]
    return str((record.detail or {})["child"])


def test_retrying_the_parent_after_its_child_takes_the_childs_new_outcome() -> None:
    outage = {"down": True}
    calls: list[str] = []
    runner = LocalRunner(supplier_app(outage, calls))
    parent = runner.start("nightly", "acme")
    runner.run_until_idle()
    assert runner.get_run(parent.run_id).status == RunStatus.FAILED
    kid = child_id(runner, parent.run_id)
    assert runner.get_run(kid).status == RunStatus.FAILED
    # The outage is fixed; the operator retries the failed child first: it succeeds, and
    # the parent's record of it still says it failed.
    outage["down"] = False
    runner.retry(kid)
    runner.run_until_idle()
    assert runner.get_run(kid).status == RunStatus.SUCCEEDED
    assert calls == ["acme", "acme"]
    seen = {s.position: s for s in runner.history(parent.run_id)}["0002"]
    assert seen.status == StepStatus.TERMINAL_FAILED
    assert runner.get_run(parent.run_id).status == RunStatus.FAILED
    # Retrying the parent reopens that record and takes the child's outcome as it is now.
    runner.retry(parent.run_id)
    runner.run_until_idle()
    done = runner.get_run(parent.run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert runner.result(parent.run_id) == {"supplier": "acme", "rows": 300}
    assert calls == ["acme", "acme"]  # the child did not run again
    assert child_id(runner, parent.run_id) == kid  # the same child, not a second one
    assert [op["action"] for op in runner.get_run(kid).operations] == ["retry"]
    seen = {s.position: s for s in runner.history(parent.run_id)}["0002"]
    assert (seen.status, seen.output) == (StepStatus.DONE, "300")


def test_retrying_the_parent_while_the_retried_child_runs_waits_for_it() -> None:
    """The child retried and still going when the parent is retried: the parent waits
    for that run's end (its report lands on the reopened record), and starts nothing."""
    outage = {"down": True}
    calls: list[str] = []
    runner = LocalRunner(supplier_app(outage, calls))
    parent = runner.start("nightly", "acme")
    runner.run_until_idle()
    kid = child_id(runner, parent.run_id)
    outage["down"] = False
    runner.retry(kid)  # reopened, not yet run
    runner.retry(parent.run_id)
    runner.run_until_idle()
    assert runner.get_run(kid).status == RunStatus.SUCCEEDED
    assert runner.result(parent.run_id) == {"supplier": "acme", "rows": 300}
    assert calls == ["acme", "acme"]
    assert [op["action"] for op in runner.get_run(kid).operations] == ["retry"]


def test_a_parent_that_went_on_takes_the_retried_keyed_child_in_a_fork() -> None:
    """A parent that caught the child's failure and succeeded cannot be retried: a fork
    from the child's step runs it again from there, and its keyed call takes the retried
    child's outcome (same key, same input) instead of running the child a third time."""
    outage = {"down": True}
    calls: list[str] = []
    app = supplier_app(outage, calls)

    @app.workflow
    def report(ctx: Context, supplier: str) -> str:
        try:
            rows = ctx.run_child("import_prices", supplier, id=f"report-{supplier}")
        except ChildFailed:
            return "failed"
        return f"imported {rows}"

    runner = LocalRunner(app)
    parent = runner.start("report", "acme")
    runner.run_until_idle()
    assert runner.result(parent.run_id) == "failed"
    kid = child_id(runner, parent.run_id)
    outage["down"] = False
    runner.retry(kid)
    runner.run_until_idle()
    assert runner.result(parent.run_id) == "failed"  # final
    fork = runner.fork(parent.run_id, from_step=1)
    runner.run_until_idle()
    assert runner.result(fork.run_id) == "imported 300"
    assert child_id(runner, fork.run_id) == kid
    assert calls == ["acme", "acme"]


def test_the_test_kit_answers_one_of_several_waits_by_position() -> None:
    """``LocalRunner.complete_wait(..., position=)``, as the engine, the API and ``durable
    approve --position`` take it: which of several callbacks of one name (map branches)."""
    from datetime import timedelta

    from durable.errors import AmbiguousWait

    app = App()

    @app.workflow
    def approvals(ctx: Context, lines: list[str]) -> list[Any]:
        def ask(c: Context, line: str) -> Any:
            return c.wait_for_callback("approval", timeout=timedelta(days=1))

        return ctx.map(ask, lines, name="lines").values()

    runner = LocalRunner(app)
    run = runner.start("approvals", ["a", "b"])
    runner.run_until_idle()
    waiting = sorted(
        s.position for s in runner.history(run.run_id) if s.status == StepStatus.WAITING
    )
    assert len(waiting) == 2
    try:
        runner.complete_wait(run.run_id, "approval", "yes")
    except AmbiguousWait:
        pass
    else:
        raise AssertionError("two waits of that name: the position is needed")
    for position, answer in zip(waiting, ("yes a", "yes b"), strict=True):
        runner.complete_wait(run.run_id, "approval", answer, position=position)
    runner.run_until_idle()
    assert runner.result(run.run_id) == ["yes a", "yes b"]
