"""``durable dev``'s console: one line per run event, printed only for writes that took effect."""

from __future__ import annotations

import datetime as wall_clock
import enum
import io
import json
from datetime import timedelta
from typing import Any, cast

import pytest
from pydantic import BaseModel, SecretStr

from durable import App, Context, RetryPolicy, current_step
from durable.core import serde
from durable.core.ports import Ledger
from durable.local.console import Console, ConsoleLedger, short
from durable.testing import LocalRunner


def _watched(app: App) -> tuple[LocalRunner, io.StringIO]:
    runner = LocalRunner(app)
    out = io.StringIO()
    console = Console(out, clock=lambda: 0.0)
    runner.engine.ledger = cast(Ledger, ConsoleLedger(runner.engine.ledger, console))
    runner.engine.endings.ledger = runner.engine.ledger  # as the composition root wraps it
    return runner, out


def _events(out: io.StringIO) -> list[str]:
    """Each line without its time stamp and padding: ``workflow run_id mark text``."""
    return [" ".join(line.split()[1:]) for line in out.getvalue().splitlines()]


def test_a_run_prints_start_steps_waits_answers_and_its_end() -> None:
    app = App()

    @app.step
    def fetch(n: int) -> int:
        return n + 1

    @app.workflow
    def onboard(ctx: Context, n: int) -> int:
        m = fetch(n)
        ok = ctx.wait_for_callback("approval", timeout=timedelta(days=1))
        ctx.sleep(timedelta(hours=1), name="cool_off")
        return m if ok else 0

    runner, out = _watched(app)
    run = runner.start("onboard", 1)
    rid = run.run_id
    runner.run_until_idle()
    runner.complete_wait(rid, "approval", True)
    runner.run_until_idle()
    runner.advance(hours=1)
    lines = _events(out)
    assert lines[0].startswith(f"onboard v1 {rid} ▶ started")
    fetched = [line for line in lines if f"{rid} ✓ step " in line]
    assert len(fetched) == 1 and "fetch (" in fetched[0]  # replays print nothing
    waiting = [line for line in lines if "⏸" in line]
    assert "waiting for callback approval until " in waiting[0]
    assert f"(in 24.0 h): answer with `durable approve {rid} approval` (or reject)" in waiting[0]
    assert "waiting: sleep cool_off until " in waiting[1] and "(in 60 min)" in waiting[1]
    assert any(line.endswith("✉ callback approval answered") for line in lines)
    assert any(line.endswith("▷ resumed") for line in lines)
    assert lines[-1].startswith(f"onboard v1 {rid} ✓ succeeded after")


def test_a_failing_step_prints_each_retry_then_the_failure_and_the_run_end() -> None:
    app = App()

    @app.step(name="flaky", retry=RetryPolicy(max_attempts=2, initial_delay=timedelta(seconds=1)))
    def flaky() -> None:
        raise ConnectionError("upstream\n   is down")

    @app.workflow
    def job(ctx: Context) -> None:
        flaky()

    runner, out = _watched(app)
    rid = runner.start("job").run_id
    runner.run_until_idle()
    runner.advance(seconds=5)
    lines = _events(out)
    retry = [line for line in lines if "↻" in line]
    assert len(retry) == 1
    assert "step flaky attempt 1 failed: ConnectionError: upstream is down" in retry[0]
    assert "retry at" in retry[0] or "retrying" in retry[0]
    assert any("✗ step flaky failed: ConnectionError: upstream is down" in line for line in lines)
    assert lines[-1].startswith(f"job v1 {rid} ✗ failed after")
    assert "ConnectionError" in lines[-1]


def test_signals_and_cancels_are_reported_with_what_to_type() -> None:
    app = App()

    @app.workflow
    def waiter(ctx: Context) -> Any:
        first = ctx.wait_for_signal("go")
        ctx.wait_for_signal("never")
        return first

    runner, out = _watched(app)
    rid = runner.start("waiter").run_id
    runner.run_until_idle()
    runner.signal(rid, "go", {"x": 1})
    runner.run_until_idle()
    runner.cancel(rid, "no longer needed")
    runner.run_until_idle()
    lines = _events(out)
    assert any(f"`durable signal {rid} go --payload" in line for line in lines)
    assert any(line.endswith("✉ signal go received") for line in lines)
    assert any(line.endswith("✓ signal go consumed") for line in lines)
    assert lines[-1].startswith(f"waiter v1 {rid} ■ canceled after")


