"""Reads never show an expired run's leftovers as the new run's (issue 12, hole 8): a keyed
start after expiry reuses the run id while the old steps may still be in the partition."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from durable import App, Context, RunStatus
from durable.adapters.nonces import MemoryNonceStore
from durable.api.service import ApiService
from durable.core.model import StepKind, StepRecord, StepStatus
from durable.testing import LocalRunner


def keyed_app() -> App:
    app = App()

    def greet(name: str) -> str:
        return f"hello {name}"

    @app.workflow(name="greeter")
    def greeter(ctx: Context, name: str) -> str:
        return ctx.step(greet, name)

    return app


def expired_then_restarted(runner: LocalRunner) -> str:
    """A keyed run that finished and expired (TTL took its item, not its steps yet), and
    the same key started again: PENDING, not yet claimed by any worker."""
    first = runner.start("greeter", "old customer", idempotency_key="k-1")
    runner.run_until_idle()
    assert runner.get_run(first.run_id).status == RunStatus.SUCCEEDED
    runner.advance(days=31)
    assert runner.memory_ledger.expire(runner.clock.now()) == [first.run_id]
    runner.invoker.queue.clear()
    second = runner.engine.start("greeter", "new customer", idempotency_key="k-1")
    runner.invoker.queue.clear()  # no worker has claimed it yet
    assert second.run_id == first.run_id
    return second.run_id


def test_history_of_a_reused_id_shows_none_of_the_expired_runs_steps() -> None:
    """GIVEN a keyed run restarted after expiry, not yet claimed
    WHEN the engine's history and the API's run view are read
    THEN neither shows the old customer's step."""
    runner = LocalRunner(keyed_app())
    run_id = expired_then_restarted(runner)
    assert runner.engine.history(run_id) == []
    api = ApiService(
        runner.engine, clock=runner.clock, nonces=MemoryNonceStore(), webhook_secret=lambda: None
    )
    view = api.get_run(run_id)
    assert view.steps == [] and view.status == RunStatus.PENDING.value


def test_a_reused_id_canceled_before_any_claim_forks_without_the_old_steps() -> None:
    """GIVEN a keyed run restarted after expiry and canceled before a worker claimed it (so
    nothing purged the old steps)
    WHEN it is forked from step 1
    THEN the fork greets the new customer, never replaying the old customer's step."""
    runner = LocalRunner(keyed_app())
    run_id = expired_then_restarted(runner)
    runner.cancel(run_id, "changed my mind")
    assert runner.get_run(run_id).status == RunStatus.CANCELED
    forked = runner.fork(run_id, 1)
    runner.run_until_idle()
    assert runner.get_run(forked.run_id).output == '"hello new customer"'


def test_a_worker_whose_claimed_run_expired_meanwhile_touches_nothing_of_the_new_one() -> None:
    """GIVEN a worker that claimed a keyed run and stalled before loading it, while the run
    ended, expired (its item gone, its steps left) and the same key started a new run
    WHEN the stalled worker loads
    THEN it stops (lease lost): it neither purges nor writes in the new run's partition
    (found by the simulation explorer, seed 100221)."""
    from durable.adapters.memory import MemoryLedger
    from durable.engine.engine import Engine

    class StallingClaim(MemoryLedger):
        stall: list[Any] = []

        def claim(self, run_id: str, owner: str, **kwargs: Any) -> Any:
            claimed = super().claim(run_id, owner, **kwargs)
            if self.stall:
                self.stall.pop()()
            return claimed

    app = keyed_app()
    runner = LocalRunner(app)
    ledger = StallingClaim()
    engine = Engine(app, ledger, runner.invoker, runner.effect_store, clock=runner.clock)
    first = engine.start("greeter", "old customer", idempotency_key="k-1")
    done = StepRecord(
        first.run_id, "0001", "greet", StepKind.STEP, StepStatus.DONE, first.created_at
    )
    ledger.write_step(done)  # what an earlier invocation of the first run recorded
    second: list[str] = []

    def finish_expire_and_restart() -> None:
        runner.clock.advance(timedelta(days=31))
        ledger.patch_run(first.run_id, {"status": "SUCCEEDED", "purge_at": 1})
        assert ledger.expire(runner.clock.now()) == [first.run_id]
        second.append(engine.start("greeter", "new customer", idempotency_key="k-1").run_id)

    ledger.stall.append(finish_expire_and_restart)
    assert engine.resume(first.run_id).result == "lease_lost"
    assert second == [first.run_id]
    assert ledger.get_step(first.run_id, "0001") == done  # nothing purged by it
    new = ledger.get_run(first.run_id)
    assert new is not None and (new.input, new.status) == ('"new customer"', RunStatus.PENDING)
