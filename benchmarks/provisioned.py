"""What a run's DynamoDB units cost on provisioned capacity under a steady load (issue 48).

On-demand bills every request unit. Provisioned capacity bills capacity units by the hour,
used or not, at a lower rate per unit. Under a steady load, target-tracking auto scaling
(the template's ``TableBillingMode=PROVISIONED``) keeps the capacity of the table and of
each index at what it consumes divided by the target utilization, and never below the
minimum. So at ``R`` runs a second, a holder (the table, or one index) on which a run
consumes ``w`` write units needs ``max(minimum, w * R / utilization)`` write capacity
units every hour, and the same for reads; the hour's bill over the hour's runs is the
price of one run. The units come from the measured run (``benchmarks.cost``), so the
figure follows every change to what a run writes.

Held steady means the load the capacity tracks does not swing within the minutes auto
scaling takes to follow it (it scales out after two minutes over the target). A daily
cycle is still steady at this scale; a burst of runs is not, and what it costs
(throttled requests, retried) is in docs/operations.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from benchmarks.common import TEMPLATE
from durable.adapters.schema import IDEMPOTENCY, LEDGER, load_template

# benchmarks.write_units.UnitCounter counts every table's own units as "table" (the ledger's:
# no run of the cost page uses the idempotency table) and each index's under its name.
TABLE = "table"
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class SteadyLoad:
    """A steady rate of runs and what auto scaling keeps the capacity at."""

    runs_per_second: float
    utilization: float  # the share of capacity in use: TargetUtilization / 100
    min_read: float  # capacity units each table and index keeps at least
    min_write: float


def template_load(runs_per_second: float) -> SteadyLoad:
    """The load at the template's defaults (TargetUtilization, MinReadCapacity,
    MinWriteCapacity), so that the page prices what a deploy gets."""
    parameters = load_template(TEMPLATE)["Parameters"]
    return SteadyLoad(
        runs_per_second=runs_per_second,
        utilization=float(parameters["TargetUtilization"]["Default"]) / 100,
        min_read=float(parameters["MinReadCapacity"]["Default"]),
        min_write=float(parameters["MinWriteCapacity"]["Default"]),
    )


def capacity_holders() -> list[str]:
    """Everything the template provisions: the ledger table, each of its indexes, and the
    idempotency table (which keeps its minimum here)."""
    resources = load_template(TEMPLATE)["Resources"]
    indexes = resources[LEDGER]["Properties"].get("GlobalSecondaryIndexes", [])
    return [TABLE, *(index["IndexName"] for index in indexes), IDEMPOTENCY]


def dollars_per_run(
    writes: Mapping[str, float],
    reads: Mapping[str, float],
    holders: Iterable[str],
    load: SteadyLoad,
    *,
    wcu_hour: float,
    rcu_hour: float,
) -> float:
    """The capacity one run pays for: each holder's capacity for an hour of the load,
    over the runs of that hour. ``writes`` and ``reads``: units one run consumes, by holder."""
    unknown = (set(writes) | set(reads)) - set(holders)
    if unknown:  # a run's units where no capacity is priced would vanish from the bill
        raise ValueError(f"units on {sorted(unknown)}, which the template does not provision")
    rate = load.runs_per_second
    hourly = 0.0
    for holder in holders:
        write_capacity = max(load.min_write, writes.get(holder, 0.0) * rate / load.utilization)
        read_capacity = max(load.min_read, reads.get(holder, 0.0) * rate / load.utilization)
        hourly += write_capacity * wcu_hour + read_capacity * rcu_hour
    return hourly / (rate * SECONDS_PER_HOUR)
