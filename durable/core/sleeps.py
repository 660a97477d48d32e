"""A sleep that suspends the run is recorded on the run item, and ends by the claim that
wakes it: no step item, no transaction.

Why: a sleep used to cost two fenced transactions (its WAITING record, a step put plus a
check of the run item, before the suspension; its DONE record after the wake-up), 4 write
units of a run's ~30. Both writes restated what the run item's own writes already say:

- the suspension is one conditional write of the run item, fenced by the lease; the wake
  time written *with* it (``RunRecord.sleeps``: position -> entry) costs nothing more,
  is fenced by the same condition, and cannot exist without it: a worker that lost its
  lease writes neither;
- the claim that resumes the run is another fenced write of the run item, and stamps its
  time (``RunRecord.woke_at``; ``durable.core.leases.woke_stamp``: not moved back by a
  claimer whose clock is behind by less than the clock-skew allowance). A sleep whose
  wake time is not later than that stamp is over: the worker that claimed saw the time
  pass, holding the lease. A zombie cannot stamp (its claim fails).

Every reader (both ledgers' ``load``, a warm container's cached view, the engine) turns
the entries back into the records they stand for with ``with_sleeps``, so the replay, the
console, the monitors and a fork see the history they always saw: WAITING until the
stamp passes the wake time, DONE after. A sleep that ends inside an invocation (a claim
that came before its wake time, then a short in-process wait) writes its DONE record as
a step item, fenced, as before; that item wins over the entry.

Only a sleep of the top-level code is kept (``Execution.sleep_until``): its suspension
follows at once, so nothing runs between the sleep and the write that records it. A
branch's sleep (a parallel, a map, an async task) parks while the rest of the run goes
on, through hand-offs and crashes that would lose an unwritten entry: it is a step item
as before. The map keeps every sleep the run slept this way (a sleep that ended is only
recorded there): at most ``MAX_ENTRIES``, beyond which a suspension first writes the
oldest ended ones as step items (``Execution.kept_sleeps``), so a run that sleeps in a
loop does not grow its run item past the kilobyte each of its writes pays for.

A worker of a version before this layout does not read the map (it would sleep such a
sleep again): a stack turns the writing on only once every function reads it
(``Settings.sleeps_on_run``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from durable.core.model import RunRecord, StepKind, StepRecord, StepStatus

SleepEntry = dict[str, Any]  # {"name", "wake_at", "at" (when recorded), "fence"}

# Entries a run item keeps at most, each about 90 bytes: a run item of a tiny input is
# about 550 bytes, and 700 with the usage it records; two entries keep it within the one
# kilobyte that one write unit pays for. (Only a top-level sleep is kept: one of them
# waits at a time, the others ended.)
MAX_ENTRIES = 2
# A sleep whose name is longer is recorded as a step item, as before: an entry stays small.
MAX_NAME = 24


def keepable(name: object) -> bool:
    """Whether a sleep of this name may be kept in the run item: a text of at most
    ``MAX_NAME`` characters (a name of another type is recorded as a step item, as it
    always was)."""
    return isinstance(name, str) and len(name) <= MAX_NAME


def sleep_entry(rec: StepRecord) -> SleepEntry:
    """What the run item keeps of a sleep: enough to rebuild its record."""
    return {"name": rec.name, "wake_at": rec.wake_at, "at": rec.updated_at, "fence": rec.fence}


def sleep_over(run: RunRecord, wake_at: str) -> bool:
    """A sleep kept on ``run`` is over once a claim stamped a time not before its wake."""
    return run.woke_at is not None and wake_at <= run.woke_at


def kept_sleeps(
    run: RunRecord, steps: Mapping[str, StepRecord], positions: Iterable[str]
) -> dict[str, SleepEntry]:
    """The map a suspension writes: for each of ``positions`` (the sleeps this run keeps
    on its run item), the entry ``run`` holds, or a new one from its WAITING record (a
    sleep this invocation recorded)."""
    entries: dict[str, SleepEntry] = {}
    held = run.sleeps or {}
    for position in sorted(positions):
        if position in held:
            entries[position] = dict(held[position])
            continue
        rec = steps.get(position)
        if rec is not None and rec.kind == StepKind.SLEEP and rec.wake_at is not None:
            entries[position] = sleep_entry(rec)
    return entries


def overflow(entries: Mapping[str, SleepEntry], steps: Mapping[str, StepRecord]) -> list[str]:
    """The positions to write as step items so that at most ``MAX_ENTRIES`` stay: the
    oldest sleeps that are over (one still waiting stays: it is woken from the map)."""
    excess = len(entries) - MAX_ENTRIES
    if excess <= 0:
        return []
    ended = [p for p in sorted(entries) if steps[p].status == StepStatus.DONE]
    return ended[:excess]


def with_sleeps(run: RunRecord, steps: dict[str, StepRecord]) -> dict[str, StepRecord]:
    """``steps`` with the record each sleep kept on ``run`` stands for: WAITING, or DONE
    once a claim's stamp passed its wake time (``sleep_over``). A final step item at that
    position stands (an end written as a step item); a pending record there is an older
    view of the same sleep, and an item written before this run was created is an earlier
    run's leftover under the same id: the entry replaces both. Changes ``steps`` in place
    and returns it; applying it twice changes nothing."""
    for position, entry in (run.sleeps or {}).items():
        current = steps.get(position)
        leftover = (
            current is not None and run.forked_from is None and current.updated_at < run.created_at
        )
        if current is not None and current.status.final and not leftover:
            continue
        wake_at = str(entry["wake_at"])
        over = sleep_over(run, wake_at)
        steps[position] = StepRecord(
            run_id=run.run_id,
            position=position,
            name=str(entry["name"]),
            kind=StepKind.SLEEP,
            status=StepStatus.DONE if over else StepStatus.WAITING,
            updated_at=wake_at if over else str(entry["at"]),
            wake_at=wake_at,
            fence=int(entry.get("fence", 0)),
        )
    return steps


def sleeps_recorded_by(run: RunRecord, fence: int) -> list[StepRecord]:
    """The waiting sleeps of ``run`` recorded under lease ``fence``: those a suspension by
    that lease's worker wrote for the first time (each later suspension writes the map
    again), for observers of the writes."""
    records = with_sleeps(run, {})
    return [
        records[p]
        for p in sorted(records)
        if records[p].fence == fence and records[p].status == StepStatus.WAITING
    ]
