"""Pins on a step's execution (durable/engine/steps.py): each test names the mutants it kills.

Mutant ids are those of ``python -m tests.mutation --module durable/engine/steps.py --list``.
"""

from __future__ import annotations

from datetime import timedelta

from durable import App, Context, EngineConfig, RetryPolicy, RunStatus, StepStatus, current_step
from durable.core.model import format_time, parse_time
from durable.testing import LocalRunner, SimulatedCrash

LEASE = timedelta(seconds=60)


def lease_of(runner: LocalRunner, run_id: str) -> tuple[str | None, str | None]:
    run = runner.get_run(run_id)
    return run.lease_until, run.due_at


def test_a_heartbeat_renews_the_lease() -> None:
    """GIVEN a step (timeout 30 s) that has run 50 s of its 60 s lease
    WHEN it calls heartbeat() THEN the lease (fenced) runs a full lease from now, so no
    other worker takes the run over.

    Kills steps-06997392 (the body of ``heartbeat`` deleted: the lease stays where it was)."""
    app = App()
    seen: dict[str, tuple[str | None, str | None]] = {}
    runner: LocalRunner

    @app.step(timeout=timedelta(seconds=30))
    def long_call() -> str:
        seen["before"] = lease_of(runner, run_id)
        runner.clock.advance(timedelta(seconds=50))
        seen["at"] = (format_time(runner.clock.now()), None)
        current_step().heartbeat()
        seen["after"] = lease_of(runner, run_id)
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return long_call()

    runner = LocalRunner(app, config=EngineConfig(lease=LEASE))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    now = parse_time(seen["at"][0] or "")
    before = seen["before"][0]
    assert before is not None and parse_time(before) < now + timedelta(seconds=30)
    # due_at stays the run's start: no later than the new takeover moment, the sweeper
    # looks by then (durable.core.leases.lease_changes; moved when it must: test_due_rule)
    assert seen["after"] == (format_time(now + LEASE), seen["before"][1])


class CheckpointProbe:
    """A step (budget ``timeout``) that checkpoints ``into`` its body and notes the run's
    lease right after; ``deadline``: the invocation's end, from its start (None: none)."""

    def __init__(
        self, timeout: timedelta, deadline: timedelta | None = None, into: int = 10
    ) -> None:
        self.app = App()
        self.lease: tuple[str | None, str | None] = (None, None)
        self.next_lease: tuple[str | None, str | None] = (None, None)

        @self.app.step(timeout=timeout)
        def pull() -> str:
            self.runner.clock.advance(timedelta(seconds=into))
            current_step().checkpoint({"cursor": 1})
            self.lease = lease_of(self.runner, current_step().run_id)
            return "ok"

        @self.app.step(timeout=timedelta(seconds=1))
        def after() -> str:
            self.next_lease = lease_of(self.runner, current_step().run_id)
            return "ok"

        @self.app.workflow
        def flow(ctx: Context) -> str:
            return pull() + after()

        def remaining() -> float:
            assert deadline is not None
            return (started + deadline - self.runner.clock.now()).total_seconds()

        self.runner = LocalRunner(
            self.app,
            config=EngineConfig(lease=LEASE),
            remaining_seconds=remaining if deadline is not None else None,
        )
        started = self.runner.clock.now()
        run_id = self.runner.start("flow").run_id
        self.runner.run_until_idle()
        assert self.runner.get_run(run_id).status == RunStatus.SUCCEEDED, self.runner.get_run(
            run_id
        ).error
        self.checkpointed_at = started + timedelta(seconds=into)
        self.started = format_time(started)

    def expect(self, lease: timedelta) -> tuple[str, str]:
        """(lease_until, due_at) for a lease of ``lease`` from the checkpoint: the due time
        stays the run's start, earlier than the takeover moment (``lease_changes``)."""
        end = self.checkpointed_at + lease
        return format_time(end), self.started


