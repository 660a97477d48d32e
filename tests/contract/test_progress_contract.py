"""Ledger contract: a run's progress (``ctx.set_progress``) is a run field that rides in
the run item's writes: stored whole, read back equal, cleared by None, and (like every
field a listing does not show) not carried by a listing. On every backend."""

from __future__ import annotations

from typing import Any

from durable.core.leases import listed
from durable.core.model import StepStatus
from durable.core.ports import RunGuard
from tests.support.records import make_run, make_step, t

PROGRESS = {"done": 3, "total": 300, "note": "supplier 12", "at": t(5)}


def _claimed(ledger: Any) -> RunGuard:
    ledger.create_run(make_run())
    claim = ledger.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0))
    assert claim is not None
    return RunGuard(claim.run.fence, "w1")


def test_progress_rides_in_an_update_and_reads_back_equal(ledger: Any) -> None:
    """GIVEN a claimed run WHEN a lease renewal carries a progress THEN the stored run and
    the returned one hold it as written (counts as ints, not a backend's decimals); a
    progress without total and note keeps them absent; None removes it."""
    guard = _claimed(ledger)
    returned = ledger.update_run("RUN1", guard, {"lease_until": t(120), "progress": dict(PROGRESS)})
    stored = ledger.get_run("RUN1")
    assert returned.progress == stored.progress == PROGRESS
    assert all(type(stored.progress[k]) is int for k in ("done", "total"))
    assert ledger.load("RUN1").run.progress == PROGRESS

    bare = {"done": 7, "at": t(6)}
    assert ledger.update_run("RUN1", guard, {"progress": bare}).progress == bare
    assert ledger.get_run("RUN1").progress == bare

    ledger.update_run("RUN1", guard, {"progress": None})
    assert ledger.get_run("RUN1").progress is None


def test_progress_rides_in_a_checkpoint_write(ledger: Any) -> None:
    guard = _claimed(ledger)
    step = make_step(
        status=StepStatus.RUNNING, output=None, checkpoint={"payload_version": 1, "state": "5"}
    )
    changes = {"lease_until": t(500), "progress": dict(PROGRESS)}
    assert ledger.write_step_fenced(step, guard, changes)
    assert ledger.get_run("RUN1").progress == PROGRESS


def test_a_listing_by_workflow_carries_progress(ledger: Any) -> None:
    """A listing by workflow reads its page's run items (the listing index holds keys
    only): each row carries the run's progress, as the run item holds it
    (``leases.PAGE_FIELDS``), with no read of the API's own."""
    guard = _claimed(ledger)
    ledger.update_run("RUN1", guard, {"progress": dict(PROGRESS)})
    (row,) = ledger.list_runs(workflow="wf").items
    assert row == listed(ledger.get_run("RUN1")) and row.progress == PROGRESS
