"""Pins on a step losing a race to another writer, and on a step woken early (steps.py).

First writer wins (ports.Ledger.write_step): whichever of its writes a step loses (the
RUNNING mark, its result, a retry or backoff record, its terminal failure), it adopts the
record that won. The race is staged by a ledger whose ``write_step`` lets another worker's
final record land just before the step's own write. Each test names the mutants it kills
(ids of ``python -m tests.mutation --module durable/engine/steps.py --list``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from durable import App, Context, EngineConfig, RetryPolicy, RunStatus, StepFailed, StepStatus
from durable.core.model import StepRecord
from durable.testing import LocalRunner, SimulatedCrash

LEASE = timedelta(seconds=60)
THEIRS = '"theirs"'


def lose_race(
    runner: LocalRunner,
    monkeypatch: pytest.MonkeyPatch,
    when: StepStatus,
    winner: StepStatus = StepStatus.DONE,
) -> list[StepStatus]:
    """Before the step's first write of status ``when``, another worker's ``winner`` record
    lands at the same position. Returns the statuses the step tried to write."""
    ledger = runner.memory_ledger
    real = ledger.write_step
    tried: list[StepStatus] = []

    def write_step(step: StepRecord, guard: Any = None) -> StepRecord:
        if step.status == when and when not in tried:
            other = replace(step, status=winner, attempts=[], detail=None, wake_at=None)
            if winner == StepStatus.DONE:
                other = replace(other, output=THEIRS)
            else:
                other = replace(other, error_type="Theirs", error_summary="theirs failed")
            real(other)
        tried.append(step.status)
        return real(step, guard)

    monkeypatch.setattr(ledger, "write_step", write_step)
    return tried


def racing_app(bodies: list[int], fail: BaseException | None, **options: Any) -> App:
    app = App()

    @app.step(name="work", **options)
    def work() -> str:
        bodies.append(1)
        if fail is not None:
            raise fail
        return "ours"

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            return work()
        except StepFailed as failed:
            return f"failed: {failed.error_message}"

    return app


SLOW_RETRY = RetryPolicy(max_attempts=3, initial_delay=timedelta(minutes=10), jitter="none")
FAST_RETRY = RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=1), jitter="none")


def finish(runner: LocalRunner) -> str | None:
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED, run.error
    return run.output


def test_losing_the_running_mark_adopts_the_winner_without_running_the_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN an at_most_once_per_attempt step WHEN another worker's result lands before its
    RUNNING mark THEN the body never runs and the step returns the winner's result.

    Kills steps-4f92b0ce (that adopt's ``return`` -> None) and steps-c948e912 (adopt)."""
    bodies: list[int] = []
    runner = LocalRunner(racing_app(bodies, None, semantics="at_most_once_per_attempt"))
    lose_race(runner, monkeypatch, when=StepStatus.RUNNING)
    assert finish(runner) == THEIRS
    assert bodies == []


@pytest.mark.parametrize("winner", [StepStatus.DONE, StepStatus.TERMINAL_FAILED])
def test_losing_the_result_write_adopts_the_winners_record(
    monkeypatch: pytest.MonkeyPatch, winner: StepStatus
) -> None:
    """GIVEN a step whose body returned "ours" WHEN another worker's record (a result, or a
    terminal failure) landed first THEN the step's outcome is the winner's: its result, or
    StepFailed with its error.

    Kills steps-fd819d32 (return None), steps-99838d44 / b737ae6d / 53dc1d64 / 65ed9b57
    (the "did our write land" test)."""
    bodies: list[int] = []
    runner = LocalRunner(racing_app(bodies, None))
    lose_race(runner, monkeypatch, when=StepStatus.DONE, winner=winner)
    expected = THEIRS if winner == StepStatus.DONE else '"failed: theirs failed"'
    assert finish(runner) == expected
    assert bodies == [1]


def test_winning_the_result_write_returns_the_bodys_value() -> None:
    """GIVEN a step whose body returned "ours" and no other writer WHEN it records it THEN
    the workflow gets "ours" and the ledger holds it (the other side of the race test)."""
    runner = LocalRunner(racing_app([], None))
    assert finish(runner) == '"ours"'


