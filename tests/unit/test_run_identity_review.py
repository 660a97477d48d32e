"""Interleavings that broke a run's identity promises after issue 43's changes (a
review's findings): each test failed on the code it was written against, and names the
promise it holds.

The runs are the memory ledger's, driven by ``LocalRunner`` (a fake clock).
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from durable import App, Context, RetryPolicy, RunStatus, current_step
from durable.errors import InvalidState
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit


def chain_of(runner: LocalRunner, run_id: str) -> list[str]:
    """The ids of ``run_id``'s chain, in order."""
    ids = [run_id]
    while True:
        output = runner.get_run(ids[-1]).output
        value: Any = json.loads(output) if output else None
        if not (isinstance(value, dict) and "continued_as_new" in value):
            return ids
        ids.append(value["continued_as_new"])


def inbox_app() -> App:
    """``inbox`` takes one signal per run and continues as new, until it has four."""
    app = App()

    @app.workflow
    def inbox(ctx: Context, seen: list[str]) -> list[str]:
        got = ctx.wait_for_signal("item")
        seen = [*seen, str(got)]
        if len(seen) < 4:
            ctx.continue_as_new(seen)
        return seen

    return app


# --- at most once: a keyed signal is one signal, wherever in the chain it went -------------


def test_keyed_repeat_to_the_old_id_after_a_middle_link_took_it_is_one_signal() -> None:
    """GIVEN a keyed signal sent to a chain's first run after it continued (so it went to
    the second run), which the second run consumed before continuing itself WHEN the
    sender repeats it (its first answer was lost) to the same id THEN the repeat is the
    stored signal, not a new one delivered to the third run: the workflow sees "b" once.
    """
    runner = LocalRunner(inbox_app())
    head = runner.start("inbox", [])
    runner.run_until_idle()
    runner.signal(head.run_id, "item", "a", key="k-a")
    runner.run_until_idle()  # the first run takes "a" and continues
    first = runner.signal(head.run_id, "item", "b", key="k-b")  # forwarded to the second
    runner.run_until_idle()  # the second run takes "b" and continues
    assert len(chain_of(runner, head.run_id)) == 3
    again = runner.signal(head.run_id, "item", "b", key="k-b")
    assert again.signal_id == first.signal_id
    assert again.run_id == first.run_id
    runner.signal(head.run_id, "item", "c")
    runner.signal(head.run_id, "item", "d")
    runner.run_until_idle()
    assert runner.result(head.run_id) == ["a", "b", "c", "d"]
    # After the chain's end too: the repeat is found, a new keyed signal is refused.
    assert runner.signal(head.run_id, "item", "b", key="k-b").signal_id == first.signal_id
    with pytest.raises(InvalidState, match="chain ended"):
        runner.signal(head.run_id, "item", "e", key="k-e")


# --- replay equals first run: a successor's version keeps the chain's state -----------------


class Cursor(BaseModel):
    """The state v2 of ``sync`` takes: an offset, 0 for a new start."""

    offset: int = 0


class Paged(BaseModel):
    """A state v2 of ``sync`` may take: v1's page, and a size new in v2."""

    page: int
    size: int = 50


def _sync_v1() -> App:
    app = App()

    @app.workflow(name="sync", version=1)
    def sync(ctx: Context, state: dict[str, int]) -> str:
        ctx.sleep(timedelta(hours=1))
        ctx.continue_as_new({"page": state["page"] + 1})
        return "never"

    return app


def test_a_successor_stays_on_its_version_when_the_newest_would_drop_its_state() -> None:
    """GIVEN a looping chain of v1 whose state is ``{"page": n}`` WHEN v2 is deployed,
    taking a model whose one field (``offset``, default 0) is another THEN the successor
    stays on v1 with its page: v2's validation ignores the unknown field and would start
    it at offset 0 (the loop begins again, every page's effects done twice), although the
    state type changed, which docs/architecture.md says keeps the chain on its version."""
    runner = LocalRunner(_sync_v1())
    run = runner.start("sync", {"page": 5})
    runner.run_until_idle()
    both = _sync_v1()

    @both.workflow(name="sync", version=2)
    def sync_v2(ctx: Context, state: Cursor) -> str:
        return f"v2 from offset {state.offset}"

    runner.deploy(both)
    runner.advance(hours=1)
    ids = chain_of(runner, run.run_id)
    successor = runner.get_run(ids[1])
    assert (successor.version, json.loads(successor.input or "")) == (1, {"page": 6})


