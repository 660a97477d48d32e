"""Pins for the warm worker's view (``durable.core.history_cache``), from its mutation run.

``test_history_cache.py`` covers the rule; these count what each path costs (a load or a
view) and check every view that stands in for a load against a real load of the same
ledger at that moment, so a mutant that keeps a wrong view, or drops a right one, fails.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from durable import App, Context
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger
from durable.core.clock import FakeClock
from durable.core.config import EngineConfig
from durable.core.history_cache import CachingLedger, View
from durable.core.model import RunHistory, SignalRecord, StepKind, StepRecord, StepStatus
from durable.core.ports import ChildReport, ConditionFailed, RunGuard
from durable.engine.engine import Engine
from durable.engine.events import send_signal
from durable.testing import SimulatedCrash

pytestmark = pytest.mark.unit

POKE: dict[str, Any] = {}


def _app() -> App:
    app = App()

    @app.step
    def add(i: int) -> int:
        return i

    @app.step
    def poke(i: int) -> int:
        POKE["send"]()  # an outside event lands while this invocation runs
        return i

    @app.workflow(name="count")
    def count(ctx: Context, n: int) -> int:
        return sum(add(i) for i in range(n))

    @app.workflow(name="poked")
    def poked(ctx: Context) -> Any:
        first = [add(1), add(2), poke(3)]
        amount = ctx.wait_for_signal("paid")
        return [*first, amount, *(add(i) for i in range(4, 10))]

    @app.workflow(name="parent")
    def parent(ctx: Context) -> int:
        return add(1) + int(ctx.run_child("count", 3))

    @app.workflow(name="again")
    def again(ctx: Context, n: int) -> int:
        total = add(1) + add(2) + add(3)
        if n > 0:
            ctx.continue_as_new(n - 1)
        return total

    return app


class World:
    """A warm worker (``cache``) and a cold one on one memory ledger; every view the
    warm one uses is compared with a real load taken at that moment."""

    def __init__(self, **limits: int) -> None:
        self.ledger = MemoryLedger()
        self.clock = FakeClock()
        self.checked: list[str] = []
        self.cache = CachingLedger(self.ledger, check=self._check, **limits)
        config = EngineConfig(steps_per_invocation=2)
        self.warm = self._engine(self.cache, config)
        self.cold = self._engine(self.ledger, config)

    def _engine(self, ledger: Any, config: EngineConfig) -> Engine:
        return Engine(
            _app(), ledger, MemoryInvoker(), MemoryEffectStore(), clock=self.clock, config=config
        )

    def _check(self, run_id: str, view: RunHistory) -> None:
        loaded = self.ledger.load(run_id)
        assert loaded is not None
        assert view.run == loaded.run
        assert view.steps == loaded.steps
        signals = sorted((s.signal_id, s.name, s.consumed_by, s.payload) for s in view.signals)
        assert signals == sorted(
            (s.signal_id, s.name, s.consumed_by, s.payload) for s in loaded.signals
        )
        self.checked.append(run_id)

    def hand_off(self, engine: Engine, run_id: str) -> None:
        assert engine.resume(run_id, reason="continue").result == "handed_off"

    def finish(self, engine: Engine, run_id: str) -> str:
        for _ in range(50):
            outcome = engine.resume(run_id, reason="continue")
            if outcome.result != "handed_off":
                return outcome.result
        raise AssertionError("still handing off")

    def claim(self, run_id: str, owner: str = "op") -> RunGuard:
        claim = self.cache.claim(
            run_id,
            owner,
            now="2030-01-01T00:00:00.000Z",
            lease_until="2030-01-01T00:05:00.000Z",
            stale_before="2030-01-01T00:00:00.000Z",
        )
        assert claim is not None
        return RunGuard(fence=claim.run.fence, owner=owner)

    def warm_view(self, run_id: str) -> None:
        """Leave a view of ``run_id`` in the cache (one hand-off by the warm worker)."""
        self.hand_off(self.warm, run_id)
        assert run_id in self.cache._views


@pytest.fixture(autouse=True)
def _no_poke() -> Any:
    POKE.clear()
    yield
    POKE.clear()


def test_an_event_during_an_invocation_that_used_a_view_is_reloaded_then_followed() -> None:
    """The view's claim was confirmed; mid-invocation two signals arrive; the suspension
    is refused, and the reload must be a real load (the used view is not ready twice).
    The reload's item becomes the next view's basis: later invocations use the view,
    which follows the consumed signal (and only that one) and every record written.

    Kills: ``_ready.discard`` after a view stood in deleted; ``and`` -> ``or`` in the
    ready test of ``load``; ``_seen`` in ``update_run``'s refusal deleted; the loop that
    marks the view's signal consumed deleted, or matching by id *or* name."""
    w = World()
    run = w.warm.start("poked")

    def send() -> None:
        send_signal(w.cold, run.run_id, "paid", 10)
        send_signal(w.cold, run.run_id, "paid", 20)

    POKE["send"] = send
    w.hand_off(w.warm, run.run_id)  # add(1), add(2): a first claim, no load
    assert w.finish(w.warm, run.run_id) == "succeeded"
    stored = w.ledger.get_run(run.run_id)
    assert stored is not None and stored.output == "[1,2,3,10,4,5,6,7,8,9]"
    # one real load (the reload after the refused suspension); every other invocation
    # continued from the view, and each view was the ledger's history
    assert w.cache.loads == 1
    assert w.cache.hits >= 3 and len(w.checked) == w.cache.hits


