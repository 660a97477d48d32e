"""A worker that does not know a run's workflow or version defers it; it never fails it
(issue 12, hole 15). During a deploy the API may already run new code while workers run
the old: the run waits for a worker that knows it."""

from __future__ import annotations

from datetime import timedelta

from durable import App, Context, RunStatus
from durable.core.model import parse_time
from durable.engine.engine import Engine
from durable.testing import LocalRunner


def app_with(version: int) -> App:
    app = App()

    @app.workflow(name="onboard", version=version)
    def onboard(ctx: Context) -> str:
        return f"v{version}"

    return app


def test_a_run_of_an_unknown_version_waits_for_a_worker_that_knows_it() -> None:
    """GIVEN a run of version 2 started by new code
    WHEN an old worker (version 1 only) gets it, several times
    THEN the run is not failed: it is due again later, with a growing delay and the
    deferral counted; a worker with version 2 then runs it."""
    new = LocalRunner(app_with(2))
    run = new.start("onboard")
    new.invoker.queue.clear()
    old = Engine(
        app_with(1),
        new.memory_ledger,
        new.invoker,
        new.effect_store,
        clock=new.clock,
        config=new.config,
    )
    delays = []
    for _ in range(3):
        outcome = old.resume(run.run_id)
        stored = new.get_run(run.run_id)
        assert outcome.result == "deferred"
        assert stored.status == RunStatus.PENDING and not stored.terminal
        assert stored.lease_owner is None and stored.due_at is not None
        delays.append(new.clock.now())
        new.clock.set(parse_time(stored.due_at))
    assert new.get_run(run.run_id).deferrals == 3
    assert delays[1] - delays[0] < delays[2] - delays[1]  # backs off
    new.run_until_idle()
    assert new.get_run(run.run_id).output == '"v2"'


def test_a_run_of_an_unknown_workflow_is_deferred_too() -> None:
    """GIVEN a run of a workflow the worker has never heard of
    WHEN the worker gets it
    THEN it is deferred, not failed."""
    new = LocalRunner(app_with(1))
    run = new.start("onboard")
    bare = Engine(App(), new.memory_ledger, new.invoker, new.effect_store, clock=new.clock)
    assert bare.resume(run.run_id).result == "deferred"
    assert new.get_run(run.run_id).status == RunStatus.PENDING
    new.advance(timedelta(hours=1))
    assert new.get_run(run.run_id).output == '"v1"'