def test_a_checkpoint_renews_the_lease_for_the_longer_of_lease_and_budget() -> None:
    """GIVEN steps with a 90 s and a 20 s budget under a 60 s lease, no invocation deadline
    WHEN each checkpoints 10 s into its body THEN the lease runs max(lease, budget) from the
    checkpoint (90 s, then 60 s) and due_at 5 s (the clock-skew margin) after it.

    Kills the checkpoint's lease extension: steps-97f8a52d (``now + max(...)`` -> ``-``),
    steps-680c7f28 (``end + clock_skew`` -> ``-``), steps-60766b42 / 43ec44c9 (the change's
    field names -> ""), steps-58b2bcd1 / bf858d67 / 223e0916 (its assignments deleted), and
    steps-0eed8c78 (``self.x.run = apply_changes(...)`` deleted: the engine's view of the
    lease stays the one from before the checkpoint, so the next step's renewal, which keeps
    the later of the lease it knows and a fresh one, moves the lease back 8 s)."""
    long_budget = CheckpointProbe(timedelta(seconds=90))
    assert long_budget.lease == long_budget.expect(timedelta(seconds=90))
    assert long_budget.next_lease == long_budget.lease  # the next step's renewal keeps it
    short_budget = CheckpointProbe(timedelta(seconds=20))
    assert short_budget.lease == short_budget.expect(LEASE)


def test_a_checkpoint_never_extends_the_lease_past_the_invocation_deadline() -> None:
    """GIVEN a 100 s invocation and a step with a 90 s budget
    WHEN the step checkpoints 30 s into its body THEN the lease ends at the invocation's
    deadline plus the 2 s overrun (72 s from the checkpoint), not 90 s on: a dead worker is
    taken over soon after its invocation ended.

    Kills the deadline clamp: steps-749eb180 (``remaining is not None`` -> ``is None``),
    steps-b0eebea1 (``end = min(...)`` deleted), steps-abd291b0 / 84669d9b (``+`` -> ``-``),
    steps-1af91710 (``remaining = ...`` deleted)."""
    probe = CheckpointProbe(timedelta(seconds=90), deadline=timedelta(seconds=100), into=30)
    assert probe.lease == probe.expect(timedelta(seconds=72))


def always_failing_app(attempts: list[int]) -> App:
    app = App()

    @app.step(retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(minutes=10), jitter="none"))
    def flaky() -> str:
        attempts.append(current_step().attempt)
        raise ConnectionError("down")

    @app.workflow
    def flow(ctx: Context) -> str:
        return flaky()

    return app


def test_an_operator_retry_gives_the_step_a_fresh_retry_budget_across_invocations() -> None:
    """GIVEN a step (3 attempts, 10 min backoff: every retry is a new invocation) that
    failed for good after its 3 attempts
    WHEN an operator retries the run and the step keeps failing
    THEN it gets 3 more attempts (4, 5, 6), each after a backoff, then fails for good again;
    the attempt history stays whole.

    Kills steps-443fd5c7 (``self.attempt - self.attempt_base`` -> ``+``: no retry after the
    operator's), steps-161fc46b / 8fffccf9 (``attempt_base`` not read), and the ``detail``
    (carrying ``attempt_base``) dropped from the WAITING record (a hand-made mutant, see
    docs/testing.md): the next invocation then counts from 0 and gives up after attempt 4."""
    attempts: list[int] = []
    runner = LocalRunner(always_failing_app(attempts))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    for _ in range(4):
        runner.advance(minutes=11)
    assert runner.get_run(run_id).status == RunStatus.FAILED
    assert attempts == [1, 2, 3]

    runner.retry(run_id)
    runner.run_until_idle()
    assert attempts == [1, 2, 3, 4]
    step = runner.history(run_id)[0]
    assert step.status == StepStatus.WAITING
    assert (step.detail or {}).get("attempt_base") == 3
    for _ in range(4):
        runner.advance(minutes=11)
    assert attempts == [1, 2, 3, 4, 5, 6]
    stored = runner.get_run(run_id)
    assert stored.status == RunStatus.FAILED
    step = runner.history(run_id)[0]
    assert step.status == StepStatus.TERMINAL_FAILED
    assert [a.n for a in step.attempts] == [1, 2, 3, 4, 5, 6]


