"""A declared lifetime: every item of a run carries its TTL from its first write.

DynamoDB's Time to Live deletes an item without consuming write units; the purge fed by
the table's stream deletes one item per write unit. A workflow that declares
``max_lifetime`` (``@app.workflow(max_lifetime=timedelta(days=7))``) has every item of
its runs written with ``purge_at`` = the run's creation + that lifetime + the retention
(``items_purge_at``), so nothing of it is left for the purge to delete.

The rule every such TTL relies on: **no item of a live run may expire.** It holds
because a run's items all carry its own TTL, fixed when the run is created, and the run
ends (or is failed) before it:

- The engine fails a run that wakes past its lifetime's end (``lifetime_end``), refuses
  any wait that would end after it, and a suspension without a wake-up time of its own
  is made due at that end (``wake_by_lifetime``), so the sweeper wakes it there and the
  claim fails it. The retention (at least 2 hours) is the margin for a wake-up that
  comes late.
- The run item of a live run carries no ``purge_at`` at all; when the run ends it
  gets ``ended_purge_at``: the end plus the retention, never later than its items'
  TTL, so a finished run is never shown without the items it had.
- Every other run is a new run with its own creation and its own TTL: a successor
  (continue-as-new), a fork (its copied steps are written with the fork's TTL), a
  keyed restart (a new run under the same id: what the earlier one left has the older
  TTL and is a leftover, purged before the new run replays, ``durable.core.retention``).
- A retry reopens the same run: its creation, lifetime and TTL do not change, and a
  retry past the lifetime's end is refused, as for every run.

Runs of workflows without a declared lifetime keep ``items_purge_at`` None: their
items carry no TTL, and the purge deletes them once TTL deleted the run item.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from durable.core.model import RunRecord, parse_time

# A suspended run with nothing to wake it before its lifetime's end is due this long
# after it: a claim at that moment is past the end, so it fails the run rather than
# park it again (the check is ``now > lifetime_end``).
PAST_THE_END = timedelta(seconds=1)


def items_purge_at(created_at: str, lifetime: timedelta | None, retention: timedelta) -> int | None:
    """The TTL (epoch seconds) every item of a run created at ``created_at`` carries, for a
    workflow declaring ``lifetime``; None without one (the purge deletes its items)."""
    if lifetime is None:
        return None
    return _ceil_epoch(parse_time(created_at) + lifetime + retention)


def lifetime_end(run: RunRecord, max_run_lifetime: timedelta, retention: timedelta) -> datetime:
    """When ``run`` stops: its creation plus the configured ``max_run_lifetime``, or sooner
    where its items expire sooner (a declared lifetime: its TTL less the retention now
    configured, so a retention raised since the run began shortens the run rather than
    let its items expire while it lives)."""
    end = parse_time(run.created_at) + max_run_lifetime
    if run.items_purge_at is None:
        return end
    return min(end, datetime.fromtimestamp(run.items_purge_at, UTC) - retention)


def items_may_be_gone(run: RunRecord, now: str) -> bool:
    """Whether Time to Live may have deleted items of ``run`` by ``now``: its declared
    lifetime's TTL has passed. A run woken that late is failed by the claim that finds it
    (``lifetime_end``), but its records are no longer what an earlier read of them holds
    (``durable.core.history_cache``)."""
    return run.items_purge_at is not None and parse_time(now).timestamp() >= run.items_purge_at


def wake_by_lifetime(
    due_at: datetime | None, run: RunRecord, max_run_lifetime: timedelta, retention: timedelta
) -> datetime | None:
    """When a suspension of ``run`` must be woken at the latest: ``due_at``, or for a run
    whose items expire, never later than just past its lifetime's end (a wait without a
    timeout included), so the claim then fails it before its items go."""
    if run.items_purge_at is None:
        return due_at
    bound = lifetime_end(run, max_run_lifetime, retention) + PAST_THE_END
    return bound if due_at is None or due_at > bound else due_at


def ended_purge_at(run: RunRecord, now: datetime, retention: timedelta) -> int:
    """The TTL of ``run``'s item when it ends: the end plus the retention, capped by the
    TTL its other items carry (a finished run is never shown with items gone)."""
    ended = int((now + retention).timestamp())
    return ended if run.items_purge_at is None else min(ended, run.items_purge_at)


def _ceil_epoch(when: datetime) -> int:
    seconds = when.timestamp()
    whole = int(seconds)
    return whole if whole == seconds else whole + 1


# --- large values: the payload bucket's lifecycle ------------------------------------------

# The expiry classes of the payload bucket's lifecycle rules (template.yaml, one rule per
# class, matched by the object's ``durable-expire-days`` tag): S3 counts whole days from an
# object's creation (rounded up to the next midnight UTC), so a lifecycle rule cannot say
# "at this date" and an object takes the smallest class that outlives its run's TTL. Up
# to 3650 days of lifetime plus 3650 of retention.
LIFECYCLE_DAYS = (1, 2, 3, 7, 14, 30, 60, 90, 180, 365, 730, 1095, 1825, 3650, 7300)
LIFECYCLE_TAG = "durable-expire-days"


def lifecycle_days(purge_at: int | None, now: datetime) -> int | None:
    """The lifecycle class of a large value written now for an item whose TTL is
    ``purge_at``: the fewest days (of ``LIFECYCLE_DAYS``) after which S3 may delete it
    without deleting it before that item; None for an item without a TTL (the purge
    deletes its values)."""
    if purge_at is None:
        return None
    needed = (purge_at - now.timestamp()) / 86400
    return next((days for days in LIFECYCLE_DAYS if days >= needed), LIFECYCLE_DAYS[-1])
