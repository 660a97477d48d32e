"""A child's end and its report to its parent are separate writes (issue 48): a worker that
stops between them leaves the end in the child's run item and nothing in the parent's
record. The parent, waiting due at its next look (``durable.engine.children``), finds it.

Each test loses the report the way such a worker would: the child's final write happens,
the report does not (``lose_reports``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from durable import App, ChildHandle, Context, RunStatus, StepStatus, TerminalError
from durable.core.ids import timer_name
from durable.core.model import StepKind, StepRecord, format_time, parse_time
from durable.engine.children import REPORT_LOOK_MAX, REPORT_LOOK_MIN, report_look_due
from durable.testing import LocalRunner


def make_app() -> App:
    app = App()

    @app.workflow
    def slow(ctx: Context, n: int) -> int:
        ctx.sleep(timedelta(minutes=10))
        return n * n

    @app.workflow
    def waits(ctx: Context) -> int:
        handle: ChildHandle[int] = ctx.start_child(slow, 3)
        result: int = handle.result()
        return result

    @app.workflow
    def day_long(ctx: Context, n: int) -> int:
        ctx.sleep(timedelta(days=1))
        return n + 1

    @app.workflow
    def waits_a_day(ctx: Context) -> int:
        handle: ChildHandle[int] = ctx.start_child(day_long, 41)
        result: int = handle.result()
        return result

    @app.workflow
    def squares(ctx: Context, n: int) -> list[int]:
        return ctx.map(slow, range(n), name="sq", distributed=True, max_concurrency=2).values()

    return app


def flaky_app() -> tuple[App, dict[str, bool]]:
    """A child that fails for good while ``failing["now"]``: run keyed by ``uses_key``,
    unkeyed by ``parent``."""
    app = App()
    failing = {"now": True}

    @app.step
    def work(n: int) -> int:
        if failing["now"]:
            raise TerminalError("not yet")
        return n * 2

    @app.workflow
    def keyed(ctx: Context, n: int) -> int:
        return work(n)

    @app.workflow
    def uses_key(ctx: Context) -> int:
        result: int = ctx.run_child(keyed, 21, id="shared")
        return result

    @app.workflow
    def parent(ctx: Context) -> int:
        result: int = ctx.run_child(keyed, 21)
        return result

    return app, failing


def lose_reports(runner: LocalRunner, lost: list[str]) -> None:
    """Every child's end is written and its report never sent (as by a worker stopped
    between the two); ``lost`` collects the children whose report was lost."""
    ledger = runner.memory_ledger

    def end_alone(run_id: str, guard: Any, changes: Any, report: Any, *, now: str) -> Any:
        lost.append(run_id)
        return ledger.update_run(run_id, guard, changes), False

    ledger.finish_child = end_alone  # type: ignore[method-assign]


def test_a_parent_finds_the_end_of_a_child_whose_report_was_lost() -> None:
    runner = LocalRunner(make_app())
    lost: list[str] = []
    lose_reports(runner, lost)
    run = runner.start("waits")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.WAITING
    runner.advance(hours=1)
    assert len(lost) == 1  # the child ended, and said nothing
    parent = runner.get_run(run.run_id)
    assert (parent.status, parent.output) == (RunStatus.SUCCEEDED, "9")
    (record,) = runner.history(run.run_id)
    assert (record.status, record.output, record.detail) == (
        StepStatus.DONE,
        "9",
        {"child": lost[0], "version": 1},
    )


def test_a_distributed_map_finds_every_end_whose_report_was_lost() -> None:
    runner = LocalRunner(make_app())
    lost: list[str] = []
    lose_reports(runner, lost)
    run = runner.start("squares", 5)
    runner.advance(hours=3)
    assert len(lost) == 5
    parent = runner.get_run(run.run_id)
    assert (parent.status, parent.output) == (RunStatus.SUCCEEDED, "[0,1,4,9,16]")


def test_the_retried_invocation_of_a_child_whose_report_was_lost_wakes_its_parent() -> None:
    """GIVEN a day-long child whose worker stopped between its end and its report (Lambda
    retries that asynchronous invocation about a minute later) WHEN the retry finds the
    child ended THEN its parent, whose record still waits, is woken to look at once: the
    end is taken within the minute, not at the parent's next look (hours away after a
    day's wait)."""
    runner = LocalRunner(make_app())
    lost: list[str] = []
    lose_reports(runner, lost)
    run = runner.start("waits_a_day")
    runner.advance(days=1, seconds=1)
    assert len(lost) == 1
    waiting = runner.get_run(run.run_id)
    assert waiting.status == RunStatus.WAITING
    next_look = parse_time(waiting.due_at or "")
    assert next_look - runner.clock.now() > timedelta(hours=6)

    runner.advance(minutes=1)
    retried = runner.engine.resume(lost[0], reason="timer")  # Lambda's retry
    assert retried.result == "busy"  # the child ended: nothing of it to run again
    runner.run_until_idle()
    parent = runner.get_run(run.run_id)
    assert (parent.status, parent.output) == (RunStatus.SUCCEEDED, "42")


