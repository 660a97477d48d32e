"""A run's identity is one thing everywhere (issue 43): what names a run, and what
follows it across continue-as-new, keyed restarts, retries and forks. One test per row
of the table in docs/architecture.md ("A run's identity"), named after the row.

The runs here are the memory ledger's, driven by ``LocalRunner`` (a fake clock; every
wait goes through the ledger).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, RunStatus
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker
from durable.core.clock import FakeClock
from durable.core.model import SignalRecord
from durable.engine.engine import Engine
from durable.engine.schedules import schedule_gate
from durable.errors import InvalidInput, InvalidState
from durable.testing import LocalRunner, RunNotSucceeded
from tests.conftest import MakeTables, aws_client

pytestmark = pytest.mark.unit

KEY = "ledger-sync"


def paging_app(pages: int = 3, pause: timedelta = timedelta(0)) -> App:
    """``sync`` pages through ``pages`` pages, one run each (continue-as-new), pausing
    ``pause`` in each: the chain's end returns the number of pages it saw."""
    app = App()

    @app.workflow
    def sync(ctx: Context, page: int) -> int:
        if pause:
            ctx.sleep(pause)
        if page + 1 < pages:
            ctx.continue_as_new(page + 1)
        return page + 1

    @app.workflow
    def parent(ctx: Context, _: int) -> int:
        value: int = ctx.run_child(sync, 0, id=KEY, if_running="attach")
        return value

    return app


def chain_end(get_run: Any, run: Any, max_hops: int = 100) -> Any:
    from durable.engine import lineage  # new in issue 43: imported here so this file
    # runs on the code before it (where every test below that needs it fails)

    return lineage.chain_end(get_run, run, max_hops)


def follow(get_run: Any, run: Any, max_hops: int = 100) -> Any:
    from durable.engine import lineage

    return lineage.follow(get_run, run, max_hops)


def chain_of(runner: LocalRunner, run_id: str) -> list[str]:
    """The ids of ``run_id``'s chain, in order."""
    ids = [run_id]
    while True:
        run = runner.get_run(ids[-1])
        output = json.loads(run.output) if run.output else None
        if not (isinstance(output, dict) and "continued_as_new" in output):
            return ids
        ids.append(output["continued_as_new"])


# --- attach handles and result() --------------------------------------------------------


def test_attach_handles_and_result() -> None:
    """GIVEN a parent attached to a keyed run WHEN that run continues as new twice THEN
    the parent's handle gets the result of the run that ends the chain (an int), not the
    continue-as-new marker (a ValidationError on 3b4ac58); ``LocalRunner.result`` of the
    first run is that result too, while the first run still shows its own output."""
    runner = LocalRunner(paging_app(pages=3, pause=timedelta(hours=1)))
    head = runner.start("sync", 0, idempotency_key=KEY)
    runner.run_until_idle()
    parent = runner.start("parent", 0)
    runner.run_until_idle()
    runner.advance(hours=4)
    runner.run_until_idle()
    ids = chain_of(runner, head.run_id)
    assert len(ids) == 3
    stored = runner.get_run(parent.run_id)
    assert stored.status == RunStatus.SUCCEEDED, stored.error
    assert runner.result(parent.run_id) == 3
    assert runner.result(head.run_id) == 3
    assert json.loads(runner.get_run(head.run_id).output or "") == {"continued_as_new": ids[1]}
    # The parent's record still names the run it attached to (a handle's run_id is the
    # same on every replay), and says which run ended the chain.
    (rec,) = [s for s in runner.history(parent.run_id) if s.kind.value == "child"]
    assert rec.detail is not None
    assert rec.detail["child"] == head.run_id and rec.detail["ended_in"] == ids[-1]


def test_attach_handles_and_result_adopt_a_chain_that_already_ended() -> None:
    """The adopt path: a keyed run that already continued as new and whose chain ended
    settles the parent's record from the chain's end (the marker on 3b4ac58)."""
    runner = LocalRunner(paging_app(pages=2))
    runner.start("sync", 0, idempotency_key=KEY)
    runner.run_until_idle()
    parent = runner.start("parent", 0)
    runner.run_until_idle()
    assert runner.result(parent.run_id) == 2


