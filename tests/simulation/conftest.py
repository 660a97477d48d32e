"""Options of the simulation (see the docstring of ``tests/simulation/scheduler.py``).

    --seed N              explore only seed N (replays a failure); env SIM_SEED
    --sim-budget SECONDS  how long to explore; env SIM_BUDGET, default 90
    --sim-seed-start N    the first seed explored; env SIM_SEED_START, default 1
    --sim-skip a,b        invariants left out; env SIM_SKIP (default: those the design
                          allows, ``invariants.ALLOWED_BY_DESIGN``; an empty value checks all)
    --sim-dynamo-seeds N  schedules replayed on DynamoDB Local; env SIM_DYNAMO_SEEDS, default 4
    SIM_SHRINK_SECONDS    time to shrink each failing seed (10 s; 60 s with --seed)

pytest registers options only from the conftest files it loads first: run the simulation
as ``pytest tests/simulation ...`` to use the flags; the environment variables work from
any directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pytest

from tests.simulation.invariants import ALL_CHECKS, ALLOWED_BY_DESIGN

STATS = pytest.StashKey["SimStats"]()


@dataclass(frozen=True)
class SimOptions:
    seed: int | None
    budget: float
    seed_start: int
    skip: frozenset[str]
    dynamo_seeds: int
    shrink_seconds: float = 10.0  # per failing seed shrunk
    max_shrinks: int = 3


@dataclass
class SimStats:
    schedules: int = 0
    seconds: float = 0.0
    calls: int = 0
    seeds: list[int] = field(default_factory=list)
    failing: dict[str, int] = field(default_factory=dict)  # invariant -> first seed


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("simulation", "deterministic simulation (tests/simulation)")
    group.addoption("--seed", type=int, default=None, help="explore only this seed")
    group.addoption("--sim-budget", type=float, default=None, help="seconds of exploration")
    group.addoption("--sim-seed-start", type=int, default=None, help="first seed explored")
    group.addoption("--sim-skip", default=None, help="invariants left out, comma-separated")
    group.addoption(
        "--sim-dynamo-seeds", type=int, default=None, help="schedules replayed on DynamoDB"
    )


def _option(config: pytest.Config, flag: str, env: str, default: str) -> str:
    value = config.getoption(flag, default=None)
    if value is None:
        value = os.environ.get(env, default)
    return str(value)


@pytest.fixture(scope="session")
def sim_options(pytestconfig: pytest.Config) -> SimOptions:
    seed = _option(pytestconfig, "--seed", "SIM_SEED", "")
    skip = _option(pytestconfig, "--sim-skip", "SIM_SKIP", ",".join(ALLOWED_BY_DESIGN))
    unknown = {s.strip() for s in skip.split(",") if s.strip()} - set(ALL_CHECKS)
    if unknown:
        raise pytest.UsageError(
            f"--sim-skip: unknown invariant(s) {sorted(unknown)}; known: {', '.join(ALL_CHECKS)}"
        )
    return SimOptions(
        seed=int(seed) if seed else None,
        budget=float(_option(pytestconfig, "--sim-budget", "SIM_BUDGET", "90")),
        seed_start=int(_option(pytestconfig, "--sim-seed-start", "SIM_SEED_START", "1")),
        skip=frozenset(s.strip() for s in skip.split(",") if s.strip()),
        dynamo_seeds=int(_option(pytestconfig, "--sim-dynamo-seeds", "SIM_DYNAMO_SEEDS", "4")),
        # One seed replayed: take the time to shrink it well.
        shrink_seconds=float(os.environ.get("SIM_SHRINK_SECONDS", "60" if seed else "10")),
    )


@pytest.fixture(scope="session")
def sim_stats(pytestconfig: pytest.Config) -> SimStats:
    stats = SimStats()
    pytestconfig.stash[STATS] = stats
    return stats


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    stats = terminalreporter.config.stash.get(STATS, None)
    if stats is None or not stats.schedules:
        return
    rate = stats.schedules / stats.seconds if stats.seconds else 0.0
    calls = stats.calls / stats.seconds if stats.seconds else 0.0
    first, last = min(stats.seeds), max(stats.seeds)
    terminalreporter.write_sep("-", "simulation")
    terminalreporter.write_line(
        f"{stats.schedules} schedules (seeds {first}..{last}) in {stats.seconds:.1f} s: "
        f"{rate:.1f} schedules/s, {calls:.0f} port calls/s"
    )
    for name, seed in sorted(stats.failing.items()):
        terminalreporter.write_line(f"  {name}: first seed {seed}")
