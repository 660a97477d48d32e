"""What the write boundary costs a step: the engine with and without ``WriteBoundary``.

Every write to the ledger passes ``durable.core.write_boundary.scrub`` (issue 32: no live
callback token is stored, whatever path it takes). That is a regular expression over the
texts of each record written, on the hot path of every step. This measures a run of N
trivial steps on the memory ledger (where the boundary's share is largest: no network to
hide behind) with the engine as composed and with the boundary taken out, in interleaved
rounds on one process, and prints the ratio of the medians:

    boundary / none = per-step time with the boundary / per-step time without

The same for steps whose results are 2 KB texts with dots in them (the scan's worst
ordinary case: a text without a dot is passed over at once). No target: a report, with
the absolute microseconds beside it.

    python -m benchmarks.write_boundary
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from benchmarks.common import Figure, collect, median, memory_engine, print_figures, say
from durable import App, Context
from durable.engine.engine import Engine

N = 400
ROUNDS = 9
WORDY = ("see https://example.com/a.b.c?x=1. " * 60)[:2048]


def build_app() -> App:
    app = App()

    @app.step(name="tiny")
    def tiny(i: int) -> int:
        return i

    @app.step(name="wordy")
    def wordy(i: int) -> str:
        return f"{i} {WORDY}"

    @app.workflow(name="tiny_steps")
    def tiny_steps(ctx: Context, n: int) -> int:
        return sum(tiny(i) for i in range(n))

    @app.workflow(name="wordy_steps")
    def wordy_steps(ctx: Context, n: int) -> int:
        return sum(len(wordy(i)) for i in range(n))

    return app


@contextmanager
def without_boundary() -> Iterator[None]:
    """Engines made inside hold their ledger as given (the boundary is an identity)."""
    import durable.engine.engine as engine_module

    saved = engine_module.__dict__["WriteBoundary"]
    setattr(engine_module, "WriteBoundary", lambda ledger: ledger)  # noqa: B010
    try:
        yield
    finally:
        setattr(engine_module, "WriteBoundary", saved)  # noqa: B010


def per_step(make: Callable[[], Engine], workflow: str) -> float:
    engine = make()
    collect()
    t0 = time.perf_counter()
    run = engine.start(workflow, N)
    outcome = engine.resume(run.run_id)
    elapsed = time.perf_counter() - t0
    if outcome.result != "succeeded":
        raise RuntimeError(f"{workflow}: expected success, got {outcome.result}")
    return elapsed / N


def measure(app: App, workflow: str) -> tuple[float, float]:
    def with_it() -> Engine:
        return memory_engine(app)[0]

    def without_it() -> Engine:
        with without_boundary():
            return memory_engine(app)[0]

    on: list[float] = []
    off: list[float] = []
    per_step(with_it, workflow)  # warm both paths
    per_step(without_it, workflow)
    for i in range(ROUNDS):
        # Interleaved, the order alternating: drift on a shared machine hits both.
        pair = [(on, with_it), (off, without_it)]
        for sink, make in pair if i % 2 == 0 else reversed(pair):
            sink.append(per_step(make, workflow))
    return median(on), median(off)


def main() -> None:
    app = build_app()
    figures: list[Figure] = []
    for label, workflow in (("tiny results", "tiny_steps"), ("2 KB results", "wordy_steps")):
        say(f"write boundary: {N} steps with {label}, {ROUNDS} interleaved rounds ...")
        on, off = measure(app, workflow)
        figures.append(
            Figure.info(
                f"step time with / without the boundary, {label}",
                f"{on / off:.3f}",
                f"{on * 1e6:.1f} vs {off * 1e6:.1f} us per step (memory ledger)",
            )
        )
    print_figures("the write boundary on the hot path", figures)


if __name__ == "__main__":
    main()
