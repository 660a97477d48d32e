"""A run's first invocation skips reading a partition that can hold nothing yet."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from durable import App, Context, RunStatus
from durable.core.retention import nothing_recorded_yet
from durable.testing import LocalRunner


def _app() -> App:
    app = App()

    @app.step
    def double(n: int) -> int:
        return 2 * n

    @app.workflow(name="twice")
    def twice(ctx: Context, n: int) -> int:
        first = double(n)
        ctx.sleep(timedelta(minutes=5))
        return double(first)

    @app.workflow(name="listens")
    def listens(ctx: Context) -> object:
        return ctx.wait_for_signal("go", timeout=timedelta(hours=1))

    return app


def test_a_fresh_runs_first_invocation_does_not_load_its_partition() -> None:
    runner = LocalRunner(_app())
    run = runner.start("twice", 3)
    runner.run_until_idle()
    assert runner.call_count("ledger.load") == 0  # first invocation: nothing to read
    runner.advance(minutes=5)
    assert runner.call_count("ledger.load") == 1  # the wake-up reads what was recorded
    assert runner.get_run(run.run_id).output == "12"


def test_a_keyed_start_loads_because_its_id_may_hold_an_expired_runs_records() -> None:
    runner = LocalRunner(_app())
    runner.start("twice", 3, idempotency_key="order-7")
    runner.run_until_idle()
    assert runner.call_count("ledger.load") == 1


def test_a_signal_sent_before_the_first_claim_is_read_by_it() -> None:
    runner = LocalRunner(_app())
    run = runner.start("listens")
    runner.signal(run.run_id, "go", {"n": 1})  # lands before any worker ran
    runner.run_until_idle()
    done = runner.get_run(run.run_id)
    assert (done.status, done.output) == (RunStatus.SUCCEEDED, '{"n":1}')
    assert runner.call_count("ledger.load") == 1


def test_a_fork_loads_the_steps_it_copied() -> None:
    runner = LocalRunner(_app())
    run = runner.start("twice", 3)
    runner.run_until_idle()
    runner.advance(minutes=5)
    forked = runner.fork(run.run_id, "0002")
    loads = runner.call_count("ledger.load")
    runner.run_until_idle()
    runner.advance(minutes=5)
    assert runner.call_count("ledger.load") > loads
    assert runner.get_run(forked.run_id).output == "12"
    assert runner.history(forked.run_id)[0].status == "DONE"  # copied, not re-run


def test_the_rule_needs_every_condition() -> None:
    run = LocalRunner(_app()).start("twice", 3)
    first = replace(run, fence=1)  # as the first claim leaves it
    assert nothing_recorded_yet(first)
    assert not nothing_recorded_yet(replace(first, fence=2))
    assert not nothing_recorded_yet(replace(first, inbox=1))
    assert not nothing_recorded_yet(replace(first, idempotency_key="k"))
    assert not nothing_recorded_yet(replace(first, forked_from=f"{run.run_id}@0002"))