def test_attach_handles_and_result_attach_to_a_chain_still_going() -> None:
    """The adopt path: a keyed run that continued as new while its successor still runs
    is attached to, not settled (3b4ac58 settled the parent with the marker at once)."""
    runner = LocalRunner(paging_app(pages=2, pause=timedelta(hours=1)))
    runner.start("sync", 0, idempotency_key=KEY)
    runner.run_until_idle()
    runner.advance(hours=1)  # the first run continued; its successor sleeps an hour
    runner.run_until_idle()
    parent = runner.start("parent", 0)
    runner.run_until_idle()
    assert runner.get_run(parent.run_id).status == RunStatus.WAITING
    runner.advance(hours=2)
    runner.run_until_idle()
    assert runner.result(parent.run_id) == 2


def test_attach_handles_and_result_a_returned_marker_is_a_result() -> None:
    """A workflow may return the marker's shape itself: nothing continues it (no run it
    names says ``continued_from`` this one), so that dict is its result."""
    app = App()

    @app.workflow
    def lookalike(ctx: Context) -> dict[str, Any]:
        return {"continued_as_new": "01KDVDNA00BXNSJ4X7EBXK7CR6"}

    @app.workflow
    def parent(ctx: Context) -> dict[str, Any]:
        value: dict[str, Any] = ctx.run_child(lookalike, id="k", if_running="attach")
        return value

    runner = LocalRunner(app)
    run = runner.start("lookalike")
    runner.run_until_idle()
    assert runner.result(run.run_id) == {"continued_as_new": "01KDVDNA00BXNSJ4X7EBXK7CR6"}
    assert chain_end(runner.memory_ledger.get_run, runner.get_run(run.run_id)) is not None
    p = runner.start("parent")
    runner.run_until_idle()
    assert runner.result(p.run_id) == {"continued_as_new": "01KDVDNA00BXNSJ4X7EBXK7CR6"}


def test_attach_handles_and_result_a_long_chain_is_walked_in_bounded_steps() -> None:
    """A walk reads at most ``max_hops`` runs; it says where it stopped, to go on from."""
    runner = LocalRunner(paging_app(pages=5))
    head = runner.start("sync", 0)
    runner.run_until_idle()
    get = runner.memory_ledger.get_run
    first = runner.get_run(head.run_id)
    part = follow(get, first, max_hops=2)
    assert not part.whole and part.run.run_id == chain_of(runner, head.run_id)[2]
    assert chain_end(get, first, max_hops=2) is None
    assert follow(get, part.run, max_hops=2).whole


# --- schedule overlap and gates -------------------------------------------------------


def scheduled_app(overlap: str) -> App:
    app = App()

    @app.workflow
    def hourly(ctx: Context, page: int) -> int:
        ctx.sleep(timedelta(minutes=30))
        if page < 3:  # four pages, half an hour each: two hours in all
            ctx.continue_as_new(page + 1)
        return page

    app.schedule("hourly", "rate(1 hour)", input=0, overlap=overlap)  # type: ignore[arg-type]
    return app


def test_schedule_overlap_and_gates() -> None:
    """GIVEN an hourly overlap="skip" schedule whose run pages with continue_as_new for
    two hours WHEN the next hour's fire comes THEN it is skipped: the chain is the
    schedule's run (3b4ac58 counted only keyed runs and started a second sync)."""
    runner = LocalRunner(scheduled_app("skip"))
    t0 = runner.clock.now()
    first = runner.fire_schedule("hourly", t0)
    assert first.result == "started"
    runner.advance(minutes=45)  # the first run continued as new; its successor sleeps
    assert runner.get_run(first.run_id or "").status == RunStatus.SUCCEEDED
    nxt = runner.fire_schedule("hourly", t0 + timedelta(hours=1))
    assert nxt.result == "skipped_overlap", nxt
    assert nxt.run_id in chain_of(runner, first.run_id or "")


