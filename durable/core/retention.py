"""After retention: an expired run leaves nothing, and an id that comes back starts clean.

DynamoDB's TTL deletes a finished run's item ``retention`` after it ended; the purge fed
by the table's stream (``durable.aws.purge_handler``) then deletes the steps and signals it
left, except those carrying a TTL of their own (a declared lifetime,
``durable.core.lifetime``), which TTL deletes too. A run id can come back: a keyed start
derives it from its key, so the same key after expiry starts a new run under the same
id, possibly before the purge has run (or after it gave up to its dead-letter queue).
Every record of a run is written after the run was created, so anything written well
before that is a leftover: the engine purges leftovers before replaying, and callbacks
and keyed signals refuse to take a leftover for the current run's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import lru_cache

from durable.core.ids import time_token
from durable.core.model import RunHistory, RunRecord, format_time, parse_time
from durable.core.ports import Ledger

log = logging.getLogger("durable.retention")

# Records written this long before their run's creation belong to an earlier run of the
# same id. Allows for clocks that differ between machines; far below any retention
# (``EngineConfig`` refuses a retention under twice this).
LEFTOVER_MARGIN = timedelta(hours=1)


def incarnation(run: RunRecord) -> str:
    """Which run of its id this is: its creation time in ten sortable base-32 characters.
    Part of every key that must differ between two runs of one id (step idempotency
    keys, a continue-as-new successor's id)."""
    return _incarnation(run.created_at)


@lru_cache(maxsize=1024)  # once per executed step otherwise: parsing costs microseconds
def _incarnation(created_at: str) -> str:
    return time_token(parse_time(created_at))


def leftover_cutoff(run: RunRecord) -> str:
    """Records of ``run_id`` written before this are not ``run``'s."""
    return format_time(parse_time(run.created_at) - LEFTOVER_MARGIN)


def without_leftovers(ledger: Ledger, history: RunHistory | None) -> RunHistory | None:
    """``history`` without what an earlier run of the same id left (purged, then
    reloaded). Forked runs are exempt: their copied steps are older by design, under a
    fresh id that is never reused."""
    if history is None or history.run.forked_from is not None:
        return history
    cutoff = leftover_cutoff(history.run)
    if not any(step.updated_at < cutoff for step in history.steps.values()) and not any(
        signal.received_at < cutoff for signal in history.signals
    ):
        return history
    purged = ledger.purge_leftovers(history.run.run_id, before=cutoff)
    log.warning(
        "run %s reuses the id of an expired run: purged %d leftover items",
        history.run.run_id,
        purged,
    )
    return ledger.load(history.run.run_id)


def nothing_recorded_yet(run: RunRecord) -> bool:
    """Whether the partition of ``run``, just claimed, can hold nothing but its run item,
    so the worker may skip reading it (one query less for every run's first invocation).

    Records under a run's id come from: its own workers (none before its first claim:
    ``fence`` is 1 only on the first claim), outside events (each counted in ``inbox``
    in the same atomic write), a fork (``forked_from``: copied steps), and an earlier run
    of the same id (leftovers: only a keyed start, ``idempotency_key``, reuses an id; a
    fresh id is a ULID). Anything that lands after the claim bumps ``inbox`` past the
    count the claim read, so the suspension check reloads, as it would after a load.
    """
    return (
        run.fence == 1
        and run.inbox == 0
        and run.idempotency_key is None
        and run.forked_from is None
    )


def visible_history(history: RunHistory | None) -> RunHistory | None:
    """``history`` as a reader should see it: without what an earlier run of the same id
    left (nothing is purged here; a read never writes)."""
    if history is None or history.run.forked_from is not None:
        return history
    cutoff = leftover_cutoff(history.run)
    return RunHistory(
        history.run,
        {p: step for p, step in history.steps.items() if step.updated_at >= cutoff},
        [signal for signal in history.signals if signal.received_at >= cutoff],
    )


def purge_expired(
    ledger: Ledger,
    run_id: str,
    now: datetime,
    *,
    current: RunRecord | None,
    purge_payloads: Callable[..., int] | None = None,
) -> int:
    """Delete the steps and signals an expired run left (TTL deleted only its item).

    Items written within ``LEFTOVER_MARGIN`` of ``now`` stay, and so does anything of a
    new run that took the same id meanwhile (it was created after the expired one ended).
    A live fork is left alone (its copied steps are older by design). ``current`` is the
    run item under that id now (None once TTL deleted it), read by the caller without its
    values. ``purge_payloads`` deletes the run's large values written before the same
    cutoff (``durable.core.claim_check``): only this purge deletes them.
    """
    if current is not None and current.forked_from is not None:
        return 0
    cutoff = format_time(now - LEFTOVER_MARGIN)
    if current is not None:
        cutoff = min(cutoff, leftover_cutoff(current))
    # What carries a TTL of its own (a declared lifetime) is left to TTL, which deletes it
    # without a write unit (``durable.core.lifetime``); the purge deletes the rest.
    purged = ledger.purge_leftovers(run_id, before=cutoff, keep_expiring=True)
    if purge_payloads is not None:
        purged += purge_payloads(run_id, before=cutoff)
    return purged
