"""OpenTelemetry spans of a run (``durable.adapters.otel``), checked with the SDK's
in-memory exporter: a span per invocation, a span per step attempt under it, waits as
events, and every invocation of a run in one trace."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from durable import App, Context, RetryPolicy
from durable.adapters.otel import TracingLedger, run_context
from durable.core.ports import Ledger
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit


def _app() -> App:
    app = App()
    calls = {"n": 0}

    @app.step(retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=1), jitter="none"))
    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("reset")
        return "ok"

    @app.step
    def ship() -> str:
        return "shipped"

    @app.workflow(name="order")
    def order(ctx: Context) -> str:
        flaky()
        ctx.sleep(timedelta(hours=1))
        return ship()

    return app


def _traced(app: App) -> tuple[LocalRunner, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runner = LocalRunner(app)
    traced = TracingLedger(runner.engine.ledger, provider.get_tracer("test"))
    runner.engine.ledger = cast(Ledger, traced)
    runner.engine.endings.ledger = runner.engine.ledger  # as the composition root wraps it
    return runner, exporter


def test_a_run_is_one_trace_of_invocations_with_a_span_per_step_attempt() -> None:
    runner, exporter = _traced(_app())
    run = runner.start("order")
    runner.run_until_idle()  # flaky fails once: a retry backoff, then the sleep
    runner.advance(seconds=2)
    runner.advance(hours=2)
    assert runner.get_run(run.run_id).status.value == "SUCCEEDED"
    spans: list[ReadableSpan] = list(exporter.get_finished_spans())
    invocations = [s for s in spans if s.name == "invocation order"]
    steps = [s for s in spans if s.name.startswith("step ")]
    assert [s.attributes["durable.outcome"] for s in invocations] == [  # type: ignore[index]
        "suspended",  # the retry's backoff
        "suspended",  # the sleep
        "SUCCEEDED",
    ]
    assert [s.attributes["durable.fence"] for s in invocations] == [1, 2, 3]  # type: ignore[index]
    # one trace for the run, derived from its id, each invocation linked to its root
    root = run_context(run.run_id)
    assert {s.context.trace_id for s in spans} == {root.trace_id}
    assert all(s.parent is not None and s.parent.span_id == root.span_id for s in invocations)
    assert all(s.links[0].context.span_id == root.span_id for s in invocations)
    # the attempts: the failure, its retry, then ship; each under the invocation it ran in
    named = [(s.name.split(".")[-1], s.attributes["durable.attempt"]) for s in steps]  # type: ignore[index]
    assert named == [("flaky", 1), ("flaky", 2), ("ship", 1)]
    failed, retried, shipped = steps
    assert failed.status.status_code == StatusCode.ERROR
    assert "reset" in (failed.status.description or "")
    assert retried.status.status_code == StatusCode.UNSET
    parents = {s.context.span_id: s for s in invocations}
    assert parents[failed.parent.span_id] is invocations[0]  # type: ignore[union-attr]
    assert parents[retried.parent.span_id] is invocations[1]  # type: ignore[union-attr]
    assert parents[shipped.parent.span_id] is invocations[2]  # type: ignore[union-attr]
    # the wait is an event on the invocation that parked on it
    (event,) = [e for e in invocations[1].events if e.name.startswith("waiting")]
    assert event.attributes["durable.position"] == "0002"  # type: ignore[index]


def test_an_attempt_span_has_the_attempts_own_times() -> None:
    runner, exporter = _traced(_app())
    runner.start("order")
    runner.run_until_idle()
    (failed,) = [s for s in exporter.get_finished_spans() if s.name.startswith("step ")]
    assert failed.start_time is not None and failed.end_time is not None
    assert failed.start_time <= failed.end_time
