"""The cost page's provisioned column (issue 48): a run's measured units priced as the
capacity auto scaling keeps for them under a steady load (``benchmarks.provisioned``)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from benchmarks import cost, provisioned
from benchmarks.common import TEMPLATE
from benchmarks.provisioned import SteadyLoad, dollars_per_run
from benchmarks.write_units import UnitCounter
from durable.adapters.schema import load_template

WCU_HOUR, RCU_HOUR = 0.00065, 0.00013
HOLDERS = ["table", "due-index", "list-index"]
LOAD = SteadyLoad(runs_per_second=100.0, utilization=0.7, min_read=1.0, min_write=1.0)


def price(writes: dict[str, float], reads: dict[str, float], load: SteadyLoad = LOAD) -> float:
    return dollars_per_run(writes, reads, HOLDERS, load, wcu_hour=WCU_HOUR, rcu_hour=RCU_HOUR)


def test_busy_capacity_costs_the_units_over_the_utilization() -> None:
    # every holder far above its minimum: a unit a second, for an hour, is one unit-hour
    writes = {"table": 15.0, "due-index": 4.0, "list-index": 6.0}
    reads = {"table": 6.0, "due-index": 1.0, "list-index": 1.0}
    expected = (25 * WCU_HOUR + 8 * RCU_HOUR) / 3600 / 0.7
    assert price(writes, reads) == pytest.approx(expected)


def test_a_lower_utilization_costs_more_in_proportion() -> None:
    writes, reads = {"table": 20.0, "due-index": 5.0, "list-index": 5.0}, {"table": 5.0}
    busy = replace(LOAD, min_read=0.0)  # no floor: the figure is all tracked capacity
    at_70 = price(writes, reads, busy)
    assert price(writes, reads, replace(busy, utilization=0.35)) == pytest.approx(2 * at_70)
    assert price(writes, reads, replace(busy, utilization=0.9)) == pytest.approx(at_70 * 0.7 / 0.9)


def test_an_idle_index_still_costs_its_minimum_spread_over_the_runs() -> None:
    writes, reads = {"table": 10.0}, {"table": 2.0}
    quiet = replace(LOAD, runs_per_second=0.5, min_read=5.0, min_write=5.0)
    floors = (2 * 5 * WCU_HOUR + 2 * 5 * RCU_HOUR) / (0.5 * 3600)  # the two idle indexes
    tracked = max(5.0, 10 * 0.5 / 0.7) * WCU_HOUR + max(5.0, 2 * 0.5 / 0.7) * RCU_HOUR
    assert price(writes, reads, quiet) == pytest.approx(floors + tracked / (0.5 * 3600))
    # ten times the runs: the same floors weigh ten times less on each run
    busier = price(writes, reads, replace(quiet, runs_per_second=5.0))
    assert busier < price(writes, reads, quiet)


def test_units_where_nothing_is_provisioned_are_refused() -> None:
    with pytest.raises(ValueError, match="new-index"):
        price({"new-index": 1.0}, {})


def test_the_page_prices_what_the_template_deploys() -> None:
    parameters = load_template(TEMPLATE)["Parameters"]
    load = provisioned.template_load(4.0)
    assert load.utilization == parameters["TargetUtilization"]["Default"] / 100
    assert load.min_read == parameters["MinReadCapacity"]["Default"]
    assert load.min_write == parameters["MinWriteCapacity"]["Default"]
    holders = provisioned.capacity_holders()
    assert holders[0] == "table" and holders[-1] == "IdempotencyTable"
    assert {"due-index", "list-index", "attention-index"} <= set(holders)


def _counted(writes: dict[str, float], reads: dict[str, float], purge: int) -> cost.Counted:
    units = UnitCounter(
        SimpleNamespace(
            meta=SimpleNamespace(events=SimpleNamespace(register=lambda *_, **__: None))
        )
    )
    units.writes, units.reads = dict(writes), dict(reads)
    return cost.Counted(units, invocations=2, timers=1, purge_writes=purge)


def test_the_column_swaps_the_on_demand_units_for_capacity_and_keeps_the_rest() -> None:
    # the purge's deletes are the table's units (step and signal items carry no index key)
    purged = _counted({"table": 15.0, "due-index": 4.0, "list-index": 6.0}, {"table": 6.0}, 10)
    written = _counted({"table": 25.0, "due-index": 4.0, "list-index": 6.0}, {"table": 6.0}, 0)
    assert cost.ours_provisioned(purged) == pytest.approx(cost.ours_provisioned(written))
    rest = cost.ours(purged) - cost.on_demand_units(purged)  # Lambda and Scheduler
    capacity = cost.ours_provisioned(purged) - rest
    # 35 write units at 4 runs a second and 70%: 200 WCU, far above the minimum
    assert capacity > 35 / 0.7 * cost.PRICES["dynamodb_wcu_hour"] / 3600
    assert capacity < cost.on_demand_units(purged) / 2  # several times cheaper when steady
