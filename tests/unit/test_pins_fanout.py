"""Pins for ``durable.engine.fanout`` and ``durable.engine.turns``: behaviour the fan-out tests ran
without checking (each test names the mutants of ``python -m tests.mutation --module
fanout|turns`` it kills)."""

from __future__ import annotations

import contextlib
import logging
import threading
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, RetryPolicy, RunStatus, StepFailed, current_step
from durable.core.model import StepKind
from durable.engine.turns import Turn
from durable.errors import StorageError
from durable.testing import LocalRunner

ONCE = RetryPolicy(max_attempts=1)


def test_a_turn_knows_its_holder_through_release_released_and_held() -> None:
    # turns-e587fa79 (release keeps the holder), turns-58cb79e4 (released does not take it
    # back), turns-8a51ca80 / -facff10d / -38635d94 / -c614c196 / -2d7a18a1 (held)
    turn = Turn()
    with turn.held():  # not held: taken for the block, given back after
        assert turn.mine()
    assert not turn.mine()
    turn.acquire()
    with turn.released():
        assert not turn.mine()
        seen: list[bool] = []
        other = threading.Thread(target=lambda: seen.append(_take_and_give(turn)))
        other.start()
        other.join(5)
        assert seen == [True]  # another thread could take it meanwhile
    assert turn.mine()  # and this one has it back
    with turn.held():  # already held: kept, not taken twice (no deadlock)
        assert turn.mine()
    assert turn.mine()
    turn.release()
    assert not turn.mine()


def _take_and_give(turn: Turn) -> bool:
    with turn.held():
        return turn.mine()


def test_a_branch_body_checkpoints_and_heartbeats_while_others_run() -> None:
    # turns held() through StepContext.checkpoint / heartbeat from a body off the turn
    app = App()
    together = threading.Barrier(2, timeout=10)

    def work(n: int) -> int:
        step = current_step()
        step.checkpoint({"n": n})
        step.heartbeat()
        together.wait()  # both bodies at once, each past its checkpoint
        return n

    @app.workflow
    def wf(ctx: Context) -> list[int]:
        return ctx.map(lambda c, n: c.step(work, n), [1, 2]).values()

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).output == "[1,2]"


def test_a_branch_logs_on_its_first_run_and_not_on_replay(caplog: pytest.LogCaptureFixture) -> None:
    # fanout-707aae0a (a fresh branch's frontier 0 -> 1: its first lines taken for replay)
    app = App()

    def branch(c: Context) -> int:
        c.logger.info("branch starts")
        return c.step(lambda: 1, name="one")

    @app.workflow
    def wf(ctx: Context) -> list[int]:
        values = ctx.parallel(branch).values()
        ctx.sleep(timedelta(minutes=1))
        return values

    runner = LocalRunner(app)
    caplog.set_level(logging.INFO, logger="durable.workflow")
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert [r.getMessage() for r in caplog.records].count("branch starts") == 1


def test_one_at_a_time_runs_on_the_callers_thread_and_stops_once_decided() -> None:
    # fanout-a91af410 (workers == 1 -> == 0), fanout-c0338466 (the in-order stop deleted)
    app = App()
    threads: list[str] = []
    bodies: list[int] = []

    def work(n: int) -> int:
        threads.append(threading.current_thread().name)
        bodies.append(n)
        return n

    @app.workflow
    def wf(ctx: Context) -> list[Any]:
        result = ctx.map(
            lambda c, n: c.step(work, n),
            [1, 2, 3],
            max_concurrency=1,
            completion="first_successful",
        )
        return [[i.index, i.status] for i in result]

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.output == '[[0,"succeeded"],[1,"canceled"],[2,"canceled"]]'  # fanout-3d97d960
    assert bodies == [1] and threads == [threading.current_thread().name]


def test_a_branch_whose_ledger_write_fails_retryably_decides_nothing() -> None:
    # fanout-215e5224 ('signal' -> ''), fanout-615f3350 / -33ad8c31 / -a98c6338 (_stops_run)
    app = App()

    @app.workflow
    def wf(ctx: Context) -> list[int]:
        return ctx.parallel(
            lambda c: c.step(lambda: 1, name="a"), lambda c: c.step(lambda: 2, name="b")
        ).values()

    runner = LocalRunner(app)
    ledger = runner.memory_ledger
    real = ledger.write_step
    failed: list[str] = []

    def write_step(step: Any, guard: Any = None) -> Any:
        if step.position == "0001.0002.0001" and not failed:
            failed.append(step.position)
            raise StorageError("throttled", retryable=True)
        return real(step, guard)

    ledger.write_step = write_step  # type: ignore[method-assign]
    run_id = runner.start("wf").run_id
    with contextlib.suppress(StorageError):  # the invocation ends; another one replays
        runner.run_until_idle()
    assert failed and "0001" not in {s.position for s in runner.history(run_id)}
    for _ in range(5):
        runner.advance(timedelta(minutes=5))
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED and run.output == "[1,2]"


