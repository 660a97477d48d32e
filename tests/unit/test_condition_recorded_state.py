"""A stateful condition decides on the recorded form of its state (issue 43, hole 4).

``until`` is workflow code that decides on the recorded state alone, and each check is
given the state the previous one left. Both see the value the record round-trips to (the
check's return annotation encodes it and decodes it back), whether the interval between
two checks was served in the worker's memory or the run parked and a new invocation read
the state from the ledger. Otherwise one workflow could succeed with a short interval and
fail with a long one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, EngineConfig, RunStatus
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit

# Served in the worker (an interval under the in-process threshold) or parked (above it).
IN_PROCESS = timedelta(seconds=1)
PARKED = timedelta(seconds=10)


def _runner(app: App) -> LocalRunner:
    # The engine's default threshold: a 1 s interval waits in memory, a 10 s one parks.
    return LocalRunner(app, config=EngineConfig(inprocess_wait_threshold=timedelta(seconds=5)))


def _outcome(app: App, interval: timedelta) -> tuple[str, Any, int]:
    runner = _runner(app)
    run_id = runner.start("poll", interval.total_seconds()).run_id
    runner.advance(minutes=10)
    run = runner.get_run(run_id)
    parks = sum(1 for o in runner.outcomes if o.result == "suspended")
    if run.status == RunStatus.SUCCEEDED:
        return run.status.value, runner.result(run_id), parks
    assert run.error is not None
    return run.status.value, run.error.message, parks


def _counting_app(seen: list[dict[Any, Any]], until: Callable[[dict[Any, Any]], bool]) -> App:
    """A check whose value is a dict keyed by int, recorded as JSON (whose keys are text)
    by an annotation that keeps whatever keys the JSON has."""
    app = App()

    def count(state: dict[Any, Any]) -> dict[Any, Any]:
        seen.append(dict(state))
        return {1: len(seen)}

    @app.workflow
    def poll(ctx: Context, seconds: float) -> Any:
        start: dict[Any, Any] = {}
        return ctx.wait_for_condition(
            count,
            timedelta(seconds=seconds),
            timedelta(minutes=5),
            initial_state=start,
            until=until,
            backoff=1.0,
            name="count",
        )

    return app


def test_until_sees_the_recorded_state_whether_the_run_parked_or_not() -> None:
    """The check returns ``{1: n}``; its record is ``{"1": n}``, so ``until``'s
    ``state[1]`` cannot find the key in the recorded state. It fails the same way with a
    1 s interval (waited in memory) as with 10 s (the run parks between checks)."""
    seen_memory: list[dict[Any, Any]] = []
    seen_parked: list[dict[Any, Any]] = []
    in_memory = _outcome(_counting_app(seen_memory, lambda s: s[1] >= 3), IN_PROCESS)
    parked = _outcome(_counting_app(seen_parked, lambda s: s[1] >= 3), PARKED)
    assert in_memory[2] == 0 and parked[2] == 0  # the first check already decides
    assert in_memory[:2] == parked[:2]
    assert in_memory[0] == RunStatus.FAILED.value
    assert "KeyError" in in_memory[1]
    assert seen_memory == seen_parked == [{}]


def test_the_next_check_gets_the_recorded_state_in_memory_as_after_a_park() -> None:
    """``until`` tolerant of either key: the checks run on, each given the previous
    state as the ledger holds it (text keys), in memory as after a park."""
    for interval in (IN_PROCESS, PARKED):
        seen: list[dict[Any, Any]] = []
        app = _counting_app(seen, lambda s: s.get("1", 0) >= 3)
        status, result, parks = _outcome(app, interval)
        assert status == RunStatus.SUCCEEDED.value, result
        assert result == {"1": 3}
        assert seen == [{}, {"1": 1}, {"1": 2}]
        assert parks == (0 if interval == IN_PROCESS else 2)


def test_an_int_keyed_annotation_gives_int_keys_everywhere() -> None:
    """Annotated ``dict[int, int]``, the record decodes back to int keys: ``until`` looks
    up an int key and the wait is met, in memory as after a park, with one result."""
    results = []
    for interval in (IN_PROCESS, PARKED):
        seen: list[dict[int, int]] = []
        app = App()

        def count(state: dict[int, int], seen: list[dict[int, int]] = seen) -> dict[int, int]:
            seen.append(dict(state))
            return {1: len(seen)}

        @app.workflow
        def poll(ctx: Context, seconds: float) -> dict[int, int]:
            state: dict[int, int] = ctx.wait_for_condition(
                count,
                timedelta(seconds=seconds),
                timedelta(minutes=5),
                initial_state={},
                until=lambda state: state[1] >= 3,
                backoff=1.0,
                name="count",
            )
            assert all(isinstance(k, int) for k in state)
            return state

        results.append(_outcome(app, interval)[:2])
        assert seen == [{}, {1: 1}, {1: 2}]
    assert results[0] == results[1] == (RunStatus.SUCCEEDED.value, {1: 3})


def test_a_state_its_annotation_rejects_fails_the_wait_recorded_in_memory_too() -> None:
    """A check whose state its annotation cannot encode and decode back fails the wait,
    recorded (``StepFailed``), whether the next check would have waited in memory or
    parked: the same ending, and the check is not polled again."""
    for interval in (IN_PROCESS, PARKED):
        calls: list[int] = []
        app = App()

        def bad(state: int, calls: list[int] = calls) -> int:
            calls.append(state)
            return "not a number"  # type: ignore[return-value]

        @app.workflow
        def poll(ctx: Context, seconds: float) -> Any:
            return ctx.wait_for_condition(
                bad,
                timedelta(seconds=seconds),
                timedelta(minutes=5),
                initial_state=0,
                until=lambda n: n > 5,
                name="bad",
            )

        status, message, _ = _outcome(app, interval)
        assert status == RunStatus.FAILED.value
        assert "bad" in message and "did not match its return annotation" in message
        assert calls == [0]
