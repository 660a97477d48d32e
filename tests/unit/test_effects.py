"""``StepContext`` features: effects keyed across retries, checkpoints, refs, heartbeats."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import (
    App,
    Context,
    EngineConfig,
    RetryableError,
    RetryPolicy,
    RunStatus,
    current_step,
)
from durable.core.model import parse_time
from durable.errors import DurableError
from durable.testing import LocalRunner, SimulatedCrash
from examples import data_pull
from examples.services import FakeServices

LEASE = timedelta(seconds=60)


def effect_app(remote: FakeServices, *, crash_after_call: bool, reconcile: bool) -> App:
    app = App()
    crashed: list[int] = []

    @app.step(retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=1)))
    def charge(amount: int) -> str:
        def call(key: str) -> str:
            ref = remote.perform("charge", key, f"ch_{amount}")
            if crash_after_call and not crashed:
                crashed.append(1)
                raise SimulatedCrash("died after the charge went through")
            return ref

        return str(current_step().effect("charge", call, remote.lookup if reconcile else None))

    @app.workflow
    def pay(ctx: Context, amount: int) -> str:
        return charge(amount)

    return app


def finish(runner: LocalRunner, run_id: str) -> Any:
    runner.run_until_idle()
    for _ in range(5):
        if runner.get_run(run_id).terminal:
            break
        runner.advance(LEASE + timedelta(seconds=10))
    return runner.get_run(run_id)


def test_a_death_after_the_call_is_reconciled_not_repeated() -> None:
    remote = FakeServices()
    runner = LocalRunner(effect_app(remote, crash_after_call=True, reconcile=True))
    run = runner.start("pay", 5)
    stored = finish(runner, run.run_id)
    assert stored.output == '"ch_5"'
    assert remote.calls["charge"] == 1  # reconcile found it: no second request


def test_without_reconcile_the_call_repeats_with_the_same_key() -> None:
    remote = FakeServices()
    runner = LocalRunner(effect_app(remote, crash_after_call=True, reconcile=False))
    run = runner.start("pay", 5)
    stored = finish(runner, run.run_id)
    assert stored.output == '"ch_5"'
    assert remote.calls["charge"] == 2 and remote.effects["charge"] == 1
    assert len(remote.by_key) == 1  # one key, deduplicated by the remote side


def test_a_completed_effect_is_returned_without_calling_again() -> None:
    remote = FakeServices()
    runner = LocalRunner(effect_app(remote, crash_after_call=False, reconcile=True))
    runner.crash_at("ledger.write_step", call=1, when="before")  # dies before the step record
    run = runner.start("pay", 7)
    stored = finish(runner, run.run_id)
    assert stored.output == '"ch_7"' and remote.calls["charge"] == 1


@pytest.mark.parametrize("later", [timedelta(hours=25), timedelta(days=25)])
def test_a_retry_long_after_the_first_attempt_does_not_repeat_the_effect(later: timedelta) -> None:
    """Seed 002's trap: a 24-hour idempotency TTL misses a retry 25 hours later."""
    remote = FakeServices()
    app = App()
    attempts: list[int] = []

    @app.step(retry=RetryPolicy(max_attempts=3, max_delay=timedelta(days=30)))
    def send_email(to: str) -> str:
        attempts.append(1)
        ref = current_step().effect(
            "welcome", lambda key: remote.perform("email", key, f"msg-{to}")
        )
        if len(attempts) == 1:  # the email went out, then the step failed
            raise RetryableError("mail log unavailable", retry_after=later)
        return str(ref)

    @app.workflow
    def flow(ctx: Context) -> str:
        return send_email("a@example.com")

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    runner.advance(later)
    assert runner.get_run(run.run_id).output == '"msg-a@example.com"'
    assert len(attempts) == 2 and remote.calls["email"] == 1
    record = next(iter(runner.effect_store.records.values()))  # type: ignore[attr-defined]
    created = parse_time(runner.get_run(run.run_id).created_at)
    # The record outlives the run's lifetime bound plus retention, never a fixed day.
    assert record.expiration >= int((created + timedelta(days=365)).timestamp())


def test_effect_needs_an_action_name() -> None:
    app = App()

    def body() -> None:
        current_step().effect("", lambda key: key)

    @app.workflow
    def flow(ctx: Context) -> None:
        ctx.step(body)

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert "non-empty action" in (runner.get_run(run.run_id).error.message or "")  # type: ignore[union-attr]


def test_current_step_outside_a_step_says_where_it_works() -> None:
    with pytest.raises(DurableError, match="inside a step body"):
        current_step()


def test_the_idempotency_key_is_stable_across_attempts() -> None:
    app = App()
    keys: list[tuple[str, int]] = []

    @app.step(retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=0)))
    def flaky() -> str:
        step = current_step()
        keys.append((step.idempotency_key, step.attempt))
        if step.attempt < 3:
            raise ConnectionError("again")
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return flaky()

    runner = LocalRunner(app, config=EngineConfig(inprocess_wait_threshold=timedelta(seconds=1)))
    run = runner.start("flow")
    runner.run_until_idle()
    assert [a for _, a in keys] == [1, 2, 3]
    assert len({k for k, _ in keys}) == 1 and keys[0][0].startswith(run.run_id)


def test_refs_are_recorded_with_the_result() -> None:
    app = App()

    def create_ticket() -> str:
        current_step().record_ref("ticket", "T-9")
        current_step().heartbeat()
        return "T-9"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(create_ticket)

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.history(run.run_id)[0].refs == [{"kind": "ticket", "value": "T-9"}]


# --- checkpoints (seed 000's paginated pull) ------------------------------------------


def test_a_crash_mid_loop_resumes_from_the_last_checkpoint() -> None:
    data_pull.source.fetches = 0
    runner = LocalRunner(data_pull.app, config=EngineConfig(lease=LEASE))
    runner.crash_at("ledger.write_step_fenced", call=2, when="after")  # after cursor 40
    run = runner.start("data-pull", {"source": "crm", "total_items": 95})
    stored = finish(runner, run.run_id)
    assert stored.status == RunStatus.SUCCEEDED
    assert stored.output == '{"items":95,"pages_fetched":6,"resumed_from":40}'
    # 4 pages before the crash (0-3) plus 6 after (4-9): only pages after the checkpoint.
    assert data_pull.source.fetches == 10
    step = runner.history(run.run_id)[0]
    assert step.checkpoint == {"payload_version": 1, "state": '{"cursor":80,"count":80}'}


def test_a_retry_after_a_failure_resumes_from_the_checkpoint() -> None:
    data_pull.source.fetches = 0
    data_pull.source.fail_at_page = 5
    runner = LocalRunner(data_pull.app)
    run = runner.start("data-pull", {"source": "crm", "total_items": 95})
    stored = finish(runner, run.run_id)
    runner.advance(minutes=1)
    stored = runner.get_run(run.run_id)
    assert stored.output == '{"items":95,"pages_fetched":6,"resumed_from":40}'
    step = runner.history(run.run_id)[0]
    assert step.attempt == 2 and step.attempts[0].error_class == "retryable"
