"""Ledger contract, part two: event delivery (callbacks, signals) and the due index."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, Engine, EngineConfig
from durable.adapters.memory import MemoryInvoker
from durable.core.clock import FakeClock
from durable.core.ids import due_shard
from durable.core.model import RunStatus, SignalRecord, StepKind, StepStatus
from durable.core.ports import Invocation, RunFinished, RunGuard, SignalExists, WaitNotPending
from durable.errors import IdempotencyConflict, InvalidInput, StorageError
from tests.support.records import make_run, make_step, t


def waiting_callback(ledger: Any, expires: str | None = None) -> Any:
    step = make_step(
        status=StepStatus.WAITING,
        output=None,
        kind=StepKind.CALLBACK,
        name="approval",
        token_hash="h1",
        token_nonce="n1",
        expires_at=expires,
    )
    ledger.write_step(step)
    return step


def owned(ledger: Any, owner: str = "w") -> RunGuard:
    """Claim RUN1 for ``owner``: the guard its fenced writes carry."""
    claim = ledger.claim("RUN1", owner, now=t(6), lease_until=t(60), stale_before=t(1))
    assert claim is not None
    return RunGuard(claim.run.fence, owner)


def test_get_step_reads_one_record(ledger: Any) -> None:
    ledger.create_run(make_run())
    step = waiting_callback(ledger)
    assert ledger.get_step("RUN1", "0001") == step
    assert ledger.get_step("RUN1", "0002") is None


def test_a_completion_replaces_the_wait_and_bumps_the_inbox(ledger: Any) -> None:
    ledger.create_run(make_run(inbox=4, due_at=None))
    step = waiting_callback(ledger, expires=t(100))
    done = replace(step, status=StepStatus.DONE, output='{"ok":true}')
    ledger.complete_waiting(done, token_hash="h1", now=t(50))
    assert ledger.get_step("RUN1", "0001").output == '{"ok":true}'
    run = ledger.get_run("RUN1")
    assert (run.inbox, run.due_at) == (5, t(50))
    due = ledger.due_runs(int(due_shard("RUN1", ledger.shards)), before=t(60), limit=10)
    assert ("RUN1", t(50)) in due.items


@pytest.mark.parametrize(
    ("case", "token_hash", "now"),
    [("wrong token", "other", t(50)), ("expired", "h1", t(100)), ("already done", "h1", t(50))],
)
def test_a_completion_that_does_not_fit_writes_nothing(
    ledger: Any, case: str, token_hash: str, now: str
) -> None:
    ledger.create_run(make_run(inbox=1))
    step = waiting_callback(ledger, expires=t(100))
    if case == "already done":
        ledger.write_step(replace(step, status=StepStatus.DONE, output='"first"'))
    with pytest.raises(WaitNotPending) as info:
        ledger.complete_waiting(
            replace(step, status=StepStatus.DONE, output='"late"'), token_hash=token_hash, now=now
        )
    assert info.value.current is not None and info.value.current.output != '"late"'
    assert ledger.get_run("RUN1").inbox == 1


def test_a_completion_for_a_finished_run_writes_nothing(ledger: Any) -> None:
    ledger.create_run(make_run(status=RunStatus.CANCELED, inbox=1))
    step = waiting_callback(ledger)
    with pytest.raises(RunFinished):
        ledger.complete_waiting(
            replace(step, status=StepStatus.DONE, output="1"), token_hash="h1", now=t(1)
        )
    assert ledger.get_step("RUN1", "0001").status == StepStatus.WAITING


def test_completion_racing_the_timeout_has_exactly_one_winner(
    ledger: Any, atomic_backend: None
) -> None:
    ledger.create_run(make_run())
    step = waiting_callback(ledger, expires=t(100))
    results: list[str] = []
    barrier = threading.Barrier(2)

    def complete() -> None:
        barrier.wait()
        try:
            ledger.complete_waiting(
                replace(step, status=StepStatus.DONE, output='"yes"'), token_hash="h1", now=t(99)
            )
            results.append("completed")
        except WaitNotPending:
            results.append("refused")

    def time_out() -> None:
        barrier.wait()
        stored = ledger.write_step(replace(step, status=StepStatus.TIMED_OUT))
        results.append("timed out" if stored.status == StepStatus.TIMED_OUT else "adopted")

    threads = [threading.Thread(target=complete), threading.Thread(target=time_out)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    final = ledger.get_step("RUN1", "0001").status
    assert sorted(results) in (["adopted", "completed"], ["refused", "timed out"])
    assert final == (StepStatus.DONE if "completed" in results else StepStatus.TIMED_OUT)


def test_signals_are_stored_and_bump_the_inbox(ledger: Any) -> None:
    ledger.create_run(make_run())
    ledger.add_signal(SignalRecord("RUN1", "go", "01A", '{"n":1}', t(5)), now=t(5))
    ledger.add_signal(SignalRecord("RUN1", "go", "01B", '{"n":2}', t(6)), now=t(6))
    history = ledger.load("RUN1")
    assert [
        (s.signal_id, s.payload) for s in sorted(history.signals, key=lambda s: s.signal_id)
    ] == [
        ("01A", '{"n":1}'),
        ("01B", '{"n":2}'),
    ]
    assert history.run.inbox == 2 and history.run.due_at == t(6)


def test_signals_are_loaded_in_the_order_they_arrived_whatever_their_ids(ledger: Any) -> None:
    """GIVEN two signals whose arrival ids sort against their order of arrival (two
    senders' clocks, or one millisecond)
    WHEN the run is loaded
    THEN they come in arrival order, each numbered by the inbox count it made."""
    ledger.create_run(make_run(inbox=3))
    ledger.add_signal(SignalRecord("RUN1", "go", "01Z", '"first"', t(5)), now=t(5))
    ledger.add_signal(SignalRecord("RUN1", "go", "01A", '"second"', t(5)), now=t(5))
    loaded = ledger.load("RUN1").signals
    assert [(s.payload, s.seq) for s in loaded] == [('"first"', 4), ('"second"', 5)]


def test_signals_to_missing_or_finished_runs_are_refused(ledger: Any) -> None:
    with pytest.raises(RunFinished):
        ledger.add_signal(SignalRecord("NOPE", "go", "01A", "1", t(5)), now=t(5))
    ledger.create_run(make_run(status=RunStatus.SUCCEEDED))
    with pytest.raises(RunFinished):
        ledger.add_signal(SignalRecord("RUN1", "go", "01A", "1", t(5)), now=t(5))
    assert ledger.load("RUN1").signals == []


def test_consuming_a_signal_records_the_step_and_marks_the_signal(ledger: Any) -> None:
    ledger.create_run(make_run())
    signal = SignalRecord("RUN1", "go", "01A", '"payload"', t(5))
    ledger.add_signal(signal, now=t(5))
    step = make_step(
        kind=StepKind.SIGNAL, name="go", output='"payload"', detail={"signal_id": "01A"}
    )
    assert ledger.consume_signal(step, signal, owned(ledger)) == step
    history = ledger.load("RUN1")
    assert history.signals[0].consumed_by == "0001"
    assert history.steps["0001"].output == '"payload"'


# --- signals with an idempotency key -------------------------------------------------------


def keyed(
    signal_id: str, payload: str = '{"n":1}', *, key_hash: str = "k1", name: str = "go"
) -> SignalRecord:
    """A keyed signal as the engine builds it (the key's hash, the payload's hash)."""
    return SignalRecord(
        "RUN1", name, signal_id, payload, t(5), key_hash=key_hash, payload_hash=f"h:{payload}"
    )


def test_a_keyed_signal_is_stored_once(ledger: Any) -> None:
    # GIVEN a keyed signal stored once
    ledger.create_run(make_run(inbox=0, due_at=None))
    first = keyed("01A")
    ledger.add_signal(first, now=t(5))
    # WHEN the same key is sent again (a retry: new arrival id, later time)
    with pytest.raises(SignalExists) as info:
        ledger.add_signal(replace(keyed("01B"), received_at=t(9)), now=t(9))
    # THEN the stored signal comes back whole, and neither the signal nor the inbox changed
    assert info.value.existing == replace(first, seq=1)
    history = ledger.load("RUN1")
    assert history.signals == [replace(first, seq=1)]
    assert (history.run.inbox, history.run.due_at) == (1, t(5))


def test_a_reused_key_with_another_payload_reports_what_is_stored(ledger: Any) -> None:
    # GIVEN a keyed signal
    ledger.create_run(make_run())
    ledger.add_signal(keyed("01A", '{"n":1}'), now=t(5))
    # WHEN the key comes back with another payload
    with pytest.raises(SignalExists) as info:
        ledger.add_signal(keyed("01B", '{"n":2}'), now=t(6))
    # THEN the stored payload hash is reported (the engine calls it a conflict) and the
    # other payload is written nowhere
    assert info.value.existing.payload_hash == 'h:{"n":1}'
    assert [s.payload for s in ledger.load("RUN1").signals] == ['{"n":1}']


def test_a_repeat_after_the_run_finished_is_still_a_repeat(ledger: Any) -> None:
    # GIVEN a keyed signal the run received before it finished
    ledger.create_run(make_run())
    first = keyed("01A")
    ledger.add_signal(first, now=t(5))
    run = ledger.claim("RUN1", "w", now=t(6), lease_until=t(60), stale_before=t(1)).run
    ledger.update_run("RUN1", RunGuard(run.fence, "w"), {"status": "SUCCEEDED", "updated_at": t(7)})
    # WHEN it is sent again, and a new key is sent
    with pytest.raises(SignalExists) as info:
        ledger.add_signal(keyed("01B"), now=t(8))
    with pytest.raises(RunFinished):
        ledger.add_signal(keyed("01C", key_hash="k2"), now=t(8))
    # THEN the repeat gets the stored signal back, the new key is refused, nothing written
    assert info.value.existing == replace(first, seq=1)
    assert ledger.load("RUN1").signals == [replace(first, seq=1)]


def test_keys_are_scoped_to_the_signal_name_and_leave_unkeyed_signals_alone(
    ledger: Any,
) -> None:
    # GIVEN a keyed signal
    ledger.create_run(make_run(inbox=0))
    ledger.add_signal(keyed("01A"), now=t(5))
    # WHEN the same key names another signal, and unkeyed signals arrive, twice each
    ledger.add_signal(keyed("01B", name="stop"), now=t(6))
    ledger.add_signal(SignalRecord("RUN1", "go", "01C", '{"n":1}', t(7)), now=t(7))
    ledger.add_signal(SignalRecord("RUN1", "go", "01D", '{"n":1}', t(8)), now=t(8))
    # THEN each is stored and bumps the inbox: only a repeat of (name, key) is refused
    history = ledger.load("RUN1")
    assert sorted((s.signal_id, s.name, s.key_hash) for s in history.signals) == [
        ("01A", "go", "k1"),
        ("01B", "stop", "k1"),
        ("01C", "go", None),
        ("01D", "go", None),
    ]
    assert history.run.inbox == 4


def test_keyed_and_unkeyed_signals_are_consumed_by_their_own_items(ledger: Any) -> None:
    # GIVEN keyed and unkeyed signals of one name, interleaved in arrival order
    ledger.create_run(make_run())
    arrivals = [
        SignalRecord("RUN1", "go", "01A", '"a"', t(1)),
        keyed("01B", '"b"', key_hash="kb"),
        SignalRecord("RUN1", "go", "01C", '"c"', t(3)),
        keyed("01D", '"d"', key_hash="kd"),
    ]
    for signal in arrivals:
        ledger.add_signal(signal, now=t(5))
    # WHEN they are loaded (in arrival order, whatever their sort keys) and each consumed
    # in that order, as wait_for_signal takes them
    loaded = ledger.load("RUN1").signals
    assert [s.signal_id for s in loaded] == ["01A", "01B", "01C", "01D"]
    guard = owned(ledger)
    for i, signal in enumerate(loaded, start=1):
        step = make_step(
            position=f"{i:04d}",
            kind=StepKind.SIGNAL,
            name="go",
            output=signal.payload,
            detail={"signal_id": signal.signal_id},
        )
        assert ledger.consume_signal(step, signal, guard) == step
    # THEN every signal item, keyed or not, is marked by its own position (the keyed ones
    # under their key-derived sort key), and no other item appeared
    consumed = {s.signal_id: s.consumed_by for s in ledger.load("RUN1").signals}
    assert consumed == {"01A": "0001", "01B": "0002", "01C": "0003", "01D": "0004"}


def test_the_workflow_takes_keyed_and_unkeyed_signals_in_arrival_order(
    stores: tuple[Any, Any],
) -> None:
    # GIVEN an engine on this ledger and a run that waits for four "item" signals
    app = App()

    @app.workflow(name="collect")
    def collect(ctx: Context) -> list[Any]:
        return [ctx.wait_for_signal("item") for _ in range(4)]

    ledger, effects = stores
    invoker, clock = MemoryInvoker(), FakeClock()
    config = EngineConfig(inprocess_wait_threshold=timedelta(0), sweep_grace=timedelta(0))
    engine = Engine(app, ledger, invoker, effects, clock=clock, config=config)

    def drain() -> None:
        while (item := invoker.pop()) is not None:
            engine.resume(item.run_id, Invocation(), item.hop, item.reason)

    def send(payload: str, key: str | None = None) -> str:
        clock.advance(timedelta(seconds=1))  # arrival ids order to the millisecond
        return engine.signal(run_id, "item", payload, key=key).signal_id

    run_id = engine.start("collect").run_id
    # WHEN keyed and unkeyed signals arrive interleaved, buffered and while it waits, and
    # a keyed one is retried before and after it was consumed
    send("a")
    first_b = send("b", key="order-7-b")
    assert send("b", key="order-7-b") == first_b
    drain()
    send("c")
    send("d", key="order-7-d")
    drain()
    assert send("b", key="order-7-b") == first_b
    drain()
    # THEN the workflow got them once each, in the order they first arrived
    run = engine.get_run(run_id)
    assert (run.status, run.output) == (RunStatus.SUCCEEDED, '["a","b","c","d"]')
    history = ledger.load(run_id)
    assert sorted(s.payload for s in history.signals) == ['"a"', '"b"', '"c"', '"d"']
    assert all(s.consumed_by for s in history.signals)
    # AND a key reused with another payload, or a bad key, is refused with nothing written
    with pytest.raises(IdempotencyConflict, match="different payload"):
        send("not b", key="order-7-b")
    for bad in ("", " ", "x" * 257, "line\nbreak"):
        with pytest.raises(InvalidInput) as info:
            send("e", key=bad)
        assert info.value.field == "key"
    assert len(ledger.load(run_id).signals) == 4


def test_concurrent_sends_with_one_key_store_one_signal(ledger: Any, atomic_backend: None) -> None:
    # GIVEN a run, and eight senders racing with one key
    ledger.create_run(make_run(inbox=0))
    results: list[str] = []
    barrier = threading.Barrier(8)

    def send(i: int) -> None:
        barrier.wait()
        for _ in range(5):  # a caller retries what DynamoDB answers as retryable
            try:
                ledger.add_signal(keyed(f"01{i}"), now=t(5))
                results.append("stored")
            except SignalExists as e:
                results.append(f"exists {e.existing.signal_id}")
            except StorageError as e:
                assert e.retryable, e
                continue
            return

    threads = [threading.Thread(target=send, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    # THEN one stored it, every other one got that very signal back, the inbox moved once
    (stored,) = ledger.load("RUN1").signals
    assert sorted(results) == [f"exists {stored.signal_id}"] * 7 + ["stored"]
    assert ledger.get_run("RUN1").inbox == 1


def test_the_due_index_lists_due_runs_per_shard_and_pages(ledger: Any) -> None:
    for i in range(7):
        ledger.create_run(make_run(f"R{i}", due_at=t(i)))
    ledger.create_run(make_run("LATER", due_at=t(500)))
    ledger.create_run(make_run("NEVER", due_at=None))
    found: list[str] = []
    for shard in range(ledger.shards):
        cursor = None
        while True:
            page = ledger.due_runs(shard, before=t(100), limit=2, cursor=cursor)
            for run_id, _ in page.items:
                assert int(due_shard(run_id, ledger.shards)) == shard
                found.append(run_id)
            cursor = page.cursor
            if cursor is None:
                break
    assert sorted(found) == [f"R{i}" for i in range(7)]


SKEW = timedelta(seconds=5)


def test_a_trigger_is_claimed_once_and_only_while_unchanged(ledger: Any) -> None:
    ledger.create_run(make_run(due_at=t(10)))
    assert ledger.claim_trigger("RUN1", t(10), t(300), stale_before=t(195), skew=SKEW)
    # the index showed a stale entry
    assert not ledger.claim_trigger("RUN1", t(10), t(300), stale_before=t(195), skew=SKEW)
    assert ledger.get_run("RUN1").due_at == t(300)
    ledger.create_run(make_run("DONE1", status=RunStatus.SUCCEEDED, due_at=t(10)))
    assert not ledger.claim_trigger("DONE1", t(10), t(300), stale_before=t(195), skew=SKEW)


def test_a_claim_keeps_a_due_time_no_later_than_its_takeover_moment(ledger: Any) -> None:
    """GIVEN runs due at t10 (a start, a timer), due at t500 (a wait an event cut
    short) and with no due time (a callback without a timeout)
    WHEN each is claimed at t20 with a lease whose takeover moment is t85
    THEN the first keeps t10 (no move of its due-index entry), the others become due at
    t85: the sweeper must find a dead owner at the takeover, not days later or never."""
    ledger.create_run(make_run("EARLY", due_at=t(10)))
    ledger.create_run(make_run("LATER", due_at=t(500)))
    ledger.create_run(make_run("NONE1", due_at=None))
    dues = {}
    for run_id in ("EARLY", "LATER", "NONE1"):
        claim = ledger.claim(
            run_id, "w", now=t(20), lease_until=t(80), stale_before=t(15), due_at=t(85)
        )
        assert claim is not None
        dues[run_id] = (claim.run.due_at, ledger.get_run(run_id).due_at)
    assert dues == {"EARLY": (t(10), t(10)), "LATER": (t(85), t(85)), "NONE1": (t(85), t(85))}
    # a takeover of an expired lease decides the same way
    taken = ledger.claim(
        "LATER", "w2", now=t(200), lease_until=t(260), stale_before=t(195), due_at=t(265)
    )
    assert taken is not None and taken.took_over and taken.run.due_at == t(85)


def test_the_sweeper_does_not_invoke_a_live_lease_but_makes_it_due_at_its_takeover(
    ledger: Any,
) -> None:
    """GIVEN a run claimed at t20 (lease until t80) that kept its due time t10
    WHEN the sweeper claims its due entry at t130, then after the lease ended
    THEN at t130 nobody is invoked and the run becomes due at t85 (the lease's end plus
    the skew); once the lease has ended it is invoked and due again at the retrigger."""
    ledger.create_run(make_run(due_at=t(10)))
    ledger.claim("RUN1", "w", now=t(20), lease_until=t(80), stale_before=t(15), due_at=t(85))
    assert not ledger.claim_trigger("RUN1", t(10), t(430), stale_before=t(75), skew=SKEW)
    assert ledger.get_run("RUN1").due_at == t(85)
    assert not ledger.claim_trigger("RUN1", t(10), t(430), stale_before=t(75), skew=SKEW)
    assert ledger.claim_trigger("RUN1", t(85), t(500), stale_before=t(81), skew=SKEW)
    assert ledger.get_run("RUN1").due_at == t(500)


def test_a_finished_run_leaves_the_due_index(ledger: Any) -> None:
    ledger.create_run(make_run(due_at=t(10)))
    run = ledger.claim("RUN1", "w", now=t(20), lease_until=t(80), stale_before=t(15)).run
    ledger.update_run(
        "RUN1",
        RunGuard(run.fence, "w"),
        {"status": "SUCCEEDED", "updated_at": t(21), "due_at": None},
    )
    pages = [ledger.due_runs(s, before=t(10_000), limit=50).items for s in range(ledger.shards)]
    assert all("RUN1" not in [r for r, _ in page] for page in pages)


def test_a_heartbeat_moves_the_expiry_the_run_item_shows(ledger: Any) -> None:
    """``extend_wait(..., waiting_for=(shown, extended))``: the run item's ``waiting_for``
    (what a listing shows) takes the new expiry in the same write, when it still holds the
    text the caller read; a text changed since stays, and the wait moves all the same."""
    shown = f"callback approval until {t(10)} (+1 more)"
    ledger.create_run(make_run(status=RunStatus.WAITING, due_at=t(10), waiting_for=shown))
    waiting = waiting_callback(ledger, expires=t(10))
    inbox = ledger.get_run("RUN1").inbox
    extended = f"callback approval until {t(30)} (+1 more)"
    later = replace(waiting, expires_at=t(30), updated_at=t(5))
    ledger.extend_wait(later, token_hash="h1", now=t(5), waiting_for=(shown, extended))
    run = ledger.get_run("RUN1")
    assert (run.waiting_for, run.inbox, run.due_at) == (extended, inbox, t(10))
    # A caller that read an older text (the run parked again since): only the wait moves.
    again = replace(waiting, expires_at=t(40), updated_at=t(6))
    stale = (shown, f"callback approval until {t(40)} (+1 more)")
    ledger.extend_wait(again, token_hash="h1", now=t(6), waiting_for=stale)
    assert ledger.get_step("RUN1", "0001").expires_at == t(40)
    assert ledger.get_run("RUN1").waiting_for == extended
    ledger.operate("RUN1", statuses=("WAITING",), changes={"status": "CANCELED"})
    with pytest.raises(RunFinished):
        ledger.extend_wait(
            replace(waiting, expires_at=t(50)),
            token_hash="h1",
            now=t(7),
            waiting_for=(extended, f"callback approval until {t(50)}"),
        )
    assert ledger.get_step("RUN1", "0001").expires_at == t(40)


def test_a_heartbeat_extends_a_pending_wait_and_nothing_else(ledger: Any) -> None:
    """``extend_wait``: the wait's record with its later expiry, only while it is WAITING,
    with the token's hash, unexpired, the run going; the run item is not touched."""
    from durable.core.model import StepKind
    from durable.core.ports import RunFinished, WaitNotPending

    ledger.create_run(make_run(status=RunStatus.WAITING, due_at=t(10)))
    waiting = make_step(
        status=StepStatus.WAITING,
        output=None,
        kind=StepKind.CALLBACK,
        expires_at=t(10),
        token_hash="h1",
        token_nonce="n1",
    )
    ledger.write_step(waiting)
    run_before = ledger.get_run("RUN1")
    later = replace(waiting, expires_at=t(30), updated_at=t(5))
    ledger.extend_wait(later, token_hash="h1", now=t(5))
    assert ledger.get_step("RUN1", "0001").expires_at == t(30)
    assert ledger.get_run("RUN1") == run_before  # no inbox bump, no wake-up
    with pytest.raises(WaitNotPending):
        ledger.extend_wait(later, token_hash="other", now=t(6))
    with pytest.raises(WaitNotPending):
        ledger.extend_wait(later, token_hash="h1", now=t(31))  # expired
    ledger.operate("RUN1", statuses=("WAITING",), changes={"status": "CANCELED"})
    with pytest.raises(RunFinished):
        ledger.extend_wait(replace(later, expires_at=t(40)), token_hash="h1", now=t(7))
    assert ledger.get_step("RUN1", "0001").expires_at == t(30)
