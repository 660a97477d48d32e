"""OpenTelemetry spans of a run: one per worker invocation, one per step attempt.

Install the extra (``pip install 'durable-lambda[otel]'``) and configure a tracer provider
the usual way (the ADOT Lambda layer, or ``OTEL_*`` variables with the SDK): the worker
wraps its ledger in ``TracingLedger`` and the spans go wherever that provider sends them.
Powertools' X-Ray tracer is independent of this and keeps working.

Like the ``durable dev`` console, the spans are read off what the engine *writes*, so the
engine core knows nothing of tracing and a span exists only for what the ledger holds:

* an **invocation** span from the claim to the write that lets the run go (suspended,
  handed off, finished), with the outcome, the fence and whether it took over a dead
  worker's lease; the waits it parked on are events on it;
* a **step attempt** span per attempt the ledger records, with the attempt's own start
  and end times (a retry is a second span; a failure is an error status);
* every invocation of a run is in **one trace**, its id derived from the run id, under
  the run's root span context (derived too, never exported: no process sees a whole
  run), and links to that root, so a backend shows a run's invocations together however
  many days apart they ran.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from durable.core.ledger_watch import WatchedLedger
from durable.core.model import RunRecord, StepKind, StepRecord, StepStatus, parse_time
from durable.core.ports import Claim, Ledger, RunGuard
from durable.engine.determinism import observer_code

_WAITS = {StepKind.SLEEP, StepKind.CALLBACK, StepKind.SIGNAL, StepKind.CONDITION}
_STEPS = {StepKind.STEP, StepKind.COMPENSATION}


def run_context(run_id: str) -> SpanContext:
    """The run's root span context: the same trace and span id in every process."""
    digest = hashlib.sha256(run_id.encode()).digest()
    return SpanContext(
        trace_id=int.from_bytes(digest[:16], "big"),
        span_id=int.from_bytes(digest[16:24], "big"),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


def _ns(stamp: str) -> int:
    return int(parse_time(stamp).timestamp() * 1_000_000_000)


class TracingLedger(WatchedLedger):
    """A ledger that records spans of what its worker does; otherwise the same."""

    def __init__(self, ledger: Ledger, tracer: trace.Tracer | None = None) -> None:
        super().__init__(ledger)
        self._tracer = tracer or trace.get_tracer("durable")
        self._span: Any = None  # the invocation's, between its claim and its release
        self._run_id: str | None = None
        self._done: set[tuple[str, int]] = set()  # (position, attempt) spans made

    # --- the invocation ------------------------------------------------------------------

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
            with observer_code():
                self._start(claim)
        return claim

    def _start(self, claim: Claim) -> None:
        self._end("lost")  # a previous invocation that never let go (it crashed)
        run, run_id = claim.run, claim.run.run_id
        root = run_context(run_id)
        self._span = self._tracer.start_span(
            f"invocation {run.workflow}",
            context=trace.set_span_in_context(trace.NonRecordingSpan(root)),
            kind=SpanKind.CONSUMER,
            links=[Link(root)],
            attributes={
                "durable.run_id": run_id,
                "durable.workflow": run.workflow,
                "durable.version": run.version,
                "durable.fence": run.fence,
                "durable.took_over": claim.took_over,
            },
        )
        self._run_id, self._done = run_id, set()

    def on_run(self, run: RunRecord, changes: Mapping[str, Any]) -> None:
        released = "lease_owner" in changes and changes["lease_owner"] is None
        if run.run_id == self._run_id and released:
            if run.status.terminal:
                self._end(run.status.value)
            else:
                self._end("suspended" if run.status.value == "WAITING" else "handed off")

    def continue_run(
        self, run_id: str, guard: RunGuard, changes: Mapping[str, Any], successor: RunRecord
    ) -> None:
        self._ledger.continue_run(run_id, guard, changes, successor)
        if run_id == self._run_id:
            self._end(f"continued as {successor.run_id}")

    def _end(self, outcome: str) -> None:
        if self._span is not None:
            with observer_code():
                self._span.set_attribute("durable.outcome", outcome)
                self._span.end()
        self._span, self._run_id = None, None

    # --- steps and waits -----------------------------------------------------------------

    def on_step(self, step: StepRecord) -> None:
        span = self._span
        if span is None or not span.is_recording():
            return  # no provider records spans (OpenTelemetry's no-op): nothing per step
        with observer_code():
            self._spans_of(step)

    def _spans_of(self, step: StepRecord) -> None:
        span = self._span
        if span is None or step.run_id != self._run_id:
            return
        if step.kind in _WAITS:
            if step.status == StepStatus.WAITING:
                span.add_event(
                    f"waiting: {step.kind.value} {step.name}",
                    {"durable.position": step.position, "durable.until": step.wake_at or ""},
                )
            return
        if step.kind not in _STEPS:
            return
        # The newest attempt is the one this write records the end of; earlier ones were
        # recorded (and traced) by the writes, and invocations, that ended them.
        if not step.attempts or step.attempts[-1].finished_at is None:
            return
        attempt = step.attempts[-1]
        key = (step.position, attempt.n)
        if key not in self._done:
            self._done.add(key)
            child = self._tracer.start_span(
                f"step {step.name}",
                context=trace.set_span_in_context(span),
                start_time=_ns(attempt.started_at),
                attributes={
                    "durable.run_id": step.run_id,
                    "durable.position": step.position,
                    "durable.attempt": attempt.n,
                    "durable.kind": step.kind.value,
                },
            )
            if attempt.error_class:
                child.set_status(Status(StatusCode.ERROR, attempt.error or ""))
                child.set_attribute("durable.error_class", attempt.error_class)
            child.end(end_time=_ns(attempt.finished_at or attempt.started_at))
