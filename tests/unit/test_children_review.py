"""Child runs and distributed maps, as an attacker review found them broken (each case
failed on the code before its fix)."""

from __future__ import annotations

from typing import Any

import pytest

from durable import App, Context, RunStatus, StepStatus
from durable.core.model import StepKind
from durable.core.ports import RunGuard
from durable.errors import InvalidInput, InvalidState, StorageError, TerminalError
from durable.testing import LocalRunner
from tests.support.records import make_run, make_step, t
from tests.unit.test_distributed_map import make_app as make_map_app


def failing_child_app() -> App:
    app = App()

    @app.workflow
    def shaky(ctx: Context) -> str:
        def once() -> str:
            raise TerminalError("still down")

        return str(ctx.step(once, name="once"))

    @app.workflow
    def boss(ctx: Context) -> str:
        return str(ctx.run_child(shaky))

    return app


def test_a_retried_child_that_fails_again_before_its_parent_waits_fails_the_parent() -> None:
    """The operator retries the parent; it retries the child, whose worker fails it again
    before the parent's WAITING record is written (the report finds no waiting record):
    the parent must look at the child once more and fail, not wait for ever."""
    runner = LocalRunner(failing_child_app())
    run = runner.start("boss")
    runner.run_until_idle()
    real_retry = runner.engine.retry

    def retry_then_child_runs(run_id: str, upgrade_to: Any = None, requested_by: Any = None) -> Any:
        out = real_retry(run_id, upgrade_to, requested_by=requested_by)
        if requested_by and requested_by.startswith("run "):
            item = runner.invoker.pop()
            assert item is not None
            runner._invoke(item.run_id, item.hop, item.reason)  # the child fails again now
        return out

    runner.engine.retry = retry_then_child_runs  # type: ignore[method-assign]
    runner.retry(run.run_id)
    runner.run_until_idle()
    parent = runner.get_run(run.run_id)
    assert parent.status == RunStatus.FAILED and parent.error is not None
    assert parent.error.type == "ChildFailed"


def test_canceling_a_parent_whose_child_expired_ends_it_canceled() -> None:
    app = App()

    @app.workflow
    def nap(ctx: Context) -> None:
        from datetime import timedelta

        ctx.sleep(timedelta(days=60))

    @app.workflow
    def boss(ctx: Context) -> None:
        ctx.run_child(nap)

    runner = LocalRunner(app)
    run = runner.start("boss")
    runner.run_until_idle()
    (record,) = runner.history(run.run_id)
    runner.memory_ledger._runs.pop(str((record.detail or {})["child"]))  # gone (TTL)
    runner.cancel(run.run_id, "unstick it")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.CANCELED


def test_retrying_a_parent_failed_by_its_maps_rule_is_refused_with_the_fork_to_make() -> None:
    """The decision is a fact of the run (as for an inline batch): a retry would replay it
    and fail the same way, so it is refused, naming the fork that runs the map again, and
    nothing under the decided map is reopened."""
    runner = LocalRunner(make_map_app(bad=frozenset({3})))
    run = runner.start("squares", {"items": [0, 1, 2, 3, 4], "window": 5})
    runner.run_until_idle()
    first = runner.get_run(run.run_id)
    assert first.status == RunStatus.FAILED and first.error is not None
    assert first.error.type == "BatchFailed"
    with pytest.raises(InvalidState, match=f"durable fork {run.run_id} --from-step 1"):
        runner.retry(run.run_id)
    again = runner.get_run(run.run_id)
    assert again.status == RunStatus.FAILED and again.error == first.error
    assert all(s.status != StepStatus.RETRYABLE_FAILED for s in runner.history(run.run_id))


@pytest.mark.parametrize("window", [-1, 0, True, 2.5])
def test_a_distributed_maps_window_is_checked_like_an_inline_ones(window: Any) -> None:
    runner = LocalRunner(make_map_app())
    run = runner.start("squares", {"items": [1, 2], "window": window})
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED and stored.error is not None
    assert stored.error.type == InvalidInput.__name__ and "max_concurrency" in stored.error.message
    assert stored.children == 0


def test_every_item_is_validated_before_the_first_child_starts() -> None:
    runner = LocalRunner(make_map_app())
    items: list[Any] = list(range(150))
    items[120] = "not a number"
    run = runner.start("squares", {"items": items, "window": 100})
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED and stored.error is not None
    assert stored.error.type == InvalidInput.__name__ and "121" in stored.error.message
    assert stored.children == 0  # nothing started, nothing left running


