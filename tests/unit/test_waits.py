"""Sleeps, callbacks (approvals), signals and conditions end to end through LocalRunner."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durable import (
    App,
    CallbackFailed,
    CallbackTimeout,
    Context,
    EngineConfig,
    RunStatus,
    StepStatus,
)
from durable.core.tokens import parse_secret
from durable.engine.waits import Callback
from durable.errors import (
    CallbackAlreadyCompleted,
    CallbackExpired,
    CallbackNotFound,
    InvalidInput,
    InvalidState,
    RunNotFound,
)
from durable.testing import LocalRunner

# --- sleep ---------------------------------------------------------------------------


def test_a_sleep_records_its_wake_time_once_and_arms_a_timer() -> None:
    app = App()

    @app.workflow
    def nap(ctx: Context) -> str:
        ctx.sleep(timedelta(days=3))
        return "awake"

    runner = LocalRunner(app)
    run = runner.start("nap")
    runner.run_until_idle()
    step = runner.history(run.run_id)[0]
    assert (step.kind, step.status, step.wake_at) == (
        "sleep",
        StepStatus.WAITING,
        "2026-01-04T00:00:00.000Z",
    )
    assert runner.get_run(run.run_id).due_at == "2026-01-04T00:00:00.000Z"
    assert list(runner.timers.armed) == [f"{run.run_id}-0001"]
    runner.advance(days=2)
    assert runner.get_run(run.run_id).status == RunStatus.WAITING
    runner.advance(days=1)
    assert runner.get_run(run.run_id).output == '"awake"'
    assert runner.history(run.run_id)[0].wake_at == "2026-01-04T00:00:00.000Z"  # not recomputed
    assert runner.timers.armed == {}


def test_sleep_until_and_very_long_sleeps() -> None:
    app = App()

    @app.workflow
    def later(ctx: Context) -> str:
        ctx.sleep_until(datetime(2027, 6, 1, tzinfo=UTC))
        ctx.sleep(timedelta(days=365 * 3))  # years: no platform cap, only the run's lifetime
        return "done"

    lifetime = timedelta(days=365 * 5)
    runner = LocalRunner(
        app,
        config=EngineConfig(inprocess_wait_threshold=timedelta(0), max_run_lifetime=lifetime),
    )
    run = runner.start("later")
    runner.run_until_idle()
    runner.advance(days=520)
    assert runner.get_run(run.run_id).status == RunStatus.WAITING
    runner.advance(days=365 * 3 + 1)
    assert runner.get_run(run.run_id).output == '"done"'


def test_a_timer_that_fires_early_is_rearmed_under_a_new_name() -> None:
    app = App()

    @app.workflow
    def nap(ctx: Context) -> None:
        ctx.sleep(timedelta(hours=1))

    runner = LocalRunner(app)
    run = runner.start("nap")
    runner.run_until_idle()
    runner.timers.armed.clear()
    runner.advance(minutes=30)
    outcome = runner.engine.resume(run.run_id, reason="timer")  # fired half an hour early
    assert outcome.result == "suspended"
    assert list(runner.timers.armed) == [f"{run.run_id}-0001-r1767227400"]


# --- callbacks ------------------------------------------------------------------------


def approval_app(seen: list[Callback], timeout: timedelta | None = timedelta(days=7)) -> App:
    app = App()

    def email_manager(cb: Callback) -> str:
        seen.append(cb)
        return "sent"

    @app.workflow
    def expense(ctx: Context) -> Any:
        try:
            answer = ctx.wait_for_callback(
                "manager-approval", timeout=timeout, submit=email_manager
            )
        except CallbackFailed as rejected:
            return {"approved": False, "why": rejected.error_message}
        except CallbackTimeout:
            return {"approved": False, "why": "no answer"}
        return {"approved": True, "answer": answer}

    return app


def test_an_approval_round_trip() -> None:
    seen: list[Callback] = []
    runner = LocalRunner(approval_app(seen))
    run = runner.start("expense")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.WAITING
    callback_step, submit_step = runner.history(run.run_id)
    assert (callback_step.kind, callback_step.status) == ("callback", StepStatus.WAITING)
    assert callback_step.expires_at == "2026-01-08T00:00:00.000Z"
    assert submit_step.name == "manager-approval.submit" and submit_step.output == '"sent"'
    token = seen[0].token
    assert seen[0].url.endswith(f"/callbacks/{token}")
    assert callback_step.token_hash and token not in repr(callback_step)  # stored hashed only

    assert runner.complete_callback(token, {"by": "boss"}) == run.run_id
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == '{"approved":true,"answer":{"by":"boss"}}'
    assert len(seen) == 1  # the submit step ran once; replays rebuilt the same token


def test_a_rejection_raises_callback_failed_with_the_senders_reason() -> None:
    seen: list[Callback] = []
    runner = LocalRunner(approval_app(seen))
    run = runner.start("expense")
    runner.run_until_idle()
    runner.complete_callback(seen[0].token, error={"type": "Rejected", "message": "over budget"})
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == '{"approved":false,"why":"over budget"}'


def test_the_timeout_fires_through_time_skipping() -> None:
    seen: list[Callback] = []
    runner = LocalRunner(approval_app(seen))
    run = runner.start("expense")
    runner.run_until_idle()
    runner.advance(days=7)
    assert runner.get_run(run.run_id).output == '{"approved":false,"why":"no answer"}'
    assert runner.history(run.run_id)[0].status == StepStatus.TIMED_OUT
    with pytest.raises(CallbackExpired):
        runner.complete_callback(seen[0].token, "too late")


def test_every_bad_token_is_refused_and_nothing_is_written() -> None:
    seen: list[Callback] = []
    runner = LocalRunner(approval_app(seen))
    run = runner.start("expense")
    runner.run_until_idle()
    token = seen[0].token
    before = (runner.get_run(run.run_id), runner.history(run.run_id))

    with pytest.raises(InvalidInput, match="malformed"):
        runner.complete_callback("not-a-token")
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    with pytest.raises(CallbackNotFound):
        runner.complete_callback(forged)
    other_run = "0" * 26 + token[26:]
    with pytest.raises(CallbackNotFound):
        runner.complete_callback(other_run)
    with pytest.raises(InvalidInput, match="either a result or an error"):
        runner.complete_callback(token, result=1, error={"type": "X", "message": "y"})
    with pytest.raises(InvalidInput, match=r"error\.type"):
        runner.complete_callback(token, error={"type": 5})
    assert (runner.get_run(run.run_id), runner.history(run.run_id)) == before

    runner.complete_callback(token, True)
    with pytest.raises(CallbackAlreadyCompleted):
        runner.complete_callback(token, False)


def test_a_completion_while_the_owner_is_mid_step_is_not_lost() -> None:
    app = App()
    runner: LocalRunner
    tokens: list[str] = []

    def remember(cb: Callback) -> None:
        tokens.append(cb.token)

    def busy() -> str:
        # The approver answers while this worker is still running this step.
        runner.complete_callback(tokens[0], "yes")
        return "busy"

    @app.workflow
    def flow(ctx: Context) -> Any:
        cb = ctx.create_callback("ok", timeout=timedelta(hours=1))
        ctx.step(remember, cb)
        ctx.step(busy)
        return cb.result()

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == '"yes"'


def test_callbacks_need_a_configured_secret() -> None:
    from durable import EngineConfig
    from durable.testing import LocalRunner as Runner

    runner = Runner(approval_app([]), config=EngineConfig())
    runner.engine.config = EngineConfig(callback_secret=None)  # a deployment without a key
    run = runner.start("expense")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert stored.error is not None and "callback_secret" in stored.error.message


OLD_KEY, NEW_KEY = b"o" * 32, b"n" * 32


def rotation_app(tokens: list[str]) -> App:
    """Each invocation notes the token its callback was (re)built with, then waits."""
    app = App()

    @app.workflow(name="sign")
    def sign(ctx: Context) -> Any:
        callback = ctx.create_callback("signature", timeout=timedelta(days=7))
        tokens.append(callback.token)
        return callback.result()

    return app


def rotate(runner: LocalRunner, *keys: bytes) -> None:
    current, *previous = keys
    runner.engine.config = replace(
        runner.engine.config, callback_secret=current, callback_verify_only_secrets=tuple(previous)
    )


def test_a_callback_pending_across_a_key_rotation_keeps_its_url_and_still_verifies() -> None:
    # GIVEN a run waiting on a callback whose token was signed with the old key
    tokens: list[str] = []
    runner = LocalRunner(rotation_app(tokens), config=EngineConfig(callback_secret=OLD_KEY))
    before = runner.start("sign")
    runner.run_until_idle()
    sent = tokens[-1]
    # WHEN the key is rotated (the old one kept as previous) and the run replays
    rotate(runner, NEW_KEY, OLD_KEY)
    runner.engine.resume(before.run_id, reason="replay")
    # THEN the replay rebuilt the token that was sent, and answering it completes the run
    assert tokens[-1] == sent
    runner.complete_callback(sent, {"signed": True})
    runner.run_until_idle()
    assert runner.get_run(before.run_id).output == '{"signed":true}'
    # AND a callback created after the rotation is signed with the new key
    after = runner.start("sign")
    runner.run_until_idle()
    assert tokens[-1] != sent
    rotate(runner, NEW_KEY)  # the old key retired: the new token needs nothing else
    runner.complete_callback(tokens[-1], "ok")
    runner.run_until_idle()
    assert runner.get_run(after.run_id).status == RunStatus.SUCCEEDED


def test_a_token_of_a_retired_key_is_refused_and_nothing_is_written() -> None:
    tokens: list[str] = []
    runner = LocalRunner(rotation_app(tokens), config=EngineConfig(callback_secret=OLD_KEY))
    run = runner.start("sign")
    runner.run_until_idle()
    rotate(runner, NEW_KEY)  # the old key dropped while its callback was still pending
    before = runner.history(run.run_id)
    with pytest.raises(CallbackNotFound):
        runner.complete_callback(tokens[-1], "late")
    assert runner.history(run.run_id) == before


@pytest.mark.parametrize(
    ("value", "current", "previous"),
    [
        ("one plain key, long enough", b"one plain key, long enough", ()),
        (
            '["new key 0123456789", "old key 0123456789"]',
            b"new key 0123456789",
            (b"old key 0123456789",),
        ),
    ],
)
def test_the_secret_holds_one_key_or_a_rotation_newest_first(
    value: str, current: bytes, previous: tuple[bytes, ...]
) -> None:
    assert parse_secret(value) == (current, previous)


@pytest.mark.parametrize(
    "value", ["[]", '["ok key 0123456789", 7]', '["ok key 0123456789", "short"]']
)
def test_a_malformed_rotation_names_the_secret_and_the_shape(value: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_secret(value)
    assert info.value.field == "callback_secret"


@pytest.mark.parametrize("value", ["[not json at all, a password", '["unterminated'])
def test_a_plain_key_that_starts_with_a_bracket_is_still_one_key(value: str) -> None:
    assert parse_secret(value) == (value.encode(), ())


# --- signals ------------------------------------------------------------------------


def signal_app(timeout: timedelta | None = None) -> App:
    app = App()

    @app.workflow
    def collect(ctx: Context) -> list[Any]:
        first = ctx.wait_for_signal("item", timeout=timeout)
        second = ctx.wait_for_signal("item", timeout=timeout)
        return [first, second]

    return app


def test_signals_are_consumed_in_order_and_buffered_before_the_wait() -> None:
    runner = LocalRunner(signal_app())
    run = runner.start("collect")
    runner.signal(run.run_id, "item", {"n": 1})  # before the run even started waiting
    runner.signal(run.run_id, "other", "ignored")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.WAITING
    runner.signal(run.run_id, "item", {"n": 2})
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == '[{"n":1},{"n":2}]'
    loaded = runner.memory_ledger.load(run.run_id)
    assert loaded is not None
    consumed = {s.payload: s.consumed_by for s in loaded.signals}
    assert consumed == {'{"n":1}': "0001", '{"n":2}': "0002", '"ignored"': None}


def test_a_signal_wait_times_out() -> None:
    runner = LocalRunner(signal_app(timeout=timedelta(hours=2)))
    run = runner.start("collect")
    runner.run_until_idle()
    runner.advance(hours=2)
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert stored.error is not None and stored.error.type == "CallbackTimeout"


def test_bad_signals_are_refused() -> None:
    runner = LocalRunner(signal_app())
    run = runner.start("collect")
    with pytest.raises(RunNotFound):
        runner.signal("0" * 26, "item", 1)
    with pytest.raises(InvalidInput, match="name"):
        runner.signal(run.run_id, "", 1)
    with pytest.raises(InvalidInput, match="name"):
        runner.signal(run.run_id, "bad\x00name", 1)
    with pytest.raises(InvalidInput, match="payload"):
        runner.signal(run.run_id, "item", {1, 2})
    runner.signal(run.run_id, "item", 1)
    runner.signal(run.run_id, "item", 2)
    runner.run_until_idle()
    with pytest.raises(InvalidState, match="no more signals"):
        runner.signal(run.run_id, "item", 3)


# --- conditions ---------------------------------------------------------------------


def test_a_condition_is_polled_with_backoff_until_true() -> None:
    app = App()
    polls: list[datetime] = []
    state = {"ready_after": 3}

    def export_ready() -> str | None:
        polls.append(datetime.now(UTC))
        state["ready_after"] -= 1
        return "s3://bucket/export.csv" if state["ready_after"] <= 0 else None

    @app.workflow
    def wait_export(ctx: Context) -> str | None:
        return ctx.wait_for_condition(export_ready, interval=timedelta(minutes=1), backoff=2.0)

    runner = LocalRunner(app)
    run = runner.start("wait_export")
    runner.run_until_idle()
    step = runner.history(run.run_id)[0]
    assert (step.kind, step.status, step.wake_at) == (
        "condition",
        StepStatus.WAITING,
        "2026-01-01T00:01:00.000Z",
    )
    runner.advance(minutes=1)
    assert runner.history(run.run_id)[0].wake_at == "2026-01-01T00:03:00.000Z"  # backed off
    runner.advance(minutes=2)
    assert runner.get_run(run.run_id).output == '"s3://bucket/export.csv"'
    assert runner.history(run.run_id)[0].attempt == 3 and len(polls) == 3


def test_a_condition_that_never_holds_times_out() -> None:
    app = App()

    def never() -> bool:
        return False

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            ctx.wait_for_condition(
                never, interval=timedelta(minutes=10), timeout=timedelta(hours=1)
            )
        except CallbackTimeout:
            return "gave up"
        return "held"

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    for _ in range(10):
        runner.advance(minutes=10)
    assert runner.get_run(run.run_id).output == '"gave up"'
    assert runner.history(run.run_id)[0].status == StepStatus.TIMED_OUT


def test_a_terminal_error_in_a_check_fails_the_condition() -> None:
    app = App()

    def broken() -> bool:
        raise PermissionError("no access to the status table")

    @app.workflow
    def flow(ctx: Context) -> bool:
        return ctx.wait_for_condition(broken, interval=timedelta(minutes=1))

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED and "no access" in (
        stored.error.message if stored.error else ""
    )
