"""Cold import of each Lambda handler module against ``import boto3`` alone.

    python -m benchmarks.cold_import [--samples 15]

Every sample is a fresh interpreter (interleaved across the modules, so machine noise
spreads evenly); the time is measured inside it around the import statement, so
interpreter start-up is excluded from both sides of the ratio. Two figures per handler:

* module import (DESIGN section 8 target <= 1.5x): what Lambda's init phase pays. The
  handler modules compose nothing at import, so this is small by design.
* import + composition: the module import plus building the runtime on the first event
  (settings, SDK clients, Powertools, the engine; for the API also the routes), without
  any network call. This is the honest "ready to serve" figure, reported for information.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.common import Figure, format_table, say

ROOT = Path(__file__).resolve().parents[1]
HANDLERS = ("worker", "api", "sweeper", "events", "purge")
TARGET = 1.5

IMPORT = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
COMPOSE = (
    "import time; t = time.perf_counter(); import handlers.{name} as h; "
    "h.handler._compose(); r = h.handler.runtime; "
    "{extra}"
    "print(time.perf_counter() - t)"
)
# Settings for composition without network: no secret names (no Secrets Manager read).
ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "DURABLE_APP": "examples.app:app",
    "DURABLE_LEDGER_TABLE": "durable-ledger-bench",
    "DURABLE_IDEMPOTENCY_TABLE": "durable-idempotency-bench",
    "DURABLE_WORKER_FUNCTION": "arn:aws:lambda:us-east-1:123456789012:function:durable-worker",
    "DURABLE_SCHEDULER_GROUP": "durable-bench",
    "DURABLE_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/durable-scheduler",
    # As deployed: the X-Ray SDK's tracer is off (opt-in, measured on a row of its own).
    "DURABLE_TRACING": "false",
}


def _once(code: str, **extra_env: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_")} | ENV | extra_env
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(f"{code!r} failed: {out.stderr.strip()[-500:]}")
    return float(out.stdout.strip().splitlines()[-1])


def measure(samples: int) -> dict[str, list[float]]:
    codes = {"boto3": IMPORT.format(module="boto3")}
    for name in HANDLERS:
        codes[name] = IMPORT.format(module=f"handlers.{name}")
        extra = "r.api; r.resolver; " if name == "api" else ""
        codes[f"{name}+compose"] = COMPOSE.format(name=name, extra=extra)
    traced = "worker+compose, X-Ray SDK on"
    codes[traced] = codes["worker+compose"]
    for key, code in codes.items():  # warm the file cache and .pyc files first
        _once(code, **({"DURABLE_TRACING": "true"} if key == traced else {}))
    times: dict[str, list[float]] = {key: [] for key in codes}
    for _ in range(samples):
        for key, code in codes.items():
            env = {"DURABLE_TRACING": "true"} if key == traced else {}
            times[key].append(_once(code, **env))
    return times


def run(samples: int = 15) -> list[Figure]:
    times = measure(samples)
    base = statistics.median(times["boto3"])
    figures = [Figure.info("import boto3 alone", f"{base * 1000:.0f} ms")]
    for name in HANDLERS:
        value = statistics.median(times[name])
        figures.append(
            Figure.at_most(
                f"cold import handlers.{name} / boto3",
                value / base,
                TARGET,
                ".2f",
                note=f"{value * 1000:.0f} ms",
            )
        )
    for name in HANDLERS:
        value = statistics.median(times[f"{name}+compose"])
        figures.append(
            Figure.info(
                f"import + composition, {name} / boto3",
                f"{value / base:.2f} ({value * 1000:.0f} ms)",
            )
        )
    value = statistics.median(times["worker+compose, X-Ray SDK on"])
    figures.append(
        Figure.info(
            "import + composition, worker, X-Ray SDK on (opt-in) / boto3",
            f"{value / base:.2f} ({value * 1000:.0f} ms)",
        )
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    say(f"cold import, {args.samples} fresh interpreters per figure (medians)")
    print(format_table(run(args.samples)))


if __name__ == "__main__":
    main()
