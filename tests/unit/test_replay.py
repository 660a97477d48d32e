"""Replay: recorded positions return their results without running anything again."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta

import pytest
from pydantic import BaseModel

from durable import (
    App,
    Context,
    EngineConfig,
    IdempotencyConflict,
    InvalidInput,
    RunStatus,
    StepStatus,
)
from durable.testing import LocalRunner


class Workspace(BaseModel):
    id: str
    seats: int


def make_app(calls: list[str]) -> App:
    app = App()

    @app.step
    def provision(user: str) -> Workspace:
        calls.append("provision")
        return Workspace(id=f"ws-{user}", seats=3)

    @app.step
    def notify(ws: Workspace) -> dict[str, str]:
        calls.append("notify")
        return {"sent": ws.id}

    @app.workflow(name="flow")
    def flow(ctx: Context, user: str) -> dict[str, object]:
        ws = provision(user)
        # The first execution hands back the decoded model, exactly like a replay does.
        assert isinstance(ws, Workspace)
        note = notify(ws)
        return {"ws": ws.id, "note": note, "seats": ws.seats}

    return app


def test_each_step_runs_once_across_many_invocations() -> None:
    calls: list[str] = []
    # One body per invocation: every invocation replays all earlier steps.
    runner = LocalRunner(make_app(calls), config=EngineConfig(steps_per_invocation=1))
    run = runner.start("flow", "u1")
    outcomes = runner.run_until_idle()
    assert [o.result for o in outcomes].count("handed_off") == 1
    assert calls == ["provision", "notify"]
    final = runner.get_run(run.run_id)
    assert final.status == RunStatus.SUCCEEDED
    assert final.output == '{"ws":"ws-u1","note":{"sent":"ws-u1"},"seats":3}'


def test_a_hand_off_sets_the_due_time_before_invoking() -> None:
    calls: list[str] = []
    config = EngineConfig(steps_per_invocation=1, handoff_grace=timedelta(seconds=30))
    runner = LocalRunner(make_app(calls), config=config)
    run = runner.start("flow", "u1")
    runner.invoker.pop()  # the start invocation, driven by hand below
    outcome = runner.engine.resume(run.run_id)
    assert outcome.result == "handed_off"
    stored = runner.get_run(run.run_id)
    assert stored.lease_owner is None
    assert stored.due_at == "2026-01-01T00:00:30.000Z"
    queued = runner.invoker.pop()
    assert queued is not None and (queued.reason, queued.hop) == ("continue", 1)


def test_typed_results_are_decoded_on_replay() -> None:
    calls: list[str] = []
    runner = LocalRunner(make_app(calls))
    run = runner.start("flow", "u2")
    runner.run_until_idle()
    steps = runner.history(run.run_id)
    assert steps[0].output == '{"id":"ws-u2","seats":3}'  # console-readable JSON
    assert [s.status for s in steps] == [StepStatus.DONE, StepStatus.DONE]


def test_an_unannotated_non_json_result_fails_the_step_on_first_execution() -> None:
    app = App()

    def make_set():  # type: ignore[no-untyped-def]
        return {1, 2}

    @app.workflow
    def flow(ctx: Context) -> object:
        return ctx.step(make_set)

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert (
        stored.error is not None and "annotate the function's return type" in stored.error.message
    )


def test_now_uuid_and_random_are_recorded_and_replayed() -> None:
    app = App()
    seen: list[tuple[datetime, uuid.UUID, float]] = []

    @app.step
    def boom_once(state: dict[str, int]) -> int:
        state["n"] += 1
        if state["n"] == 1:
            raise ConnectionError("first attempt fails")
        return state["n"]

    state = {"n": 0}

    @app.workflow
    def flow(ctx: Context) -> str:
        values = (ctx.now(), ctx.uuid(), ctx.random())
        seen.append(values)
        ctx.step(boom_once, state)
        return str(values[1])

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    runner.advance(minutes=1)
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert len(seen) == 2 and seen[0] == seen[1]
    assert 0.0 <= seen[0][2] < 1.0
    kinds = [(s.name, s.kind) for s in runner.history(run.run_id)]
    assert kinds[:3] == [("now", "value"), ("uuid", "value"), ("random", "value")]


def test_invalid_input_fails_start_and_creates_no_run() -> None:
    calls: list[str] = []
    runner = LocalRunner(make_app(calls))
    with pytest.raises(InvalidInput, match=r"field 'input'|flow") as info:
        runner.start("flow", {"not": "a string"})
    assert info.value.field is not None
    assert runner.memory_ledger.all_run_ids() == []


class SeatsSignup(BaseModel):
    user_id: str
    seats: int


def test_model_input_errors_name_the_field() -> None:
    app = App()

    @app.workflow
    def flow(ctx: Context, signup: SeatsSignup) -> int:
        return signup.seats

    runner = LocalRunner(app)
    with pytest.raises(InvalidInput, match="field 'seats'") as info:
        runner.start("flow", {"user_id": "u", "seats": "many"})
    assert info.value.field == "seats"
    assert runner.memory_ledger.all_run_ids() == []


def test_idempotent_start_returns_the_same_run_and_refuses_another_input() -> None:
    runner = LocalRunner(make_app([]))
    first = runner.start("flow", "u1", idempotency_key="signup-42")
    again = runner.start("flow", "u1", idempotency_key="signup-42")
    assert again.run_id == first.run_id
    with pytest.raises(IdempotencyConflict, match="different input"):
        runner.start("flow", "u2", idempotency_key="signup-42")
    assert runner.memory_ledger.all_run_ids() == [first.run_id]


def test_concurrent_starts_with_one_key_create_one_run() -> None:
    runner = LocalRunner(make_app([]), determinism_guard=False)
    ids: list[str] = []
    barrier = threading.Barrier(8)

    def start() -> None:
        barrier.wait()
        ids.append(runner.start("flow", "u1", idempotency_key="k").run_id)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(set(ids)) == 1
    assert runner.memory_ledger.all_run_ids() == ids[:1]


def test_a_workflow_without_input_refuses_one() -> None:
    app = App()

    @app.workflow
    def flow(ctx: Context) -> int:
        return 1

    with pytest.raises(InvalidInput, match="takes no input"):
        LocalRunner(app).start("flow", {"x": 1})


def test_an_oversized_step_result_fails_for_good_without_retries() -> None:
    app = App()
    calls: list[int] = []

    @app.step
    def big() -> str:
        calls.append(1)
        return "x" * 500_000

    @app.workflow
    def flow(ctx: Context) -> str:
        return big()

    runner = LocalRunner(app, large_values=False)
    run = runner.start("flow")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert stored.error is not None and "PayloadTooLarge" in stored.error.message
    assert calls == [1]
    step = runner.history(run.run_id)[0]
    assert step.status == StepStatus.TERMINAL_FAILED and step.output is None


def test_continue_as_new_starts_a_fresh_ledger() -> None:
    app = App()

    @app.step
    def work(n: int) -> int:
        return n + 1

    @app.workflow
    def loop(ctx: Context, n: int) -> int:
        n = work(n)
        if n < 3:
            ctx.continue_as_new(n)
        return n

    runner = LocalRunner(app)
    first = runner.start("loop", 0)
    runner.run_until_idle()
    head = runner.get_run(first.run_id)
    assert head.status == RunStatus.SUCCEEDED and "continued_as_new" in (head.output or "")
    runs = [runner.get_run(r) for r in runner.memory_ledger.all_run_ids()]
    assert len(runs) == 3
    last = next(r for r in runs if r.output == "3")
    assert last.continued_from is not None and len(runner.history(last.run_id)) == 1


def test_max_history_fails_the_run_with_advice() -> None:
    app = App()

    @app.step
    def tick(i: int) -> int:
        return i

    @app.workflow
    def forever(ctx: Context) -> None:
        i = 0
        while True:
            i = tick(i) + 1

    runner = LocalRunner(app, config=EngineConfig(max_history=20))
    run = runner.start("forever")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED
    assert stored.error is not None and "continue_as_new" in stored.error.message
    assert len(runner.history(run.run_id)) == 20
