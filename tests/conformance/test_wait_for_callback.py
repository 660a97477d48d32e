"""The peer's wait-for-callback suite (requirements 7-1 to 7-15) on our API:
``ctx.wait_for_callback(name, timeout, submit, heartbeat_timeout=)``.

In our terms throughout: the peer wraps the operation in a context record (``ContextStarted``,
SubType WaitForCallback) holding the callback and the submitter step. Ours records the
same two things at consecutive positions of the caller's sequence, with no wrapper: the
callback (named ``name``) and the submitter, a durable step named ``<name>.submit``. A
failure is our ``CallbackFailed``, a timeout or a missed heartbeat ``CallbackTimeout``,
a submitter that fails for good ``StepFailed``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from durable import (
    App,
    Callback,
    CallbackFailed,
    CallbackTimeout,
    Context,
    RetryPolicy,
    RunStatus,
    StepStatus,
    current_step,
)
from durable.core.model import StepKind
from tests.conformance.helpers import children, play

REJECTED = {"type": "RejectedError", "message": "not approved"}


class Sender:
    """The external system: the submitter hands it the callback, the test answers it."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.submitted = 0

    def submit(self, callback: Callback) -> None:
        self.submitted += 1
        self.tokens.append(callback.token)

    @property
    def token(self) -> str:
        return self.tokens[-1]


def test_WAIT_FOR_CALLBACK_7_1_submitter_then_success() -> None:
    """7-1: the submitter gets the callback (its token) and returns; the run suspends
    until the sender's success payload, which is the result."""
    app = App()
    sender = Sender()

    @app.workflow
    def basic(ctx: Context, name: str) -> Any:
        return ctx.wait_for_callback(name, submit=sender.submit)

    played = play(app, "basic", "cbName0001")
    assert played.shape() == [
        ("0001", "callback", "cbName0001", "WAITING"),
        ("0002", "step", "cbName0001.submit", "DONE"),
    ]
    played.runner.complete_callback(sender.token, "pAyLoAd123456")
    played.runner.run_until_idle()
    assert played.result() == "pAyLoAd123456"
    assert played.invocations == ["suspended", "succeeded"]
    assert sender.submitted == 1


def test_WAIT_FOR_CALLBACK_7_2_fixed_name() -> None:
    """7-2: the operation named "approval": its callback and submitter carry the name."""
    app = App()
    sender = Sender()

    @app.workflow
    def approval(ctx: Context) -> Any:
        return ctx.wait_for_callback("approval", submit=sender.submit)

    played = play(app, "approval")
    assert [r.name for r in played.records()] == ["approval", "approval.submit"]
    played.runner.complete_callback(sender.token, "yes")
    played.runner.run_until_idle()
    assert played.result() == "yes"


def test_WAIT_FOR_CALLBACK_7_3_anonymous_submitter() -> None:
    """7-3: an inline (anonymous) submitter.

    Differs: the operation's name is required in our API (it names the wait in the ledger,
    the console and the operator's answer), so "no name" has no equivalent; an anonymous
    submitter (a lambda) is accepted, named after the operation."""
    app = App()
    tokens: list[str] = []

    @app.workflow
    def anonymous(ctx: Context) -> Any:
        return ctx.wait_for_callback("cb", submit=lambda callback: tokens.append(callback.token))

    played = play(app, "anonymous")
    assert [r.name for r in played.records()] == ["cb", "cb.submit"]
    played.runner.complete_callback(tokens[-1], "answer")
    played.runner.run_until_idle()
    assert played.result() == "answer"


def test_WAIT_FOR_CALLBACK_7_4_failure_fails_the_run() -> None:
    """7-4: the sender reports a failure; uncaught, it fails the run."""
    app = App()
    sender = Sender()

    @app.workflow
    def rejected(ctx: Context, name: str) -> Any:
        return ctx.wait_for_callback(name, submit=sender.submit)

    played = play(app, "rejected", "cbName0004")
    played.runner.complete_callback(sender.token, error=REJECTED)
    played.runner.run_until_idle()
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "CallbackFailed"
    assert played.invocations == ["suspended", "failed"]