def test_a_view_is_checked_against_a_load_each_time_it_stands_in() -> None:
    """Kills: the ``check`` call deleted, or its ``is not None`` test negated."""
    w = World()
    run = w.warm.start("count", 7)
    assert w.finish(w.warm, run.run_id) == "succeeded"
    assert w.checked == [run.run_id] * 3 == [run.run_id] * w.cache.hits
    quiet = CachingLedger(MemoryLedger())  # no check: a view still stands in, silently
    assert quiet._check is None


def test_a_claim_that_does_not_confirm_the_view_drops_it_at_once() -> None:
    """Kills: the ``_views.pop`` of a claim the rule refused deleted (a stale view held
    in memory until a load replaces it)."""
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    w.hand_off(w.cold, run.run_id)  # fence moves on without the warm worker
    w.claim(run.run_id)
    assert run.run_id not in w.cache._views


def test_a_refused_claim_leaves_no_view_ready() -> None:
    """A claim refused (someone holds the lease) after a confirmed one must not leave the
    earlier confirmation usable. Kills: the ``_ready.discard`` that opens ``claim``."""
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    w.claim(run.run_id, "first")  # confirmed: ready
    again = w.cache.claim(
        run.run_id,
        "second",
        now="2030-01-01T00:00:01.000Z",
        lease_until="2030-01-01T00:05:00.000Z",
        stale_before="2029-01-01T00:00:00.000Z",
    )
    assert again is None
    assert run.run_id not in w.cache._ready
    w.cache.load(run.run_id)
    assert (w.cache.loads, w.cache.hits) == (1, 0)


def test_a_claimed_run_moves_to_the_newest_end_of_the_views() -> None:
    """The oldest view goes first when the bound is reached: a run just continued is the
    newest. Kills: ``move_to_end`` in ``claim`` deleted."""
    w = World(max_runs=2)
    a, b, c = (w.warm.start("count", 7).run_id for _ in range(3))
    w.warm_view(a)
    w.warm_view(b)
    w.hand_off(w.warm, a)  # continues a from its view: a is now the newest
    w.warm_view(c)
    assert list(w.cache._views) == [a, c]


def test_a_view_loaded_after_claims_of_other_runs_is_the_newest() -> None:
    """Kills: ``move_to_end`` in ``_keep`` deleted (a load of a run whose first-claim
    view is older than another's would leave it to be evicted first)."""
    w = World(max_runs=2)
    a, b, c = (w.cold.start("count", 7).run_id for _ in range(3))
    w.claim(a, "x")  # first claims: empty views, a older than b
    w.claim(b, "y")
    w.cache.load(a)  # a is loaded (a refused suspension's reload, say): the newest now
    w.claim(c, "z")
    assert list(w.cache._views) == [a, c]


def test_the_default_bounds() -> None:
    """16 runs' views, and 50,000 records across them (besides the newest view). Kills:
    either constant changed."""
    cache = CachingLedger(MemoryLedger())
    for i in range(17):
        cache._keep(f"r{i:02}", View(1, 0, "T", {}, []))
    assert list(cache._views) == [f"r{i:02}" for i in range(1, 17)]
    cache = CachingLedger(MemoryLedger())
    step = StepRecord("r", "0001", "s", StepKind.STEP, StepStatus.DONE, "T")
    cache._keep("old", View(1, 0, "T", {f"{i}": step for i in range(25_000)}, []))
    cache._keep("new", View(1, 0, "T", {f"{i}": step for i in range(25_000)}, []))
    assert list(cache._views) == ["old", "new"]  # 50,000: at the bound, not over it
    cache._views["new"].steps["extra"] = step
    cache._keep("empty", View(1, 0, "T", {}, []))
    assert list(cache._views) == ["new", "empty"]


