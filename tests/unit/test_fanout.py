"""Inline fan-out: ``ctx.parallel`` and ``ctx.map`` on the memory ledger.

Each test drives real threads through the engine; where an outcome would depend on
which thread is faster, the test makes the order explicit (an event the slow branch
waits on) instead of sleeping and hoping.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durable import (
    App,
    BatchFailed,
    BatchResult,
    BranchFailed,
    Completion,
    Context,
    RetryPolicy,
    RunStatus,
    StepFailed,
    StepStatus,
)
from durable.core.model import StepKind
from durable.testing import LocalRunner

LEASE = timedelta(seconds=60)
ONCE = RetryPolicy(max_attempts=1)


@dataclass
class Profile:
    user: str
    seen: datetime


class Bodies:
    """Counts step bodies and how many ran at the same time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[str] = []
        self.running = 0
        self.peak = 0

    def enter(self, what: str) -> None:
        with self.lock:
            self.calls.append(what)
            self.running += 1
            self.peak = max(self.peak, self.running)

    def leave(self) -> None:
        with self.lock:
            self.running -= 1


def finish(runner: LocalRunner, run_id: str) -> Any:
    runner.run_until_idle()
    for _ in range(20):
        run = runner.get_run(run_id)
        if run.terminal:
            return run
        runner.advance(LEASE + timedelta(seconds=10))
    raise AssertionError(f"run did not finish: {runner.get_run(run_id).status}")


# --- values, order, concurrency ---------------------------------------------------------


def test_branches_run_at_once_and_values_come_back_in_branch_order() -> None:
    app = App()
    bodies = Bodies()
    together = threading.Barrier(3, timeout=10)  # passes only if 3 bodies run at once

    def fetch(n: int) -> int:
        bodies.enter(f"fetch {n}")
        together.wait()
        bodies.leave()
        return n * 10

    @app.workflow
    def wf(ctx: Context) -> list[int]:
        result = ctx.parallel(
            lambda c: c.step(fetch, 1), lambda c: c.step(fetch, 2), lambda c: c.step(fetch, 3)
        )
        return result.values()

    runner = LocalRunner(app)
    run = finish(runner, runner.start("wf").run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.output == "[10,20,30]"
    assert bodies.peak == 3
    positions = [s.position for s in runner.history(run.run_id)]
    assert positions == ["0001", "0001.0001.0001", "0001.0002.0001", "0001.0003.0001"]


def test_max_concurrency_caps_the_bodies_running_at_once() -> None:
    app = App()
    bodies = Bodies()
    pair = threading.Barrier(2, timeout=10)

    def work(n: int) -> int:
        bodies.enter(str(n))
        pair.wait()  # two at a time do run together...
        bodies.leave()
        return n

    @app.workflow
    def wf(ctx: Context) -> list[int]:
        return ctx.map(lambda c, n: c.step(work, n), range(6), max_concurrency=2).values()

    runner = LocalRunner(app)
    run = finish(runner, runner.start("wf").run_id)
    assert run.output == "[0,1,2,3,4,5]"
    assert bodies.peak == 2  # ...and never three
    assert sorted(bodies.calls) == [str(n) for n in range(6)]


def test_map_values_are_typed_by_the_functions_return_annotation_on_replay_too() -> None:
    app = App()
    seen: list[BatchResult[Profile]] = []
    when = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)

    def load(user: str) -> Profile:
        return Profile(user, when)

    def profile(c: Context, user: str) -> Profile:
        return c.step(load, user)

    @app.workflow
    def wf(ctx: Context) -> str:
        result = ctx.map(profile, ["ann", "bo"], name="profiles")
        seen.append(result)
        ctx.sleep(timedelta(minutes=1))  # the next invocation replays the map
        return ",".join(p.user for p in result.values())

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.get_run(run_id).output == '"ann,bo"'
    first, replayed = seen
    assert first == replayed  # replay equals the first run, item for item
    assert isinstance(replayed[0].value, Profile) and replayed[0].value.seen == when


# --- completion rules ----------------------------------------------------------------


