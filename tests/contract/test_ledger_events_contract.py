"""Ledger contract, part two: event delivery (callbacks, signals) and the due index."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from durable.ids import due_shard
from durable.model import RunStatus, SignalRecord, StepKind, StepStatus
from durable.ports import RunFinished, RunGuard, WaitNotPending
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
    assert ledger.consume_signal(step, signal) == step
    history = ledger.load("RUN1")
    assert history.signals[0].consumed_by == "0001"
    assert history.steps["0001"].output == '"payload"'


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


def test_a_trigger_is_claimed_once_and_only_while_unchanged(ledger: Any) -> None:
    ledger.create_run(make_run(due_at=t(10)))
    assert ledger.claim_trigger("RUN1", t(10), t(300))
    assert not ledger.claim_trigger("RUN1", t(10), t(300))  # the index showed a stale entry
    assert ledger.get_run("RUN1").due_at == t(300)
    ledger.create_run(make_run("DONE1", status=RunStatus.SUCCEEDED, due_at=t(10)))
    assert not ledger.claim_trigger("DONE1", t(10), t(300))


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
