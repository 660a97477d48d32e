"""Cold start of the built functions, as Lambda starts them (issue 30).

    python -m benchmarks.cold_start_built [--samples 10] [--build-dir DIR]
                                          [--baseline-build DIR]

Builds the stack with ``sam build`` for this machine's CPU (or takes ``--build-dir``), then
starts the worker and the API cold, ``--samples`` times each, in a bare ``python3.12``
(``infra.local.lambda_sandbox``: the package and the standard library, no bytecode
written, as on Lambda's read-only ``/var/task``), with the built template's environment,
against DynamoDB Local and moto's server (``infra.local.deployed_stack``). Per sample:

* **init**: the handler module's import, Lambda's init phase;
* **ready**: init plus the first event, which composes the runtime (settings, clients,
  Powertools, the engine, the workflows) and answers an event that reads no storage (the
  worker's ``describe``, the API's ``GET /workflows``);
* against ``import boto3`` alone, timed the same way in the same bare interpreter and
  folder (DESIGN section 8: handler import / boto3 <= 1.5).

Interpreter start-up is outside every figure. ``--baseline-build`` measures another build
(an earlier commit's) in the same run, samples interleaved, for a before/after ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.common import Figure, format_table, say
from infra.local.deployed_stack import DeployedStack, build_for_host, runtime_python
from infra.local.lambda_sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.5
FIRST_EVENTS = {
    "WorkerFunction": {"control": "describe"},
}


def _api_event() -> dict[str, object]:
    from durable.local.apigw import to_rest_event

    return to_rest_event("GET", "/workflows", {"Host": "localapi"}, b"")


def _sample(stack: DeployedStack, function: str) -> tuple[float, float]:
    """One cold start of ``function``: (init ms, init + first event ms)."""
    stack.cold()
    box = stack.sandbox(function)
    event = FIRST_EVENTS.get(function) or _api_event()
    stack.invoke(function, event)
    return box.init_ms, box.init_ms + box.invocations[0]


def _boto3(stack: DeployedStack) -> float:
    """``import boto3`` alone, in the same bare interpreter and folder (init of a
    "handler" that is boto3's own ``client``)."""
    box = Sandbox(
        "boto3",
        [stack.build / "WorkerFunction"],
        "boto3.client",
        stack.environment("WorkerFunction"),
        python=stack.python,
        log=stack.work / "boto3.log",
    )
    box.stop()
    return box.init_ms


def measure(
    builds: dict[str, Path], samples: int, dynamodb: str, moto: str, work: Path
) -> list[Figure]:
    python = runtime_python()
    stacks = {}
    for label, build in builds.items():
        (work / label).mkdir()
        stacks[label] = DeployedStack(
            build, dynamodb=dynamodb, moto=moto, python=python, work=work / label
        )
    times: dict[str, list[float]] = {}
    try:
        for stack in stacks.values():  # warm the file cache
            _sample(stack, "WorkerFunction")
            _boto3(stack)
        for _ in range(samples):
            for label, stack in stacks.items():
                times.setdefault(f"{label} boto3", []).append(_boto3(stack))
                for function in ("WorkerFunction", "ApiFunction"):
                    init, ready = _sample(stack, function)
                    times.setdefault(f"{label} {function} init", []).append(init)
                    times.setdefault(f"{label} {function} ready", []).append(ready)
    finally:
        for stack in stacks.values():
            stack.close()
    return _figures(times, list(builds))


def _figures(times: dict[str, list[float]], labels: list[str]) -> list[Figure]:
    med = {key: statistics.median(values) for key, values in times.items()}
    figures = []
    for label in labels:
        base = med[f"{label} boto3"]
        figures.append(Figure.info(f"{label}: import boto3 alone", f"{base:.0f} ms"))
        for function in ("WorkerFunction", "ApiFunction"):
            short = function.removesuffix("Function").lower()
            init, ready = med[f"{label} {function} init"], med[f"{label} {function} ready"]
            figures.append(
                Figure.at_most(
                    f"{label}: {short} init / boto3",
                    init / base,
                    TARGET,
                    ".2f",
                    note=f"{init:.0f} ms",
                )
            )
            figures.append(
                Figure.info(f"{label}: {short} ready (init + first event)", f"{ready:.0f} ms")
            )
    if len(labels) == 2:
        now, before = labels
        for function in ("WorkerFunction", "ApiFunction"):
            short = function.removesuffix("Function").lower()
            ratio = med[f"{now} {function} ready"] / med[f"{before} {function} ready"]
            figures.append(Figure.info(f"{short} ready, {now} / {before}", f"{ratio:.2f}"))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--build-dir", type=Path, help="a sam build folder (default: build now)")
    parser.add_argument("--baseline-build", type=Path, help="another build, measured alongside")
    args = parser.parse_args()
    from benchmarks.common import dynamodb_endpoint, ensure_aws_env
    from infra.local.moto_server import MotoServer

    ensure_aws_env()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        build = args.build_dir
        if build is None:
            say("sam build of template.yaml for this machine ...")
            sam = [str(Path(sys.executable).parent / "durable"), "sam"]
            build = build_for_host(ROOT / "template.yaml", work / "sam", sam, env=dict(os.environ))
        builds = {"now": build}
        if args.baseline_build is not None:
            builds["before"] = args.baseline_build
        say(f"cold starts: {args.samples} per function and build, bare python3.12 ...")
        with dynamodb_endpoint() as dynamodb, MotoServer() as moto:
            figures = measure(builds, args.samples, dynamodb, moto.endpoint_url, work)
    print(format_table(figures))


if __name__ == "__main__":
    main()
