"""Child runs (``ctx.run_child``, ``ctx.start_child``) end to end through LocalRunner."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from durable import App, ChildFailed, ChildHandle, Context, RunStatus, StepStatus
from durable.core.model import format_time
from durable.engine.children import REPORT_LOOK_MIN
from durable.errors import InvalidInput, TerminalError, WorkflowNotFound
from durable.testing import LocalRunner


class Quote(BaseModel):
    sku: str
    cents: int


def make_app() -> App:
    app = App()

    @app.workflow
    def price(ctx: Context, sku: str) -> Quote:
        cents = ctx.step(lambda: len(sku) * 100, name="look-up")
        return Quote(sku=sku, cents=cents)

    @app.workflow
    def broken(ctx: Context, why: str) -> None:
        def fail() -> None:
            raise TerminalError(why)

        ctx.step(fail, name="fail")

    @app.workflow
    def slow(ctx: Context) -> str:
        ctx.sleep(timedelta(hours=1))
        return "slept"

    @app.workflow
    def order(ctx: Context, skus: list[str]) -> int:
        total = 0
        for sku in skus:
            quote = ctx.run_child(price, sku)
            assert isinstance(quote, Quote)  # decoded by the child's return annotation
            total += quote.cents
        return total

    @app.workflow
    def careful(ctx: Context, why: str) -> str:
        try:
            ctx.run_child("broken", why)
        except ChildFailed as e:
            return f"{e.error_type}: {e.error_message}"
        return "no failure"

    @app.workflow
    def fire(ctx: Context) -> str:
        handle = ctx.start_child(slow)
        return handle.run_id

    @app.workflow
    def waits(ctx: Context) -> str:
        handle: ChildHandle = ctx.start_child("slow")
        ctx.step(lambda: "meanwhile", name="meanwhile")
        result: str = handle.result()
        return result

    return app


def children_of(runner: LocalRunner, run_id: str) -> list[Any]:
    return [
        runner.get_run(str((s.detail or {})["child"]))
        for s in runner.history(run_id)
        if s.kind == "child"
    ]


def test_run_child_returns_each_childs_typed_result_and_the_parent_sums_them() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("order", ["ab", "abc"])
    runner.run_until_idle()
    parent = runner.get_run(run.run_id)
    assert (parent.status, parent.output, parent.children) == (RunStatus.SUCCEEDED, "500", 2)
    kids = children_of(runner, run.run_id)
    assert [(k.workflow, k.status, k.parent) for k in kids] == [
        ("price", RunStatus.SUCCEEDED, f"{run.run_id}@0001"),
        ("price", RunStatus.SUCCEEDED, f"{run.run_id}@0002"),
    ]
    # The parent's records hold each child's result, settled by the child's final write.
    records = runner.history(run.run_id)
    assert [(r.kind, r.status, r.output) for r in records] == [
        ("child", StepStatus.DONE, '{"sku":"ab","cents":200}'),
        ("child", StepStatus.DONE, '{"sku":"abc","cents":300}'),
    ]


def test_a_failed_child_raises_child_failed_that_the_parent_can_catch() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("careful", "out of stock")
    runner.run_until_idle()
    parent = runner.get_run(run.run_id)
    assert parent.status == RunStatus.SUCCEEDED
    assert parent.output is not None
    assert parent.output.startswith("\"StepFailed: step 'fail' at position 0001 failed")
    assert parent.output.endswith('TerminalError: out of stock"')
    (kid,) = children_of(runner, run.run_id)
    assert kid.status == RunStatus.FAILED


def test_an_uncaught_child_failure_fails_the_parent_at_the_childs_position() -> None:
    app = make_app()

    @app.workflow
    def strict(ctx: Context) -> None:
        ctx.run_child("broken", "nope")

    runner = LocalRunner(app)
    run = runner.start("strict")
    runner.run_until_idle()
    parent = runner.get_run(run.run_id)
    assert parent.status == RunStatus.FAILED
    assert parent.error is not None
    assert (parent.error.type, parent.error.position) == ("ChildFailed", "0001")


def test_start_child_without_result_is_fire_and_forget() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("fire")
    runner.run_until_idle()
    parent = runner.get_run(run.run_id)
    assert parent.status == RunStatus.SUCCEEDED
    child_id = parent.output.strip('"') if parent.output else ""
    assert runner.get_run(child_id).status == RunStatus.WAITING  # sleeping an hour
    runner.advance(hours=1)
    child = runner.get_run(child_id)
    assert (child.status, child.output) == (RunStatus.SUCCEEDED, '"slept"')
    # The parent had ended: it took no report, and its record still shows the start.
    (record,) = runner.history(run.run_id)
    assert record.status == StepStatus.WAITING


def test_the_parent_suspends_while_its_child_waits_and_the_childs_end_wakes_it() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("waits")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.WAITING
    # Due only at its first look at the child (a report lost on the way is found then):
    # the child's end wakes it long before.
    assert runner.get_run(run.run_id).due_at == format_time(runner.clock.now() + REPORT_LOOK_MIN)
    runner.advance(hours=1)
    parent = runner.get_run(run.run_id)
    assert (parent.status, parent.output) == (RunStatus.SUCCEEDED, '"slept"')


def test_a_replayed_parent_starts_no_child_twice() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("order", ["a", "b", "c"])
    # The worker dies right after the second child's start: the next one replays.
    runner.crash_at("ledger.start_child", call=2, when="after")
    runner.run_until_idle()
    runner.advance(minutes=10)  # past the dead worker's lease: the sweeper takes it over
    parent = runner.get_run(run.run_id)
    assert (parent.status, parent.output) == (RunStatus.SUCCEEDED, "300")
    assert parent.children == 3
    assert len({k.run_id for k in children_of(runner, run.run_id)}) == 3


def waiting_parent() -> tuple[LocalRunner, Any, Any]:
    """A parent waiting for its one child, which sleeps an hour."""
    runner = LocalRunner(make_app())
    run = runner.start("waits")
    runner.run_until_idle()
    (kid,) = children_of(runner, run.run_id)
    return runner, run, kid


def test_canceling_a_waiting_parent_cancels_the_child_it_waits_for() -> None:
    runner, run, kid = waiting_parent()
    runner.cancel(run.run_id, "customer left")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.CANCELED
    child = runner.get_run(kid.run_id)
    assert child.status == RunStatus.CANCELED
    assert child.error is not None and "customer left" in child.error.message


def test_a_canceled_child_fails_its_waiting_parent_with_child_failed() -> None:
    runner, run, kid = waiting_parent()
    runner.cancel(kid.run_id, "not needed")
    runner.run_until_idle()
    assert runner.get_run(kid.run_id).status == RunStatus.CANCELED
    parent = runner.get_run(run.run_id)
    assert parent.status == RunStatus.FAILED
    assert parent.error is not None and parent.error.type == "ChildFailed"
    assert "Canceled: not needed" in parent.error.message


def test_retrying_the_parent_retries_its_failed_child_and_waits_again() -> None:
    app = App()
    flaky = {"fail": True}

    @app.workflow
    def shaky(ctx: Context) -> str:
        def once() -> str:
            if flaky["fail"]:
                raise TerminalError("down")
            return "up"

        return str(ctx.step(once, name="once"))

    @app.workflow
    def boss(ctx: Context) -> str:
        result: str = ctx.run_child(shaky)
        return result

    runner = LocalRunner(app)
    run = runner.start("boss")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.FAILED
    flaky["fail"] = False
    runner.retry(run.run_id)
    runner.run_until_idle()
    parent = runner.get_run(run.run_id)
    assert (parent.status, parent.output) == (RunStatus.SUCCEEDED, '"up"')
    (kid,) = children_of(runner, run.run_id)
    assert kid.status == RunStatus.SUCCEEDED
    assert [op["action"] for op in kid.operations] == ["retry"]


def test_a_child_id_is_the_childs_idempotency_key_and_a_taken_one_is_refused() -> None:
    app = make_app()

    @app.workflow
    def keyed(ctx: Context, key: str) -> int:
        return int(ctx.run_child("price", "abcd", id=key).cents)

    runner = LocalRunner(app)
    other = runner.start("price", "x", idempotency_key="sku-1")  # not anybody's child
    runner.run_until_idle()
    first = runner.start("keyed", "sku-2")
    runner.run_until_idle()
    assert runner.get_run(first.run_id).output == "400"
    (kid,) = children_of(runner, first.run_id)
    assert kid.idempotency_key == "sku-2"
    clash = runner.start("keyed", "sku-1")
    runner.run_until_idle()
    failed = runner.get_run(clash.run_id)
    assert failed.status == RunStatus.FAILED and failed.error is not None
    assert "taken by run " + other.run_id in failed.error.message
    assert "key each new run apart" in failed.error.message  # what to do, not only what


def test_an_unregistered_function_is_refused_with_the_fix() -> None:
    app = App()

    def helper(ctx: Context) -> None:
        return None

    @app.workflow
    def parent(ctx: Context) -> None:
        ctx.run_child(helper)

    runner = LocalRunner(app)
    run = runner.start("parent")
    runner.run_until_idle()
    error = runner.get_run(run.run_id).error
    assert error is not None and error.type == WorkflowNotFound.__name__
    assert "decorate it with @app.workflow" in error.message


def test_a_childs_input_is_validated_against_its_workflow() -> None:
    app = make_app()

    @app.workflow
    def sloppy(ctx: Context) -> None:
        ctx.run_child("price", {"not": "a string"})

    runner = LocalRunner(app)
    run = runner.start("sloppy")
    runner.run_until_idle()
    error = runner.get_run(run.run_id).error
    assert error is not None and error.type == InvalidInput.__name__
    assert runner.history(run.run_id) == []  # nothing started


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_crash_around_the_childs_final_write_never_loses_its_report(where: str) -> None:
    runner = LocalRunner(make_app())
    run = runner.start("order", ["abc"])
    runner.crash_at("ledger.finish_child", call=1, when=where)  # type: ignore[arg-type]
    runner.run_until_idle()
    runner.advance(minutes=10)  # past any lease: the sweeper takes the dead worker's run
    parent = runner.get_run(run.run_id)
    assert (parent.status, parent.output) == (RunStatus.SUCCEEDED, "300")


# --- found by the simulation explorer (each failed on the code before its fix) ---------


def test_a_keyed_parent_restarted_after_its_retention_gets_children_of_its_own() -> None:
    """Seed 846: a keyed run's id is reused once its retention ended; its child at the
    same position must be a new run, not the earlier incarnation's (which had ended:
    waiting for it again would wait forever)."""
    runner = LocalRunner(make_app())
    first = runner.start("order", ["ab"], idempotency_key="order-7")
    runner.run_until_idle()
    (old,) = children_of(runner, first.run_id)
    runner.advance(days=31)
    runner.expire()  # the parent's run item goes; its child's too
    second = runner.start("order", ["abc"], idempotency_key="order-7")
    assert second.run_id == first.run_id
    runner.run_until_idle()
    parent = runner.get_run(second.run_id)
    assert (parent.status, parent.output) == (RunStatus.SUCCEEDED, "300")
    (new,) = children_of(runner, second.run_id)
    assert new.run_id != old.run_id


def test_retrying_a_parent_whose_child_expired_fails_it_again_instead_of_waiting() -> None:
    """Seed 659: an operator retried a parent after its failed child's retention ended;
    the parent waited for a child that no longer existed, for ever."""
    runner = LocalRunner(make_app())

    app_run = runner.start("careful", "boom")  # catches: a run that keeps going
    runner.run_until_idle()
    assert runner.get_run(app_run.run_id).status == RunStatus.SUCCEEDED

    @runner.app.workflow
    def strict(ctx: Context) -> None:
        ctx.run_child("broken", "nope")

    run = runner.start("strict")
    runner.run_until_idle()
    (kid,) = children_of(runner, run.run_id)
    runner.memory_ledger.patch_run(run.run_id, {"purge_at": None})  # the parent outlives it
    runner.advance(days=31)
    runner.expire()
    assert runner.memory_ledger.get_run(kid.run_id) is None
    runner.retry(run.run_id)
    runner.run_until_idle()
    parent = runner.get_run(run.run_id)
    assert parent.status == RunStatus.FAILED and parent.error is not None
    assert "ChildGone" in parent.error.message


def test_a_child_cannot_continue_as_new_and_its_parent_hears_why() -> None:
    app = make_app()

    @app.workflow(name="looper")
    def looper(ctx: Context, n: int) -> int:
        if n < 3:
            ctx.continue_as_new(n + 1)
        return n

    @app.workflow(name="boss")
    def boss(ctx: Context) -> str:
        try:
            return str(ctx.run_child(looper, 0))
        except ChildFailed as e:
            return e.error_type + ": " + e.error_message

    runner = LocalRunner(app)
    run = runner.start("boss")
    runner.run_until_idle()
    output = runner.get_run(run.run_id).output or ""
    assert output.startswith('"InvalidInput: ctx.continue_as_new is not available in a child')


def test_a_handle_shows_the_child_not_the_engine() -> None:
    seen: list[str] = []
    app = make_app()

    @app.workflow(name="peek")
    def peek(ctx: Context) -> None:
        seen.append(repr(ctx.start_child("slow")))

    runner = LocalRunner(app)
    runner.start("peek")
    runner.run_until_idle()
    (text,) = seen
    assert text.startswith("ChildHandle(run_id=") and "workflow='slow'" in text
    assert "_execution" not in text and "Execution" not in text
