"""Pins on keeping the lease (durable/engine/lease_keeping.py).

The tests drive ``ensure_lease`` on a run claimed in the memory ledger (``Claimed``, from
the execution lease pins), with the engine's fake clock. Each test names the mutants it
kills (ids of ``python -m tests.mutation --module durable/engine/lease_keeping.py --list``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from durable.adapters.memory import MemoryLedger
from durable.core.clock import FakeClock
from durable.core.model import RunRecord
from durable.core.ports import RunGuard
from durable.errors import LeaseLost
from tests.unit.test_pins_execution_lease import Claimed

S = timedelta(seconds=1)


class SlowRenewals:
    """The memory ledger, with the first ``slow`` run updates answered 6 s late (more
    than the 5 s cancel check interval): a stalled network or a paused process."""

    def __init__(self, ledger: MemoryLedger, clock: FakeClock, slow: int) -> None:
        self.ledger = ledger
        self.clock = clock
        self.slow = slow
        self.calls = 0

    def update_run(self, run_id: str, guard: RunGuard, changes: Mapping[str, Any]) -> RunRecord:
        self.calls += 1
        stored = self.ledger.update_run(run_id, guard, changes)
        if self.calls <= self.slow:
            self.clock.advance(6 * S)
        return stored


def _slowed(slow: int) -> tuple[Claimed, SlowRenewals]:
    claimed = Claimed()
    clock = claimed.runner.clock
    assert isinstance(clock, FakeClock)
    slowed = SlowRenewals(claimed.ledger, clock, slow)
    claimed.x.ledger = slowed  # type: ignore[assignment]
    claimed.at(10)  # the claim's read is 10 s old: a step must renew first
    return claimed, slowed


def test_three_late_renewals_in_a_row_give_up_the_invocation() -> None:
    """GIVEN every lease renewal answered after the cancel check interval WHEN a step
    starts THEN the worker renews three times, trusts none of them, and raises LeaseLost
    (starting no body on a view of the run it cannot vouch for).

    Kills lease_keeping-2c7c4c6b (four renewals) and lease_keeping-e27ce974 (``raise
    LeaseLost()`` deleted: the body would start on a stale view)."""
    claimed, slowed = _slowed(slow=3)

    with pytest.raises(LeaseLost):
        claimed.x.ensure_lease(30 * S)
    assert slowed.calls == 3


def test_a_timely_third_renewal_is_trusted() -> None:
    """GIVEN two late renewals, then one answered in time WHEN a step starts THEN the third
    renewal is trusted and the step may start: no fourth write."""
    claimed, slowed = _slowed(slow=2)

    claimed.x.ensure_lease(30 * S)
    assert slowed.calls == 3


def test_a_lease_is_alive_until_its_last_instant() -> None:
    """GIVEN a lease ending 60 s after the claim WHEN checked exactly at 60 s THEN it is
    still held; a millisecond later it is lost (the worker stalled past it).

    Kills lease_keeping-a012a629 (``now > end`` -> ``>=``)."""
    claimed = Claimed()
    claimed.at(60)
    claimed.x.check_lease_alive()
    claimed.at(60.001)
    with pytest.raises(LeaseLost):
        claimed.x.check_lease_alive()
