"""Pins for durable/distributed.py: each fails on a mutant the other tests let live."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from durable import App, Context, RunStatus
from durable.model import StepKind
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

    from durable.clock import FakeClock
    from durable.distributed import LOOK_INTERVAL, _refresh

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
