"""Callback heartbeats (issue 36, item 2): a long external job says it is alive; a missed
heartbeat times the wait out early, the wait's own timeout still bounds it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import App, CallbackTimeout, Context, RunStatus
from durable.errors import CallbackAlreadyCompleted, CallbackExpired, CallbackNotFound, InvalidState
from durable.testing import LocalRunner
from durable.waits import Callback

SENT: list[Callback[Any]] = []


def job_app(heartbeat: timedelta | None = timedelta(minutes=10)) -> App:
    app = App()

    def start_job(cb: Callback[Any]) -> str:
        SENT.append(cb)
        return "job started"

    @app.workflow
    def transcode(ctx: Context) -> str:
        try:
            return str(
                ctx.wait_for_callback(
                    "transcoded",
                    timedelta(hours=2),
                    submit=start_job,
                    heartbeat_timeout=heartbeat,
                )
            )
        except CallbackTimeout as e:
            return f"gave up: {e}"

    return app


@pytest.fixture(autouse=True)
def _clear() -> None:
    SENT.clear()


def test_heartbeats_keep_a_wait_alive_past_its_heartbeat_timeout() -> None:
    runner = LocalRunner(job_app())
    run_id = runner.start("transcode").run_id
    runner.run_until_idle()
    (cb,) = SENT
    for _ in range(5):  # 40 minutes of work, a heartbeat every 8
        runner.advance(minutes=8)
        expires = runner.heartbeat(cb.token)
        runner.run_until_idle()
        assert runner.get_run(run_id).status == RunStatus.WAITING
    assert expires == "2026-01-01T00:50:00.000Z"  # the last heartbeat (00:40) + 10 min
    runner.complete_callback(cb.token, "done.mp4")
    runner.run_until_idle()
    assert runner.result(run_id) == "done.mp4"


def test_a_missed_heartbeat_times_the_wait_out_early() -> None:
    runner = LocalRunner(job_app())
    run_id = runner.start("transcode").run_id
    runner.run_until_idle()
    (cb,) = SENT
    runner.advance(minutes=8)
    runner.heartbeat(cb.token)
    runner.advance(minutes=11)  # silence past the heartbeat timeout
    result = runner.result(run_id)
    assert result.startswith("gave up: callback 'transcoded'") and "timed out at" in result
    with pytest.raises(CallbackExpired):
        runner.heartbeat(cb.token)  # too late: the workflow has moved on


def test_a_heartbeat_never_extends_past_the_waits_own_timeout() -> None:
    runner = LocalRunner(job_app(heartbeat=timedelta(minutes=50)))
    runner.start("transcode")
    runner.run_until_idle()
    (cb,) = SENT
    runner.advance(minutes=40)
    assert runner.heartbeat(cb.token) == "2026-01-01T01:30:00.000Z"
    runner.advance(minutes=40)
    assert runner.heartbeat(cb.token) == "2026-01-01T02:00:00.000Z"  # the 2-hour deadline


def test_heartbeats_to_what_takes_none_are_refused_and_write_nothing() -> None:
    runner = LocalRunner(job_app(heartbeat=None))
    run_id = runner.start("transcode").run_id
    runner.run_until_idle()
    (cb,) = SENT
    before = runner.history(run_id)
    with pytest.raises(InvalidState, match="give it a heartbeat_timeout"):
        runner.heartbeat(cb.token)
    assert runner.history(run_id) == before
    with pytest.raises(CallbackNotFound):
        runner.heartbeat(cb.token[:-3] + "AAA")  # a forged token


def test_a_heartbeat_after_the_answer_is_refused() -> None:
    runner = LocalRunner(job_app())
    runner.start("transcode")
    runner.run_until_idle()
    (cb,) = SENT
    runner.complete_callback(cb.token, "ok")
    with pytest.raises(CallbackAlreadyCompleted):
        runner.heartbeat(cb.token)


@pytest.mark.parametrize(
    ("heartbeat", "says"),
    [
        (timedelta(seconds=0), "at least 1 second"),
        (timedelta(hours=3), "longer than the timeout"),
    ],
)
def test_a_bad_heartbeat_timeout_is_refused_at_the_call(heartbeat: timedelta, says: str) -> None:
    runner = LocalRunner(job_app(heartbeat=heartbeat))
    run_id = runner.start("transcode").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None and says in run.error.message
    assert SENT == []  # refused before any token existed


def test_a_worker_with_a_stale_view_does_not_time_out_a_wait_a_heartbeat_moved_on() -> None:
    """A worker that read the run before a heartbeat landed, and looks at the wait once its
    old expiry passed, must not write it TIMED_OUT: the write requires no event since its
    view (the inbox), so the worker reloads, sees the new expiry and parks again."""
    from durable.execution import Execution
    from durable.interrupts import InboxChanged
    from durable.ports import Invocation
    from durable.waits import _await

    runner = LocalRunner(job_app())
    run_id = runner.start("transcode").run_id
    runner.run_until_idle()
    (cb,) = SENT
    runner.advance(minutes=9)
    ledger = runner.engine.ledger
    claim = ledger.claim(
        run_id,
        "stale-worker",
        now="2026-01-01T00:09:00.000Z",
        lease_until="2026-01-01T00:40:00.000Z",
        stale_before="2026-01-01T00:09:00.000Z",
    )
    assert claim is not None
    stale = ledger.load(run_id)  # its view: the wait expires at 00:10
    assert stale is not None
    runner.heartbeat(cb.token)  # 00:09: it now expires at 00:19 (and the inbox moved)
    runner.clock.advance(timedelta(minutes=2))  # 00:11, past the stale view's expiry
    workflow = runner.app.get_workflow("transcode")
    x = Execution(runner.engine, workflow, stale, "stale-worker", Invocation(request_id="s"))
    with pytest.raises(InboxChanged):
        _await(x, cb.position, "callback")
    stored = runner.memory_ledger.get_step(run_id, cb.position)
    assert stored is not None and stored.status.value == "WAITING"
    assert stored.expires_at == "2026-01-01T00:19:00.000Z"