def test_schedule_overlap_and_gates_buffer_one_waits_for_the_chain() -> None:
    """overlap="buffer_one": the buffered fire's run waits for the whole chain (the
    successor keeps the schedule's one slot), and a third fire is dropped meanwhile."""
    runner = LocalRunner(scheduled_app("buffer_one"))
    t0 = runner.clock.now()
    first = runner.fire_schedule("hourly", t0)
    runner.advance(minutes=45)
    buffered = runner.fire_schedule("hourly", t0 + timedelta(hours=1))
    assert buffered.result == "started" and buffered.run_id is not None
    runner.advance(minutes=20)  # the second link ends and continues: the slot stays
    chain = chain_of(runner, first.run_id or "")
    assert len(chain) >= 3
    assert runner.get_run(buffered.run_id).status == RunStatus.PENDING
    gate = runner.memory_ledger.read_gate(schedule_gate(runner.app.schedules()["hourly"]))
    assert gate.holders == (chain[-1],) and gate.queue == (buffered.run_id,)
    # Another fire while the chain goes on and one waits: dropped.
    assert runner.fire_schedule("hourly", runner.clock.now()).result == "skipped_overlap"
    runner.advance(hours=3)
    assert runner.result(first.run_id or "") == 3
    assert runner.get_run(buffered.run_id).status == RunStatus.SUCCEEDED
    end = runner.get_run(chain_of(runner, first.run_id or "")[-1])
    later = runner.get_run(chain_of(runner, buffered.run_id)[0])
    assert later.created_at < end.updated_at  # buffered while the chain went on
    assert runner.get_run(chain_of(runner, buffered.run_id)[1]).created_at > end.updated_at


def test_schedule_overlap_and_gates_a_fork_is_not_the_schedule_s() -> None:
    """A fork of a schedule's run, asked for without an identity of its own, is an
    operator's run: neither it nor its continue-as-new successors hold back the
    schedule's next fire (it copied the run's requested_by, which a skip fire reads as
    "a run of this schedule's chain is going")."""
    runner = LocalRunner(scheduled_app("skip"))
    t0 = runner.clock.now()
    first = runner.fire_schedule("hourly", t0)
    runner.advance(hours=2, minutes=10)  # the schedule's chain has ended
    assert runner.result(first.run_id or "") == 3
    fork = runner.engine.fork(first.run_id or "", 1, requested_by=None)
    runner.advance(minutes=35)  # the fork continued as new; its successor sleeps
    forked_chain = chain_of(runner, fork.run_id)
    assert len(forked_chain) == 2
    assert not runner.get_run(forked_chain[-1]).status.terminal
    nxt = runner.fire_schedule("hourly", runner.clock.now())
    assert nxt.result == "started", nxt


# --- flow-control gates --------------------------------------------------------------------


def test_flow_control_gates() -> None:
    """A workflow's own concurrency gate: a successor is a new start, in the gate its
    input names, and waits in line behind the runs already waiting (docs/flow-control.md)."""
    app = App()

    @app.workflow(concurrency=1)
    def job(ctx: Context, n: int) -> int:
        ctx.sleep(timedelta(minutes=10))
        if n == 0:
            ctx.continue_as_new(1)
        return n

    runner = LocalRunner(app)
    a = runner.start("job", 0)
    runner.run_until_idle()
    b = runner.start("job", 5)
    runner.run_until_idle()
    assert runner.get_run(b.run_id).status == RunStatus.PENDING  # in line behind a
    runner.advance(minutes=10)  # a continues as new: b has the slot, a's successor waits
    successor = chain_of(runner, a.run_id)[1]
    assert runner.get_run(successor).status == RunStatus.PENDING
    assert runner.get_run(b.run_id).status == RunStatus.WAITING
    runner.advance(minutes=30)
    assert runner.result(a.run_id) == 1 and runner.result(b.run_id) == 5


# --- lookup and signals by key -------------------------------------------------------------


def signal_app() -> App:
    app = App()

    @app.workflow
    def inbox(ctx: Context, seen: list[str]) -> list[str]:
        got = ctx.wait_for_signal("item")
        seen = [*seen, str(got)]
        if len(seen) < 4:
            ctx.continue_as_new(seen)
        return seen

    return app


def test_lookup_and_signals_by_key() -> None:
    """The key names the chain's first run (``run_by_key``, unchanged); a signal sent to
    it after it continued as new goes to the run that carries the chain now (3b4ac58
    refused it: the run had finished)."""
    runner = LocalRunner(signal_app())
    head = runner.start("inbox", [], idempotency_key="box")
    runner.run_until_idle()
    for item in ("a", "b", "c", "d"):
        found = runner.run_by_key("inbox", "box")
        assert found.run_id == head.run_id
        runner.signal(found.run_id, "item", item)
        runner.run_until_idle()
    assert runner.result(head.run_id) == ["a", "b", "c", "d"]
    with pytest.raises(InvalidState, match="chain ended"):
        runner.signal(head.run_id, "item", "e")