def test_a_successor_moves_to_a_version_that_only_adds_a_defaulted_field() -> None:
    """The switch itself still happens when the newest version keeps every field the
    state has (and adds one with a default): the successor runs v2 with the same page."""

    runner = LocalRunner(_sync_v1())
    run = runner.start("sync", {"page": 5})
    runner.run_until_idle()
    both = _sync_v1()

    @both.workflow(name="sync", version=2)
    def sync_v2(ctx: Context, state: Paged) -> str:
        return f"v2 at page {state.page} by {state.size}"

    runner.deploy(both)
    runner.advance(hours=1)
    runner.run_until_idle()
    assert runner.result(run.run_id) == "v2 at page 6 by 50"


def test_a_successor_stays_on_its_version_when_the_newest_would_coerce_its_state() -> None:
    """A counter of v1 (an int) that v2 would read as a flag (a bool: pydantic's lax mode
    takes 1 as True) is not v2's state: the successor stays on v1."""
    app = App()

    @app.workflow(name="count", version=1)
    def count(ctx: Context, n: int) -> int:
        ctx.sleep(timedelta(hours=1))
        ctx.continue_as_new(n + 1)
        return n

    runner = LocalRunner(app)
    run = runner.start("count", 0)
    runner.run_until_idle()
    both = App()
    both.workflow(name="count", version=1)(count)

    @both.workflow(name="count", version=2)
    def count_v2(ctx: Context, flag: bool) -> str:
        return f"v2 {flag}"

    runner.deploy(both)
    runner.advance(hours=1)
    successor = runner.get_run(chain_of(runner, run.run_id)[1])
    assert (successor.version, successor.input) == (1, "1")


# --- cancel wins, and a body told so may still clean up ---------------------------------------


def test_an_async_body_stopped_by_a_cancel_finishes_its_cleanup() -> None:
    """GIVEN an async step body stopped at an ``await`` by a cancel (its view of the run
    older than ``cancel_check_interval``: ``RunCanceled`` is raised into it there)
    WHEN its ``finally`` awaits its cleanup (a connection's close, a lock's release)
    THEN that cleanup runs to its end: the cancel is raised into the body once, as
    asyncio delivers a task's cancellation, not again at every ``await`` of the unwinding
    (which left the connection open); the body's work after the stop never runs."""
    seen: list[str] = []
    runner_of: list[LocalRunner] = []
    app = App()

    @app.step(name="work", retry=RetryPolicy(max_attempts=1))
    async def work() -> str:
        await asyncio.sleep(0)
        runner = runner_of[0]
        runner.cancel(current_step().run_id, "customer left")
        runner.clock.advance(timedelta(seconds=6))  # the worker's view is now stale
        try:
            await asyncio.sleep(0)  # stopped here
            seen.append("went on")
        finally:
            await asyncio.sleep(0)  # the cleanup's own await
            seen.append("cleaned up")
        return "done"

    @app.workflow(name="job")
    async def job(ctx: Context) -> str:
        return await work()

    runner = LocalRunner(app, determinism_guard=False)
    runner_of.append(runner)
    run = runner.start("job")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.CANCELED
    assert seen == ["cleaned up"]


# --- cancel wins: a cancel by the id the caller holds reaches the chain ---------------------


def _looping_app() -> App:
    """``poll`` sleeps an hour and continues as new, for ever."""
    app = App()

    @app.workflow
    def poll(ctx: Context, n: int) -> int:
        ctx.sleep(timedelta(hours=1))
        ctx.continue_as_new(n + 1)
        return n

    return app


def test_a_cancel_by_the_first_runs_id_stops_the_chain() -> None:
    """GIVEN a looping chain started (and known to its caller) by its first run's id
    WHEN the caller cancels by that id after the run continued as new (its cancel lost
    the race with the continuation's write)
    THEN the run that carries the chain now is canceled, as a signal by that id reaches
    it: not "already finished" while the work goes on for ever."""
    runner = LocalRunner(_looping_app())
    head = runner.start("poll", 0)
    runner.run_until_idle()
    runner.advance(hours=1)  # the first run continued as new
    assert len(chain_of(runner, head.run_id)) == 2
    canceled = runner.cancel(head.run_id, "stop polling")
    runner.run_until_idle()
    ids = chain_of(runner, head.run_id)
    assert canceled.run_id == ids[-1]
    assert runner.get_run(ids[-1]).status == RunStatus.CANCELED
    runner.advance(hours=3)
    assert len(chain_of(runner, head.run_id)) == 2  # nothing goes on
    with pytest.raises(InvalidState, match="nothing to cancel"):
        runner.cancel(head.run_id, "again")
