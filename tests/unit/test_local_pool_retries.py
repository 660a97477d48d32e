"""``durable dev``'s worker pool retries a failed asynchronous invocation as Lambda does
(issue 45, item 1): twice, with Lambda's one and two minutes as seconds.

Before, an invocation lost before its run was claimed (the worker killed, the store not
answering) was never run again by the pool: the run waited for the sweeper's retrigger
(5 minutes). The pool runs real worker processes here (pipes, no sockets), with the
handler in ``tests/unit/local_retry_handlers.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from durable.local.lambda_runtime import ASYNC_RETRY_DELAYS, WorkerPool

pytestmark = pytest.mark.unit

HANDLER = "tests.unit.local_retry_handlers:flaky"
RUN = "01JAAAAAAAAAAAAAAAAAAAAAAA"


def until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def attempts(folder: Path) -> list[float]:
    path = folder / "attempts"
    return [float(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("how", ["raise", "die"])
def test_a_failed_invocation_is_retried_and_the_run_starts_within_the_retry_time(
    tmp_path: Path, how: str
) -> None:
    events: list[str] = []
    pool = WorkerPool(HANDLER, size=1, timeout_seconds=30, env={}, on_event=events.append)
    pool.start()
    try:
        # GIVEN a start's invocation whose first attempt fails before the run is claimed
        pool.submit({"run_id": RUN, "reason": "start", "dir": str(tmp_path), "how": how})
        # WHEN the pool goes on (nothing else invokes the run: no sweeper here)
        started = until((tmp_path / "started").exists, timeout=15)
        # THEN the same event runs again after the first retry delay and starts the run
        assert started, f"never run again after the failure; the pool said {events}"
        first, second = attempts(tmp_path)
        waited = float((tmp_path / "started").read_text()) - first
        print(f"{how}: started {waited:.2f} s after the failed attempt")
        assert ASYNC_RETRY_DELAYS[0] <= second - first < ASYNC_RETRY_DELAYS[0] + 5
        assert pool.stats.retried == 1
        assert "retried in 1 s" in events[0], events
    finally:
        pool.stop()


def test_an_invocation_gets_two_retries_then_is_left_to_the_sweeper(tmp_path: Path) -> None:
    events: list[str] = []
    pool = WorkerPool(
        HANDLER,
        size=1,
        timeout_seconds=30,
        env={},
        on_event=events.append,
        retry_delays=(0.1, 0.2),  # Lambda's doubling, shorter for the test
    )
    pool.start()
    try:
        # GIVEN an event that fails every time (a store down longer than the retries)
        event = {"run_id": RUN, "reason": "timer", "dir": str(tmp_path), "how": "raise"}
        pool.submit({**event, "failures": 99})
        # THEN it is tried three times in all, as Lambda tries an asynchronous invocation
        assert until(lambda: len(events) == 3 and pool.idle(), timeout=15), events
        time.sleep(0.5)
        assert len(attempts(tmp_path)) == 3
        assert pool.stats.retried == 2 and pool.stats.errors == 3
        assert "out of retries: the sweeper takes the run up" in events[-1]
        # AND a synchronous invocation (its caller has the error) is never retried
        before = len(attempts(tmp_path))
        reply = pool.call({**event, "failures": 99})
        assert reply["ok"] is False and "did not answer" in reply["error"]
        time.sleep(0.5)
        assert len(attempts(tmp_path)) == before + 1
    finally:
        pool.stop()


def test_a_retry_is_not_queued_behind_an_invocation_already_waiting_for_the_run(
    tmp_path: Path,
) -> None:
    # A pool that is not started: nothing takes from the queue but the test.
    pool = WorkerPool(HANDLER, size=1, timeout_seconds=5, env={}, retry_delays=(0.0,))
    pool.submit({"run_id": RUN, "reason": "start"})
    failed = pool._take(timeout=1)
    assert failed is not None
    pool.submit({"run_id": RUN, "reason": "sweep"})  # the sweeper invoked it meanwhile
    assert pool._retry_later(failed) == 0.0
    # The retry's time has come, but the run already has an invocation waiting: one runs.
    taken = pool._take(timeout=1)
    assert taken is not None and taken["event"]["reason"] == "sweep"
    assert pool._take(timeout=0.1) is None
    assert pool.stats.deduped == 1 and pool.idle()