def test_a_write_that_lost_prints_nothing() -> None:
    """A worker that adopts another's final record did not do the step: no line."""
    from durable.core.model import StepStatus

    app = App()

    @app.step
    def once() -> int:
        return 1

    @app.workflow
    def wf(ctx: Context) -> int:
        return once()

    runner = LocalRunner(app)
    rid = runner.start("wf").run_id
    runner.run_until_idle()
    done = runner.history(rid)[0]
    assert done.status == StepStatus.DONE
    out = io.StringIO()
    ledger = ConsoleLedger(runner.memory_ledger, Console(out))
    from dataclasses import replace

    stale = replace(done, status=StepStatus.RETRYABLE_FAILED, output=None, fence=0)
    assert ledger.write_step(stale) == done
    assert out.getvalue() == ""


def test_short_flattens_and_cuts_long_messages() -> None:
    assert short("a\n  b\tc") == "a b c"
    assert short("bad\x1b[2Jthing\x07") == "bad [2Jthing"  # no escape reaches the terminal
    cut = short("x" * 300, limit=10)
    assert cut == "x" * 9 + "…" and len(cut) == 10


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_coloured_marks_and_a_pipe_plain_text() -> None:
    from durable.local.console import colour_wanted

    tty = _Terminal()
    Console(tty, clock=lambda: 0.0, colour=True).say("R1", "✗", "failed after 2s")
    Console(tty, clock=lambda: 0.0, colour=True).say("R1", "▷", "resumed")
    ended, resumed = tty.getvalue().splitlines()
    assert "\033[31m✗ failed after 2s\033[0m" in ended  # a run's end: all of it in red
    assert "\033[36m▷\033[0m resumed" in resumed  # otherwise the mark only
    plain = io.StringIO()
    Console(plain, clock=lambda: 0.0, colour=False).say("R1", "✗", "failed")
    assert "\033" not in plain.getvalue()
    # who decides: the output and the terminal conventions
    assert colour_wanted(_Terminal(), {}) is True
    assert colour_wanted(io.StringIO(), {}) is False  # a pipe, a file
    assert colour_wanted(_Terminal(), {"NO_COLOR": "1"}) is False
    assert colour_wanted(_Terminal(), {"TERM": "dumb"}) is False
    assert colour_wanted(io.StringIO(), {"FORCE_COLOR": "1"}) is True


def test_a_batch_prints_its_branch_steps_and_its_decision_once() -> None:
    app = App()

    def hold(what: str) -> str:
        return what

    @app.workflow
    def restock(ctx: Context) -> list[str]:
        held = ctx.parallel(
            lambda c: c.step(hold, "a"), lambda c: 1 / 0, completion={"tolerated_failures": 1}
        )
        ctx.sleep(timedelta(minutes=1))
        return held.values()

    runner, out = _watched(app)
    rid = runner.start("restock").run_id
    runner.run_until_idle()
    runner.advance(minutes=2)
    lines = _events(out)
    decided = [line for line in lines if "⑃" in line]
    assert decided == [
        f"restock v1 {rid} ⑃ batch parallel decided: ok (tolerated_failures=1): "
        "1 succeeded, 1 failed; failed: branch 2"
    ]  # once: the replay reads it; the failed branch by its name
    assert sum(" ✓ step " in line and "hold" in line for line in lines) == 1, lines


def test_durable_show_summarizes_a_batch_decision() -> None:
    from durable.ops.render import batch_summary, render_steps

    decision = {
        "rule": "min_successful=1",
        "ok": True,
        "items": [{"s": "succeeded"}, {"s": "canceled"}, {"s": "canceled"}],
    }
    row = {"position": "0004", "name": "quotes", "kind": "batch", "status": "DONE"}
    assert "ok (min_successful=1): 1 succeeded, 2 canceled" in render_steps(
        [{**row, "output": decision}]
    )
    assert batch_summary({"rule": "all", "ok": False, "items": []}) == "failed (all): no branches"
    assert batch_summary({"items": 3}) == "recorded"


class Decision(BaseModel):
    approved: bool
    note: str
    amount: int = 0


def test_a_typed_callback_is_answered_with_the_fields_its_type_needs() -> None:
    """The hint for a typed callback is the command with the type's shape: `durable
    approve RUN name` alone sends `true`, which the API refuses (422) for a model. The
    shape has placeholders, not values: pasted unfilled, it is not JSON and is refused."""
    app = App()

    @app.workflow
    def expense(ctx: Context) -> bool:
        decision: Decision = ctx.wait_for_callback("approval", result_type=Decision)
        return decision.approved

    runner, out = _watched(app)
    rid = runner.start("expense").run_id
    runner.run_until_idle()
    (waiting,) = [line for line in _events(out) if "⏸" in line]
    shape = '{"approved": <true|false>, "note": <text>}'
    assert f"`durable approve {rid} approval --result '{shape}'`" in waiting
    with pytest.raises(ValueError):
        json.loads(shape)  # sent unfilled, the CLI refuses it as JSON
    runner.complete_wait(rid, "approval", {"approved": True, "note": "fine"})
    runner.run_until_idle()
    assert runner.result(rid) is True