def test_lookup_and_signals_by_key_keyed_repeat_is_one_signal() -> None:
    """A keyed signal repeated to the first run's id after the chain moved on is still
    one signal: the repeat finds the one stored, wherever it went."""
    runner = LocalRunner(signal_app())
    head = runner.start("inbox", [])
    runner.run_until_idle()
    runner.signal(head.run_id, "item", "a", key="k-a")
    runner.run_until_idle()
    first = runner.signal(head.run_id, "item", "b", key="k-b")  # forwarded
    again = runner.signal(head.run_id, "item", "b", key="k-b")
    assert again.signal_id == first.signal_id
    runner.run_until_idle()
    successor = chain_of(runner, head.run_id)[1]
    assert runner.get_run(chain_of(runner, head.run_id)[-1]).status == RunStatus.WAITING
    assert first.run_id == successor


# --- pending signals and callbacks ----------------------------------------------------------


def batch_app() -> App:
    """``batch`` takes one signal per run and continues; signals sent while it sleeps
    pile up unconsumed."""
    app = App()

    @app.workflow
    def batch(ctx: Context, seen: list[str]) -> list[str]:
        ctx.sleep(timedelta(minutes=5))
        seen = [*seen, str(ctx.wait_for_signal("item"))]
        if len(seen) < 3:
            ctx.continue_as_new(seen)
        return seen

    return app


def test_pending_signals_and_callbacks() -> None:
    """Signals a run leaves unconsumed when it continues as new go to its successor, in
    the order they arrived, ahead of any sent later (3b4ac58 dropped them)."""
    runner = LocalRunner(batch_app())
    run = runner.start("batch", [])
    runner.run_until_idle()
    for item in ("a", "b"):
        runner.signal(run.run_id, "item", item)
    runner.run_until_idle()
    runner.advance(minutes=5)  # takes "a", continues as new with "b" left
    runner.signal(run.run_id, "item", "c")  # to the old id: after "b"
    runner.advance(minutes=20)
    assert runner.result(run.run_id) == ["a", "b", "c"]
    successor = chain_of(runner, run.run_id)[1]
    loaded = runner.memory_ledger.load(successor)
    assert loaded is not None
    assert [(s.payload, s.sent_by) for s in sorted(loaded.signals, key=_order)] == [
        ('"b"', f"run {run.run_id}"),
        ('"c"', None),
    ]


def _order(s: SignalRecord) -> tuple[int, str]:
    return (s.seq, s.signal_id)


def test_pending_signals_and_callbacks_survive_a_worker_dying_after_the_ending() -> None:
    """The worker dies between the continuation's write and the hand-over: the
    successor's own first invocation copies what it is owed (the marker's count)."""
    runner = LocalRunner(batch_app())
    run = runner.start("batch", [])
    runner.run_until_idle()
    runner.signal(run.run_id, "item", "a")
    runner.signal(run.run_id, "item", "b")
    runner.run_until_idle()
    runner.crash_at("ledger.continue_run", when="after")
    runner.advance(minutes=5)
    assert runner.crashes
    runner.advance(minutes=20)
    runner.signal(run.run_id, "item", "c")
    runner.advance(minutes=20)
    assert runner.result(run.run_id) == ["a", "b", "c"]
    marker = json.loads(runner.get_run(run.run_id).output or "")
    assert marker["carried_signals"] == 1


def test_pending_signals_and_callbacks_a_signal_during_the_ending_is_replayed() -> None:
    """A signal that lands after the replay loaded the run and before the continuation's
    write: the write is refused (the inbox moved) and the run replays with it, so it is
    handed over (or consumed), never left behind on the ended run."""
    app = App()
    sent: list[str] = []

    @app.workflow
    def once(ctx: Context, n: int) -> int:
        if n == 0:
            if not sent:  # outside the replay's view: the signal lands mid-invocation
                sent.append("x")
                runner.engine.signal(ctx.run_id, "late", "x")
            ctx.continue_as_new(1)
        got = ctx.wait_for_signal("late")
        return int(got == "x")

    runner = LocalRunner(app, determinism_guard=False)
    run = runner.start("once", 0)
    runner.run_until_idle()
    assert runner.result(run.run_id) == 1


