"""Pins on callbacks and signals (durable/engine/waits.py): each test names the mutants it kills.

Mutant ids are those of ``python -m tests.mutation --module durable/engine/waits.py --list``.
Conditions are in ``test_pins_conditions.py``.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from durable import (
    App,
    CallbackFailed,
    CallbackTimeout,
    Context,
    EngineConfig,
    RunStatus,
    current_step,
)
from durable.core.model import StepRecord, StepStatus
from durable.core.tokens import make_token, new_nonce, token_hash
from durable.engine.waits import Callback
from durable.errors import NonDeterminismError
from durable.testing import LocalRunner

# --- names and timeouts --------------------------------------------------------------------


def waiting_app(kind: str, name: str, timeout: Any) -> App:
    app = App()

    @app.workflow
    def flow(ctx: Context) -> Any:
        if kind == "callback":
            return ctx.create_callback(name, timeout=timeout).result()
        return ctx.wait_for_signal(name, timeout=timeout)

    return app


def failure_of(app: App) -> str:
    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    return f"{run.error.type}: {run.error.message}"


@pytest.mark.parametrize("kind", ["callback", "signal"])
def test_a_wait_name_may_be_128_characters_and_no_more(kind: str) -> None:
    """GIVEN a callback or signal wait named with 128, then 129 characters, then ""
    WHEN the workflow waits THEN the first waits; the others fail the run naming the kind of
    wait and the rule.

    Kills waits-e26e8aec (``len(name) > 128`` -> ``>=``), waits-6ee6e793 / 48379105 (the
    name check deleted), waits-1cdbf001 / 3d1fd7f0 (the kind in the message -> "")."""
    runner = LocalRunner(waiting_app(kind, "n" * 128, None))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.WAITING
    for bad in ("n" * 129, ""):
        message = failure_of(waiting_app(kind, bad, None))
        assert f"{kind} name must be a non-empty string of at most 128" in message


@pytest.mark.parametrize("kind", ["callback", "signal"])
@pytest.mark.parametrize("timeout", [timedelta(0), timedelta(seconds=-1), 60])
def test_a_wait_timeout_must_be_a_positive_timedelta(kind: str, timeout: Any) -> None:
    """GIVEN a callback or signal wait with a zero, negative or non-timedelta timeout
    WHEN the workflow waits THEN the run fails with ValueError saying what a timeout is.

    Kills waits-0bc32124 / 3d047775 (the check deleted), waits-5b43d031 (``timeout <=
    timedelta(0)`` -> ``<``), waits-33a03613 (``or`` -> ``and``: a number would reach the
    comparison and fail with a TypeError instead)."""
    message = failure_of(waiting_app(kind, "approval", timeout))
    assert message.startswith("ValueError: timeout must be a positive datetime.timedelta")


@pytest.mark.parametrize("kind", ["callback", "signal"])
def test_a_timed_out_wait_says_what_timed_out(kind: str) -> None:
    """GIVEN a callback or signal wait of 1 hour WHEN nothing arrives THEN CallbackTimeout
    names the kind of wait, its name and position.

    Kills waits-5f35c168 (Callback.result's "callback" -> ""), waits-1cd52ccd / 5dfef13e /
    31acac10 (the signal's)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            if kind == "callback":
                ctx.create_callback("approval", timeout=timedelta(hours=1)).result()
            else:
                ctx.wait_for_signal("approval", timeout=timedelta(hours=1))
        except CallbackTimeout as timeout:
            return str(timeout)
        return "answered"

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.advance(hours=1)
    output = runner.get_run(run_id).output or ""
    assert output.startswith(f"\"{kind} 'approval' at 0001 timed out at ")


@pytest.mark.parametrize("kind", ["callback", "signal wait", "condition"])
def test_a_wait_past_the_run_lifetime_is_refused_naming_the_kind_of_wait(kind: str) -> None:
    """GIVEN a run whose lifetime is one day WHEN it waits on a callback, a signal or a
    condition with a two-day timeout THEN the run fails with ValueError at the call,
    saying which wait's timeout would end after the lifetime.

    Kills waits-337eee8d / 31fa7cae / ad75fc0b (the kind handed to ``_expiry`` -> ""),
    and waits-8f902067 (the signal wait's ``_expiry`` not called: no lifetime check)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> Any:
        timeout = timedelta(days=2)
        if kind == "callback":
            return ctx.create_callback("approval", timeout=timeout).result()
        if kind == "signal wait":
            return ctx.wait_for_signal("approval", timeout=timeout)
        return ctx.wait_for_condition(
            lambda: False, interval=timedelta(hours=1), timeout=timeout, name="ready"
        )

    runner = LocalRunner(app, config=EngineConfig(max_run_lifetime=timedelta(days=1)))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert run.error.type == "ValueError"
    assert run.error.message.startswith(f"this {kind}'s timeout would end at ")


# --- callbacks ---------------------------------------------------------------------------


def callback_app(seen: list[Callback]) -> App:
    app = App()

    @app.workflow
    def flow(ctx: Context) -> Any:
        callback = ctx.create_callback("approval", timeout=timedelta(days=1))
        seen.append(callback)
        try:
            return callback.result()
        except CallbackFailed as failed:
            return {"type": failed.error_type, "message": failed.error_message}

    return app


def test_a_rejection_keeps_the_senders_error_type() -> None:
    """GIVEN a pending callback WHEN it is answered with error {type: Declined} THEN the
    workflow's CallbackFailed carries "Declined" (not the default "Rejected").

    Kills waits-04cd212c (``rec.error_type or "Rejected"`` -> ``and``)."""
    seen: list[Callback] = []
    runner = LocalRunner(callback_app(seen))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.complete_callback(seen[0].token, error={"type": "Declined", "message": "no"})
    runner.run_until_idle()
    assert runner.get_run(run_id).output == '{"type":"Declined","message":"no"}'


def test_the_callback_url_has_one_slash_before_callbacks() -> None:
    """GIVEN a callback base URL configured with a trailing slash WHEN a callback is made
    THEN its URL is ``<base>/callbacks/<token>`` with a single slash.

    Kills waits-c3ff1beb (``rstrip("/")`` -> ``rstrip("")``)."""
    seen: list[Callback] = []
    config = EngineConfig(callback_base_url="https://api.example.com/v1/")
    runner = LocalRunner(callback_app(seen), config=config)
    runner.start("flow")
    runner.run_until_idle()
    assert seen[0].url == f"https://api.example.com/v1/callbacks/{seen[0].token}"


def test_a_callbacks_repr_names_only_the_wait() -> None:
    """GIVEN a callback with a result type WHEN it is printed (a log line, a debugger)
    THEN its repr is its name and position only: not the token or URL (credentials), nor
    the engine's execution it holds, nor its result type.

    Kills waits-085c9b39 (``_execution`` shown in the repr) and waits-97b2c67f
    (``result_type`` shown)."""
    app = App()
    seen: list[str] = []

    @app.workflow
    def flow(ctx: Context) -> None:
        seen.append(repr(ctx.create_callback("approval", result_type=dict)))

    runner = LocalRunner(app)
    runner.start("flow")
    runner.run_until_idle()
    assert seen == ["Callback(name='approval', position='0001')"]


def test_a_callback_answered_by_another_worker_first_carries_that_workers_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN a callback being created WHEN another worker's record of it (its own nonce,
    already answered) lands before ours THEN the callback adopts it: its token is the one
    the other worker sent (rebuilt from the stored nonce), not the one just made, and its
    result is the answer.

    Kills waits-54275663 (``rec.token_nonce != nonce`` negated) and waits-72d03011
    (``token = None`` deleted): either would keep a token the ledger never stored."""
    seen: list[Callback] = []
    runner = LocalRunner(callback_app(seen))
    secret = runner.config.callback_secret
    assert secret is not None
    ledger = runner.memory_ledger
    real = ledger.write_step
    theirs = new_nonce()
    sent: list[str] = []

    def write_step(step: StepRecord, guard: Any = None) -> StepRecord:
        if step.kind == "callback" and not sent:
            sent.append(make_token(secret, step.run_id, step.position, theirs))
            answered = replace(
                step,
                status=StepStatus.DONE,
                output='"yes"',
                token_nonce=theirs,
                token_hash=token_hash(sent[0]),
            )
            real(answered)
        return real(step, guard)

    monkeypatch.setattr(ledger, "write_step", write_step)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert seen[0].token == sent[0]
    assert runner.get_run(run_id).output == '"yes"'


def test_a_callback_whose_key_left_the_secret_is_remade_with_the_recorded_nonce() -> None:
    """GIVEN a callback pending under the old key WHEN the old key is dropped and the run
    replays THEN the callback's token is made again with the current key and the nonce on
    record (the run's own token, though answers to the one sent are refused).

    Kills waits-d31a58bc (that token not made), waits-8eb28a77 / 9c187952 (the recorded
    nonce replaced by "" or "mutated")."""
    seen: list[Callback] = []
    runner = LocalRunner(callback_app(seen), config=EngineConfig(callback_secret=b"o" * 32))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.engine.config = replace(runner.engine.config, callback_secret=b"n" * 32)
    runner.engine.resume(run_id, reason="replay")
    nonce = runner.history(run_id)[0].token_nonce
    assert nonce is not None
    assert seen[-1].token == make_token(b"n" * 32, run_id, "0001", nonce)
    assert seen[-1].token != seen[0].token


def test_a_callback_timer_that_fires_early_is_rearmed() -> None:
    """GIVEN a callback with a 1-hour timeout (a timer armed for its expiry)
    WHEN the timer fires half an hour early THEN the run waits again under a re-armed timer.

    Kills waits-943157c1 (``replayed=True`` -> False in _await's suspend)."""
    runner = LocalRunner(waiting_app("callback", "approval", timedelta(hours=1)))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.timers.armed.clear()
    runner.advance(minutes=30)
    assert runner.engine.resume(run_id, reason="timer").result == "suspended"
    assert [name for name in runner.timers.armed if name.startswith(f"{run_id}-0001-r")]


DIVERGENCES = {"count": 0}


def test_a_callback_result_after_caught_non_determinism_raises_it_again() -> None:
    """GIVEN a workflow that made a callback, then, on replay, reaches a step whose name
    differs from the recorded one and catches the NonDeterminismError
    WHEN it then waits for the callback's result THEN the error is raised again: code that
    caught it may not go on diverging, and the run is parked FAILED for attention.

    Kills waits-d3d71e58 (``x.check_cancel()`` deleted from _await)."""
    app = App()
    DIVERGENCES["count"] = 0

    def work() -> str:
        return "done"

    @app.workflow
    def flow(ctx: Context) -> Any:
        callback = ctx.create_callback("approval")
        DIVERGENCES["count"] += 1
        with contextlib.suppress(NonDeterminismError):
            ctx.step(work, name=f"work-{DIVERGENCES['count']}")
        return callback.result()

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.WAITING
    runner.engine.resume(run_id, reason="replay")
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.needs_attention


# --- signals -----------------------------------------------------------------------------


def test_a_consumed_signal_is_recorded_with_its_id_and_arrival() -> None:
    """GIVEN a signal sent before the workflow waits for it WHEN the wait consumes it THEN
    the wait's DONE record names the signal and when it arrived.

    Kills waits-c416fd3f (the "received_at" key -> "")."""
    runner = LocalRunner(waiting_app("signal", "go", None))
    run_id = runner.start("flow").run_id
    signal = runner.signal(run_id, "go", {"n": 1})
    runner.run_until_idle()
    assert runner.get_run(run_id).output == '{"n":1}'
    step = runner.history(run_id)[0]
    assert step.detail == {"signal_id": signal.signal_id, "received_at": signal.received_at}


def timing_out_then_sleeping_app(kind: str) -> App:
    """A wait of 1 hour that times out, is caught, and an hour's sleep after it: the run's
    output is computed on the replay after the sleep, from the recorded timeout."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            if kind == "signal":
                ctx.wait_for_signal("approval", timeout=timedelta(hours=1))
            else:
                ctx.wait_for_condition(
                    lambda: False,
                    interval=timedelta(minutes=30),
                    timeout=timedelta(hours=1),
                    name="approval",
                )
        except CallbackTimeout as timeout:
            message = str(timeout)
        ctx.sleep(timedelta(hours=1))
        return message

    return app


@pytest.mark.parametrize("kind", ["signal", "condition"])
def test_a_replayed_timeout_says_what_timed_out(kind: str) -> None:
    """GIVEN a signal or condition wait that timed out (caught by the workflow), then a sleep
    WHEN the run wakes and replays the recorded timeout THEN its message names the kind of
    wait, as it did the first time.

    Kills waits-31acac10 (the signal replay's "signal" -> "") and waits-bed8479e (the
    condition replay's "condition" -> "")."""
    runner = LocalRunner(timing_out_then_sleeping_app(kind))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    for _ in range(4):
        runner.advance(minutes=30)
    output = runner.get_run(run_id).output or ""
    assert output.startswith(f"\"{kind} 'approval' at 0001 timed out at ")


def test_a_signal_whose_wait_timed_out_meanwhile_raises_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN a signal waiting to be consumed WHEN the wait turned TIMED_OUT (another worker)
    just before this one records the consumption THEN the workflow gets the timeout, naming
    the signal wait.

    Kills waits-5dfef13e (the "signal" -> "" where the consumption lost)."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            return str(ctx.wait_for_signal("approval", timeout=timedelta(hours=1)))
        except CallbackTimeout as timeout:
            return str(timeout)

    runner = LocalRunner(app)
    ledger = runner.memory_ledger
    real_consume, real_write = ledger.consume_signal, ledger.write_step

    def consume_signal(step: StepRecord, signal: Any, guard: Any) -> StepRecord:
        real_write(replace(step, status=StepStatus.TIMED_OUT, output=None, detail=None))
        return real_consume(step, signal, guard)

    monkeypatch.setattr(ledger, "consume_signal", consume_signal)
    run_id = runner.start("flow").run_id
    runner.signal(run_id, "approval", "yes")
    runner.run_until_idle()
    assert (runner.get_run(run_id).output or "").startswith("\"signal 'approval' at 0001")


def test_a_workflow_that_catches_every_error_cannot_go_on_after_losing_the_lease() -> None:
    """GIVEN a signal sent before the run's first invocation, and a run taken over by
    another worker (fence and owner changed) while its first step ran
    WHEN the workflow, which wraps its signal wait in ``except Exception``, consumes the
    signal THEN the fenced consumption is refused and LeaseLost (not an Exception) ends
    the invocation: the workflow's handler never runs and the signal stays unconsumed.

    Kills waits-6716b26a (``raise LeaseLost() from e`` deleted: an UnboundLocalError
    reaches the workflow's handler, which goes on as if the wait had failed)."""
    app = App()
    box: list[LocalRunner] = []
    handled: list[str] = []

    @app.step(name="first")
    def first() -> str:
        box[0].memory_ledger.patch_run(current_step().run_id, {"fence": 99, "lease_owner": "w2"})
        return "a"

    @app.workflow
    def flow(ctx: Context) -> Any:
        first()
        try:
            return ctx.wait_for_signal("go")
        except Exception as e:  # what careless workflow code does
            handled.append(type(e).__name__)
            return "gave up"

    runner = LocalRunner(app)
    box.append(runner)
    run_id = runner.start("flow").run_id
    runner.signal(run_id, "go", 1)
    outcomes = runner.run_until_idle()
    assert "lease_lost" in [o.result for o in outcomes]
    assert handled == []
    assert [s.name for s in runner.history(run_id)] == ["first"]
    loaded = runner.memory_ledger.load(run_id)
    assert loaded is not None
    assert [s.consumed_by for s in loaded.signals] == [None]
