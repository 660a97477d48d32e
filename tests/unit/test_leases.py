"""The run-item protocol: takeovers, poison steps, zombies, inbox, cancel flag, budgets."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from durable import App, Context, EngineConfig, RetryPolicy, RunStatus, StepStatus
from durable.core.ports import Invocation
from durable.testing import LocalRunner, SimulatedCrash

LEASE = timedelta(seconds=60)
PAST_LEASE = LEASE + timedelta(seconds=10)  # plus the 5 s clock-skew margin


def test_a_poison_step_fails_for_good_after_max_takeovers() -> None:
    app = App()
    bodies: list[int] = []

    @app.step
    def oom() -> None:
        bodies.append(1)
        raise SimulatedCrash("the worker died (out of memory)")

    @app.workflow
    def flow(ctx: Context) -> None:
        oom()

    runner = LocalRunner(app, config=EngineConfig(max_takeovers=3, lease=LEASE))
    run = runner.start("flow")
    runner.run_until_idle()
    for _ in range(10):
        if runner.get_run(run.run_id).terminal:
            break
        runner.advance(PAST_LEASE)
    stored = runner.get_run(run.run_id)
    assert len(bodies) == 3  # first try plus two takeovers; the third takeover gives up
    assert stored.status == RunStatus.FAILED and stored.needs_attention
    assert stored.error is not None and "worker died" in stored.error.message
    step = runner.history(run.run_id)[0]
    assert step.status == StepStatus.TERMINAL_FAILED


def test_takeovers_count_per_position_not_per_run() -> None:
    app = App()
    crashes = {"a": 2, "b": 2}

    def make(name: str) -> Callable[[], str]:
        def body() -> str:
            if crashes[name] > 0:
                crashes[name] -= 1
                raise SimulatedCrash(f"{name} died")
            return name

        body.__qualname__ = name
        return body

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(make("a")) + ctx.step(make("b"))

    runner = LocalRunner(app, config=EngineConfig(max_takeovers=3, lease=LEASE))
    run = runner.start("flow")
    runner.run_until_idle()
    for _ in range(10):
        if runner.get_run(run.run_id).terminal:
            break
        runner.advance(PAST_LEASE)
    # Four takeovers in all, but never three at one position: the run succeeds.
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED


def test_a_zombie_adopts_the_new_owners_result_and_starts_no_further_body() -> None:
    app = App()
    bodies: list[str] = []
    runner: LocalRunner

    def slow() -> str:
        bodies.append("slow")
        if len(bodies) == 1:
            # This worker stalls past its lease; another worker takes the run over and
            # finishes this step first.
            runner.clock.advance(PAST_LEASE + timedelta(minutes=1))
            takeover = runner.engine.resume(run_id, Invocation(request_id="rescuer"))
            outcomes.append(takeover.result)
        return f"result-{len(bodies)}"

    def after() -> str:
        bodies.append("after")
        return "after"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(slow) + ctx.step(after)

    runner = LocalRunner(app, config=EngineConfig(lease=LEASE))
    outcomes: list[str] = []
    run_id = runner.start("flow").run_id
    runner.invoker.pop()
    zombie = runner.engine.resume(run_id, Invocation(request_id="zombie"))

    assert outcomes == ["succeeded"]  # the rescuer finished the run
    assert zombie.result == "lease_lost"  # the zombie's next lease check failed
    assert bodies == ["slow", "slow", "after"]  # the zombie never ran "after"
    stored = runner.get_run(run_id)
    assert stored.output == '"result-2after"'
    assert runner.history(run_id)[0].output == '"result-2"'  # first writer won


def test_an_event_landing_before_suspension_is_not_lost() -> None:
    app = App()
    bodies: list[int] = []
    runner: LocalRunner

    def work() -> int:
        bodies.append(1)
        # An external event (callback, signal, cancel) bumps the inbox mid-step.
        runner.memory_ledger.patch_run(run_id, {"inbox": 1})
        return 1

    @app.workflow
    def flow(ctx: Context) -> int:
        value = ctx.step(work)
        ctx.sleep(timedelta(hours=1))
        return value

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    outcomes = runner.run_until_idle()
    assert [o.result for o in outcomes] == ["suspended"]
    stored = runner.get_run(run_id)
    # The first suspend failed on the inbox, the engine reloaded, replayed and suspended
    # again with the new inbox: the event was seen, and the step did not run twice.
    assert (stored.status, stored.inbox) == (RunStatus.WAITING, 1)
    assert bodies == [1]


def test_a_cancel_request_stops_the_run_at_its_next_durable_call() -> None:
    app = App()
    bodies: list[str] = []
    runner: LocalRunner

    def first() -> str:
        bodies.append("first")
        runner.memory_ledger.patch_run(run_id, {"cancel_requested": True, "cancel_reason": "ops"})
        return "first"

    def second() -> str:
        bodies.append("second")
        return "second"

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.step(first)
        ctx.sleep(timedelta(seconds=1))  # the suspend sees the inbox unchanged...
        return ctx.step(second)

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.advance(seconds=2)  # ...and the next claim sees the cancel request
    stored = runner.get_run(run_id)
    assert stored.status == RunStatus.CANCELED
    assert stored.error is not None and stored.error.message == "ops"
    assert bodies == ["first"]


def test_a_run_is_never_marked_succeeded_after_a_cancel_was_accepted() -> None:
    app = App()
    runner: LocalRunner

    def last() -> str:
        runner.memory_ledger.patch_run(run_id, {"cancel_requested": True})
        return "done"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(last)

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.CANCELED


def test_a_step_that_does_not_fit_the_invocation_is_handed_off() -> None:
    app = App()
    left = {"seconds": 100.0}

    def quick() -> str:
        left["seconds"] = 20.0  # the invocation is almost over after this step
        return "q"

    def big() -> str:
        return "b"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(quick) + ctx.step(big, timeout=timedelta(seconds=60))

    runner = LocalRunner(app, remaining_seconds=lambda: left["seconds"])
    run = runner.start("flow")
    runner.invoker.pop()
    first = runner.engine.resume(run.run_id, Invocation(remaining_seconds=lambda: left["seconds"]))
    assert first.result == "handed_off"
    left["seconds"] = 100.0
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == '"qb"'


def test_a_step_longer_than_a_fresh_invocation_fails_with_advice() -> None:
    app = App()

    def huge() -> str:
        return "never"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(huge, timeout=timedelta(minutes=30))

    runner = LocalRunner(app, remaining_seconds=lambda: 900.0)
    run = runner.start("flow")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert stored.error is not None and "lower the step's timeout" in stored.error.message


def test_at_most_once_per_attempt_never_reruns_an_interrupted_body() -> None:
    app = App()
    bodies: list[int] = []

    @app.step(semantics="at_most_once_per_attempt", retry=RetryPolicy(max_attempts=1))
    def charge() -> str:
        bodies.append(1)
        raise SimulatedCrash("died mid-charge")

    @app.workflow
    def flow(ctx: Context) -> str:
        return charge()

    runner = LocalRunner(app, config=EngineConfig(lease=LEASE))
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.history(run.run_id)[0].status == StepStatus.RUNNING  # written before the body
    runner.advance(PAST_LEASE)
    stored = runner.get_run(run.run_id)
    assert bodies == [1]
    assert stored.status == RunStatus.FAILED
    step = runner.history(run.run_id)[0]
    assert step.status == StepStatus.TERMINAL_FAILED and "interrupted" in (step.error_summary or "")


def test_at_most_once_per_attempt_hands_the_interruption_to_the_retry_policy() -> None:
    app = App()
    bodies: list[int] = []

    @app.step(
        semantics="at_most_once_per_attempt",
        retry=RetryPolicy(max_attempts=2, initial_delay=timedelta(seconds=1), jitter="none"),
    )
    def charge() -> str:
        bodies.append(1)
        if len(bodies) == 1:
            raise SimulatedCrash("died mid-charge")
        return "charged"

    @app.workflow
    def flow(ctx: Context) -> str:
        return charge()

    runner = LocalRunner(app, config=EngineConfig(lease=LEASE))
    run = runner.start("flow")
    runner.run_until_idle()
    runner.advance(PAST_LEASE)
    runner.advance(seconds=5)
    assert runner.get_run(run.run_id).output == '"charged"'
    step = runner.history(run.run_id)[0]
    assert step.attempt == 2 and len(bodies) == 2
    assert step.attempts[0].error is not None and "interrupted" in step.attempts[0].error


def test_at_least_once_reruns_a_body_whose_worker_died() -> None:
    app = App()
    bodies: list[int] = []

    @app.step
    def send() -> str:
        bodies.append(1)
        if len(bodies) == 1:
            raise SimulatedCrash("died")
        return "sent"

    @app.workflow
    def flow(ctx: Context) -> str:
        return send()

    runner = LocalRunner(app, config=EngineConfig(lease=LEASE))
    run = runner.start("flow")
    runner.run_until_idle()
    runner.advance(PAST_LEASE)
    assert runner.get_run(run.run_id).output == '"sent"' and len(bodies) == 2
