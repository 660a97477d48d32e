"""A cancel never abandons an undo under way (issue 31, hole 8).

A run failed, its undo waits for a retry (the provider timed out once): the run says
COMPENSATING, and an operator's cancel without compensation is refused with the reason,
nothing written; the undo finishes and the run ends FAILED with its own error. A cancel
recorded just before the failure (a race) is not lost either way: the undo finishes and
the failure, which is what happened, is what the run keeps. Before, the run ended
CANCELED at once, the undo stayed WAITING for ever and the failure was gone.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from durable import App, Context, RetryPolicy, RunStatus, StepStatus, TerminalError
from durable.errors import InvalidState
from durable.testing import LocalRunner


def _app(undone: list[str]) -> tuple[App, Callable[[str, str], None]]:
    app = App()
    timeouts = {"left": 1}

    def book(trip: str) -> str:
        return f"booking {trip}"

    @app.step(retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(minutes=5)))
    def unbook(booking: str, trip: str) -> None:
        if timeouts["left"]:
            timeouts["left"] -= 1
            raise TimeoutError("provider timed out")
        undone.append(booking)

    @app.workflow(name="trip")
    def trip(ctx: Context, where: str) -> str:
        ctx.step(book, where, compensate=unbook)

        def pay() -> None:
            raise TerminalError("card declined")

        ctx.step(pay, name="pay")
        return "paid"

    return app, unbook


def test_a_cancel_of_a_run_whose_undo_waits_is_refused_and_the_undo_finishes() -> None:
    undone: list[str] = []
    runner = LocalRunner(_app(undone)[0])
    run = runner.start("trip", "rome")
    runner.run_until_idle()
    waiting = runner.get_run(run.run_id)
    assert waiting.status == RunStatus.COMPENSATING  # not WAITING: it is undoing
    before = runner.get_run(run.run_id)
    with pytest.raises(InvalidState, match="undoing its completed steps"):
        runner.cancel(run.run_id, "ops cleanup")
    assert runner.get_run(run.run_id) == before  # nothing written
    runner.advance(minutes=10)
    done = runner.get_run(run.run_id)
    assert done.status == RunStatus.FAILED and done.error is not None
    assert "card declined" in done.error.message
    assert undone == ["booking rome"]
    undo = [s for s in runner.history(run.run_id) if s.kind == "compensation"]
    assert [s.status for s in undo] == [StepStatus.DONE]


def test_a_cancel_that_lands_as_the_run_fails_keeps_the_undo_and_the_failure() -> None:
    """The race: the operator's cancel is recorded while the failing step runs. The undo
    still runs to its end (through its retry), and the run ends FAILED with the failure
    that happened first, not CANCELED."""
    undone: list[str] = []
    app, unbook = _app(undone)
    runner = LocalRunner(app)

    @app.workflow(name="trip-canceled-meanwhile")
    def canceled_meanwhile(ctx: Context, where: str) -> str:
        ctx.step(lambda w: f"booking {w}", where, name="book", compensate=unbook)

        def pay() -> None:
            runner.engine.cancel(ctx.run_id, "changed my mind")
            raise TerminalError("card declined")

        ctx.step(pay, name="pay")
        return "paid"

    run = runner.start("trip-canceled-meanwhile", "oslo")
    runner.run_until_idle()
    runner.advance(minutes=10)
    done = runner.get_run(run.run_id)
    assert done.status == RunStatus.FAILED and done.error is not None, done.status
    assert "card declined" in done.error.message
    assert undone == ["booking oslo"]
