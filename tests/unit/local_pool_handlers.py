"""Handlers the worker-pool tests run in real worker processes (imported by reference)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any


def sleeper(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Sleeps ``seconds``; with ``sigint`` first sends itself a SIGINT (a terminal's Ctrl-C
    reaches every process of the foreground group, the workers included)."""
    if event.get("fail"):
        raise ValueError(event["fail"])
    if event.get("sigint"):
        os.kill(os.getpid(), signal.SIGINT)
    time.sleep(float(event.get("seconds", 0)))
    return {"pid": os.getpid(), "remaining_ms": context.get_remaining_time_in_millis()}
