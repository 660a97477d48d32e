"""``durable dev``'s own parts: the worker pool, and the local-only lease settings.

The pool tests run real worker processes (no sockets: the pool talks to them over pipes)
with the handlers in ``tests/unit/local_pool_handlers.py``.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import pytest

from durable import App, Context, RunStatus
from durable.errors import InvalidInput
from durable.local.lambda_runtime import DEADLINE_OVERRUN, WorkerPool
from durable.settings import LOCAL_ONLY, Settings
from durable.testing import LocalRunner, SimulatedCrash

HANDLER = "tests.unit.local_pool_handlers:sleeper"
R1, R2 = "01JAAAAAAAAAAAAAAAAAAAAAAA", "01JBBBBBBBBBBBBBBBBBBBBBBB"
BASE = {"DURABLE_APP": "m:app", "DURABLE_LEDGER_TABLE": "led", "DURABLE_IDEMPOTENCY_TABLE": "idm"}
DEV = {
    **BASE,
    "DURABLE_CLOCK_FILE": "/tmp/durable-dev/clock.json",
    "DURABLE_SHARED_CLOCK": "true",
    "DURABLE_DEADLINE_OVERRUN_SECONDS": repr(DEADLINE_OVERRUN),
}


def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


# --- WorkerPool.submit: one queued invocation per run ------------------------------------


def test_an_invocation_for_a_run_already_queued_is_dropped() -> None:
    # GIVEN a pool whose workers are all busy (not started: nothing takes from the queue)
    pool = WorkerPool(HANDLER, size=1, timeout_seconds=5, env={})
    # WHEN the start's invocation is still queued and the sweeper (grace 0 locally)
    # invokes the same run again, and another run is invoked
    first = pool.submit({"run_id": R1, "reason": "start", "hop": 0})
    again = pool.submit({"run_id": R1, "reason": "sweep", "hop": 0})
    other = pool.submit({"run_id": R2, "reason": "start", "hop": 0})
    # THEN the second invocation of R1 is dropped (the worker loads the latest state anyway)
    assert pool.queue.qsize() == 2
    assert again == first and other != first
    assert pool.stats.deduped == 1
    queued = [pool.queue.get_nowait()["event"] for _ in range(2)]
    assert [(e["run_id"], e["reason"]) for e in queued] == [(R1, "start"), (R2, "start")]


def test_an_invocation_for_a_run_already_running_is_queued() -> None:
    pool = WorkerPool(HANDLER, size=1, timeout_seconds=5, env={})
    pool.submit({"run_id": R1, "reason": "start"})
    taken = pool._take(timeout=1)  # a slot took it: the invocation is running now
    assert taken is not None and taken["event"]["run_id"] == R1
    # A hand-off (or an event) for the running run may need a new invocation: kept.
    pool.submit({"run_id": R1, "reason": "continue", "hop": 1})
    assert pool.queue.qsize() == 1 and pool.stats.deduped == 0


# --- WorkerPool: deadlines, Ctrl-C and stop ------------------------------------------------


@pytest.fixture
def events() -> list[str]:
    return []


@pytest.fixture
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[BaseException | None]]:
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    yield errors


def started_pool(events: list[str], size: int, timeout: float) -> WorkerPool:
    pool = WorkerPool(HANDLER, size=size, timeout_seconds=timeout, env={}, on_event=events.append)
    pool.start()
    return pool


def test_a_worker_is_killed_by_its_own_timer_at_its_deadline(events: list[str]) -> None:
    pool = started_pool(events, size=1, timeout=1.0)
    try:
        process = pool.slots[0].process
        assert process is not None
        submitted = time.time()
        pool.submit({"run_id": R1, "seconds": 30})
        assert wait([process.sentinel], timeout=20), "the worker outlived its deadline"
        lived = time.time() - submitted
        until(lambda: pool.stats.killed_at_deadline == 1)
        # Ended at its deadline by the kernel (SIGALRM), not by the pool's later SIGKILL:
        # the dev stack's leases end DEADLINE_OVERRUN after the deadline and rely on it.
        assert process.exitcode == -signal.SIGALRM
        assert lived < 1.0 + DEADLINE_OVERRUN
        assert pool.stats.died == 0
        assert events and "deadline" in events[0]
    finally:
        pool.stop()


def test_a_synchronous_invocation_goes_before_queued_runs_and_gets_its_reply(
    events: list[str],
) -> None:
    """durable dev's RequestResponse invokes (the API's question to the workers): the
    caller waits for the handler's answer, ahead of the runs already queued."""
    pool = started_pool(events, size=1, timeout=30)
    try:
        pool.submit({"run_id": R1, "seconds": 0.5})  # busy with this one
        until(lambda: pool.slots[0].busy_with is not None)
        for run in range(3):
            pool.submit({"run_id": f"{R1[:-1]}{run}", "seconds": 0.5})
        reply = pool.call({"seconds": 0})
        # answered after the run in flight, before the three queued runs (one slot: at
        # most one of them has started since)
        assert pool.queue.qsize() >= 2
        assert reply["ok"] is True and reply["result"]["remaining_ms"] > 20_000
        failed = pool.call({"fail": "no such workflow"})
        assert failed == {"ok": False, "error": "ValueError: no such workflow"}
    finally:
        pool.stop()
    stopped = pool.call({"seconds": 0})  # a stopped pool answers, rather than waiting
    assert stopped["ok"] is False and "stopping" in stopped["error"]


