"""Flow control (``durable.core.flow``, ``durable.engine.admission``): a concurrency limit
per workflow and per key, runs waiting in line in order, slots freed by every way a run ends (and by
the backstop when a worker died before freeing one), and a rate limit on starts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable import App, Concurrency, Context, RateLimit
from durable.core.flow import GateState, book, enter, leave
from durable.core.model import RunStatus, parse_time
from durable.errors import InvalidInput, RegistrationError
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit


def _app() -> App:
    app = App()

    @app.step()
    def note(text: str) -> str:
        return text

    @app.workflow(name="sync", concurrency=2)
    def sync(ctx: Context, n: int) -> int:
        note(f"start {n}")
        ctx.wait_for_signal("done")
        return n

    @app.workflow(name="per-customer", concurrency=Concurrency(1, key="customer.id"))
    def per_customer(ctx: Context, order: dict[str, Any]) -> str:
        ctx.wait_for_signal("done")
        return str(order["n"])

    @app.workflow(name="mail", rate_limit=RateLimit(2, timedelta(minutes=1)))
    def mail(ctx: Context, n: int) -> int:
        note(str(n))
        return n

    return app


def _holding(r: LocalRunner, ids: list[str]) -> list[str]:
    """The runs that got past the gate (they wait for their signal)."""
    return [i for i in ids if r.get_run(i).status == RunStatus.WAITING]


def test_at_most_the_limit_run_and_the_rest_wait_in_line_in_order() -> None:
    r = LocalRunner(_app())
    ids = [r.start("sync", n).run_id for n in range(5)]
    r.run_until_idle()
    assert _holding(r, ids) == ids[:2]
    queued = [r.get_run(i) for i in ids[2:]]
    assert all(q.status == RunStatus.PENDING and q.queued_at is not None for q in queued)
    assert all(q.due_at is not None and q.lease_owner is None for q in queued)
    assert r.memory_ledger.read_gate("C#sync#").queue == tuple(ids[2:])
    for done, admitted in ((ids[1], ids[2]), (ids[0], ids[3]), (ids[3], ids[4])):
        r.signal(done, "done")
        r.run_until_idle()
        assert r.get_run(done).status == RunStatus.SUCCEEDED
        assert r.get_run(admitted).status == RunStatus.WAITING
        assert r.get_run(admitted).queued_at is None  # no longer shown as waiting
    gate = r.memory_ledger.read_gate("C#sync#")
    assert gate.holders == (ids[2], ids[4]) and gate.queue == ()


def test_a_limit_per_key_lets_other_keys_through() -> None:
    r = LocalRunner(_app())
    a1 = r.start("per-customer", {"customer": {"id": "acme"}, "n": 1}).run_id
    a2 = r.start("per-customer", {"customer": {"id": "acme"}, "n": 2}).run_id
    b1 = r.start("per-customer", {"customer": {"id": "bolt"}, "n": 3}).run_id
    r.run_until_idle()
    assert _holding(r, [a1, a2, b1]) == [a1, b1]
    assert r.get_run(a2).gate == "C#per-customer#acme"
    r.signal(a1, "done")
    r.run_until_idle()
    assert _holding(r, [a1, a2, b1]) == [a2, b1]


def test_a_key_the_input_lacks_is_refused_at_the_start_and_nothing_is_written() -> None:
    r = LocalRunner(_app())
    with pytest.raises(InvalidInput) as e:
        r.start("per-customer", {"customer": {"name": "x"}, "n": 1})
    assert e.value.field == "input.customer.id" and "send an input with" in str(e.value)
    assert r.memory_ledger.all_run_ids() == []


def test_a_key_that_is_null_is_refused_as_one_the_input_lacks() -> None:
    """A null key is a missing one: taken as the text "None" it put every such run of
    every customer behind one gate, one at a time (found by the explorer's keyed-gate
    maps, issue 31). A key function that answers None is refused the same way."""
    r = LocalRunner(_app())
    with pytest.raises(InvalidInput) as e:
        r.start("per-customer", {"customer": {"id": None}, "n": 1})
    assert e.value.field == "input.customer.id" and "null" in str(e.value)
    app = App()

    @app.workflow(name="by-fn", concurrency=Concurrency(1, key=lambda x: x.get("region")))
    def by_fn(ctx: Context, x: dict[str, Any]) -> None:
        return None

    runner = LocalRunner(app)
    with pytest.raises(InvalidInput) as e:
        runner.start("by-fn", {"other": 1})
    assert e.value.field == "input" and "None" in str(e.value)
    assert r.memory_ledger.all_run_ids() == [] and runner.memory_ledger.all_run_ids() == []


@pytest.mark.parametrize("compensate", [False, True])
def test_canceling_a_holder_or_a_waiter_frees_its_place(compensate: bool) -> None:
    r = LocalRunner(_app())
    ids = [r.start("sync", n).run_id for n in range(4)]
    r.run_until_idle()
    r.cancel(ids[2], compensate=compensate)  # a waiter: leaves the line
    r.run_until_idle()
    assert r.get_run(ids[2]).status == RunStatus.CANCELED
    assert r.memory_ledger.read_gate("C#sync#").queue == (ids[3],)
    r.cancel(ids[0], compensate=compensate)  # a holder: its slot goes to the next in line
    r.run_until_idle()
    assert r.get_run(ids[0]).status == RunStatus.CANCELED
    assert _holding(r, ids) == [ids[1], ids[3]]


def test_a_failed_run_frees_its_slot_and_a_retry_takes_one_again() -> None:
    app = App()
    boom = {"on": True}

    @app.step()
    def flaky() -> str:
        if boom["on"]:
            from durable import TerminalError

            raise TerminalError("down")
        return "ok"

    @app.workflow(name="one", concurrency=1)
    def one(ctx: Context, n: int) -> str:
        out = flaky() if n == 0 else "fine"
        ctx.wait_for_signal("done")
        return out

    r = LocalRunner(app)
    first = r.start("one", 0).run_id
    second = r.start("one", 1).run_id
    r.run_until_idle()
    assert r.get_run(first).status == RunStatus.FAILED
    assert r.get_run(second).status == RunStatus.WAITING  # got the slot the failure freed
    boom["on"] = False
    r.retry(first)
    r.run_until_idle()
    assert r.get_run(first).status == RunStatus.PENDING and r.get_run(first).queued_at
    r.signal(second, "done")
    r.run_until_idle()
    assert r.get_run(first).status == RunStatus.WAITING


def test_a_slot_left_by_a_worker_that_died_is_freed_by_the_first_in_line() -> None:
    r = LocalRunner(_app())
    ids = [r.start("sync", n).run_id for n in range(3)]
    r.run_until_idle()
    # The holder's worker dies right after its final write, before it leaves the gate.
    r.crash_at("ledger.write_gate", call=r.call_count("ledger.write_gate") + 1)
    r.signal(ids[0], "done")
    r.run_until_idle()
    assert r.get_run(ids[0]).status == RunStatus.SUCCEEDED
    assert ids[0] in r.memory_ledger.read_gate("C#sync#").holders  # the leaked slot
    assert r.get_run(ids[2]).status == RunStatus.PENDING
    r.advance(minutes=4)
    assert r.get_run(ids[2]).status == RunStatus.PENDING  # not polling meanwhile
    r.advance(minutes=1)  # its recheck: it finds the holder ended and takes the slot
    assert r.get_run(ids[2]).status == RunStatus.WAITING
    assert r.memory_ledger.read_gate("C#sync#").holders == (ids[1], ids[2])


def test_a_wake_up_lost_with_its_worker_comes_at_the_recheck() -> None:
    r = LocalRunner(_app())
    ids = [r.start("sync", n).run_id for n in range(3)]
    r.run_until_idle()
    r.crash_at("ledger.operate", call=r.call_count("ledger.operate") + 1)  # the wake
    r.signal(ids[0], "done")
    r.run_until_idle()
    assert r.memory_ledger.read_gate("C#sync#").holders == (ids[1],)
    assert r.get_run(ids[2]).status == RunStatus.PENDING
    r.advance(minutes=5)
    assert r.get_run(ids[2]).status == RunStatus.WAITING


def test_a_waiter_woken_while_it_suspends_sees_the_wake_up() -> None:
    """The wake bumps the waiter's inbox: a waiter that decided "full" before the slot
    freed cannot then suspend over it (its write is guarded by the inbox it read)."""
    r = LocalRunner(_app())
    ids = [r.start("sync", n).run_id for n in range(2)]
    r.run_until_idle()
    third = r.start("sync", 2).run_id
    ledger = r.memory_ledger
    real = ledger.update_run
    fired: list[int] = []

    def update_run(run_id: str, guard: Any, changes: Any) -> Any:
        if run_id == third and "queued_at" in changes and changes["queued_at"] and not fired:
            fired.append(1)  # the slot frees between the waiter's decision and its write
            r.signal(ids[0], "done")
            r.engine.resume(ids[0], reason="event")
        return real(run_id, guard, changes)

    ledger.update_run = update_run  # type: ignore[method-assign]
    r.run_until_idle()
    assert fired and r.get_run(third).status == RunStatus.WAITING
    assert r.get_run(third).queued_at is None


def test_a_rate_limit_spreads_starts_in_order_and_never_over_the_limit() -> None:
    r = LocalRunner(_app())
    t0 = r.clock.now()
    ids = [r.start("mail", n).run_id for n in range(5)]
    r.run_until_idle()
    done = [i for i in ids if r.get_run(i).status == RunStatus.SUCCEEDED]
    assert done == ids[:2]
    booked = [parse_time(r.get_run(i).start_at or "") - t0 for i in ids]
    assert booked == [timedelta(0)] * 2 + [timedelta(minutes=1)] * 2 + [timedelta(minutes=2)]
    r.advance(minutes=1)
    assert [r.get_run(i).status for i in ids].count(RunStatus.SUCCEEDED) == 4
    r.advance(minutes=1)
    assert all(r.get_run(i).status == RunStatus.SUCCEEDED for i in ids)
    # an early wake-up (an event) does not book again: the run sleeps on to its time
    r.start("mail", 8)
    late = r.start("mail", 9).run_id
    r.run_until_idle()
    assert r.get_run(late).status == RunStatus.PENDING
    at = r.get_run(late).start_at
    r.signal(late, "nudge")
    r.run_until_idle()
    assert r.get_run(late).start_at == at and r.get_run(late).status == RunStatus.PENDING


def test_the_rules_decide_in_line_order() -> None:
    empty = GateState()
    s1, holds = enter(empty, "a", 1)
    assert holds and s1 == GateState(holders=("a",))
    s2, holds = enter(s1, "b", 1)
    assert not holds and s2 == GateState(holders=("a",), queue=("b",))
    assert enter(s2, "b", 1) == (None, False)  # asking again keeps the place
    assert enter(s2, "a", 1) == (None, True)
    s3, holds = enter(s2, "c", 2)  # a newcomer may not overtake b
    assert not holds and s3 is not None and s3.queue == ("b", "c")
    s4, holds = enter(s3, "c", 3)  # two free slots: the second in line fits too
    assert holds and s4 is not None and s4.queue == ("b",) and s4.holders == ("a", "c")
    gone, wake = leave(s2, ("a",), 1)
    assert gone == GateState(queue=("b",)) and wake == ("b",)
    assert leave(s2, ("zz",), 1) == (None, ())
    gone, wake = leave(GateState(holders=("a", "x"), queue=("b", "c")), ("a", "c"), 2)
    assert gone is not None and gone.holders == ("x",) and wake == ("b",)


def test_bookings_keep_every_window_at_the_limit() -> None:
    now = parse_time("2026-12-04T12:00:00.000Z")
    state, times = GateState(), []
    for i in range(7):
        state, at = book(state, now + timedelta(seconds=10 * i), 3, timedelta(minutes=1))
        times.append(at)
    assert len(state.booked) == 3
    for i, at in enumerate(times):
        window = [t for t in times if at <= t < at + timedelta(minutes=1)]
        assert len(window) <= 3, (i, window)
    assert times[3] == times[0] + timedelta(minutes=1)


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"concurrency": 0}, "concurrency limit must be an int from 1 to 1000"),
        ({"concurrency": True}, "concurrency= takes an int or a durable.Concurrency"),
        ({"concurrency": "5"}, "concurrency= takes an int or a durable.Concurrency"),
        ({"rate_limit": 5}, "rate_limit= takes a durable.RateLimit"),
    ],
)
def test_a_bad_limit_is_refused_where_it_is_declared(kwargs: dict[str, Any], said: str) -> None:
    with pytest.raises(RegistrationError, match=said):

        @App().workflow(name="w", **kwargs)
        def w(ctx: Context, x: int) -> None: ...


def test_a_limit_per_key_needs_an_input_and_a_rate_a_real_period() -> None:
    with pytest.raises(RegistrationError, match="takes none"):

        @App().workflow(name="w", concurrency=Concurrency(2, key="customer"))
        def w(ctx: Context) -> None: ...

    with pytest.raises(RegistrationError, match="field name of the input"):
        Concurrency(1, key="a..b")
    with pytest.raises(RegistrationError, match="at least one second"):
        RateLimit(5, timedelta(milliseconds=10))
    with pytest.raises(RegistrationError, match="from 1 to 1000"):
        RateLimit(0, timedelta(minutes=1))


def test_a_long_wait_looks_at_the_gate_less_and_less_often() -> None:
    from durable.core.config import EngineConfig
    from durable.engine.admission import MAX_RECHECK, recheck_after

    config = EngineConfig()
    t0 = parse_time("2026-12-04T12:00:00.000Z")
    assert recheck_after(t0, t0, config) == config.slot_recheck
    assert recheck_after(t0, t0 + timedelta(minutes=3), config) == config.slot_recheck
    assert recheck_after(t0, t0 + timedelta(minutes=20), config) == timedelta(minutes=20)
    assert recheck_after(t0, t0 + timedelta(hours=5), config) == MAX_RECHECK == timedelta(hours=1)


@pytest.mark.parametrize("limit", ["concurrency", "rate"])
def test_a_cancel_that_lands_while_a_waiter_gives_back_its_lease_ends_it_without_a_body(
    limit: str,
) -> None:
    """GIVEN a run about to wait for a slot (or for its booked start time)
    WHEN a cancel lands between its decision and its write (the write fails on the
    inbox the cancel bumped, the run is read again and shows the cancel)
    THEN the replay starts from that read: the run is canceled, no body runs and it
    never holds a slot (found by the simulation explorer, seed 2653: the replay used
    the claim's record, which had no cancel, and ran a body outside the gate)."""
    r = LocalRunner(_app())
    if limit == "concurrency":
        holders = [r.start("sync", n).run_id for n in range(2)]
        r.run_until_idle()
        waiter = r.start("sync", 2).run_id
    else:
        for n in range(2):
            r.start("mail", n)
        r.run_until_idle()
        waiter = r.start("mail", 2).run_id
    ledger = r.memory_ledger
    real = ledger.update_run
    fired: list[int] = []

    def update_run(run_id: str, guard: Any, changes: Any) -> Any:
        if run_id == waiter and changes.get("status") == "PENDING" and not fired:
            fired.append(1)
            r.cancel(waiter, "not needed")
        return real(run_id, guard, changes)

    ledger.update_run = update_run  # type: ignore[method-assign]
    history_before = len(r.history(waiter))
    r.engine.resume(waiter, reason="start")
    run = r.get_run(waiter)
    assert fired, "the waiter never tried to give its lease back"
    assert run.status == RunStatus.CANCELED
    assert len(r.history(waiter)) == history_before == 0  # no step ran, none recorded
    if limit == "concurrency":
        gate = ledger.read_gate(run.gate) if run.gate else None
        assert gate is None or waiter not in gate.holders
        assert all(r.get_run(h).status == RunStatus.WAITING for h in holders)


def test_a_retry_that_races_the_failed_runs_leave_keeps_its_new_slot() -> None:
    """GIVEN a run behind concurrency=1 that failed; its worker has read the gate to leave it
    WHEN an operator retries it right then and the reopened run is admitted and waits
    THEN the late leave does not take the reopened run's slot: it still holds it, and a
    second run waits in line (found by the simulation explorer, seed 18265: the reopened
    run found itself still listed as a holder, wrote nothing, and the leave removed it)."""
    from durable import RetryPolicy

    app = App()
    attempts: list[int] = []

    @app.step(retry=RetryPolicy(max_attempts=1))
    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("first time")
        return "ok"

    @app.workflow(name="solo", concurrency=1)
    def solo(ctx: Context, n: int) -> str:
        out = flaky()
        ctx.wait_for_signal("done")
        return out

    r = LocalRunner(app)
    first = r.start("solo", 1).run_id
    ledger = r.memory_ledger
    real_read = ledger.read_gate
    fired: list[int] = []

    def read_gate(name: str) -> Any:
        state = real_read(name)
        run = ledger.get_run(first)
        if not fired and run is not None and run.status == RunStatus.FAILED:
            fired.append(1)  # the failed run's leave has read the gate: the retry lands now
            r.retry(first)
            assert r.invoker.pop() is not None  # the retry's invocation, run here and now:
            r.engine.resume(first, reason="retry")
        return state

    ledger.read_gate = read_gate  # type: ignore[method-assign]
    r.run_until_idle()
    assert fired, "the failed run never left its gate"
    run = r.get_run(first)
    assert run.status == RunStatus.WAITING and run.gate is not None
    assert first in real_read(run.gate).holders
    second = r.start("solo", 2).run_id
    r.run_until_idle()
    assert r.get_run(second).status == RunStatus.PENDING  # in line behind the retried run
