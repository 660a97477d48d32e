"""What the claim check costs a step: the engine with and without a payload store.

With a store (``durable.core.claim_check``), every text a write carries is measured against
the offload size, and every read looks for a reference: on the hot path of every step,
even when nothing is ever offloaded. This runs N steps on the memory ledger with the
engine composed with a memory store and without one, in interleaved rounds, and prints
the ratio of the medians for tiny results and 2 KB results (kept in the item), and the
absolute time of a step whose 100 KB result goes to the store (no baseline: without a
store that step's item is simply bigger).

    python -m benchmarks.claim_check
"""

from __future__ import annotations

import time
from collections.abc import Callable

from benchmarks.common import CONFIG, Figure, collect, median, print_figures, say
from durable import App, Context
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger
from durable.adapters.payload_stores import MemoryPayloads
from durable.engine.engine import Engine

N = 400
ROUNDS = 9


def build_app() -> App:
    app = App()

    @app.step(name="tiny")
    def tiny(i: int) -> int:
        return i

    @app.step(name="two_kb")
    def two_kb(i: int) -> str:
        return f"{i:06d}" + "x" * 2042

    @app.step(name="large")
    def large(i: int) -> str:
        return f"{i:06d}" + "y" * (100 * 1024)

    def steps_of(step: Callable[[int], object]) -> Callable[[Context, int], int]:
        def steps(ctx: Context, n: int) -> int:
            return sum(1 for i in range(n) if step(i) is not None)

        return steps

    for name, step in (("tiny", tiny), ("two_kb", two_kb), ("large", large)):
        app.workflow(name=f"{name}_steps")(steps_of(step))
    return app


def engine(app: App, store: bool) -> Engine:
    return Engine(
        app,
        MemoryLedger(),
        MemoryInvoker(),
        MemoryEffectStore(),
        config=CONFIG,
        payloads=MemoryPayloads() if store else None,
    )


def per_step(app: App, workflow: str, store: bool, n: int = N) -> float:
    made = engine(app, store)
    collect()
    t0 = time.perf_counter()
    run = made.start(workflow, n)
    outcome = made.resume(run.run_id)
    elapsed = time.perf_counter() - t0
    if outcome.result != "succeeded":
        raise RuntimeError(f"{workflow}: expected success, got {outcome.result}")
    return elapsed / n


def main() -> None:
    app = build_app()
    figures: list[Figure] = []
    for label, workflow in (("tiny results", "tiny_steps"), ("2 KB results", "two_kb_steps")):
        say(f"claim check: {N} steps with {label}, {ROUNDS} interleaved rounds ...")
        on: list[float] = []
        off: list[float] = []
        per_step(app, workflow, True), per_step(app, workflow, False)  # warm both paths
        for i in range(ROUNDS):
            pair = [(on, True), (off, False)]
            for sink, store in pair if i % 2 == 0 else reversed(pair):
                sink.append(per_step(app, workflow, store))
        figures.append(
            Figure.info(
                f"step time with / without a payload store, {label}",
                f"{median(on) / median(off):.3f}",
                f"{median(on) * 1e6:.1f} vs {median(off) * 1e6:.1f} us per step",
            )
        )
    large = median([per_step(app, "large_steps", True, 50) for _ in range(5)])
    figures.append(
        Figure.info(
            "a step whose 100 KB result goes to the (memory) store",
            f"{large * 1e6:.0f} us",
            "hash, put, reference; S3 adds a PUT round trip on AWS",
        )
    )
    print_figures("the claim check on the hot path", figures)


if __name__ == "__main__":
    main()
