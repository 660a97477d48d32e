"""One schedule from a seed: chaos, quiescence, settling, invariants; and shrinking.

``run_schedule(seed)`` is the whole life of one simulated system. With ``decisions`` it
replays a given list of chaotic decisions instead of drawing them (what shrinking does).
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from durable.adapters.memory import MemoryLedger
from durable.core.model import RunHistory, StepKind, StepStatus
from durable.engine.sweeper import SweepReport
from tests.simulation.actors import OUTSIDE, SWEEPER, WEIGHTS, Settings, World
from tests.simulation.async_programs import ASYNC
from tests.simulation.coverage import features_of, focus_for
from tests.simulation.invariants import FINAL_CHECKS, Final, no_stuck_runs
from tests.simulation.journal import Violation
from tests.simulation.policy import Policy
from tests.simulation.programs import GATED, LANED, RATED, WORKFLOW, active
from tests.simulation.scheduler import Decision, seeded_randomness
from tests.simulation.scripts import Script, scripts_for, tour_for

SETTLE_ROUNDS = 300
SETTLE_JUMPS = (10, 60, 600, 3600, 6 * 3600, 86400)
CALM_ROUNDS = 40  # per stage of a script carried out after settling


@dataclass
class Result:
    seed: int
    decisions: list[Decision]
    trace: list[str]
    violations: list[Violation]
    calls: int
    ledger: Any = None
    run_ids: list[str] = field(default_factory=list)
    quiescence: list[str] = field(default_factory=list)  # in-flight actors finishing
    produced: Counter[str] = field(default_factory=Counter)  # what the schedule made happen

    @property
    def names(self) -> set[str]:
        return {v.name for v in self.violations}

    @property
    def features(self) -> frozenset[str]:
        """The features of ``coverage.FEATURES`` this schedule exercised."""
        return features_of(self.produced)


def settings_for(seed: int) -> Settings:
    """Each seed its own mix (swarm testing): some leave crashes, stalls, misfiring timers
    or the sweeper out entirely, so what those would mask can show."""
    r = random.Random(f"settings-{seed}")
    scale = {k: r.choice((0.0, 0.3, 1.0, 3.0)) for k in ("sweep", "timer", "clock", "stall")}
    scale |= {k: r.choice((0.0, 1.0)) for k in ("drop", "dup", "ttl")}
    scale["event"] = r.choice((0.3, 1.0, 3.0))
    focus = focus_for(seed)
    if "keyed restart after retention" in focus:
        # A keyed run must end, outlive its retention (two hours) and be deleted by TTL
        # before an operator starts its key again: time and TTL must both move.
        scale |= {"ttl": 6.0, "clock": max(scale["clock"], 1.0), "event": max(scale["event"], 1.0)}
    decisions = r.choice((100, 200, 300))
    return Settings(
        focus=focus,
        tour=tour_for(seed),
        decisions=decisions,
        workers=r.choice((2, 3)),
        crash_rate=r.choice((0.0, 0.02, 0.05)),
        max_starts=r.choice((1, 3, 6)),
        steps_per_invocation=r.choice((1, 2, 1000, 1000)),
        weights=tuple((k, w * scale.get(k, 1.0)) for k, w in WEIGHTS.items()),
        lambda_retries=os.environ.get("SIM_LAMBDA_RETRIES", "1") == "1",
    )


def run_schedule(
    seed: int,
    *,
    ledger: Any = None,
    decisions: list[Decision] | None = None,
    skip: frozenset[str] = frozenset(),
) -> Result:
    world = World(seed, ledger if ledger is not None else MemoryLedger(), settings_for(seed))
    policy = Policy(world, random.Random(f"schedule-{seed}"))
    chosen: list[Decision] = []
    trace: list[str] = []
    with seeded_randomness(world.values), active(world.hooks), _quiet_engine_logs():
        try:
            for d in decisions if decisions is not None else _generate(world, policy):
                world.drain_invoker()
                label = policy.apply(d)
                if label is not None:
                    chosen.append(d)
                    trace.append(label)
            quiet = _quiesce(world)
            world.drain_invoker()
            for problem in no_stuck_runs(histories(world), world.journal, world.armed()):
                world.violate("no_stuck_runs", problem)
            settle(world)
            _count_payloads(world)
            carry_out(world, policy, scripts_for(seed, world.settings.focus, world.settings.tour))
            final = Final(histories(world), world.journal, world.config, world.engine.run_by_key)
            for name, check in FINAL_CHECKS.items():
                for problem in check(final):
                    world.violate(name, problem)
        finally:
            world.sched.finish_all(crash=True)  # never leave a thread behind
    violations = [v for v in world.journal.violations if v.name not in skip]
    return Result(
        seed,
        chosen,
        trace,
        violations,
        world.sched.calls,
        world.raw,
        sorted(all_runs(world)),
        quiet,
        world.journal.produced,
    )


def _count_payloads(world: World) -> None:
    if world.payloads.objects:
        world.journal.produced["a value kept in the payload store"] += 1


def carry_out(world: World, policy: Policy, scripts: list[Script]) -> None:
    """Carry out again, calmly, each script the chaotic phase did not bring about (its
    run canceled by a random cancel, its stages past the schedule's end): its stages in
    turn, each once the world is ready for it (settling's moves in between, without
    answers or signals, which a stage may be waiting to send), then settle again. So a
    script's names are produced in every schedule that runs it."""
    missing = [s for s in scripts if not s.met(world.journal.produced)]
    if not missing:
        return

    def apply(d: Decision) -> None:
        policy.apply(d)
        for name in (OUTSIDE, SWEEPER):  # an event, a sweep: to its end (no crash)
            while task := next((t for t in world.sched.tasks if t.name == name), None):
                world.sched.step(task)
        world.drain_invoker()

    for script in missing:
        for stage in script.stages("n"):
            for calm in range(CALM_ROUNDS):
                world.drain_invoker()
                if stage.ready(world):
                    break
                if stage.prepare is not None and calm % 4 == 0:
                    stage.prepare(world, apply)
                else:
                    _calm_round(world)
            else:
                break  # never ready: the coverage test names what is missing
            d = stage.make(world)
            if d is not None:
                apply(d)
    _quiesce(world)
    world.drain_invoker()
    settle(world)
    _count_payloads(world)


def _calm_round(world: World) -> None:
    """One of settling's moves, without its answers and signals: an invocation run to
    its end, else a sweep, else time passing (timers stay armed for a stage to fire)."""
    _quiesce(world)
    world.drain_invoker()
    if world.pool:
        run_id, reason, hop = world.pool.pop(0)
        task = world.start_worker("w1", run_id, reason, hop, False)
        while not task.done:
            world.sched.step(task)
        return
    reports: list[SweepReport] = []
    _run_to_end(world, SWEEPER, world.sweep_job(reports))
    if not (reports and reports[0].invoked):
        world.clock.advance(timedelta(seconds=600))


def _quiesce(world: World) -> list[str]:
    """Let every in-flight actor finish (no more crashes), oldest first; their steps."""
    steps = []
    while world.sched.tasks:
        task = world.sched.tasks[0]
        steps.append(f"{task.name} run: {task.label}")
        world.sched.step(task)
    return steps


@contextmanager
def _quiet_engine_logs() -> Iterator[None]:
    """The engine warns about what the simulation does on purpose (ids reused after
    expiry, lost timers): thousands of lines per run that would bury a report."""
    logger = logging.getLogger("durable")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _generate(world: World, policy: Policy) -> Iterator[Decision]:
    for _ in range(world.settings.decisions):
        world.drain_invoker()
        yield policy.choose()


def all_runs(world: World) -> set[str]:
    ids = set(world.runs) | set(world.journal.runs_seen)
    for workflow in (WORKFLOW, GATED, RATED, LANED, ASYNC):
        cursor: str | None = None
        while True:
            page = world.raw.list_runs(workflow=workflow, limit=100, cursor=cursor)
            ids.update(r.run_id for r in page.items)
            cursor = page.cursor
            if cursor is None:
                break
    return ids


def histories(world: World) -> dict[str, RunHistory]:
    # Resolved as every read through the engine is: invariants judge values, not references.
    loaded = {run_id: world.reader.load(run_id) for run_id in sorted(all_runs(world))}
    return {run_id: h for run_id, h in loaded.items() if h is not None}


# --- settling: no chaos; timers on time, answers, signals, the clock moves on ----------


def _run_to_end(world: World, name: str, job: Callable[[], None]) -> None:
    task = world.spawn(name, job)
    while not task.done:
        world.sched.step(task)


def settle(world: World) -> None:
    idle = 0
    sent: set[tuple[str, str]] = set()
    for _ in range(SETTLE_ROUNDS):
        world.drain_invoker()
        if world.pool:
            run_id, reason, hop = world.pool.pop(0)
            task = world.start_worker("w1", run_id, reason, hop, False)
            while not task.done:
                world.sched.step(task)
            idle = 0
            continue
        fired = world.timers.due(world.clock.now())
        if fired:
            world.pool.extend((run_id, "timer", 0) for run_id in fired)
            continue
        if _answer_one(world, sent):
            idle = 0
            continue
        reports: list[SweepReport] = []
        _run_to_end(world, SWEEPER, world.sweep_job(reports))
        if reports and reports[0].invoked:
            continue
        unfinished = _open_runs(world)
        if not unfinished:
            return
        if all(world.raised.get(r, 0) >= 3 for r in unfinished):
            return  # crash loops (reported by resume_raises_nothing): settling cannot end them
        world.clock.advance(timedelta(seconds=SETTLE_JUMPS[min(idle, len(SETTLE_JUMPS) - 1)]))
        idle += 1


def _open_runs(world: World) -> list[str]:
    """The runs not finished, by id (their items alone: settling asks this every round,
    and loading every run's history each time was most of its cost)."""
    return [
        run_id
        for run_id in sorted(all_runs(world))
        if (run := world.raw.get_run(run_id)) is not None and not run.terminal
    ]


def _answer_one(world: World, sent: set[tuple[str, str]]) -> bool:
    """Answer one outstanding callback, or send a signal a waiting run has none of."""
    j = world.journal
    for token, mail in sorted(j.mailbox.items()):
        if token in j.answered:
            continue
        run = world.raw.get_run(mail.run_id)
        if run is None or run.terminal:
            continue
        if world.run_key(mail.run_id) != mail.run:
            continue
        arg = {"type": "callback", "exact": token, "error": False, "value": 7}
        _run_to_end(world, OUTSIDE, world.event_job(arg))
        return True
    for run_id in _open_runs(world):
        h = world.reader.load(run_id)
        if h is None:
            continue
        for position, step in sorted(h.steps.items()):
            if step.kind != StepKind.SIGNAL or step.status != StepStatus.WAITING:
                continue
            buffered = [s for s in h.signals if s.name == step.name and s.consumed_by is None]
            if buffered or (run_id, position) in sent:
                continue
            sent.add((run_id, position))
            arg = {"type": "signal", "exact": run_id, "name": step.name, "payload": 1}
            _run_to_end(world, OUTSIDE, world.event_job(arg))
            return True
    return False


# --- shrinking -------------------------------------------------------------------------


def shrink(
    seed: int, decisions: list[Decision], names: set[str], seconds: float, **kwargs: Any
) -> list[Decision]:
    """Drop decisions (then ops of started programs) while a violation of ``names``
    still fires. Delta debugging, bounded by ``seconds``."""
    deadline = time.monotonic() + seconds

    def fails(candidate: list[Decision]) -> bool:
        return bool(run_schedule(seed, decisions=candidate, **kwargs).names & names)

    current, n = list(decisions), 2
    while len(current) >= 2 and time.monotonic() < deadline:
        size = -(-len(current) // n)
        for i in range(0, len(current), size):
            candidate = current[:i] + current[i + size :]
            if time.monotonic() < deadline and fails(candidate):
                current, n = candidate, max(n - 1, 2)
                break
        else:
            if n >= len(current):
                break
            n = min(len(current), n * 2)
    for i, d in enumerate(current):
        program = d.arg.get("program")
        if program is None:
            continue
        for k in reversed(range(len(program))):
            if time.monotonic() >= deadline:
                return current
            ops = program[:k] + program[k + 1 :]
            if not ops:
                continue
            candidate = [*current[:i], replace(d, arg={**d.arg, "program": ops}), *current[i + 1 :]]
            if fails(candidate):
                current, program = candidate, ops
    return current


def report(result: Result, shrunk: Result | None) -> str:
    lines = [f"simulation seed {result.seed} failed: {', '.join(sorted(result.names))}"]
    seen: dict[str, int] = {}
    for v in result.violations:
        seen[v.name] = seen.get(v.name, 0) + 1
        if seen[v.name] <= 3:
            lines.append(f"  [{v.name}] (seq {v.seq}) {v.detail}")
    lines.append(f"replay: pytest tests/simulation --seed {result.seed}")
    if shrunk is not None:
        lines.append(
            f"shrunk trace ({len(shrunk.decisions)} of {len(result.decisions)} decisions, "
            f"still fails: {', '.join(sorted(shrunk.names))}):"
        )
        for i, (d, label) in enumerate(zip(shrunk.decisions, shrunk.trace, strict=True)):
            program = f"  {d.arg['program']}" if "program" in d.arg else ""
            lines.append(f"  {i + 1:3d}. {label}{program}")
        lines.append("  quiescence (in-flight actors finish, oldest first):")
        lines += [f"       {step}" for step in shrunk.quiescence[:40]]
    return "\n".join(lines)