def test_pending_signals_and_callbacks_a_callback_ends_with_its_run() -> None:
    """A callback belongs to the run that created it: after that run continued as new,
    an answer is refused loudly (the run has finished), never delivered elsewhere."""
    app = App()

    @app.workflow
    def asks(ctx: Context, n: int) -> int:
        cb = ctx.create_callback("approval", timeout=timedelta(days=1))
        tokens.append(cb.token)
        if n == 0:
            ctx.continue_as_new(1)
        return n

    tokens: list[str] = []
    runner = LocalRunner(app)
    run = runner.start("asks", 0)
    runner.run_until_idle()
    with pytest.raises(InvalidState, match="finished"):
        runner.complete_callback(tokens[0], result=True)
    assert runner.result(run.run_id) == 1


# --- keyed restarts after retention, retries and forks --------------------------------------


def test_keyed_restarts_after_retention() -> None:
    """A key names one run for its retention; a new run under it afterwards is a new
    chain: the walk follows the successor this run's own output names, never a successor
    of the earlier run of the same id (which says ``continued_from`` the same id)."""
    runner = LocalRunner(paging_app(pages=2, pause=timedelta(days=2)))
    first = runner.start("sync", 0, idempotency_key=KEY)
    runner.run_until_idle()
    runner.advance(days=2)
    old_successor = chain_of(runner, first.run_id)[1]
    runner.advance(days=runner.config.retention.days + 1)
    runner.expire()
    assert runner.memory_ledger.get_run(first.run_id) is None
    again = runner.start("sync", 0, idempotency_key=KEY)
    assert again.run_id == first.run_id
    runner.run_until_idle()
    runner.advance(days=5)
    chain = chain_of(runner, again.run_id)
    assert old_successor not in chain and len(chain) == 2
    assert runner.result(again.run_id) == 2


def test_retries_and_forks() -> None:
    """A retry keeps the run's id, so a chain whose end failed and was retried ends in
    that same run; a fork is a new run of its own (``forked_from``), in no chain."""
    app = App()
    fail = [True]

    @app.workflow
    def flaky(ctx: Context, n: int) -> int:
        if n == 0:
            ctx.continue_as_new(1)
        ctx.step(_maybe_fail, fail[0])
        return n

    runner = LocalRunner(app)
    head = runner.start("flaky", 0)
    runner.run_until_idle()
    end = chain_of(runner, head.run_id)[-1]
    with pytest.raises(RunNotSucceeded):
        runner.result(head.run_id)
    fail[0] = False
    runner.retry(end)
    runner.run_until_idle()
    assert runner.result(head.run_id) == 1
    forked = runner.fork(head.run_id, 1)
    runner.run_until_idle()
    assert chain_end(runner.memory_ledger.get_run, runner.get_run(head.run_id)) is not None
    assert forked.run_id not in chain_of(runner, head.run_id)


def _maybe_fail(fail: bool) -> int:
    if fail:
        raise ValueError("down")
    return 1


# --- the console and durable show ----------------------------------------------------------


def test_the_console_and_durable_show() -> None:
    """Each run is shown as it is: the first run of a chain SUCCEEDED with the marker as
    its output, its successor names it in ``continued_from``."""
    runner = LocalRunner(paging_app(pages=2))
    head = runner.start("sync", 0)
    runner.run_until_idle()
    ids = chain_of(runner, head.run_id)
    first, second = runner.get_run(ids[0]), runner.get_run(ids[1])
    assert first.status == RunStatus.SUCCEEDED
    assert json.loads(first.output or "") == {"continued_as_new": ids[1]}
    assert second.continued_from == ids[0] and json.loads(second.output or "") == 2


# --- the version a successor runs ------------------------------------------------------------


