"""A callback token is a credential: it is never stored, logged or served, and operators
answer by run and wait name instead (issue 13, finding 4)."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import timedelta
from typing import Any

import pytest

from durable import App, CallbackFailed, Context, RunStatus, current_step
from durable.adapters.nonces import MemoryNonceStore
from durable.api.service import ApiService
from durable.engine.waits import Callback
from durable.errors import CallbackAlreadyCompleted, CallbackNotFound, InvalidState
from durable.testing import LocalRunner
from examples.services import FakeServices


def approval_app(remote: FakeServices) -> App:
    app = App()

    def email(cb: Callback, to: str) -> str:
        # What real code does: send the URL, and return (so store) what the mail API said.
        def send(key: str) -> str:
            return remote.perform("email", key, f"sent to {to}: {cb.url}")

        return str(current_step().effect("approval-email", send))

    @app.workflow
    def expense(ctx: Context) -> Any:
        try:
            return ctx.wait_for_callback(
                "manager-approval", timeout=timedelta(days=7), submit=lambda cb: email(cb, "bob")
            )
        except CallbackFailed as no:
            return f"rejected: {no.error_message}"

    return app


def everything_stored(runner: LocalRunner) -> str:
    """Every item of the ledger and of the effect store, as text."""
    ledger = runner.memory_ledger
    parts = [
        json.dumps([asdict(r) for r in ledger._runs.values()], default=str),
        json.dumps([asdict(s) for by in ledger._steps.values() for s in by.values()], default=str),
        json.dumps([asdict(s) for by in ledger._signals.values() for s in by], default=str),
        json.dumps([asdict(e) for e in runner.effect_store.records.values()], default=str),  # type: ignore[attr-defined]
    ]
    return "\n".join(parts)


def test_no_token_or_url_is_stored_or_served() -> None:
    """GIVEN an approval whose submit step emails the URL and returns what the mail API
    answered (the URL included)
    WHEN the run waits, is read through the API and later finishes
    THEN the token appears in no ledger item, no effect record and no API answer; the
    outside party's link still works."""
    remote = FakeServices()
    runner = LocalRunner(approval_app(remote))
    run = runner.start("expense")
    runner.run_until_idle()
    link = next(v for v in remote.by_key.values() if "/callbacks/" in v)
    token = link.rsplit("/callbacks/", 1)[1]
    api = ApiService(
        runner.engine, clock=runner.clock, nonces=MemoryNonceStore(), webhook_secret=lambda: None
    )
    view = api.get_run(run.run_id).model_dump_json()
    assert token not in everything_stored(runner) and token not in view
    assert "<callback token redacted>" in view
    assert token not in repr(runner.engine)  # nothing holds it in a repr either
    runner.complete_callback(token, "approved")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == '"approved"'
    assert token not in everything_stored(runner)


def test_a_callbacks_repr_shows_no_credential() -> None:
    app = App()
    seen: list[str] = []

    @app.workflow
    def flow(ctx: Context) -> None:
        cb = ctx.create_callback("x")
        seen.append(repr(cb))
        seen.append(cb.token)

    runner = LocalRunner(app)
    runner.start("flow")
    runner.run_until_idle()
    assert seen[1] not in seen[0] and "name='x'" in seen[0]


def test_an_operator_answers_a_pending_callback_by_run_and_name() -> None:
    """GIVEN a run waiting for its manager's approval
    WHEN an operator approves it by run id and wait name (no token)
    THEN the run resumes with that answer and the step records who answered; a second
    answer, a name it does not wait for, and a finished run are refused, writing nothing."""
    runner = LocalRunner(approval_app(FakeServices()))
    run = runner.start("expense")
    runner.run_until_idle()
    with pytest.raises(CallbackNotFound, match="no callback named 'other'"):
        runner.complete_wait(run.run_id, "other", "x")
    answered = runner.complete_wait(run.run_id, "manager-approval", "ok by ops")
    assert (answered.detail or {})["completed_by"] == "local-runner"
    with pytest.raises(CallbackAlreadyCompleted):
        runner.complete_wait(run.run_id, "manager-approval", "again")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == '"ok by ops"'
    with pytest.raises(InvalidState):
        runner.complete_wait(run.run_id, "manager-approval", "late")


def test_an_operator_can_reject_too() -> None:
    runner = LocalRunner(approval_app(FakeServices()))
    run = runner.start("expense")
    runner.run_until_idle()
    runner.complete_wait(
        run.run_id, "manager-approval", error={"type": "Rejected", "message": "over budget"}
    )
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert (stored.status, stored.output) == (RunStatus.SUCCEEDED, '"rejected: over budget"')
