"""The peer's callback suite (requirements 4-1 to 4-19) on our API: ``ctx.create_callback``
and ``Callback.result()``; the external system is ``LocalRunner.complete_callback`` (and
``heartbeat``) with the callback's token, as the callback URL's route would be.

In our terms throughout: the peer's ``CallbackError`` is our ``CallbackFailed`` (the sender
reported a failure) or ``CallbackTimeout`` (the timeout or a missed heartbeat passed)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel

from durable import App, CallbackFailed, CallbackTimeout, Context, RunStatus, StepStatus
from durable.core.model import StepKind
from durable.testing import LocalRunner
from tests.conformance.helpers import play

REJECTED = {"type": "RejectedError", "message": "not approved"}


def keep(tokens: dict[str, str], name: str, token: str) -> None:
    """Note a callback's token (workflow code runs again on replay: the same token)."""
    tokens[name] = token


def test_CALLBACK_4_1_create_a_callback_and_wait_for_its_answer() -> None:
    """4-1: a callback named from the input; the sender's success payload is the result."""
    app = App()
    tokens: dict[str, str] = {}

    @app.workflow
    def basic(ctx: Context, name: str) -> Any:
        callback = ctx.create_callback(name)
        keep(tokens, name, callback.token)
        return callback.result()

    played = play(app, "basic", "cbName0001")
    assert played.status == RunStatus.WAITING
    (record,) = played.records()
    assert (record.kind, record.name, record.status) == (
        StepKind.CALLBACK,
        "cbName0001",
        StepStatus.WAITING,
    )
    played.runner.advance(seconds=1)
    played.runner.complete_callback(tokens["cbName0001"], "pAyLoAd123456")
    played.runner.run_until_idle()
    assert played.result() == "pAyLoAd123456"
    assert played.invocations == ["suspended", "succeeded"]
    assert played.records()[0].status == StepStatus.DONE


def test_CALLBACK_4_2_callback_with_a_fixed_name() -> None:
    """4-2: a callback named "approval" is recorded under that name and answered."""
    app = App()
    tokens: dict[str, str] = {}

    @app.workflow
    def approval(ctx: Context) -> Any:
        callback = ctx.create_callback("approval")
        keep(tokens, "approval", callback.token)
        return callback.result()

    played = play(app, "approval")
    assert [r.name for r in played.records()] == ["approval"]
    played.runner.complete_callback(tokens["approval"], "ok")
    played.runner.run_until_idle()
    assert played.result() == "ok"


def test_CALLBACK_4_3_callback_times_out() -> None:
    """4-3: a callback with a 5-second timeout that nobody answers times out and fails
    the run (``CallbackTimeout``)."""
    app = App()

    @app.workflow
    def times_out(ctx: Context, name: str) -> Any:
        return ctx.create_callback(name, timedelta(seconds=5)).result()

    played = play(app, "times_out", "cbName0003")
    assert played.seconds_after_start(played.records()[0].expires_at) == 5
    played.advance(seconds=10)
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "CallbackTimeout"
    assert played.invocations == ["suspended", "failed"]
    assert played.records()[0].status == StepStatus.TIMED_OUT


def test_CALLBACK_4_4_missed_heartbeat_times_the_callback_out() -> None:
    """4-4: a callback with a 5-second ``heartbeat_timeout`` and no heartbeat times out
    after 5 seconds and fails the run."""
    app = App()

    @app.workflow
    def heartbeat_missed(ctx: Context, name: str) -> Any:
        return ctx.create_callback(name, heartbeat_timeout=timedelta(seconds=5)).result()

    played = play(app, "heartbeat_missed", "cbName0004")
    assert played.seconds_after_start(played.records()[0].expires_at) == 5
    played.advance(seconds=6)
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "CallbackTimeout"
    assert played.records()[0].status == StepStatus.TIMED_OUT


def test_CALLBACK_4_5_heartbeat_keeps_the_callback_alive() -> None:
    """4-5: a heartbeat before the 10-second heartbeat timeout moves the expiry on; the
    success sent after the first interval has passed is the result."""
    app = App()
    tokens: dict[str, str] = {}

    @app.workflow
    def heartbeat_kept(ctx: Context, name: str) -> Any:
        callback = ctx.create_callback(name, heartbeat_timeout=timedelta(seconds=10))
        keep(tokens, name, callback.token)
        return callback.result()

    played = play(app, "heartbeat_kept", "cbName0005")
    played.advance(seconds=8)
    played.runner.heartbeat(tokens["cbName0005"])
    assert played.seconds_after_start(played.records()[0].expires_at) == 18
    played.advance(seconds=8)  # past the first expiry (10 s)
    assert played.status == RunStatus.WAITING
    played.runner.complete_callback(tokens["cbName0005"], "pAyLoAd")
    played.runner.run_until_idle()
    assert played.result() == "pAyLoAd"


