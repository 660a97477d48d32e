"""How a worker keeps the run while it works: its lease, and its invocation's time.

A worker starts no step body on a lease it cannot vouch for: the lease must outlive the
step's budget by the worker's own clock, and the run item (its cancel flag with it) must
have been read within ``cancel_check_interval``. Otherwise it renews the lease first, one
fenced write that also returns the item, so a cancel is seen within that interval of
work without a read per step. No body starts that the invocation's remaining time cannot
finish: the run is handed off instead.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from durable.core.leases import lease_changes
from durable.core.model import RunRecord, parse_time
from durable.core.ports import ConditionFailed, Invocation, Ledger, RunGuard
from durable.errors import Handoff, LeaseLost, RunCanceled, TerminalError

if TYPE_CHECKING:
    from durable.core.clock import Clock
    from durable.core.config import EngineConfig

# Lease renewals in a row whose answers all came back too late to trust before a worker
# gives up its invocation (each is one request that took over ``cancel_check_interval``).
_RENEWALS = 3


class LeaseKeeping:
    """The lease and budget part of ``durable.engine.execution.Execution``."""

    run: RunRecord
    ledger: Ledger
    clock: Clock
    config: EngineConfig
    invocation: Invocation
    compensating: bool
    _checked_at: datetime | None
    _lease_cache: tuple[str | None, datetime | None]  # lease_until's text, parsed
    _executed: int

    def guard(self, **extra: Any) -> RunGuard:
        raise NotImplementedError  # Execution's

    def progress_changes(self) -> dict[str, Any]:
        raise NotImplementedError  # Execution's: the progress that rides in a renewal

    def remaining(self) -> float | None:
        fn = self.invocation.remaining_seconds
        return None if fn is None else fn()

    def check_budget(self, budget: timedelta, *, explicit: bool = True) -> None:
        """Start no body the invocation cannot finish; hand off instead.

        A step without ``timeout=`` only has the default budget, a guess: in a fresh
        invocation shorter than the guess it runs anyway rather than failing for good.
        """
        if self._executed >= self.config.steps_per_invocation:
            raise Handoff()
        remaining = self.remaining()
        if remaining is None:
            return
        needed = (budget + self.config.safety_margin).total_seconds()
        if remaining >= needed:
            return
        if self._executed == 0 and not explicit:
            return
        if self._executed == 0:
            raise TerminalError(
                f"the step needs {budget.total_seconds():.0f}s but a fresh invocation has "
                f"only {remaining:.0f}s: lower the step's timeout= or raise the function's "
                "timeout"
            )
        raise Handoff()

    def ensure_lease(self, budget: timedelta) -> None:
        """Renew the lease (fenced) unless it already outlives ``budget`` by our clock and
        the run item was read within ``cancel_check_interval``.

        What follows (a body) starts right after this returns, so the view it rests on
        must still be recent *then*: a renewal whose answer came back late (a stalled
        network, a paused process) is renewed again rather than trusted.
        """
        for _ in range(_RENEWALS):
            self._renew_if_needed(budget)
            if self._fresh(self.clock.now()):
                return
        raise LeaseLost()

    def _fresh(self, now: datetime) -> bool:
        return (
            self._checked_at is not None
            and now - self._checked_at < self.config.cancel_check_interval
        )

    def _renew_if_needed(self, budget: timedelta) -> None:
        now = self.clock.now()
        until = self.lease_end() or now
        needed = budget + self.config.safety_margin
        fresh = self._fresh(now)
        must_cover = now + needed  # the lease must outlive this step's budget...
        target = now + max(self.config.lease, needed)  # ...and is renewed a full lease
        remaining = self.remaining()
        if remaining is not None:
            # The invocation cannot outlive its deadline: a longer lease would only delay
            # the takeover after a crash.
            deadline = now + timedelta(seconds=remaining) + self.config.deadline_overrun
            must_cover, target = min(must_cover, deadline), min(target, deadline)
        if until >= must_cover and fresh:
            return
        end = max(until, target)
        changes = lease_changes(self.run, end, self.config.clock_skew)
        changes.update(self.progress_changes())  # a renewal is a write the run makes anyway
        try:
            self.run = self.ledger.update_run(self.run.run_id, self.guard(), changes)
        except ConditionFailed as e:
            raise LeaseLost() from e
        self._checked_at = now
        if self.run.cancel_requested and not self.compensating:
            raise RunCanceled(self.run.cancel_reason or "canceled")

    def vouched(self, sent: datetime, budget: timedelta) -> None:
        """A fenced write that required no cancel request (an at-most-once mark), sent
        at ``sent``, succeeded: the run had no cancel when it was evaluated, at ``sent``
        or later. That counts as a look at the run, and like any look it vouches for a
        body only while fresh: an answer that came back past ``cancel_check_interval``
        is looked at again (``ensure_lease``), which raises ``RunCanceled`` on a cancel
        that landed meanwhile."""
        if self._checked_at is None or sent > self._checked_at:
            self._checked_at = sent
        self.ensure_lease(budget)

    def check_lease_alive(self) -> None:
        """``LeaseLost`` when the lease has ended by this worker's clock (it stalled)."""
        end = self.lease_end()
        if end is None or self.clock.now() > end:
            raise LeaseLost()

    def lease_end(self) -> datetime | None:
        """The lease's end as a datetime, parsed once per lease (checked on every step)."""
        text = self.run.lease_until
        cached_text, cached_end = self._lease_cache
        if text == cached_text:
            return cached_end
        end = parse_time(text) if text else None
        # One assignment, not two: a step body may read it while a batch's other branch
        # renews the lease (``durable.engine.turns``).
        self._lease_cache = (text, end)
        return end

    def count_body(self) -> None:
        self._executed += 1
