"""A handler the worker-pool retry tests run in real worker processes (imported by reference)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any


def flaky(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Fails the first ``failures`` invocations of its event (counted in a file of ``dir``),
    then "starts the run" (writes ``started``). ``how`` it fails: ``raise`` (as the worker
    does when the store does not answer) or ``die`` (a SIGKILL: a sandbox lost before it
    claimed the run)."""
    folder = Path(event["dir"])
    with (folder / "attempts").open("a") as attempts:
        attempts.write(f"{time.time()}\n")
    made = len((folder / "attempts").read_text().splitlines())
    if made <= int(event.get("failures", 1)):
        if event["how"] == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        raise ConnectionError("the store did not answer")
    (folder / "started").write_text(f"{time.time()}\n")
    return {"attempts": made}
