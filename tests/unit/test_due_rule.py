"""The due-time rules of issue 35 as pure functions (``durable.core.leases``): a claim
keeps a due time no later than its lease's takeover moment (``keeps_due``), and the
sweeper invokes only a run no worker holds, making a live lease's run due at the moment
it can be taken over (``sweep_trigger``). The contract suite checks both ledgers apply
them; these pin the boundaries."""

from __future__ import annotations

from datetime import timedelta

from durable.core.leases import claimed, keeps_due, lease_ended, sweep_trigger
from durable.core.model import RunStatus
from tests.support.records import make_run, t

SKEW = timedelta(seconds=5)


def test_a_claim_keeps_a_due_time_up_to_and_including_the_takeover_moment() -> None:
    assert keeps_due(t(10), t(85))
    assert keeps_due(t(85), t(85))  # the sweeper looks exactly when a takeover could
    assert not keeps_due(t(86), t(85))
    assert not keeps_due(None, t(85))


def test_claimed_applies_the_rule_and_stamps_the_claim_never_backwards() -> None:
    """GIVEN runs due before, at and after the takeover moment, and one claimed before
    by a clock ahead of this claimer's WHEN claimed THEN the due time is kept or moved by
    ``keeps_due`` and ``woke_at`` is the later of the claim's time and the last stamp."""
    early = claimed(make_run(due_at=t(10)), "w", t(20), t(80), "free", t(85))
    late = claimed(make_run(due_at=t(90)), "w", t(20), t(80), "free", t(85))
    none = claimed(make_run(due_at=None), "w", t(20), t(80), "free", None)
    assert (early.due_at, late.due_at, none.due_at) == (t(10), t(85), t(80))
    assert early.woke_at == t(20)
    ahead = claimed(make_run(woke_at=t(30)), "w", t(20), t(80), "free", t(85))
    assert ahead.woke_at == t(30)


def test_the_sweeper_invokes_a_run_no_worker_holds() -> None:
    unleased = make_run(status=RunStatus.WAITING, due_at=t(10))
    assert sweep_trigger(unleased, t(10), t(400), t(95), SKEW) == (True, t(400))
    expired = make_run(status=RunStatus.RUNNING, due_at=t(10), lease_owner="w")
    expired.lease_until = t(94)
    assert lease_ended(expired, t(95))
    assert sweep_trigger(expired, t(10), t(400), t(95), SKEW) == (True, t(400))


def test_a_live_lease_is_not_invoked_but_made_due_at_its_takeover_moment() -> None:
    live = make_run(status=RunStatus.RUNNING, due_at=t(10), lease_owner="w")
    live.lease_until = t(95)  # not before stale_before: a claim could not take it yet
    assert not lease_ended(live, t(95))
    assert sweep_trigger(live, t(10), t(400), t(95), SKEW) == (False, t(100))


def test_an_ended_or_moved_run_is_left_alone() -> None:
    done = make_run(status=RunStatus.SUCCEEDED, due_at=t(10))
    assert sweep_trigger(done, t(10), t(400), t(95), SKEW) == (False, None)
    moved = make_run(due_at=t(20))
    assert sweep_trigger(moved, t(10), t(400), t(95), SKEW) == (False, None)
    assert sweep_trigger(None, t(10), t(400), t(95), SKEW) == (False, None)