def test_a_failed_branch_fails_the_batch_and_values_raises_its_step_failure(
    decided: threading.Event,
) -> None:
    app = App()
    bodies = Bodies()

    slow_started = threading.Event()

    @app.step(retry=ONCE)
    def charge(amount: int) -> str:
        assert slow_started.wait(10)
        raise ValueError(f"card declined for {amount}")

    def slow(n: int) -> int:
        bodies.enter(f"slow {n}")
        slow_started.set()
        assert decided.wait(10)  # the failure decides the batch while this body runs
        bodies.leave()
        return n

    def long_branch(c: Context) -> int:
        c.step(slow, 1)
        return c.step(slow, 2)  # never started: the branch stops at this call

    seen: list[BatchResult[Any]] = []

    @app.workflow
    def wf(ctx: Context) -> str:
        result = ctx.parallel(lambda c: charge(900), long_branch, name="pay")
        seen.append(result)
        try:
            result.values()
        except BatchFailed as e:
            assert isinstance(e.__cause__, StepFailed)
            return f"failed: {e.error}"
        return "ok"

    runner = LocalRunner(app)
    run = finish(runner, runner.start("wf").run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert "card declined for 900" in (run.output or "")
    assert bodies.calls == ["slow 1"]
    result = seen[0]
    assert not result.ok
    assert [i.status for i in result] == ["failed", "canceled"]
    error = result[0].error
    assert isinstance(error, StepFailed) and error.error_type == "ValueError"
    assert error.position == "0001.0001.0001"


def test_first_successful_cancels_a_parked_branch_and_runs_its_compensation() -> None:
    app = App()
    undone: list[str] = []

    def reserve(where: str) -> str:
        return f"{where}-hold"

    def release(hold: str, where: str) -> None:
        undone.append(hold)

    def by_approval(c: Context) -> str:
        c.step(reserve, "slow-vendor", compensate=release)
        return str(c.wait_for_callback("vendor-answer", timeout=timedelta(days=1)))

    @app.workflow
    def wf(ctx: Context) -> list[str]:
        result = ctx.parallel(
            by_approval, lambda c: c.step(reserve, "fast-vendor"), completion="first_successful"
        )
        assert [i.status for i in result] == ["canceled", "succeeded"]
        ctx.sleep(timedelta(minutes=5))
        return result.values()

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    assert undone == ["slow-vendor-hold"]  # the canceled branch's undo ran once
    runner.advance(timedelta(minutes=6))  # the replay rebuilds, never re-runs, the undo
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED and run.output == '["fast-vendor-hold"]'
    assert undone == ["slow-vendor-hold"]
    kinds = {s.position: s.kind for s in runner.history(run_id)}
    assert kinds["0001.0001.0003"] == StepKind.COMPENSATION  # after the branch's own records


def test_min_successful_and_tolerated_failures_decide_as_counted() -> None:
    app = App()

    @app.step(retry=ONCE)
    def attempt(n: int) -> int:
        if n % 2:
            raise RuntimeError(f"odd {n}")
        return n

    @app.workflow
    def wf(ctx: Context) -> dict[str, Any]:
        items = range(6)  # three fail (1, 3, 5), three succeed

        def branch(c: Context, n: int) -> int:
            return c.step(attempt, n)

        enough = ctx.map(branch, items, name="a", completion={"min_successful": 3})
        strict = ctx.map(branch, items, name="b", completion={"tolerated_failures": 2})
        share = ctx.map(branch, items, name="c", completion={"tolerated_failures": "50%"})
        return {
            "a": [enough.ok, len(enough.succeeded)],
            "b": strict.ok,
            "c": [share.ok, share.values()],
        }

    runner = LocalRunner(app)
    run = finish(runner, runner.start("wf").run_id)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output == '{"a":[true,3],"b":false,"c":[true,[0,2,4]]}'


@pytest.mark.parametrize(
    ("rule", "total", "succeeded", "failed", "expected"),
    [
        (Completion.all(), 3, 3, 0, True),
        (Completion.all(), 3, 2, 0, None),
        (Completion.all(), 3, 0, 1, False),
        (Completion.first_successful(), 3, 1, 0, True),
        (Completion.first_successful(), 3, 0, 2, None),
        (Completion.first_successful(), 3, 0, 3, False),
        (Completion.min_successful(2), 4, 1, 2, None),
        (Completion.min_successful(2), 4, 1, 3, False),
        (Completion.min_successful(2), 4, 2, 2, True),
        (Completion.tolerated_failures(1), 3, 1, 1, None),
        (Completion.tolerated_failures(1), 3, 2, 1, True),
        (Completion.tolerated_failures(1), 3, 0, 2, False),
        (Completion.tolerated_failures("10%"), 15, 0, 1, None),  # 10% of 15 tolerates 1
        (Completion.tolerated_failures("10%"), 15, 0, 2, False),
        (Completion.tolerated_failures("100%"), 2, 0, 2, True),
        (Completion.tolerated_failures(0), 0, 0, 0, True),
    ],
)
def test_the_rule_table(
    rule: Completion, total: int, succeeded: int, failed: int, expected: bool | None
) -> None:
    assert rule.decide(total, succeeded, failed) is expected


@pytest.mark.parametrize(
    ("given", "described"),
    [
        (None, "all"),
        ("all", "all"),
        ("first_successful", "min_successful=1"),
        ({"min_successful": 2}, "min_successful=2"),
        ({"tolerated_failures": 3}, "tolerated_failures=3"),
        ({"tolerated_failures": "12.5%"}, "tolerated_failures=12.5%"),
    ],
)
def test_completion_spellings(given: Any, described: str) -> None:
    from durable.core.completion import parse_completion

    assert parse_completion(given).describe() == described


# --- waits, suspension, callbacks ------------------------------------------------------


def test_the_run_suspends_until_the_earliest_parked_branch_and_bodies_never_repeat() -> None:
    app = App()
    bodies = Bodies()

    def work(n: int) -> int:
        bodies.enter(f"work {n}")
        bodies.leave()
        return n

    def napper(minutes: int) -> Any:
        def branch(c: Context) -> int:
            c.step(work, minutes)
            c.sleep(timedelta(minutes=minutes))
            return c.step(work, minutes * 100)

        return branch

    @app.workflow
    def wf(ctx: Context) -> list[int]:
        return ctx.parallel(napper(10), napper(3)).values()

    runner = LocalRunner(app)
    started = runner.clock.now()
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.WAITING
    assert run.due_at is not None and run.due_at.startswith(
        (started + timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M")
    )
    runner.advance(timedelta(minutes=4))  # the 3-minute branch goes on, the other parks again
    assert runner.get_run(run_id).status == RunStatus.WAITING
    assert "work 300" in bodies.calls and "work 1000" not in bodies.calls
    runner.advance(timedelta(minutes=7))
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED and run.output == "[1000,300]"
    assert sorted(bodies.calls) == sorted(["work 10", "work 3", "work 300", "work 1000"])


def test_a_callback_inside_a_branch_has_a_nested_position_and_resumes_the_batch() -> None:
    app = App()
    seen: list[Any] = []

    def approve(c: Context) -> Any:
        return c.wait_for_callback("manager", submit=lambda cb: seen.append(cb.token))

    @app.workflow
    def wf(ctx: Context) -> list[Any]:
        return ctx.parallel(approve, lambda c: c.step(lambda: "provisioned", name="prov")).values()

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.WAITING
    [token] = seen
    assert f"{run_id}.0001.0001.0001." in token
    runner.complete_callback(token, {"ok": True})
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.output == '[{"ok":true},"provisioned"]'


# --- compensation, cancel, crashes ------------------------------------------------------


def test_branch_compensations_join_the_callers_in_branch_order_whatever_finished_first() -> None:
    app = App()
    log: list[str] = []
    second_done = threading.Event()

    def book(what: str) -> str:
        if what == "flight":
            assert second_done.wait(10)  # branch 1 finishes after branch 2
        if what == "hotel":
            second_done.set()
        return what

    def unbook(ref: str, what: str) -> None:
        log.append(f"undo {ref}")

    @app.step(retry=ONCE)
    def pay() -> None:
        raise ValueError("declined")

    @app.workflow
    def wf(ctx: Context) -> None:
        ctx.step(book, "taxi", compensate=unbook)
        ctx.parallel(
            lambda c: c.step(book, "flight", compensate=unbook),
            lambda c: c.step(book, "hotel", compensate=unbook),
        )
        pay()

    runner = LocalRunner(app)
    run = finish(runner, runner.start("wf").run_id)
    assert run.status == RunStatus.FAILED
    assert log == ["undo hotel", "undo flight", "undo taxi"]  # newest first, branch order


def test_cancel_with_compensation_stops_parked_branches_and_undoes_their_steps() -> None:
    app = App()
    log: list[str] = []

    def hold(what: str) -> str:
        return what

    def release(ref: str, what: str) -> None:
        log.append(f"release {ref}")

    def waits(c: Context, what: str) -> None:
        c.step(hold, what, compensate=release)
        c.wait_for_signal(f"go-{what}")

    @app.workflow
    def wf(ctx: Context) -> None:
        ctx.map(waits, ["a", "b"])

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.WAITING
    runner.cancel(run_id, compensate=True)
    run = finish(runner, run_id)
    assert run.status == RunStatus.CANCELED
    assert log == ["release b", "release a"]


def test_a_crash_before_the_decision_is_recorded_repeats_no_body(
    decided: threading.Event,
) -> None:
    app = App()
    bodies = Bodies()

    def work(n: int) -> int:
        bodies.enter(str(n))
        bodies.leave()
        return n

    @app.workflow
    def wf(ctx: Context) -> list[int]:
        return ctx.map(lambda c, n: c.step(work, n), [1, 2, 3]).values()

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    writes = runner.call_count("ledger.write_step")
    runner.crash_at("ledger.write_step", call=writes + 4)  # 3 results, then the decision
    run = finish(runner, run_id)
    assert runner.crashes, "the crash point never fired"
    assert run.status == RunStatus.SUCCEEDED and run.output == "[1,2,3]"
    assert sorted(bodies.calls) == ["1", "2", "3"]  # recorded results were replayed
    batch = [s for s in runner.history(run_id) if s.kind == StepKind.BATCH]
    assert [s.status for s in batch] == [StepStatus.DONE]


def test_a_nested_batch_records_under_its_branch() -> None:
    app = App()

    def double(n: int) -> int:
        return 2 * n

    def inner(c: Context) -> list[int]:
        return c.map(lambda cc, n: cc.step(double, n), [1, 2], name="inner").values()

    @app.workflow
    def wf(ctx: Context) -> list[Any]:
        return ctx.parallel(inner, lambda c: c.step(double, 10)).values()

    runner = LocalRunner(app)
    run = finish(runner, runner.start("wf").run_id)
    assert run.output == "[[2,4],20]"
    positions = {s.position for s in runner.history(run.run_id)}
    assert {"0001.0001.0001", "0001.0001.0001.0002.0001"} <= positions


def test_a_branch_error_outside_a_step_is_a_branch_failed_with_its_type() -> None:
    app = App()
    seen: list[BatchResult[Any]] = []

    def broken(c: Context) -> int:
        raise KeyError("no such user")

    @app.workflow
    def wf(ctx: Context) -> str:
        result = ctx.parallel(broken, lambda c: 7, completion={"tolerated_failures": 1})
        seen.append(result)
        ctx.sleep(timedelta(minutes=1))
        return str(result.values())

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    runner.advance(timedelta(minutes=2))
    assert runner.get_run(run_id).output == '"[7]"'
    first, replayed = seen
    error = replayed[0].error
    assert isinstance(error, BranchFailed) and error.error_type == "KeyError"
    assert str(first[0].error) == str(error)


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda ctx: ctx.parallel(lambda c: 1, completion="most"), "completion"),
        (lambda ctx: ctx.parallel(lambda c: 1, completion={"min_successful": 0}), "completion"),
        (lambda ctx: ctx.parallel(lambda c: 1, max_concurrency=0), "max_concurrency"),
        (lambda ctx: ctx.parallel("not a function"), "branches"),
        (lambda ctx: ctx.map(lambda c, i: i, range(1001)), "items"),
        (lambda ctx: ctx.map(lambda c, i: i, [1], distributed=True), "distributed"),
        (lambda ctx: ctx.map(lambda c, i: i, [1], name=""), "name"),
    ],
)
def test_bad_input_names_the_field_and_records_nothing(call: Any, field: str) -> None:
    app = App()

    @app.workflow
    def wf(ctx: Context) -> None:
        call(ctx)

    runner = LocalRunner(app)
    run = finish(runner, runner.start("wf").run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.type == "InvalidInput"
    assert field in run.error.message or field == "branches"
    assert not [s for s in runner.history(run.run_id) if s.kind == StepKind.BATCH]


def test_a_replay_with_a_different_branch_count_is_non_determinism() -> None:
    app = App()
    width = [2]

    @app.workflow
    def wf(ctx: Context) -> None:
        ctx.map(lambda c, i: i, range(width[0]))
        ctx.sleep(timedelta(minutes=1))

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    width[0] = 3
    runner.advance(timedelta(minutes=2))
    run = runner.get_run(run_id)
    assert run.status != RunStatus.SUCCEEDED
    assert run.error is not None and "a batch of 2" in run.error.message


# --- the guide's example runs as written --------------------------------------------------


def test_the_fan_out_guide_example_runs() -> None:
    import re
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs" / "fan-out.md").read_text()
    code = re.search(r"```python\n(.*?)```", guide, re.S)
    assert code is not None
    namespace: dict[str, Any] = {"__name__": "fan_out_guide"}
    exec(compile(code.group(1), "docs/fan-out.md", "exec"), namespace)
    runner = LocalRunner(namespace["app"])
    billing = finish(runner, runner.start("monthly-billing", ["ann", "bo"]).run_id)
    assert billing.output == '["ch-ann","ch-bo"]'
    quote = runner.start("vendor-quote", "bolts").run_id
    runner.run_until_idle()
    assert runner.get_run(quote).status == RunStatus.WAITING
    runner.complete_wait(quote, "quote-globex", "12 EUR")
    runner.run_until_idle()
    run = runner.get_run(quote)
    assert run.status == RunStatus.SUCCEEDED and run.output == '"12 EUR"'


def test_a_branch_stopped_after_a_finished_step_is_undone_once_across_replays(
    decided: threading.Event,
) -> None:
    """A branch the rule cancels between two steps: its undo takes the position after
    its last record, and a replay (which re-runs the branch from records only, to
    rebuild its compensations) finds the undo recorded there instead of running it
    again."""
    app = App()
    undone: list[str] = []

    def hold(what: str) -> str:
        if what == "slow":
            assert decided.wait(10)  # the other branch wins while this body runs
        return f"{what}-hold"

    def release(ref: str, what: str) -> None:
        undone.append(ref)

    def slow(c: Context) -> str:
        c.step(hold, "slow", compensate=release)
        return c.step(hold, "never")  # stopped here: the batch was decided

    @app.workflow
    def wf(ctx: Context) -> list[str]:
        result = ctx.parallel(slow, lambda c: "fast", completion="first_successful")
        ctx.sleep(timedelta(minutes=5))
        ctx.sleep(timedelta(minutes=5))
        return result.values()

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    assert undone == ["slow-hold"]
    runner.advance(timedelta(minutes=6))
    runner.advance(timedelta(minutes=6))
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED and run.output == '["fast"]'
    assert undone == ["slow-hold"]
    kinds = {s.position: s.kind for s in runner.history(run_id)}
    assert kinds["0001.0001.0002"] == StepKind.COMPENSATION
    assert "0001.0001.0003" not in kinds


def test_a_late_rejection_of_a_canceled_branchs_callback_changes_nothing() -> None:
    app = App()
    tokens: list[str] = []
    undone: list[str] = []

    def hold(what: str) -> str:
        return what

    def release(ref: str, what: str) -> None:
        undone.append(ref)

    def by_callback(c: Context) -> Any:
        c.step(hold, "slow", compensate=release)
        return c.wait_for_callback("vendor", submit=lambda cb: tokens.append(cb.token))

    @app.workflow
    def wf(ctx: Context) -> list[Any]:
        result = ctx.parallel(by_callback, lambda c: "fast", completion="first_successful")
        ctx.sleep(timedelta(minutes=5))
        return result.values()

    runner = LocalRunner(app)
    run_id = runner.start("wf").run_id
    runner.run_until_idle()
    assert undone == ["slow"] and runner.get_run(run_id).status == RunStatus.WAITING
    runner.complete_callback(tokens[0], error={"type": "Rejected", "message": "too late"})
    runner.run_until_idle()  # the answer wakes the run: its replay meets the batch again
    runner.advance(timedelta(minutes=6))
    run = runner.get_run(run_id)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output == '["fast"]' and undone == ["slow"]


def test_a_fork_after_a_batch_keeps_its_branch_records() -> None:
    """A fork copies the settled steps before its point; a batch's branch records go with
    its decision (the replay re-runs compensating branches from them)."""
    app = App()
    bodies = Bodies()

    def hold(what: str) -> str:
        bodies.enter(what)
        bodies.leave()
        return what

    def release(ref: str, what: str) -> None:
        bodies.enter(f"undo {ref}")
        bodies.leave()

    @app.step(retry=ONCE)
    def pay() -> None:
        raise ValueError("declined")

    @app.workflow
    def wf(ctx: Context) -> list[str]:
        held = ctx.map(lambda c, w: c.step(hold, w, compensate=release), ["a", "b"]).values()
        ctx.step(hold, "after")
        pay()
        return held

    runner = LocalRunner(app)
    run = finish(runner, runner.start("wf").run_id)
    assert run.status == RunStatus.FAILED
    assert sorted(bodies.calls[:2]) == ["a", "b"]  # the branches, in either order
    assert bodies.calls[2:] == ["after", "undo b", "undo a"]
    bodies.calls.clear()
    fork = runner.fork(run.run_id, from_step=2)  # keeps the map (0001), runs "after" again
    forked = finish(runner, fork.run_id)
    assert forked.status == RunStatus.FAILED  # pay still declines
    assert bodies.calls == ["after", "undo b", "undo a"]  # the map's steps were not re-run
    copied = {s.position for s in runner.history(fork.run_id)}
    assert {"0001", "0001.0001.0001", "0001.0002.0001"} <= copied
