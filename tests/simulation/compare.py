"""Item-by-item comparison of two final ledgers, and of two traces.

Every random value of a schedule is drawn from its seed, so nothing needs normalizing:
run ids, owner ids, nonces and timestamps are the same on both ledgers. Only the order in
which a ledger hands out signals is not part of the contract, so signals are compared in
arrival order.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from durable.core.model import RunHistory

Partition = tuple[Any, dict[str, Any], list[Any]]


def partition(ledger: Any, run_id: str) -> Partition | None:
    history: RunHistory | None = ledger.load(run_id)
    if history is None:
        return None
    signals = sorted(history.signals, key=lambda s: (s.signal_id, s.name))
    return history.run, dict(sorted(history.steps.items())), signals


def _diff(where: str, a: Any, b: Any) -> list[str]:
    if a == b:
        return []
    if a is None or b is None or type(a) is not type(b):
        return [f"{where}: {a!r} != {b!r}"]
    return [
        f"{where}.{f.name}: {getattr(a, f.name)!r} != {getattr(b, f.name)!r}"
        for f in fields(a)
        if getattr(a, f.name) != getattr(b, f.name)
    ]


def ledger_differences(a: Any, b: Any, run_ids: list[str]) -> list[str]:
    """What differs between ledgers ``a`` and ``b`` for ``run_ids`` (empty: identical)."""
    out: list[str] = []
    for run_id in run_ids:
        pa, pb = partition(a, run_id), partition(b, run_id)
        if pa is None or pb is None:
            if pa != pb:
                out.append(f"run {run_id}: present in only one ledger")
            continue
        out += _diff(f"run {run_id}", pa[0], pb[0])
        for position in sorted(set(pa[1]) | set(pb[1])):
            out += _diff(f"step {run_id}/{position}", pa[1].get(position), pb[1].get(position))
        if len(pa[2]) != len(pb[2]):
            out.append(f"signals of {run_id}: {len(pa[2])} != {len(pb[2])}")
        for sa, sb in zip(pa[2], pb[2], strict=False):
            out += _diff(f"signal {run_id}/{sa.signal_id}", sa, sb)
    return out


def first_divergence(a: list[str], b: list[str]) -> str | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"decision {i + 1}: {x!r} != {y!r}"
    if len(a) != len(b):
        return f"one trace is longer: {len(a)} != {len(b)} decisions"
    return None