def test_a_worker_ignores_the_ctrl_c_meant_for_durable_dev(events: list[str]) -> None:
    # A terminal's Ctrl-C signals the whole process group: the worker finishes (or is
    # killed by the pool's stop) instead of dying mid-invocation with a traceback.
    pool = started_pool(events, size=1, timeout=30)
    try:
        pool.submit({"run_id": R1, "sigint": True, "seconds": 0.2})
        until(lambda: pool.stats.invoked == 1 and pool.idle())
        assert (pool.stats.died, pool.stats.errors) == (0, 0)
        assert events == []
    finally:
        pool.stop()


def test_stopping_the_pool_with_invocations_in_flight_is_quiet(
    events: list[str], thread_errors: list[BaseException | None]
) -> None:
    pool = started_pool(events, size=2, timeout=30)
    pool.submit({"run_id": R1, "seconds": 30})
    pool.submit({"run_id": R2, "seconds": 30})
    until(lambda: all(w["run_id"] for w in pool.status()))
    began = time.monotonic()
    pool.stop()
    assert time.monotonic() - began < 10
    # No slot-thread error (it used to read a pipe stop() had closed: "'NoneType' object
    # has no attribute 'recv'"), and the invocations the stop ended are no deaths.
    assert thread_errors == []
    assert events == []
    assert pool.stats.died == 0
    assert not any(w["alive"] for w in pool.status())


# --- the lease on the dev stack: one clock, workers killed at their deadline -------------


def takeover_wait(settings: Settings) -> float:
    """Seconds after a worker died in a step (invocation 5 s) until the step ran again."""
    app = App()
    bodies: list[str] = []

    @app.step
    def work() -> str:
        bodies.append("body")
        if len(bodies) == 1:
            raise SimulatedCrash("SIGKILL in the middle of the step")
        return "done"

    @app.workflow
    def flow(ctx: Context) -> str:
        return work()

    runner = LocalRunner(app, config=settings.engine_config(), remaining_seconds=lambda: 5.0)
    run = runner.start("flow")
    runner.run_until_idle()
    assert bodies == ["body"]
    # Sweeps every 0.1 s, off the lease's phase: a sweep in the lease's last millisecond
    # finds it due but not yet expired, and the run then waits for sweep_retrigger.
    waited = timedelta(milliseconds=50)
    runner.advance(waited)
    while len(bodies) == 1 and waited < timedelta(minutes=1):
        waited += timedelta(milliseconds=100)
        runner.advance(timedelta(milliseconds=100))  # each advance sweeps
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    return waited.total_seconds()


def test_on_the_dev_stack_a_dead_worker_is_taken_over_right_after_its_lease() -> None:
    # The lease ends DEADLINE_OVERRUN after the invocation's deadline (the pool has killed
    # the worker by then) and, with one clock, needs no skew margin: taken over then,
    # never earlier.
    waited = takeover_wait(Settings.from_env(DEV))
    assert 5.0 + DEADLINE_OVERRUN < waited <= 5.0 + DEADLINE_OVERRUN + 0.1


def test_on_aws_a_takeover_still_waits_for_the_overrun_and_the_clock_skew() -> None:
    waited = takeover_wait(Settings.from_env(BASE))
    assert 5.0 + 2.0 + 5.0 < waited <= 5.0 + 2.0 + 5.0 + 0.1


