"""Pins on the memory ledger's writes (durable/adapters/memory.py) and the boundaries both
ledgers share. Each test names the mutants it kills (ids of ``python -m tests.mutation
--module durable/adapters/memory.py --list``); the ``ledger`` tests run on every backend.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from durable.adapters.memory import MemoryLedger
from durable.core.model import (
    Attempt,
    RunError,
    RunStatus,
    SignalRecord,
    StepKind,
    StepStatus,
    parse_time,
)
from durable.core.ports import RunGuard
from durable.errors import PayloadTooLarge
from tests.support.records import make_run, make_step, t


def rich_step(**overrides: Any) -> Any:
    return make_step(
        status=StepStatus.RUNNING,
        output=None,
        attempts=[Attempt(1, t(1))],
        refs=[{"kind": "ticket", "value": "T-1"}],
        checkpoint={"payload_version": 1, "state": '{"cursor":1}'},
        detail={"attempt_base": 2},
        **overrides,
    )


def scribble(step: Any) -> None:
    """What a caller may do to a record it holds: change it in place."""
    step.attempts[0].error = "scribbled"
    step.refs[0]["value"] = "scribbled"
    assert step.checkpoint is not None and step.detail is not None
    step.checkpoint["state"] = "scribbled"
    step.detail["attempt_base"] = 99


def test_the_ledger_keeps_its_own_copy_of_a_step_written(ledger: Any) -> None:
    """GIVEN a step written with attempts, refs, a checkpoint and detail
    WHEN the caller then changes those in place (a later attempt's work in progress)
    THEN the ledger still holds what was written: it never shares a record with a caller.

    Kills memory-7eb04e1e (the checkpoint dict kept by reference), memory-587c0bd1 (detail),
    memory-f4d5f590 (attempts), memory-2d36c6e9 (refs), memory-5f26ab65 / 122842b5."""
    ledger.create_run(make_run())
    step = rich_step()
    ledger.write_step(step)
    scribble(step)
    assert ledger.load("RUN1").steps["0001"] == rich_step()


def test_a_checkpoint_written_under_the_guard_is_copied_too(ledger: Any) -> None:
    """GIVEN a checkpoint (the fenced write) WHEN the step's body goes on changing its state
    dict THEN the stored checkpoint is the one written.

    Kills memory-7eb04e1e (the checkpoint dict kept by reference) on this path too, and
    memory-8743eed4 (the step not stored)."""
    ledger.create_run(make_run())
    run = ledger.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0)).run
    step = rich_step()
    assert ledger.write_step_fenced(step, RunGuard(run.fence, "w1"), {"lease_until": t(90)})
    scribble(step)
    assert ledger.load("RUN1").steps["0001"] == rich_step()


def test_a_loaded_step_is_the_callers_to_change(ledger: Any) -> None:
    """GIVEN a stored step WHEN a loaded copy is changed in place THEN a second load still
    reads the stored record.

    Kills memory-7eb04e1e / 587c0bd1 / f4d5f590 / 2d36c6e9 on the way out (load and
    get_step hand out copies made by the same helper)."""
    ledger.create_run(make_run())
    ledger.write_step(rich_step())
    scribble(ledger.load("RUN1").steps["0001"])
    scribble(ledger.get_step("RUN1", "0001"))
    assert ledger.load("RUN1").steps["0001"] == rich_step()


def test_the_ledger_keeps_its_own_copy_of_a_runs_error_and_operations(ledger: Any) -> None:
    """GIVEN a run created with an error and an operations log
    WHEN the caller then changes those in place, and changes a run it read back
    THEN the ledger still holds what was written: it never shares a run's error or
    operations with a caller.

    Kills memory-5f4c3df2 / ef762cac (``copy_run`` keeps the error, or the operations, by
    reference)."""
    error = RunError("Boom", "first", position="0001")
    ledger.create_run(make_run(error=error, operations=[{"op": "retry", "by": "ops"}]))
    error.message = "scribbled"
    read = ledger.get_run("RUN1")
    assert read.error == RunError("Boom", "first", position="0001")
    read.error.message = "scribbled"
    read.operations[0]["op"] = "scribbled"
    again = ledger.get_run("RUN1")
    assert again.error == RunError("Boom", "first", position="0001")
    assert again.operations == [{"op": "retry", "by": "ops"}]


def test_the_ledger_keeps_its_own_copy_of_a_runs_usage(ledger: Any) -> None:
    """A run's usage map read back and changed in place leaves the stored one as it was.

    Kills model-2e2b5459 (``copy_run`` hands out the usage map by reference)."""
    ledger.create_run(make_run(usage={"wcu": 3.0, "inv": 1.0}))
    read = ledger.get_run("RUN1")
    read.usage["wcu"] = 99.0
    assert ledger.get_run("RUN1").usage == {"wcu": 3.0, "inv": 1.0}


# --- the due index ------------------------------------------------------------------------


def test_due_runs_pages_end_on_the_last_due_run_without_a_cursor() -> None:
    """GIVEN four due runs in one shard (one more due exactly at ``before``, one later)
    WHEN they are read two at a time THEN two full pages, the second without a cursor
    (never a cursor to an empty page); a page that holds them all has no cursor either.

    Memory only: DynamoDB may hand back a cursor to an empty page (LastEvaluatedKey when the
    limit was reached), which callers handle. Kills memory-387dba38 (``start + limit <
    len(due)`` -> ``<=``), memory-b08b785d / 3b86a385 / 27d41c84, memory-121a1665 (``due_at
    <= before`` -> ``<``: the run due exactly at ``before`` would be left out)."""
    ledger = MemoryLedger(due_shards=1)
    for i in range(3):
        ledger.create_run(make_run(f"R{i}", due_at=t(i)))
    ledger.create_run(make_run("EXACT", due_at=t(100)))
    ledger.create_run(make_run("LATER", due_at=t(101)))
    first = ledger.due_runs(0, before=t(100), limit=2)
    assert first.items == [("R0", t(0)), ("R1", t(1))] and first.cursor is not None
    second = ledger.due_runs(0, before=t(100), limit=2, cursor=first.cursor)
    assert second.items == [("R2", t(2)), ("EXACT", t(100))]
    assert second.cursor is None
    whole = ledger.due_runs(0, before=t(100), limit=4)
    assert len(whole.items) == 4 and whole.cursor is None


# --- purge and expiry boundaries ----------------------------------------------------------


def test_leftovers_written_exactly_at_the_cut_are_kept(ledger: Any) -> None:
    """GIVEN steps and signals written just before and exactly at the purge's cut
    WHEN leftovers before the cut are purged THEN only those before it go (2 of 4): what was
    written at the cut may belong to the run that reuses the id.

    Kills memory-0bffcc2e (``updated_at < before`` -> ``<=``), memory-b42f75fe (``received_at
    >= before`` -> ``>``) and the count's arithmetic (memory-a3972f2b / 34a821c8)."""
    ledger.create_run(make_run(status=RunStatus.WAITING, due_at=None))
    ledger.write_step(make_step(position="0001", updated_at=t(99)))
    ledger.write_step(make_step(position="0002", updated_at=t(100)))
    ledger.add_signal(SignalRecord("RUN1", "go", "01A", '"x"', t(99)), now=t(99))
    ledger.add_signal(SignalRecord("RUN1", "go", "01B", '"y"', t(100)), now=t(100))
    assert ledger.purge_leftovers("RUN1", before=t(100)) == 2
    history = ledger.load("RUN1")
    assert sorted(history.steps) == ["0002"]
    assert [s.signal_id for s in history.signals] == ["01B"]


def test_a_run_expires_exactly_at_its_purge_time() -> None:
    """GIVEN runs whose purge_at is now, one second later, and none
    WHEN TTL runs now THEN only the first is gone (DynamoDB deletes an item once its TTL
    time has come), and it is reported.

    Kills memory-e398a7ff (``purge_at <= epoch`` -> ``<``), memory-34d25c78 / 3d828cd2 /
    c031e2a9 / a573fddb / 9b8fce17."""
    now = parse_time(t(1000))
    epoch = int(now.timestamp())
    ledger = MemoryLedger()
    ledger.create_run(make_run("DUE", status=RunStatus.SUCCEEDED, purge_at=epoch))
    ledger.create_run(make_run("NEXT", status=RunStatus.SUCCEEDED, purge_at=epoch + 1))
    ledger.create_run(make_run("KEEP", status=RunStatus.RUNNING))
    assert ledger.expire(now) == ["DUE"]
    assert ledger.get_run("DUE") is None
    assert sorted(ledger.all_run_ids()) == ["KEEP", "NEXT"]
    assert ledger.expire(now + timedelta(seconds=1)) == ["NEXT"]


# --- the item size limit on every write -----------------------------------------------------

HUGE = "z" * 420_000  # over DynamoDB's 400 KB item limit


def test_an_oversized_checkpoint_is_refused_and_nothing_is_written(ledger: Any) -> None:
    """GIVEN a held run WHEN the owner checkpoints a state over the item limit THEN
    PayloadTooLarge, and neither the step nor the run's lease is written.

    Kills memory-e1e38c49 (write_step_fenced's size check deleted)."""
    ledger.create_run(make_run())
    run = ledger.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0)).run
    step = make_step(status=StepStatus.RUNNING, output=None, checkpoint={"state": HUGE})
    with pytest.raises(PayloadTooLarge):
        ledger.write_step_fenced(step, RunGuard(run.fence, "w1"), {"lease_until": t(90)})
    assert ledger.load("RUN1").steps == {}
    assert ledger.get_run("RUN1").lease_until == t(60)