def test_losing_an_in_process_retry_record_adopts_the_winner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN a step that failed and will retry in-process (a 1 s backoff, allowed here)
    WHEN another worker's result lands before its RETRYABLE_FAILED record THEN it returns
    the winner's result, without sleeping or running the body again.

    Kills steps-eab51228 (that adopt -> None) and steps-f0c3b639 (``return outcome``)."""
    bodies: list[int] = []
    config = EngineConfig(inprocess_wait_threshold=timedelta(seconds=5))
    runner = LocalRunner(
        racing_app(bodies, ConnectionError("down"), retry=FAST_RETRY), config=config
    )
    lose_race(runner, monkeypatch, when=StepStatus.RETRYABLE_FAILED)
    started = runner.clock.now()
    assert finish(runner) == THEIRS
    assert bodies == [1]
    assert runner.clock.now() == started


def test_an_in_process_retry_waits_its_backoff_on_the_clock() -> None:
    """GIVEN a step failing once with a 1 s backoff served in-process WHEN it retries THEN
    the engine's clock moved by that second before the second attempt.

    Kills steps-45ab6603 (``self.x.clock.sleep(...)`` deleted: the retry would run at once)."""
    app = App()
    starts: list[datetime] = []
    runner: LocalRunner

    @app.step(retry=FAST_RETRY, name="work")
    def work() -> str:
        starts.append(runner.clock.now())
        if len(starts) == 1:
            raise ConnectionError("down")
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return work()

    config = EngineConfig(inprocess_wait_threshold=timedelta(seconds=5))
    runner = LocalRunner(app, config=config)
    assert finish(runner) == '"ok"'
    assert len(starts) == 2
    assert starts[1] - starts[0] == timedelta(seconds=1)


def test_losing_a_backoff_record_adopts_the_winner_instead_of_suspending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN a step that failed and must wait 10 minutes (the run would suspend)
    WHEN another worker's result lands before its WAITING record THEN it returns the
    winner's result at once, and the run finishes.

    Kills steps-9adc0bb1 (that adopt -> None) and steps-f0c3b639."""
    bodies: list[int] = []
    runner = LocalRunner(racing_app(bodies, ConnectionError("down"), retry=SLOW_RETRY))
    lose_race(runner, monkeypatch, when=StepStatus.WAITING)
    assert finish(runner) == THEIRS
    assert bodies == [1]


def test_losing_a_terminal_failure_to_a_result_adopts_the_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN a step failing for good (ValueError is terminal) WHEN another worker's result
    lands before its TERMINAL_FAILED record THEN the step returns that result, no
    StepFailed.

    Kills steps-7a4a90f1 (``stored.status == DONE`` negated), steps-9aec34d1 (return None)."""
    bodies: list[int] = []
    runner = LocalRunner(racing_app(bodies, ValueError("bad input")))
    lose_race(runner, monkeypatch, when=StepStatus.TERMINAL_FAILED)
    assert finish(runner) == THEIRS


def test_an_interrupted_attempt_whose_backoff_record_loses_adopts_the_winner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN an at_most_once_per_attempt step whose worker died mid-body (its RUNNING mark
    stays) WHEN the run is taken over, the interrupted attempt counts as failed, and another
    worker's result lands before the backoff record THEN the step returns that result and
    the body never runs again.

    Kills steps-a0588340 (``return outcome`` after the interrupted attempt's failure)."""
    app = App()
    bodies: list[int] = []

    @app.step(name="work", semantics="at_most_once_per_attempt", retry=SLOW_RETRY)
    def work() -> str:
        bodies.append(1)
        raise SimulatedCrash("the worker died mid-body")

    @app.workflow
    def flow(ctx: Context) -> str:
        return work()

    runner = LocalRunner(app, config=EngineConfig(lease=LEASE))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert bodies == [1]
    lose_race(runner, monkeypatch, when=StepStatus.WAITING)
    runner.advance(LEASE + timedelta(seconds=10))
    run = runner.get_run(run_id)
    assert (run.status, run.output) == (RunStatus.SUCCEEDED, THEIRS)
    assert bodies == [1]


def test_a_step_woken_before_its_backoff_ends_waits_again() -> None:
    """GIVEN a step waiting out a 10-minute retry backoff
    WHEN the run is woken after 1 minute (its timer fired early) THEN the body does not
    run; the run waits again until the backoff's end, under a re-armed timer.

    Kills steps-d6527276 (``prev.status == WAITING`` negated), steps-bd9ec5bd (the
    ``raise self.x.suspend(...)`` deleted: the body would run early), steps-43f5a8ec
    (``replayed=True`` -> False: the early timer would not be re-armed under a new name)."""
    bodies: list[int] = []
    runner = LocalRunner(racing_app(bodies, ConnectionError("down"), retry=SLOW_RETRY))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    step = runner.history(run_id)[0]
    assert step.status == StepStatus.WAITING and step.wake_at is not None
    runner.timers.armed.clear()
    runner.advance(minutes=1)
    outcome = runner.engine.resume(run_id, reason="timer")
    assert outcome.result == "suspended"
    assert bodies == [1]
    run = runner.get_run(run_id)
    assert (run.status, run.due_at) == (RunStatus.WAITING, step.wake_at)
    assert [name for name in runner.timers.armed if "-r" in name[len(run_id) :]]
