"""``async def`` workflows (issue 36, item 6): awaited steps run concurrently and are
recorded at the positions of their calls, tasks are branches, waits park a task, and a
replay meets the same calls at the same positions (or raises ``NonDeterminismError``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, EngineConfig, RetryPolicy, RunStatus, current_step
from durable.core.model import StepKind, StepStatus, copy_step
from durable.engine.determinism import NonDeterministicCall
from durable.testing import LocalRunner


def make_app(events: list[tuple[str, int]]) -> App:
    """Steps whose bodies take turns on the loop (``asyncio.sleep(0)``) and finish in the
    reverse of their start order, so concurrency shows in ``events``."""
    app = App()

    @app.step(name="fetch")
    async def fetch(n: int) -> int:
        events.append(("start", n))
        for _ in range(10 - n):
            await asyncio.sleep(0)
        events.append(("end", n))
        return n * 10

    async def pipeline(ctx: Context, n: int) -> list[int]:
        first = await fetch(n)
        ctx.sleep(timedelta(hours=n), name=f"nap{n}")
        return [first, await fetch(n + 5)]

    @app.workflow(name="fan")
    async def fan(ctx: Context, ns: list[int]) -> dict[str, Any]:
        gathered = await asyncio.gather(*(fetch(n) for n in ns))
        piped = await asyncio.gather(*(pipeline(ctx, n) for n in ns))
        return {"gathered": gathered, "piped": piped}

    return app


def test_gathered_steps_run_at_once_and_are_recorded_where_they_were_called() -> None:
    """GIVEN ``asyncio.gather(fetch(1), fetch(2), fetch(3))`` in an async workflow
    WHEN it runs
    THEN the three bodies overlap (each starts before any ends), finish in another order,
    yet the values come back in call order and each is recorded at the position of its
    call: 0001, 0002, 0003."""
    events: list[tuple[str, int]] = []
    runner = LocalRunner(make_app(events))
    run = runner.start("fan", [1, 2, 3])
    runner.run_until_idle()
    first = events[:6]
    assert first[:3] == [("start", 1), ("start", 2), ("start", 3)]
    assert first[3:] == [("end", 3), ("end", 2), ("end", 1)]
    steps = {s.position: s for s in runner.history(run.run_id)}
    assert [(p, steps[p].output) for p in ("0001", "0002", "0003")] == [
        ("0001", "10"),
        ("0002", "20"),
        ("0003", "30"),
    ]


def test_tasks_are_branches_a_wait_parks_only_its_own_and_the_replay_equals_the_first_run() -> None:
    """GIVEN a gather of three pipelines (a step, a sleep of n hours, a step), each task a
    branch numbered under the position of its start (0004.0001, ...)
    WHEN the first invocation runs every task up to its sleep, and the clock passes each
    wake-up in turn
    THEN every wake-up runs only the task whose sleep ended (the others replay), every body
    ran exactly once, and the result is what a run without waits computes."""
    events: list[tuple[str, int]] = []
    runner = LocalRunner(make_app(events))
    run = runner.start("fan", [1, 2, 3])
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.WAITING
    naps = [s for s in runner.history(run.run_id) if s.kind == StepKind.SLEEP]
    assert [(s.position, s.name) for s in naps] == [
        ("0004.0002", "nap1"),
        ("0005.0002", "nap2"),
        ("0006.0002", "nap3"),
    ]
    assert runner.get_run(run.run_id).due_at == naps[0].wake_at  # the earliest wakes it
    for hours in (1, 2, 3):
        runner.advance(hours=1)
        done = {s.position for s in runner.history(run.run_id) if s.status == StepStatus.DONE}
        assert f"{hours + 3:04d}.0003" in done
        assert all(f"{later + 3:04d}.0003" not in done for later in range(hours + 1, 4))
    assert runner.result(run.run_id) == {
        "gathered": [10, 20, 30],
        "piped": [[10, 60], [20, 70], [30, 80]],
    }
    starts = sorted(n for kind, n in events if kind == "start")
    assert starts == [1, 1, 2, 2, 3, 3, 6, 7, 8]  # once per call: a replay runs none


def test_a_gather_with_return_exceptions_never_sees_a_parked_wait() -> None:
    """GIVEN ``gather(..., return_exceptions=True)`` over a task that sleeps and one that
    fails for good
    THEN the code after the gather runs only once the sleep is over (a parked task does
    not end), and it sees the failure as the ``StepFailed`` it is, on the first execution
    and on replay alike."""
    app = App()
    after: list[list[str]] = []

    @app.step(name="boom", retry=RetryPolicy(max_attempts=1))
    async def boom() -> int:
        raise ValueError("no")

    async def napper(ctx: Context) -> str:
        ctx.sleep(timedelta(minutes=5))
        return "rested"

    @app.workflow(name="w")
    async def w(ctx: Context) -> list[str]:
        results = await asyncio.gather(napper(ctx), boom(), return_exceptions=True)
        seen = [r if isinstance(r, str) else type(r).__name__ for r in results]
        after.append(seen)
        return seen

    runner = LocalRunner(app)
    run = runner.start("w")
    runner.run_until_idle()
    assert after == [] and runner.get_run(run.run_id).status == RunStatus.WAITING
    runner.advance(minutes=5)
    assert runner.result(run.run_id) == ["rested", "StepFailed"]
    assert after == [["rested", "StepFailed"]]


def test_a_changed_gather_order_raises_non_determinism_on_replay() -> None:
    """GIVEN a run that gathered ``charge`` then ``reserve`` and is asleep
    WHEN the code now gathers ``reserve`` then ``charge``
    THEN the replay meets another name at 0001: the run is parked FAILED with
    ``NonDeterminismError`` (needs attention), nothing overwritten."""

    def app_for(order: tuple[str, str]) -> App:
        app = App()

        @app.step(name="charge")
        async def charge() -> str:
            return "ch"

        @app.step(name="reserve")
        async def reserve() -> str:
            return "rs"

        calls = {"charge": charge, "reserve": reserve}

        @app.workflow(name="order")
        async def order_flow(ctx: Context) -> list[str]:
            got = await asyncio.gather(*(calls[n]() for n in order))
            ctx.sleep(timedelta(minutes=5))
            return list(got)

        return app

    runner = LocalRunner(app_for(("charge", "reserve")))
    run = runner.start("order")
    runner.run_until_idle()
    before = runner.history(run.run_id)
    items = {p: copy_step(s) for p, s in runner.memory_ledger._steps[run.run_id].items()}
    runner.engine.app = app_for(("reserve", "charge"))
    runner.advance(minutes=5)
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED and stored.needs_attention
    assert stored.error is not None and stored.error.type == "NonDeterminismError"
    assert "0001" in stored.error.message and "'charge'" in stored.error.message
    assert runner.memory_ledger._steps[run.run_id] == items  # nothing written
    # the same records, the sleep ended by the wake-up's claim (durable.core.sleeps)
    assert runner.history(run.run_id)[:2] == before[:2]


def test_a_task_where_the_ledger_recorded_a_step_is_non_determinism() -> None:
    """A task takes a position without a record of its own: one started where the old
    code ran a step is caught at its start, not taken for new work."""
    old, new = App(), App()

    def ping() -> str:
        return "pong"

    @old.workflow(name="w")
    async def w1(ctx: Context) -> str:
        ctx.step(ping)
        ctx.sleep(timedelta(minutes=1))
        return "old"

    async def helper(ctx: Context) -> str:
        return ctx.step(ping)

    @new.workflow(name="w")
    async def w2(ctx: Context) -> str:
        return await asyncio.create_task(helper(ctx))

    runner = LocalRunner(old)
    run = runner.start("w")
    runner.run_until_idle()
    runner.engine.app = new
    runner.advance(minutes=1)
    error = runner.get_run(run.run_id).error
    assert error is not None and error.type == "NonDeterminismError"
    assert "a task (helper)" in error.message


def test_one_invocation_per_step_gives_the_same_records_and_result() -> None:
    """GIVEN ``steps_per_invocation=1``: every body after the first in an invocation
    hands the run off
    THEN the gathered steps still each run once, and the run ends as the one-invocation
    run does: same records, same result."""
    events: list[tuple[str, int]] = []
    one_go = LocalRunner(make_app(events))
    run = one_go.start("fan", [1, 2])
    one_go.run_until_idle()
    one_go.advance(hours=2)
    step_wise = LocalRunner(make_app(events := []), config=EngineConfig(steps_per_invocation=1))
    other = step_wise.start("fan", [1, 2])
    step_wise.run_until_idle()
    step_wise.advance(hours=2)
    assert step_wise.result(other.run_id) == one_go.result(run.run_id)
    shape = [(s.position, s.name, s.status, s.output) for s in one_go.history(run.run_id)]
    assert [
        (s.position, s.name, s.status, s.output) for s in step_wise.history(other.run_id)
    ] == shape
    assert sorted(n for kind, n in events if kind == "start") == [1, 1, 2, 2, 6, 7]


def test_compensations_of_tasks_run_newest_position_first_whatever_finished_first() -> None:
    """GIVEN two tasks that each book (with an undo), the second finishing first, then a
    failure of the workflow
    THEN the undos run in reverse position order (task 2's, then task 1's), as a replay
    would rebuild them: not in the order the tasks finished."""
    app = App()
    undone: list[str] = []

    def book(what: str) -> str:
        return what

    def unbook(result: str, what: str) -> None:
        undone.append(result)

    @app.step(name="wait_a_bit")
    async def wait_a_bit(turns: int) -> None:
        for _ in range(turns):
            await asyncio.sleep(0)

    async def trip(ctx: Context, what: str, turns: int) -> None:
        await wait_a_bit(turns)
        ctx.step(book, what, compensate=unbook)

    @app.workflow(name="w")
    async def w(ctx: Context) -> None:
        await asyncio.gather(trip(ctx, "hotel", 5), trip(ctx, "flight", 1))
        raise RuntimeError("payment failed")

    runner = LocalRunner(app)
    run = runner.start("w")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.FAILED
    assert undone == ["flight", "hotel"]


def test_a_workflow_awaiting_something_not_durable_fails_with_what_to_use() -> None:
    app = App()

    @app.workflow(name="w")
    async def w(ctx: Context) -> None:
        await asyncio.Event().wait()  # nothing will ever set it

    runner = LocalRunner(app)
    run = runner.start("w")
    runner.run_until_idle()
    error = runner.get_run(run.run_id).error
    assert error is not None and error.type == "AwaitNotDurable"
    assert "not a durable call" in error.message and "ctx.sleep" in error.message


def test_the_determinism_guard_watches_workflow_code_not_step_bodies() -> None:
    """The guard is a thread's state; workflow code and step bodies take turns on one
    loop: ``time.time()`` in a body after an await is fine, ``datetime.now()`` in the
    workflow after an await is refused."""
    app = App()

    @app.step(name="stamp")
    async def stamp() -> float:
        await asyncio.sleep(0)
        return time.time()

    @app.workflow(name="ok")
    async def ok(ctx: Context) -> bool:
        values = await asyncio.gather(stamp(), stamp())
        return all(v > 0 for v in values)

    @app.workflow(name="bad")
    async def bad(ctx: Context) -> str:
        await stamp()
        return dt.datetime.now().isoformat()

    runner = LocalRunner(app)
    good = runner.start("ok")
    runner.run_until_idle()
    assert runner.result(good.run_id) is True
    wrong = runner.start("bad")
    with pytest.raises(NonDeterministicCall, match=r"datetime\.now\(\)"):
        runner.run_until_idle()  # LocalRunner raises what its guard caught
    error = runner.get_run(wrong.run_id).error
    assert error is not None and error.type == "NonDeterministicCall"


def test_a_crash_while_bodies_run_at_once_loses_nothing_and_repeats_only_the_unrecorded() -> None:
    """GIVEN two gathered steps and a crash before the second result is written
    WHEN another worker takes the run over
    THEN the first step's record stands (its body does not run again), the second's body
    runs again, and the run succeeds."""
    app = App()
    runs: list[int] = []

    @app.step(name="work")
    async def work(n: int) -> int:
        runs.append(n)
        await asyncio.sleep(0)
        return n

    @app.workflow(name="w")
    async def w(ctx: Context) -> list[int]:
        return list(await asyncio.gather(work(1), work(2)))

    runner = LocalRunner(app, config=EngineConfig(lease=timedelta(seconds=30)))
    runner.crash_at("ledger.write_step", call=2, when="before")
    run = runner.start("w")
    runner.run_until_idle()
    assert len(runner.crashes) == 1
    runner.advance(seconds=60)
    assert runner.result(run.run_id) == [1, 2]
    assert runs == [1, 2, 2]


def test_a_cancel_during_an_async_run_stops_it_and_runs_the_undos() -> None:
    app = App()
    undone: list[str] = []

    def reserve(item: str) -> str:
        return item

    def release(result: str, item: str) -> None:
        undone.append(result)

    @app.step(name="probe")
    async def probe() -> str:
        return current_step().step_name

    @app.workflow(name="w")
    async def w(ctx: Context) -> None:
        ctx.step(reserve, "seat", compensate=release)
        await probe()
        ctx.sleep(timedelta(days=1))

    runner = LocalRunner(app)
    run = runner.start("w")
    runner.run_until_idle()
    runner.cancel(run.run_id, "changed my mind", compensate=True)
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.CANCELED
    assert undone == ["seat"]


def test_a_runner_driven_from_async_code_runs_async_workflows_too() -> None:
    """GIVEN a caller that runs an event loop itself (an async test driving a
    ``LocalRunner``) THEN the workflow's loop runs beside it, not inside it (asyncio
    cannot nest loops), and the run completes."""
    events: list[tuple[str, int]] = []
    runner = LocalRunner(make_app(events))

    async def drive() -> Any:
        run = runner.start("fan", [1])
        runner.run_until_idle()
        runner.advance(hours=1)
        return runner.result(run.run_id)

    assert asyncio.run(drive()) == {"gathered": [10], "piped": [[10, 60]]}


def test_a_deploy_check_replays_an_async_run_and_names_a_changed_order() -> None:
    """``durable check-deploy``'s dry replay runs async workflows too: the same code gets
    through every record (tasks included); gathering in another order is caught at 0001."""
    from durable.engine.deploy_check import dry_replay

    events: list[tuple[str, int]] = []
    runner = LocalRunner(make_app(events))
    run = runner.start("fan", [1, 2])
    runner.run_until_idle()
    runner.advance(hours=1)  # pipeline 1 past its nap, pipeline 2 still asleep
    history = runner.engine.load(run.run_id)
    assert history is not None
    started = len(events)
    same = make_app([]).get_workflow("fan")
    assert dry_replay(runner.engine, same, history) is None
    assert len(events) == started  # a dry replay runs no body

    reordered = App()

    @reordered.step(name="fetch")
    async def fetch(n: int) -> int:
        return n

    @reordered.workflow(name="fan")
    async def fan(ctx: Context, ns: list[int]) -> list[int]:
        return list(await asyncio.gather(*(fetch(n) for n in reversed(ns))))

    problem = dry_replay(runner.engine, reordered.get_workflow("fan"), history)
    assert problem is None  # same names: only the arguments differ, as in a plain workflow
    renamed = App()

    @renamed.step(name="lookup")
    async def lookup(n: int) -> int:
        return n

    @renamed.workflow(name="fan")
    async def fan2(ctx: Context, ns: list[int]) -> list[int]:
        return list(await asyncio.gather(*(lookup(n) for n in ns)))

    problem = dry_replay(runner.engine, renamed.get_workflow("fan"), history)
    assert problem is not None and "0001" in str(problem) and "'lookup'" in str(problem)


def test_a_divergence_in_one_task_starts_no_new_body_in_another() -> None:
    """GIVEN a run whose code changed in one task (its step has another name now), and
    another task that called a step (taking its position) before the divergence was met
    and awaits it after
    THEN that body never runs: the run is parked FAILED for the divergence, as a plain
    workflow that diverges starts nothing more."""
    old, new = App(), App()
    bodies: list[str] = []

    def make(app: App, first: str) -> None:
        @app.step(name=first)
        async def one() -> str:
            bodies.append(first)
            return first

        @app.step(name="later")
        async def later() -> str:
            bodies.append("later")
            return "later"

        async def diverging(ctx: Context) -> str:
            for _ in range(3):  # the other task calls its step meanwhile
                await asyncio.sleep(0)
            return await one()

        async def slow(ctx: Context) -> str:
            ctx.sleep(timedelta(minutes=1))
            pending = later()  # its position taken now, its body run when awaited
            for _ in range(6):
                await asyncio.sleep(0)
            return await pending

        @app.workflow(name="w")
        async def w(ctx: Context) -> list[str]:
            # With return_exceptions the workflow goes on waiting for ``slow`` after
            # ``diverging`` raised: nothing but the divergence itself can stop it.
            got = await asyncio.gather(diverging(ctx), slow(ctx), return_exceptions=True)
            return [str(g) for g in got]

    make(old, "ping")
    make(new, "pong")
    runner = LocalRunner(old)
    run = runner.start("w")
    runner.run_until_idle()
    assert bodies == ["ping"]
    runner.engine.app = new
    runner.advance(minutes=1)
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED and stored.error is not None
    assert stored.error.type == "NonDeterminismError" and "'ping'" in stored.error.message
    assert bodies == ["ping"]  # neither "pong" nor "later" ran


def test_a_task_group_waits_for_its_parked_task_and_a_forgotten_task_stops_at_the_end() -> None:
    """GIVEN a ``TaskGroup`` whose second task sleeps, and a task started and never
    awaited
    THEN the group's code after it runs once the sleep is over (a parked task does not
    end the group), and the forgotten task, still going when the workflow returned, did
    not start its second step: it stopped at its next durable call."""
    app = App()
    ran: list[str] = []

    @app.step(name="note")
    async def note(what: str) -> str:
        ran.append(what)
        return what

    async def quick(ctx: Context) -> str:
        return await note("quick")

    async def sleepy(ctx: Context) -> str:
        ctx.sleep(timedelta(minutes=10))
        return await note("sleepy")

    async def forgotten(ctx: Context) -> None:
        await note("forgotten-1")
        for _ in range(20):  # still going when the workflow returns
            await asyncio.sleep(0)
        await note("forgotten-2")

    @app.workflow(name="w")
    async def w(ctx: Context) -> list[str]:
        async with asyncio.TaskGroup() as group:
            first = group.create_task(quick(ctx))
            second = group.create_task(sleepy(ctx))
        forgotten_task = asyncio.create_task(forgotten(ctx))  # held, never awaited
        await asyncio.sleep(0)  # a turn: the forgotten task runs its first step
        del forgotten_task
        return [first.result(), second.result(), await note("after")]

    runner = LocalRunner(app)
    run = runner.start("w")
    runner.run_until_idle()
    assert ran == ["quick"] and runner.get_run(run.run_id).status == RunStatus.WAITING
    runner.advance(minutes=10)
    assert runner.result(run.run_id) == ["quick", "sleepy", "after"]
    assert ran == ["quick", "sleepy", "forgotten-1", "after"]  # never "forgotten-2"
    outputs = {s.position: s.output for s in runner.history(run.run_id)}
    assert outputs == {
        "0001.0001": '"quick"',
        "0002.0001": None,  # the sleep
        "0002.0002": '"sleepy"',
        "0003.0001": '"forgotten-1"',
        "0004": '"after"',
    }
