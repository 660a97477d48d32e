"""Cold start of every handler, against ``import boto3`` measured in the same run (issue 47).

    python -m benchmarks.cold_start [--samples 7] [--build-dir DIR] [--before DIR] [--repo]
                                    [--clock cpu]

The package is what a plain ``sam build`` makes (the SAM CLI itself, python3.12 on PATH:
template.yaml's ``BuildMethod: makefile`` compiles it), or ``--build-dir``, a ``sam build``
folder made before. Without the SAM CLI or python3.12, or with ``--repo``, the repo's own
package in this virtualenv is measured instead; the output says which.

Each sample is a fresh interpreter (``-I -S -B`` on the package: the package and the
standard library, nothing written, as on Lambda's read-only ``/var/task``), samples of
every case interleaved, medians printed:

* ``import``: ``import handlers.<name>`` (Lambda's INIT, on demand);
* ``+ compose``: then the runtime composed (``LambdaHandler.prepare``: settings, the app,
  Powertools, the engine, the store client);
* ``+ 1st event``: then an event that reads no storage (the worker's ``describe``, the API's
  ``GET /workflows``, a malformed SQS message for events, an empty stream batch for the
  purge; the sweeper has none);
* ``INIT (snap-start)``: the import with ``AWS_LAMBDA_INITIALIZATION_TYPE=snap-start``,
  which composes during INIT, and ``1st event`` after it;
* the same package with its bytecode removed (``no .pyc``);
* with ``--before``, a second ``sam build`` folder (the package before a change), its
  samples interleaved with the others';
* the baselines: ``import boto3``, and ``import boto3`` plus a DynamoDB client; and that
  plus one pydantic model, the floor for an app whose types are pydantic models (the
  examples', ``durable init``'s): pydantic's first model loads most of pydantic.

Times are wall time; ``--clock cpu`` takes each interpreter's own CPU time instead, which
other processes on a busy machine inflate far less. Ratios are to the baselines. The
target (issue 47): the worker's import plus composition, with bytecode, at most 1.5x
``import boto3`` plus a DynamoDB client.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HANDLERS = ("worker", "api", "sweeper", "events", "purge")
TARGET = 1.5

# Run in the measured interpreter (standard library only until it imports the package).
_DRIVER = r"""
import json, sys, time
clock = time.process_time if sys.argv[4] == "cpu" else time.perf_counter
began = clock()
folder, case = sys.argv[1], sys.argv[2]
sys.path.insert(0, folder)
marks = {}
if case in ("boto3", "pydantic"):
    import boto3
    marks["import"] = clock() - began
    boto3.client("dynamodb", region_name="us-east-1")
    marks["client"] = clock() - began
    if case == "pydantic":
        from pydantic import BaseModel
        class Model(BaseModel):
            name: str
        marks["model"] = clock() - began
else:
    import importlib
    module = importlib.import_module("handlers." + case)
    marks["import"] = clock() - began
    handler = module.handler
    if handler.runtime is None:
        handler.prepare()
        marks["compose"] = clock() - began
    event = json.loads(sys.argv[3])
    if event is not None:
        class Context:
            function_name = "durable-" + case
            function_version = "$LATEST"
            invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:x"
            memory_limit_in_mb = 512
            aws_request_id = "00000000-0000-0000-0000-000000000000"
            log_group_name = "/aws/lambda/x"
            log_stream_name = "x"
            def get_remaining_time_in_millis(self):
                return 60000
        try:
            handler(event, Context())
        except Exception:
            pass  # the events handler raises when a whole batch failed: Lambda retries it
        marks["event"] = clock() - began