def test_the_record_bound_is_reached_only_when_exceeded() -> None:
    """Kills: ``>`` -> ``>=`` in the record bound."""
    w = World(max_records=4)
    runs = [w.warm.start("count", 9).run_id for _ in range(4)]
    for run_id in runs[:3]:
        w.warm_view(run_id)
    assert list(w.cache._views) == runs[:3]  # 2 + 2 records = 4 at the third's arrival
    w.warm_view(runs[3])  # 6 > 4: the oldest goes; 4 is not over the bound
    assert list(w.cache._views) == runs[1:]


def test_signals_count_toward_the_record_bound() -> None:
    """Kills: a signal count subtracted from (or left out of) a view's records."""
    cache = CachingLedger(MemoryLedger(), max_records=2)
    signals = [_signal("a", f"0{i}") for i in range(3)]
    cache._keep("a", View(1, 0, "T", {}, signals))
    cache._keep("b", View(1, 0, "T", {}, []))
    assert list(cache._views) == ["b"]


def test_no_view_is_ready_once_it_is_gone() -> None:
    """What marks a view ready for the next load stays bounded by the views: a forgotten
    or evicted view leaves no mark behind. Kills: ``_ready.discard`` deleted in
    ``forget`` or in the eviction."""
    w = World(max_runs=1)
    a, b = (w.warm.start("count", 7).run_id for _ in range(2))
    w.warm_view(a)
    w.claim(a)  # confirmed: ready
    w.cache.forget(a)
    assert w.cache._ready == set()
    w.warm_view(b)
    w.claim(b, "op")  # b ready
    w.cache._keep("c", View(1, 0, "T", {}, []))  # evicts b
    assert w.cache._ready == set() and list(w.cache._views) == ["c"]


def test_a_lone_view_over_the_record_bound_is_kept_and_older_ones_go() -> None:
    """``max_records`` bounds the views *besides* the newest: one long run alone keeps
    its view. Kills: ``len(self._views) > 1`` weakened, the record sum's operators."""
    w = World(max_records=1)
    a = w.warm.start("count", 9).run_id
    w.hand_off(w.cold, a)  # 2 records the warm worker must load
    w.hand_off(w.warm, a)  # loads 2, writes 2: a view of 4 records, alone
    assert list(w.cache._views) == [a]
    w.hand_off(w.warm, a)  # and it stands in
    assert (w.cache.loads, w.cache.hits) == (1, 1)
    b = w.warm.start("count", 9).run_id
    w.warm_view(b)  # two views over the bound: the older one goes
    assert list(w.cache._views) == [b]


def test_the_record_bound_counts_records_of_every_view() -> None:
    """Two views of 2 records each fit under a bound of 5 with a third, empty one; the
    third's records push the fourth view's arrival over it. Kills: a sum that drops a
    view's steps or counts them with the wrong sign."""
    w = World(max_records=5)
    runs = [w.warm.start("count", 9).run_id for _ in range(4)]
    for run_id in runs[:3]:
        w.warm_view(run_id)
    assert list(w.cache._views) == runs[:3]  # 2 + 2 + 2 = 6 records, checked at arrival
    w.warm_view(runs[3])  # 6 + 0 > 5: the oldest goes, 4 <= 5 stops it
    assert list(w.cache._views) == runs[1:]


def test_a_finished_run_leaves_nothing_behind() -> None:
    """Kills: ``_basis.pop`` in ``_forget_if_ended`` deleted."""
    w = World()
    run = w.warm.start("count", 3)
    assert w.finish(w.warm, run.run_id) == "succeeded"
    assert run.run_id not in w.cache._views
    assert run.run_id not in w.cache._basis


def test_a_claim_moves_the_run_to_the_newest_end_of_the_bases() -> None:
    """Kills: the ``_basis.pop`` before a basis is set again (the re-claimed run would
    keep its old place and be the first to go)."""
    w = World(max_runs=2)
    a, b, c = (w.cold.start("count", 7).run_id for _ in range(3))
    w.claim(a, "x")
    w.claim(b, "y")
    w.claim(a, "x")  # renewed by its owner: the newest again
    w.claim(c, "z")
    assert list(w.cache._basis) == [a, c]


