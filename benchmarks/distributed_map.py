"""Distributed maps (issue 16) on ``durable dev``: a map of N items x 1 trivial step,
``max_concurrency=100``, each item a child run, with 1 and with 4 worker processes.

Per configuration: the wall time from the start request to the parent's SUCCEEDED (the
listing, polled every 2 s), items per second, the parent's invocations (its wake-ups),
and what the map cost from the usage every run records (``durable.core.usage``: DynamoDB
requests and units, worker invocations, Lambda time). The parent's usage is read whole;
the children's from an even sample of them (their usage differs only by a retry, which
trivial steps do not have), times N. Dollars per 1,000 items at list prices beside
Step Functions' Distributed Map and Lambda durable functions' map for the same work
(formulas in ``peers``; the counts there are the shape's, not a measurement).

    python -m benchmarks.distributed_map                      # 10,000 items, 1 and 4 workers
    python -m benchmarks.distributed_map --items 1000 --workers 4
"""

from __future__ import annotations

import argparse
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

from benchmarks import stack
from benchmarks.common import Figure, format_table, say
from benchmarks.cost import PRICES
from durable.core.usage import INVOCATIONS, READ_UNITS, REQUESTS, WRITE_UNITS, Prices

WINDOW = 100
SAMPLE = 100  # children whose usage is read, evenly spread


def _pass(workdir: Path, items: int, workers: int) -> dict[str, Any]:
    dev = stack.dev_process(workdir, workers=workers, worker_timeout=300)
    workdir.mkdir(parents=True)
    try:
        dev.start()
        t0 = time.perf_counter()
        [run_id] = stack.start_runs(dev, "map-all", [{"items": items, "window": WINDOW}])
        ended = stack.wait_succeeded(dev, "map-all", [run_id], timeout=7200, poll=2.0)
        wall = ended - t0
        parent = dev.http("GET", f"/runs/{urllib.parse.quote(run_id)}")
        kids = [s["child"] for s in parent["steps"] if s.get("child")]
        stride = max(1, len(kids) // SAMPLE)
        sample = [
            dev.http("GET", f"/runs/{urllib.parse.quote(k)}")["usage"] or {}
            for k in kids[::stride][:SAMPLE]
        ]
        invoked = stack.invocations(dev)
    finally:
        dev.stop()
    per_child = {
        key: sum(float(u.get(key, 0.0)) for u in sample) / max(1, len(sample))
        for key in {k for u in sample for k in u}
    }
    return {
        "wall": wall,
        "parent": parent["usage"] or {},
        "child": per_child,
        "children": len(kids),
        "invoked": invoked,
        "output": parent["output"],
    }


def _per_item(result: dict[str, Any], items: int, key: str) -> float:
    return float(result["parent"].get(key, 0.0)) / items + float(result["child"].get(key, 0.0))


def peers(items: int) -> dict[str, float]:
    """Dollars for ``items`` items of one trivial step on the peers, from their list prices.

    Step Functions Distributed Map, each item a Standard child execution of one Lambda
    task: 3 transitions per child (start, task, end), plus the map run's own few
    transitions. Lambda durable functions' map: per item one operation for the item's
    context and one for its step, all in the parent function's invocations."""
    sfn = (3 * items + 5) * PRICES["stepfunctions_transition"] + items * PRICES["lambda_request"]
    durable_fn = (2 * items + 2) * PRICES["durable_operation"]
    return {"Step Functions Distributed Map": sfn, "Lambda durable functions map": durable_fn}


def figures(items: int, worker_counts: list[int]) -> list[Figure]:
    why = stack.why_unavailable()
    if why is not None:
        return [Figure.not_measured("distributed map on durable dev", "measured", why)]
    out: list[Figure] = []
    prices = Prices.of("us-east-1")
    walls: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="durable-bench-dmap-") as tmp:
        for workers in worker_counts:
            say(f"distributed map: {items} items, window {WINDOW}, {workers} worker(s) ...")
            r = _pass(Path(tmp) / f"w{workers}", items, workers)
            walls[workers] = r["wall"]
            assert r["output"] == items and r["children"] == items, r
            requests = _per_item(r, items, REQUESTS)
            label = f"{items} items, {workers} worker(s)"
            out.append(
                Figure.info(
                    f"wall time, {label}",
                    f"{r['wall']:.1f} s",
                    note=f"{items / r['wall']:.1f} items/s",
                )
            )
            out.append(
                Figure.at_most(
                    f"DynamoDB requests per item, {label}",
                    requests,
                    4,
                    ".2f",
                    note=(
                        f"child {r['child'].get(REQUESTS, 0):.2f} (create in the parent's "
                        "batches, claim, step, final write + report) + the parent's "
                        f"{float(r['parent'].get(REQUESTS, 0)) / items:.2f}; "
                        f"WCU per item {_per_item(r, items, WRITE_UNITS):.2f}, "
                        f"RCU per item {_per_item(r, items, READ_UNITS):.2f}"
                    ),
                )
            )
            wakes = float(r["parent"].get(INVOCATIONS, 0))
            out.append(
                Figure.info(
                    f"parent wake-ups, {label}",
                    f"{wakes:.0f}",
                    note=f"{items / max(wakes, 1):.1f} items per wake-up; "
                    f"{r['invoked']} worker invocations in all",
                )
            )
            dollars = prices.dollars(r["parent"]) + items * prices.dollars(r["child"])
            out.append(
                Figure.info(
                    f"$ per 1,000 items, {label}",
                    f"${dollars / items * 1000:.4f}",
                    note="list prices: DynamoDB on-demand units, Lambda requests and "
                    "GB-seconds as each run recorded them",
                )
            )
    if len(walls) == 2:
        one, many = sorted(walls)
        out.append(
            Figure.info(
                f"speed-up, {many} workers over {one}",
                f"x{walls[one] / walls[many]:.2f}",
                note="2 cores run the workers and DynamoDB Local together here",
            )
        )
    for name, dollars in peers(1000).items():
        out.append(
            Figure.info(f"$ per 1,000 items, {name}", f"${dollars:.4f}", note=peers.__doc__ or "")
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 4])
    args = parser.parse_args()
    print(format_table(figures(args.items, args.workers)))


if __name__ == "__main__":
    main()