def test_an_oversized_callback_answer_is_refused_and_nothing_is_written(ledger: Any) -> None:
    """GIVEN a waiting callback WHEN it is answered with a result over the item limit THEN
    PayloadTooLarge; the wait is still pending and the run's inbox unchanged.

    Kills memory-f3859df8 (complete_waiting's size check deleted)."""
    ledger.create_run(make_run(inbox=2))
    waiting = make_step(status=StepStatus.WAITING, output=None, token_hash="h1")
    ledger.write_step(waiting)
    answer = replace(waiting, status=StepStatus.DONE, output=f'"{HUGE}"')
    with pytest.raises(PayloadTooLarge):
        ledger.complete_waiting(answer, token_hash="h1", now=t(5))
    assert ledger.get_step("RUN1", "0001").status == StepStatus.WAITING
    assert ledger.get_run("RUN1").inbox == 2


def test_an_oversized_signal_is_refused_and_nothing_is_written(ledger: Any) -> None:
    """GIVEN a waiting run WHEN a signal with a payload over the item limit arrives THEN
    PayloadTooLarge; no signal is stored and the inbox is unchanged.

    Kills memory-1a6916f4 (add_signal's size check deleted)."""
    ledger.create_run(make_run(status=RunStatus.WAITING, inbox=2))
    with pytest.raises(PayloadTooLarge):
        ledger.add_signal(SignalRecord("RUN1", "go", "01A", f'"{HUGE}"', t(5)), now=t(5))
    assert ledger.load("RUN1").signals == []
    assert ledger.get_run("RUN1").inbox == 2


