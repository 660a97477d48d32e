"""Retention: what happens to a run after its item expires, and to an id that comes back.

A keyed start derives its run id from its key. Once the first run's item has expired
(DynamoDB TTL, ``retention`` after it finished) the same key starts a new run under the
same id, while the partition may still hold the old run's steps and signals (TTL deletes
only the item that carries ``purge_at``; the purge on the table's stream removes the rest,
some time later). The new run must not replay them, nor take the old run's effects for its
own.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, EngineConfig, RunStatus, current_step
from durable.errors import CallbackNotFound
from durable.testing import LocalRunner, SimulatedCrash


def welcome_app(sent: list[str], keys: list[str]) -> App:
    app = App()

    def deliver(email: str) -> str:
        sent.append(email)
        return f"msg-{len(sent)}"

    def send_welcome(email: str) -> str:
        step = current_step()
        keys.append(step.idempotency_key)
        # Through the effect store, as a real integration would: a retry reconciles.
        return str(step.effect("email", lambda key: deliver(email)))

    @app.workflow(name="welcome")
    def welcome(ctx: Context, email: str) -> str:
        message = ctx.step(send_welcome, email)
        ctx.wait_for_signal("clicked", timeout=timedelta(days=1))
        return message

    return app


def finish(runner: LocalRunner, email: str) -> str:
    run = runner.start("welcome", email, idempotency_key="signup-42")
    runner.run_until_idle()
    runner.signal(run.run_id, "clicked")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    return run.run_id


def test_a_key_reused_after_retention_starts_a_fresh_run_despite_leftovers() -> None:
    # GIVEN a keyed run that finished, then expired: TTL deleted its run item, and the
    # purge has not yet removed its step and signal
    sent: list[str] = []
    keys: list[str] = []
    runner = LocalRunner(welcome_app(sent, keys))
    first = finish(runner, "old@example.com")
    runner.advance(days=31)
    assert runner.memory_ledger.expire(runner.clock.now()) == [first]
    assert len(runner.memory_ledger._steps[first]) == 2  # the leftovers
    # WHEN the same key starts the workflow again
    second = runner.start("welcome", "new@example.com", idempotency_key="signup-42")
    runner.run_until_idle()
    # THEN it is a new run under the same id that did its own work: the email was sent
    # again (its effect key is new), and it waits for a click of its own
    assert second.run_id == first
    assert sent == ["old@example.com", "new@example.com"]
    assert keys[0] != keys[1] and keys[0].startswith(first) and keys[1].startswith(first)
    stored = runner.get_run(first)
    assert stored.status == RunStatus.WAITING
    (step, wait) = runner.history(first)
    assert step.output == '"msg-2"' and wait.kind == "signal"
    runner.signal(first, "clicked")
    runner.run_until_idle()
    assert runner.get_run(first).output == '"msg-2"'


def test_expiry_leaves_nothing_of_the_run() -> None:
    sent: list[str] = []
    runner = LocalRunner(welcome_app(sent, []))
    run_id = finish(runner, "a@example.com")
    runner.advance(days=29)
    assert runner.expire() == []  # within retention: kept whole
    runner.advance(days=2)
    assert runner.expire() == [run_id]
    assert runner.memory_ledger.load(run_id) is None
    assert runner.memory_ledger._steps[run_id] == {}
    assert runner.memory_ledger._signals[run_id] == []


def test_a_fork_that_crashes_midway_leaves_no_run_to_execute() -> None:
    # GIVEN a finished run, and a fork that dies before it copied the step it keeps
    app = App()
    done: list[str] = []

    def a() -> str:
        done.append("a")
        return "a"

    def b() -> str:
        done.append("b")
        return "b"

    @app.workflow(name="pair")
    def pair(ctx: Context) -> str:
        return ctx.step(a) + ctx.step(b)

    runner = LocalRunner(app)
    source = runner.start("pair")
    runner.run_until_idle()
    runner.crash_at("ledger.write_step", call=runner.call_count("ledger.write_step") + 1)
    try:
        runner.fork(source.run_id, from_step=2)
    except SimulatedCrash:
        pass
    else:
        raise AssertionError("the fork was expected to crash")
    # WHEN everything due runs
    runner.advance(hours=1)
    # THEN no run started from scratch without the step it was meant to keep
    assert done == ["a", "b"]
    # AND the operator's repeat of the fork works
    fork = runner.fork(source.run_id, from_step=2)
    runner.run_until_idle()
    assert runner.get_run(fork.run_id).output == '"ab"'
    assert done == ["a", "b", "b"]


def test_a_purge_never_touches_a_live_fork() -> None:
    # A fork's copied steps are older than the fork itself, by design: a purge asked for
    # it by hand (the stream never does: fork ids are not reused) must leave them.
    sent: list[str] = []
    runner = LocalRunner(welcome_app(sent, []))
    source = finish(runner, "a@example.com")
    fork = runner.fork(source, from_step=2)
    runner.advance(days=3)
    assert runner.engine.purge_expired(fork.run_id) == 0
    assert [s.position for s in runner.history(fork.run_id)][:1] == ["0001"]


def approval_app(answers: list[Any]) -> App:
    app = App()

    @app.workflow(name="approve")
    def approve(ctx: Context, order: str) -> Any:
        callback = ctx.create_callback("manager")
        answers.append(callback.token)
        return callback.result()

    return app


def reuse_after_expiry(runner: LocalRunner, workflow: str, first_input: Any, then: Any) -> str:
    """Start keyed, cancel, expire the run item only (no purge yet), start again: the new
    run is not claimed yet, so the old run's items are still in its partition."""
    run = runner.start(workflow, first_input, idempotency_key="order-7")
    runner.run_until_idle()
    runner.cancel(run.run_id, "customer left")
    runner.run_until_idle()
    runner.advance(days=31)
    assert runner.memory_ledger.expire(runner.clock.now()) == [run.run_id]
    again = runner.start(workflow, then, idempotency_key="order-7")
    assert again.run_id == run.run_id
    return run.run_id


