"""Readable text for runs and ledgers: tables for terminals, no dependencies."""

from __future__ import annotations

from collections.abc import Sequence

from durable.model import RunRecord, StepRecord, parse_time


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*headers), line.format(*("-" * w for w in widths))]
    out += [line.format(*row) for row in rows]
    return "\n".join(s.rstrip() for s in out)


def _short(text: str | None, limit: int = 48) -> str:
    if not text:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _duration(step: StepRecord) -> str:
    spans = [a for a in step.attempts if a.finished_at]
    if not spans:
        return ""
    last = spans[-1]
    assert last.finished_at is not None
    ms = (parse_time(last.finished_at) - parse_time(last.started_at)).total_seconds() * 1000
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def render_steps(steps: Sequence[StepRecord]) -> str:
    rows = []
    for s in steps:
        detail = s.error_summary if s.status != "DONE" else s.output
        if s.kind == "sleep" and s.wake_at:
            detail = f"wake at {s.wake_at}"
        rows.append(
            [
                s.position,
                s.name,
                s.kind,
                s.status.value,
                str(s.attempt or ""),
                _duration(s),
                _short(detail),
            ]
        )
    return table(["pos", "step", "kind", "status", "tries", "took", "result / error / wake"], rows)


def render_run(run: RunRecord) -> str:
    lines = [
        f"run {run.run_id}  {run.workflow} v{run.version}  {run.status.value}"
        + ("  NEEDS ATTENTION" if run.needs_attention else ""),
        f"  created {run.created_at}  updated {run.updated_at}"
        + (f"  by {run.requested_by}" if run.requested_by else ""),
        f"  input  {_short(run.input, 90)}",
    ]
    if run.output is not None:
        lines.append(f"  output {_short(run.output, 90)}")
    if run.error is not None:
        lines.append(f"  error  {run.error.type}: {_short(run.error.message, 90)}")
    if run.due_at and not run.terminal:
        lines.append(f"  due    {run.due_at}")
    return "\n".join(lines)


def render_runs(runs: Sequence[RunRecord]) -> str:
    rows = [
        [
            r.run_id,
            r.workflow,
            str(r.version),
            r.status.value + (" !" if r.needs_attention else ""),
            r.updated_at,
            _short(r.error.message if r.error else r.output, 40),
        ]
        for r in runs
    ]
    return table(["run", "workflow", "v", "status", "updated", "output / error"], rows)
