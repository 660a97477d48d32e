"""Ledger contract, key reuse (issue 46, item 2): a key reused after its run ended
(``reuse="after_end"``, ``durable.engine.keys``) names one run after another through a
slot item written over the version read, on every ledger. The first run of a key keeps
the id derived from the key, so runs started before reuse existed are found; at most one
run of a key is unfinished, whoever races; lookups by key name the newest."""

from __future__ import annotations

from typing import Any

from durable import App, Context
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker
from durable.core.clock import FakeClock
from durable.core.ids import derived_run_id, next_keyed_run_id
from durable.core.model import RunStatus
from durable.core.ports import RunGuard
from durable.engine.engine import Engine
from durable.engine.keys import move_on, read_slot, slot_gate

KEY = "supplier-42"


def _app() -> App:
    app = App()

    @app.workflow
    def price_import(ctx: Context, supplier: str) -> str:
        return supplier

    return app


def _engine(ledger: Any) -> Engine:
    return Engine(_app(), ledger, MemoryInvoker(), MemoryEffectStore(), clock=FakeClock())


def _end(ledger: Any, run_id: str) -> None:
    """The run's final write, as a worker's would be (claimed, then SUCCEEDED)."""
    run = ledger.get_run(run_id)
    claim = ledger.claim(
        run_id,
        "w1",
        now=run.created_at,
        lease_until="2999-01-01T00:00:00.000Z",
        stale_before=run.created_at,
        due_at="2999-01-01T00:00:00.000Z",
    )
    assert claim is not None
    ledger.update_run(
        run_id,
        RunGuard(fence=claim.run.fence, owner="w1"),
        {"status": RunStatus.SUCCEEDED.value, "output": '"done"', "due_at": None},
    )


def test_a_key_never_reused_has_no_slot_item_and_its_run_keeps_the_derived_id(
    ledger: Any,
) -> None:
    engine = _engine(ledger)
    run = engine.start("price_import", KEY, idempotency_key=KEY)
    assert run.run_id == derived_run_id("price_import", KEY)
    assert ledger.read_gate(slot_gate("price_import", KEY)).version == 0
    found = engine.run_by_key("price_import", KEY)
    assert found is not None and found.run_id == run.run_id


def test_a_reused_key_moves_its_slot_on_and_names_the_newest_run(ledger: Any) -> None:
    engine = _engine(ledger)
    first = engine.start("price_import", KEY, idempotency_key=KEY)  # before any reuse
    _end(ledger, first.run_id)
    second, created = engine.start_or_get(
        "price_import", KEY, idempotency_key=KEY, reuse="after_end"
    )
    assert created and second.run_id == next_keyed_run_id("price_import", KEY, first.run_id)
    slot = read_slot(ledger, "price_import", KEY)
    assert (slot.run_id, slot.after, slot.state.version) == (second.run_id, first.run_id, 1)
    found = engine.run_by_key("price_import", KEY)
    assert found is not None and found.run_id == second.run_id
    assert ledger.get_run(first.run_id).status == RunStatus.SUCCEEDED  # still readable


def test_two_engines_that_saw_the_run_end_move_the_slot_once(ledger: Any) -> None:
    """Both decided from the same read of the slot: the second write loses, and the
    run it would create is the first's."""
    a, b = _engine(ledger), _engine(ledger)
    first = a.start("price_import", KEY, idempotency_key=KEY, reuse="after_end")
    _end(ledger, first.run_id)
    seen = read_slot(ledger, "price_import", KEY)
    assert move_on(ledger, seen) is True
    assert move_on(ledger, seen) is False  # the same read cannot move it twice
    run_a, created_a = a.start_or_get("price_import", KEY, idempotency_key=KEY, reuse="after_end")
    run_b, created_b = b.start_or_get("price_import", KEY, idempotency_key=KEY, reuse="after_end")
    assert (created_a, created_b) == (True, False) and run_a.run_id == run_b.run_id
    assert run_a.run_id == seen.next_id()