def test_the_dev_stack_lease_settings_are_local_only_and_refused_without_its_clock() -> None:
    assert {"shared_clock", "deadline_overrun_seconds"} <= LOCAL_ONLY  # never in the template
    aws = Settings.from_env(BASE).engine_config()
    assert (aws.clock_skew, aws.deadline_overrun) == (timedelta(seconds=5), timedelta(seconds=2))
    dev = Settings.from_env({**DEV, "DURABLE_TIME_SCALE": "10"}).engine_config()
    assert dev.clock_skew == timedelta(0)
    assert dev.deadline_overrun == timedelta(seconds=DEADLINE_OVERRUN * 10)  # real seconds
    # Without durable dev's shared clock file, processes may read different clocks.
    for name, value in (
        ("DURABLE_SHARED_CLOCK", "true"),
        ("DURABLE_DEADLINE_OVERRUN_SECONDS", "0.5"),
        ("DURABLE_DEADLINE_OVERRUN_SECONDS", "0"),
    ):
        alone: dict[str, Any] = {**BASE, name: value}
        with pytest.raises(InvalidInput, match=name):
            Settings.from_env(alone)


def test_a_worker_that_cannot_import_the_app_fails_the_start_at_once_saying_why() -> None:
    """Not a 60 s wait for "ready": the child's import error is the pool's message."""
    pool = WorkerPool(
        HANDLER, size=1, timeout_seconds=5, env={}, preload="no_such_package_here.workflows"
    )
    with pytest.raises(RuntimeError) as raised:
        pool.start(ready_timeout=30)
    message = str(raised.value)
    assert "could not load" in message and "no_such_package_here.workflows" in message
    assert "ModuleNotFoundError: No module named 'no_such_package_here'" in message
    assert all(slot.process is None or not slot.process.is_alive() for slot in pool.slots)


def test_dev_prints_event_lines_unless_verbose_and_never_sets_them_on_aws(tmp_path: Path) -> None:
    from durable.local.server import QUIET, DevOptions, DevServer

    def env(verbose: bool) -> dict[str, str]:
        server = DevServer(
            DevOptions(app="shop.workflows:app", state_dir=tmp_path, verbose=verbose)
        )
        tmp_path.mkdir(exist_ok=True)
        return server._handler_env()

    quiet, verbose = env(False), env(True)
    assert quiet["DURABLE_CONSOLE_EVENTS"] == "true"
    assert quiet["POWERTOOLS_METRICS_DISABLED"] == "true"
    assert quiet["DURABLE_LOG_LEVEL"] == "WARNING"
    assert not set(QUIET) & set(verbose)
    assert Settings.from_env(quiet).console_events
    assert "console_events" in LOCAL_ONLY


def test_a_client_that_went_away_is_not_a_traceback_on_the_dev_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A worker killed with a keep-alive connection to the dev server resets it; the
    server says nothing. Any other error in a request still prints its traceback."""
    from http.server import BaseHTTPRequestHandler

    from durable.local.server import _HttpServer

    server = _HttpServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    try:
        for error in (ConnectionResetError(104, "reset"), BrokenPipeError(32, "pipe")):
            try:
                raise error
            except ConnectionError:
                server.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("a real bug")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 1))
        assert "ValueError: a real bug" in capsys.readouterr().err
    finally:
        server.server_close()


def test_dynamodb_locals_port_can_be_chosen_and_a_taken_one_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`durable dev --dynamodb-port N` starts DynamoDB Local on N (a GUI keeps pointing at
    it); a port something else holds fails the start naming the option and the fix."""
    import socket

    from durable.local import server as dev_server

    asked: list[int] = []
    said: list[str] = []

    sessions: list[bool] = []

    class Recording:
        home = tmp_path

        def __init__(self, *, own_session: bool = False) -> None:
            # Out of reach of a Ctrl-C to durable dev's process group (it stops it last).
            sessions.append(own_session)

        def installed(self) -> bool:
            return True

        def start(self, port: int = 0, db_path: str | None = None) -> str:
            asked.append(port)
            if port == taken_port:
                raise RuntimeError("DynamoDB Local exited (address in use)")
            return f"http://127.0.0.1:{port}"

        def stop(self) -> None:
            pass

    monkeypatch.setattr(dev_server, "DynamoDBLocal", Recording)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken_port = holder.getsockname()[1]
        chosen = dev_server.DevServer(
            dev_server.DevOptions(
                app="x:app", state_dir=tmp_path, dynamodb_port=8000, say=said.append
            )
        )
        chosen._start_dynamodb_local()
        assert chosen.stack.storage_endpoint == "http://127.0.0.1:8000" and asked == [8000]
        assert sessions == [True]
        clash = dev_server.DevServer(
            dev_server.DevOptions(
                app="x:app", state_dir=tmp_path, dynamodb_port=taken_port, say=said.append
            )
        )
        with pytest.raises(RuntimeError, match=f"--dynamodb-port {taken_port} is in use"):
            clash._start_dynamodb_local()
