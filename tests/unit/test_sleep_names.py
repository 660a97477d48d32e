"""A sleep's name of another type than text (an int, a tuple) is recorded as a step item,
as it always was: keeping it in the run item failed such runs (a review's reproduction
of issue 35's first version)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, EngineConfig, RunStatus
from durable.testing import LocalRunner


@pytest.mark.parametrize("name", [7, ("a", 1)], ids=["int", "tuple"])
def test_a_kept_sleep_of_any_name_finishes_as_a_step_item_one_does(name: Any) -> None:
    app = App()

    @app.workflow(name="f")
    def f(ctx: Context) -> int:
        ctx.sleep(timedelta(minutes=10), name=name)
        return 1

    config = EngineConfig(inprocess_wait_threshold=timedelta(0), sleeps_on_run=True)
    runner = LocalRunner(app, config=config)
    run_id = runner.start("f").run_id
    runner.run_until_idle()
    runner.advance(minutes=11)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED, run.error
