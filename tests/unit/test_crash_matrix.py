"""A crash at every port call of the onboarding run's life: nothing lost, nothing doubled.

The clean run is measured first (how many times each port method is called); then, for
every call k of every method, a fresh run dies right before and right after it. Whatever
the point, the run must finish with the clean run's output and each external effect must
have happened exactly once (the effect keys make retries reconcile instead of repeating).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import RunStatus, StepStatus
from durable.testing import LocalRunner, SimulatedCrash
from examples import onboarding
from examples.services import services

SIGNUP = {"user_id": "u42", "email": "u42@example.com"}
EXPECTED_EFFECTS = {"workspace": 1, "email": 2, "project": 1}


def drive_to_end(runner: LocalRunner, run_id: str) -> Any:
    """Advance the fake clock an hour at a time (leases expire, the 3-day sleep passes)."""
    runner.run_until_idle()
    for _ in range(100):
        run = runner.get_run(run_id)
        if run.terminal:
            return run
        runner.advance(hours=1)
    raise AssertionError(f"run {run_id} did not finish: {runner.get_run(run_id)}")


def start(runner: LocalRunner) -> str:
    try:
        return runner.start("onboarding", SIGNUP, idempotency_key="signup-u42").run_id
    except SimulatedCrash:
        # The API caller saw an error and retried with the same key.
        return runner.start("onboarding", SIGNUP, idempotency_key="signup-u42").run_id


def clean_run() -> tuple[dict[str, int], str | None]:
    services.reset()
    runner = LocalRunner(onboarding.app)
    run = drive_to_end(runner, start(runner))
    return dict(runner.plan.counts), run.output


CLEAN_COUNTS, CLEAN_OUTPUT = clean_run()
# The sweeper polls the due index on every idle turn of the runner: its calls are all
# alike, so the first few stand for the rest.
SWEEPER = {"ledger.due_runs", "ledger.claim_trigger"}
CASES = [
    (target, k, when)
    for target, count in sorted(CLEAN_COUNTS.items())
    for k in range(1, (min(count, 3) if target in SWEEPER else count) + 1)
    for when in ("before", "after")
]


def test_the_clean_run_touches_every_port() -> None:
    assert {
        "ledger.claim",
        "ledger.load",
        "ledger.write_step",
        "ledger.update_run",
        "ledger.create_run",
        "effects.begin",
        "effects.complete",
        "invoker.invoke",
        "timers.arm",
        "timers.cancel_run",
        "ledger.due_runs",
    } <= set(CLEAN_COUNTS)
    assert len(CASES) >= 40


@pytest.mark.parametrize(("target", "k", "when"), CASES)
def test_a_crash_at_any_port_call_loses_and_doubles_nothing(target: str, k: int, when: str) -> None:
    services.reset()
    runner = LocalRunner(onboarding.app)
    runner.crash_at(target, call=k, when=when)  # type: ignore[arg-type]
    run_id = start(runner)
    run = drive_to_end(runner, run_id)

    assert runner.crashes, "the injected crash point was never reached"
    assert run.status == RunStatus.SUCCEEDED
    assert run.output == CLEAN_OUTPUT
    assert dict(services.effects) == EXPECTED_EFFECTS
    steps = runner.history(run_id)
    assert [s.position for s in steps] == ["0001", "0002", "0003", "0004", "0005"]
    assert all(s.status == StepStatus.DONE for s in steps)
    assert runner.memory_ledger.all_run_ids() == [run_id]


def test_without_effect_keys_a_crash_after_the_body_repeats_it() -> None:
    """The contrast case: a plain at-least-once side effect runs again after a crash
    between its body and its record (which is why ``effect`` exists)."""
    from durable import App, Context

    app = App()
    sent: list[str] = []

    @app.step
    def send(to: str) -> str:
        sent.append(to)
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return send("a")

    runner = LocalRunner(app)
    runner.crash_at("ledger.write_step", call=1, when="before")
    run = runner.start("flow")
    runner.run_until_idle()
    runner.advance(timedelta(minutes=5))
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert sent == ["a", "a"]
