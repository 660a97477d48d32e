"""``durable dev``'s console: one readable line per run event, instead of log JSON.

On AWS the handlers log JSON for CloudWatch and emit metrics; at a terminal that is noise.
``durable dev`` sets ``DURABLE_CONSOLE_EVENTS`` (a local-only setting) and the handlers
wrap their ledger in :class:`ConsoleLedger`, which watches what the engine *writes* and
says what happened: a run started, a step finished, failed or will retry, the run waits
(for what, and how to answer it), resumed, was taken over, finished. Watching the writes,
not instrumenting the engine, keeps the core free of presentation code, and a line is
printed only for a write that took effect, so what the console says is what the ledger
holds. ``durable dev --verbose`` keeps the raw logs instead.

Each line is one ``write`` of a whole line to stdout, so lines from several worker
processes interleave but never mix.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from durable.core.ledger_watch import WatchedLedger
from durable.core.model import (
    RunRecord,
    RunStatus,
    SignalRecord,
    StepKind,
    StepRecord,
    StepStatus,
    parse_time,
)
from durable.core.ports import ChildReport, Claim, Ledger, RunGuard
from durable.ops.render import batch_summary, human
from durable.ops.render import short as render_short

_WAITS = {
    StepKind.SLEEP: "sleep",
    StepKind.CALLBACK: "callback",
    StepKind.SIGNAL: "signal",
    StepKind.CONDITION: "condition",
}
_FINISH_MARK = {RunStatus.SUCCEEDED: "✓", RunStatus.FAILED: "✗", RunStatus.CANCELED: "■"}


def short(text: str | None, limit: int = 120) -> str:
    """One line of at most ``limit`` characters, printable (``render.short``, the CLI's):
    an error message from an outside API may carry terminal escape sequences."""
    return render_short(text, limit)


# ANSI colours of a line's mark (and of its text for the ends of a run): what went well
# green, what failed red, what needs someone yellow, waits and resumptions cyan.
_GREEN, _RED, _YELLOW, _CYAN, _DIM, _RESET = (
    "\033[32m",
    "\033[31m",
    "\033[33m",
    "\033[36m",
    "\033[2m",
    "\033[0m",
)
_COLOURS = {
    "✓": _GREEN,
    "▶": _GREEN,
    "✗": _RED,
    "⚠": _YELLOW,
    "↻": _YELLOW,
    "⌛": _YELLOW,
    "■": _YELLOW,
    "⏸": _CYAN,
    "▷": _CYAN,
    "✉": _CYAN,
    "⏱": _GREEN,  # a schedule's fire started its run
    "⤼": _YELLOW,  # a schedule's fire skipped, missed, or a repeat
}


def colour_wanted(out: TextIO, environ: Mapping[str, str]) -> bool:
    """Colour for a terminal, unless the user opted out (``NO_COLOR``, no-color.org) or the
    terminal cannot show it (``TERM=dumb``); ``FORCE_COLOR`` turns it on anywhere."""
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty()) and environ.get("TERM") != "dumb"


class Console:
    """Formats and prints event lines: ``HH:MM:SS  workflow  run_id  mark what``.

    ``colour``: None decides by the output (``colour_wanted``, on the process's
    environment: a terminal convention, read where the line is written)."""

    def __init__(
        self,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.time,
        colour: bool | None = None,
        scale: float = 1.0,
    ) -> None:
        self._out = out
        self._clock = clock
        self._colour = colour
        # ``durable dev --time-scale``: the ledger's times are virtual, a person reads real
        # ones, so a duration is said in both (``span``) wherever they differ.
        self.scale = scale
        # Run id -> workflow name, learned from the run writes this process saw.
        self.workflows: dict[str, str] = {}

    def say(self, run_id: str, mark: str, text: str, *, workflow: str | None = None) -> None:
        """``workflow``: the name in the workflow column when the line names no run this
        process has seen (a schedule's fire that started nothing)."""
        stamp = time.strftime("%H:%M:%S", time.localtime(self._clock()))
        workflow = self.workflows.get(run_id, workflow or "")
        out = self._out or sys.stdout
        text = short(text, 400)
        line = f"{stamp}  {workflow:<16} {run_id}  {mark} {text}"
        colour = self._colour
        if colour is None:
            import os

            colour = self._colour = colour_wanted(out, os.environ)
        tint = _COLOURS.get(mark) if colour else None
        if tint is not None:
            if mark in _FINISH_MARK.values():  # a run's end: the whole text in its colour
                body = f"{tint}{mark} {text}{_RESET}"
            else:
                body = f"{tint}{mark}{_RESET} {text}"
            line = f"{_DIM}{stamp}{_RESET}  {workflow:<16} {run_id}  {body}"
        out.write(line + "\n")
        out.flush()

    def learn(self, run: RunRecord) -> None:
        self.workflows[run.run_id] = f"{run.workflow} v{run.version}"

    def span(self, virtual_seconds: float) -> str:
        """A duration of the ledger's clock as a person lives it: ``9 min`` at real time,
        ``150 ms real, 9 min virtual`` under a time scale (a 3-second step is not 9 min)."""
        virtual, real = human(virtual_seconds), human(virtual_seconds / self.scale)
        return virtual if real == virtual else f"{real} real, {virtual} virtual"

    def log_handler(self) -> logging.Handler:
        """A handler that prints ``ctx.logger`` and step logger records as console lines
        (the console's own format, not the JSON CloudWatch reads)."""
        return _LogLines(self)


# What a log record's level looks like in the console (INFO needs no word).
_LEVEL_MARK = {"WARNING": "warning: ", "ERROR": "error: ", "CRITICAL": "critical: "}


class _LogLines(logging.Handler):
    """``ctx.logger.info("...")`` as ``HH:MM:SS  workflow  run_id  » message``: in
    ``durable dev``'s console, next to the event lines of the same run."""

    def __init__(self, console: Console) -> None:
        super().__init__(logging.INFO)
        self._console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            run_id = str(getattr(record, "run_id", "") or "")
            if run_id and run_id not in self._console.workflows:
                workflow = getattr(record, "workflow", None)
                if workflow:
                    self._console.workflows[run_id] = (
                        f"{workflow} v{getattr(record, 'version', '?')}"
                    )
            step = getattr(record, "step", None)
            where = f"step {step}: " if step else ""
            text = f"{_LEVEL_MARK.get(record.levelname, '')}{where}{record.getMessage()}"
            if record.exc_info and record.exc_info[1] is not None:
                text += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
            self._console.say(run_id or "-" * 26, "»", text)
        except Exception:  # a log line must never break the code that logs it
            self.handleError(record)


class ConsoleLedger(WatchedLedger):
    """A ledger that prints a line for each run event it writes; otherwise the same."""

    def __init__(self, ledger: Ledger, console: Console) -> None:
        super().__init__(ledger)
        self._console = console

    def create_run(self, run: RunRecord) -> RunRecord:
        stored = self._ledger.create_run(run)
        self._console.learn(stored)
        if stored.run_id == run.run_id and stored.created_at == run.created_at:
            # An IAM caller's ARN, shortened to what names it: user/alice, assumed-role/x.
            who = (run.requested_by or "").rsplit(":", 1)[-1]
            by = f" by {who}" if who else ""
            self._console.say(run.run_id, "▶", f"started{by}")
        return stored

    def claim(
        self,
        run_id: str,
        owner: str,
        *,
        now: str,
        lease_until: str,
        stale_before: str,
        due_at: str | None = None,
    ) -> Claim | None:
        claim = super().claim(
            run_id,
            owner,
            now=now,
            lease_until=lease_until,
            stale_before=stale_before,
            due_at=due_at,
        )
        if claim is not None:
            self._console.learn(claim.run)
            if claim.took_over:
                self._console.say(run_id, "⚠", "taken over: the worker holding it stopped")
            elif claim.run.fence > 1:  # claimed before: a wait ended or a hand-off
                self._console.say(run_id, "▷", "resumed")
        return claim

    def complete_waiting(self, step: StepRecord, *, token_hash: str | None, now: str) -> None:
        self._ledger.complete_waiting(step, token_hash=token_hash, now=now)
        verdict = "rejected" if step.status == StepStatus.TERMINAL_FAILED else "answered"
        self._console.say(step.run_id, "✉", f"callback {step.name} {verdict}")

    def add_signal(self, signal: SignalRecord, *, now: str) -> None:
        self._ledger.add_signal(signal, now=now)
        self._console.say(signal.run_id, "✉", f"signal {signal.name} received")

    def consume_signal(self, step: StepRecord, signal: SignalRecord, guard: RunGuard) -> StepRecord:
        stored = self._ledger.consume_signal(step, signal, guard)
        if stored is step:
            self._console.say(step.run_id, "✓", f"signal {step.name} consumed")
        return stored

    def on_run(self, run: RunRecord, changes: Mapping[str, Any]) -> None:
        self._console.learn(run)
        if "status" in changes:
            self._run_status(run)

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
        self._ledger.continue_run(run_id, guard, changes, successor)
        self._console.learn(successor)
        self._console.say(run_id, "↪", f"continued as new run {successor.run_id}")
        self._console.say(successor.run_id, "▶", f"started (continues {run_id})")

    def start_child(self, step: StepRecord, guard: RunGuard, child: RunRecord) -> StepRecord:
        stored = self._ledger.start_child(step, guard, child)
        if stored is step:
            self._console.learn(child)
            self._console.say(step.run_id, "⑂", f"started child run {child.run_id}")
            self._console.say(child.run_id, "▶", f"started (child of {step.run_id})")
        return stored

    def start_children(
        self, steps: list[StepRecord], guard: RunGuard, children: list[RunRecord]
    ) -> bool:
        written = self._ledger.start_children(steps, guard, children)
        if written:
            for child in children:
                self._console.learn(child)
            first, last = steps[0].position, steps[-1].position
            self._console.say(
                steps[0].run_id, "⑂", f"started {len(children)} child runs ({first}..{last})"
            )
        return written

    def finish_child(
        self,
        run_id: str,
        guard: RunGuard,
        changes: Mapping[str, Any],
        report: ChildReport,
        *,
        now: str,
    ) -> tuple[RunRecord, bool]:
        run, taken = self._ledger.finish_child(run_id, guard, changes, report, now=now)
        self._console.learn(run)
        self._run_status(run)
        if taken:
            self._console.say(report.parent_id, "✉", f"child run {run_id} {run.status.value}")
        return run, taken

    def operate(
        self,
        run_id: str,
        *,
        statuses: tuple[str, ...],
        changes: Mapping[str, Any],
        operation: Mapping[str, str] | None = None,
        bump_inbox: bool = False,
        unleased: bool = False,
        reopen: StepRecord | None = None,
    ) -> RunRecord:
        run = super().operate(
            run_id,
            statuses=statuses,
            changes=changes,
            operation=operation,
            bump_inbox=bump_inbox,
            unleased=unleased,
            reopen=reopen,
        )
        self._console.learn(run)
        action = (operation or {}).get("action")
        if run.status.terminal:
            self._run_status(run)
        elif action:
            self._console.say(run_id, "•", f"{action} requested")
        return run

    # --- what a write means ----------------------------------------------------------

    def on_step(self, step: StepRecord) -> None:
        say = self._console.say
        if step.kind in (StepKind.STEP, StepKind.COMPENSATION):
            label = "compensation" if step.kind == StepKind.COMPENSATION else "step"
            if step.status in (StepStatus.DONE, StepStatus.COMPENSATED):
                say(step.run_id, "✓", f"{label} {step.name}{_took(step, self._console)}")
            elif step.status == StepStatus.TERMINAL_FAILED:
                say(step.run_id, "✗", f"{label} {step.name} failed: {_error(step)}")
            elif step.error_class == "retryable" and step.status in (
                StepStatus.RETRYABLE_FAILED,
                StepStatus.WAITING,
            ):
                when = f", retry at {_clock(step.wake_at)}" if step.wake_at else ", retrying"
                say(
                    step.run_id,
                    "↻",
                    f"{label} {step.name} attempt {step.attempt} failed: {_error(step)}{when}",
                )
        elif step.kind in _WAITS and step.status == StepStatus.WAITING:
            say(step.run_id, "⏸", _waiting(step, self._console))
        elif step.kind in _WAITS and step.status == StepStatus.TIMED_OUT:
            say(step.run_id, "⌛", f"{_WAITS[step.kind]} {step.name} timed out")
        elif step.kind == StepKind.BATCH and step.status == StepStatus.DONE:
            say(step.run_id, "⑃", f"batch {step.name} decided: {_batch(step)}")

    def _run_status(self, run: RunRecord) -> None:
        if run.status.terminal:
            took = parse_time(run.updated_at) - parse_time(run.created_at)
            text = f"{run.status.value.lower()} after {self._console.span(took.total_seconds())}"
            if run.error is not None and run.status != RunStatus.SUCCEEDED:
                # Runs stored before the fix carry their type inside the message too.
                message = run.error.message.removeprefix(f"{run.error.type}: ")
                text += f": {run.error.type}: {short(message)}"
            self._console.say(run.run_id, _FINISH_MARK[run.status], text)
        elif run.status == RunStatus.COMPENSATING:
            self._console.say(run.run_id, "↺", "compensating")


def _batch(step: StepRecord) -> str:
    """``ok (all): 3 succeeded`` from a batch's decision record."""
    try:
        return batch_summary(json.loads(step.output or "{}"))
    except ValueError:
        return "recorded"


def _took(step: StepRecord, console: Console) -> str:
    last = step.attempts[-1] if step.attempts else None
    if last is None or last.finished_at is None:
        return ""
    seconds = (parse_time(last.finished_at) - parse_time(last.started_at)).total_seconds()
    took = console.span(seconds)
    tries = f", attempt {last.n}" if last.n > 1 else ""
    return f" ({took}{tries})"


def _error(step: StepRecord) -> str:
    summary = short(step.error_summary)
    if step.error_type and not summary.startswith(step.error_type):
        return f"{step.error_type}: {summary}"
    return summary


def _clock(iso: str) -> str:
    return iso[11:19] + "Z" if len(iso) >= 19 else iso


def _until(console: Console, step: StepRecord, at: str | None) -> str:
    """`` until 14:02:00Z (in 72 s real, 3.0 d virtual)``: a wake-up or a deadline, with
    the time left as a person will wait it."""
    if not at:
        return ""
    left = max(0.0, (parse_time(at) - parse_time(step.updated_at)).total_seconds())
    # The time of day alone when it is today's (on the ledger's clock), else the date too.
    when = _clock(at) if at[:10] == step.updated_at[:10] else f"{at[:10]} {_clock(at)}"
    return f" until {when} (in {console.span(left)})"


def answer_hint(step: StepRecord) -> str:
    """The command that answers a waiting callback: with ``--result`` of its type's shape
    when the callback is typed (a bare ``durable approve`` sends ``true``, which a model
    refuses), or its reference when this process cannot import the type."""
    base = f"durable approve {step.run_id} {step.name}"
    reference = (step.detail or {}).get("result_type")
    if not reference:
        return base
    from durable.core import serde

    annotation = serde.resolve_reference(str(reference))
    if annotation is None:
        return f"{base} --result '<JSON of {reference}>'"
    return f"{base} --result '{serde.example_answer(annotation)}'"


def _waiting(step: StepRecord, console: Console) -> str:
    if step.kind == StepKind.SLEEP:
        named = "" if step.name == "sleep" else f" {step.name}"
        return f"waiting: sleep{named}{_until(console, step, step.wake_at)}"
    if step.kind == StepKind.CALLBACK:
        return (
            f"waiting for callback {step.name}{_until(console, step, step.expires_at)}: "
            f"answer with `{answer_hint(step)}` (or reject)"
        )
    if step.kind == StepKind.SIGNAL:
        return (
            f"waiting for signal {step.name}: send with "
            f"`durable signal {step.run_id} {step.name} --payload '{{...}}'`"
        )
    until = f" (checks{_until(console, step, step.expires_at)})" if step.expires_at else ""
    return f"waiting for condition {step.name}{until}"


# A schedule fire's verdict as the console says it (``schedule_line``).
_FIRE_WORDS = {
    "started": "started its run",
    "duplicate": "a repeat of a fire already decided: nothing new started",
    "skipped_overlap": "skipped for overlap, nothing started",
    "skipped_missed": "missed: later than its grace, nothing started",
}


def schedule_line(
    console: Console,
    *,
    schedule: str,
    workflow: str,
    scheduled_time: str,
    result: str,
    run_id: str | None,
    detail: str = "",
    manual: bool = False,
) -> None:
    """One line per fire of a schedule (``durable dev``'s worker prints it): the schedule,
    the fire time, the verdict, the run it started or the one that held it back."""
    what = "run now" if manual else f"fire {scheduled_time}"
    words = _FIRE_WORDS.get(result, result)
    because = f" ({short(detail, 160)})" if detail else ""
    mark = "⏱" if result == "started" else "⤼"
    held = f", held back by run {run_id}" if result == "skipped_overlap" and run_id else ""
    console.say(
        run_id if run_id and result != "skipped_overlap" else "-" * 26,
        mark,
        f"schedule {schedule} {what}: {words}{because}{held}",
        workflow=workflow,
    )