def test_an_operator_change_that_would_overflow_the_run_item_is_refused(ledger: Any) -> None:
    """GIVEN a failed run WHEN an operator's change would push the run item over the limit
    (a cancel reason of 420 KB) THEN PayloadTooLarge, and the run is unchanged.

    Kills memory-d5db0b98 (operate's size check deleted)."""
    ledger.create_run(make_run(status=RunStatus.FAILED, due_at=None))
    before = ledger.get_run("RUN1")
    with pytest.raises(PayloadTooLarge):
        ledger.operate(
            "RUN1",
            statuses=("FAILED",),
            changes={"cancel_reason": HUGE, "updated_at": t(5)},
        )
    assert ledger.get_run("RUN1") == before


def test_a_continue_as_new_that_would_overflow_the_run_item_is_refused(ledger: Any) -> None:
    """GIVEN a running run WHEN its owner continues it as new with a change that would push
    its item over the limit (an output of 420 KB) THEN PayloadTooLarge: the run is
    unchanged and no successor exists.

    Kills memory-07e153fb (continue_run's size check of the changed run deleted)."""
    ledger.create_run(make_run())
    run = ledger.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0)).run
    before = ledger.get_run("RUN1")
    successor = make_run("RUN2")
    with pytest.raises(PayloadTooLarge):
        ledger.continue_run(
            "RUN1",
            RunGuard(run.fence, "w1"),
            {"status": "SUCCEEDED", "output": f'"{HUGE}"', "updated_at": t(5)},
            successor,
        )
    assert ledger.get_run("RUN1") == before
    assert ledger.get_run("RUN2") is None


def test_a_successor_can_be_loaded_and_written_to_at_once(ledger: Any) -> None:
    """GIVEN a running run WHEN its owner continues it as new THEN the successor loads at
    once, as an empty partition (no steps, no signals), and takes its first step record.

    Kills memory-99ee87f5 (``continue_run`` does not set up the successor's steps: its
    load fails with a KeyError). (The simulation tests catch it too, but their session
    summary then divides by zero and the driver reports an error, not a kill.)"""
    ledger.create_run(make_run())
    run = ledger.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0)).run
    ledger.continue_run(
        "RUN1",
        RunGuard(run.fence, "w1"),
        {"status": "SUCCEEDED", "updated_at": t(5)},
        make_run("RUN2", created_at=t(5)),
    )
    history = ledger.load("RUN2")
    assert (history.steps, history.signals) == ({}, [])
    ledger.write_step(make_step("RUN2"))
    assert list(ledger.load("RUN2").steps) == ["0001"]


def test_an_operator_change_leaves_the_inbox_alone_unless_asked(ledger: Any) -> None:
    """GIVEN a failed run whose inbox counts 2 events
    WHEN an operator's change is applied without ``bump_inbox`` (a retry's reopening),
    then one with it (a cancel request) THEN only the second counts as an event.

    Kills memory-1cdaa936 (``bump_inbox: bool = False`` -> True: every operator change
    would count as an event)."""
    ledger.create_run(make_run(status=RunStatus.FAILED, due_at=None, inbox=2))
    changed = ledger.operate(
        "RUN1", statuses=("FAILED",), changes={"status": "PENDING", "updated_at": t(5)}
    )
    assert changed.inbox == 2 and ledger.get_run("RUN1").inbox == 2
    bumped = ledger.operate(
        "RUN1",
        statuses=("PENDING",),
        changes={"cancel_requested": True, "updated_at": t(6)},
        bump_inbox=True,
    )
    assert bumped.inbox == 3 and ledger.get_run("RUN1").inbox == 3


