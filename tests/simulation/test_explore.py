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

# Downstream symptoms last: they fire with almost any other violation.
RANK = ["events_consumed", "runs_finish", "no_stuck_runs"]


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
    # The most telling invariant first: a run that cannot finish also leaves events
    # unconsumed; the cause is what to read.
    ranked = sorted(failures, key=lambda n: (RANK.index(n) + 1 if n in RANK else 0, n))
    by_seed: dict[int, Result] = {}
    for name in ranked:
        by_seed.setdefault(failures[name].seed, failures[name])
    messages = []
    for i, (seed, result) in enumerate(by_seed.items()):
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
    names = ", ".join(f"{n} (seed {failures[n].seed})" for n in ranked)
    pytest.fail(f"invariants violated: {names}\n\n" + "\n\n".join(messages), pytrace=False)
