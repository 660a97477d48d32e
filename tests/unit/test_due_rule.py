"""The due-time rules of issue 35 as pure functions (``durable.core.leases``): a claim
keeps a due time no later than its lease's takeover moment (``keeps_due``), and the
sweeper invokes only a run no worker holds, making a live lease's run due at the moment
it can be taken over (``sweep_trigger``). The contract suite checks both ledgers apply
them; these pin the boundaries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from durable.adapters.dynamodb import DynamoLedger
from durable.core.leases import claimed, keeps_due, lease_changes, sweep_trigger
from durable.core.model import RunStatus, SignalRecord, parse_time
from durable.core.ports import RunGuard
from tests.support.records import make_run, t

SKEW = timedelta(seconds=5)


def test_a_claim_keeps_a_due_time_up_to_and_including_the_takeover_moment() -> None:
    assert keeps_due(t(10), t(85))
    assert keeps_due(t(85), t(85))  # the sweeper looks exactly when a takeover could
    assert not keeps_due(t(86), t(85))
    assert not keeps_due(None, t(85))


def test_claimed_applies_the_rule_and_stamps_the_claim() -> None:
    """GIVEN runs due before, at and after the takeover moment, and one claimed before
    by a clock ahead of this claimer's WHEN claimed THEN the due time is kept or moved by
    ``keeps_due`` and ``woke_at`` is the later of the claim's time and the last stamp."""
    early = claimed(make_run(due_at=t(10)), "w", t(20), t(80), "free", t(85))
    late = claimed(make_run(due_at=t(90)), "w", t(20), t(80), "free", t(85))
    none = claimed(make_run(due_at=None), "w", t(20), t(80), "free", None)
    assert (early.due_at, late.due_at, none.due_at) == (t(10), t(85), t(80))
    assert early.woke_at == t(20)
    # a stamp ahead of this claim's clock by no more than the skew allowance stays (a
    # sleep it ended stays ended); one further ahead came from a wrong clock: replaced
    near = claimed(make_run(woke_at=t(25)), "w", t(20), t(80), "free", stale_before=t(15))
    far = claimed(make_run(woke_at=t(26)), "w", t(20), t(80), "free", stale_before=t(15))
    assert (near.woke_at, far.woke_at) == (t(25), t(20))


def test_the_sweeper_invokes_a_run_no_worker_holds() -> None:
    unleased = make_run(status=RunStatus.WAITING, due_at=t(10))
    assert sweep_trigger(unleased, t(10), t(400), t(95), SKEW) == (True, t(400))
    expired = make_run(status=RunStatus.RUNNING, due_at=t(10), lease_owner="w")
    expired.lease_until = t(94)
    assert sweep_trigger(expired, t(10), t(400), t(95), SKEW) == (True, t(400))


def test_a_live_lease_is_not_invoked_but_made_due_at_its_takeover_moment() -> None:
    live = make_run(status=RunStatus.RUNNING, due_at=t(10), lease_owner="w")
    live.lease_until = t(95)  # not before stale_before: a claim could not take it yet
    assert sweep_trigger(live, t(10), t(400), t(95), SKEW) == (False, t(100))


def test_an_ended_or_moved_run_is_left_alone() -> None:
    done = make_run(status=RunStatus.SUCCEEDED, due_at=t(10))
    assert sweep_trigger(done, t(10), t(400), t(95), SKEW) == (False, None)
    moved = make_run(due_at=t(20))
    assert sweep_trigger(moved, t(10), t(400), t(95), SKEW) == (False, None)
    assert sweep_trigger(None, t(10), t(400), t(95), SKEW) == (False, None)


def test_a_lease_extension_moves_the_due_time_only_where_a_claim_would() -> None:
    """GIVEN a holder's view of runs due at t10, at t300 and without a due time
    WHEN the lease is extended to t100 THEN the first keeps its due time (only the lease
    changes), the others become due at t105, the lease's end plus the skew."""
    end = parse_time(t(100))
    assert lease_changes(make_run(due_at=t(10)), end, SKEW) == {"lease_until": t(100)}
    for due in (t(300), None):
        changes = lease_changes(make_run(due_at=due), end, SKEW)
        assert changes == {"lease_until": t(100), "due_at": t(105)}


# --- on DynamoDB (moto in-process): what a claim sends -------------------------------------


def test_an_events_claim_keeps_the_due_time_the_event_set_in_one_write(
    dynamo: tuple[Any, str],
) -> None:
    """GIVEN a run parked until tomorrow (a callback's timeout) WHEN a signal arrives
    (its write makes the run due at once) and the worker it brings claims
    THEN the claim is one UpdateItem and keeps that due time: every outside event's write
    makes its run due now, so no claim of the engine meets a later due time but a sweep's
    retrigger (a review found a first version moved it on every event's claim, 2 index
    units each)."""
    client, table = dynamo
    ledger = DynamoLedger(client, table)
    ledger.create_run(make_run(due_at=t(0)))
    first = ledger.claim("RUN1", "w", now=t(1), lease_until=t(61), stale_before=t(1), due_at=t(66))
    assert first is not None
    parked = {"status": "WAITING", "lease_owner": None, "lease_until": None}
    ledger.update_run("RUN1", RunGuard(first.run.fence, "w"), parked | {"due_at": t(86400)})
    signal = SignalRecord(run_id="RUN1", name="go", signal_id="01S", payload="1", received_at=t(9))
    ledger.add_signal(signal, now=t(9))
    assert ledger.get_run("RUN1").due_at == t(9)  # type: ignore[union-attr]
    calls: list[str] = []
    client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    got = ledger.claim("RUN1", "w2", now=t(10), lease_until=t(70), stale_before=t(5), due_at=t(75))
    assert got is not None and got.run.due_at == t(9)
    assert calls == ["UpdateItem"]


def test_a_checkpoint_that_shortens_the_lease_writes_its_takeover_moment() -> None:
    """GIVEN a holder whose claim leased a whole 15-minute invocation and kept an early due
    time, which the sweeper (meeting the live lease) has since moved to that lease's end
    WHEN a checkpoint cuts the lease to one minute THEN the due time is written as the new
    takeover moment: kept, the stored one would be the long lease's, and a dead owner
    found 13 minutes late (a review's reproduction); a lease that ends no earlier keeps it.
    """
    view = make_run(due_at=t(10), lease_owner="w", lease_until=t(900))
    shorter = lease_changes(view, parse_time(t(125)), SKEW)
    assert shorter == {"lease_until": t(125), "due_at": t(130)}
    longer = lease_changes(view, parse_time(t(960)), SKEW)
    assert longer == {"lease_until": t(960)}
