"""Ledger contract, part five: child runs (``start_child``, ``finish_child``) on every
backend: a child exists only with the parent's record that waits for it, and its end
settles that record at most once, by plain writes after the child's own (a report lost
between them the parent finds itself: ``tests/unit/test_lost_child_reports.py``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from durable.core.leases import CHILD_REPORT_FIELDS
from durable.core.model import RunError, RunStatus, StepKind, StepStatus
from durable.core.ports import ChildReport, ConditionFailed, RunExists, RunGuard
from tests.support.records import make_run, make_step, t


def claimed(ledger: Any, run_id: str, owner: str, at: int = 0) -> RunGuard:
    claim = ledger.claim(run_id, owner, now=t(at), lease_until=t(at + 60), stale_before=t(at))
    assert claim is not None
    return RunGuard(claim.run.fence, owner)


def child_record(fence: int, child_id: str = "KID1") -> Any:
    return make_step(
        status=StepStatus.WAITING,
        output=None,
        kind=StepKind.CHILD,
        name="price",
        detail={"child": child_id},
        fence=fence,
    )


def kid(run_id: str = "KID1") -> Any:
    return make_run(run_id, workflow="price", parent="RUN1@0001")


def started(ledger: Any) -> tuple[RunGuard, RunGuard]:
    """RUN1 claimed by w1 and waiting at 0001 for KID1, which w2 has claimed."""
    ledger.create_run(make_run("RUN1"))
    parent = claimed(ledger, "RUN1", "w1")
    assert ledger.start_child(child_record(parent.fence), parent, kid()) is not None
    return parent, claimed(ledger, "KID1", "w2")


DONE = ChildReport("RUN1", "0001", "KID1", StepStatus.DONE, output='{"cents":300}')
FINAL = {"status": RunStatus.SUCCEEDED.value, "output": '{"cents":300}', "updated_at": t(5)}


def test_start_child_writes_the_record_the_child_and_the_count_together(ledger: Any) -> None:
    ledger.create_run(make_run("RUN1"))
    guard = claimed(ledger, "RUN1", "w1")
    step = child_record(guard.fence)
    assert ledger.start_child(step, guard, kid()) is step
    stored = ledger.get_step("RUN1", "0001")
    assert (stored.kind, stored.status, stored.detail) == (
        StepKind.CHILD,
        StepStatus.WAITING,
        {"child": "KID1"},
    )
    child = ledger.get_run("KID1")
    assert (child.status, child.parent, child.workflow) == (
        RunStatus.PENDING,
        "RUN1@0001",
        "price",
    )
    parent = ledger.get_run("RUN1")
    assert (parent.children, parent.fence, parent.inbox) == (1, guard.fence, 0)


def test_a_zombie_parent_starts_no_child(ledger: Any) -> None:
    ledger.create_run(make_run("RUN1"))
    old = claimed(ledger, "RUN1", "w1")
    claimed(ledger, "RUN1", "w2", at=120)  # w1's lease ended: w2 took the run over
    with pytest.raises(ConditionFailed):
        ledger.start_child(child_record(old.fence), old, kid())
    assert ledger.get_run("KID1") is None
    assert ledger.get_step("RUN1", "0001") is None
    assert ledger.get_run("RUN1").children == 0


def test_a_taken_child_id_writes_nothing(ledger: Any) -> None:
    ledger.create_run(make_run("RUN1"))
    ledger.create_run(make_run("KID1", workflow="other"))
    guard = claimed(ledger, "RUN1", "w1")
    with pytest.raises(RunExists) as caught:
        ledger.start_child(child_record(guard.fence), guard, kid())
    assert caught.value.existing.workflow == "other"
    assert ledger.get_step("RUN1", "0001") is None
    assert ledger.get_run("RUN1").children == 0


def test_a_final_record_at_the_position_is_kept_and_no_child_is_created(ledger: Any) -> None:
    ledger.create_run(make_run("RUN1"))
    guard = claimed(ledger, "RUN1", "w1")
    done = make_step(kind=StepKind.CHILD, name="price", detail={"child": "KID0"})
    ledger.write_step(done)
    stored = ledger.start_child(child_record(guard.fence), guard, kid())
    assert (stored.status, stored.detail) == (StepStatus.DONE, {"child": "KID0"})
    assert ledger.get_run("KID1") is None


def test_finish_child_settles_the_parents_record_and_bumps_its_inbox(ledger: Any) -> None:
    _, child = started(ledger)
    due = ledger.get_run("RUN1").due_at
    run, taken = ledger.finish_child("KID1", child, FINAL, DONE, now=t(5))
    assert taken and run.status == RunStatus.SUCCEEDED
    record = ledger.get_step("RUN1", "0001")
    assert (record.status, record.output, record.updated_at) == (
        StepStatus.DONE,
        '{"cents":300}',
        t(5),
    )
    assert (record.name, record.detail, record.kind) == ("price", {"child": "KID1"}, "child")
    parent = ledger.get_run("RUN1")
    # The report wakes the parent and leaves its due time alone (its next look at its
    # children): moving it would be a delete and a put in the due index.
    assert (parent.inbox, parent.due_at) == (1, due)


def test_a_failure_report_carries_the_error_and_clears_nothing_else(ledger: Any) -> None:
    _, child = started(ledger)
    failed = ChildReport(
        "RUN1", "0001", "KID1", StepStatus.TERMINAL_FAILED, error_type="Boom", error_message="x"
    )
    changes = {
        "status": RunStatus.FAILED.value,
        "error": RunError("Boom", "x"),
        "updated_at": t(5),
    }
    assert ledger.finish_child("KID1", child, changes, failed, now=t(5))[1]
    record = ledger.get_step("RUN1", "0001")
    assert (record.status, record.error_type, record.error_summary, record.output) == (
        StepStatus.TERMINAL_FAILED,
        "Boom",
        "x",
        None,
    )
    assert record.fence == 1  # the parent's, as written


def test_a_second_report_is_not_taken(ledger: Any) -> None:
    """A child's end counts once: a report to a record already settled writes the run
    alone (the record keeps the first report)."""
    _, child = started(ledger)
    assert ledger.finish_child("KID1", child, FINAL, DONE, now=t(5))[1]
    other = ChildReport("RUN1", "0001", "KID1", StepStatus.DONE, output='"again"')
    run, taken = ledger.finish_child("KID1", child, {"updated_at": t(6)}, other, now=t(6))
    assert not taken and run.updated_at == t(6)
    assert ledger.get_step("RUN1", "0001").output == '{"cents":300}'
    assert ledger.get_run("RUN1").inbox == 1


def test_a_finished_parent_takes_no_report_and_the_child_still_ends(ledger: Any) -> None:
    parent, child = started(ledger)
    ledger.update_run(
        "RUN1", parent, {"status": RunStatus.SUCCEEDED.value, "updated_at": t(3), "due_at": None}
    )
    run, taken = ledger.finish_child("KID1", child, FINAL, DONE, now=t(5))
    assert not taken and run.status == RunStatus.SUCCEEDED
    assert ledger.get_step("RUN1", "0001").status == StepStatus.WAITING
    after = ledger.get_run("RUN1")
    assert (after.inbox, after.due_at) == (0, None)  # a finished run is never made due


def test_a_report_changes_the_parents_run_item_by_its_inbox_alone(ledger: Any) -> None:
    """The wake-up is one small update of the parent's item: no listing field, no due
    time moves (each would be index writes for every child's end)."""
    _, child = started(ledger)
    before = ledger.get_run("RUN1")
    assert ledger.finish_child("KID1", child, FINAL, DONE, now=t(5))[1]
    after = ledger.get_run("RUN1")
    assert after == replace(before, inbox=before.inbox + 1)


def test_a_report_to_a_parent_that_is_gone_writes_the_childs_end_alone(ledger: Any) -> None:
    """A parent whose retention ended (its partition purged) takes no report, and the
    report creates nothing in its place: the record's update requires the record."""
    _, child = started(ledger)
    run, taken = ledger.finish_child(
        "KID1", child, FINAL, replace(DONE, parent_id="GONE1"), now=t(5)
    )
    assert not taken and run.status == RunStatus.SUCCEEDED
    assert ledger.get_step("GONE1", "0001") is None
    assert ledger.get_run("GONE1") is None


def test_a_zombie_childs_final_write_changes_nothing(ledger: Any) -> None:
    _, child = started(ledger)
    claimed(ledger, "KID1", "w3", at=120)  # the child was taken over
    with pytest.raises(ConditionFailed):
        ledger.finish_child("KID1", child, FINAL, DONE, now=t(125))
    assert ledger.get_step("RUN1", "0001").status == StepStatus.WAITING
    assert ledger.get_run("RUN1").inbox == 0
    assert ledger.get_run("KID1").status == RunStatus.RUNNING


def test_a_report_never_settles_a_record_of_another_kind(ledger: Any) -> None:
    parent, child = started(ledger)
    callback = make_step(
        position="0002", status=StepStatus.WAITING, output=None, kind=StepKind.CALLBACK
    )
    ledger.write_step(callback, parent)
    stray = ChildReport("RUN1", "0002", "KID1", StepStatus.DONE, output='"x"')
    assert not ledger.finish_child("KID1", child, FINAL, stray, now=t(5))[1]
    assert ledger.get_step("RUN1", "0002").status == StepStatus.WAITING


def test_the_report_changes_only_the_fields_the_rule_names() -> None:
    """DynamoDB's update expression and the memory ledger's ``settle_child_record``
    change the same attributes (the cases above compare whole records on both)."""
    assert CHILD_REPORT_FIELDS == (
        "status",
        "output",
        "error_type",
        "error_summary",
        "updated_at",
        "detail",
    )


def test_a_report_names_the_version_the_child_ran(ledger: Any) -> None:
    """The settled record says which version of its workflow the child ran, so the
    parent decodes its result by that version's annotation (issue 31, hole 2); a report
    without one (an older engine's child) leaves the record's detail as it was."""
    _, child = started(ledger)
    versioned = ChildReport("RUN1", "0001", "KID1", StepStatus.DONE, output='"v1"', version=1)
    assert ledger.finish_child("KID1", child, FINAL, versioned, now=t(5))[1]
    settled = ledger.get_step("RUN1", "0001")
    assert (settled.status, settled.detail) == (StepStatus.DONE, {"child": "KID1", "version": 1})


def test_a_report_from_another_child_never_settles_the_record(ledger: Any) -> None:
    """An earlier incarnation's child (a keyed parent restarted at the same position)
    reports to a record that waits for another child: not taken."""
    _, child = started(ledger)
    stale = ChildReport("RUN1", "0001", "OLDKID", StepStatus.DONE, output='"stale"')
    assert not ledger.finish_child("KID1", child, FINAL, stale, now=t(5))[1]
    assert ledger.get_step("RUN1", "0001").status == StepStatus.WAITING
    assert ledger.get_run("RUN1").inbox == 0


def batch(fence: int, count: int) -> tuple[list[Any], list[Any]]:
    steps = [
        make_step(
            position=f"0001.{i:04d}",
            status=StepStatus.WAITING,
            output=None,
            kind=StepKind.CHILD,
            name="price",
            detail={"child": f"KID{i}"},
            fence=fence,
        )
        for i in range(1, count + 1)
    ]
    kids = [
        make_run(f"KID{i}", workflow="price", parent=f"RUN1@0001.{i:04d}")
        for i in range(1, count + 1)
    ]
    return steps, kids


def test_start_children_writes_a_whole_batch_at_once(ledger: Any) -> None:
    ledger.create_run(make_run("RUN1"))
    guard = claimed(ledger, "RUN1", "w1")
    steps, kids = batch(guard.fence, 49)
    assert ledger.start_children(steps, guard, kids) is True
    assert ledger.get_run("RUN1").children == 49
    assert ledger.get_run("KID49").parent == "RUN1@0001.0049"
    assert ledger.get_step("RUN1", "0001.0049").status == StepStatus.WAITING


def test_start_children_writes_nothing_when_one_child_is_there(ledger: Any) -> None:
    ledger.create_run(make_run("RUN1"))
    ledger.create_run(make_run("KID3", workflow="price"))
    guard = claimed(ledger, "RUN1", "w1")
    steps, kids = batch(guard.fence, 5)
    assert ledger.start_children(steps, guard, kids) is False
    assert ledger.get_run("KID1") is None and ledger.get_step("RUN1", "0001.0001") is None
    assert ledger.get_run("RUN1").children == 0


def test_start_children_under_a_lost_lease_raises_and_writes_nothing(ledger: Any) -> None:
    ledger.create_run(make_run("RUN1"))
    old = claimed(ledger, "RUN1", "w1")
    claimed(ledger, "RUN1", "w2", at=120)
    steps, kids = batch(old.fence, 3)
    with pytest.raises(ConditionFailed):
        ledger.start_children(steps, old, kids)
    assert ledger.get_run("KID1") is None


def test_start_children_refuses_more_than_one_transaction_holds(ledger: Any) -> None:
    ledger.create_run(make_run("RUN1"))
    guard = claimed(ledger, "RUN1", "w1")
    steps, kids = batch(guard.fence, 50)
    with pytest.raises(ValueError, match="1 to 49"):
        ledger.start_children(steps, guard, kids)
    assert ledger.get_run("KID1") is None


def test_a_final_record_wins_over_a_taken_child_id(ledger: Any) -> None:
    """Both conditions fail: every ledger answers with the stored record (as a replay
    that finds its position settled must), not ``RunExists``."""
    ledger.create_run(make_run("RUN1"))
    ledger.create_run(kid())
    guard = claimed(ledger, "RUN1", "w1")
    ledger.write_step(make_step(kind=StepKind.CHILD, name="price", detail={"child": "KID1"}))
    stored = ledger.start_child(child_record(guard.fence), guard, kid())
    assert stored.status == StepStatus.DONE


def test_get_steps_returns_the_records_that_exist_by_position(ledger: Any) -> None:
    ledger.create_run(make_run("RUN1"))
    guard = claimed(ledger, "RUN1", "w1")
    steps, kids = batch(guard.fence, 3)
    ledger.start_children(steps, guard, kids)
    wanted = [f"0001.{i:04d}" for i in range(1, 5)] + [f"0002.{i:04d}" for i in range(1, 120)]
    got = ledger.get_steps("RUN1", wanted)
    assert sorted(got) == ["0001.0001", "0001.0002", "0001.0003"]
    assert got["0001.0002"].detail == {"child": "KID2"}
    assert ledger.get_steps("RUN1", []) == {}
