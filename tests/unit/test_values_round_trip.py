"""A value read on replay equals the value returned the first time, type included
(issue 12, holes 5, 6, 9 and 16): conditions, aliased models, signal order, polls that
keep failing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field

from durable import App, Context, RunStatus, StepStatus
from durable.engine.operations import available_decisions
from durable.testing import LocalRunner


class Export(BaseModel):
    url: str


def test_a_condition_returns_its_annotated_type_on_first_run_and_on_replay() -> None:
    """GIVEN a condition whose check returns a pydantic model
    WHEN the workflow reads it on the first execution and again on a replay
    THEN both are the model, equal (hole 5)."""
    app = App()
    seen: list[Any] = []

    def ready() -> Export:
        return Export(url="s3://b/k")

    @app.workflow
    def flow(ctx: Context) -> str:
        seen.append(ctx.wait_for_condition(ready, interval=timedelta(minutes=1)))
        ctx.sleep(timedelta(hours=1))
        return "ok"

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    runner.advance(hours=1)
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert seen == [Export(url="s3://b/k"), Export(url="s3://b/k")]
    assert [type(v) for v in seen] == [Export, Export]


class Signup(BaseModel):
    user_id: str = Field(alias="userId")  # validated by alias only (pydantic's default)


def test_a_model_with_field_aliases_round_trips_as_input_and_as_a_result() -> None:
    """GIVEN a model whose fields have aliases, as the workflow input and a step result
    WHEN the run starts, its step runs and the run is replayed
    THEN the input decodes and the step result is recorded DONE, not failed after the body
    ran (hole 6)."""
    app = App()
    bodies: list[str] = []

    def lookup(user_id: str) -> Signup:
        bodies.append(user_id)
        return Signup(userId=user_id)

    @app.workflow
    def flow(ctx: Context, signup: Signup) -> str:
        found = ctx.step(lookup, signup.user_id)
        ctx.sleep(timedelta(minutes=5))
        return found.user_id

    runner = LocalRunner(app)
    run = runner.start("flow", {"userId": "u1"})
    runner.run_until_idle()
    runner.advance(minutes=5)
    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.output) == (RunStatus.SUCCEEDED, '"u1"')
    assert runner.history(run.run_id)[0].status == StepStatus.DONE
    assert bodies == ["u1"]


def test_signals_sent_within_one_millisecond_are_consumed_in_arrival_order() -> None:
    """GIVEN ten signals of one name sent while the fake clock stands still
    WHEN the run waits for them one by one
    THEN it receives them in the order they were sent (hole 9)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> list[Any]:
        return [ctx.wait_for_signal("item") for _ in range(10)]

    runner = LocalRunner(app)
    run = runner.start("flow")
    for i in range(10):
        runner.signal(run.run_id, "item", i)
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == "[0,1,2,3,4,5,6,7,8,9]"


def test_a_check_that_keeps_failing_ends_the_wait_instead_of_polling_forever() -> None:
    """GIVEN a condition without a timeout whose check raises an error the taxonomy calls
    retryable
    WHEN it keeps failing
    THEN the condition fails for good after the retry policy's attempts (hole 16)."""
    app = App()
    polls: list[int] = []

    class Flaky(Exception):
        pass

    def broken() -> bool:
        polls.append(1)
        raise Flaky("status service down")

    @app.workflow
    def flow(ctx: Context) -> bool:
        return ctx.wait_for_condition(broken, interval=timedelta(minutes=1))

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    for _ in range(20):
        runner.advance(minutes=10)
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert stored.error is not None and "status service down" in stored.error.message
    assert len(polls) == 3  # the default policy's attempts
    assert runner.history(run.run_id)[0].status == StepStatus.TERMINAL_FAILED


def test_a_compensated_run_is_not_offered_a_retry() -> None:
    """GIVEN a run that failed and was compensated
    WHEN an operator asks what it can do
    THEN retry is not offered (it would answer 409), fork is (hole 16)."""
    app = App()

    def book() -> str:
        return "b1"

    def unbook(ref: str) -> None:
        return None

    def fail() -> None:
        raise ValueError("card declined")

    @app.workflow
    def flow(ctx: Context) -> None:
        ctx.step(book, compensate=unbook)
        ctx.step(fail)

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert available_decisions(stored) == ["fork"]
