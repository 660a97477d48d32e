"""Readable text for runs and ledgers: tables and a timeline for terminals.

Works on plain dicts shaped like the API's views (``RunDetail``, ``StepView``), so the
CLI renders what the HTTP API returns and local code renders records via ``asdict``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from durable.core.model import parse_time
from durable.core.progress import progress_text
from durable.engine.children import parse_link

Row = Mapping[str, Any]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [line.format(*headers), line.format(*("-" * w for w in widths))]
    out += [line.format(*row) for row in rows]
    return "\n".join(s.rstrip() for s in out)


def short(value: Any, limit: int = 48) -> str:
    if value is None or value == "":
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    # Printable only: a name or message from outside may carry terminal escape sequences.
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _t(text: str | None) -> datetime | None:
    try:
        return parse_time(text) if text else None
    except ValueError:
        return None


def human(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _took(step: Row) -> str:
    done = [a for a in step.get("attempts") or [] if a.get("finished_at")]
    if not done:
        return ""
    start, end = _t(done[-1].get("started_at")), _t(done[-1].get("finished_at"))
    return human((end - start).total_seconds()) if start and end else ""


def batch_summary(decision: Any) -> str:
    """A batch's decision record as one line: ``ok (all): 2 succeeded, 1 canceled``."""
    try:
        counts = Counter(item["s"] for item in decision["items"])
        verdict = "ok" if decision["ok"] else "failed"
        kinds = ("succeeded", "failed", "canceled")
        parts = ", ".join(f"{counts[k]} {k}" for k in kinds if counts[k])
        failed = [str(i["name"]) for i in decision["items"] if i["s"] == "failed" and "name" in i]
        named = (
            f"; failed: {', '.join(failed[:3])}{' …' if len(failed) > 3 else ''}" if failed else ""
        )
        return f"{verdict} ({decision['rule']}): {parts or 'no branches'}{named}"
    except (KeyError, TypeError):
        return "recorded"


def branch_names(steps: Sequence[Row]) -> dict[str, str]:
    """Each branch's name by its position (``0004.0002``), from the decided batches'
    records: what ``durable show`` prints beside the steps a branch ran."""
    names: dict[str, str] = {}
    for step in steps:
        if step.get("kind") != "batch":
            continue
        output = step.get("output")
        try:
            decision: Any = json.loads(output) if isinstance(output, str) else output
            for index, item in enumerate(decision["items"], 1):
                if "name" in item:
                    names[f"{step.get('position')}.{index:04d}"] = str(item["name"])
        except (KeyError, TypeError, ValueError):
            continue
    return names


def _in_branch(position: str, names: Mapping[str, str]) -> str:
    """`` [name]`` of the innermost named branch ``position`` is in, or ''."""
    parts = position.split(".")
    for depth in range(len(parts) - 1, 1, -1):
        label = names.get(".".join(parts[:depth]))
        if label is not None:
            return f" [{label}]"
    return ""


def _detail(step: Row) -> str:
    status = str(step.get("status"))
    if step.get("kind") == "batch":
        output = step.get("output")
        return batch_summary(json.loads(output) if isinstance(output, str) else output)
    if step.get("kind") == "sleep" and step.get("wake_at"):
        return f"{'woke' if status == 'DONE' else 'wakes'} {step['wake_at']}"
    if step.get("kind") == "condition" and step.get("wake_at") and status != "DONE":
        return f"checks again {step['wake_at']}"
    if step.get("kind") == "child":
        child = step.get("child") or (step.get("detail") or {}).get("child", "?")
        if status == "WAITING":
            return f"waiting for child run {child}"
        outcome = short(step.get("output") if status == "DONE" else step.get("error_summary"), 30)
        return f"child run {child}: {outcome}"
    if step.get("kind") == "callback" and status == "WAITING":
        expires = step.get("expires_at")
        return f"waiting for an answer{f' until {expires}' if expires else ''}"
    if status in ("DONE", "COMPENSATED"):
        return short(step.get("output"))
    return short(step.get("error_summary"))


def render_steps(steps: Sequence[Row]) -> str:
    named = branch_names(steps)
    rows = [
        [
            str(s.get("position")),
            short(f"{s.get('name')}{_in_branch(str(s.get('position')), named)}", 60),
            str(s.get("kind")),
            str(s.get("status")),
            str(s.get("attempt") or ""),
            _took(s),
            _detail(s),
        ]
        for s in steps
    ]
    return table(["pos", "step", "kind", "status", "tries", "took", "result / error / wake"], rows)


