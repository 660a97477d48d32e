"""``async def`` steps (issue 36, item 6): a coroutine body runs to its end as one durable
step (one record, retries, the time budget), its result encoded by the coroutine
function's return annotation, in a plain workflow and with ``ctx.step`` in an async one."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from durable import App, Context, Engine, EngineConfig, RetryPolicy, RunStatus, current_step
from durable.adapters.memory import MemoryInvoker
from durable.core.clock import FakeClock
from durable.core.model import StepStatus
from durable.errors import InvalidInput, RegistrationError
from durable.testing import LocalRunner

FAST = RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=1), jitter="none")


class Quote(BaseModel):
    symbol: str
    cents: int


async def fetch_quote(symbol: str) -> Quote:
    await asyncio.sleep(0)  # a real suspension point: the body is awaited, not just called
    return Quote(symbol=symbol, cents=len(symbol) * 100)


def test_an_async_step_returns_its_awaited_value_decoded_and_runs_once() -> None:
    """GIVEN a plain workflow that calls ``ctx.step(fetch_quote, "ACME")`` on an ``async
    def`` function annotated ``-> Quote``
    WHEN the run goes through a durable sleep after it (a second invocation replays it)
    THEN the workflow got a ``Quote`` both times, the body ran once, and the ledger holds
    one DONE record with the model's JSON."""
    app = App()
    bodies: list[str] = []

    async def quote(symbol: str) -> Quote:
        bodies.append(symbol)
        return await fetch_quote(symbol)

    seen: list[Any] = []

    @app.workflow
    def price(ctx: Context, symbol: str) -> int:
        q = ctx.step(quote, symbol)
        seen.append(q)
        ctx.sleep(timedelta(minutes=1))
        return q.cents

    runner = LocalRunner(app)
    run = runner.start("price", "ACME")
    runner.run_until_idle()
    runner.advance(minutes=1)
    assert runner.result(run.run_id) == 400
    assert bodies == ["ACME"]
    assert seen == [Quote(symbol="ACME", cents=400)] * 2
    (step, _sleep) = runner.history(run.run_id)
    assert (step.name, step.status, step.output) == (
        "test_an_async_step_returns_its_awaited_value_decoded_and_runs_once.<locals>.quote",
        StepStatus.DONE,
        '{"symbol":"ACME","cents":400}',
    )


def test_a_decorated_async_step_runs_through_ctx_step_with_its_options() -> None:
    """GIVEN ``@app.step(retry=...)`` on an ``async def`` body that fails twice
    WHEN a plain workflow calls ``ctx.step(flaky, 3)``
    THEN it is retried under the decorator's policy like a plain step (three attempts in
    one record) and its value comes back."""
    app = App()
    tries: list[int] = []

    @app.step(name="flaky", retry=FAST)
    async def flaky(n: int) -> int:
        await asyncio.sleep(0)
        tries.append(current_step().attempt)
        if len(tries) < 3:
            raise ConnectionError("reset by peer")
        return n * 2

    @app.workflow
    def flow(ctx: Context) -> int:
        return ctx.step(flaky, 3)

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    runner.advance(seconds=10)
    assert runner.result(run.run_id) == 6
    assert tries == [1, 2, 3]
    (step,) = runner.history(run.run_id)
    assert step.name == "flaky" and step.attempt == 3
    assert [a.error_class for a in step.attempts] == ["retryable", "retryable", None]


def test_an_async_step_that_fails_for_good_raises_step_failed_into_the_workflow() -> None:
    """GIVEN an async body raising ValueError (terminal by the default taxonomy)
    WHEN the workflow catches ``StepFailed``
    THEN the record is TERMINAL_FAILED with the error, and the workflow sees its type."""
    app = App()

    async def parse(text: str) -> int:
        await asyncio.sleep(0)
        return int(text)

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            ctx.step(parse, "x", retry=RetryPolicy(max_attempts=1))
        except Exception as e:
            return type(e).__name__
        return "no error"

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.result(run.run_id) == "StepFailed"
    (step,) = runner.history(run.run_id)
    assert step.status == StepStatus.TERMINAL_FAILED and step.error_type == "ValueError"


def test_an_async_step_is_not_started_without_the_time_its_budget_asks_for() -> None:
    """GIVEN an async step with ``timeout=120 s`` and an invocation with 60 s left
    WHEN it is the first step of a fresh invocation
    THEN it fails for good without running, as a plain step with that budget does (the
    budget is a promise the invocation must be able to keep, not a cancellation)."""
    app = App()
    ran: list[bool] = []

    async def slow() -> str:
        ran.append(True)
        return "done"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(slow, timeout=timedelta(seconds=120))

    runner = LocalRunner(app, remaining_seconds=lambda: 60.0)
    run = runner.start("flow")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED and ran == []
    assert stored.error is not None and "needs 120s" in stored.error.message


