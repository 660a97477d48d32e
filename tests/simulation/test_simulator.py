"""The simulator itself: one seed is one trace (also in another process), a decision list
replays its schedule, crashes stop an actor at a port call, shrinking keeps a failure."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import durable.engine.engine
from durable.core.ids import new_ulid
from durable.core.model import RunStatus
from durable.core.tokens import new_nonce
from durable.testing import SimulatedCrash
from tests.simulation import invariants
from tests.simulation.compare import ledger_differences
from tests.simulation.explore import run_schedule, shrink
from tests.simulation.invariants import Final
from tests.simulation.scheduler import CRASH, CRASH_AFTER, Scheduler, SimPort, seeded_randomness

ROOT = Path(__file__).resolve().parents[2]
SEED = 5


def digest(seed: int) -> str:
    result = run_schedule(seed)
    text = "\n".join([*result.trace, *result.quiescence, *sorted(result.names)])
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_seed_replays_to_the_same_trace_and_ledger() -> None:
    """GIVEN one seed
    WHEN its schedule runs twice
    THEN both runs take the same decisions, fire the same invariants, leave equal ledgers"""
    first, second = run_schedule(SEED), run_schedule(SEED)
    assert first.trace == second.trace and len(first.trace) > 50
    assert first.names == second.names
    assert first.run_ids == second.run_ids and first.run_ids
    assert ledger_differences(first.ledger, second.ledger, first.run_ids) == []


def test_the_same_seed_gives_the_same_trace_in_another_process() -> None:
    """GIVEN another interpreter with another hash seed
    WHEN it runs the same seed
    THEN it takes the same decisions (nothing depends on set order or the wall clock)"""
    code = (
        "import logging; logging.disable(logging.WARNING)\n"
        "from tests.simulation.test_simulator import digest\n"
        f"print(digest({SEED}))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == digest(SEED)


def test_the_chosen_decisions_replay_the_schedule() -> None:
    """GIVEN the decisions a seed's schedule took
    WHEN they are replayed instead of drawn
    THEN the schedule is the same (what shrinking relies on)"""
    drawn = run_schedule(SEED)
    replayed = run_schedule(SEED, decisions=drawn.decisions)
    assert replayed.trace == drawn.trace and replayed.names == drawn.names


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def bump(self) -> int:
        self.calls += 1
        return self.calls


@pytest.mark.parametrize(("command", "calls"), [(CRASH, 1), (CRASH_AFTER, 2)])
def test_a_crash_stops_the_actor_at_a_port_call(command: str, calls: int) -> None:
    """GIVEN an actor that calls a wrapped port three times
    WHEN the scheduler kills it at the second call (before or after it)
    THEN the calls it made are done, and no later one happens"""
    sched, target = Scheduler(), Counter()
    port = SimPort("counter", target, sched)

    def job() -> None:
        for _ in range(3):
            port.bump()

    task = sched.spawn("a", job)
    sched.step(task)  # runs to the first call
    sched.step(task)  # makes it, stops at the second
    sched.step(task, command)
    assert task.done and task.crashed and target.calls == calls


def test_randomness_is_drawn_from_the_seed() -> None:
    """GIVEN the simulation's seeded randomness
    WHEN the engine draws a run id, a callback nonce and an owner id, twice from one seed
    THEN it draws the same values, and real randomness is back afterwards"""

    def draw() -> tuple[str, str, str]:
        with seeded_randomness(random.Random(9)):
            return new_ulid(datetime(2026, 1, 1, tzinfo=UTC)), new_nonce(), owner_id()

    def owner_id() -> str:
        uuid_module: Any = vars(durable.engine.engine)["uuid"]  # what Engine.resume draws from
        value: str = uuid_module.uuid4().hex
        return value

    assert draw() == draw()
    assert owner_id() != owner_id()


def test_shrinking_keeps_the_failure_and_drops_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    """GIVEN a check that fails whenever a run succeeded
    WHEN a failing schedule is shrunk
    THEN far fewer decisions still fail it"""

    def no_run_succeeds(f: Final) -> list[str]:
        done = [r for r, h in f.histories.items() if h.run.status == RunStatus.SUCCEEDED]
        return [f"run {r} succeeded" for r in done]

    monkeypatch.setitem(invariants.FINAL_CHECKS, "no_run_succeeds", no_run_succeeds)
    seed = next(s for s in range(1, 30) if "no_run_succeeds" in run_schedule(s).names)
    failing = run_schedule(seed)
    shrunk = shrink(seed, failing.decisions, {"no_run_succeeds"}, seconds=20)
    assert "no_run_succeeds" in run_schedule(seed, decisions=shrunk).names
    assert len(shrunk) < len(failing.decisions) / 4


def test_a_crashed_task_raises_nothing_into_the_scheduler() -> None:
    """GIVEN a task that dies before its first port call
    WHEN the scheduler starts it with a crash
    THEN it is done and crashed, and its error slot is empty"""
    sched = Scheduler()
    task = sched.spawn("a", lambda: None)
    sched.step(task, CRASH)
    assert task.done and task.crashed and task.error is None
    with pytest.raises(SimulatedCrash):
        raise SimulatedCrash("the class the scheduler raises")
