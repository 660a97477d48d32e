"""Figures 1 and 2: engine overhead per step on the memory ledger, and per-step cost at
N=1000 over N=100.

A run of N trivial ``@app.step`` steps (``sequential``) is started and driven by one
``resume`` on the memory ledger (``MemoryLedger``, ``MemoryInvoker``,
``MemoryEffectStore``, ``NoGuard``, ``steps_per_invocation`` high enough for one
invocation). The ledger is wrapped in a timing proxy, so

    overhead per step = (wall time of start + resume - time inside ledger methods) / N

is what the engine itself costs per step beyond the storage call (replay bookkeeping,
records, encoding, lease checks). The explicit form ``ctx.step(fn, i)`` with an
undecorated function is measured too (it resolves the return annotation on every call).
Sizes are interleaved round by round so drift on a shared machine hits all of them
alike; each figure is the median over rounds.

    python -m benchmarks.engine_overhead            # the figures
    python -m benchmarks.engine_overhead --profile  # plus a cProfile of one N=1000 run
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from dataclasses import dataclass, field
from typing import Literal

from benchmarks.common import (
    Figure,
    build_app,
    collect,
    median,
    memory_engine,
    print_figures,
    say,
)
from durable import App
from durable.engine.engine import Engine

SIZES = (10, 100, 1000)
# Runs of each size per round: about the same wall time per size.
PER_ROUND = {10: 20, 100: 3, 1000: 1}
ROUNDS = 9
# The explicit form ``ctx.step(fn, i)`` is measured at these sizes too.
EXPLICIT_SIZES = (100, 1000)
OVERHEAD_TARGET_US = 50.0
SCALING_TARGET = 1.2

Form = Literal["sequential", "sequential_explicit"]


@dataclass(slots=True)
class Samples:
    per_step_total: list[float] = field(default_factory=list)  # seconds
    per_step_ledger: list[float] = field(default_factory=list)
    per_step_overhead: list[float] = field(default_factory=list)


def one_run(engine: Engine, workflow: Form, n: int) -> None:
    run = engine.start(workflow, n)
    outcome = engine.resume(run.run_id)
    if outcome.result != "succeeded":
        raise RuntimeError(f"benchmark run of {n} steps ended {outcome.result}, not succeeded")


def timed_run(app: App, workflow: Form, n: int) -> tuple[float, float]:
    """(wall seconds of start + resume, seconds inside the ledger) on a fresh ledger.

    A fresh ledger per run keeps earlier runs' records from inflating the heap (and so
    the garbage collector's work) as the benchmark goes on.
    """
    engine, timed = memory_engine(app)
    collect()
    t0 = time.perf_counter()
    one_run(engine, workflow, n)
    return time.perf_counter() - t0, timed.stats.seconds


def measure(rounds: int = ROUNDS) -> dict[tuple[Form, int], Samples]:
    app = build_app()
    plan: list[tuple[Form, int]] = [("sequential", n) for n in SIZES]
    plan += [("sequential_explicit", n) for n in EXPLICIT_SIZES]
    for workflow, n in plan:  # warm-up: adapters cached, code paths hot
        timed_run(app, workflow, n)
    samples = {key: Samples() for key in plan}
    for _ in range(rounds):
        for workflow, n in plan:
            runs = [timed_run(app, workflow, n) for _ in range(PER_ROUND[n])]
            total = sum(t for t, _ in runs) / len(runs)
            ledger = sum(lt for _, lt in runs) / len(runs)
            s = samples[(workflow, n)]
            s.per_step_total.append(total / n)
            s.per_step_ledger.append(ledger / n)
            s.per_step_overhead.append((total - ledger) / n)
    return samples


def _overhead_figure(label: str, s: Samples, n: int) -> Figure:
    overhead = median(s.per_step_overhead) * 1e6
    note = (
        f"total {median(s.per_step_total) * 1e6:.1f} us/step of which inside the memory "
        f"ledger {median(s.per_step_ledger) * 1e6:.1f} us/step (median of "
        f"{len(s.per_step_total)} rounds)"
    )
    return Figure.at_most(label, overhead, OVERHEAD_TARGET_US, ".1f", " us", note)


def _marginal(samples: dict[tuple[Form, int], Samples], workflow: Form, lo: int, hi: int) -> float:
    """Overhead of one more step: the slope between two sizes, free of per-run costs."""
    a = median(samples[(workflow, lo)].per_step_overhead) * lo
    b = median(samples[(workflow, hi)].per_step_overhead) * hi
    return (b - a) / (hi - lo)


def figures(samples: dict[tuple[Form, int], Samples]) -> list[Figure]:
    # The target is per step, so it is judged on the marginal cost (slope from N=10 to
    # N=1000); the per-size figures below it include the fixed per-run work (validate the
    # input, create the run, claim, load, write the result) spread over N steps.
    slope = _marginal(samples, "sequential", 10, 1000)
    fixed = median(samples[("sequential", 10)].per_step_overhead) * 10 - slope * 10
    out = [
        Figure.at_most(
            "engine overhead/step, memory (marginal)",
            slope * 1e6,
            OVERHEAD_TARGET_US,
            ".1f",
            " us",
            f"slope of the engine's own time from N=10 to N=1000; fixed per run "
            f"(start, claim, load, finish) {fixed * 1e6:.0f} us",
        )
    ]
    out += [
        Figure.info(
            f"  amortized incl. per-run work, N={n}",
            f"{median(samples[('sequential', n)].per_step_overhead) * 1e6:.1f} us",
        )
        for n in SIZES
    ]
    explicit = samples[("sequential_explicit", 1000)]
    out.append(_overhead_figure("  same, ctx.step(plain fn), N=1000", explicit, 1000))
    c100 = median(samples[("sequential", 100)].per_step_total)
    c1000 = median(samples[("sequential", 1000)].per_step_total)
    e100 = median(samples[("sequential_explicit", 100)].per_step_total)
    e1000 = median(explicit.per_step_total)
    out.append(
        Figure.at_most(
            "cost/step N=1000 / N=100 (memory)",
            c1000 / c100,
            SCALING_TARGET,
            ".2f",
            note=(
                f"total per step {c1000 * 1e6:.1f} us at N=1000 vs {c100 * 1e6:.1f} us at "
                f"N=100; with ctx.step(plain fn) {e1000 * 1e6:.1f} / {e100 * 1e6:.1f} us = "
                f"{e1000 / e100:.2f}"
            ),
        )
    )
    return out


def run() -> list[Figure]:
    say("engine overhead: memory ledger, N = 10 / 100 / 1000 trivial steps ...")
    return figures(measure())


def profile(workflow: Form = "sequential", n: int = 1000, top: int = 30) -> str:
    """cProfile of one run of ``n`` steps, sorted by own time."""
    app = build_app()
    timed_run(app, workflow, n)
    engine, _ = memory_engine(app)
    profiler = cProfile.Profile()
    profiler.enable()
    one_run(engine, workflow, n)
    profiler.disable()
    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer)
    stats.sort_stats("tottime").print_stats(top)
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="print a cProfile of N=1000")
    args = parser.parse_args()
    print_figures("engine overhead (memory ledger)", run())
    if args.profile:
        for workflow in ("sequential", "sequential_explicit"):
            print(f"\n== cProfile: {workflow}, N=1000 (profiler overhead inflates times) ==")
            print(profile(workflow))


if __name__ == "__main__":
    main()