def test_an_at_least_once_step_interrupted_mid_body_simply_runs_again() -> None:
    """GIVEN an at-least-once step that checkpointed and then its worker died
    WHEN the run is taken over THEN the body runs again (attempt 2) from the checkpoint,
    at once: no failure is recorded for the interrupted attempt and no retry backoff is
    waited (that is at_most_once_per_attempt's treatment).

    Kills ``interrupted()`` returning ``""`` instead of None for at-least-once steps (a
    hand-made mutant, see docs/testing.md: ``"" is not None``, so the replay fails the
    attempt and waits a backoff), and steps-261884bf / bc0a0147 (the semantics test
    flipped)."""
    app = App()
    bodies: list[int] = []

    @app.step(retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(minutes=30), jitter="none"))
    def pull() -> str:
        step = current_step()
        bodies.append(step.attempt)
        if step.checkpoint_state is None:
            step.checkpoint({"page": 1})
            raise SimulatedCrash("the worker died mid-body")
        return f"resumed at {step.checkpoint_state['page']}"

    @app.workflow
    def flow(ctx: Context) -> str:
        return pull()

    runner = LocalRunner(app, config=EngineConfig(lease=LEASE))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.advance(LEASE + timedelta(seconds=10))  # the lease expires: a takeover
    stored = runner.get_run(run_id)
    assert stored.status == RunStatus.SUCCEEDED  # no 30-minute backoff was waited
    assert stored.output == '"resumed at 1"'
    assert bodies == [1, 2]
    step = runner.history(run_id)[0]
    assert step.attempt == 2
    assert [(a.n, a.error_class) for a in step.attempts] == [(1, None), (2, None)]


def test_a_fresh_retry_budget_survives_a_checkpoint_and_a_crash() -> None:
    """GIVEN a step (3 attempts) that failed for good, then was retried by an operator
    WHEN its attempt 4 checkpoints and its worker dies, and attempt 5 (after the takeover)
    fails again THEN attempt 5 still has budget left (it is the operator's second): the step
    waits its backoff and attempt 6 succeeds.

    Kills the ``detail`` (carrying ``attempt_base``) dropped from the records the step
    writes itself (``record()``): a hand-made mutant, ``**{"detail": ..., **fields}`` ->
    ``**fields`` (see docs/testing.md). The checkpoint's RUNNING record would lose the base,
    and the takeover would count attempt 5 against the original budget."""
    app = App()
    attempts: list[int] = []

    @app.step(retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(minutes=10), jitter="none"))
    def flaky() -> str:
        step = current_step()
        attempts.append(step.attempt)
        if step.attempt == 4:
            step.checkpoint({"page": 1})
            raise SimulatedCrash("the worker died after a checkpoint")
        if step.attempt < 6:
            raise ConnectionError("down")
        return "ok"

    @app.workflow
    def flow(ctx: Context) -> str:
        return flaky()

    runner = LocalRunner(app, config=EngineConfig(lease=LEASE))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    for _ in range(3):
        runner.advance(minutes=21)
    assert runner.get_run(run_id).status == RunStatus.FAILED
    runner.retry(run_id)
    runner.run_until_idle()  # attempt 4 checkpoints and dies
    runner.advance(LEASE + timedelta(seconds=10))  # the takeover: attempt 5 fails
    assert runner.history(run_id)[0].status == StepStatus.WAITING
    runner.advance(minutes=21)
    assert attempts == [1, 2, 3, 4, 5, 6]
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED


