"""Compensation: undo in reverse, crash-only, never skipped."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from durable import App, Context, EngineConfig, RetryPolicy, RunStatus, StepFailed, StepStatus
from durable.testing import LocalRunner, SimulatedCrash

LEASE = timedelta(seconds=60)


class Trip:
    """A booking saga's external systems, counting every effect and undo."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.undo_failures: dict[str, int] = {}
        self.undo_crashes: dict[str, int] = {}

    def book(self, kind: str) -> str:
        self.log.append(f"book {kind}")
        return f"{kind}-ref"

    def cancel(self, ref: str, kind: str) -> None:
        if self.undo_crashes.get(kind, 0) > 0:
            self.undo_crashes[kind] -= 1
            self.log.append(f"cancel {kind} (worker died before recording)")
            raise SimulatedCrash(f"died undoing {kind}")
        if self.undo_failures.get(kind, 0) > 0:
            self.undo_failures[kind] -= 1
            raise ConnectionError(f"{kind} API unavailable")
        self.log.append(f"cancel {ref}")


def trip_app(trip: Trip, *, undo_retry: RetryPolicy | None = None) -> App:
    app = App()

    def book(kind: str) -> str:
        return trip.book(kind)

    @app.step(retry=undo_retry or RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=1)))
    def unbook(ref: str, kind: str) -> None:
        trip.cancel(ref, kind)

    @app.step(retry=RetryPolicy(max_attempts=1))
    def pay(amount: int) -> str:
        raise ValueError(f"card declined for {amount}")

    @app.workflow
    def vacation(ctx: Context) -> str:
        ctx.step(book, "flight", compensate=unbook)
        ctx.step(book, "hotel", compensate=unbook)
        ctx.step(book, "car", compensate=unbook)
        return pay(900)

    return app


def drive(runner: LocalRunner, run_id: str) -> Any:
    runner.run_until_idle()
    for _ in range(20):
        run = runner.get_run(run_id)
        if run.terminal:
            return run
        runner.advance(LEASE + timedelta(seconds=10))
    raise AssertionError("run did not finish")


def test_compensations_run_in_reverse_and_the_original_error_is_kept() -> None:
    trip = Trip()
    runner = LocalRunner(trip_app(trip))
    run = drive(runner, runner.start("vacation").run_id)
    assert trip.log == [
        "book flight",
        "book hotel",
        "book car",
        "cancel car-ref",
        "cancel hotel-ref",
        "cancel flight-ref",
    ]
    assert run.status == RunStatus.FAILED and not run.needs_attention
    assert run.error is not None and "card declined" in run.error.message
    steps = runner.history(run.run_id)
    undo = [(s.name, s.kind, s.status) for s in steps[4:]]
    assert undo == [("compensate:trip_app.<locals>.unbook", "compensation", StepStatus.DONE)] * 3
    assert len({s.idempotency_key for s in steps[4:]}) == 3  # each undo has its own key


def test_a_transient_compensation_error_is_retried() -> None:
    trip = Trip()
    trip.undo_failures["hotel"] = 2
    runner = LocalRunner(trip_app(trip))
    run = drive(runner, runner.start("vacation").run_id)
    assert run.status == RunStatus.FAILED and not run.needs_attention
    assert trip.log.count("cancel hotel-ref") == 1
    hotel_undo = runner.history(run.run_id)[5]
    assert hotel_undo.attempt == 3


def test_a_crash_during_compensation_resumes_without_repeating_a_completed_undo() -> None:
    trip = Trip()
    trip.undo_crashes["hotel"] = 1
    runner = LocalRunner(trip_app(trip), config=EngineConfig(lease=LEASE))
    run_id = runner.start("vacation").run_id
    runner.run_until_idle()
    assert runner.get_run(run_id).status == RunStatus.COMPENSATING
    run = drive(runner, run_id)
    assert run.status == RunStatus.FAILED
    assert trip.log.count("cancel car-ref") == 1  # completed before the crash: not repeated
    assert trip.log.count("cancel hotel-ref") == 1
    assert trip.log.count("cancel flight-ref") == 1


def test_a_compensation_that_fails_for_good_parks_the_run_with_both_errors() -> None:
    trip = Trip()
    trip.undo_failures["hotel"] = 99
    runner = LocalRunner(
        trip_app(trip, undo_retry=RetryPolicy(max_attempts=2, initial_delay=timedelta(0)))
    )
    run = drive(runner, runner.start("vacation").run_id)
    assert run.status == RunStatus.FAILED and run.needs_attention
    assert run.error is not None
    assert "card declined" in run.error.message and "hotel API unavailable" in run.error.message
    assert "cancel flight-ref" not in trip.log  # stopped, for an operator: never skipped
    assert [r.run_id for r in runner.engine.list_runs(needs_attention=True).items] == [run.run_id]


def test_a_workflow_can_roll_back_explicitly_and_carry_on() -> None:
    trip = Trip()
    app = App()

    def book(kind: str) -> str:
        return trip.book(kind)

    def unbook(ref: str, kind: str) -> None:
        trip.cancel(ref, kind)

    def pay() -> str:
        raise ValueError("declined")

    @app.workflow
    def flow(ctx: Context) -> str:
        ctx.step(book, "flight", compensate=unbook)
        try:
            ctx.step(pay, retry=RetryPolicy(max_attempts=1))
        except StepFailed:
            ctx.compensate()
            return "rolled back"
        return "paid"

    runner = LocalRunner(app)
    run = drive(runner, runner.start("flow").run_id)
    assert run.status == RunStatus.SUCCEEDED and run.output == '"rolled back"'
    assert trip.log == ["book flight", "cancel flight-ref"]


def test_an_unnamed_compensation_is_refused_before_the_step_runs() -> None:
    app = App()
    ran: list[int] = []

    def book() -> str:
        ran.append(1)
        return "x"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(book, compensate=lambda ref: None)

    runner = LocalRunner(app)
    run = drive(runner, runner.start("flow").run_id)
    assert run.status == RunStatus.FAILED and ran == []
    assert run.error is not None and "name=" in run.error.message
