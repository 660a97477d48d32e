"""The sweeper: the backstop that makes every lost trigger late, never lost.

It reads each shard of the due index up to ``now - grace`` (the grace keeps it from
racing EventBridge Scheduler's own firing), claims each entry on the base table (the
index is eventually consistent, and two sweepers may overlap), invokes a worker, and
stops at a cap per sweep. It covers lost schedules, dead owners (due_at = lease_until),
lost hand-offs and starts whose invocation never happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from durable.core.model import format_time

if TYPE_CHECKING:
    from durable.engine.engine_parts import EngineParts

PAGE = 100


@dataclass(frozen=True, slots=True)
class SweepReport:
    seen: int
    invoked: int
    capped: bool


def sweep(engine: EngineParts, now: datetime | None = None) -> SweepReport:
    now = now or engine.clock.now()
    config = engine.config
    before = format_time(now - config.sweep_grace)
    retrigger = format_time(now + config.sweep_retrigger)
    stale_before = format_time(now - config.clock_skew)
    cap = config.sweep_max_invocations
    seen = invoked = 0
    for shard in range(engine.ledger.shards):
        cursor: str | None = None
        while invoked < cap:
            page = engine.ledger.due_runs(
                shard, before=before, limit=min(PAGE, cap - invoked), cursor=cursor
            )
            for run_id, due_at in page.items:
                seen += 1
                if engine.ledger.claim_trigger(
                    run_id, due_at, retrigger, stale_before=stale_before, skew=config.clock_skew
                ):
                    engine.invoke_worker(run_id, "sweep")
                    invoked += 1
            cursor = page.cursor
            if cursor is None:
                break
    return SweepReport(seen=seen, invoked=invoked, capped=invoked >= cap)