def test_a_reused_run_id_between_claim_and_load_is_not_kept() -> None:
    """Kills: the ``created_at`` comparison of a basis with the load deleted or
    inverted (a view built from another run under the same id), and the ``_views.pop``
    that drops the view held from before."""
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    w.claim(run.run_id)
    assert w.cache.load(run.run_id) is not None  # the view stood in: it is used up
    fence, inbox, _ = w.cache._basis.get(run.run_id, (0, 0, ""))
    w.cache._basis[run.run_id] = (fence, inbox, "2020-01-01T00:00:00.000Z")
    assert w.cache.load(run.run_id) is not None  # a real load, of "another" run
    assert (w.cache.loads, w.cache.hits) == (1, 1)
    assert run.run_id not in w.cache._views
    w.claim(run.run_id)  # and with a matching basis the load is kept
    w.cache.load(run.run_id)
    assert run.run_id in w.cache._views


def test_an_update_that_raised_drops_the_view() -> None:
    """Kills: ``forget`` in ``update_run``'s error path deleted."""
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    guard = w.claim(run.run_id)

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise SimulatedCrash("the container died in the write")

    w.ledger.update_run = crash  # type: ignore[method-assign]
    with pytest.raises(SimulatedCrash):
        w.cache.update_run(run.run_id, guard, {"due_at": None})
    assert run.run_id not in w.cache._views


def test_a_refused_update_records_the_run_item_as_the_next_basis() -> None:
    """Kills: ``_seen``'s ``is not None`` test, or ``_set_basis`` in it, deleted."""
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    guard = w.claim(run.run_id)
    send_signal(w.cold, run.run_id, "stray", 1)
    with pytest.raises(ConditionFailed):
        w.cache.update_run(run.run_id, replace(guard, inbox=0), {"due_at": None})
    current = w.ledger.get_run(run.run_id)
    assert current is not None
    assert w.cache._basis[run.run_id] == (current.fence, current.inbox, current.created_at)
    w.cache._seen(None)  # a refusal on a run gone (TTL) sets nothing


def test_a_fenced_write_refused_by_a_final_record_drops_the_view() -> None:
    """A zombie's final record at the position: the view lacks it. Kills: the ``else``
    branch's ``forget`` deleted, or ``_record`` taken for a refused write."""
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    guard = w.claim(run.run_id)
    theirs = StepRecord(
        run_id=run.run_id,
        position="0009",
        name="add",
        kind=w.ledger.get_step(run.run_id, "0001").kind,  # type: ignore[union-attr]
        status=StepStatus.DONE,
        updated_at="2030-01-01T00:00:00.000Z",
        output="1",
    )
    w.ledger.write_step(theirs)
    mine = replace(theirs, output="2", fence=guard.fence)
    assert w.cache.write_step_fenced(mine, guard, {}) is False
    assert run.run_id not in w.cache._views
    # a fenced write that lands is followed by the view
    other = w.warm.start("count", 7).run_id
    w.warm_view(other)
    guard = w.claim(other)
    fresh = replace(theirs, run_id=other, position="0010", fence=guard.fence)
    assert w.cache.write_step_fenced(fresh, guard, {}) is True
    assert w.cache._views[other].steps["0010"] == fresh


def test_a_fenced_write_that_raised_drops_the_view() -> None:
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    guard = w.claim(run.run_id)
    step = replace(_first(w, run.run_id), position="0011")
    with pytest.raises(ConditionFailed):
        w.cache.write_step_fenced(step, replace(guard, owner="someone else"), {})
    assert run.run_id not in w.cache._views


def _first(w: World, run_id: str) -> StepRecord:
    step = w.ledger.get_step(run_id, "0001")
    assert step is not None
    return step


def _signal(run_id: str, signal_id: str, name: str = "paid") -> SignalRecord:
    return SignalRecord(
        run_id=run_id,
        name=name,
        signal_id=signal_id,
        payload="5",
        received_at="2030-01-01T00:00:00.000Z",
    )


