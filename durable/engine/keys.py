"""Which run a key of one's own names now, and the key reuse policy (``reuse=``).

A key names one run for its retention by default (``reuse="never"``): its id is derived
from the workflow and the key, so the conditional create of the run item is the dedupe.
A recurring job (a nightly import keyed by supplier) wants the same key to start a new
run once the previous one has ended (``reuse="after_end"``). The runs a key names over
time are its *incarnations*:

* the first is the id derived from the key, as before (existing keyed runs stay found);
* each next one's id is derived from the key and the run before it
  (``durable.core.ids.next_keyed_run_id``);
* a small item per reused key (a one-slot gate, ``K#<first id>``, written over the
  version read like any gate) holds the incarnation the key names now and the one
  before it. A key never reused has none, and costs one read more than before.

Moving on is two writes, in this order: the slot item first (conditional: two starts
that saw the same run end cannot both move it), then the run's create (conditional: of
the starts that found the slot empty, one creates the run and the others find it). So
at most one run per key is unfinished, and it is the one the slot names: a run is only
ever created in the slot the item names, and the slot moves on only once its run (and
the chain it continued as new into) has ended. A start that moved the slot and died
before the create leaves an empty slot: the next start of the key creates the run there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from durable.core.flow import GateState
from durable.core.ids import next_keyed_run_id, run_id_for_key
from durable.errors import InvalidInput

if TYPE_CHECKING:
    from durable.core.model import RunRecord
    from durable.core.ports import LedgerReads, LedgerWrites
    from durable.engine.engine_parts import Reuse

REUSE: tuple[Reuse, ...] = ("never", "after_end")
# Moves of the slot one start tries before giving up (each lost only to another start of
# the same key that moved it first: then that start's run answers this one).
MAX_MOVES = 5


def check_reuse(reuse: Any) -> Reuse:
    if reuse not in REUSE:
        raise InvalidInput(
            f'reuse is "never" (a key names one run for its retention) or "after_end" (a '
            f"new run once the key's run has ended), not {reuse!r}",
            field="reuse",
        )
    value: Reuse = reuse
    return value


def slot_gate(workflow: str, shown: str) -> str:
    """The name of the item that says which run ``shown`` names now."""
    return f"K#{run_id_for_key(workflow, shown)}"


@dataclass(frozen=True, slots=True)
class KeySlot:
    """Where a key's current incarnation lives: ``run_id`` (created or not yet), and the
    run it follows (None: the first, the id derived from the key)."""

    workflow: str
    shown: str
    run_id: str
    after: str | None
    state: GateState

    def next_id(self) -> str:
        return next_keyed_run_id(self.workflow, self.shown, self.run_id)

    def names(self, run: RunRecord | None) -> bool:
        """Whether ``run`` is a run of this key (an id derived by hash: checked anyway)."""
        return (
            run is not None
            and run.workflow == self.workflow
            and (run.idempotency_key == self.shown)
        )


def read_slot(ledger: LedgerReads, workflow: str, shown: str) -> KeySlot:
    """The slot ``shown`` (a key of one's own, as its runs show it) names now."""
    first = run_id_for_key(workflow, shown)
    assert first is not None  # a key of one's own always names a run
    state = ledger.read_gate(slot_gate(workflow, shown))
    if not state.holders:
        return KeySlot(workflow, shown, first, None, state)
    after = state.holders[1] if len(state.holders) > 1 else None
    return KeySlot(workflow, shown, state.holders[0], after, state)


def move_on(ledger: LedgerWrites, slot: KeySlot) -> bool:
    """Point the key at the incarnation after ``slot``'s (whose run has ended); False
    when another start moved it first (read the slot again)."""
    moved = GateState(holders=(slot.next_id(), slot.run_id), version=slot.state.version)
    return ledger.write_gate(slot_gate(slot.workflow, slot.shown), moved)


def latest_run(ledger: LedgerReads, workflow: str, shown: str) -> RunRecord | None:
    """The run ``shown`` names now: its current incarnation, or the one before while a
    start that moved the slot has not created its run (or died before it did)."""
    slot = read_slot(ledger, workflow, shown)
    run = ledger.get_run(slot.run_id)
    if slot.names(run):
        return run
    if slot.after is not None:
        before = ledger.get_run(slot.after)
        if slot.names(before):
            return before
    return None