def test_a_failed_step_in_a_branch_keeps_its_own_message_and_the_run_is_not_compensated() -> None:
    # fanout-f48afa09 (the step's own message replaced by StepFailed's text),
    # fanout-d792effe (a canceled branch's undo marking the run compensated)
    app = App()
    seen: list[Any] = []

    @app.step(retry=ONCE)
    def charge() -> str:
        raise ValueError("card declined")

    def hold() -> str:
        return "held"

    def release(ref: str) -> None:
        seen.append(f"release {ref}")

    def parked(c: Context) -> Any:
        c.step(hold, compensate=release)
        return c.wait_for_signal("never")

    @app.workflow
    def wf(ctx: Context) -> str:
        result = ctx.parallel(parked, lambda c: charge(), completion={"tolerated_failures": 0})
        error = result[1].error
        assert isinstance(error, StepFailed)
        seen.append(error.error_message)
        return "done"

    runner = LocalRunner(app)
    statuses: list[str] = []
    real = runner.memory_ledger.update_run

    def update_run(run_id: str, guard: Any, changes: Any) -> Any:
        statuses.append(str(changes.get("status")))
        return real(run_id, guard, changes)

    runner.memory_ledger.update_run = update_run  # type: ignore[method-assign]
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED and run.compensated is False
    assert "COMPENSATING" not in statuses  # a canceled branch's undo is not the run's ending
    assert "release held" in seen
    message = next(m for m in seen if "card declined" in m)
    assert "failed after" not in message and message.endswith("card declined")
    kinds = {s.position: s.kind for s in runner.history(run_id)}
    assert kinds["0001.0001.0003"] == StepKind.COMPENSATION


def test_as_many_successes_as_branches_is_a_rule_that_can_be_met() -> None:
    # fanout-36c3cbc0 (count > branches -> >=: refusing the rule "every branch")
    app = App()

    @app.workflow
    def wf(ctx: Context) -> list[int]:
        return ctx.parallel(lambda c: 1, lambda c: 2, completion={"min_successful": 2}).values()

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).output == "[1,2]"


def test_a_branch_error_names_its_item_and_keeps_a_thousand_characters() -> None:
    # fanout-c5ac82f8 / fanout-41be90e2 (BranchFailed's index), fanout-c00c4a13 (the cut)
    app = App()
    seen: list[Any] = []

    def broken(c: Context, n: int) -> int:
        if n == 1:
            raise KeyError("x" * 3000)
        return n

    @app.workflow
    def wf(ctx: Context) -> str:
        result = ctx.map(broken, [0, 1, 2], completion={"tolerated_failures": 1})
        seen.append(result[1].error)
        return "done"

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).output == '"done"'
    [error] = seen
    assert error.index == 1 and error.error_type == "KeyError"
    assert len(error.error_message) == 1000 and error.error_message.endswith("...")


def test_a_replayed_branch_does_not_log_again_what_it_logged_before_it_parked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # fanout-17ce10d4 / fanout-6f10d24d (a branch's frontier read from the wrong level)
    app = App()

    def branch(c: Context) -> int:
        c.step(lambda: 1, name="one")
        c.step(lambda: 2, name="two")
        c.logger.info("after one")  # at the branch's 2nd position of 3; the batch is at 2
        c.sleep(timedelta(minutes=1))
        return 1

    @app.workflow
    def wf(ctx: Context) -> list[int]:
        ctx.step(lambda: 0, name="zero")
        return ctx.parallel(branch, branch).values()

    runner = LocalRunner(app)
    caplog.set_level(logging.INFO, logger="durable.workflow")
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.get_run(run_id).output == "[1,1]"
    assert [r.getMessage() for r in caplog.records].count("after one") == 2  # once a branch


def test_a_decision_too_large_for_an_item_fails_at_the_call_and_undoes_the_branches() -> None:
    # fanout-d2a423c3 (the branches' undos not handed to the caller), fanout-e1e8b1b8
    app = App()
    undone: list[str] = []

    def big(n: int) -> str:
        return str(n) * 250_000

    def forget(value: str, n: int) -> None:
        undone.append(str(n))

    @app.workflow
    def wf(ctx: Context) -> int:
        values = ctx.map(lambda c, n: c.step(big, n, compensate=forget), [1, 2]).values()
        return len(values)

    runner = LocalRunner(app, large_values=False)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.type == "PayloadTooLarge"
    assert undone == ["2", "1"]  # newest first, in branch order
    assert "0001" not in {s.position for s in runner.history(run_id)}
