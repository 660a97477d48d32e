"""Explore seeded schedules of the whole system for a time budget; check the invariants.

``pytest tests/simulation --seed N`` replays one seed; ``--sim-budget`` sets the budget
(see ``scheduler.py``'s docstring).
"""

from __future__ import annotations

import itertools
import time

import pytest

from tests.simulation.conftest import SimOptions, SimStats
from tests.simulation.explore import Result, report, run_schedule, shrink


def explore(options: SimOptions, stats: SimStats) -> dict[str, Result]:
    """The first failing schedule of each invariant, within the budget."""
    seeds = [options.seed] if options.seed is not None else itertools.count(options.seed_start)
    failures: dict[str, Result] = {}
    started = time.monotonic()
    for seed in seeds:
        if options.seed is None and time.monotonic() - started > options.budget:
            break
        result = run_schedule(seed, skip=options.skip)
        stats.schedules += 1
        stats.calls += result.calls
        stats.seeds.append(seed)
        for name in sorted(result.names):
            failures.setdefault(name, result)
            stats.failing.setdefault(name, seed)
    stats.seconds += time.monotonic() - started
    return failures


def test_explored_schedules_keep_every_invariant(
    sim_options: SimOptions, sim_stats: SimStats
) -> None:
    """GIVEN random workflows, 2-3 workers (one may come back as a zombie), the sweeper,
    timers firing on time, early, twice or never, outside events, crashes and clock jumps
    WHEN seeded schedules are explored for the budget (or only ``--seed``)
    THEN no invariant fires; else each failing seed is printed with a shrunk trace"""
    failures = explore(sim_options, sim_stats)
    if not failures:
        return
    by_seed: dict[int, Result] = {}
    for result in failures.values():
        by_seed.setdefault(result.seed, result)
    messages = []
    for i, (seed, result) in enumerate(sorted(by_seed.items())):
        shrunk = None
        if i < sim_options.max_shrinks:
            decisions = shrink(
                seed,
                result.decisions,
                result.names,
                sim_options.shrink_seconds,
                skip=sim_options.skip,
            )
            shrunk = run_schedule(seed, decisions=decisions, skip=sim_options.skip)
        messages.append(report(result, shrunk))
    names = ", ".join(f"{n} (seed {r.seed})" for n, r in sorted(failures.items()))
    pytest.fail(f"invariants violated: {names}\n\n" + "\n\n".join(messages), pytrace=False)
