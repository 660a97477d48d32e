"""Every duration setting of the public API at its extremes (issue 43).

Each setting, at its smallest and its largest value (``timedelta.max``, a backoff of
1e308, a sleep of zero and of the whole lifetime), gives either a clear ``ValueError`` /
``InvalidInput`` that names the setting, or a correct outcome within bounds: never an
``OverflowError`` or ``OSError`` from a date or a float that grew past what it holds.

The documented limits: a run lives at most ``max_run_lifetime`` (365 days by default), so
no wait may end after it (docs/reference/context.md, docs/operations.md); ``backoff`` is at
least 1.0 (docs/reference/retry.md); ``heartbeat_timeout`` is at least a second and at
most the timeout; ``retention`` is from 2 hours to 3650 days (``retention_days``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from durable import (
    App,
    CallbackTimeout,
    Context,
    EngineConfig,
    RetryableError,
    RetryPolicy,
    RunStatus,
)
from durable.core.model import StepStatus
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit

TINY = timedelta(microseconds=1)
HUGE = timedelta.max
LIFETIME = EngineConfig().max_run_lifetime
NEVER_RAISED = ("OverflowError", "OSError")


@dataclass
class Ending:
    status: RunStatus
    error_type: str | None
    message: str
    result: Any


def _run(
    body: Callable[[Context], Any],
    *,
    advance: timedelta = timedelta(days=2),
    config: EngineConfig | None = None,
) -> tuple[LocalRunner, str, Ending]:
    app = App()

    @app.workflow
    def extreme(ctx: Context) -> Any:
        return body(ctx)

    runner = LocalRunner(app, config=config)
    run_id = runner.start("extreme").run_id
    runner.advance(advance)
    run = runner.get_run(run_id)
    error = run.error
    result = runner.result(run_id) if run.status == RunStatus.SUCCEEDED else None
    ending = Ending(
        run.status, error.type if error else None, error.message if error else "", result
    )
    assert ending.error_type not in NEVER_RAISED, ending.message
    return runner, run_id, ending


def _refused(body: Callable[[Context], Any], field: str) -> None:
    """The call is refused at once: the run fails with a ValueError (or InvalidInput)
    whose message names the setting."""
    _, _, ending = _run(body)
    assert ending.status == RunStatus.FAILED
    assert ending.error_type in ("ValueError", "InvalidInput", "StepFailed"), ending
    assert field in ending.message, ending.message


def _timed_out(wait: Callable[[Context], Any]) -> Callable[[Context], str]:
    def body(ctx: Context) -> str:
        try:
            wait(ctx)
        except CallbackTimeout:
            return "timed out"
        return "answered"

    return body


def _third_time(ctx: Context, **kwargs: Any) -> Any:
    """A stateful condition met on its third check."""

    def count(n: int) -> int:
        return n + 1

    return ctx.wait_for_condition(
        count, initial_state=0, until=lambda n: n >= 3, name="count", **kwargs
    )


def _never(ctx: Context, interval: timedelta, **kwargs: Any) -> Any:
    def never() -> bool:
        return False

    return ctx.wait_for_condition(never, interval, name="never", **kwargs)


# --- ctx.sleep ----------------------------------------------------------------------


def _slept(duration: timedelta) -> Callable[[Context], str]:
    def body(ctx: Context) -> str:
        ctx.sleep(duration)
        return "woke"

    return body


def test_a_sleep_of_zero_returns_at_once() -> None:
    _, _, ending = _run(_slept(timedelta(0)), advance=timedelta(0))
    assert ending.status == RunStatus.SUCCEEDED and ending.result == "woke"


def test_a_sleep_of_the_whole_lifetime_ends_at_its_end() -> None:
    _, _, ending = _run(_slept(LIFETIME), advance=LIFETIME + timedelta(days=1))
    assert ending.status == RunStatus.SUCCEEDED and ending.result == "woke"


def test_a_sleep_longer_than_any_date_is_refused() -> None:
    _refused(lambda ctx: ctx.sleep(HUGE), "sleep(duration)")


# --- ctx.wait_for_condition -----------------------------------------------------------


def test_the_smallest_interval_polls_to_the_end() -> None:
    _, _, ending = _run(lambda ctx: _third_time(ctx, interval=TINY, timeout=timedelta(hours=1)))
    assert ending.status == RunStatus.SUCCEEDED and ending.result == 3


def test_the_largest_interval_is_refused_naming_it() -> None:
    _refused(lambda ctx: _never(ctx, HUGE), "interval")


def test_an_interval_of_the_whole_lifetime_polls_once_then_times_out() -> None:
    _, _, ending = _run(_timed_out(lambda ctx: _never(ctx, LIFETIME, timeout=timedelta(hours=1))))
    assert ending.result == "timed out"


def test_the_smallest_timeout_times_out() -> None:
    _, _, ending = _run(_timed_out(lambda ctx: _never(ctx, timedelta(seconds=1), timeout=TINY)))
    assert ending.result == "timed out"


def test_the_largest_timeout_is_refused_naming_it() -> None:
    _refused(lambda ctx: _never(ctx, timedelta(seconds=1), timeout=HUGE), "timeout")


@pytest.mark.parametrize("backoff", [1.0, 1000.0, 1e308])
def test_any_finite_backoff_ends_in_a_timeout(backoff: float) -> None:
    _, _, ending = _run(
        _timed_out(
            lambda ctx: _never(
                ctx, timedelta(seconds=1), timeout=timedelta(hours=1), backoff=backoff
            )
        )
    )
    assert ending.result == "timed out"


@pytest.mark.parametrize("backoff", [float("inf"), float("nan"), 0.999])
def test_a_backoff_out_of_range_is_refused_naming_it(backoff: float) -> None:
    _refused(lambda ctx: _never(ctx, timedelta(seconds=1), backoff=backoff), "backoff")


def test_the_smallest_max_interval_polls_to_the_end() -> None:
    _, _, ending = _run(
        lambda ctx: _third_time(
            ctx, interval=timedelta(seconds=1), timeout=timedelta(hours=1), max_interval=TINY
        )
    )
    assert ending.status == RunStatus.SUCCEEDED and ending.result == 3


def test_the_largest_max_interval_is_capped_by_the_timeout() -> None:
    runner, run_id, ending = _run(
        _timed_out(
            lambda ctx: _never(
                ctx,
                timedelta(seconds=1),
                timeout=timedelta(days=1),
                backoff=1e308,
                max_interval=HUGE,
            )
        )
    )
    assert ending.result == "timed out"
    (rec,) = runner.history(run_id)
    assert rec.status == StepStatus.TIMED_OUT and rec.attempt == 2  # then the timeout


def test_the_largest_max_interval_without_a_timeout_waits_within_the_lifetime() -> None:
    """No timeout: the next check is at most a lifetime away (a date), not past any date."""
    runner, run_id, ending = _run(
        lambda ctx: _never(
            ctx, timedelta(days=1), backoff=1e308, max_interval=HUGE, max_attempts=3
        ),
        advance=timedelta(days=3),
    )
    assert ending.status == RunStatus.WAITING
    (rec,) = runner.history(run_id)
    assert rec.wake_at is not None and rec.wake_at <= "2027-01-03T00:00:00.000Z"


@pytest.mark.parametrize("max_interval", [timedelta(0), -TINY])
def test_a_max_interval_that_is_not_positive_is_refused_naming_it(
    max_interval: timedelta,
) -> None:
    _refused(
        lambda ctx: _never(ctx, timedelta(seconds=1), max_interval=max_interval),
        "max_interval",
    )


# --- callbacks and signals ----------------------------------------------------------


def test_a_callback_with_the_smallest_timeout_times_out() -> None:
    _, _, ending = _run(_timed_out(lambda ctx: ctx.create_callback("a", timeout=TINY).result()))
    assert ending.result == "timed out"


def test_a_callback_with_the_largest_timeout_is_refused_naming_it() -> None:
    _refused(lambda ctx: ctx.create_callback("a", timeout=HUGE).result(), "timeout")


def test_a_heartbeat_timeout_at_its_minimum_times_the_wait_out() -> None:
    _, _, ending = _run(
        _timed_out(
            lambda ctx: ctx.create_callback(
                "a", timeout=timedelta(hours=1), heartbeat_timeout=timedelta(seconds=1)
            ).result()
        )
    )
    assert ending.result == "timed out"


@pytest.mark.parametrize("heartbeat", [timedelta(milliseconds=999), HUGE])
def test_a_heartbeat_timeout_out_of_range_is_refused_naming_it(heartbeat: timedelta) -> None:
    _refused(
        lambda ctx: ctx.create_callback("a", heartbeat_timeout=heartbeat).result(),
        "heartbeat_timeout",
    )


def test_a_signal_wait_with_the_smallest_timeout_times_out() -> None:
    _, _, ending = _run(_timed_out(lambda ctx: ctx.wait_for_signal("go", timeout=TINY)))
    assert ending.result == "timed out"


def test_a_signal_wait_with_the_largest_timeout_is_refused_naming_it() -> None:
    _refused(lambda ctx: ctx.wait_for_signal("go", timeout=HUGE), "timeout")


# --- steps and retry policies -------------------------------------------------------


def test_a_step_with_the_largest_timeout_is_refused_naming_it() -> None:
    def ok() -> int:
        return 1

    _refused(lambda ctx: ctx.step(ok, name="ok", timeout=HUGE), "timeout")


def test_retry_delays_of_zero_retry_at_once() -> None:
    calls: list[int] = []

    def flaky() -> int:
        calls.append(1)
        if len(calls) < 3:
            raise RetryableError("again")
        return len(calls)

    policy = RetryPolicy(max_attempts=3, initial_delay=timedelta(0), max_delay=timedelta(0))
    _, _, ending = _run(lambda ctx: ctx.step(flaky, name="flaky", retry=policy))
    assert ending.status == RunStatus.SUCCEEDED and ending.result == 3


def test_the_largest_retry_delays_wait_within_the_run_lifetime() -> None:
    """``initial_delay`` and ``max_delay`` of ``timedelta.max``: the retry waits at most a
    lifetime (a date), and the run that wakes past its lifetime ends as such runs do."""

    def fails() -> int:
        raise RetryableError("again")

    policy = RetryPolicy(max_attempts=3, initial_delay=HUGE, max_delay=HUGE, jitter="none")
    runner, run_id, ending = _run(lambda ctx: ctx.step(fails, name="fails", retry=policy))
    assert ending.status == RunStatus.WAITING
    (rec,) = runner.history(run_id)
    assert rec.wake_at is not None and rec.wake_at <= "2027-01-01T00:00:00.000Z"
    runner.advance(LIFETIME * 3)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert run.error.type not in NEVER_RAISED


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"backoff": float("inf")}, "backoff"),
        ({"backoff": float("nan")}, "backoff"),
        ({"backoff": 0.5}, "backoff"),
        ({"initial_delay": -TINY}, "initial_delay"),
        ({"max_delay": -TINY}, "max_delay"),
        ({"max_attempts": 0}, "max_attempts"),
    ],
)
def test_a_retry_policy_out_of_range_is_refused_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        RetryPolicy(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_delay": HUGE},
        {"max_delay": HUGE},
        {"initial_delay": HUGE, "max_delay": HUGE, "backoff": 1e308},
        {"initial_delay": TINY, "backoff": 1.0},
        {"max_attempts": 10**9, "backoff": 1e308},
    ],
)
def test_every_retry_delay_stays_within_max_delay(kwargs: dict[str, Any]) -> None:
    policy = RetryPolicy(jitter="none", **{"max_attempts": 10**6, **kwargs})
    for attempt in (1, 2, 100, 10**5):
        delay = policy.next_delay(attempt, RetryableError("again"))
        assert delay is not None and timedelta(0) <= delay <= policy.max_delay
    asked = policy.next_delay(1, RetryableError("later", retry_after=HUGE))
    assert asked == policy.max_delay
    assert policy.next_delay(1, RetryableError("now", retry_after=timedelta.min)) == timedelta(0)


# --- engine settings ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"retention": HUGE}, "retention"),
        ({"retention": timedelta(hours=1)}, "retention"),
        ({"max_run_lifetime": HUGE}, "max_run_lifetime"),
        ({"max_run_lifetime": timedelta(0)}, "max_run_lifetime"),
    ],
)
def test_engine_durations_out_of_range_are_refused_naming_them(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        EngineConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"retention": timedelta(hours=2)},
        {"retention": timedelta(days=3650)},
        {"max_run_lifetime": timedelta(days=3650), "retention": timedelta(days=3650)},
    ],
)
def test_engine_durations_at_their_limits_run_and_finish(kwargs: dict[str, Any]) -> None:
    config = EngineConfig(inprocess_wait_threshold=timedelta(0), **kwargs)

    def body(ctx: Context) -> str:
        ctx.sleep(timedelta(minutes=1))
        return "done"

    runner, run_id, ending = _run(body, config=config)
    assert ending.status == RunStatus.SUCCEEDED and ending.result == "done"
    assert runner.get_run(run_id).purge_at is not None