def test_the_shape_follows_nested_models_enums_lists_and_plain_types() -> None:
    class Level(enum.Enum):
        LOW = "low"
        HIGH = "high"

    class Line(BaseModel):
        sku: str
        qty: int

    class Order(BaseModel):
        level: Level
        lines: list[Line]
        first: Line
        maybe: Line | None
        pin: SecretStr
        note: str | None = None

    assert serde.example_answer(Order) == (
        '{"level": <"low"|"high">, "lines": [{"sku": <text>, "qty": <integer>}, ...], '
        '"first": {"sku": <text>, "qty": <integer>}, "maybe": {"sku": <text>, "qty": '
        '<integer>}, "pin": <secret text>}'
    )
    assert serde.example_answer(int) == "<integer>"
    assert serde.example_answer(serde.NO_ANNOTATION) == "true"


class Node(BaseModel):
    value: int
    next: Node | None


def test_a_model_that_holds_itself_has_a_shape_not_a_recursion_error() -> None:
    """A self-referencing answer type made the shape recurse for ever: every answer to
    such a callback, a valid one too, was a 500 (the shape was built before validating)."""
    assert serde.example_answer(Node) == '{"value": <integer>, "next": <Node>}'


def test_under_a_time_scale_durations_are_said_in_real_and_virtual_time() -> None:
    """At x3600 a step of a few milliseconds is not "9 min", and a 1-hour sleep ends in
    a second: the console says both clocks."""
    app = App()

    @app.step(name="work")
    def work() -> int:
        return 1

    @app.workflow
    def nap(ctx: Context) -> int:
        ctx.sleep(timedelta(hours=1))
        return work()

    runner = LocalRunner(app)
    out = io.StringIO()
    console = Console(out, clock=lambda: 0.0, scale=3600)
    runner.engine.ledger = cast(Ledger, ConsoleLedger(runner.engine.ledger, console))
    runner.engine.endings.ledger = runner.engine.ledger
    rid = runner.start("nap").run_id
    runner.run_until_idle()
    runner.advance(hours=2)
    lines = _events(out)
    (sleeping,) = [line for line in lines if "⏸" in line]
    assert sleeping.endswith("(in 1.0 s real, 60 min virtual)"), sleeping
    (step,) = [line for line in lines if "✓ step work" in line]
    assert step.endswith("✓ step work (0 ms)"), step  # the runner's clock stood still
    assert lines[-1].startswith(f"nap v1 {rid} ✓ succeeded after")
    assert lines[-1].endswith(" virtual"), lines[-1]
    assert Console(scale=1).span(540) == "9 min"
    assert Console(scale=3600).span(0) == "0 ms"  # the same in both: said once
    assert Console(scale=3600).span(540) == "150 ms real, 9 min virtual"


def test_ctx_logger_lines_print_once_as_console_lines() -> None:
    """`ctx.logger` records reach the console (at INFO, with the console's quiet engine
    logs), once per run however often the code replays, in the console's own format."""
    from durable.aws import _log_to_console
    from durable.engine.run_logging import STEP_LOGGER, WORKFLOW_LOGGER

    app = App()

    @app.step(name="charge")
    def charge(n: int) -> int:
        current_step().logger.warning("card declined once, retried")
        return n

    @app.workflow
    def order(ctx: Context, n: int) -> int:
        ctx.logger.info("order %s received", n)
        ctx.sleep(timedelta(minutes=5))
        charge(n)
        ctx.logger.info("order %s done", n)
        return n

    runner, out = _watched(app)
    saved = [
        (lg, list(lg.handlers), lg.level, lg.propagate) for lg in (WORKFLOW_LOGGER, STEP_LOGGER)
    ]
    console = Console(out, clock=lambda: 0.0)
    try:
        _log_to_console(console)
        _log_to_console(console)  # composed twice in one process: still one line each
        rid = runner.start("order", 7).run_id
        runner.run_until_idle()
        runner.advance(minutes=10)
    finally:
        for logger, handlers, level, propagate in saved:
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate
    lines = _events(out)
    assert [line for line in lines if "»" in line] == [
        f"order v1 {rid} » order 7 received",
        f"order v1 {rid} » warning: step charge: card declined once, retried",
        f"order v1 {rid} » order 7 done",
    ]