def test_a_refused_signal_consumption_drops_the_view() -> None:
    """The position already holds a final record: ``consume_signal`` returns it instead.
    Kills: the refusal test (``stored is not step``) weakened, its ``forget`` deleted."""
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    w.cache.add_signal(_signal(run.run_id, "01S"), now="2030-01-01T00:00:00.000Z")
    w.warm_view(run.run_id)  # a load (the inbox moved), then a view again
    guard = w.claim(run.run_id)
    existing = w.ledger.get_step(run.run_id, "0001")
    assert existing is not None
    stored = w.cache.consume_signal(existing, _signal(run.run_id, "01S"), guard)
    assert stored is not existing and stored == existing
    assert run.run_id not in w.cache._views


def test_a_consumption_with_no_view_keeps_none() -> None:
    """Kills: ``view is None`` in the consumption test weakened (it would record into a
    view that is not there)."""
    w = World()
    run = w.warm.start("count", 7)
    w.hand_off(w.cold, run.run_id)
    w.cache.add_signal(_signal(run.run_id, "01S"), now="2030-01-01T00:00:00.000Z")
    guard = w.claim(run.run_id)  # not confirmed: no view
    assert run.run_id not in w.cache._views
    wait = replace(
        _first(w, run.run_id),
        position="0007",
        status=StepStatus.DONE,
        fence=guard.fence,
    )
    assert w.cache.consume_signal(wait, _signal(run.run_id, "01S"), guard) is wait
    assert run.run_id not in w.cache._views
    assert [s.consumed_by for s in w.ledger.load(run.run_id).signals] == ["0007"]  # type: ignore[union-attr]


def test_a_consumption_that_raised_drops_the_view() -> None:
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    guard = w.claim(run.run_id)
    wait = replace(_first(w, run.run_id), position="0007")
    with pytest.raises(ConditionFailed):
        w.cache.consume_signal(wait, _signal(run.run_id, "nope"), replace(guard, fence=99))
    assert run.run_id not in w.cache._views


# --- writes that change a run beyond the view: each drops it and still happens -------


def test_continuing_as_new_drops_the_view_and_starts_the_successor() -> None:
    """Kills: ``forget`` in ``continue_run`` deleted, or the ledger call deleted."""
    w = World()
    run = w.warm.start("again", 1)
    w.hand_off(w.warm, run.run_id)
    assert run.run_id in w.cache._views
    w.warm.resume(run.run_id, reason="continue")  # add(3), then continue_as_new
    assert run.run_id not in w.cache._views
    successors = [r for r in w.ledger._runs.values() if r.run_id != run.run_id]
    assert [(r.continued_from, r.input) for r in successors] == [(run.run_id, "0")]


def test_an_operators_write_drops_the_view_and_lands() -> None:
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    current = w.ledger.get_run(run.run_id)
    assert current is not None
    changed = w.cache.operate(
        run.run_id,
        statuses=(current.status.value,),
        changes={},
        operation={"op": "note", "by": "pins"},
    )
    assert changed.operations[-1] == {"op": "note", "by": "pins"}
    assert w.ledger.get_run(run.run_id).operations == changed.operations  # type: ignore[union-attr]
    assert run.run_id not in w.cache._views


def test_a_completed_wait_drops_the_view_and_lands() -> None:
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    first = w.ledger.get_step(run.run_id, "0001")
    assert first is not None
    waiting = replace(first, position="0008", status=StepStatus.WAITING, output=None)
    w.ledger.write_step(waiting)
    done = replace(waiting, status=StepStatus.DONE, output="7")
    w.cache.complete_waiting(done, token_hash=None, now="2030-01-01T00:00:00.000Z")
    assert w.ledger.get_step(run.run_id, "0008") == done
    assert run.run_id not in w.cache._views


def test_a_signal_drops_the_view_and_lands() -> None:
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    w.cache.add_signal(_signal(run.run_id, "01S"), now="2030-01-01T00:00:00.000Z")
    assert [s.signal_id for s in w.ledger.load(run.run_id).signals] == ["01S"]  # type: ignore[union-attr]
    assert run.run_id not in w.cache._views


def test_a_purge_drops_the_view_and_lands() -> None:
    w = World()
    run = w.warm.start("count", 7)
    w.warm_view(run.run_id)
    assert w.cache.purge_leftovers(run.run_id, before="9999") == 2
    assert w.ledger.load(run.run_id).steps == {}  # type: ignore[union-attr]
    assert run.run_id not in w.cache._views


def test_other_ledger_calls_pass_through() -> None:
    w = World()
    run = w.warm.start("count", 7)
    assert w.cache.get_run(run.run_id) == w.ledger.get_run(run.run_id)