def test_a_signal_taken_elsewhere_leaves_a_pending_wait_as_stored(ledger: Any) -> None:
    """GIVEN a signal already consumed at 0001, and a signal wait pending (WAITING) at 0002
    WHEN a stale view consumes that signal at 0002 THEN the ledger answers with the
    stored WAITING record and writes nothing: the wait stays pending, the signal stays
    0001's.

    Kills memory-49b89c45 (that answer -> None)."""
    ledger.create_run(make_run())
    signal = SignalRecord("RUN1", "go", "01A", '"p"', t(5))
    ledger.add_signal(signal, now=t(5))
    claim = ledger.claim("RUN1", "w", now=t(6), lease_until=t(60), stale_before=t(1))
    assert claim is not None
    guard = RunGuard(claim.run.fence, "w")
    first = make_step(kind=StepKind.SIGNAL, name="go", output='"p"', fence=guard.fence)
    assert ledger.consume_signal(first, signal, guard) == first
    waiting = make_step(
        position="0002",
        kind=StepKind.SIGNAL,
        name="go",
        status=StepStatus.WAITING,
        output=None,
        fence=guard.fence,
    )
    ledger.write_step(waiting, guard)
    stale = replace(first, position="0002")
    assert ledger.consume_signal(stale, signal, guard) == waiting
    history = ledger.load("RUN1")
    assert history is not None
    assert history.steps["0002"] == waiting
    assert history.signals[0].consumed_by == "0001"


def test_a_checkpoint_whose_run_change_would_overflow_the_run_item_is_refused() -> None:
    """GIVEN a claimed run on the memory ledger WHEN a step's fenced write carries a run
    change that would push the run item over the limit THEN PayloadTooLarge: neither the
    step nor the run change is written (the memory ledger checks the size of every run
    item it writes).

    Memory only: the engine's checkpoints change two timestamps, never enough to overflow;
    DynamoDB refuses such a transaction itself, which reaches the caller as a StorageError.

    Kills memory-19d44714 (write_step_fenced's size check of the changed run deleted)."""
    ledger = MemoryLedger()
    ledger.create_run(make_run())
    claim = ledger.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0))
    assert claim is not None
    run = claim.run
    before = ledger.get_run("RUN1")
    with pytest.raises(PayloadTooLarge):
        ledger.write_step_fenced(
            make_step(status=StepStatus.RUNNING, output=None),
            RunGuard(run.fence, "w1"),
            {"lease_until": t(90), "cancel_reason": HUGE},
        )
    assert ledger.get_run("RUN1") == before
    history = ledger.load("RUN1")
    assert history is not None and history.steps == {}


# 398.5 KB: over the ledger's own limit (400 KB less 2 KB of head room for the keys and index
# attributes it adds) but under DynamoDB's, which accepts the write.
BETWEEN_THE_LIMITS = "b" * (398 * 1024 + 512)


@pytest.mark.parametrize("how", ["update_run", "operate"])
def test_a_run_item_over_the_ledgers_own_limit_is_refused_on_every_ledger(
    ledger: Any, how: str
) -> None:
    """GIVEN a run WHEN a change by the owner or by an operator makes its item 398.5 KB
    (which DynamoDB itself would still take) THEN PayloadTooLarge on every ledger: the
    memory ledger refuses before writing, the DynamoDB one checks the item it got back, so
    both refuse the same runs.

    Against DynamoDB Local (the integration tier) this kills the deletion of that check in
    DynamoLedger.update_run and .operate (dynamodb-89b6701e / 57838e26). The unit tier's
    mutation run cannot: moto counts item sizes higher than DynamoDB and refuses these
    updates itself (from about 392 KB), before the check is reached; test_pins_dynamodb.py
    kills operate's (dynamodb-57838e26) with a client that returns the item grown."""
    changes = {"cancel_reason": BETWEEN_THE_LIMITS, "updated_at": t(5)}
    if how == "update_run":
        ledger.create_run(make_run())
        run = ledger.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0)).run
        with pytest.raises(PayloadTooLarge):
            ledger.update_run("RUN1", RunGuard(run.fence, "w1"), changes)
        return
    ledger.create_run(make_run(status=RunStatus.FAILED, due_at=None))
    with pytest.raises(PayloadTooLarge):
        ledger.operate("RUN1", statuses=("FAILED",), changes=changes)
