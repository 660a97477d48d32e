"""Every delivery of one fire gets the same verdict (issue 31, hole 7), and what a
"run now" is to the overlap rules (decided here, documented in docs/schedules.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable.engine.events import send_signal
from durable.engine.schedules import fire_key
from durable.errors import StorageError
from tests.unit.test_schedules import T0, World


def _end(w: World, run_id: str) -> None:
    send_signal(w.engine, run_id, "done")
    assert w.engine.resume(run_id, reason="event").result == "succeeded"


def test_a_fire_skipped_for_overlap_stays_skipped_when_delivered_again() -> None:
    """GIVEN F2 of an overlap="skip" schedule skipped while F1's run goes on WHEN Scheduler
    delivers F2 again six minutes later (inside the grace), after F1's run ended THEN it
    starts nothing: a repeat of a fire starts nothing (it started a run)."""
    w = World()
    first = w.fire("sync-crm", T0)
    assert first[0] == "started" and first[1] is not None
    w.engine.resume(first[1])  # goes on: it waits for its signal
    f2 = T0 + timedelta(hours=1)
    w.clock.advance(timedelta(hours=1))
    assert w.fire("sync-crm", f2) == ("skipped_overlap", first[1])
    _end(w, first[1])
    w.clock.advance(timedelta(minutes=6))
    again = w.fire("sync-crm", f2)
    assert again[0] == "duplicate", again
    started = [r for r in w.ledger.list_runs(workflow="sync").items if r.run_id != first[1]]
    assert started == []


def test_a_missed_fire_stays_missed_and_a_started_one_is_its_run() -> None:
    w = World()
    w.clock.advance(timedelta(hours=3))
    assert w.fire("sync-crm", T0)[0] == "skipped_missed"
    assert w.fire("sync-crm", T0)[0] == "duplicate"
    f3 = T0 + timedelta(hours=3)
    started = w.fire("sync-crm", f3)
    assert started[0] == "started" and w.fire("sync-crm", f3) == ("duplicate", started[1])


def test_a_verdict_whose_start_a_crash_cut_short_is_started_by_the_next_delivery() -> None:
    """The verdict is recorded before the run is started: a worker that dies between the
    two leaves a "started" verdict and no run, and the next delivery starts it (once)."""
    w = World()
    real = w.engine.start

    def dies(*args: object, **kwargs: object) -> None:
        raise RuntimeError("worker died")

    w.engine.start = dies  # type: ignore[method-assign, assignment]
    with pytest.raises(RuntimeError):
        w.fire("report", T0)
    w.engine.start = real  # type: ignore[method-assign]
    result, run_id = w.fire("report", T0)
    assert result == "duplicate" and run_id is not None
    run = w.ledger.get_run(run_id)
    assert run is not None and run.idempotency_key == fire_key("report", "2026-12-04T12:00:00.000Z")


def test_a_fire_being_decided_elsewhere_is_retried_not_dropped() -> None:
    """Two deliveries at once: the second finds the verdict claimed and not yet written,
    and fails retryably (Lambda retries it; the claim lapses if its worker died)."""
    w = World()
    key = fire_key("report", "2026-12-04T12:00:00.000Z") + "#verdict"
    now = int(w.clock.now().timestamp())
    assert w.engine.effects.store.begin(key, now + 60, now=now) is None  # the other one
    with pytest.raises(StorageError) as busy:
        w.fire("report", T0)
    assert busy.value.retryable
    w.clock.advance(timedelta(minutes=2))  # its claim lapsed: decided again
    assert w.fire("report", T0)[0] == "started"


def test_a_run_now_counts_for_overlap_though_no_clock_rule_applies_to_it() -> None:
    """Decided: "run now" is outside the clock (no lateness rule, a key of its own, never
    skipped), but its run is the schedule's run: overlap="skip" protects the workflow from
    running twice at once, so a clock fire while it goes on is skipped."""
    w = World()
    w.clock.advance(timedelta(days=3))
    manual = w.fire("sync-crm", T0, manual="req-1")
    assert manual[0] == "started" and manual[1] is not None
    w.engine.resume(manual[1])
    assert w.fire("sync-crm", T0 + timedelta(days=3)) == ("skipped_overlap", manual[1])
    assert w.fire("sync-crm", T0, manual="req-2")[0] == "started"  # asked for: never skipped
