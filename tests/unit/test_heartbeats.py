"""Callback heartbeats (issue 36, item 2): a long external job says it is alive; a missed
heartbeat times the wait out early, the wait's own timeout still bounds it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import App, CallbackTimeout, Context, RunStatus
from durable.adapters.nonces import MemoryNonceStore
from durable.api.service import ApiService
from durable.engine.waits import Callback
from durable.errors import CallbackAlreadyCompleted, CallbackExpired, CallbackNotFound, InvalidState
from durable.testing import LocalRunner

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


def test_a_heartbeat_as_long_as_the_timeout_is_accepted() -> None:
    """The bound is inclusive: a heartbeat equal to the wait's own timeout adds nothing, but
    it is not wrong, so the call goes on (a mutant refusing it survived until this test)."""
    runner = LocalRunner(job_app(heartbeat=timedelta(hours=2)))
    run_id = runner.start("transcode").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.WAITING
    assert len(SENT) == 1


def test_a_worker_with_a_stale_view_does_not_time_out_a_wait_a_heartbeat_moved_on() -> None:
    """A worker that read the run before a heartbeat landed, and looks at the wait once its
    old expiry passed, must not write it TIMED_OUT: the ledger refuses a timeout of an
    expiry that moved on (a condition on the wait's own record), and the worker parks the
    run until the new expiry instead."""
    from durable.core.ports import Invocation
    from durable.engine.execution import Execution
    from durable.engine.waits import _await
    from durable.errors import Suspend

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
    runner.heartbeat(cb.token)  # 00:09: it now expires at 00:19
    runner.clock.advance(timedelta(minutes=2))  # 00:11, past the stale view's expiry
    workflow = runner.app.get_workflow("transcode")
    x = Execution(runner.engine, workflow, stale, "stale-worker", Invocation(request_id="s"))
    with pytest.raises(Suspend):
        _await(x, cb.position, "callback")
    stored = runner.memory_ledger.get_step(run_id, cb.position)
    assert stored is not None and stored.status.value == "WAITING"
    assert stored.expires_at == "2026-01-01T00:19:00.000Z"
    assert runner.get_run(run_id).due_at == "2026-01-01T00:19:00.000Z"  # parked until then


def _keep(cb: Callback[Any]) -> str:
    SENT.append(cb)
    return "sent"


def test_heartbeats_to_many_callbacks_never_hold_back_another_ones_timeout() -> None:
    """A stream of heartbeats on one callback must not keep a dead job's callback from
    timing out: the timeout's condition is on its own record, not on the run's events."""
    app = App()

    def ask(c: Context, item: str) -> Any:
        try:
            return c.wait_for_callback(
                f"job-{item}",
                timedelta(hours=1),
                submit=_keep,
                heartbeat_timeout=timedelta(minutes=5),
            )
        except CallbackTimeout:
            return f"{item} lost"

    @app.workflow
    def jobs(ctx: Context) -> Any:
        return ctx.map(ask, ["a", "b"], item_name=lambda item, i: item).values()

    runner = LocalRunner(app)
    run_id = runner.start("jobs").run_id
    runner.run_until_idle()
    alive = next(cb for cb in SENT if cb.name == "job-a")
    for _ in range(4):  # a's job beats every 2 minutes; b's job died at once
        runner.advance(minutes=2)
        runner.heartbeat(alive.token)
    runner.complete_callback(alive.token, "a done")
    runner.run_until_idle()
    assert runner.result(run_id) == ["a done", "b lost"]


def test_a_heartbeat_for_a_branch_its_batch_decided_without_is_refused() -> None:
    """first_successful decided by another branch: nobody waits on this callback any
    more, so its job is told to stop (410) rather than kept beating for nothing."""
    app = App()

    def job(c: Context) -> Any:
        return c.wait_for_callback(
            "slow", timedelta(hours=1), submit=_keep, heartbeat_timeout=timedelta(minutes=5)
        )

    def quick(c: Context) -> str:
        return "quick"

    @app.workflow
    def race(ctx: Context) -> Any:
        result = ctx.parallel(job, quick, completion="first_successful")
        ctx.sleep(timedelta(hours=2))
        return result.completion_reason

    runner = LocalRunner(app)
    run_id = runner.start("race").run_id
    runner.run_until_idle()
    (cb,) = SENT
    with pytest.raises(CallbackExpired, match="no longer waited on"):
        runner.heartbeat(cb.token)
    runner.advance(hours=3)
    assert runner.result(run_id) == "min_successful_reached"


def test_the_listing_shows_the_expiry_a_heartbeat_moved_on() -> None:
    """Issue 46, item 8: a heartbeat moves the expiry the API's listing (`durable runs`)
    shows, in the same write as the wait's and without waking the run."""
    runner = LocalRunner(job_app())
    run_id = runner.start("transcode").run_id
    runner.run_until_idle()
    (cb,) = SENT
    api = ApiService(
        runner.engine, clock=runner.clock, nonces=MemoryNonceStore(), webhook_secret=lambda: None
    )

    def listed() -> str | None:
        page = api.list_runs(
            workflow="transcode",
            status=None,
            needs_attention=None,
            version=None,
            limit=5,
            cursor=None,
        )
        (row,) = page.runs
        return row.waiting_for

    assert listed() == "callback transcoded until 2026-01-01T00:10:00.000Z"
    runner.advance(minutes=8)
    inbox = runner.get_run(run_id).inbox
    assert runner.heartbeat(cb.token) == "2026-01-01T00:18:00.000Z"
    assert listed() == "callback transcoded until 2026-01-01T00:18:00.000Z"
    assert runner.get_run(run_id).inbox == inbox  # not woken
    runner.advance(minutes=9)  # past the old expiry: the worker parks it until the new one
    assert runner.get_run(run_id).status == RunStatus.WAITING
    assert listed() == "callback transcoded until 2026-01-01T00:18:00.000Z"


def test_the_listed_text_is_rewritten_only_where_it_names_that_wait_at_its_old_expiry() -> None:
    from durable.core.leases import waiting_for_extended

    old, new = "2026-01-01T00:10:00.000Z", "2026-01-01T00:18:00.000Z"
    assert waiting_for_extended(f"callback job until {old}", "job", old, new) == (
        f"callback job until {new}"
    )
    assert waiting_for_extended(f"callback job until {old} (+2 more)", "job", old, new) == (
        f"callback job until {new} (+2 more)"
    )
    for other in (
        f"callback other until {old}",  # another callback named first
        f"callback job until {new}",  # the run parked again since
        f"callback jobs until {old}",  # a name that only starts alike
        "signal job",
        None,
    ):
        assert waiting_for_extended(other, "job", old, new) is None, other
    assert waiting_for_extended(f"callback job until {old}", "job", old, old) is None
