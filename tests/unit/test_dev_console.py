"""``durable dev``'s console: one line per run event, printed only for writes that took effect."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any, cast

from durable import App, Context, RetryPolicy
from durable.local.console import Console, ConsoleLedger, short
from durable.ports import Ledger
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
    assert (
        f"waiting for callback approval: answer with `durable approve {rid} approval`"
        in (waiting[0])
    )
    assert "waiting: sleep cool_off until" in waiting[1]
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
    from durable.model import StepStatus

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
        "1 succeeded, 1 failed"
    ]  # once: the replay reads it
    assert sum(" ✓ step " in line and "hold" in line for line in lines) == 1, lines


def test_durable_show_summarizes_a_batch_decision() -> None:
    from durable.render import batch_summary, render_steps

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
