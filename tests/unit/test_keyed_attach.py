"""A key a running run holds: "start it unless it is already running" (issue 33, item 1).

The nightly import that fans out per customer started ``onboarding`` for each customer
keyed by the customer; on the second night the first night's onboarding (three days of
sleep) was still running, ``start_child`` refused the key, and the night FAILED.
``if_running="attach"`` takes the running run instead; the default stays a refusal,
which now says what to pass.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import App, ChildFailed, Context, RunStatus
from durable.engine.engine_parts import IfRunning
from durable.errors import IdempotencyConflict, InvalidInput
from durable.testing import LocalRunner

CUSTOMERS = ["c-000", "c-001"]


def import_app(if_running: IfRunning = "attach", wait: bool = False) -> App:
    app = App()

    @app.workflow
    def onboarding(ctx: Context, customer: str) -> str:
        ctx.sleep(timedelta(days=3))
        return f"onboarded {customer}"

    @app.workflow
    def nightly(ctx: Context, night: int) -> list[Any]:
        out = []
        for c in CUSTOMERS:
            key = f"onboard-{c}"
            if wait:
                out.append(ctx.run_child(onboarding, c, id=key, if_running=if_running))
            else:
                handle = ctx.start_child(onboarding, c, id=key, if_running=if_running)
                out.append(handle.run_id)
        return out

    return app


def onboarding_runs(runner: LocalRunner) -> list[str]:
    return sorted(
        r for r in runner.memory_ledger.all_run_ids() if runner.get_run(r).workflow == "onboarding"
    )


def test_the_second_night_attaches_to_the_onboarding_the_first_started() -> None:
    runner = LocalRunner(import_app())
    first = runner.start("nightly", 1)
    runner.run_until_idle()
    runner.advance(days=1)
    second = runner.start("nightly", 2)
    runner.run_until_idle()
    assert runner.get_run(second.run_id).status == RunStatus.SUCCEEDED
    assert runner.result(second.run_id) == runner.result(first.run_id)
    assert sorted(runner.result(second.run_id)) == onboarding_runs(runner)
    assert len(onboarding_runs(runner)) == 2  # nothing started twice
    runner.advance(days=3)
    assert sorted(runner.result(r) for r in onboarding_runs(runner)) == [
        "onboarded c-000",
        "onboarded c-001",
    ]


def test_by_default_the_key_is_refused_and_the_error_says_what_to_pass() -> None:
    runner = LocalRunner(import_app(if_running="fail"))
    runner.start("nightly", 1)
    runner.run_until_idle()
    second = runner.start("nightly", 2)
    runner.run_until_idle()
    stored = runner.get_run(second.run_id)
    assert stored.status == RunStatus.FAILED and stored.error is not None
    assert 'if_running="attach"' in stored.error.message
    assert "still running" in stored.error.message


def test_a_parent_that_waits_for_a_run_it_attached_to_gets_its_result() -> None:
    """The attached run reports to its own parent; the second parent looks at it on a
    backoff and takes its outcome when it ends, at the time it ended (within a look).
    The nights wait one customer at a time, so the second night starts c-001 itself
    and the first night, reaching c-001 later, attaches to that one."""
    runner = LocalRunner(import_app(wait=True))
    first = runner.start("nightly", 1)
    runner.run_until_idle()
    runner.advance(hours=12)
    second = runner.start("nightly", 2)
    runner.run_until_idle()
    assert runner.get_run(second.run_id).status == RunStatus.WAITING
    runner.advance(days=7)
    expected = ["onboarded c-000", "onboarded c-001"]
    assert runner.result(first.run_id) == runner.result(second.run_id) == expected
    assert len(onboarding_runs(runner)) == 2
    # It looked at most every 15 minutes: it ended within one look of the children.
    end = max(runner.get_run(r).updated_at for r in onboarding_runs(runner))
    assert runner.get_run(second.run_id).updated_at <= _plus(end, minutes=15)


def _plus(stamp: str, **delta: float) -> str:
    from durable.core.model import format_time, parse_time

    return format_time(parse_time(stamp) + timedelta(**delta))


def test_canceling_the_attaching_parent_leaves_the_run_it_attached_to() -> None:
    runner = LocalRunner(import_app(wait=True))
    runner.start("nightly", 1)
    runner.run_until_idle()
    second = runner.start("nightly", 2)
    runner.run_until_idle()
    runner.cancel(second.run_id, "not tonight")
    runner.run_until_idle()
    assert runner.get_run(second.run_id).status == RunStatus.CANCELED
    assert {runner.get_run(r).status for r in onboarding_runs(runner)} == {RunStatus.WAITING}


def test_an_attached_run_that_fails_fails_the_wait_with_child_failed() -> None:
    app = App()

    @app.workflow
    def job(ctx: Context) -> None:
        ctx.sleep(timedelta(hours=1))
        raise RuntimeError("the job broke")

    @app.workflow
    def caller(ctx: Context) -> str:
        try:
            ctx.run_child(job, id="the-job", if_running="attach")
        except ChildFailed as e:
            return f"caught {e.error_type}"
        return "ok"

    runner = LocalRunner(app)
    runner.start("job", idempotency_key="the-job")
    runner.run_until_idle()
    run = runner.start("caller")
    runner.advance(hours=2)
    assert runner.result(run.run_id) == "caught RuntimeError"


def test_engine_start_attaches_to_a_running_run_with_another_input() -> None:
    runner = LocalRunner(import_app())
    running = runner.start("onboarding", "c-000", idempotency_key="k")
    taken = runner.start("onboarding", "c-999", idempotency_key="k", if_running="attach")
    assert taken.run_id == running.run_id
    with pytest.raises(IdempotencyConflict, match=r'RUNNING|PENDING.*if_running="attach"'):
        runner.start("onboarding", "c-999", idempotency_key="k")
    runner.advance(days=4)
    with pytest.raises(IdempotencyConflict, match="SUCCEEDED") as ended:
        runner.start("onboarding", "c-999", idempotency_key="k", if_running="attach")
    assert "if_running" not in str(ended.value)  # nothing to attach to any more


@pytest.mark.parametrize("value", ["ATTACH", "skip", None])
def test_an_unknown_policy_names_the_field(value: Any) -> None:
    runner = LocalRunner(import_app())
    with pytest.raises(InvalidInput) as e:
        runner.start("onboarding", "c", idempotency_key="k", if_running=value)
    assert e.value.field == "if_running"
    assert runner.memory_ledger.all_run_ids() == []


@pytest.mark.parametrize("depth", [0, 1])
def test_a_run_cannot_attach_to_itself_or_an_ancestor(depth: int) -> None:
    """Found by the explorer: a run started under key K whose code starts a child with
    id=K attached to itself and waited for ever. Refused, naming the fix."""
    app = App()

    @app.workflow
    def tree(ctx: Context, level: int) -> str:
        if level < depth:
            return str(ctx.run_child(tree, level + 1, id=f"node-{level + 1}"))
        return str(ctx.run_child(tree, level + 1, id="root", if_running="attach"))

    runner = LocalRunner(app)
    root = runner.start("tree", 0, idempotency_key="root")
    runner.advance(hours=1)
    stored = runner.get_run(root.run_id)
    assert stored.status == RunStatus.FAILED and stored.error is not None, stored.status
    assert "wait for itself" in stored.error.message


def test_a_run_is_found_by_the_key_it_shows() -> None:
    """Operators', keyed children's and senders' keys (with their namespace) each find
    their run; a key of another workflow, or none, finds nothing."""
    from durable.errors import RunNotFound

    runner = LocalRunner(import_app())
    night = runner.start("nightly", 1)
    runner.run_until_idle()
    child = runner.run_by_key("onboarding", "onboard-c-001")
    assert child.parent is not None and child.parent.startswith(night.run_id)
    by_operator = runner.start("onboarding", "x", idempotency_key="ops-7")
    assert runner.run_by_key("onboarding", "ops-7").run_id == by_operator.run_id
    sent = runner.engine.start("onboarding", "y", idempotency_key="evt-1", key_scope="eventbridge")
    assert runner.run_by_key("onboarding", "eventbridge/evt-1").run_id == sent.run_id
    for workflow, key in (("nightly", "ops-7"), ("onboarding", "evt-1"), ("onboarding", "nope")):
        with pytest.raises(RunNotFound):
            runner.run_by_key(workflow, key)
