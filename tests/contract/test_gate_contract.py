"""Ledger contract, part five: flow-control gates (``durable.core.flow``), one item each,
written whole and only over the version that was read."""

from __future__ import annotations

from typing import Any

from durable.core.flow import GateState


def test_a_gate_not_written_yet_reads_empty(ledger: Any) -> None:
    assert ledger.read_gate("C#sync#acme") == GateState()


def test_a_gate_is_written_over_the_version_read_and_only_once(ledger: Any) -> None:
    first = GateState(
        holders=("RUN1",), queue=("RUN2", "RUN3"), booked=("2026-12-04T12:00:00.000Z",)
    )
    assert ledger.write_gate("C#sync#acme", first) is True
    stored = ledger.read_gate("C#sync#acme")
    assert stored == GateState(first.holders, first.queue, first.booked, version=1)
    # a second writer that decided from the same (empty) read loses, and writes nothing
    assert ledger.write_gate("C#sync#acme", GateState(holders=("RUN9",))) is False
    nxt = GateState(holders=("RUN1", "RUN2"), queue=("RUN3",), version=1)
    assert ledger.write_gate("C#sync#acme", nxt) is True
    assert ledger.write_gate("C#sync#acme", GateState(holders=(), version=1)) is False
    assert ledger.read_gate("C#sync#acme") == GateState(("RUN1", "RUN2"), ("RUN3",), (), 2)
    # emptied lists read back empty; gates are separate items
    assert ledger.write_gate("C#sync#acme", GateState(version=2)) is True
    assert ledger.read_gate("C#sync#acme") == GateState(version=3)
    assert ledger.read_gate("C#sync#other") == GateState()