def test_a_step_error_that_quotes_a_callback_url_is_stored_redacted() -> None:
    """GIVEN a workflow that made a callback and then calls a step whose error quotes the
    callback's URL (retried once after its backoff, then failed for good)
    WHEN the step fails THEN its record's error summary holds the redaction marker, never
    the token: the summary a failed step stores goes through ``redact`` like its attempts.

    Kills steps-65cf89e1 (``fields.get("error_summary")`` -> ``fields.get("")``: nothing
    is redacted) and steps-5e5c1d4e (the redaction in ``record()`` deleted)."""
    app = App()
    tokens: list[str] = []

    @app.step(retry=RetryPolicy(max_attempts=2, initial_delay=timedelta(seconds=1), jitter="none"))
    def notify(url: str) -> str:
        raise ConnectionError(f"could not post {url}")

    @app.workflow
    def flow(ctx: Context) -> str:
        callback = ctx.create_callback("approval")
        tokens.append(callback.token)
        return notify(callback.url)

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.advance(minutes=1)  # the retry's backoff
    assert runner.get_run(run_id).status == RunStatus.FAILED
    step = runner.history(run_id)[-1]
    assert step.status == StepStatus.TERMINAL_FAILED
    assert step.error_summary is not None and tokens
    assert "<callback token redacted>" in step.error_summary
    assert tokens[0] not in step.error_summary


def test_an_in_process_retry_may_perform_the_same_effect_action_again() -> None:
    """GIVEN a step that performs its "charge" effect and then fails retryably, and whose
    retry is served in the same invocation (no backoff)
    WHEN attempt 2 performs "charge" again THEN it gets attempt 1's reference back (the
    effect is not called twice) and the step succeeds: the one-effect-per-action rule holds
    within an attempt, not across the attempts of one invocation.

    Kills steps-5e3135c4 (``self.effect_actions.clear()`` deleted: attempt 2's "charge" is
    refused as a second effect of the same attempt, and the step fails for good)."""
    app = App()
    calls: list[str] = []
    seen: list[tuple[int, str]] = []

    @app.step(retry=RetryPolicy(max_attempts=2, initial_delay=timedelta(seconds=0)))
    def pay() -> str:
        step = current_step()

        def charge(key: str) -> str:
            calls.append(key)
            return "ch_1"

        seen.append((step.attempt, step.effect("charge", charge)))
        if step.attempt == 1:
            raise ConnectionError("the response was lost")
        return "paid"

    @app.workflow
    def flow(ctx: Context) -> str:
        return pay()

    runner = LocalRunner(app, config=EngineConfig(inprocess_wait_threshold=timedelta(seconds=1)))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    stored = runner.get_run(run_id)
    assert stored.status == RunStatus.SUCCEEDED, stored.error
    assert seen == [(1, "ch_1"), (2, "ch_1")]
    assert len(calls) == 1


def test_a_body_that_catches_every_error_cannot_swallow_a_lost_lease() -> None:
    """GIVEN a step whose run another worker took over (fence and owner changed) while its
    body ran, and a body that wraps its checkpoint in ``except Exception``
    WHEN the checkpoint's fenced write is refused THEN LeaseLost (a control-flow signal,
    not an Exception) goes through the body's handler: the invocation ends, the body does
    not go on, and nothing is recorded.

    Kills steps-3ae712e2 (``raise LeaseLost() from e`` deleted: ``written`` is then
    unbound, the UnboundLocalError is an Exception the body swallows, and the body's
    result is recorded although the lease is gone)."""
    app = App()
    box: list[LocalRunner] = []
    swallowed: list[str] = []

    @app.step(name="work")
    def work() -> str:
        runner, step = box[0], current_step()
        runner.memory_ledger.patch_run(step.run_id, {"fence": 99, "lease_owner": "w2"})
        try:
            step.checkpoint({"page": 1})
        except Exception as e:  # what careless step code does
            swallowed.append(type(e).__name__)
        return "ours"

    @app.workflow
    def flow(ctx: Context) -> str:
        return work()

    runner = LocalRunner(app)
    box.append(runner)
    run_id = runner.start("flow").run_id
    outcomes = runner.run_until_idle()
    assert [o.result for o in outcomes] == ["lease_lost"]
    assert swallowed == []
    assert runner.history(run_id) == []
