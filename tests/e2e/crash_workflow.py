"""The workflow of the SIGKILL sweep (``tests/e2e/test_sigkill_sweep.py``), served by
``durable dev --app tests.e2e.crash_workflow:app``.

It touches every kind of I/O boundary a run has: plain steps, a retried step (its backoff is
a durable timer), a step that checkpoints, a compensation, a sleep and a callback. Every
side effect goes through ``current_step().effect`` into the books of
``examples.services.FileServices`` (a JSON file under a lock, shared by the worker processes;
``DURABLE_SWEEP_EFFECTS`` names it), which count each request and each effect per key.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from durable import App, Context, RetryPolicy, StepFailed, TerminalError, current_step
from durable.engine.waits import Callback
from examples.services import FileServices

app = App()
WORKFLOW = "sweep-order"
CHUNKS = 3
# (position, step name, kind, status, effect actions) of a finished run, in order.
EXPECTED_LEDGER: list[tuple[str, str, str, str, list[str]]] = [
    ("0001", "provision", "step", "DONE", ["provision"]),
    ("0002", "import_rows", "step", "DONE", [f"chunk-{i}" for i in range(CHUNKS)]),
    ("0003", "reserve", "step", "DONE", ["reserve"]),
    ("0004", "charge", "step", "TERMINAL_FAILED", []),
    ("0005", "compensate:release", "compensation", "DONE", ["release"]),
    ("0006", "sleep", "sleep", "DONE", []),
    ("0007", "approval", "callback", "DONE", []),
    ("0008", "approval.submit", "step", "DONE", ["approval-link"]),
    ("0009", "ship", "step", "DONE", ["ship"]),
]
EXPECTED_EFFECTS = {
    "workspace": 1,
    "chunk": CHUNKS,
    "reservation": 1,
    "release": 1,
    "link": 1,
    "shipment": 1,
}


def books_path() -> Path:
    return Path(os.environ.get("DURABLE_SWEEP_EFFECTS", "sweep-effects.json"))


def books() -> FileServices:
    return FileServices(books_path())


def flaky_marker(books: Path | None = None) -> Path:
    """While this file exists, ``provision`` fails once (and removes it): a retry."""
    return (books or books_path()).with_suffix(".fail-once")


def fail_once() -> None:
    # Not FileServices.fail_next/maybe_fail: its decrement is lost when it raises (the
    # exception leaves its context manager before the books are written back), so it
    # fails every time. Removing a file is atomic across the worker processes.
    try:
        flaky_marker().unlink()
    except FileNotFoundError:
        return
    raise ConnectionError("upstream timed out (injected once)")


def effect(action: str, kind: str, result: str) -> str:
    shared = books()
    return str(
        current_step().effect(
            action, lambda key: shared.perform(kind, key, result), reconcile=shared.lookup
        )
    )


@app.step(retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=1)))
def provision(order: str) -> str:
    fail_once()
    return effect("provision", "workspace", f"ws-{order}")


@app.step
def import_rows(order: str) -> int:
    step = current_step()
    done = int(step.checkpoint_state or 0)  # resumes after the last checkpoint
    for chunk in range(done, CHUNKS):
        effect(f"chunk-{chunk}", "chunk", f"{order}-rows-{chunk}")
        step.checkpoint(chunk + 1)
    return CHUNKS


@app.step
def reserve(order: str) -> str:
    return effect("reserve", "reservation", f"room-{order}")


def release(reservation: str, order: str) -> str:
    return effect("release", "release", f"released {reservation}")


@app.step
def charge(order: str) -> str:
    raise TerminalError(f"card declined for {order}")


def send_link(callback: Callback) -> str:
    effect("approval-link", "link", callback.url)
    return callback.url  # recorded (its token redacted) as the output of "approval.submit"


@app.step
def ship(order: str, approval: str) -> str:
    return effect("ship", "shipment", f"shipped {order} ({approval})")


@app.workflow(name=WORKFLOW)
def sweep_order(ctx: Context, order: str) -> dict[str, Any]:
    workspace = provision(order)
    rows = import_rows(order)
    ctx.step(reserve, order, compensate=release)
    try:
        ctx.step(charge, order)
    except StepFailed:
        ctx.compensate()  # releases the reservation; the run goes on
    ctx.sleep(timedelta(hours=1))
    approval = ctx.wait_for_callback("approval", timeout=timedelta(days=30), submit=send_link)
    shipment = ship(order, str(approval))
    return {"workspace": workspace, "rows": rows, "shipment": shipment}