def test_telemetry_records_no_metric_when_metrics_are_disabled(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """durable dev's sweeper counts a metric every sweep in one long-lived process;
    Powertools prints a metric set by itself at 100 values, whatever
    POWERTOOLS_METRICS_DISABLED says: disabled must mean nothing is recorded."""
    from durable.ops.observability import Telemetry
    from durable.settings import Settings

    settings = Settings(app="x:app", ledger_table="ledger", idempotency_table="idem")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    telemetry = Telemetry(settings, "sweeper")
    for _ in range(250):
        telemetry.count("SweepInvocations")
        telemetry.milliseconds("SweepMillis", 3.0)
    assert '"_aws"' not in capsys.readouterr().out
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    on = Telemetry(settings, "sweeper")
    for _ in range(100):
        on.count("SweepInvocations")
    assert '"_aws"' in capsys.readouterr().out  # the auto-flush this guards against


def test_the_dev_banner_says_the_time_scale() -> None:
    from durable.local.server import time_banner

    assert time_banner(60).startswith("x60: an hour passes in 60.0 s, a day in 24 min")
    assert time_banner(1).startswith("real")


def test_durable_dev_warns_of_the_clock_read_in_workflow_code_once_per_run() -> None:
    """LocalRunner fails `datetime.now()` in workflow code; durable dev ran it silently.
    Its composition (DURABLE_DETERMINISM_WARNINGS) now warns, once per run and call site
    however often the code replays, and the run goes on as it would deployed."""
    from durable.aws import _log_to_console
    from durable.engine.determinism import WarningGuard
    from durable.engine.run_logging import STEP_LOGGER, WORKFLOW_LOGGER
    from durable.runtime import Runtime
    from durable.settings import Settings

    app = App()

    @app.workflow
    def stamp(ctx: Context) -> str:
        first = wall_clock.datetime.now()  # the mistake
        ctx.sleep(timedelta(minutes=5))
        return first.isoformat()

    runner, out = _watched(app)
    runner.engine.guard = WarningGuard()
    loggers = (WORKFLOW_LOGGER, STEP_LOGGER)
    saved = [(lg, list(lg.handlers), lg.level, lg.propagate) for lg in loggers]
    try:
        _log_to_console(Console(out, clock=lambda: 0.0))
        rid = runner.start("stamp").run_id
        runner.run_until_idle()
        runner.advance(minutes=10)  # replays the call: no second line
    finally:
        for logger, handlers, level, propagate in saved:
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate
    assert runner.get_run(rid).status.value == "SUCCEEDED"
    warned = [line for line in _events(out) if "»" in line]
    assert len(warned) == 1, warned
    assert warned[0].startswith(f"stamp v1 {rid} » warning: workflow code called datetime.now()")
    assert "test_dev_console.py:" in warned[0] and "move it into a step" in warned[0]

    # The composition root picks it from the local-only setting durable dev sets.
    from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger
    from durable.adapters.nonces import MemoryNonceStore
    from durable.runtime import Services
    from durable.settings import LOCAL_ONLY

    services = Services(MemoryLedger(), MemoryEffectStore(), MemoryInvoker(), MemoryNonceStore())
    settings = Settings(app="x:app", ledger_table="ledger", idempotency_table="idem")
    on = settings.model_copy(update={"determinism_warnings": True})
    assert isinstance(Runtime(on, app, services).engine.guard, WarningGuard)
    assert not isinstance(Runtime(settings, app, services).engine.guard, WarningGuard)
    assert "determinism_warnings" in LOCAL_ONLY  # never deployed


def test_an_approval_beaten_by_an_automatic_one_is_not_what_the_run_waits_for() -> None:
    """ "Approval, or approve automatically after an hour" with first_successful: once the
    automatic branch won, the run sleeps a week, and no person is waited on. Its open
    callback under the decided batch is not in waiting_for, nor in Needs attention."""
    app = App()

    @app.workflow
    def expense(ctx: Context) -> str:
        def person(c: Context) -> str:
            c.wait_for_callback("approval", timeout=timedelta(days=3))
            return "person"

        def automatic(c: Context) -> str:
            c.sleep(timedelta(hours=1))
            return "auto"

        ctx.parallel(person, automatic, completion="first_successful")
        ctx.sleep(timedelta(days=7), name="cooldown")
        return "done"

    runner = LocalRunner(app)
    rid = runner.start("expense").run_id
    runner.run_until_idle()
    first = runner.get_run(rid)
    assert first.waiting_for is not None and first.waiting_for.startswith("callback approval")
    listed = runner.memory_ledger.list_runs(needs_attention=True).items
    assert [r.run_id for r in listed] == [rid]
    runner.advance(hours=2)
    later = runner.get_run(rid)
    assert later.waiting_for is not None
    assert later.waiting_for.startswith("sleep cooldown until "), later.waiting_for
    assert runner.memory_ledger.list_runs(needs_attention=True).items == []