def test_CALLBACK_4_6_sender_reports_a_failure() -> None:
    """4-6: the sender reports a failure; uncaught, it fails the run (``CallbackFailed``
    with the sender's type and message)."""
    app = App()
    tokens: dict[str, str] = {}

    @app.workflow
    def rejected(ctx: Context, name: str) -> Any:
        callback = ctx.create_callback(name)
        keep(tokens, name, callback.token)
        return callback.result()

    played = play(app, "rejected", "cbName0006")
    played.runner.complete_callback(tokens["cbName0006"], error=REJECTED)
    played.runner.run_until_idle()
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "CallbackFailed"
    assert "RejectedError: not approved" in played.error_message()
    assert played.invocations == ["suspended", "failed"]


def test_CALLBACK_4_7_callback_then_a_step_then_a_failure() -> None:
    """4-7: create a callback, run a step, wait: the sender's failure fails the run, and
    the step is not run again on that replay."""
    app = App()
    tokens: dict[str, str] = {}
    bodies: list[str] = []

    def work() -> str:
        bodies.append("work")
        return "done"

    @app.workflow
    def step_between(ctx: Context, name: str) -> Any:
        callback = ctx.create_callback(name)
        keep(tokens, name, callback.token)
        ctx.step(work)
        return callback.result()

    played = play(app, "step_between", "cbName0007")
    assert [r.kind for r in played.records()] == [StepKind.CALLBACK, StepKind.STEP]
    played.runner.complete_callback(tokens["cbName0007"], error=REJECTED)
    played.runner.run_until_idle()
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "CallbackFailed"
    assert bodies == ["work"]


def test_CALLBACK_4_8_callback_then_a_step_then_a_timeout() -> None:
    """4-8: create a callback with a 5-second timeout, run a step, wait: nobody answers,
    and the timeout fails the run."""
    app = App()

    def work() -> str:
        return "done"

    @app.workflow
    def step_then_timeout(ctx: Context, name: str) -> Any:
        callback = ctx.create_callback(name, timedelta(seconds=5))
        ctx.step(work)
        return callback.result()

    played = play(app, "step_then_timeout", "cbName0008", until=timedelta(seconds=10))
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "CallbackTimeout"
    assert played.invocations == ["suspended", "failed"]


def test_CALLBACK_4_9_callback_answered_during_a_wait() -> None:
    """4-9: create a callback, wait 5 s, then take its result: the success arriving during
    the wait resumes the run, which finds the wait pending and suspends again; after the
    wait it returns the answer (three invocations)."""
    app = App()
    tokens: dict[str, str] = {}

    @app.workflow
    def answered_in_wait(ctx: Context, name: str) -> Any:
        callback = ctx.create_callback(name)
        keep(tokens, name, callback.token)
        ctx.sleep(timedelta(seconds=5))
        return callback.result()

    played = play(app, "answered_in_wait", "cbName0009")
    played.advance(seconds=1)
    played.runner.complete_callback(tokens["cbName0009"], "pAyLoAd")
    played.advance(seconds=5)
    assert played.result() == "pAyLoAd"
    assert played.invocations == ["suspended", "suspended", "succeeded"]


def test_CALLBACK_4_10_failure_reported_during_a_wait() -> None:
    """4-10: as 4-9, but the sender reports a failure: the run fails after the wait."""
    app = App()
    tokens: dict[str, str] = {}

    @app.workflow
    def failed_in_wait(ctx: Context, name: str) -> Any:
        callback = ctx.create_callback(name)
        keep(tokens, name, callback.token)
        ctx.sleep(timedelta(seconds=5))
        return callback.result()

    played = play(app, "failed_in_wait", "cbName0010")
    played.advance(seconds=1)
    played.runner.complete_callback(tokens["cbName0010"], error=REJECTED)
    played.advance(seconds=5)
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "CallbackFailed"
    assert played.invocations == ["suspended", "suspended", "failed"]


