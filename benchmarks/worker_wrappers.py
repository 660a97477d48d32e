"""What the worker's ledger wrappers cost per step: the warm cache (``durable.core.history_cache``)
and the OpenTelemetry span recorder (``durable.adapters.otel``, with OpenTelemetry's no-op
tracer, as a deployment without a tracer provider has it), against the bare ledger.

A 2,000-step run on the memory ledger (no I/O, so the wrappers' own CPU shows), median of
7 rounds, all in the same run:

    python -m benchmarks.worker_wrappers
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import build_app, make_engine, say
from durable.adapters.memory import MemoryLedger
from durable.core.history_cache import CachingLedger

STEPS = 2000
ROUNDS = 7


def per_step(wrap: Callable[[Any], Any]) -> float:
    times = []
    for _ in range(ROUNDS):
        engine, _ = make_engine(build_app(), wrap(MemoryLedger()))
        run = engine.start("sequential", STEPS)
        began = time.perf_counter()
        engine.resume(run.run_id)
        times.append((time.perf_counter() - began) / STEPS)
    return statistics.median(times)


def main() -> None:
    say(f"worker wrappers: {STEPS}-step runs on the memory ledger, {ROUNDS} rounds ...")
    plain = per_step(lambda ledger: ledger)
    cached = per_step(CachingLedger)
    rows = [("plain", plain), ("+ warm cache", cached)]
    try:
        from durable.adapters.otel import TracingLedger
    except ImportError:
        say("OpenTelemetry not installed: the span recorder is not measured")
    else:

        def traced(ledger: Any) -> Any:
            return CachingLedger(TracingLedger(ledger))

        rows.append(("+ cache + spans (no-op tracer)", per_step(traced)))
    for name, seconds in rows:
        print(f"{name:<32} {seconds * 1e6:6.1f} us/step  {seconds / plain:5.2f}x")


if __name__ == "__main__":
    main()