def test_the_version_a_successor_runs() -> None:
    """A successor runs the version a new start would (the newest registered) when its
    input validates for it, so a looping chain leaves an old version; one whose input
    the newest refuses stays on its own version."""

    def app_with(v2_takes: type) -> App:
        app = App()

        @app.workflow(name="loop", version=1)
        def loop_v1(ctx: Context, n: int) -> str:
            ctx.sleep(timedelta(hours=1))
            ctx.continue_as_new(n + 1)
            return "never"

        if v2_takes is int:

            @app.workflow(name="loop", version=2)
            def loop_v2(ctx: Context, n: int) -> str:
                return f"v2 got {n}"

        else:

            @app.workflow(name="loop", version=2)
            def loop_v2s(ctx: Context, n: list[str]) -> str:
                return "v2"

        return app

    v1_only = App()

    @v1_only.workflow(name="loop", version=1)
    def loop(ctx: Context, n: int) -> str:
        ctx.sleep(timedelta(hours=1))
        ctx.continue_as_new(n + 1)
        return "never"

    runner = LocalRunner(v1_only)
    run = runner.start("loop", 0)
    runner.run_until_idle()
    runner.deploy(app_with(int))
    runner.advance(hours=1)
    ids = chain_of(runner, run.run_id)
    assert [runner.get_run(r).version for r in ids] == [1, 2]
    assert runner.result(run.run_id) == "v2 got 1"

    runner = LocalRunner(v1_only)
    run = runner.start("loop", 0)
    runner.run_until_idle()
    runner.deploy(app_with(list))
    runner.advance(hours=1)
    ids = chain_of(runner, run.run_id)
    assert [runner.get_run(r).version for r in ids[:2]] == [1, 1]
    with pytest.raises(InvalidInput):
        runner.start("loop", 0)  # a new start of v2 refuses the int too


def test_pending_signals_and_callbacks_on_dynamodb(
    mock_aws_session: None, make_tables: MakeTables
) -> None:
    """The same hand-over on the DynamoDB ledger (moto): the copies are keyed items of
    the successor, and a keyed repeat to the first run's id is still one signal."""
    client = aws_client("dynamodb", None)
    name, _ = make_tables(client)
    clock = FakeClock()
    invoker = MemoryInvoker()
    engine = Engine(
        batch_app(), DynamoLedger(client, name), invoker, MemoryEffectStore(), clock=clock
    )

    def drain() -> None:
        while (job := invoker.pop()) is not None:
            engine.resume(job.run_id, reason=job.reason)

    run = engine.start("batch", [])
    drain()
    engine.signal(run.run_id, "item", "a")
    engine.signal(run.run_id, "item", "b", key="kb")
    drain()
    clock.advance(timedelta(minutes=5))
    engine.resume(run.run_id, reason="timer")  # takes "a", continues with "b" left
    drain()
    again = engine.signal(run.run_id, "item", "b", key="kb")  # a repeat: stored once
    engine.signal(run.run_id, "item", "c")  # to the old id: goes on to the successor
    drain()
    for _ in range(3):
        clock.advance(timedelta(minutes=5))
        for r in [s.run_id for s in engine.list_runs(workflow="batch").items]:
            if not engine.get_run(r).terminal:
                engine.resume(r, reason="timer")
        drain()
    ids = [run.run_id]
    while (nxt := json.loads(engine.get_run(ids[-1]).output or "null")) and isinstance(nxt, dict):
        ids.append(nxt["continued_as_new"])
    assert json.loads(engine.get_run(ids[-1]).output or "") == ["a", "b", "c"]
    assert again.run_id == run.run_id  # the repeat found the original, on the first run


def test_attach_handles_and_result_a_start_with_the_key_finds_the_chain() -> None:
    """A start (the API's, the CLI's, code's) repeating a key whose run continued as new
    means the work: with ``if_running="attach"`` (any input) or the same input it gets
    the run that carries the chain now, not the first run's SUCCEEDED marker; with
    another input and no attach, it is refused while the chain goes on."""
    runner = LocalRunner(paging_app(pages=3, pause=timedelta(hours=1)))
    head = runner.start("sync", 0, idempotency_key=KEY)
    runner.run_until_idle()
    runner.advance(hours=1)
    runner.run_until_idle()
    ids = chain_of(runner, head.run_id)
    assert len(ids) == 2  # the second run sleeps
    engine = runner.engine
    same, created = engine.start_or_get("sync", 0, idempotency_key=KEY)
    assert (same.run_id, created) == (ids[1], False)
    attached, created = engine.start_or_get("sync", 7, idempotency_key=KEY, if_running="attach")
    assert (attached.run_id, created) == (ids[1], False)
    assert not attached.terminal
    from durable.errors import IdempotencyConflict

    with pytest.raises(IdempotencyConflict, match="if_running"):
        engine.start_or_get("sync", 7, idempotency_key=KEY)
    runner.advance(hours=2)
    runner.run_until_idle()
    ended, _ = engine.start_or_get("sync", 0, idempotency_key=KEY)
    assert ended.run_id == chain_of(runner, head.run_id)[-1]
    assert ended.status == RunStatus.SUCCEEDED and json.loads(ended.output or "") == 3
