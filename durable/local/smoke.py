"""``durable smoke`` (``make smoke`` in a project made by ``durable init``): the stack built
for this machine's CPU, and each function's handler run from its build folder in a bare
``python3.12``, as this repository's deployed tier runs them.

The template builds arm64 wheels; a package built for one CPU fails on the other with an
``ImportError``, so the deploy build cannot be run as is on an x86_64 laptop. The smoke
build goes to a folder of its own (``.aws-sam/smoke``, not the deploy build), made by
``durable sam build --architecture <this machine's>``. The functions then run on the
DynamoDB of this folder's ``durable dev`` when one runs (tables of their own, removed
after), else on an embedded moto server, which also stands in for Scheduler, Secrets
Manager, KMS and S3. What is checked: every function starts (an import that fails, a
module missing from the package), and each answers one event without an error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

BUILD_DIR = Path(".aws-sam") / "smoke"
NO_RUN = "0" * 26  # a run id of the worker event's shape that no ledger holds


class Stack(Protocol):
    """What the smoke needs of ``durable.local.deployed.DeployedStack``."""

    resources: dict[str, Any]

    def invoke(self, function: str, event: Any) -> Any: ...
    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]: ...
    def sweep(self) -> Any: ...
    def drain(self, limit: int = 100) -> list[Any]: ...
    def close(self) -> None: ...


@dataclass
class Check:
    function: str
    what: str
    ok: bool
    detail: str = ""
    ms: float = 0.0


def functions(stack: Stack) -> list[str]:
    return sorted(
        name
        for name, resource in stack.resources.items()
        if resource.get("Type") == "AWS::Serverless::Function"
    )


def _events(stack: Stack) -> dict[str, tuple[str, Callable[[], Any]]]:
    """One harmless event per function the template defines (what it is, how to send it)."""
    return {
        # The app's workflows: the app imported, the route table answered. (A bare
        # GET /runs is refused: runs are listed per workflow.)
        "ApiFunction": ("GET /workflows", lambda: _ok_status(stack.api("GET", "/workflows"))),
        # The worker's event: {run_id, reason, hop}. A run no ledger holds: it looks
        # in the ledger and finds nothing to do.
        "WorkerFunction": (
            "a hand-off of a run that does not exist",
            lambda: stack.invoke("WorkerFunction", {"run_id": NO_RUN, "reason": "smoke"}),
        ),
        "SweeperFunction": ("EventBridge's scheduled event", stack.sweep),
        "PurgeFunction": (
            "a stream batch with no records",
            lambda: stack.invoke("PurgeFunction", {"Records": []}),
        ),
    }


def _ok_status(answer: tuple[int, Any]) -> Any:
    status, body = answer
    if status != 200:
        raise RuntimeError(f"answered {status}: {json.dumps(body)[:300]}")
    return body


def check(
    stack: Stack, workflow: str | None = None, given: Any = None, say: Callable[[str], None] = print
) -> list[Check]:
    """Every function of ``stack`` started (its init) and sent its event; with ``workflow``,
    a run of it started through the API and driven by the worker until it waits or ends."""
    checks: list[Check] = []
    events = _events(stack)
    for function in functions(stack):
        what, send = events.get(function, ("started (no event sent)", lambda: None))
        began = time.perf_counter()
        try:
            if function not in events:
                getattr(stack, "sandbox", lambda _: None)(function)
            send()
            found = Check(function, what, True, ms=(time.perf_counter() - began) * 1000)
        except Exception as error:  # the function's own error, said with its output
            found = Check(function, what, False, str(error).strip()[:2000])
        checks.append(found)
        mark = "✓" if found.ok else "✗"
        say(f"{mark} {function:<20} {what}" + (f" ({found.ms:.0f} ms)" if found.ok else ""))
        if not found.ok:
            say("    " + found.detail.replace("\n", "\n    "))
    if workflow is not None:
        checks.append(_run(stack, workflow, given, say))
    return checks


def _run(stack: Stack, workflow: str, given: Any, say: Callable[[str], None]) -> Check:
    what = f"a run of {workflow}"
    try:
        status, body = stack.api("POST", f"/workflows/{workflow}/runs", given)
        if status != 202:
            raise RuntimeError(f"the API answered {status}: {json.dumps(body)[:300]}")
        stack.drain()
        shown = _ok_status(stack.api("GET", f"/runs/{body['run_id']}"))
        if shown["status"] == "FAILED":
            raise RuntimeError(f"run {body['run_id']} failed: {shown.get('error')}")
        found = Check("WorkerFunction", what, True, f"{body['run_id']} {shown['status']}")
    except Exception as error:
        found = Check("WorkerFunction", what, False, str(error).strip()[:2000])
    say(("✓ " if found.ok else "✗ ") + f"{what}: {found.detail}")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Build for this machine, run every handler; 0 when every check passed."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m durable.local.smoke", description=__doc__)
    parser.add_argument("--workflow", help="also start a run of this workflow (steps run)")
    parser.add_argument("--input", default="null", help="the run's input, JSON")
    parser.add_argument("--build-dir", default=str(BUILD_DIR))
    parser.add_argument("--no-build", action="store_true", help="use the last smoke build")
    args = parser.parse_args(argv)
    try:
        return run(
            Path("."),
            Path(args.build_dir),
            workflow=args.workflow,
            given=json.loads(args.input),
            build=not args.no_build,
        )
    except RuntimeError as error:
        print(f"error: {error}")
        return 1


def run(
    project: Path,
    build_dir: Path,
    *,
    workflow: str | None = None,
    given: Any = None,
    build: bool = True,
    say: Callable[[str], None] = print,
) -> int:
    from durable.local import dev_file, sam
    from durable.local.deployed import host_architecture

    architecture = host_architecture()
    began = time.perf_counter()
    # Absolute: each function runs in a process of its own, in a folder of its own, where
    # the project's relative ``.aws-sam/smoke`` names nothing.
    project, build_dir = project.resolve(), build_dir.resolve()
    if build:
        say(f"• building for this machine ({architecture}) into {build_dir}…")
        code = sam.run(["build", "--architecture", architecture, "--build-dir", str(build_dir)])
        if code != 0:
            return code
    python = sam.find_runtime_python()
    if python is None:
        raise RuntimeError(sam.missing_runtime_message())
    dev = dev_file.folder_dev(project / ".durable")
    with _servers(dev) as (dynamodb, moto):
        say(f"• DynamoDB {dynamodb} ({'durable dev' if dev else 'embedded moto'})")
        stack = _stack(build_dir, dynamodb, moto, str(python), project / ".durable" / "smoke")
        try:
            checks = check(stack, workflow, given, say)
        finally:
            stack.close()
    failed = [c for c in checks if not c.ok]
    took = time.perf_counter() - began
    say(f"• {len(checks) - len(failed)} of {len(checks)} checks passed in {took:.1f} s")
    return 1 if failed else 0


def _stack(build: Path, dynamodb: str, moto: str, python: str, work: Path) -> Stack:
    from durable.local.deployed import DeployedStack

    work.mkdir(parents=True, exist_ok=True)
    return DeployedStack(build, dynamodb=dynamodb, moto=moto, python=python, work=work)


class _servers:
    """The dev stack's DynamoDB (when this folder's ``durable dev`` runs) and an embedded
    moto server for the rest (and for DynamoDB when no dev runs)."""

    def __init__(self, dev: dict[str, Any] | None) -> None:
        self.dev = dev
        self.moto: Any = None

    def __enter__(self) -> tuple[str, str]:
        from moto.server import ThreadedMotoServer

        self.moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.moto.start()
        host, port = self.moto.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        dynamodb = str(self.dev["dynamodb"]) if self.dev and self.dev.get("dynamodb") else ""
        return dynamodb or endpoint, endpoint

    def __exit__(self, *_: object) -> None:
        self.moto.stop()


if __name__ == "__main__":
    raise SystemExit(main())