print(json.dumps({k: v * 1000 for k, v in marks.items()}))
"""

ENVIRONMENT = {
    "DURABLE_APP": "examples.app:app",
    "DURABLE_LEDGER_TABLE": "durable-ledger-bench",
    "DURABLE_IDEMPOTENCY_TABLE": "durable-idempotency-bench",
    "DURABLE_WORKER_FUNCTION": (
        "arn:aws:lambda:us-east-1:123456789012:function:durable-worker-bench:live"
    ),
    "DURABLE_SERVICE_NAME": "durable-bench",
    "DURABLE_METRICS_NAMESPACE": "Durable",
    "DURABLE_TRACING": "false",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_LAMBDA_FUNCTION_NAME": "durable-bench",
    # Nothing measured may reach a network: an unroutable endpoint makes one fail loudly.
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "LANG": "C.UTF-8",
}


def first_events() -> dict[str, object]:
    from durable.local.apigw import to_rest_event

    return {
        "worker": {"control": "describe"},
        "api": to_rest_event("GET", "/workflows", {"Host": "bench"}, b""),
        "sweeper": None,  # every sweep reads the store
        # One SQS message that is not a start request: refused without reading the store
        # (a batch whose every record failed is raised, for Lambda to retry).
        "events": {
            "Records": [
                {
                    "messageId": "bench-1",
                    "receiptHandle": "bench",
                    "body": "not json",
                    "attributes": {
                        "ApproximateReceiveCount": "1",
                        "ApproximateFirstReceiveTimestamp": "1700000000000",
                        "SenderId": "AIDAEXAMPLE",
                        "SentTimestamp": "1700000000000",
                    },
                    "messageAttributes": {},
                    "md5OfBody": "",
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:durable-start-bench",
                    "awsRegion": "us-east-1",
                }
            ]
        },
        "purge": {"Records": []},
    }


def built_package(build_dir: Path | None, work: Path) -> tuple[Path, str, str] | None:
    """(folder, interpreter, label) of a plain ``sam build``; None when it cannot be made."""
    from durable.local.sam import SamError, ensure_sam, find_runtime_python, runtime_env
    from infra.local.deployed_stack import build_for_host

    python = find_runtime_python()
    if python is None:
        return None
    if build_dir is not None:
        return build_dir / "WorkerFunction", str(python), f"sam build folder {build_dir}"
    try:
        sam = ensure_sam(say=lambda text: print(text, file=sys.stderr))
    except SamError:
        return None
    print("plain sam build of template.yaml for this machine ...", file=sys.stderr)
    env = {k: v for k, v in runtime_env(python).items() if not k.startswith("DURABLE_")}
    build = build_for_host(ROOT / "template.yaml", work / "sam", [str(sam)], env=env)
    return build / "WorkerFunction", str(python), "the package a plain `sam build` made"


def without_bytecode(folder: Path, work: Path) -> Path:
    copy = work / "no-pyc"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return copy


def sample(
    python: str,
    folder: Path,
    case: str,
    event: object,
    bare: bool,
    env: dict[str, str],
    clock: str = "wall",
) -> dict[str, float]:
    flags = ["-I", "-S", "-B"] if bare else ["-B"]
    done = subprocess.run(
        [python, *flags, "-c", _DRIVER, str(folder), case, json.dumps(event), clock],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{case} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(
    python: str, folders: dict[str, Path], samples: int, bare: bool, clock: str = "wall"
) -> dict[str, float]:
    events = first_events()
    base_env = {"PATH": os.environ.get("PATH", ""), **ENVIRONMENT}
    init_env = {**base_env, "AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start"}
    demand_env = {**base_env, "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand"}
    times: dict[str, list[float]] = {}
    for round_ in range(samples + 1):  # the first round warms the file cache
        for label, folder in folders.items():
            for case in ("boto3", "pydantic", *HANDLERS):
                cases = [("", demand_env)] + ([(" init", init_env)] if case in HANDLERS else [])
                for suffix, env in cases:
                    marks = sample(python, folder, case, events.get(case), bare, env, clock)
                    if round_ == 0:
                        continue
                    for mark, ms in marks.items():
                        times.setdefault(f"{label} {case}{suffix} {mark}", []).append(ms)
    return {key: statistics.median(values) for key, values in times.items()}


def table(med: dict[str, float], labels: list[str]) -> str:
    rows = []
    for label in labels:
        boto3 = med[f"{label} boto3 import"]
        client = med[f"{label} boto3 client"]
        rows.append((f"{label}: import boto3", f"{boto3:.0f} ms", "1.00", f"{boto3 / client:.2f}"))
        rows.append(
            (
                f"{label}: import boto3 + DynamoDB client",
                f"{client:.0f} ms",
                f"{client / boto3:.2f}",
                "1.00",
            )
        )
        model = med[f"{label} pydantic model"]
        rows.append(
            (
                f"{label}: import boto3 + DynamoDB client + a pydantic model",
                f"{model:.0f} ms",
                f"{model / boto3:.2f}",
                f"{model / client:.2f}",
            )
        )
        for name in HANDLERS:
            for mark, what in (
                ("import", "import"),
                ("compose", "+ compose"),
                ("event", "+ 1st event"),
            ):
                value = med.get(f"{label} {name} {mark}")
                if value is not None:
                    rows.append(
                        (
                            f"{label}: {name} {what}",
                            f"{value:.0f} ms",
                            f"{value / boto3:.2f}",
                            f"{value / client:.2f}",
                        )
                    )
            init = med.get(f"{label} {name} init import")
            if init is not None:
                rows.append(
                    (
                        f"{label}: {name} INIT (snap-start, composed)",
                        f"{init:.0f} ms",
                        f"{init / boto3:.2f}",
                        f"{init / client:.2f}",
                    )
                )
                event = med.get(f"{label} {name} init event")
                if event is not None:
                    after = event - init
                    rows.append(
                        (
                            f"{label}: {name} 1st event after it",
                            f"{after:.0f} ms",
                            f"{after / boto3:.2f}",
                            f"{after / client:.2f}",
                        )
                    )
    head = ("case", "median", "/ boto3", "/ boto3+client")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]

    def line(row: tuple[str, ...]) -> str:
        cells = enumerate(zip(row, widths, strict=True))
        return " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in cells)

    return "\n".join([line(head), "-+-".join("-" * w for w in widths), *(line(r) for r in rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--build-dir", type=Path, help="a sam build folder (default: build now)")
    parser.add_argument(
        "--before",
        type=Path,
        help="a second sam build folder (the package before a change), measured with bytecode "
        "in the same rounds, sample by sample",
    )
    parser.add_argument("--repo", action="store_true", help="the repo's package, this venv")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time (what Lambda bills and users wait for; the default) or the "
        "interpreter's own CPU time, steadier on a shared, busy machine",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        found = None if args.repo else built_package(args.build_dir, work)
        if found is None:
            folder, python, source, bare = (
                ROOT,
                sys.executable,
                "the repo's package in this virtualenv (no sam build: the SAM CLI or "
                "python3.12 is missing, or --repo)",
                False,
            )
            folders = {"repo": folder}
        else:
            folder, python, source = found
            bare = True
            folders = {".pyc": folder, "no .pyc": without_bytecode(folder, work)}
            if args.before is not None:
                folders["before .pyc"] = args.before / "WorkerFunction"
        print(f"package: {source}")
        print(
            f"interpreter: {python}; {args.samples} fresh interpreters per case, medians "
            f"of {'CPU' if args.clock == 'cpu' else 'wall'} time\n"
        )
        med = measure(python, folders, args.samples, bare, args.clock)
    print(table(med, list(folders)))
    first = next(iter(folders))
    worker = med[f"{first} worker compose"] / med[f"{first} boto3 client"]
    verdict = "met" if worker <= TARGET else "MISSED"
    print(
        f"\nworker import + compose / (import boto3 + DynamoDB client), {first}: "
        f"{worker:.2f} (target <= {TARGET}: {verdict})"
    )
    # An app whose types are pydantic models (the examples, the durable init template)
    # pays for pydantic's first model whatever library runs it: the floor under the ratio.
    floor = med[f"{first} pydantic model"] / med[f"{first} boto3 client"]
    print(
        f"of which the floor for an app with pydantic models, {first}: {floor:.2f} "
        f"(import boto3 + DynamoDB client + one model); the rest (durable, Powertools, the "
        f"app's own code): {worker - floor:.2f}"
    )


if __name__ == "__main__":
    main()