def test_a_callback_token_of_an_expired_run_cannot_answer_the_new_one() -> None:
    # GIVEN a keyed run canceled while its callback was pending, expired, and a new run
    # under the same id waiting on a callback at the same position
    tokens: list[Any] = []
    runner = LocalRunner(approval_app(tokens))
    run_id = reuse_after_expiry(runner, "approve", "old", "new")
    (old_token,) = tokens
    # WHEN the old approval link is used before the new run's first invocation
    # THEN it is unknown, and the new run waits for its own approval
    with pytest.raises(CallbackNotFound):
        runner.complete_callback(old_token, "approved long ago")
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.WAITING
    new_token = tokens[-1]
    assert new_token != old_token
    runner.complete_callback(new_token, "approved now")
    runner.run_until_idle()
    assert runner.get_run(run_id).output == '"approved now"'


def test_a_signal_key_used_by_an_expired_run_is_not_a_repeat_for_the_new_one() -> None:
    # GIVEN the old run under this id finished on a keyed signal, then expired
    app = App()

    @app.workflow(name="collect")
    def collect(ctx: Context, order: str) -> Any:
        return ctx.wait_for_signal("paid")

    runner = LocalRunner(app)
    run = runner.start("collect", "old", idempotency_key="order-7")
    runner.run_until_idle()
    runner.signal(run.run_id, "paid", {"amount": 1}, key="payment-1")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    runner.advance(days=31)
    assert runner.memory_ledger.expire(runner.clock.now()) == [run.run_id]  # no purge yet
    runner.start("collect", "new", idempotency_key="order-7")
    # WHEN the same signal (key and payload) is sent to the new run, before its first
    # invocation purged the old run's items
    sent = runner.signal(run.run_id, "paid", {"amount": 1}, key="payment-1")
    runner.run_until_idle()
    # THEN it is a new signal, not a repeat of the old run's, and the new run takes it
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    (wait,) = runner.history(run.run_id)
    assert wait.detail is not None and wait.detail.get("signal_id") == sent.signal_id


def test_retention_must_outlast_the_leftover_margin() -> None:
    with pytest.raises(ValueError, match="retention"):
        EngineConfig(retention=timedelta(minutes=10))
