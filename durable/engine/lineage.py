"""A run's chain: the runs ``ctx.continue_as_new`` links, read as the one run they are.

A run that continues as new ends SUCCEEDED with the output ``{"continued_as_new": <id>}``
and its successor (a fresh id, ``continued_from`` naming it) goes on with the work. Whoever
holds a handle to the first run (a parent attached to a keyed run, a schedule's overlap
rule, ``LocalRunner.result``, a signal sent by the old id) means the work, not the link:
its outcome is the outcome of the run that ends the chain.

The marker alone proves nothing: a workflow may return that very dict. A link is followed
only when the run SUCCEEDED with the marker *and* the run it names exists and says it
continues this one (``continued_from``), which no run a workflow returns can fake: a
successor's id is a fresh ULID its predecessor's final write created. Every walk is
bounded (``MAX_HOPS``); a caller that can keep its place (an attached parent's record)
goes on from the furthest run it reached.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from durable.core.flow import GateState
from durable.core.model import RunRecord, RunStatus

if TYPE_CHECKING:
    from durable.core.ports import Ledger

log = logging.getLogger("durable.lineage")

MARKER = "continued_as_new"
# The one other field a continuation's output may carry: how many unconsumed signals it
# handed to its successor (``durable.engine.events.hand_over_signals``), when any.
CARRIED = "carried_signals"
# Runs one walk reads at most. A looping chain of an hourly job reaches this after four
# days; a reader that keeps its place goes on from there on its next look.
MAX_HOPS = 100

GetRun = Callable[[str], RunRecord | None]


def marker_output(successor_id: str, carried: int = 0) -> dict[str, object]:
    """The output of a run that continued as new into ``successor_id``."""
    out: dict[str, object] = {MARKER: successor_id}
    if carried:
        out[CARRIED] = carried
    return out


def _marker(run: RunRecord) -> dict[str, object] | None:
    if run.status != RunStatus.SUCCEEDED or not run.output or MARKER not in run.output:
        return None  # the cheap test first: most outputs never mention it
    try:
        value = json.loads(run.output)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get(MARKER), str):
        return None
    if set(value) - {MARKER, CARRIED}:
        return None
    carried = value.get(CARRIED, 0)
    if isinstance(carried, bool) or not isinstance(carried, int):
        return None
    return value


def named_successor(run: RunRecord) -> str | None:
    """The id a SUCCEEDED run's output names as its successor (unchecked), or None."""
    marker = _marker(run)
    return None if marker is None else str(marker[MARKER])


def carried_signals(run: RunRecord) -> int:
    """How many unconsumed signals ``run`` handed to its successor when it continued."""
    marker = _marker(run)
    value = 0 if marker is None else marker.get(CARRIED, 0)
    return value if isinstance(value, int) else 0


def successor(get_run: GetRun, run: RunRecord) -> RunRecord | None:
    """The run ``run`` continued as new into, when it did: None for any other run (one
    that returned the marker's shape itself, or whose successor's retention ended)."""
    named = named_successor(run)
    if named is None:
        return None
    found = get_run(named)
    if found is None or found.continued_from != run.run_id:
        return None
    return found


@dataclass(frozen=True, slots=True)
class Reached:
    """How far a walk along a chain got: ``run`` is the chain's end when ``whole``
    (it did not continue as new: running, or ended with its own outcome); otherwise the
    walk stopped at ``MAX_HOPS`` on a run that did continue, to go on from there."""

    run: RunRecord
    whole: bool


def follow(get_run: GetRun, run: RunRecord, max_hops: int = MAX_HOPS) -> Reached:
    """Walk from ``run`` to the run that ends its chain, reading at most ``max_hops``."""
    current = run
    for _ in range(max_hops):
        nxt = successor(get_run, current)
        if nxt is None:
            return Reached(current, True)
        current = nxt
    return Reached(current, successor(get_run, current) is None)


def chain_end(get_run: GetRun, run: RunRecord, max_hops: int = MAX_HOPS) -> RunRecord | None:
    """The run whose outcome is ``run``'s: ``run`` itself unless it continued as new,
    else the end of its chain (still going, or ended). None when the chain is longer than
    ``max_hops``: a reader without a place to keep walks again from ``follow``'s run."""
    reached = follow(get_run, run, max_hops)
    return reached.run if reached.whole else None


# --- a schedule's one slot ------------------------------------------------------------


def is_schedule_gate(gate: str | None) -> bool:
    """Whether ``gate`` is a buffer_one schedule's one-slot gate (``schedules.schedule_gate``),
    the only gate a caller gives a run rather than its workflow's limits."""
    return gate is not None and gate.startswith("S#")


def handed_over(state: GateState, old: str, new: str) -> GateState | None:
    """The gate with ``new`` holding ``old``'s slot, in its place (None: ``old`` holds
    none, or ``new`` already does)."""
    if old not in state.holders or new in state.holders:
        return None
    holders = tuple(new if held == old else held for held in state.holders)
    return replace(state, holders=holders, queue=tuple(r for r in state.queue if r != new))


def hand_over_slot(ledger: Ledger, gate: str, old: str, new: str) -> bool:
    """Give ``old``'s slot in ``gate`` to its successor ``new`` (a conditional write,
    read again on a lost race). Best effort, like leaving a gate: if it fails, ``old``'s
    slot is freed as an ended run's is (``Admission.leave``, or a waiter's look at stale
    holders), and ``new`` waits in line like any start.

    True when ``new`` got the slot but had ended by then: the caller leaves the gate for
    it. A cancel can end the successor before the hand-over (it is PENDING, nobody holds
    it): that cancel left a gate ``new`` was not in yet, so nothing else would free the
    slot and wake the line until a waiter's next look. Reading ``new`` after the write
    closes the gap: a cancel that ends it later finds it holding the slot, and leaves."""
    try:
        for _ in range(10):
            state = ledger.read_gate(gate)
            new_state = handed_over(state, old, new)
            if new_state is None:
                return False
            if ledger.write_gate(gate, new_state):
                after = ledger.get_run(new)
                return after is None or after.terminal
    except Exception:
        log.warning("run %s could not hand its slot in %s to %s", old, gate, new, exc_info=True)
    return False