def test_CALLBACK_4_11_callback_times_out_during_a_wait() -> None:
    """4-11: a callback with a 3-second timeout, then a 6-second wait: the callback's
    time runs out during the wait, and taking its result after the wait fails the run.

    Differs: the peer wakes the run when the callback times out (t=3 s) and suspends it
    again; nothing waits on the callback yet, so our run sleeps through to the wait's end
    (t=6 s) and finds the timeout there: two invocations, not three."""
    app = App()

    @app.workflow
    def timeout_in_wait(ctx: Context, name: str) -> Any:
        callback = ctx.create_callback(name, timedelta(seconds=3))
        ctx.sleep(timedelta(seconds=6))
        return callback.result()

    played = play(app, "timeout_in_wait", "cbName0011", until=timedelta(seconds=10))
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "CallbackTimeout"
    assert played.invocations == ["suspended", "failed"]
    callback, sleep = played.records()
    assert callback.status == StepStatus.TIMED_OUT and sleep.status == StepStatus.DONE


def test_CALLBACK_4_12_answer_then_a_wait_then_return_it() -> None:
    """4-12: wait for the callback, then wait 2 s, then return the answer: the replay
    after the wait reads the answer from the ledger (three invocations)."""
    app = App()
    tokens: dict[str, str] = {}

    @app.workflow
    def answer_then_wait(ctx: Context, name: str) -> Any:
        callback = ctx.create_callback(name)
        keep(tokens, name, callback.token)
        answer = callback.result()
        ctx.sleep(timedelta(seconds=2))
        return answer

    played = play(app, "answer_then_wait", "cbName0012")
    played.runner.complete_callback(tokens["cbName0012"], "pAyLoAd")
    played.advance(seconds=3)
    assert played.result() == "pAyLoAd"
    assert played.invocations == ["suspended", "suspended", "succeeded"]


def test_CALLBACK_4_13_caught_failure_then_a_wait() -> None:
    """4-13: the workflow catches the sender's failure, waits 2 s, and returns a message;
    the replay after the wait raises (and catches) the same failure again."""
    app = App()
    tokens: dict[str, str] = {}

    @app.workflow
    def caught_failure(ctx: Context, name: str) -> str:
        callback = ctx.create_callback(name)
        keep(tokens, name, callback.token)
        try:
            message = str(callback.result())
        except CallbackFailed as e:
            message = f"callback failed: {e.error_message}"
        ctx.sleep(timedelta(seconds=2))
        return message

    played = play(app, "caught_failure", "cbName0013")
    played.runner.complete_callback(tokens["cbName0013"], error=REJECTED)
    played.advance(seconds=3)
    assert played.result() == "callback failed: not approved"
    assert played.invocations == ["suspended", "suspended", "succeeded"]


def test_CALLBACK_4_14_caught_timeout_then_a_wait() -> None:
    """4-14: the workflow catches the callback's timeout (3 s), waits 2 s, and succeeds."""
    app = App()

    @app.workflow
    def caught_timeout(ctx: Context, name: str) -> str:
        try:
            message = str(ctx.create_callback(name, timedelta(seconds=3)).result())
        except CallbackTimeout:
            message = "timed out"
        ctx.sleep(timedelta(seconds=2))
        return message

    played = play(app, "caught_timeout", "cbName0014", until=timedelta(seconds=10))
    assert played.result() == "timed out"
    assert played.invocations == ["suspended", "suspended", "succeeded"]


class Received(BaseModel):
    id: str
    message: str
    timestamp: datetime


def test_CALLBACK_4_15_answer_decoded_to_a_typed_object() -> None:
    """4-15: the JSON answer becomes a typed object whose timestamp is a date, returned
    as epoch seconds.

    Differs: no custom deserializer is needed: ``result_type=Received`` (a pydantic model)
    decodes the answer, ISO timestamp to ``datetime`` included (the peer configures a
    serdes on the callback)."""
    app = App()
    tokens: dict[str, str] = {}

    @app.workflow
    def typed_answer(ctx: Context, name: str) -> dict[str, Any]:
        callback = ctx.create_callback(name, result_type=Received)
        keep(tokens, name, callback.token)
        got = callback.result()
        assert isinstance(got.timestamp, datetime)
        stamp = int(got.timestamp.timestamp())
        return {"received": {"id": got.id, "message": got.message, "timestamp": stamp}}

    played = play(app, "typed_answer", "cbName0015")
    answer = {"id": "iD123456", "message": "hello", "timestamp": "2026-01-01T00:00:00.000Z"}
    played.runner.complete_callback(tokens["cbName0015"], answer)
    played.runner.run_until_idle()
    assert played.result() == {
        "received": {"id": "iD123456", "message": "hello", "timestamp": 1767225600}
    }


