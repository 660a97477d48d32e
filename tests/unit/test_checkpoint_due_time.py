"""A checkpoint that cuts the lease shorter writes its own takeover moment
(``durable.core.leases.lease_changes``): the claim leased the whole invocation and kept
an early due time, the sweeper (meeting the live lease) moved it to that long lease's
end, and a checkpoint then cut the lease to a minute. Kept, the due time would be the
long lease's and a dead owner found 13 minutes late (a review's reproduction of issue
35's first version)."""

from __future__ import annotations

from datetime import datetime, timedelta

from durable import App, Context, EngineConfig, current_step
from durable.core.model import parse_time
from durable.testing import LocalRunner, SimulatedCrash

SKEW = timedelta(seconds=5)


def test_a_dead_owner_after_a_checkpoint_is_found_by_its_takeover_moment() -> None:
    app = App()
    seen: dict[str, tuple[str, str]] = {}

    @app.step(timeout=timedelta(seconds=30))
    def pull() -> str:
        runner.clock.advance(timedelta(seconds=60))
        runner.engine.sweep()  # a sweep while the lease is live: due_at -> claim's takeover
        after_sweep = runner.get_run(current_step().run_id)
        seen["sweep"] = (after_sweep.lease_until or "", after_sweep.due_at or "")
        current_step().checkpoint({"cursor": 1})
        item = runner.get_run(current_step().run_id)
        seen["checkpoint"] = (item.lease_until or "", item.due_at or "")
        raise SimulatedCrash("worker dies after its checkpoint")

    @app.workflow
    def flow(ctx: Context) -> str:
        return pull()

    started: list[datetime] = []

    def remaining() -> float:  # a 15-minute Lambda invocation
        return (started[0] + timedelta(minutes=15) - runner.clock.now()).total_seconds()

    runner = LocalRunner(
        app, config=EngineConfig(lease=timedelta(seconds=60)), remaining_seconds=remaining
    )
    started.append(runner.clock.now())
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.crashes, seen
    lease_until, due_at = seen["checkpoint"]
    # the sweep met the live lease and made the run due at that long lease's end
    assert seen["sweep"][1] > due_at
    takeover = parse_time(lease_until) + SKEW
    runner.advance(takeover + timedelta(minutes=2) - runner.clock.now())
    # ... and by the takeover moment plus the sweep grace, another worker took it over
    assert runner.get_run(run_id).takeovers >= 1
    # the sweeper finds the dead owner when a takeover could succeed, not 12 min later
    assert parse_time(due_at) <= takeover, (
        f"due_at {due_at} is {parse_time(due_at) - takeover} after the takeover moment"
    )
