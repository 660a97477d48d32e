"""Pins on StepContext.effect (durable/engine/effects.py): each test names the mutants it kills
(ids of ``python -m tests.mutation --module durable/engine/effects.py --list``)."""

from __future__ import annotations

from durable import App, Context, RetryPolicy, StepStatus, current_step
from durable.testing import LocalRunner


def test_an_effect_whose_reference_is_not_plain_json_fails_the_step_for_good() -> None:
    """GIVEN an effect call returning a set (not plain JSON) WHEN the step runs THEN it fails
    for good with a TypeError naming what an effect must return, and is not retried.

    Kills effects-84cf8d3b (the ``raise TypeError`` deleted: an UnboundLocalError follows,
    which the taxonomy retries)."""
    app = App()
    calls: list[str] = []

    @app.step(retry=RetryPolicy(max_attempts=3))
    def charge() -> str:
        def call(key: str) -> object:
            calls.append(key)
            return {"ch_1"}

        return str(current_step().effect("charge", call))

    @app.workflow
    def flow(ctx: Context) -> str:
        return charge()

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    step = runner.history(run_id)[0]
    assert step.status == StepStatus.TERMINAL_FAILED and step.error_type == "TypeError"
    assert "effect call must return a plain-JSON reference" in (step.error_summary or "")
    assert len(calls) == 1