def test_a_retried_invocation_of_an_ended_child_whose_report_landed_wakes_nothing() -> None:
    """The same retry after a report that did land (or of a run that is no child) reads
    and invokes nothing more: the parent is not woken for nothing."""
    runner = LocalRunner(make_app())
    run = runner.start("waits")
    runner.advance(minutes=10, seconds=1)
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    (record,) = runner.history(run.run_id)
    child = str((record.detail or {})["child"])
    invoked: list[tuple[str, str]] = []
    real = runner.engine.invoke_worker

    def watched(run_id: str, reason: str, hop: int = 0) -> None:
        invoked.append((run_id, reason))
        real(run_id, reason, hop)

    runner.engine.invoke_worker = watched  # type: ignore[method-assign]
    assert runner.engine.resume(child, reason="timer").result == "busy"
    assert runner.engine.resume(run.run_id, reason="timer").result == "busy"
    assert invoked == []


def test_a_parent_waiting_for_a_child_is_due_at_its_next_look() -> None:
    """Not waiting on nothing: the due time (no timer; the sweeper's pass) is when it
    looks at the child should no report come first. The report still wakes it at once."""
    runner = LocalRunner(make_app())
    run = runner.start("waits")
    runner.run_until_idle()
    waiting = runner.get_run(run.run_id)
    assert waiting.status == RunStatus.WAITING
    assert waiting.due_at == format_time(runner.clock.now() + REPORT_LOOK_MIN)
    assert all(rid != run.run_id for rid, _ in runner.timers.armed.values())
    runner.advance(minutes=10, seconds=1)
    parent = runner.get_run(run.run_id)
    assert (parent.status, parent.output) == (RunStatus.SUCCEEDED, "9")


