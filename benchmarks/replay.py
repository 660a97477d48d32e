"""Figure 5: replaying a completed step on resume, over executing it.

``park_after(n)`` runs n trivial steps and then a step that asks to be retried in an
hour, so the first invocation executes all n steps and suspends the run (WAITING). A
second ``resume`` right away claims the run, loads its n recorded steps, replays them
(nothing runs) and suspends again at the wait that is not due yet. The marginal cost of
a step is measured against a ``park_after(0)`` run in the same round, so the fixed
requests of an invocation (claim, load of an empty history, suspend) cancel out:

    replay/execute = (replay(n) - replay(0)) / (execute(n) - execute(0))

on the memory ledger (n=1000) and on DynamoDB Local (n=200); median over rounds.

    python -m benchmarks.replay
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from benchmarks.common import (
    Figure,
    TimedLedger,
    build_app,
    collect,
    dynamo_client,
    dynamo_main,
    fresh_tables,
    make_engine,
    median,
    memory_engine,
    print_figures,
    say,
)
from durable.engine.engine import Engine

MEMORY_N = 1000
MEMORY_ROUNDS = 7
DYNAMO_N = 200
DYNAMO_ROUNDS = 3
TARGET = 0.1
DYNAMO_NAME = "replay/execute per step, DynamoDB"
PLANNED = [(DYNAMO_NAME, "<= 0.100")]


@dataclass(slots=True)
class Rounds:
    execute: list[float] = field(default_factory=list)  # marginal seconds per step
    replay: list[float] = field(default_factory=list)
    replay_ledger: list[float] = field(default_factory=list)  # of which inside the ledger
    ratio: list[float] = field(default_factory=list)
    whole: list[float] = field(default_factory=list)  # replay(n) / execute(n), no subtraction


@dataclass(frozen=True, slots=True)
class Pass:
    execute: float  # seconds of the executing invocation, start included
    replay: float  # seconds of the replaying invocation
    replay_ledger: float  # seconds inside the ledger during the replaying invocation


def _suspended(engine: Engine, run_id: str) -> float:
    t0 = time.perf_counter()
    outcome = engine.resume(run_id)
    elapsed = time.perf_counter() - t0
    if outcome.result != "suspended":
        raise RuntimeError(f"expected the run to suspend at its wait, got {outcome.result}")
    return elapsed


def execute_then_replay(engine: Engine, timed: TimedLedger, n: int) -> Pass:
    collect()
    t0 = time.perf_counter()
    run = engine.start("park_after", n)
    execute = time.perf_counter() - t0 + _suspended(engine, run.run_id)
    collect()
    timed.stats.reset()
    replay = _suspended(engine, run.run_id)
    return Pass(execute, replay, timed.stats.seconds)


def one_round(engine: Engine, timed: TimedLedger, n: int, into: Rounds) -> None:
    zero = execute_then_replay(engine, timed, 0)
    full = execute_then_replay(engine, timed, n)
    execute = (full.execute - zero.execute) / n
    replay = (full.replay - zero.replay) / n
    into.execute.append(execute)
    into.replay.append(replay)
    into.replay_ledger.append((full.replay_ledger - zero.replay_ledger) / n)
    into.ratio.append(replay / execute)
    into.whole.append(full.replay / full.execute)


def _figure(name: str, n: int, r: Rounds) -> Figure:
    return Figure.at_most(
        name,
        median(r.ratio),
        TARGET,
        ".3f",
        note=(
            f"n={n}: replay {median(r.replay) * 1e6:.1f} us/step (of which the ledger's load "
            f"{median(r.replay_ledger) * 1e6:.1f} us) vs execute "
            f"{median(r.execute) * 1e6:.1f} us/step; marginal costs, median of "
            f"{len(r.ratio)} rounds; whole invocations {median(r.whole):.3f}"
        ),
    )


def measure_memory() -> list[Figure]:
    say(f"replay: {MEMORY_N}-step runs on the memory ledger ...")
    app = build_app()
    rounds = Rounds()
    one_round(*memory_engine(app), MEMORY_N, Rounds())  # warm-up
    for _ in range(MEMORY_ROUNDS):
        one_round(*memory_engine(app), MEMORY_N, rounds)  # fresh ledger: small heap
    return [_figure("replay/execute per step, memory", MEMORY_N, rounds)]


def measure_dynamo(endpoint: str) -> list[Figure]:
    say(f"replay: {DYNAMO_N}-step runs on DynamoDB Local ...")
    from durable.adapters.dynamodb import DynamoLedger

    client = dynamo_client(endpoint)
    table = fresh_tables(client)
    engine, timed = make_engine(build_app(), DynamoLedger(client, table))
    one_round(engine, timed, 10, Rounds())  # this client's connection; see warm_up()
    rounds = Rounds()
    for _ in range(DYNAMO_ROUNDS):
        one_round(engine, timed, DYNAMO_N, rounds)
    return [_figure(DYNAMO_NAME, DYNAMO_N, rounds)]


def main() -> None:
    print_figures("replay vs execute (memory ledger)", measure_memory())
    dynamo_main("replay vs execute (DynamoDB Local)", measure_dynamo, PLANNED)


if __name__ == "__main__":
    main()
