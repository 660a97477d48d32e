"""Both ledgers claim alike (issue 35's claim: the kept due time, the stamp ``woke_at``):
over every combination of the stamp (absent, behind, equal, ahead within the skew
allowance, beyond it), the due time (absent, early, at the takeover moment, later), the
lease (free, the claimer's own, another's live or expired) and the status, the memory
ledger and DynamoDB (moto in-process: its fast path, a refused fast path then the
exact-state claim, a takeover) return and store the same run record. Written by a
review of this change, kept as a regression test."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.memory import MemoryLedger
from durable.core.model import RunStatus
from tests.support.records import make_run, t

WOKE = [None, 90, 100, 103, 106]  # the claim's now is t100, its skew allowance 5 s
DUE = [None, 50, 165, 500]  # its takeover moment is t165
LEASE = [None, ("me", 400), ("other", 94), ("other", 96)]
STATUS = [RunStatus.WAITING, RunStatus.COMPENSATING, RunStatus.RUNNING]


def test_both_ledgers_claim_alike(dynamo: tuple[Any, str]) -> None:
    client, table = dynamo
    differences = []
    cases = list(itertools.product(WOKE, DUE, LEASE, STATUS))
    for n, (woke, due, lease, status) in enumerate(cases):
        run_id = f"R{n:04d}"
        run = make_run(
            run_id,
            status=status,
            due_at=None if due is None else t(due),
            woke_at=None if woke is None else t(woke),
            lease_owner=None if lease is None else lease[0],
            lease_until=None if lease is None else t(lease[1]),
            fence=3,
        )
        results = []
        for ledger in (MemoryLedger(), DynamoLedger(client, table)):
            ledger.create_run(replace(run))
            got = ledger.claim(
                run_id, "me", now=t(100), lease_until=t(160), stale_before=t(95), due_at=t(165)
            )
            results.append((got and (got.took_over, got.run), ledger.get_run(run_id)))
        (m_got, m_stored), (d_got, d_stored) = results
        if m_stored != d_stored or m_got != d_got:
            differences.append((woke, due, lease, status, m_stored, d_stored))
    assert len(cases) == 240 and not differences, differences[:3]
