"""Pins for durable/engine/distributed.py: each fails on a mutant the other tests let live."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from durable import App, Context, RunStatus
from durable.core.model import StepKind
from durable.testing import LocalRunner


def make_app() -> App:
    app = App()

    @app.workflow(name="item")
    def item(ctx: Context, n: int) -> int:
        if n > 0:
            ctx.sleep(timedelta(hours=n))
        return n

    @app.workflow(name="first")
    def first(ctx: Context, spec: dict[str, Any]) -> list[str]:
        result = ctx.map(
            item,
            spec["items"],
            distributed=True,
            max_concurrency=spec.get("window"),
            completion=spec.get("rule"),
        )
        return [i.status for i in result]

    return app


def children(runner: LocalRunner, run_id: str) -> list[Any]:
    return [
        runner.get_run(str((s.detail or {})["child"]))
        for s in runner.history(run_id)
        if s.kind == StepKind.CHILD
    ]


def test_a_decided_map_cancels_the_children_still_running() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("first", {"items": [0, 5], "window": 2, "rule": "first_successful"})
    runner.run_until_idle()
    parent = runner.get_run(run.run_id)
    assert (parent.status, parent.output) == (RunStatus.SUCCEEDED, '["succeeded","canceled"]')
    kids = children(runner, run.run_id)
    assert [k.status for k in kids] == [RunStatus.SUCCEEDED, RunStatus.CANCELED]


def test_a_rule_that_can_never_be_met_is_refused_at_the_call() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("first", {"items": [0, 0, 0], "rule": {"min_successful": 5}})
    runner.run_until_idle()
    error = runner.get_run(run.run_id).error
    assert error is not None and error.type == "InvalidInput"
    assert "can never be met" in error.message
    assert runner.get_run(run.run_id).children == 0


def test_a_full_window_looks_at_its_open_items_before_suspending() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("first", {"items": [1, 1, 1], "window": 2})
    runner.run_until_idle()
    assert runner.call_count("ledger.get_steps") >= 1
    for _ in range(3):
        runner.advance(hours=1)
    assert runner.get_run(run.run_id).output == '["succeeded","succeeded","succeeded"]'


def test_no_look_with_little_of_the_invocation_left() -> None:
    runner = LocalRunner(make_app(), remaining_seconds=lambda: 5.0)
    run = runner.start("first", {"items": [1, 1, 1], "window": 2})
    runner.run_until_idle()
    assert runner.call_count("ledger.get_steps") == 0
    for _ in range(3):
        runner.advance(hours=1)
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED


def test_with_time_left_the_look_happens() -> None:
    runner = LocalRunner(make_app(), remaining_seconds=lambda: 600.0)
    runner.start("first", {"items": [1, 1, 1], "window": 2})
    runner.run_until_idle()
    assert runner.call_count("ledger.get_steps") >= 1


def test_items_keep_their_index_and_an_empty_error_message_stays_empty() -> None:
    app = make_app()

    @app.workflow(name="mute")
    def mute(ctx: Context, n: int) -> int:
        if n == 1:
            raise ValueError()  # no message at all
        return n

    seen: list[Any] = []

    @app.workflow(name="mutes")
    def mutes(ctx: Context) -> None:
        result = ctx.map(
            mute, [0, 1, 2], distributed=True, max_concurrency=1, completion="first_successful"
        )
        seen.append([(i.index, i.status) for i in result])
        seen.append(result[1].error.error_message if result[1].error else None)  # type: ignore[attr-defined]

    runner = LocalRunner(app)
    runner.start("mutes")
    runner.run_until_idle()
    assert seen[-2] == [(0, "succeeded"), (1, "canceled"), (2, "canceled")]

    @app.workflow(name="mutes-all")
    def mutes_all(ctx: Context) -> None:
        result = ctx.map(mute, [1], distributed=True, completion={"tolerated_failures": 1})
        error = result[0].error
        seen.append((result[0].index, getattr(error, "error_message", None)))

    runner.start("mutes-all")
    runner.run_until_idle()
    assert seen[-1] == (0, "")


def test_looks_at_the_open_items_are_a_second_apart_at_least() -> None:
    """``_refresh`` with a stand-in execution: a second look 0.3 s after the first waits
    the 0.7 s left (in process), and a look after a longer gap does not wait."""
    from types import SimpleNamespace

    from durable.core.clock import FakeClock
    from durable.engine.distributed import LOOK_INTERVAL, _refresh

    clock = FakeClock()
    idled: list[float] = []

    def idle(seconds: float) -> None:
        idled.append(seconds)
        clock.advance(timedelta(seconds=seconds))

    x: Any = SimpleNamespace(
        clock=clock,
        idle=idle,
        dry_run=False,
        cursor=SimpleNamespace(replay_only=False),
        remaining=lambda: None,
        ensure_lease=lambda budget: None,
        ledger=SimpleNamespace(get_steps=lambda run_id, positions: {}),
        run=SimpleNamespace(run_id="RUN1"),
        steps={},
    )
    looked: list[Any] = []
    assert _refresh(x, "0001", [1, 2], looked) is False
    assert idled == [] and looked == [clock.now()]
    clock.advance(timedelta(seconds=0.3))
    _refresh(x, "0001", [1, 2], looked)
    assert [round(s, 3) for s in idled] == [round(LOOK_INTERVAL - 0.3, 3)]
    clock.advance(timedelta(seconds=5))
    _refresh(x, "0001", [1, 2], looked)
    assert len(idled) == 1  # long enough since the last look: no wait


def test_the_default_window_is_100_children() -> None:
    runner = LocalRunner(make_app())
    run = runner.start("first", {"items": [0] * 150})
    item = runner.invoker.pop()
    assert item is not None
    runner._invoke(item.run_id, item.hop, item.reason)  # the parent's first invocation
    assert len(children(runner, run.run_id)) == 100
    assert len(runner.invoker.queue) == 100  # each started child is invoked at once


def test_a_crash_between_the_decision_and_its_cancels_cancels_on_replay() -> None:
    from durable.testing import SimulatedCrash

    runner = LocalRunner(make_app())
    real = runner.engine.cancel
    crashed: list[str] = []

    def cancel_once(run_id: str, *args: Any, **kwargs: Any) -> Any:
        if not crashed:
            crashed.append(run_id)
            raise SimulatedCrash("the parent's worker died before its cancels")
        return real(run_id, *args, **kwargs)

    runner.engine.cancel = cancel_once  # type: ignore[method-assign]
    run = runner.start("first", {"items": [0, 5], "window": 2, "rule": "first_successful"})
    runner.run_until_idle()
    runner.advance(minutes=10)  # the dead worker's lease ends: a takeover replays
    assert crashed
    kids = children(runner, run.run_id)
    assert kids[1].status == RunStatus.CANCELED
    assert runner.get_run(run.run_id).output == '["succeeded","canceled"]'


def test_a_canceled_open_child_runs_its_compensations() -> None:
    app = make_app()
    undone: list[int] = []

    def book(n: int) -> int:
        return n

    def unbook(result: int, n: int) -> None:
        undone.append(result)

    @app.workflow(name="booked")
    def booked(ctx: Context, n: int) -> int:
        ctx.step(book, n, name="book", compensate=unbook)
        ctx.sleep(timedelta(hours=n))
        return n

    @app.workflow(name="books")
    def books(ctx: Context) -> list[str]:
        result = ctx.map(booked, [0, 3], distributed=True, completion="first_successful")
        return [i.status for i in result]

    runner = LocalRunner(app)
    run = runner.start("books")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == '["succeeded","canceled"]'
    assert undone == [3]


def test_children_ending_while_the_parent_looks_keep_it_in_one_invocation() -> None:
    """Children that end while the parent runs (their workers are elsewhere): each look
    takes their reports and the parent goes on, with no reload of its history."""
    runner = LocalRunner(make_app())
    real = runner.memory_ledger.get_steps
    looks: list[int] = []

    def get_steps(run_id: str, positions: list[str]) -> Any:
        looks.append(len(positions))
        assert len(looks) < 100, "the parent keeps looking without moving on"
        parked = []
        while (item := runner.invoker.pop()) is not None:  # the children's workers run
            if item.run_id == run_id:
                parked.append(item)
            else:
                runner._invoke(item.run_id, item.hop, item.reason)
        runner.invoker.queue.extend(parked)
        return real(run_id, positions)

    runner.memory_ledger.get_steps = get_steps  # type: ignore[method-assign]
    run = runner.start("first", {"items": [0] * 7, "window": 3})
    first = runner.invoker.pop()
    assert first is not None
    runner._invoke(first.run_id, first.hop, first.reason)
    assert runner.get_run(run.run_id).output == '["succeeded"' + ',"succeeded"' * 6 + "]"
    assert runner.call_count("ledger.load") <= 1 and len(looks) >= 2