def test_WAIT_FOR_CALLBACK_7_5_timeout_fails_the_run() -> None:
    """7-5: a 3-second timeout with no answer times the wait out and fails the run."""
    app = App()
    sender = Sender()

    @app.workflow
    def times_out(ctx: Context, name: str) -> Any:
        return ctx.wait_for_callback(name, timedelta(seconds=3), submit=sender.submit)

    played = play(app, "times_out", "cbName0005", until=timedelta(seconds=5))
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "CallbackTimeout"
    assert played.record("cbName0005").status == StepStatus.TIMED_OUT


def test_WAIT_FOR_CALLBACK_7_6_caught_failure_returns_a_fallback() -> None:
    """7-6: the workflow catches the sender's failure and returns "recovered"."""
    app = App()
    sender = Sender()

    @app.workflow
    def recovered(ctx: Context, name: str) -> Any:
        try:
            return ctx.wait_for_callback(name, submit=sender.submit)
        except CallbackFailed:
            return "recovered"

    played = play(app, "recovered", "cbName0006")
    played.runner.complete_callback(sender.token, error=REJECTED)
    played.runner.run_until_idle()
    assert played.result() == "recovered"


def test_WAIT_FOR_CALLBACK_7_7_submitter_out_of_retries_fails_the_run() -> None:
    """7-7: a submitter that always raises, with 2 attempts 1 s apart: after the second
    the operation fails, and the run with it; the callback is never answered.

    The submitter's retry policy is the step's own (``@app.step(retry=...)``)."""
    app = App()
    attempts: list[int] = []

    @app.step(retry=RetryPolicy(max_attempts=2, initial_delay=timedelta(seconds=1)))
    def submitter(callback: Callback) -> None:
        attempts.append(current_step().attempt)
        raise RuntimeError("the queue is down")

    @app.workflow
    def submit_fails(ctx: Context, name: str) -> Any:
        return ctx.wait_for_callback(name, submit=submitter)

    played = play(app, "submit_fails", "cbName0007", until=timedelta(seconds=10))
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "StepFailed"
    assert attempts == [1, 2]
    assert played.invocations == ["suspended", "failed"]
    assert played.shape() == [
        ("0001", "callback", "cbName0007", "WAITING"),
        ("0002", "step", "cbName0007.submit", "TERMINAL_FAILED"),
    ]


def test_WAIT_FOR_CALLBACK_7_8_inside_a_child() -> None:
    """7-8: the operation runs inside a child ("wrapper"); the answer ends the child, and
    the child's result is the parent's.

    In our terms: the child is a child run (see the child suite), so the callback is in the
    child's ledger."""
    app = App()
    sender = Sender()

    @app.workflow
    def wrapper(ctx: Context, name: str) -> Any:
        return ctx.wait_for_callback(name, submit=sender.submit)

    @app.workflow
    def parent(ctx: Context, name: str) -> Any:
        return ctx.run_child(wrapper, name)

    played = play(app, "parent", "cbName0008")
    (kid,) = children(played)
    assert [r.kind for r in played.runner.history(kid.run_id)] == [
        StepKind.CALLBACK,
        StepKind.STEP,
    ]
    played.runner.complete_callback(sender.token, "pAyLoAd")
    played.runner.run_until_idle()
    assert played.result() == "pAyLoAd"
    assert played.runner.get_run(kid.run_id).status == RunStatus.SUCCEEDED


def test_WAIT_FOR_CALLBACK_7_9_two_in_sequence() -> None:
    """7-9: "first" then "second", each answered in turn; the second answer is returned."""
    app = App()
    sender = Sender()

    @app.workflow
    def two(ctx: Context) -> Any:
        ctx.wait_for_callback("first", submit=sender.submit)
        return ctx.wait_for_callback("second", submit=sender.submit)

    played = play(app, "two")
    played.runner.complete_callback(sender.token, "payload1")
    played.runner.run_until_idle()
    assert [r.name for r in played.records()] == [
        "first",
        "first.submit",
        "second",
        "second.submit",
    ]
    played.runner.complete_callback(sender.token, "payload2")
    played.runner.run_until_idle()
    assert played.result() == "payload2"
    assert played.invocations == ["suspended", "suspended", "succeeded"]
    assert sender.submitted == 2


