"""Pins on what a step's record says about its attempts (durable/engine/steps.py).

Each test names the mutants it kills (ids of ``python -m tests.mutation --module
durable/engine/steps.py --list``).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable import (
    App,
    Context,
    EngineConfig,
    RetryPolicy,
    RunStatus,
    StepStatus,
    current_step,
)
from durable.core.model import StepKind, StepRecord, format_time
from durable.errors import DurableError, StorageError
from durable.testing import LocalRunner, SimulatedCrash

LEASE = timedelta(seconds=60)
LONG = "x" * 600  # an error message past the 500 characters an attempt keeps


def history_of(runner: LocalRunner, run_id: str) -> StepRecord:
    return runner.history(run_id)[0]


def test_a_failed_attempt_records_when_why_and_how_it_failed() -> None:
    """GIVEN a step whose first attempt fails with a long ConnectionError 30 s in, and whose
    second attempt succeeds
    WHEN the run ends THEN attempt 1 says when it finished, that the failure was retryable
    and the error, cut to 500 characters ending in "..."; attempt 2 finished cleanly; the
    record's detail is empty (the retry's "reason" stays on the WAITING record).

    Kills steps-7d214876 (finished_at not set), steps-63139b3c / c573c2b0 (the error not
    kept, or cut at 501), steps-b1e8b993 (the "reason" filter -> "": a DONE record would
    still say it waits for a retry), steps-225d9e84 (``or None`` -> ``and None``)."""
    app = App()
    runner: LocalRunner

    @app.step(retry=RetryPolicy(max_attempts=2, initial_delay=timedelta(minutes=1), jitter="none"))
    def call() -> str:
        if current_step().attempt == 1:
            runner.clock.advance(timedelta(seconds=30))
            raise ConnectionError(LONG)
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return call()

    runner = LocalRunner(app)
    started = runner.clock.now()
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    waiting = history_of(runner, run_id)
    assert waiting.status == StepStatus.WAITING
    assert waiting.detail == {"reason": "retry"}
    runner.advance(minutes=2)
    step = history_of(runner, run_id)
    assert step.status == StepStatus.DONE and step.detail is None
    first, second = step.attempts
    assert first.finished_at == format_time(started + timedelta(seconds=30))
    assert first.error_class == "retryable"
    assert first.error is not None and len(first.error) == 500
    assert first.error.startswith("ConnectionError: xxx") and first.error.endswith("...")
    assert second.finished_at is not None and second.error is None


def test_a_non_retryable_storage_error_fails_the_step_for_good() -> None:
    """GIVEN a step (3 attempts) whose body gets a StorageError(retryable=False) from a store
    WHEN it runs THEN the step fails for good at once: one attempt, terminal, finished, its
    error kept (cut to 500); the run fails.

    Kills steps-21a1669f / 3bb33c54 / 3620aa2e / fea09969 / b2bc6534 / 59743fb5 (the
    terminal storage path) and steps-99118248 (``error.retryable`` negated)."""
    app = App()
    bodies: list[int] = []

    @app.step(retry=RetryPolicy(max_attempts=3))
    def write() -> str:
        bodies.append(1)
        raise StorageError(LONG, retryable=False)

    @app.workflow
    def flow(ctx: Context) -> str:
        return write()

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.FAILED
    assert bodies == [1]
    step = history_of(runner, run_id)
    assert step.status == StepStatus.TERMINAL_FAILED and step.error_class == "terminal"
    (attempt,) = step.attempts
    assert attempt.finished_at is not None and attempt.error_class == "terminal"
    assert attempt.error is not None and len(attempt.error) == 500
    assert attempt.error.startswith("StorageError: xxx")


def test_a_retryable_storage_error_ends_the_invocation_and_the_next_one_replays() -> None:
    """GIVEN a step whose first body gets a StorageError(retryable=True) (the ledger is
    throttled)
    WHEN the worker runs it THEN the error ends the invocation (nothing is recorded against
    the step or the run), and after the lease expires the next worker runs the body again
    and the run succeeds.

    Kills steps-f7925520 (the ``raise`` deleted: the step would fail for good) and
    steps-99118248 (``error.retryable`` negated)."""
    app = App()
    bodies: list[int] = []

    @app.step
    def write() -> str:
        bodies.append(1)
        if len(bodies) == 1:
            raise StorageError("throttled", retryable=True)
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return write()

    runner = LocalRunner(app, config=EngineConfig(lease=LEASE))
    run_id = runner.start("flow").run_id
    with pytest.raises(StorageError):
        runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.RUNNING
    assert runner.history(run_id) == []
    runner.advance(LEASE + timedelta(seconds=10))
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert bodies == [1, 1]


def test_a_result_too_large_for_the_ledger_fails_the_step_for_good() -> None:
    """GIVEN a step with a long name whose result is over the 400 KB item limit
    WHEN it returns THEN the step fails for good (no retry could help): its attempt says
    terminal, with the error cut to 500 characters.

    Kills steps-b3927a90 / 86655713 (error_class not set or -> "") and steps-f13c4786 /
    a3cf70f5 (the error not kept, or cut at 501)."""
    app = App()
    bodies: list[int] = []

    @app.workflow
    def flow(ctx: Context) -> str:
        def export() -> str:
            bodies.append(1)
            return "y" * 420_000

        return ctx.step(export, name="export-" + "n" * 500)

    runner = LocalRunner(app, large_values=False)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.FAILED
    assert bodies == [1]
    step = history_of(runner, run_id)
    assert step.status == StepStatus.TERMINAL_FAILED
    (attempt,) = step.attempts
    assert attempt.error_class == "terminal"
    assert attempt.error is not None and len(attempt.error) == 500
    assert attempt.error.startswith("PayloadTooLarge: ")


def test_a_poison_step_closes_its_last_attempt_when_it_fails_for_good() -> None:
    """GIVEN a step whose first attempt fails cleanly (retryable), and whose later attempts
    each checkpoint and then kill the worker, until the takeovers run out
    WHEN the engine gives up on it THEN the step fails for good, the attempt that was
    running when the last worker died is closed as terminal ("worker died"), and the first
    attempt keeps its own (retryable) error.

    Kills steps-1f63ce9c / 8e8137b3 (the open-attempt test negated, or made on the first
    attempt), steps-8dc49706 / a5711c67 (the first attempt closed instead of the last),
    steps-9872c8f6 / 86920568 / 99fb8cba / 1998dabc (its fields not set)."""
    app = App()

    @app.step(retry=RetryPolicy(max_attempts=9, initial_delay=timedelta(seconds=1)))
    def pull() -> str:
        step = current_step()
        if step.attempt == 1:
            raise ConnectionError("first try")
        step.checkpoint({"attempt": step.attempt})
        raise SimulatedCrash("out of memory")

    @app.workflow
    def flow(ctx: Context) -> str:
        return pull()

    runner = LocalRunner(app, config=EngineConfig(lease=LEASE, max_takeovers=3))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    for _ in range(10):
        if runner.get_run(run_id).terminal:
            break
        runner.advance(LEASE + timedelta(seconds=10))
    assert runner.get_run(run_id).status == RunStatus.FAILED
    step = history_of(runner, run_id)
    assert step.status == StepStatus.TERMINAL_FAILED
    first, last = step.attempts[0], step.attempts[-1]
    assert (first.error_class, first.error) == ("retryable", "ConnectionError: first try")
    assert last.n > 1 and last.error_class == "terminal" and last.finished_at is not None
    assert last.error is not None and "worker died" in last.error


def test_an_interrupted_attempt_is_closed_as_a_retryable_failure() -> None:
    """GIVEN an at_most_once_per_attempt step whose first attempt failed cleanly and whose
    second attempt's worker died mid-body
    WHEN the run is taken over THEN attempt 2 is closed (finished at the takeover, error
    class retryable, "was interrupted"), attempt 1 keeps its own error, and attempt 3 runs.

    Kills steps-4ae6e127 (the first attempt closed instead of the last), steps-028ee7ad /
    fe38f89c / dd616bb3 / 5c5cdbcb (its fields not set)."""
    app = App()
    runner: LocalRunner

    @app.step(
        semantics="at_most_once_per_attempt",
        retry=RetryPolicy(max_attempts=5, initial_delay=timedelta(seconds=1), jitter="none"),
    )
    def call() -> str:
        attempt = current_step().attempt
        if attempt == 1:
            raise ConnectionError("first try")
        if attempt == 2:
            raise SimulatedCrash("the worker died mid-body")
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return call()

    runner = LocalRunner(app, config=EngineConfig(lease=LEASE))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.advance(seconds=2)  # the backoff: attempt 2 starts and its worker dies
    runner.advance(LEASE + timedelta(seconds=10))  # the takeover
    runner.advance(seconds=5)  # the interrupted attempt's backoff: attempt 3
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    first, second, third = history_of(runner, run_id).attempts
    assert (first.error_class, first.error) == ("retryable", "ConnectionError: first try")
    assert second.error_class == "retryable"
    assert second.error is not None and "attempt 2 was interrupted" in second.error
    assert second.finished_at is not None and second.finished_at > (first.finished_at or "")
    assert third.error is None and third.finished_at is not None


def test_an_in_process_retry_record_says_why_the_step_retries() -> None:
    """GIVEN a step failing once with a backoff short enough to wait in-process
    WHEN its second attempt starts THEN the ledger shows the first failure meanwhile: a
    RETRYABLE_FAILED record with the error's type, class and summary.

    Kills steps-e8b6e131 (error_class "retryable" -> "")."""
    app = App()
    seen: list[StepRecord] = []
    runner: LocalRunner

    @app.step(retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=1)))
    def call() -> str:
        step = current_step()
        if step.attempt == 1:
            raise ConnectionError("down")
        seen.append(runner.history(step.run_id)[0])
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return call()

    config = EngineConfig(inprocess_wait_threshold=timedelta(seconds=5))
    runner = LocalRunner(app, config=config)
    runner.start("flow")
    runner.run_until_idle()
    (meanwhile,) = seen
    assert meanwhile.status == StepStatus.RETRYABLE_FAILED
    assert (meanwhile.error_type, meanwhile.error_class) == ("ConnectionError", "retryable")
    assert meanwhile.error_summary == "ConnectionError: down"


def test_a_checkpoint_of_state_that_is_not_plain_json_is_a_type_error() -> None:
    """GIVEN a step that checkpoints a set WHEN it runs THEN it fails for good with a
    TypeError saying the state must be plain JSON.

    Kills steps-da3348e6 (the ``raise TypeError`` deleted: an UnboundLocalError would follow,
    which retries)."""
    app = App()

    @app.step(retry=RetryPolicy(max_attempts=3))
    def call() -> str:
        current_step().checkpoint({"seen": {1, 2}})
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return call()

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    step = history_of(runner, run_id)
    assert step.status == StepStatus.TERMINAL_FAILED and step.error_type == "TypeError"
    assert "checkpoint state must be plain JSON" in (step.error_summary or "")


def lease_losing_app(lose: str) -> tuple[App, list[LocalRunner]]:
    """A step that checkpoints after another worker took the run over (``lose="fence"``) or
    after another worker finished the step (``lose="step"``)."""
    app = App()
    box: list[LocalRunner] = []

    @app.step(name="work")
    def work() -> str:
        runner, step = box[0], current_step()
        if lose == "fence":
            runner.memory_ledger.patch_run(step.run_id, {"fence": 99, "lease_owner": "w2"})
        else:
            stored = runner.history(step.run_id)
            assert stored == []
            runner.memory_ledger.write_step(
                StepRecord(
                    run_id=step.run_id,
                    position=step.position,
                    name="work",
                    kind=StepKind.STEP,
                    status=StepStatus.DONE,
                    updated_at=format_time(runner.clock.now()),
                    output='"theirs"',
                )
            )
        step.checkpoint({"page": 1})
        return "ours"

    @app.workflow
    def flow(ctx: Context) -> str:
        return work()

    return app, box


@pytest.mark.parametrize("lose", ["fence", "step"])
def test_a_checkpoint_that_finds_the_step_taken_ends_the_invocation(lose: str) -> None:
    """GIVEN a step whose run was taken over by another worker, or whose result another
    worker already recorded WHEN it checkpoints THEN the lease is lost: the invocation ends
    (no further write), and what the other worker wrote stands.

    Kills steps-c5bcdde2 (the ``raise LeaseLost()`` after a refused write deleted),
    steps-9ae0d898 (``not written``). (steps-3ae712e2 survives this test: see
    test_pins_steps.py, test_a_body_that_catches_every_error_cannot_swallow_a_lost_lease.)"""
    app, box = lease_losing_app(lose)
    runner = LocalRunner(app)
    box.append(runner)
    run_id = runner.start("flow").run_id
    outcomes = runner.run_until_idle()
    assert [o.result for o in outcomes] == ["lease_lost"]
    run = runner.get_run(run_id)
    assert run.status == RunStatus.RUNNING
    if lose == "step":
        (step,) = runner.history(run_id)
        assert (step.status, step.output) == (StepStatus.DONE, '"theirs"')
    else:
        assert runner.history(run_id) == []


@pytest.mark.parametrize(("kind", "value"), [("", "T-1"), ("ticket", 7)])
def test_a_ref_needs_a_kind_and_a_string_value(kind: str, value: object) -> None:
    """GIVEN a step recording a ref without a kind, or with a value that is not a string
    WHEN it runs THEN record_ref raises ValueError (a terminal failure of the step).

    Kills steps-8ba1cb89 (``or`` -> ``and``: one bad half would pass), steps-2caa280c."""
    app = App()

    @app.step
    def call() -> str:
        current_step().record_ref(kind, value)  # type: ignore[arg-type]
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return call()

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    step = history_of(runner, run_id)
    assert step.status == StepStatus.TERMINAL_FAILED and step.error_type == "ValueError"
    assert step.refs == []


def test_the_step_context_is_gone_after_the_step() -> None:
    """GIVEN a workflow that runs a step and then asks for the current step
    WHEN it runs THEN current_step() outside the body raises, as before the step.

    Kills steps-7bcd741f (``reset_step(step_token)`` deleted: the finished step's context
    would leak into the workflow code after it)."""
    app = App()

    @app.step
    def call() -> str:
        return current_step().step_name

    @app.workflow
    def flow(ctx: Context) -> str:
        name = call()
        try:
            current_step()
        except DurableError:
            return f"{name} then none"
        return "leaked"

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    output = runner.get_run(run_id).output or ""
    assert output.endswith('.call then none"')
