"""A warm worker continues its runs without reloading them (``durable.core.history_cache``).

Two engines share one memory ledger: ``warm`` is a worker container whose ledger is a
``CachingLedger``, ``cold`` any other worker. The simulation explorer runs a cached worker
among its actors too, checking every view it uses against a real load.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import App, BatchResult, Context, RetryPolicy, RunStatus
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger
from durable.core.clock import FakeClock
from durable.core.config import EngineConfig
from durable.core.history_cache import CachingLedger, View, view_still_true
from durable.core.model import RunRecord, StepRecord
from durable.core.ports import Claim
from durable.engine.engine import Engine
from durable.engine.events import send_signal
from durable.engine.operations import retry
from durable.testing import SimulatedCrash

pytestmark = pytest.mark.unit

FIX = {"broken": True}


def _app() -> App:
    app = App()

    @app.step
    def add(i: int) -> int:
        return i

    @app.step(retry=RetryPolicy(max_attempts=1))
    def fragile(i: int) -> int:
        if FIX["broken"]:
            raise RuntimeError("down")
        return i

    @app.workflow(name="count")
    def count(ctx: Context, n: int) -> int:
        return sum(add(i) for i in range(n))

    @app.workflow(name="paid")
    def paid(ctx: Context) -> Any:
        first = add(1)
        amount = ctx.wait_for_signal("paid")
        return [first, amount, add(2)]

    @app.workflow(name="flaky")
    def flaky(ctx: Context) -> int:
        return add(1) + fragile(2)

    @app.workflow(name="fan")
    def fan(ctx: Context) -> list[str]:
        result: BatchResult[int] = ctx.map("count", [3], distributed=True, max_concurrency=1)
        ctx.sleep(timedelta(minutes=1))  # the next invocation replays the map
        return [item.status for item in result]

    return app


class World:
    def __init__(self, steps_per_invocation: int = 2) -> None:
        self.ledger = MemoryLedger()
        self.clock = FakeClock()
        config = EngineConfig(steps_per_invocation=steps_per_invocation)
        app = _app()
        self.cache = CachingLedger(self.ledger)
        self.warm = Engine(
            app, self.cache, MemoryInvoker(), MemoryEffectStore(), clock=self.clock, config=config
        )
        self.cold = Engine(
            app, self.ledger, MemoryInvoker(), MemoryEffectStore(), clock=self.clock, config=config
        )

    def until_done(self, engine: Engine, run_id: str) -> str:
        for _ in range(50):
            outcome = engine.resume(run_id, reason="continue")
            if outcome.result != "handed_off":
                return outcome.result
        raise AssertionError("still handing off")


@pytest.fixture(autouse=True)
def _broken() -> Any:
    FIX["broken"] = True
    yield


def test_a_run_handed_off_to_the_same_container_is_never_reloaded() -> None:
    w = World()
    run = w.warm.start("count", 7)
    assert w.until_done(w.warm, run.run_id) == "succeeded"
    # four invocations of two steps: the first reads nothing (a first claim), the three
    # after continue from the view
    assert (w.cache.loads, w.cache.hits) == (0, 3)
    assert w.ledger.get_run(run.run_id).output == "21"  # type: ignore[union-attr]


def test_an_outside_event_between_invocations_is_loaded_not_missed() -> None:
    w = World(steps_per_invocation=1000)
    run = w.warm.start("paid")
    assert w.warm.resume(run.run_id).result == "suspended"
    send_signal(w.cold, run.run_id, "paid", 10)  # bumps the inbox: the view is not enough
    assert w.warm.resume(run.run_id, reason="event").result == "succeeded"
    assert (w.cache.loads, w.cache.hits) == (1, 0)
    assert w.ledger.get_run(run.run_id).output == "[1,10,2]"  # type: ignore[union-attr]


def test_another_workers_invocation_in_between_means_a_load() -> None:
    w = World()
    run = w.warm.start("count", 7)
    assert w.warm.resume(run.run_id).result == "handed_off"
    assert w.cold.resume(run.run_id).result == "handed_off"  # wrote steps the view lacks
    assert w.until_done(w.warm, run.run_id) == "succeeded"
    assert w.cache.loads == 1 and w.cache.hits == 1
    assert w.ledger.get_run(run.run_id).output == "21"  # type: ignore[union-attr]


def test_a_takeover_of_the_containers_own_expired_lease_loads() -> None:
    w = World()
    run = w.warm.start("count", 7)
    assert w.warm.resume(run.run_id).result == "handed_off"
    # the next invocation claims, then dies without a word (its lease never released)
    owner_claim = w.ledger.claim(
        run.run_id,
        "dead",
        now="2000-01-01T00:00:00.000Z",
        lease_until="2000-01-01T00:00:01.000Z",
        stale_before="2000-01-01T00:00:00.000Z",
    )
    assert owner_claim is not None
    w.clock.advance(timedelta(hours=1))
    assert w.until_done(w.warm, run.run_id) == "succeeded"
    assert w.cache.loads == 1


def test_a_finished_run_is_forgotten_and_a_retried_one_is_loaded_again() -> None:
    """An operator's retry rewrites a final record without a claim between: the view of
    a run that ended must not outlive it."""
    w = World(steps_per_invocation=1000)
    run = w.warm.start("flaky")
    assert w.warm.resume(run.run_id).result == "failed"
    assert run.run_id not in w.cache._views
    FIX["broken"] = False
    retry(w.cold, run.run_id, None, "operator")
    assert w.warm.resume(run.run_id, reason="retry").result == "succeeded"
    assert w.ledger.get_run(run.run_id).status == RunStatus.SUCCEEDED  # type: ignore[union-attr]


def test_a_write_that_raised_drops_the_view() -> None:
    w = World()
    run = w.warm.start("count", 7)
    assert w.warm.resume(run.run_id).result == "handed_off"
    assert run.run_id in w.cache._views

    original = w.ledger.write_step

    def failing(step: StepRecord, guard: Any = None) -> StepRecord:
        raise SimulatedCrash("the container died in the write")

    w.ledger.write_step = failing  # type: ignore[method-assign]
    with pytest.raises(SimulatedCrash):
        w.warm.resume(run.run_id)
    assert run.run_id not in w.cache._views
    w.ledger.write_step = original  # type: ignore[method-assign]
    w.clock.advance(timedelta(hours=1))  # the failed invocation's lease runs out
    assert w.until_done(w.warm, run.run_id) == "succeeded"


def test_a_child_record_a_map_read_itself_stays_in_the_view() -> None:
    """Explorer seed 7693: a child's report that lands without its wake-up (the worker
    died between the two writes) leaves the parent's inbox where the view has it. The
    map's own look reads the settled record and decides on it; the view must hold that
    record, or the next invocation replays the decision over a WAITING item and calls
    it canceled where the first run saw it succeed."""
    w = World(steps_per_invocation=1000)
    parent = w.warm.start("fan")
    assert w.warm.resume(parent.run_id).result == "suspended"  # the child is running
    (child,) = [r for r in w.ledger._runs.values() if r.workflow == "count"]
    w.ledger.wake_parent = lambda parent_id: True  # type: ignore[method-assign]
    assert w.cold.resume(child.run_id).result == "succeeded"
    assert w.ledger.get_run(parent.run_id).inbox == parent.inbox  # type: ignore[union-attr]
    assert w.warm.resume(parent.run_id, reason="sweep").result == "suspended"  # the sleep
    w.clock.advance(timedelta(minutes=2))
    assert w.warm.resume(parent.run_id, reason="timer").result == "succeeded"
    assert w.cache.hits == 2  # both replays from the view: no reload hid the stale record
    assert w.ledger.get_run(parent.run_id).output == '["succeeded"]'  # type: ignore[union-attr]


def test_views_are_kept_for_a_bounded_number_of_runs() -> None:
    w = World()
    w.cache = CachingLedger(w.ledger, max_runs=2)
    w.warm = Engine(
        _app(),
        w.cache,
        MemoryInvoker(),
        MemoryEffectStore(),
        clock=w.clock,
        config=EngineConfig(steps_per_invocation=2),
    )
    runs = [w.warm.start("count", 7).run_id for _ in range(3)]
    for run_id in runs:
        assert w.warm.resume(run_id).result == "handed_off"
    assert list(w.cache._views) == runs[1:]  # the oldest left
    for run_id in [*runs[1:], runs[0]]:
        assert w.until_done(w.warm, run_id) == "succeeded"
    assert w.cache.loads == 1  # only the evicted one


# --- the rule -------------------------------------------------------------------------


NOW = "2030-01-01T00:00:00.000Z"
EPOCH_NOW = 1893456000  # NOW in epoch seconds, as TTL attributes are


def _claim(
    fence: int,
    inbox: int,
    created_at: str = "T0",
    took_over: bool = False,
    items_purge_at: int | None = None,
) -> Claim:
    run = RunRecord(
        run_id="R",
        workflow="w",
        version=1,
        status=RunStatus.RUNNING,
        input="null",
        input_hash="h",
        created_at=created_at,
        updated_at=created_at,
        fence=fence,
        inbox=inbox,
        items_purge_at=items_purge_at,
    )
    return Claim(run, took_over)


@pytest.mark.parametrize(
    ("claim", "true"),
    [
        (_claim(4, 2), True),  # the next claim, no event: the view is the run
        (_claim(5, 2), False),  # someone claimed in between
        (_claim(3, 2), False),  # a fence that went back: not this run's history
        (_claim(4, 3), False),  # an outside event since the view was read
        (_claim(4, 1), False),
        (_claim(4, 2, created_at="T1"), False),  # an expired run's id reused
        (_claim(4, 2, took_over=True), False),  # the last owner died holding it
        # A declared lifetime whose items' TTL has passed (a wake-up that came late):
        # DynamoDB may have deleted any of them, so the view is no longer the run's
        # (explorer seed 7737). Before it, the view stands.
        (_claim(4, 2, items_purge_at=EPOCH_NOW), False),
        (_claim(4, 2, items_purge_at=EPOCH_NOW + 1), True),
    ],
)
def test_a_view_stands_in_for_a_load_only_at_the_next_claim_with_no_event(
    claim: Claim, true: bool
) -> None:
    view = View(fence=3, inbox=2, created_at="T0", steps={}, signals=[])
    assert view_still_true(view, claim, NOW) is true


def test_claims_never_followed_by_a_load_leave_a_bounded_trace() -> None:
    """A container claims many runs it never loads (busy elsewhere, finished by others):
    what it keeps for them stays bounded, like the views."""
    w = World()
    cache = CachingLedger(w.ledger, max_runs=4)
    runs = [w.cold.start("count", 1, idempotency_key=f"k{i}").run_id for i in range(12)]
    for i, run_id in enumerate(runs):
        assert cache.claim(
            run_id,
            f"o{i}",
            now="2030-01-01T00:00:00.000Z",
            lease_until="2030-01-01T00:05:00.000Z",
            stale_before="2030-01-01T00:00:00.000Z",
        )
    assert len(cache._basis) == 4 and list(cache._basis) == runs[-4:]
