"""The ledger contract: every implementation (memory, moto, DynamoDB Local) passes it.

Each test reads GIVEN / WHEN / THEN. The ``ledger`` fixture is parametrized over the
backends in ``tests/conftest.py``; a behaviour the engine relies on belongs here so fakes
cannot drift from DynamoDB.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from durable.core.leases import listed
from durable.core.model import Attempt, RunError, RunStatus, SignalRecord, StepStatus
from durable.core.ports import ConditionFailed, RunExists, RunGuard
from durable.errors import PayloadTooLarge
from tests.support.records import T0, make_run, make_step, t


def claim(
    ledger: Any, owner: str, now: int, lease: int = 60, skew: int = 5, run_id: str = "RUN1"
) -> Any:
    return ledger.claim(
        run_id, owner, now=t(now), lease_until=t(now + lease), stale_before=t(now - skew)
    )


# --- run creation -----------------------------------------------------------------------


def test_create_and_read_back_the_run(ledger: Any) -> None:
    run = make_run(requested_by="alice", idempotency_key="k1")
    ledger.create_run(run)
    assert ledger.get_run("RUN1") == run
    assert ledger.get_run("missing") is None


def test_create_twice_reports_the_stored_run(ledger: Any) -> None:
    ledger.create_run(make_run(input='{"a":1}'))
    with pytest.raises(RunExists) as info:
        ledger.create_run(make_run(input='{"a":2}'))
    assert info.value.existing.input == '{"a":1}'
    assert ledger.get_run("RUN1").input == '{"a":1}'  # nothing overwritten


def test_oversized_input_is_refused_and_nothing_is_written(ledger: Any) -> None:
    with pytest.raises(PayloadTooLarge) as info:
        ledger.create_run(make_run(input='"' + "x" * 450_000 + '"'))
    assert "400" in str(info.value) or info.value.limit < 410_000
    assert ledger.get_run("RUN1") is None


# --- claims -----------------------------------------------------------------------------


def test_claim_takes_a_free_lease_and_bumps_the_fence(ledger: Any) -> None:
    ledger.create_run(make_run())
    got = claim(ledger, "w1", now=10)
    assert got is not None and not got.took_over
    run = got.run
    assert (run.status, run.lease_owner, run.fence) == (RunStatus.RUNNING, "w1", 1)
    assert run.lease_until == t(70)
    # The run was due at its creation (t0), before the lease's end: the claim keeps that
    # (durable.core.leases.keeps_due), and the sweeper, meeting the live lease, makes it
    # due at the lease's end; a run without a due time gets that one at once.
    assert run.due_at == t(0) and run.woke_at == t(10)
    assert ledger.get_run("RUN1") == run
    ledger.create_run(make_run("RUN2", due_at=None))
    other = claim(ledger, "w1", now=10, run_id="RUN2")
    assert other is not None and other.run.due_at == other.run.lease_until


def test_a_live_lease_is_not_claimed_by_another_owner(ledger: Any) -> None:
    ledger.create_run(make_run())
    claim(ledger, "w1", now=10)
    assert claim(ledger, "w2", now=20) is None
    assert ledger.get_run("RUN1").lease_owner == "w1"


def test_the_owner_may_claim_again(ledger: Any) -> None:
    ledger.create_run(make_run())
    claim(ledger, "w1", now=10)
    again = claim(ledger, "w1", now=20)
    assert again is not None and again.run.fence == 2


def test_an_expired_lease_is_taken_over_only_past_the_skew_margin(ledger: Any) -> None:
    ledger.create_run(make_run())
    claim(ledger, "w1", now=0, lease=60)
    # Expired by our clock, but not by more than the 5 s skew margin: still busy.
    assert claim(ledger, "w2", now=63) is None
    took = claim(ledger, "w2", now=66)
    assert took is not None and took.took_over
    assert (took.run.lease_owner, took.run.takeovers, took.run.fence) == ("w2", 1, 2)


def test_a_released_lease_is_claimed_without_a_takeover(ledger: Any) -> None:
    ledger.create_run(make_run())
    run = claim(ledger, "w1", now=0).run
    ledger.update_run("RUN1", RunGuard(run.fence, "w1"), {"lease_owner": None, "lease_until": None})
    got = claim(ledger, "w2", now=1)
    assert got is not None and not got.took_over and got.run.takeovers == 0


def test_terminal_and_missing_runs_are_not_claimed(ledger: Any) -> None:
    ledger.create_run(make_run(status=RunStatus.SUCCEEDED))
    assert claim(ledger, "w1", now=0) is None
    assert claim(ledger, "w1", now=0, run_id="nope") is None


def test_a_compensating_run_keeps_its_status_through_a_claim(ledger: Any) -> None:
    ledger.create_run(make_run(status=RunStatus.COMPENSATING))
    got = claim(ledger, "w1", now=0)
    assert got is not None and got.run.status == RunStatus.COMPENSATING


def test_concurrent_claims_have_exactly_one_winner(ledger: Any, atomic_backend: None) -> None:
    ledger.create_run(make_run())
    results: list[Any] = []
    barrier = threading.Barrier(6)

    def contend(i: int) -> None:
        barrier.wait()
        results.append(claim(ledger, f"w{i}", now=0))

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert ledger.get_run("RUN1").lease_owner == winners[0].run.lease_owner


# --- guarded run updates ------------------------------------------------------------------


def test_update_with_a_stale_fence_fails_and_returns_the_stored_item(ledger: Any) -> None:
    ledger.create_run(make_run())
    claim(ledger, "w1", now=0)
    claim(ledger, "w1", now=1)  # fence 2
    with pytest.raises(ConditionFailed) as info:
        ledger.update_run("RUN1", RunGuard(1, "w1"), {"status": "SUCCEEDED", "updated_at": t(2)})
    assert info.value.current is not None and info.value.current.fence == 2
    assert ledger.get_run("RUN1").status == RunStatus.RUNNING


def test_suspension_requires_an_unchanged_inbox(ledger: Any) -> None:
    ledger.create_run(make_run(inbox=3))
    run = claim(ledger, "w1", now=0).run
    with pytest.raises(ConditionFailed) as info:
        ledger.update_run(
            "RUN1", RunGuard(run.fence, "w1", inbox=2), {"status": "WAITING", "updated_at": t(1)}
        )
    assert info.value.current is not None and info.value.current.inbox == 3
    new = ledger.update_run(
        "RUN1", RunGuard(run.fence, "w1", inbox=3), {"status": "WAITING", "updated_at": t(1)}
    )
    assert new.status == RunStatus.WAITING


def test_the_final_write_refuses_a_cancel_requested_run(ledger: Any) -> None:
    ledger.create_run(make_run(cancel_requested=True, cancel_reason="stop"))
    run = claim(ledger, "w1", now=0).run
    guard = RunGuard(run.fence, "w1", statuses=("RUNNING", "COMPENSATING"), no_cancel=True)
    with pytest.raises(ConditionFailed) as info:
        ledger.update_run("RUN1", guard, {"status": "SUCCEEDED", "updated_at": t(1)})
    assert info.value.current is not None and info.value.current.cancel_requested


def test_the_final_write_needs_an_active_status(ledger: Any) -> None:
    ledger.create_run(make_run())
    run = claim(ledger, "w1", now=0).run
    ledger.update_run("RUN1", RunGuard(run.fence, "w1"), {"status": "WAITING", "updated_at": t(1)})
    guard = RunGuard(run.fence, "w1", statuses=("RUNNING", "COMPENSATING"))
    with pytest.raises(ConditionFailed):
        ledger.update_run("RUN1", guard, {"status": "SUCCEEDED", "updated_at": t(2)})


def test_update_sets_and_removes_fields(ledger: Any) -> None:
    ledger.create_run(make_run())
    run = claim(ledger, "w1", now=0).run
    new = ledger.update_run(
        "RUN1",
        RunGuard(run.fence, "w1"),
        {
            "status": "FAILED",
            "updated_at": t(5),
            "error": RunError("ValueError", "bad", False),
            "needs_attention": True,
            "due_at": None,
            "lease_owner": None,
            "lease_until": None,
            "purge_at": 1_800_000_000,
        },
    )
    stored = ledger.get_run("RUN1")
    assert stored == new
    assert stored.error == RunError("ValueError", "bad", False)
    assert (stored.due_at, stored.lease_owner, stored.purge_at) == (None, None, 1_800_000_000)


# --- steps ------------------------------------------------------------------------------


def test_first_writer_wins_and_the_loser_adopts(ledger: Any) -> None:
    ledger.create_run(make_run())
    first = ledger.write_step(make_step(output='"A"'))
    assert first.output == '"A"'
    second = ledger.write_step(make_step(output='"B"'))
    assert second.output == '"A"' and second.status == StepStatus.DONE
    assert ledger.load("RUN1").steps["0001"].output == '"A"'


def test_non_final_records_are_overwritten(ledger: Any) -> None:
    ledger.create_run(make_run())
    ledger.write_step(make_step(status=StepStatus.RUNNING, output=None))
    ledger.write_step(make_step(status=StepStatus.RETRYABLE_FAILED, output=None, attempt=1))
    done = ledger.write_step(make_step(status=StepStatus.DONE, output='"x"', attempt=2))
    assert done.status == StepStatus.DONE and ledger.load("RUN1").steps["0001"].attempt == 2


def test_a_terminal_failure_is_final_too(ledger: Any) -> None:
    ledger.create_run(make_run())
    ledger.write_step(make_step(status=StepStatus.TERMINAL_FAILED, output=None, error_summary="no"))
    adopted = ledger.write_step(make_step(status=StepStatus.DONE, output='"late"'))
    assert adopted.status == StepStatus.TERMINAL_FAILED


def test_concurrent_completions_agree_on_one_result(ledger: Any, atomic_backend: None) -> None:
    ledger.create_run(make_run())
    results: list[str | None] = []
    barrier = threading.Barrier(6)

    def complete(i: int) -> None:
        barrier.wait()
        results.append(ledger.write_step(make_step(output=f'"{i}"')).output)

    threads = [threading.Thread(target=complete, args=(i,)) for i in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    stored = ledger.load("RUN1").steps["0001"].output
    assert set(results) == {stored}


def test_step_records_round_trip_every_field(ledger: Any) -> None:
    ledger.create_run(make_run())
    step = make_step(
        attempts=[
            Attempt(1, t(1), t(2), "retryable", "ConnectionError: x", "req-1", "stream-1"),
            Attempt(2, t(3), t(4)),
        ],
        attempt=2,
        checkpoint={"payload_version": 2, "state": '{"cursor":"abc"}'},
        refs=[{"kind": "ticket", "value": "T-1"}],
        idempotency_key="RUN1:0001:step",
        wake_at=t(9),
        error_type="X",
        error_class="retryable",
        error_summary="summary",
        detail={"reason": "retry"},
    )
    ledger.write_step(step)
    assert ledger.load("RUN1").steps["0001"] == step


def test_oversized_step_output_is_refused(ledger: Any) -> None:
    ledger.create_run(make_run())
    with pytest.raises(PayloadTooLarge):
        ledger.write_step(make_step(output='"' + "y" * 420_000 + '"'))
    assert ledger.load("RUN1").steps == {}


def test_load_returns_every_page_of_a_large_history(ledger: Any) -> None:
    # 30 steps of ~40 KB: over 1 MB, so DynamoDB answers in several pages.
    ledger.create_run(make_run())
    blob = '"' + "z" * 40_000 + '"'
    for i in range(1, 31):
        ledger.write_step(make_step(position=f"{i:04d}", output=blob))
    loaded = ledger.load("RUN1")
    assert sorted(loaded.steps) == [f"{i:04d}" for i in range(1, 31)]


def test_checkpoint_writes_the_step_and_renews_the_lease_atomically(ledger: Any) -> None:
    ledger.create_run(make_run())
    run = claim(ledger, "w1", now=0).run
    step = make_step(
        status=StepStatus.RUNNING, output=None, checkpoint={"payload_version": 1, "state": "5"}
    )
    assert ledger.write_step_fenced(step, RunGuard(run.fence, "w1"), {"lease_until": t(500)})
    assert ledger.get_run("RUN1").lease_until == t(500)
    assert ledger.load("RUN1").steps["0001"].checkpoint == {"payload_version": 1, "state": "5"}


def test_a_fenced_write_by_a_stale_owner_writes_neither_item(ledger: Any) -> None:
    ledger.create_run(make_run())
    claim(ledger, "w1", now=0, lease=10)
    claim(ledger, "w2", now=100)  # w1's lease expired and was taken over
    step = make_step(status=StepStatus.RUNNING, output=None)
    with pytest.raises(ConditionFailed):
        ledger.write_step_fenced(step, RunGuard(1, "w1"), {"lease_until": t(500)})
    assert ledger.load("RUN1").steps == {}
    assert ledger.get_run("RUN1").lease_owner == "w2"


def test_a_fenced_write_never_replaces_a_final_step(ledger: Any) -> None:
    ledger.create_run(make_run())
    run = claim(ledger, "w1", now=0).run
    ledger.write_step(make_step(output='"done"'))
    written = ledger.write_step_fenced(
        make_step(status=StepStatus.RUNNING, output=None),
        RunGuard(run.fence, "w1"),
        {"lease_until": t(500)},
    )
    assert written is False
    assert ledger.load("RUN1").steps["0001"].output == '"done"'
    assert ledger.get_run("RUN1").lease_until == t(60)


# --- listing ----------------------------------------------------------------------------


def _finish(ledger: Any, run_id: str, status: str, at: int, attention: bool = False) -> None:
    run = claim(ledger, "w", now=at, run_id=run_id).run
    ledger.update_run(
        run_id,
        RunGuard(run.fence, "w"),
        {"status": status, "updated_at": t(at), "needs_attention": attention, "lease_owner": None},
    )


def test_list_runs_by_workflow_status_and_attention(ledger: Any) -> None:
    for i, (wf, version) in enumerate([("a", 1), ("a", 2), ("a", 1), ("b", 1)]):
        ledger.create_run(make_run(f"R{i}", workflow=wf, version=version))
    _finish(ledger, "R0", "SUCCEEDED", 10)
    _finish(ledger, "R1", "FAILED", 20, attention=True)
    _finish(ledger, "R3", "FAILED", 30, attention=True)

    assert [r.run_id for r in ledger.list_runs(workflow="a", status="SUCCEEDED").items] == ["R0"]
    assert {r.run_id for r in ledger.list_runs(workflow="a").items} == {"R0", "R1", "R2"}
    assert [r.run_id for r in ledger.list_runs(workflow="a", version=2).items] == ["R1"]
    attention = ledger.list_runs(needs_attention=True).items
    assert [r.run_id for r in attention] == ["R3", "R1"]  # newest first
    assert [r.run_id for r in ledger.list_runs(needs_attention=True, workflow="b").items] == ["R3"]
    with pytest.raises(ValueError):
        ledger.list_runs(status="FAILED")  # would need a scan


def test_a_listing_shows_unfinished_runs_first_then_the_latest_ended(ledger: Any) -> None:
    """GIVEN runs of one workflow, some ended WHEN they are listed THEN every ledger gives
    the same order: the unfinished ones newest created first, then the ended ones latest
    ended first (``durable.core.leases.listing_key``); a listing by status keeps it, a
    run that ends moves to the ended ones, and a retry brings a failed one back."""
    for i in range(5):
        ledger.create_run(make_run(f"R{i}", created_at=t(i), updated_at=t(i)))
    _finish(ledger, "R0", "FAILED", 30)
    _finish(ledger, "R3", "SUCCEEDED", 20)
    assert [r.run_id for r in ledger.list_runs(workflow="wf").items] == [
        "R4",
        "R2",
        "R1",
        "R0",
        "R3",
    ]
    assert [r.run_id for r in ledger.list_runs(workflow="wf", status="PENDING").items] == [
        "R4",
        "R2",
        "R1",
    ]
    ledger.operate(
        "R0",
        statuses=("FAILED",),
        unleased=True,
        changes={"status": "PENDING", "updated_at": t(40), "error": None, "due_at": t(40)},
    )
    assert [r.run_id for r in ledger.list_runs(workflow="wf", status="PENDING").items] == [
        "R0",
        "R4",
        "R2",
        "R1",
    ]
    assert ledger.list_runs(workflow="wf", status="FAILED").items == []


def test_open_runs_are_a_workflows_unfinished_runs_whatever_their_status(ledger: Any) -> None:
    """GIVEN runs of one workflow in each status, and another workflow's WHEN its open runs
    are read THEN they are its unfinished runs, newest created first, as a listing shows
    them; a run a worker claims, suspends or moves to compensating stays where it was (its
    listing key does not move: ``Ledger.open_runs``, an ``overlap`` schedule's one read);
    one that ends leaves them, a retry brings it back, and a cursor walks them."""
    statuses = ["PENDING", "RUNNING", "WAITING", "COMPENSATING", "SUCCEEDED", "FAILED"]
    for i, status in enumerate(statuses):
        ledger.create_run(make_run(f"R{i}", created_at=t(i), updated_at=t(i)))
        if status != "PENDING":
            run = claim(ledger, "w", now=i, run_id=f"R{i}").run
            changes = {"status": status, "updated_at": t(i), "lease_owner": None}
            ledger.update_run(f"R{i}", RunGuard(run.fence, "w"), changes)
    ledger.create_run(make_run("B", workflow="other", created_at=t(9)))

    def open_ids(**page: Any) -> list[str]:
        return [r.run_id for r in ledger.open_runs("wf", **page).items]

    assert open_ids() == ["R3", "R2", "R1", "R0"]
    (row, *_) = ledger.open_runs("wf").items
    assert row == listed(ledger.get_run("R3"))
    r2 = claim(ledger, "w2", now=20, run_id="R2").run  # WAITING -> RUNNING
    assert open_ids() == ["R3", "R2", "R1", "R0"]
    ledger.update_run("R2", RunGuard(r2.fence, "w2"), {"status": "SUCCEEDED", "updated_at": t(21)})
    assert open_ids() == ["R3", "R1", "R0"]
    ledger.operate(
        "R5",
        statuses=("FAILED",),
        unleased=True,
        changes={"status": "PENDING", "updated_at": t(40), "error": None, "due_at": t(40)},
    )
    assert open_ids() == ["R5", "R3", "R1", "R0"]
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = ledger.open_runs("wf", limit=3, cursor=cursor)
        seen += [r.run_id for r in page.items]
        cursor = page.cursor
        if cursor is None:
            break
    assert seen == ["R5", "R3", "R1", "R0"]


def test_needs_attention_lists_flagged_failed_and_person_waits_and_nothing_else(
    ledger: Any,
) -> None:
    """ "Needs attention" is what a person should look at (``leases.wants_a_person``): a
    run the engine flagged (even one that SUCCEEDED), one that FAILED (flagged or not),
    and one parked on a callback; not a sleeping run, and not a parked run once a worker
    claims it again. Every ledger lists the same runs, from what the writes say."""
    for i in range(6):
        ledger.create_run(make_run(f"R{i}"))
    _finish(ledger, "R0", "FAILED", 10)  # failed in its code, not flagged
    _finish(ledger, "R1", "SUCCEEDED", 11, attention=True)  # flagged by the engine
    _finish(ledger, "R2", "SUCCEEDED", 12)
    for run_id, wait, at in [
        ("R3", "callback approval until 2026-01-08T00:00:00.000Z", 13),
        ("R4", "sleep sleep until 2026-01-02T00:00:00.000Z", 14),
        ("R5", "callback sign-off", 15),
    ]:
        run = claim(ledger, "w", now=at, run_id=run_id).run
        ledger.update_run(
            run_id,
            RunGuard(run.fence, "w"),
            {"status": "WAITING", "updated_at": t(at), "lease_owner": None, "waiting_for": wait},
        )
    listed = ledger.list_runs(needs_attention=True).items
    assert [r.run_id for r in listed] == ["R5", "R3", "R1", "R0"]  # newest first
    assert ledger.get_run("R3").waiting_for == "callback approval until 2026-01-08T00:00:00.000Z"
    claim(ledger, "w2", now=20, run_id="R5")  # answered: a worker runs it again
    assert [r.run_id for r in ledger.list_runs(needs_attention=True).items] == ["R3", "R1", "R0"]
    r3 = claim(ledger, "w3", now=21, run_id="R3").run
    ledger.update_run(  # a new status without a wait: the old one is over
        "R3", RunGuard(r3.fence, "w3"), {"status": "WAITING", "updated_at": t(21)}
    )
    assert ledger.get_run("R3").waiting_for is None
    assert [r.run_id for r in ledger.list_runs(needs_attention=True).items] == ["R1", "R0"]


def test_a_listing_carries_what_a_listing_shows_and_a_read_the_whole_run(ledger: Any) -> None:
    """GIVEN a failed run with an input, an output, a lease and an error
    WHEN it is listed (either index) and read
    THEN the listing has exactly the listed fields (the indexes project nothing else, so a
    run's input is not copied into them) and the read has everything."""
    ledger.create_run(make_run("R0", input='{"notes": "' + "x" * 2000 + '"}'))
    run = claim(ledger, "w1", now=5, run_id="R0").run
    changes = {
        "status": "FAILED",
        "updated_at": t(10),
        "needs_attention": True,
        "error": RunError("ValueError", "bad", False, position="0002"),
    }
    ledger.update_run("R0", RunGuard(run.fence, "w1"), changes)
    stored = ledger.get_run("R0")
    assert stored.input.startswith('{"notes"') and stored.lease_owner is not None
    for page in (ledger.list_runs(workflow="wf"), ledger.list_runs(needs_attention=True)):
        (row,) = page.items
        assert row == listed(stored)
        assert (row.input, row.input_hash, row.lease_owner, row.fence) == ("", "", None, 0)
        assert row.error == stored.error and row.needs_attention


def test_list_runs_pages_with_a_cursor(ledger: Any) -> None:
    for i in range(5):
        ledger.create_run(make_run(f"R{i}", updated_at=t(i), created_at=T0))
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = ledger.list_runs(workflow="wf", limit=2, cursor=cursor)
        seen += [r.run_id for r in page.items]
        cursor = page.cursor
        if cursor is None:
            break
    assert sorted(seen) == [f"R{i}" for i in range(5)] and len(seen) == 5


def _walk(ledger: Any, limit: int, **listing: Any) -> list[str]:
    seen: list[str] = []
    cursor = None
    for _ in range(100):
        page = ledger.list_runs(**listing, limit=limit, cursor=cursor)
        assert len(page.items) <= limit
        seen += [r.run_id for r in page.items]
        cursor = page.cursor
        if cursor is None:
            return seen
    raise AssertionError("the cursor never ended")


def test_a_cursor_pages_through_a_listing_in_its_order_whatever_its_shards(ledger: Any) -> None:
    """GIVEN 24 runs of one workflow (the DynamoDB ledger spreads them over the listing's
    shards), a third of them ended, some failed and needing attention WHEN each listing
    is walked a few runs a page THEN the pages give the whole listing once, in its order:
    the unfinished runs newest created first, then the ended ones latest ended first; a
    listing by status the runs of that status only (read from the run items); the
    attention listing latest changed first. A cursor no listing returned is refused."""
    from durable.errors import InvalidCursor

    for i in range(24):
        ledger.create_run(make_run(f"R{i:02d}", created_at=t(i), updated_at=t(i)))
    ended = {f"R{i:02d}": ("FAILED" if i % 2 else "SUCCEEDED", 100 - i) for i in range(0, 24, 3)}
    for run_id, (status, at) in ended.items():
        _finish(ledger, run_id, status, at, attention=status == "FAILED")
    unfinished = [f"R{i:02d}" for i in reversed(range(24)) if f"R{i:02d}" not in ended]
    by_end = sorted(ended, key=lambda r: ended[r][1], reverse=True)
    failed = [r for r in by_end if ended[r][0] == "FAILED"]
    assert _walk(ledger, 5, workflow="wf") == unfinished + by_end
    assert _walk(ledger, 1, workflow="wf", status="PENDING") == unfinished
    assert _walk(ledger, 2, workflow="wf", status="FAILED") == failed
    assert _walk(ledger, 3, needs_attention=True) == failed
    assert _walk(ledger, 2, needs_attention=True, workflow="wf", status="FAILED") == failed
    for listing in ({"workflow": "wf"}, {"needs_attention": True}):
        with pytest.raises(InvalidCursor):
            ledger.list_runs(**listing, cursor="not-a-cursor")


def test_a_filtered_page_looks_at_a_bounded_number_of_runs(
    ledger: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN two failed runs behind many succeeded ones (a rare status among ended runs)
    WHEN the failed ones are listed THEN no page looks at more than the listing's bound of
    entries (on DynamoDB each one is a read of its run item: one request would otherwise
    read the whole workflow); a short page carries a cursor, and the walk still gives
    both, in order."""
    from durable.adapters import dynamodb_listing

    monkeypatch.setattr(dynamodb_listing, "MAX_EXAMINED", 4)
    for i in range(14):
        ledger.create_run(make_run(f"R{i:02d}", created_at=t(i), updated_at=t(i)))
        _finish(ledger, f"R{i:02d}", "FAILED" if i < 2 else "SUCCEEDED", 100 + i)
    first = ledger.list_runs(workflow="wf", status="FAILED", limit=10)
    if isinstance(ledger, dynamodb_listing.ListingMixin):
        assert first.items == [] and first.cursor is not None  # 4 looked at, none failed
    assert _walk(ledger, 10, workflow="wf", status="FAILED") == ["R01", "R00"]


# --- leftovers of an expired run under a reused id ----------------------------------


def test_purging_leftovers_deletes_only_older_steps_and_signals(ledger: Any) -> None:
    # GIVEN a run whose partition holds an old step and signal and a newer step
    ledger.create_run(make_run(status=RunStatus.WAITING, due_at=None))
    ledger.write_step(make_step(position="0001", updated_at=t(10)))
    ledger.add_signal(SignalRecord("RUN1", "go", "01OLD", '"x"', t(11)), now=t(11))
    ledger.write_step(make_step(position="0002", updated_at=t(200)))
    # WHEN what was written before t(100) is purged
    assert ledger.purge_leftovers("RUN1", before=t(100)) == 2
    # THEN the newer step and the run item stay; purging again finds nothing
    history = ledger.load("RUN1")
    assert history is not None and history.run == ledger.get_run("RUN1")
    assert sorted(history.steps) == ["0002"] and history.signals == []
    assert ledger.purge_leftovers("RUN1", before=t(100)) == 0


def test_purging_leftovers_of_a_partition_without_a_run_item(ledger: Any) -> None:
    # Steps can exist without their run item: TTL deleted it, or a fork copied them first.
    ledger.write_step(make_step(run_id="GONE", position="0001", updated_at=t(10)))
    assert ledger.load("GONE") is None
    assert ledger.purge_leftovers("GONE", before=t(100)) == 1
    assert ledger.purge_leftovers("NEVER", before=t(100)) == 0


def test_a_timeout_of_an_expiry_that_moved_on_is_refused(ledger: Any) -> None:
    """A callback's heartbeat moves its stored expiry on; a worker timing the wait out on
    the expiry it saw before must not end it (``leases.step_replaceable``): the write
    returns the stored wait. A timeout of the stored expiry itself is written."""
    from durable.core.model import StepKind

    ledger.create_run(make_run())
    waiting = make_step(
        status=StepStatus.WAITING, output=None, kind=StepKind.CALLBACK, expires_at=t(20)
    )
    ledger.write_step(waiting)
    stale = make_step(
        status=StepStatus.TIMED_OUT, output=None, kind=StepKind.CALLBACK, expires_at=t(10)
    )
    kept = ledger.write_step(stale)
    assert kept.status == StepStatus.WAITING and kept.expires_at == t(20)
    assert ledger.get_step("RUN1", "0001").status == StepStatus.WAITING
    due = make_step(
        status=StepStatus.TIMED_OUT, output=None, kind=StepKind.CALLBACK, expires_at=t(20)
    )
    assert ledger.write_step(due).status == StepStatus.TIMED_OUT
    assert ledger.get_step("RUN1", "0001").status == StepStatus.TIMED_OUT