def test_CALLBACK_4_16_answer_decoded_to_a_number() -> None:
    """4-16: the answer 42 is a number; the workflow returns it and its double.

    In our terms: answers are JSON, so 42 arrives as an int; ``result_type=int`` checks it
    (the peer's payload is a string its custom deserializer parses)."""
    app = App()
    tokens: dict[str, str] = {}

    @app.workflow
    def number_answer(ctx: Context, name: str) -> dict[str, int]:
        callback = ctx.create_callback(name, result_type=int)
        keep(tokens, name, callback.token)
        count = callback.result()
        return {"count": count, "doubled": count * 2}

    played = play(app, "number_answer", "cbName0016")
    played.runner.complete_callback(tokens["cbName0016"], 42)
    played.runner.run_until_idle()
    assert played.result() == {"count": 42, "doubled": 84}


def _two_callbacks(order: str) -> tuple[App, dict[str, str]]:
    app = App()
    tokens: dict[str, str] = {}

    @app.workflow
    def two(ctx: Context, names: list[str]) -> list[Any]:
        a_name, b_name = names
        if order == "sequential":
            a = ctx.create_callback(a_name)
            keep(tokens, a_name, a.token)
            first = a.result()
            b = ctx.create_callback(b_name)
            keep(tokens, b_name, b.token)
            return [first, b.result()]
        a = ctx.create_callback(a_name)
        b = ctx.create_callback(b_name)
        keep(tokens, a_name, a.token)
        keep(tokens, b_name, b.token)
        if order == "a-then-b":
            first = a.result()
            return [first, b.result()]
        second = b.result()
        return [a.result(), second]

    return app, tokens


def _answer(runner: LocalRunner, tokens: dict[str, str], name: str, value: str) -> None:
    runner.complete_callback(tokens[name], value)
    runner.run_until_idle()


def test_CALLBACK_4_17_callback_a_answered_then_callback_b_created() -> None:
    """4-17: create A, wait for A; then create B, wait for B; both answers returned."""
    app, tokens = _two_callbacks("sequential")
    played = play(app, "two", ["cbA0000017", "cbB0000017"])
    assert [r.name for r in played.records()] == ["cbA0000017"]
    _answer(played.runner, tokens, "cbA0000017", "payloadA")
    assert [r.name for r in played.records()] == ["cbA0000017", "cbB0000017"]
    _answer(played.runner, tokens, "cbB0000017", "payloadB")
    assert played.result() == ["payloadA", "payloadB"]
    assert played.invocations == ["suspended", "suspended", "succeeded"]


def test_CALLBACK_4_18_two_callbacks_waited_for_in_order() -> None:
    """4-18: create A and B, wait for A then B; A's answer resumes the run, which finds B
    pending; B's answer ends it."""
    app, tokens = _two_callbacks("a-then-b")
    played = play(app, "two", ["cbA0000018", "cbB0000018"])
    assert [r.kind for r in played.records()] == [StepKind.CALLBACK, StepKind.CALLBACK]
    played.advance(seconds=3)
    _answer(played.runner, tokens, "cbA0000018", "payloadA")
    played.advance(seconds=1)
    _answer(played.runner, tokens, "cbB0000018", "payloadB")
    assert played.result() == ["payloadA", "payloadB"]
    assert played.invocations == ["suspended", "suspended", "succeeded"]


def test_CALLBACK_4_19_two_callbacks_waited_for_in_reverse_order() -> None:
    """4-19: create A and B, wait for B then A; A is answered first (the run resumes and
    finds B pending), then B, which ends it."""
    app, tokens = _two_callbacks("b-then-a")
    played = play(app, "two", ["cbA0000019", "cbB0000019"])
    played.advance(seconds=1)
    _answer(played.runner, tokens, "cbA0000019", "payloadA")
    assert played.status == RunStatus.WAITING
    played.advance(seconds=3)
    _answer(played.runner, tokens, "cbB0000019", "payloadB")
    assert played.result() == ["payloadA", "payloadB"]
    assert played.invocations == ["suspended", "suspended", "succeeded"]