def render_run(run: Row) -> str:
    flag = "  NEEDS ATTENTION" if run.get("needs_attention") else ""
    lines = [
        f"run {run['run_id']}  {run['workflow']} v{run['version']}  {run['status']}{flag}",
        f"  created {run['created_at']}  updated {run['updated_at']}"
        + (f"  started by {who_started(run)}" if run.get("requested_by") else ""),
    ]
    if run.get("idempotency_key"):
        lines.append(f"  key    {short(str(run['idempotency_key']), 200)}")
    if run.get("parent"):
        parent_id, position = parse_link(str(run["parent"]))
        lines.append(f"  parent {parent_id} (started at its position {position})")
    waiting = waiting_line(run)
    if waiting:
        lines.append(f"  waits  {waiting}")
    if run.get("progress"):
        lines.append(f"  progress {progress_line(run['progress'])}")
    if run.get("input") is not None:
        lines.append(f"  input  {short(run['input'], 90)}")
    if run.get("output") is not None:
        lines.append(f"  output {short(run['output'], 90)}")
    error = run.get("error")
    if error:
        lines.append(f"  error  {error_line(error, 90)}")
    if run.get("cost"):
        lines.append(f"  cost   {cost_line(run)}")
    if run.get("decisions"):
        lines.append(f"  next   {' | '.join(run['decisions'])}")
    return "\n".join(lines)


def usd(amount: float) -> str:
    """Dollars readable at any size: a run costs millionths, a month's runs dollars."""
    if amount >= 1:
        return f"${amount:,.2f}"
    if amount >= 0.01:
        return f"${amount:.4f}"
    return f"${amount:.7f}"


def usage_line(usage: Row) -> str:
    def n(key: str) -> float:
        return float(usage.get(key) or 0)

    parts = [
        f"{n('wcu'):g} WCU",
        f"{n('rcu'):g} RCU",
        f"{n('ddb'):g} requests",
        f"{n('inv'):g} invocations ({n('ms'):,.0f} ms)",
    ]
    if n("timers"):
        parts.append(f"{n('timers'):g} timers")
    return ", ".join(parts)


def cost_line(run: Row) -> str:
    """``$0.0000312 (34 WCU, 2 RCU, ...)`` of a run shown by the API."""
    cost = run.get("cost") or {}
    return (
        f"{usd(float(cost.get('usd') or 0))} at {cost.get('prices_of')} list prices "
        f"({usage_line(run.get('usage') or {})})"
    )


def audit_trail(run: Row) -> list[tuple[str, str, str, str]]:
    """Every action someone outside the workflow took on the run, oldest first, with who
    took it: (when, action, by, what). Operator decisions (the run's operations log),
    callbacks answered by name, signals sent through the API."""
    trail = [
        (
            str(op.get("at", "")),
            str(op.get("action", "")),
            str(op.get("by") or "?"),
            ", ".join(x for x in (op.get("reason"), op.get("detail")) if x),
        )
        for op in run.get("operations") or []
    ]
    for step in run.get("steps") or []:
        if step.get("completed_by"):
            answer = "rejected" if step.get("status") == "TERMINAL_FAILED" else "approved"
            what = f"{step.get('name')} at {step.get('position')}"
            trail.append((str(step.get("updated_at", "")), answer, step["completed_by"], what))
    for signal in run.get("signals") or []:
        if signal.get("sent_by"):
            trail.append(
                (str(signal.get("received_at", "")), "signal", signal["sent_by"], signal["name"])
            )
    return sorted(trail)


def render_audit(run: Row) -> str:
    """The audit trail as a table, or nothing when no one acted on the run."""
    trail = audit_trail(run)
    if not trail:
        return ""
    return table(["when", "action", "by", "what"], [list(row) for row in trail])


def error_line(error: Row, limit: int = 90) -> str:
    """``Type: message`` of a run's error, naming the type once: runs written before the
    message stopped carrying its type have ``Type: Type: ...`` otherwise."""
    kind, message = str(error.get("type") or "Error"), str(error.get("message") or "")
    if message.startswith(f"{kind}: "):
        message = message[len(kind) + 2 :]
    return f"{kind}: {short(message, limit)}" if message else kind


def progress_line(progress: Row) -> str:
    """``3/300 (1%) supplier 12  (set 2026-01-02T03:04:05.678Z)``: what the run last
    reported (``ctx.set_progress``) and when its code set it."""
    text = short(progress_text(progress), 240)
    return f"{text}  (set {progress['at']})" if progress.get("at") else text


def waiting_line(run: Row) -> str:
    """What a run that has not started waits for: a slot (flow control's line) or the
    start time its workflow's rate limit booked; '' for any other run."""
    if run.get("status") not in ("PENDING", "RUNNING"):
        return ""
    if run.get("queued_at"):
        place = run.get("place_in_line")
        where = f", {place} in line" if place else ""
        return f"for a concurrency slot since {run['queued_at']}{where}"
    if run.get("start_at") and str(run.get("updated_at", "")) < str(run["start_at"]):
        return f"to start at {run['start_at']} (rate limit)"
    return ""


def _status_cell(run: Row) -> str:
    text = str(run["status"]) + (" !" if run.get("needs_attention") else "")
    if run.get("status") == "PENDING" and run.get("queued_at"):
        return text + " (in line)"
    if run.get("status") == "PENDING" and run.get("start_at"):
        return text + " (rate)"
    return text


_ISO = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d)(:\d\d(\.\d+)?)?Z")