def test_a_read_takes_final_records_into_the_view_and_nothing_open() -> None:
    """What a worker reads of its own run joins its view when final (it may decide on it,
    explorer seed 7693), never when open (a record read open may be older than the
    view's). Kills: the status checks of ``_settled`` negated or dropped, and ``get_step``
    not following its read."""
    ledger = MemoryLedger()
    cache = CachingLedger(ledger)
    waiting = StepRecord("r", "0001", "s", StepKind.CHILD, StepStatus.WAITING, "T0")
    done = replace(waiting, status=StepStatus.DONE, output="1", updated_at="T1")
    cache._keep("r", View(1, 0, "T", {"0001": waiting, "0002": done}, []))
    reads = {"0001": done, "0002": waiting, "0003": waiting, "0004": done}
    ledger.get_steps = lambda run_id, positions: {p: reads[p] for p in positions}  # type: ignore[method-assign]
    ledger.get_step = lambda run_id, position: reads[position]  # type: ignore[method-assign]
    assert cache.get_steps("r", ["0002", "0003"]) == {"0002": waiting, "0003": waiting}
    assert cache._views["r"].steps == {"0001": waiting, "0002": done}  # open ones: not taken
    assert cache.get_step("r", "0001") == done
    assert cache._views["r"].steps["0001"] == done  # final: taken, as a copy
    assert cache._views["r"].steps["0001"] is not done
    cache.get_steps("r", ["0004"])
    assert cache._views["r"].steps["0004"] == done  # one the view lacked
    assert cache.get_steps("other", ["0001"]) == {"0001": done}  # no view: none made
    assert "other" not in cache._views


def test_a_child_ending_in_this_container_drops_its_parents_view() -> None:
    """GIVEN a warm worker holding the view of a parent that waits for its child
    WHEN the same container runs the child to its end, and the report lands without the
    parent's wake-up (the worker died between the two writes)
    THEN the parent's next invocation loads: the view held its record WAITING, and nothing
    else (no inbox bump) would say so. Kills: ``finish_child``'s ``forget`` of the parent
    deleted (history_cache-7b355b85)."""
    w = World()
    parent = w.warm.start("parent")
    assert w.warm.resume(parent.run_id).result == "suspended"
    assert parent.run_id in w.cache._views
    (child,) = [r for r in w.ledger._runs.values() if r.workflow == "count"]
    w.ledger.wake_parent = lambda parent_id: True  # type: ignore[method-assign]
    assert w.finish(w.warm, child.run_id) == "succeeded"
    assert parent.run_id not in w.cache._views
    assert w.finish(w.warm, parent.run_id) == "succeeded"  # every view used was checked
    assert w.ledger.get_run(parent.run_id).output == "4"  # type: ignore[union-attr]


def test_a_child_end_that_raised_drops_the_childs_view() -> None:
    """A worker that dies inside ``finish_child`` may have ended the child already: its
    view of the child is not followed past that. Kills: ``forget`` in ``finish_child``'s
    error path deleted (history_cache-98b74e4a)."""
    w = World()
    child = w.warm.start("count", 7)
    w.warm_view(child.run_id)
    guard = w.claim(child.run_id)
    report = ChildReport("P", "0001", child.run_id, StepStatus.DONE, "21")

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise SimulatedCrash("the container died after the child's end")

    w.ledger.finish_child = crash  # type: ignore[method-assign]
    with pytest.raises(SimulatedCrash):
        w.cache.finish_child(child.run_id, guard, {"status": "SUCCEEDED"}, report, now="T")
    assert child.run_id not in w.cache._views


def test_a_purge_through_the_cache_deletes_expiring_leftovers_unless_told_to_keep_them() -> None:
    """The wrapper passes the ledger's own default on: a purge of leftovers deletes those
    that carry a TTL too, unless ``keep_expiring`` says otherwise. Kills: the default of
    ``keep_expiring`` flipped (history_cache-85f927de)."""
    w = World()
    old = StepRecord("r", "0001", "s", StepKind.STEP, StepStatus.DONE, "T0", purge_at=1)
    w.ledger.write_step(old)
    assert w.cache.purge_leftovers("r", before="T1", keep_expiring=True) == 0
    assert w.ledger.get_step("r", "0001") is not None
    assert w.cache.purge_leftovers("r", before="T1") == 1
    assert w.ledger.get_step("r", "0001") is None
