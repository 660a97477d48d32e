"""Small builders for ledger records used across the test suites."""

from __future__ import annotations

from typing import Any

from durable.core.model import RunRecord, RunStatus, StepKind, StepRecord, StepStatus

T0 = "2026-01-01T00:00:00.000Z"


def t(seconds: int) -> str:
    """A timestamp ``seconds`` after T0 (same fixed-width format as the ledger)."""
    minutes, sec = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"2026-01-01T{hours:02d}:{minutes:02d}:{sec:02d}.000Z"


def make_run(run_id: str = "RUN1", **overrides: Any) -> RunRecord:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "workflow": "wf",
        "version": 1,
        "status": RunStatus.PENDING,
        "input": '{"a":1}',
        "input_hash": "h",
        "created_at": T0,
        "updated_at": T0,
        "due_at": T0,
    }
    fields.update(overrides)
    return RunRecord(**fields)


def make_step(
    run_id: str = "RUN1",
    position: str = "0001",
    status: StepStatus = StepStatus.DONE,
    output: str | None = '"ok"',
    **overrides: Any,
) -> StepRecord:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "position": position,
        "name": "step",
        "kind": StepKind.STEP,
        "status": status,
        "updated_at": T0,
        "output": output,
        "attempt": 1,
    }
    fields.update(overrides)
    return StepRecord(**fields)