def test_an_async_body_sees_its_step_context_and_may_checkpoint() -> None:
    """GIVEN an async body that reads ``current_step()`` after an await and checkpoints
    THEN it has its name, position and stable idempotency key, and the checkpoint lands
    on its record."""
    app = App()
    seen: dict[str, Any] = {}

    @app.step(name="pull")
    async def pull() -> int:
        await asyncio.sleep(0)
        step = current_step()
        seen.update(name=step.step_name, position=step.position, key=step.idempotency_key)
        step.checkpoint({"page": 2})
        return 2

    @app.workflow
    def flow(ctx: Context) -> int:
        return ctx.step(pull)

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.result(run.run_id) == 2
    assert seen["name"] == "pull" and seen["position"] == "0001"
    assert seen["key"].startswith(run.run_id) and seen["key"].endswith(":0001:pull")
    assert runner.history(run.run_id)[0].checkpoint == {"payload_version": 1, "state": '{"page":2}'}


def test_each_async_body_gets_a_loop_of_its_own_that_ends_with_it() -> None:
    """GIVEN an async body that leaves a task running
    THEN the task is canceled when the body ends (nothing outlives a step: Lambda would
    freeze it), and the next async body runs on a fresh loop."""
    app = App()
    loops: list[asyncio.AbstractEventLoop] = []
    leftovers: list[asyncio.Task[None]] = []

    async def leaves_a_task() -> None:
        loops.append(asyncio.get_running_loop())
        leftovers.append(asyncio.create_task(asyncio.sleep(3600)))

    @app.workflow
    def flow(ctx: Context) -> None:
        ctx.step(leaves_a_task, name="one")
        ctx.step(leaves_a_task, name="two")

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert loops[0] is not loops[1] and all(loop.is_closed() for loop in loops)
    assert all(task.cancelled() for task in leftovers)


def test_a_compensation_and_a_submit_may_be_async_too() -> None:
    """GIVEN ``compensate=`` an async undo and ``wait_for_callback(submit=)`` an async
    sender (both run as steps) WHEN the callback is rejected THEN the undo ran."""
    app = App()
    undone: list[str] = []
    sent: list[str] = []

    async def book(room: str) -> str:
        return f"bk-{room}"

    async def cancel_booking(booking: str, room: str) -> None:
        await asyncio.sleep(0)
        undone.append(booking)

    async def ask(cb: Any) -> None:
        await asyncio.sleep(0)
        sent.append(cb.token)

    @app.workflow
    def trip(ctx: Context) -> str:
        ctx.step(book, "r1", compensate=cancel_booking)
        return str(ctx.wait_for_callback("approve", submit=ask))

    runner = LocalRunner(app)
    run = runner.start("trip")
    runner.run_until_idle()
    runner.complete_callback(sent[0], error={"type": "Rejected", "message": "no"})
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.FAILED
    assert undone == ["bk-r1"]


def test_an_async_check_polls_like_a_plain_one() -> None:
    app = App()
    polls: list[int] = []

    async def ready() -> bool:
        await asyncio.sleep(0)
        polls.append(1)
        return len(polls) >= 2

    @app.workflow
    def flow(ctx: Context) -> bool:
        return ctx.wait_for_condition(ready, timedelta(seconds=10), name="ready")

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    runner.advance(seconds=10)
    assert runner.result(run.run_id) is True and len(polls) == 2


def test_async_generators_and_async_branches_are_refused_with_what_to_do() -> None:
    """An async generator passed to ``ctx.step`` (it yields many values, one is recorded)
    and an ``async def`` branch of ``ctx.parallel`` or ``ctx.map`` (a branch is plain
    workflow code on a thread) are refused, naming the fix."""
    app = App()

    async def rows() -> Any:
        yield 1

    async def branch(c: Context) -> int:
        return 1

    async def per_item(c: Context, item: int) -> int:
        return item

    @app.workflow
    def gen(ctx: Context) -> None:
        ctx.step(rows)

    @app.workflow
    def par(ctx: Context) -> None:
        ctx.parallel(branch)

    @app.workflow
    def mapped(ctx: Context) -> None:
        ctx.map(per_item, [1, 2])

    runner = LocalRunner(app)
    errors = {}
    for name in ("gen", "par", "mapped"):
        run = runner.start(name)
        runner.run_until_idle()
        stored = runner.get_run(run.run_id)
        assert stored.status == RunStatus.FAILED and stored.error is not None
        errors[name] = (stored.error.type, stored.error.message)
    assert errors["gen"][0] == RegistrationError.__name__
    assert "'rows' is an async generator" in errors["gen"][1]
    assert errors["par"][0] == errors["mapped"][0] == InvalidInput.__name__
    assert "branch 1 of the batch is async def" in errors["par"][1]
    assert "asyncio.gather" in errors["par"][1]
    assert "map 'map''s function is async def" in errors["mapped"][1]


