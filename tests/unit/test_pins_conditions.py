"""Pins on polled conditions (durable/engine/waits.py, wait_for_condition): each test names the
mutants it kills (ids of ``python -m tests.mutation --module durable/engine/waits.py --list``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from durable import (
    App,
    CallbackTimeout,
    Context,
    EngineConfig,
    RetryPolicy,
    RunStatus,
    StepFailed,
    StepStatus,
)
from durable.core.model import format_time
from durable.errors import TerminalError
from durable.testing import LocalRunner

MINUTE = timedelta(minutes=1)


class Poller:
    """A workflow polling ``answers`` (values returned, or exceptions raised, in turn; the
    last one repeats), recording when each poll ran. The workflow returns the value, or
    "timed out: ..." / "failed: <type>" when the condition ends otherwise."""

    def __init__(
        self,
        answers: list[Any],
        *,
        config: EngineConfig | None = None,
        then: Callable[[Context], Any] | None = None,
        **options: Any,
    ) -> None:
        self.answers = answers
        self.polls: list[datetime] = []
        self.leases: list[str | None] = []  # the run's lease_until at each poll
        self.failure: StepFailed | None = None
        app = App()

        def ready() -> Any:
            self.polls.append(self.runner.clock.now())
            self.leases.append(self.runner.get_run(self.run_id).lease_until)
            answer = self.answers[min(len(self.polls), len(self.answers)) - 1]
            if isinstance(answer, BaseException):
                raise answer
            return answer

        @app.workflow
        def flow(ctx: Context) -> Any:
            try:
                value = ctx.wait_for_condition(ready, **options)
            except CallbackTimeout as timeout:
                value = f"timed out: {timeout}"
            except StepFailed as failed:
                self.failure = failed
                value = f"failed: {failed.error_type}"
            if then is not None:
                then(ctx)
            return value

        self.runner = LocalRunner(app, config=config)
        self.started = self.runner.clock.now()
        self.run_id = self.runner.start("flow").run_id
        self.runner.run_until_idle()

    def gaps(self) -> list[timedelta]:
        return [b - a for a, b in zip(self.polls, self.polls[1:], strict=False)]

    def output(self) -> Any:
        return self.runner.get_run(self.run_id).output

    def record(self) -> Any:
        return self.runner.history(self.run_id)[0]

    def advance(self, times: int, by: timedelta = MINUTE) -> None:
        for _ in range(times):
            self.runner.advance(by)


# --- arguments ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"interval": timedelta(0)}, "interval must be a positive"),
        ({"interval": 60}, "interval must be a positive"),
        ({"interval": MINUTE, "timeout": timedelta(0)}, "timeout must be a positive"),
        ({"interval": MINUTE, "backoff": 0.99}, "backoff must be >= 1.0"),
    ],
)
def test_a_condition_refuses_arguments_out_of_range(options: dict[str, Any], message: str) -> None:
    """GIVEN a zero or non-timedelta interval, a zero timeout, a backoff under 1
    WHEN the workflow waits on the condition THEN the run fails with that ValueError.

    Kills waits-4dad4a66 / aafd19c2 / 0445cfe6 (the interval check), waits-521ecc86 (the
    timeout check deleted), waits-a803d0ab (the backoff's raise deleted)."""
    poller = Poller([True], **options)
    run = poller.runner.get_run(poller.run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert message in run.error.message
    assert poller.polls == []


def test_a_backoff_of_exactly_one_polls_at_a_fixed_interval() -> None:
    """GIVEN backoff=1.0 (the lowest allowed) WHEN the check holds on the third poll THEN the
    polls are a minute apart.

    Kills waits-fbc354dc (``backoff < 1.0`` -> ``<=``: 1.0 would be refused)."""
    poller = Poller([None, None, "ok"], interval=MINUTE, backoff=1.0)
    poller.advance(2)
    assert poller.output() == '"ok"'
    assert poller.gaps() == [MINUTE, MINUTE]


# --- polling ------------------------------------------------------------------------------


def test_polls_back_off_up_to_ten_times_the_interval_by_default() -> None:
    """GIVEN interval 1 minute, backoff 2, no max_interval WHEN the check never holds THEN the
    gaps between polls are 1, 2, 4, 8, then 10 minutes (the default cap), again 10.

    Kills waits-153f0814 (``interval * 10`` -> ``* 11``)."""
    poller = Poller([None], interval=MINUTE, backoff=2.0)
    poller.advance(60)
    assert poller.gaps()[:6] == [MINUTE * n for n in (1, 2, 4, 8, 10, 10)]


def test_a_retryable_error_counts_as_not_yet_and_is_shown_until_the_next_poll() -> None:
    """GIVEN a check that first raises a long ConnectionError, then returns None, then holds
    WHEN it is polled THEN the error only delays it: the waiting record shows the error (cut
    to 1000 characters) after the first poll and nothing after the second; the condition
    then returns the value, recorded DONE.

    Kills waits-dedc19d0 (``error is not None and classify(...)`` -> ``or``: any error would
    be terminal), waits-f74a5a3e / 8678fd87 / efc298f0 (the waiting record's error summary),
    waits-5e5a68ea (``base.status = DONE`` deleted)."""
    poller = Poller([ConnectionError("x" * 1200), None, "ok"], interval=MINUTE, backoff=1.0)
    waiting = poller.record()
    assert waiting.status == StepStatus.WAITING
    assert waiting.error_summary is not None and len(waiting.error_summary) == 1000
    assert waiting.error_summary.startswith("ConnectionError: xxx")
    poller.advance(1)
    assert poller.record().error_summary is None
    poller.advance(1)
    assert poller.output() == '"ok"'
    assert poller.record().status == StepStatus.DONE


@pytest.mark.parametrize(
    "error", [PermissionError("p" * 1200), TerminalError("t" * 1200)], ids=["builtin", "terminal"]
)
def test_a_terminal_error_fails_the_condition_with_a_full_record(error: Exception) -> None:
    """GIVEN a check raising a terminal error (a PermissionError, or TerminalError itself)
    WHEN it is polled THEN the condition fails for good: StepFailed carries the error's type,
    and the record is TERMINAL_FAILED, class terminal, with the summary cut to 1000.

    Kills waits-68217a7b / 31ec3ec4 / 6ae7420d / 8a9a6c2d (the failure record's fields),
    waits-62803c91 (``stored.error_type or "Error"`` -> ``and``), waits-ffb4581f (_poll's
    ``return None, e`` for a TerminalError -> None)."""
    poller = Poller([error], interval=MINUTE)
    name = type(error).__name__
    assert poller.output() == f'"failed: {name}"'
    record = poller.record()
    assert record.status == StepStatus.TERMINAL_FAILED
    assert (record.error_type, record.error_class) == (name, "terminal")
    assert record.error_summary is not None and len(record.error_summary) == 1000


# --- timeouts -----------------------------------------------------------------------------


def test_the_timeout_counts_from_the_first_poll_and_caps_the_last_wait() -> None:
    """GIVEN polls every 10 minutes and a 15-minute timeout WHEN the check never holds THEN
    it is polled at 0 and 10 minutes, the last wait ends at the deadline (not at 20), and the
    condition times out there: TIMED_OUT, updated at 15 minutes, naming the condition.

    Kills waits-8162e13d (``now + timeout`` -> ``-``: it would time out before polling),
    waits-689b6d71 (``wake = min(wake, expires)`` deleted), waits-53420625 (the TIMED_OUT
    record's updated_at not set), waits-ad75fc0b ("condition" -> "" in the message),
    waits-3c5ee360."""
    poller = Poller([None], interval=MINUTE * 10, backoff=1.0, timeout=MINUTE * 15)
    assert poller.record().expires_at == format_time(poller.started + MINUTE * 15)
    poller.advance(3, by=MINUTE * 5)
    assert poller.gaps() == [MINUTE * 10]
    output = poller.output() or ""
    assert output.startswith('"timed out: condition ')
    record = poller.record()
    assert record.status == StepStatus.TIMED_OUT
    assert record.updated_at == format_time(poller.started + MINUTE * 15)


IN_PROCESS = EngineConfig(
    inprocess_wait_threshold=timedelta(seconds=5),
    lease=timedelta(seconds=2),
    clock_skew=timedelta(seconds=1),
    default_step_budget=timedelta(seconds=1),
    safety_margin=timedelta(milliseconds=100),
)
HALF_SECOND = timedelta(milliseconds=500)


def test_polls_served_in_process_sleep_between_them_and_renew_the_lease() -> None:
    """GIVEN a condition polled every 500 ms in-process (the invocation may wait up to 5 s),
    holding on the seventh poll, in a run whose lease is 2 s
    WHEN it runs THEN the polls are 500 ms apart on the engine's clock, and at every poll the
    run's lease still runs past it (renewed while polling, 3 s after the first).

    Kills waits-5b19ff34 (the in-process ``sleep`` deleted), waits-65cb7f73 (``max(0.0, ...)``
    -> ``max(1.0, ...)``), waits-48acca1d (``wake - now`` -> ``+``), waits-40936194 (the
    lease not renewed while polling)."""
    poller = Poller([None] * 6 + ["ok"], config=IN_PROCESS, interval=HALF_SECOND, backoff=1.0)
    assert poller.output() == '"ok"'
    assert poller.gaps() == [HALF_SECOND] * 6
    assert len(poller.leases) == 7
    for at, lease_until in zip(poller.polls, poller.leases, strict=True):
        assert lease_until is not None and lease_until > format_time(at)


def test_an_in_process_condition_times_out_on_time() -> None:
    """GIVEN a condition polled every 500 ms in-process with a 2 s timeout, never holding
    WHEN it runs THEN it is polled 4 times (0 to 1.5 s) and times out at 2 s.

    Kills waits-a42772a3 (``now`` not read again each loop: the deadline would never be
    seen, and the polls would spin without the clock moving)."""
    poller = Poller(
        [None], config=IN_PROCESS, interval=HALF_SECOND, backoff=1.0, timeout=timedelta(seconds=2)
    )
    assert (poller.output() or "").startswith('"timed out')
    assert len(poller.polls) == 4
    assert poller.record().updated_at == format_time(poller.started + timedelta(seconds=2))


# --- replays ------------------------------------------------------------------------------


def sleep_an_hour(ctx: Context) -> None:
    ctx.sleep(timedelta(hours=1))


def test_a_held_condition_replays_its_recorded_value() -> None:
    """GIVEN a condition that held (value recorded), and the workflow then sleeping an hour
    WHEN the run wakes and replays THEN the condition returns the recorded value without
    polling again.

    Kills waits-62f78352 (the replay's ``return _settled(...)`` -> None) and waits-bed8479e."""
    poller = Poller(["ok", "changed"], interval=MINUTE, then=sleep_an_hour)
    poller.advance(1, by=timedelta(hours=1))
    assert poller.output() == '"ok"'
    assert len(poller.polls) == 1


def test_a_failed_condition_replays_its_failure() -> None:
    """GIVEN a condition that failed for good (caught by the workflow), and the workflow then
    sleeping an hour WHEN the run wakes and replays THEN the condition raises the same
    StepFailed again, without polling.

    Kills waits-0411c13a / 0debe537 / 81ea9462 / cd4f3d2f (the replay of a TERMINAL_FAILED
    condition)."""
    poller = Poller([PermissionError("no access"), "ok"], interval=MINUTE, then=sleep_an_hour)
    poller.advance(1, by=timedelta(hours=1))
    assert poller.output() == '"failed: PermissionError"'
    assert poller.failure is not None
    assert poller.failure.error_message == "PermissionError: no access"
    assert len(poller.polls) == 1


def test_a_condition_woken_early_waits_again_without_polling() -> None:
    """GIVEN a condition waiting 10 minutes for its next poll WHEN its timer fires after 1
    minute THEN it does not poll; the run waits again under a re-armed timer.

    Kills waits-92175ffa (the ``raise x.suspend(...)`` deleted) and waits-63c46fb7
    (``replayed=True`` -> False)."""
    poller = Poller([None], interval=MINUTE * 10)
    runner = poller.runner
    runner.timers.armed.clear()
    runner.advance(MINUTE)
    assert runner.engine.resume(poller.run_id, reason="timer").result == "suspended"
    assert len(poller.polls) == 1
    assert [n for n in runner.timers.armed if n.startswith(f"{poller.run_id}-0001-r")]


def test_a_decorated_step_after_a_condition_is_still_durable() -> None:
    """GIVEN a workflow that polls a condition and then calls a decorated step
    WHEN it runs THEN the step is recorded (the poll restored the workflow context; inside a
    check, a decorated step is a plain call).

    Kills waits-e2203611 (``reset_context(token)`` deleted from _poll)."""
    app = App()

    @app.step
    def after() -> str:
        return "after"

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.wait_for_condition(lambda: True, interval=MINUTE, name="ready")
        return after()

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).output == '"after"'
    assert [s.name for s in runner.history(run_id)] == ["ready", after.name]


def test_a_check_that_said_not_yet_has_no_failed_checks_against_it() -> None:
    """GIVEN a condition (polled every minute, each poll its own invocation) under a retry
    policy of 2 attempts, whose check says "not yet" once, then raises once, then holds
    WHEN it runs THEN the error is the first failed check in a row, so the policy's budget
    of 2 allows another poll, which holds: the wait returns its value.

    Kills waits-f8eec02a (a record without an error count read as 1 error instead of 0: the
    one error would be the second and fail the wait) and waits-4a4eb34e ("not yet" sets
    the count to 1 instead of 0, alike)."""
    config = EngineConfig(
        default_retry=RetryPolicy(max_attempts=2, initial_delay=MINUTE, jitter="none")
    )
    poller = Poller(
        [None, ConnectionError("down"), "ok"], config=config, interval=MINUTE, backoff=1.0
    )
    poller.advance(3)
    assert len(poller.polls) == 3
    assert poller.output() == '"ok"'