def test_WAIT_FOR_CALLBACK_7_10_after_a_wait_and_a_step() -> None:
    """7-10: a 1-second wait, a step, then the operation: three invocations."""
    app = App()
    sender = Sender()

    def fixed() -> dict[str, str]:
        return {"data": "fixed"}

    @app.workflow
    def mixed(ctx: Context, name: str) -> Any:
        ctx.sleep(timedelta(seconds=1))
        ctx.step(fixed)
        return ctx.wait_for_callback(name, submit=sender.submit)

    played = play(app, "mixed", "cbName0010", until=timedelta(seconds=2))
    assert [r.kind for r in played.records()] == [
        StepKind.SLEEP,
        StepKind.STEP,
        StepKind.CALLBACK,
        StepKind.STEP,
    ]
    played.runner.complete_callback(sender.token, "pAyLoAd")
    played.runner.run_until_idle()
    assert played.result() == "pAyLoAd"
    assert played.invocations == ["suspended", "suspended", "succeeded"]


def test_WAIT_FOR_CALLBACK_7_11_json_object_answer() -> None:
    """7-11: the answer {"status": "approved"} is read as an object; its "status" is
    returned.

    No deserializer needed: answers are JSON values already (the peer's default is the raw
    string, parsed by a deserializer the case configures)."""
    app = App()
    sender = Sender()

    @app.workflow
    def json_answer(ctx: Context, name: str) -> str:
        answer = ctx.wait_for_callback(name, submit=sender.submit)
        return str(answer["status"])

    played = play(app, "json_answer", "cbName0011")
    played.runner.complete_callback(sender.token, {"status": "approved"})
    played.runner.run_until_idle()
    assert played.result() == "approved"


def test_WAIT_FOR_CALLBACK_7_12_missed_heartbeat_fails_the_run() -> None:
    """7-12: a 5-second ``heartbeat_timeout`` and no heartbeat: the wait times out early
    and fails the run."""
    app = App()
    sender = Sender()

    @app.workflow
    def heartbeat_missed(ctx: Context, name: str) -> Any:
        return ctx.wait_for_callback(
            name, submit=sender.submit, heartbeat_timeout=timedelta(seconds=5)
        )

    played = play(app, "heartbeat_missed", "cbName0012")
    assert played.seconds_after_start(played.record("cbName0012").expires_at) == 5
    played.advance(seconds=6)
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "CallbackTimeout"


def test_WAIT_FOR_CALLBACK_7_13_heartbeat_then_success() -> None:
    """7-13: a heartbeat within the 10-second heartbeat timeout keeps the wait; the
    success sent after the first interval is the result."""
    app = App()
    sender = Sender()

    @app.workflow
    def heartbeat_kept(ctx: Context, name: str) -> Any:
        return ctx.wait_for_callback(
            name, submit=sender.submit, heartbeat_timeout=timedelta(seconds=10)
        )

    played = play(app, "heartbeat_kept", "cbName0013")
    played.advance(seconds=8)
    played.runner.heartbeat(sender.token)
    played.advance(seconds=8)
    assert played.status == RunStatus.WAITING
    played.runner.complete_callback(sender.token, "pAyLoAd")
    played.runner.run_until_idle()
    assert played.result() == "pAyLoAd"


def test_WAIT_FOR_CALLBACK_7_14_caught_timeout_returns_a_fallback() -> None:
    """7-14: the 3-second timeout passes; the workflow catches it and returns
    "timed-out-handled"."""
    app = App()
    sender = Sender()

    @app.workflow
    def timeout_handled(ctx: Context, name: str) -> Any:
        try:
            return ctx.wait_for_callback(name, timedelta(seconds=3), submit=sender.submit)
        except CallbackTimeout:
            return "timed-out-handled"

    played = play(app, "timeout_handled", "cbName0014", until=timedelta(seconds=5))
    assert played.result() == "timed-out-handled"


def test_WAIT_FOR_CALLBACK_7_15_success_without_a_payload() -> None:
    """7-15: a success with no payload gives None."""
    app = App()
    sender = Sender()

    @app.workflow
    def empty_answer(ctx: Context, name: str) -> Any:
        return ctx.wait_for_callback(name, submit=sender.submit)

    played = play(app, "empty_answer", "cbName0015")
    played.runner.complete_callback(sender.token)
    played.runner.run_until_idle()
    assert played.status == RunStatus.SUCCEEDED
    assert played.result() is None
    assert played.record("cbName0015").status == StepStatus.DONE
