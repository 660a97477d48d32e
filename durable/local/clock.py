"""A scaled virtual clock shared by every process of ``durable dev``.

``--time-scale 86400`` makes a day pass in a second so a demo's three-day sleep ends in
seconds. All processes compute the same virtual time from one persisted epoch
(``virtual = virtual_epoch + (real - real_epoch) * scale``), so a restart keeps it.
Durations the engine measures in real terms (leases, the invocation's remaining time)
are scaled by the composition root so they stay real seconds long.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path

# The clock itself is in durable.core.clock (the deployed composition reads it too).
from durable.core.clock import Epoch, ScaledClock, read

__all__ = ["Epoch", "ScaledClock", "load_or_create", "read"]


def load_or_create(path: Path, scale: float) -> Epoch:
    """The persisted epoch, or a new one starting now. A different scale restarts the
    mapping from the current virtual time, so virtual time never jumps backwards."""
    if path.exists():
        saved = Epoch(**json.loads(path.read_text()))
        if saved.scale == scale:
            return saved
        now_virtual = ScaledClock(saved).now().timestamp()
        epoch = Epoch(scale, time.time(), now_virtual)
    else:
        now = time.time()
        epoch = Epoch(scale, now, now)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(epoch)))
    os.replace(tmp, path)  # atomic: a crash never leaves half a clock
    return epoch