def waits_for(run: Row) -> str:
    """What a run waits for, in a listing's words: "callback approval until 2026-12-07
    08:38", "in line since ...", "starts ... (rate limit)"; '' for a run not waiting."""
    waiting = run.get("waiting_for")
    if run.get("status") == "WAITING" and waiting:
        text = _ISO.sub(lambda m: f"{m.group(1)} {m.group(2)}", str(waiting))
        return text.replace("sleep sleep ", "sleep ", 1)  # an unnamed sleep is "sleep"
    if run.get("status") == "PENDING" and run.get("queued_at"):
        return "in line for a slot"
    if run.get("status") == "PENDING" and run.get("start_at"):
        return f"starts {_ISO.sub(lambda m: f'{m.group(1)} {m.group(2)}', str(run['start_at']))}"
    return ""


def who_started(run: Row) -> str:
    """Who started a run, in words: ``schedule nightly`` (its ``requested_by`` is
    ``schedule:nightly``), ``hook github``, ``user/alice`` (an IAM caller's ARN by its last
    part), ``run <id>`` for a child."""
    who = str(run.get("requested_by") or "")
    if who.startswith("arn:"):
        who = who.rsplit(":", 1)[-1]
    for prefix in ("schedule:", "hook:"):
        if who.startswith(prefix):
            who = f"{prefix[:-1]} {who[len(prefix) :].split('/', 1)[0]}"
    if not who and run.get("parent"):
        who = f"run {parse_link(str(run['parent']))[0]}"
    return who


def started_by(run: Row, limit: int = 24) -> str:
    """``who_started``, with the run's key after it (cut to ``limit``)."""
    who = who_started(run)
    key = run.get("idempotency_key")
    return f"{who} (key {short(str(key), limit)})" if key else who


def render_runs(runs: Sequence[Row], wide: bool = False) -> str:
    """The runs as a table; ``wide``: every cell whole (a key, a long error), for a
    terminal that scrolls sideways or a ``grep``."""

    def cell(text: str, limit: int) -> str:
        return short(text, 100_000 if wide else limit)

    rows = [
        [
            str(r["run_id"]),
            str(r["workflow"]),
            str(r["version"]),
            _status_cell(r),
            cell(progress_text(r.get("progress")), 28),
            str(r["updated_at"]),
            cell(waits_for(r), 48),
            cell(started_by(r, 100_000 if wide else 24), 36),
            cell((r.get("error") or {}).get("message") or "", 40),
        ]
        for r in runs
    ]
    headers = [
        *("run", "workflow", "v", "status", "progress", "updated"),
        *("waiting for", "started by", "error"),
    ]
    return table(headers, rows)


def _span(step: Row, previous_end: datetime | None) -> tuple[datetime | None, datetime | None]:
    attempts = step.get("attempts") or []
    start = _t(attempts[0].get("started_at")) if attempts else previous_end
    end = _t(attempts[-1].get("finished_at")) if attempts else None
    if step.get("kind") in ("sleep", "callback", "signal", "condition"):
        end = (
            _t(step.get("wake_at")) if step.get("status") != "DONE" else _t(step.get("updated_at"))
        )
        end = end or _t(step.get("updated_at"))
    return start, end or _t(step.get("updated_at"))


def timeline(run: Row, steps: Sequence[Row], width: int = 50, scale: float = 1.0) -> str:
    """A bar per step on the run's time axis: █ work, ░ waiting, ✗ failed.

    ``scale``: durable dev's ``--time-scale``; the ledger's times are then virtual, and the
    axis says so with the real time beside it."""
    begin = _t(run.get("created_at"))
    spans: list[tuple[Row, datetime | None, datetime | None]] = []
    previous = begin
    for step in steps:
        start, end = _span(step, previous)
        spans.append((step, start, end))
        previous = end or previous
    ends = [e for _, _, e in spans if e] + [t for t in [_t(run.get("updated_at"))] if t]
    if begin is None or not ends:
        return "(no timeline: the run has no timed steps yet)"
    finish = max(ends)
    total = max((finish - begin).total_seconds(), 1e-3)
    # Wide enough for the longest label: a nested position (0004.0002.0001) is 14 wide.
    label_width = max([len(f"{s.get('position')} {s.get('name')}") for s in steps] + [4]) + 2
    out = [f"{'':<{label_width}}|{'0':<{width // 2}}{human(total):>{width - width // 2}}|"]
    if scale != 1:
        out[0] += f" virtual time x{scale:g} ({human(total / scale)} real)"
    for step, start, end in spans:
        a = int(((start or begin) - begin).total_seconds() / total * (width - 1))
        b = int(((end or start or begin) - begin).total_seconds() / total * (width - 1))
        waiting = step.get("kind") in ("sleep", "callback", "signal", "condition")
        mark = "✗" if "FAIL" in str(step.get("status")) else ("░" if waiting else "█")
        bar = " " * a + mark * max(1, b - a + 1)
        label = f"{step.get('position')} {step.get('name')}"
        out.append(f"{label:<{label_width}}|{bar:<{width}}| {step.get('status')}")
    return "\n".join(out)
