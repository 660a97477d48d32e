"""Ledger contract, part four: fenced step writes, the atomic continue-as-new, and item
sizes refused before anything is written (issue 12, holes 2, 3 and 4), on every backend."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from durable.core.limits import ITEM_LIMIT
from durable.core.model import RunStatus, SignalRecord, StepKind, StepStatus
from durable.core.ports import ConditionFailed, RunExists, RunGuard, WaitNotPending
from durable.errors import PayloadTooLarge
from tests.support.records import make_run, make_step, t


def take(ledger: Any, owner: str, at: int) -> RunGuard:
    """``owner`` claims RUN1 at ``at`` (taking over any lease that ended by then)."""
    claim = ledger.claim("RUN1", owner, now=t(at), lease_until=t(at + 60), stale_before=t(at))
    assert claim is not None
    return RunGuard(claim.run.fence, owner)


def waiting(fence: int, nonce: str) -> Any:
    return make_step(
        status=StepStatus.WAITING,
        output=None,
        kind=StepKind.CALLBACK,
        name="approval",
        token_nonce=nonce,
        token_hash=f"hash-{nonce}",
        fence=fence,
    )


def test_an_older_fence_never_replaces_a_newer_pending_record(ledger: Any) -> None:
    """GIVEN a callback WAITING under fence 2 (the live owner's)
    WHEN a writer holding fence 1 (a zombie) puts its own WAITING record there, even
    unguarded
    THEN the stored record comes back unchanged; the same fence may replace it."""
    ledger.create_run(make_run())
    live = waiting(2, "live")
    assert ledger.write_step(live) is live
    stored = ledger.write_step(waiting(1, "zombie"))
    assert (stored.token_nonce, stored.fence) == ("live", 2)
    assert ledger.get_step("RUN1", "0001").token_nonce == "live"
    again = waiting(2, "again")
    assert ledger.write_step(again) is again


def test_a_result_lands_over_an_older_pending_record_but_never_over_a_final_one(
    ledger: Any,
) -> None:
    """GIVEN a pending record of fence 1
    WHEN a fence-2 result is written, then a fence-3 result
    THEN the first replaces the pending record and the second gets it back (first writer
    wins)."""
    ledger.create_run(make_run())
    ledger.write_step(waiting(1, "old"))
    first = make_step(output='"a"', fence=2)
    assert ledger.write_step(first) is first
    stored = ledger.write_step(make_step(output='"b"', fence=3))
    assert (stored.output, stored.fence) == ('"a"', 2)


def test_a_guarded_write_needs_the_lease(ledger: Any) -> None:
    """GIVEN a run taken over by a second owner
    WHEN the first owner writes a record under its old guard
    THEN ConditionFailed reports the stored run and nothing is written; the new owner's
    guarded write lands."""
    ledger.create_run(make_run())
    old = take(ledger, "old", 10)
    new = take(ledger, "new", 80)
    with pytest.raises(ConditionFailed) as info:
        ledger.write_step(waiting(old.fence, "old"), old)
    assert info.value.current is not None and info.value.current.lease_owner == "new"
    assert ledger.get_step("RUN1", "0001") is None
    mine = waiting(new.fence, "new")
    assert ledger.write_step(mine, new) is mine


@pytest.mark.parametrize(
    "guard",
    [
        pytest.param(RunGuard(fence=99, owner="w"), id="wrong fence"),
        pytest.param(RunGuard(fence=1, owner="other"), id="wrong owner"),
        pytest.param(RunGuard(fence=1, owner="w", inbox=7), id="wrong inbox"),
        pytest.param(RunGuard(fence=1, owner="w", statuses=("WAITING",)), id="wrong status"),
        pytest.param(RunGuard(fence=1, owner="w", alive_at=t(71)), id="lease ended"),
    ],
)
def test_every_part_of_the_guard_is_checked(ledger: Any, guard: RunGuard) -> None:
    """GIVEN a run claimed by w (fence 1, RUNNING, inbox 0, lease until t(70))
    WHEN a guarded write carries a guard that differs in one part
    THEN it is refused and nothing is written."""
    ledger.create_run(make_run())
    assert take(ledger, "w", 10) == RunGuard(1, "w")
    with pytest.raises(ConditionFailed):
        ledger.write_step(make_step(fence=1), guard)
    assert ledger.get_step("RUN1", "0001") is None
    assert ledger.write_step(make_step(fence=1), RunGuard(1, "w", alive_at=t(70))).fence == 1


def test_a_canceled_run_refuses_a_guard_that_excludes_cancels(ledger: Any) -> None:
    ledger.create_run(make_run(cancel_requested=True))
    guard = take(ledger, "w", 10)
    with pytest.raises(ConditionFailed):
        ledger.update_run("RUN1", replace(guard, no_cancel=True), {"output": '"x"'})
    assert ledger.get_run("RUN1").output is None


def test_consuming_a_signal_needs_the_lease(ledger: Any) -> None:
    """GIVEN a signal, and a run taken over by a second owner
    WHEN the first owner consumes the signal
    THEN ConditionFailed; the signal stays unconsumed and no step is recorded."""
    ledger.create_run(make_run())
    signal = SignalRecord("RUN1", "go", "01A", '"p"', t(5))
    ledger.add_signal(signal, now=t(5))
    old = take(ledger, "old", 10)
    take(ledger, "new", 80)
    step = make_step(kind=StepKind.SIGNAL, name="go", output='"p"', fence=old.fence)
    with pytest.raises(ConditionFailed):
        ledger.consume_signal(step, signal, old)
    history = ledger.load("RUN1")
    assert history.signals[0].consumed_by is None and history.steps == {}


def test_a_signal_consumed_elsewhere_is_not_taken_twice(ledger: Any) -> None:
    """GIVEN a signal consumed at position 0001
    WHEN a stale view consumes it at 0002
    THEN nothing is written there (WaitNotPending: no record to return)."""
    ledger.create_run(make_run())
    signal = SignalRecord("RUN1", "go", "01A", '"p"', t(5))
    ledger.add_signal(signal, now=t(5))
    guard = take(ledger, "w", 10)
    first = make_step(kind=StepKind.SIGNAL, name="go", output='"p"', fence=guard.fence)
    assert ledger.consume_signal(first, signal, guard) == first
    with pytest.raises(WaitNotPending):
        ledger.consume_signal(replace(first, position="0002"), signal, guard)
    history = ledger.load("RUN1")
    assert history.signals[0].consumed_by == "0001" and list(history.steps) == ["0001"]


def successor() -> Any:
    return make_run("RUN2", continued_from="RUN1")


def test_continue_as_new_ends_the_run_and_creates_the_successor_together(ledger: Any) -> None:
    ledger.create_run(make_run())
    guard = take(ledger, "w", 10)
    changes = {"status": "SUCCEEDED", "updated_at": t(11), "lease_owner": None}
    ledger.continue_run("RUN1", guard, changes, successor())
    assert ledger.get_run("RUN1").status == RunStatus.SUCCEEDED
    assert ledger.get_run("RUN2").continued_from == "RUN1"


def test_a_cancel_that_landed_first_leaves_no_successor(ledger: Any) -> None:
    """GIVEN a run whose cancel was requested after the worker claimed it
    WHEN the worker continues it as new (guard excludes cancels)
    THEN ConditionFailed with the stored run, no successor, the run unchanged."""
    ledger.create_run(make_run())
    guard = take(ledger, "w", 10)
    ledger.operate("RUN1", statuses=("RUNNING",), changes={"cancel_requested": True})
    changes = {"status": "SUCCEEDED", "updated_at": t(11)}
    with pytest.raises(ConditionFailed) as info:
        ledger.continue_run("RUN1", replace(guard, no_cancel=True), changes, successor())
    assert info.value.current is not None and info.value.current.cancel_requested
    assert ledger.get_run("RUN2") is None
    assert ledger.get_run("RUN1").status == RunStatus.RUNNING


def test_an_existing_run_is_never_taken_for_the_successor(ledger: Any) -> None:
    ledger.create_run(make_run())
    planted = ledger.create_run(make_run("RUN2", input='"planted"'))
    guard = take(ledger, "w", 10)
    with pytest.raises(RunExists) as info:
        ledger.continue_run(
            "RUN1", guard, {"status": "SUCCEEDED", "updated_at": t(11)}, successor()
        )
    assert info.value.existing.input == planted.input
    assert ledger.get_run("RUN1").status == RunStatus.RUNNING


def test_a_result_the_item_cannot_hold_is_refused_before_anything_is_written(
    ledger: Any,
) -> None:
    """GIVEN a claimed run
    WHEN its result would take the item just past the limit (below DynamoDB's own 400 KB,
    so the server alone would take it)
    THEN PayloadTooLarge, and the stored item is unchanged, on every ledger alike."""
    ledger.create_run(make_run())
    guard = take(ledger, "w", 10)
    output = '"' + "x" * (ITEM_LIMIT - 300) + '"'
    with pytest.raises(PayloadTooLarge):
        ledger.update_run("RUN1", guard, {"output": output, "status": "SUCCEEDED"})
    stored = ledger.get_run("RUN1")
    assert (stored.status, stored.output) == (RunStatus.RUNNING, None)