def test_the_looks_thin_out_as_the_wait_grows() -> None:
    """After as long again as the parent has waited, from a minute to an hour: a child
    that runs an hour costs its parent 6 looks, one that runs a day 29."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rec = StepRecord("P", "0001", "slow", StepKind.CHILD, StepStatus.WAITING, format_time(start))

    def looks(over: timedelta) -> int:
        count, now = 0, start
        while True:
            now = parse_time(report_look_due(rec, now))
            if now > start + over:
                return count
            count += 1

    assert report_look_due(rec, start) == format_time(start + REPORT_LOOK_MIN)
    waited = start + timedelta(hours=5)  # as long again as it has waited, below the cap
    assert report_look_due(rec, waited) == format_time(waited + timedelta(hours=5))
    later = start + timedelta(days=2)
    assert report_look_due(rec, later) == format_time(later + REPORT_LOOK_MAX)
    # The looks grow with the wait's logarithm: a day-long child is not looked at hourly.
    assert looks(timedelta(hours=1)) == 6
    assert looks(timedelta(days=1)) == 11
    assert looks(timedelta(days=3)) == 13


def test_a_keyed_child_adopted_then_retried_with_its_adopter_is_not_taken_for_gone() -> None:
    """GIVEN a keyed child started by one parent, failed, adopted (failed) by a second
    parent, then retried by an operator's retry of that second parent (which waits for it
    again) WHEN the child succeeds (its report goes to the parent that started it) THEN the
    second parent's look settles its record from the child's end: it is the run the
    record named, not a later run under the key (explorer seed 468, found with the
    child's retried invocation waking parents)."""
    app, failing = flaky_app()
    runner = LocalRunner(app)
    first = runner.start("uses_key")
    runner.run_until_idle()
    second = runner.start("uses_key")  # the key's run has failed: adopted, failed
    runner.run_until_idle()
    assert runner.get_run(first.run_id).status == RunStatus.FAILED
    assert runner.get_run(second.run_id).status == RunStatus.FAILED
    (adopted,) = runner.history(second.run_id)
    child_id = str((adopted.detail or {})["child"])
    assert runner.get_run(child_id).parent != f"{second.run_id}@{adopted.position}"

    failing["now"] = False
    runner.engine.retry(second.run_id)  # reopens the record and retries the child
    runner.advance(hours=1)
    assert runner.get_run(child_id).status == RunStatus.SUCCEEDED
    parent = runner.get_run(second.run_id)
    assert (parent.status, parent.output) == (RunStatus.SUCCEEDED, "42")


def test_a_child_gone_before_its_parent_looks_fails_the_wait_as_gone() -> None:
    """GIVEN a child whose report was lost and whose run item expired before its parent
    looked WHEN the parent looks THEN the wait fails as ``ChildGone`` saying why, instead
    of waiting for ever (explorer seed 13)."""
    runner = LocalRunner(make_app())
    lost: list[str] = []
    lose_reports(runner, lost)
    run = runner.start("waits")
    runner.advance(minutes=10, seconds=1)
    (child_id,) = lost
    child = runner.get_run(child_id)
    assert runner.memory_ledger.delete_run(child_id, created_at=child.created_at)
    runner.advance(hours=1)
    (record,) = runner.history(run.run_id)
    assert (record.status, record.error_type) == (StepStatus.TERMINAL_FAILED, "ChildGone")
    assert "no longer exists" in (record.error_summary or "")
    assert runner.get_run(run.run_id).status == RunStatus.FAILED


def test_a_retried_parent_whose_failed_child_is_gone_says_how_to_start_it_again() -> None:
    """GIVEN a parent failed by its child, the child's run item expired since WHEN an
    operator retries the parent THEN the reopened wait fails as ``ChildGone`` and says to
    fork the parent from an earlier step (nothing is left to retry)."""
    app, _ = flaky_app()
    runner = LocalRunner(app)
    run = runner.start("parent")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.FAILED
    (record,) = runner.history(run.run_id)
    child = runner.get_run(str((record.detail or {})["child"]))
    assert runner.memory_ledger.delete_run(child.run_id, created_at=child.created_at)
    runner.engine.retry(run.run_id)
    runner.run_until_idle()
    (record,) = runner.history(run.run_id)
    assert (record.status, record.error_type) == (StepStatus.TERMINAL_FAILED, "ChildGone")
    assert "fork this run from an earlier step" in (record.error_summary or "")


def test_an_attached_wait_woken_by_its_timer_rearms_under_a_fresh_schedule_name() -> None:
    """GIVEN a run attached to a keyed run another parent started, looking at it on a
    timer WHEN the timer wakes it and the attached run still runs THEN its next look is
    armed under a fresh schedule name: the fired one-shot schedule may still exist on
    EventBridge Scheduler, where arming the same name again would be refused."""
    app = App()

    @app.workflow
    def long(ctx: Context) -> int:
        ctx.sleep(timedelta(hours=1))
        return 7

    @app.workflow
    def owner(ctx: Context) -> int:
        result: int = ctx.run_child(long, id="k")
        return result

    @app.workflow
    def watcher(ctx: Context) -> int:
        result: int = ctx.run_child(long, id="k", if_running="attach")
        return result

    runner = LocalRunner(app)
    runner.start("owner")
    runner.run_until_idle()
    run = runner.start("watcher")
    runner.run_until_idle()
    (record,) = runner.history(run.run_id)
    assert (record.detail or {}).get("attached") is True
    first = {n for n, (r, _) in runner.timers.armed.items() if r == run.run_id}
    assert first == {timer_name(run.run_id, record.position)}
    runner.advance(seconds=11)  # the first look's timer fires; the run still sleeps
    again = {n for n, (r, _) in runner.timers.armed.items() if r == run.run_id}
    assert len(again) == 1 and again != first
    assert next(iter(again)).startswith(timer_name(run.run_id, record.position) + "-r")
    runner.advance(hours=2)  # the run ends within a look (a tenth of the wait, 15 min at most)
    assert runner.get_run(run.run_id).output == "7"