def test_a_fork_adopts_the_finished_keyed_child_it_started_before() -> None:
    app = App()

    @app.workflow(name="price")
    def price(ctx: Context, sku: str) -> int:
        return len(sku)

    @app.workflow(name="keyed")
    def keyed(ctx: Context, key: str) -> int:
        a: int = ctx.run_child("price", "abcd", id=key)

        def boom() -> int:
            raise TerminalError("later step broke")

        return a + int(ctx.step(boom, name="boom"))

    runner = LocalRunner(app)
    run = runner.start("keyed", "order-1")
    runner.run_until_idle()
    fork = runner.fork(run.run_id, 1)
    runner.run_until_idle()
    forked = runner.get_run(fork.run_id)
    assert forked.error is not None and "later step broke" in forked.error.message
    (child,) = [s for s in runner.history(fork.run_id) if s.kind == StepKind.CHILD]
    assert (child.status, child.output) == (StepStatus.DONE, "4")


def test_start_children_refuses_a_batch_over_the_transaction_size() -> None:
    from durable.adapters.memory import MemoryLedger

    ledger = MemoryLedger()
    ledger.create_run(make_run("RUN1"))
    claim = ledger.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0))
    assert claim is not None
    guard = RunGuard(claim.run.fence, "w1")
    big = '"' + "x" * 95_000 + '"'
    steps = [
        make_step(
            position=f"0001.{i:04d}",
            status=StepStatus.WAITING,
            output=None,
            kind=StepKind.CHILD,
            detail={"child": f"K{i}"},
        )
        for i in range(1, 50)
    ]
    kids = [make_run(f"K{i}", input=big, parent=f"RUN1@0001.{i:04d}") for i in range(1, 50)]
    with pytest.raises(ValueError, match="4 MB"):
        ledger.start_children(steps, guard, kids)


def test_big_items_start_in_batches_that_fit_a_transaction() -> None:
    app = App()

    @app.workflow(name="echo")
    def echo(ctx: Context, text: str) -> int:
        return len(text)

    @app.workflow(name="echo-all")
    def echo_all(ctx: Context, n: int) -> int:
        return sum(ctx.map(echo, ["x" * 95_000] * n, distributed=True).values())

    runner = LocalRunner(app)
    run = runner.start("echo-all", 49)
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == str(49 * 95_000)
    assert runner.call_count("ledger.start_children") >= 2


def test_a_transaction_conflict_is_retried_and_then_reported_as_retryable() -> None:
    """A child's report and the parent's start meet on the parent's run item: DynamoDB
    cancels one with TransactionConflict. It is tried again, and if it keeps meeting
    others it is a retryable storage error (the invocation is retried), never a failure
    of the run."""
    import boto3
    from moto import mock_aws

    from durable.adapters.dynamodb import DynamoLedger
    from tests.conftest import _fresh_tables

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        table, _ = _fresh_tables(client)
        ledger = DynamoLedger(client, table)
        ledger.create_run(make_run("RUN1"))
        claim = ledger.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0))
        assert claim is not None
        guard = RunGuard(claim.run.fence, "w1")
        real = client.transact_write_items
        conflicts = {"left": 2}

        def conflicting(**kwargs: Any) -> Any:
            if conflicts["left"] > 0:
                conflicts["left"] -= 1
                reasons = [{"Code": "None"}] * len(kwargs["TransactItems"])
                reasons[1] = {"Code": "TransactionConflict", "Message": "ongoing"}
                response: Any = {
                    "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                    "CancellationReasons": reasons,
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                }
                raise client.exceptions.TransactionCanceledException(response, "TransactWriteItems")
            return real(**kwargs)

        client.transact_write_items = conflicting  # type: ignore[method-assign]
        step = make_step(
            status=StepStatus.WAITING,
            output=None,
            kind=StepKind.CHILD,
            detail={"child": "KID1"},
            fence=guard.fence,
        )
        assert ledger.start_child(step, guard, make_run("KID1", parent="RUN1@0001")) is step
        conflicts["left"] = 1000
        step2 = make_step(
            position="0002",
            status=StepStatus.WAITING,
            output=None,
            kind=StepKind.CHILD,
            detail={"child": "KID2"},
            fence=guard.fence,
        )
        with pytest.raises(StorageError) as caught:
            ledger.start_child(step2, guard, make_run("KID2", parent="RUN1@0002"))
        assert caught.value.retryable


def test_a_plain_write_meeting_a_transaction_is_retryable() -> None:
    from durable.core.retry import classify

    class Conflict(Exception):
        response = {
            "Error": {"Code": "TransactionConflictException"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }

    assert classify(Conflict()) == "retryable"