def test_a_decorated_async_step_called_directly_in_a_plain_workflow_says_what_to_call() -> None:
    """Typed as returning a coroutine, ``fetch(url)`` in a ``def`` workflow cannot be
    awaited there: it is refused, naming ``ctx.step(fetch, ...)`` and ``await``."""
    app = App()

    @app.step
    async def fetch(url: str) -> int:
        return len(url)

    @app.workflow
    def flow(ctx: Context) -> Any:
        return fetch("https://example.com")

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    error = runner.get_run(run.run_id).error
    assert error is not None and error.type == "TypeError"
    assert "ctx.step(fetch, ...)" in error.message and "await fetch(...)" in error.message
    assert asyncio.run(fetch("abc")) == 3  # outside a workflow: the function itself


# --- every ledger ------------------------------------------------------------------------

LEDGER_APP = App()


@LEDGER_APP.step(retry=FAST)
async def lookup(key: str) -> Quote:
    await asyncio.sleep(0)
    if current_step().attempt == 1:
        raise TimeoutError("first try times out")
    return Quote(symbol=key, cents=7)


@LEDGER_APP.workflow
async def quotes(ctx: Context, keys: list[str]) -> list[int]:
    first = ctx.step(lookup, keys[0])  # the plain form, in an async workflow
    rest = await asyncio.gather(*(lookup(k) for k in keys[1:]))  # the awaited form
    return [q.cents for q in (first, *rest)]


def test_async_steps_record_the_same_on_every_ledger(stores: tuple[Any, Any]) -> None:
    """GIVEN the memory ledger, or DynamoDB (moto in-process; DynamoDB Local and
    LocalStack in their tiers)
    WHEN an async workflow runs an async step with ``ctx.step`` and two more through
    ``asyncio.gather``, each failing once and retried after its backoff
    THEN it succeeds with each step's value, each step one record of two attempts at its
    call-time position."""
    ledger, effects = stores
    clock = FakeClock()
    invoker = MemoryInvoker()
    engine = Engine(LEDGER_APP, ledger, invoker, effects, clock=clock, config=EngineConfig())
    run = engine.start("quotes", ["A", "B", "C"])
    for _ in range(10):
        item = invoker.pop()
        if item is None:
            clock.advance(timedelta(seconds=2))  # past each backoff: the next resume
            item_run = run.run_id
        else:
            item_run = item.run_id
        if engine.resume(item_run).result == "succeeded":
            break
    stored = engine.get_run(run.run_id)
    assert stored.status == RunStatus.SUCCEEDED and stored.output == "[7,7,7]"
    steps = engine.history(run.run_id)
    assert [(s.position, s.name, s.status, s.attempt) for s in steps] == [
        ("0001", "lookup", StepStatus.DONE, 2),
        ("0002", "lookup", StepStatus.DONE, 2),
        ("0003", "lookup", StepStatus.DONE, 2),
    ]
    assert [s.output for s in steps] == [f'{{"symbol":"{k}","cents":7}}' for k in "ABC"]


def test_an_async_step_in_an_async_workflow_by_ctx_step_finishes_on_a_thread_of_its_own() -> None:
    """``ctx.step(fn)`` returns the value in an async workflow too: the workflow's loop
    cannot run the body while it waits for it, so the body gets a loop and a thread."""
    app = App()
    threads: list[str] = []

    async def where() -> str:
        await asyncio.sleep(0)
        threads.append(threading.current_thread().name)
        return current_step().step_name

    @app.workflow
    async def flow(ctx: Context) -> str:
        return ctx.step(where, name="where")

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.result(run.run_id) == "where"
    assert threads == ["durable-async-body"]


@pytest.mark.parametrize("semantics", ["at_least_once", "at_most_once_per_attempt"])
def test_a_crash_after_an_async_body_runs_it_again_only_when_semantics_allow(
    semantics: Any,
) -> None:
    """GIVEN a crash right before an async step's result is written
    WHEN another worker takes the run over
    THEN at least once runs the body again; at most once per attempt counts the attempt
    as interrupted and retries it (a second attempt), as for a plain step."""
    app = App()
    attempts: list[int] = []

    async def send() -> str:
        await asyncio.sleep(0)
        attempts.append(current_step().attempt)
        return "sent"

    @app.workflow
    def flow(ctx: Context) -> str:
        return ctx.step(send, semantics=semantics, retry=FAST)

    runner = LocalRunner(app, config=EngineConfig(lease=timedelta(seconds=30)))
    writes = 2 if semantics == "at_most_once_per_attempt" else 1  # the RUNNING mark first
    runner.crash_at("ledger.write_step", call=writes, when="before")
    run = runner.start("flow")
    runner.run_until_idle()
    runner.advance(seconds=60)
    assert runner.result(run.run_id) == "sent"
    assert attempts == ([1, 1] if semantics == "at_least_once" else [1, 2])
