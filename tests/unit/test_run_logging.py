"""``ctx.logger`` writes each line once per run, not once per replay; every line names its
run (``durable.engine.run_logging``)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, RunKeys, current_step
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker
from durable.core.config import EngineConfig
from durable.engine.deploy_check import ReadOnlyLedger, check_deploy
from durable.engine.engine import Engine
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit

mine = logging.getLogger("shop.payments")
CHARGE = "_app.<locals>.charge"  # a step's name: its qualified name


def _app() -> App:
    app = App()

    @app.step
    def charge(amount: int) -> str:
        current_step().logger.info("charging %s", amount)
        mine.info("library line")
        return f"ch-{amount}"

    @app.workflow(name="order", version=3)
    def order(ctx: Context, amount: int) -> str:
        ctx.logger.info("order started")
        receipt = charge(amount)
        ctx.logger.info("charged", extra={"receipt": receipt})
        ctx.sleep(timedelta(hours=1))
        ctx.logger.info("woke up")
        mine.info("workflow line")
        charge(amount + 1)
        ctx.logger.info("done")
        return receipt

    return app


def _records(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == name]


def test_workflow_lines_are_written_once_across_invocations(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    runner = LocalRunner(_app())
    run = runner.start("order", 5)
    runner.run_until_idle()  # the first invocation: to the sleep
    runner.advance(hours=2)  # the second: replays the first half, then runs the rest
    assert runner.get_run(run.run_id).status.value == "SUCCEEDED"
    lines = [r.getMessage() for r in _records(caplog, "durable.workflow")]
    assert lines == ["order started", "charged", "woke up", "done"]
    first, charged, woke, done = _records(caplog, "durable.workflow")
    assert (first.run_id, first.workflow, first.version) == (run.run_id, "order", 3)  # type: ignore[attr-defined]
    assert first.position is None  # type: ignore[attr-defined]  # before any durable call
    assert (charged.position, charged.receipt) == ("0001", "ch-5")  # type: ignore[attr-defined]
    assert woke.position == "0002"  # type: ignore[attr-defined]  # the sleep
    assert done.position == "0003"  # type: ignore[attr-defined]


def test_step_lines_carry_the_step_and_its_attempt(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    runner = LocalRunner(_app())
    run = runner.start("order", 5)
    runner.run_until_idle()
    runner.advance(hours=2)
    steps = _records(caplog, "durable.step")
    assert [r.getMessage() for r in steps] == ["charging 5", "charging 6"]
    keys = [(r.run_id, r.step, r.attempt, r.position, r.version) for r in steps]  # type: ignore[attr-defined]
    assert keys == [(run.run_id, CHARGE, 1, "0001", 3), (run.run_id, CHARGE, 1, "0003", 3)]


def test_a_users_own_logger_gets_the_keys_through_the_filter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    keys = RunKeys()
    mine.addFilter(keys)
    try:
        runner = LocalRunner(_app())
        run = runner.start("order", 5)
        runner.run_until_idle()
        runner.advance(hours=2)
        mine.info("outside any run")
    finally:
        mine.removeFilter(keys)
    lines = {r.getMessage(): r for r in _records(caplog, "shop.payments")}
    in_step = lines["library line"]
    assert (in_step.run_id, in_step.step, in_step.attempt) == (run.run_id, CHARGE, 1)  # type: ignore[attr-defined]
    in_workflow = lines["workflow line"]
    assert (in_workflow.run_id, in_workflow.position) == (run.run_id, "0002")  # type: ignore[attr-defined]
    assert not hasattr(in_workflow, "step")
    assert not hasattr(lines["outside any run"], "run_id")


def test_a_deploy_check_replays_without_logging(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    runner = LocalRunner(_app())
    runner.start("order", 5)
    runner.run_until_idle()  # asleep after "charged"
    caplog.clear()
    engine = Engine(
        _app(), ReadOnlyLedger(runner.memory_ledger), MemoryInvoker(), MemoryEffectStore()
    )
    assert check_deploy(engine, ["order"]).broken == []
    assert _records(caplog, "durable.workflow") == []


def test_hand_offs_do_not_repeat_lines_already_past(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    app = App()

    @app.step
    def tick(i: int) -> int:
        return i

    @app.workflow(name="ticks")
    def ticks(ctx: Context) -> Any:
        for i in range(6):
            tick(i)
            ctx.logger.info("after %s", i)

    runner = LocalRunner(app, config=EngineConfig(steps_per_invocation=2))
    runner.start("ticks")
    runner.run_until_idle()
    lines = [r.getMessage() for r in _records(caplog, "durable.workflow")]
    # The line right before a hand-off runs in both invocations (documented): at most once
    # more per hand-off, never once per replayed step.
    assert sorted(set(lines)) == [f"after {i}" for i in range(6)]
    assert len(lines) <= 6 + 2
