"""Powertools Logger, Metrics and Tracer for the Lambda handlers (never the core).

The engine logs through the standard ``logging`` module under ``durable.*``; here those
records are routed through the Powertools JSON handler, so each line carries the Lambda
request id, the correlation id, the run id the handler appended and, inside a step body,
the step name and attempt. Step metrics come from a ledger wrapper that looks at what
the engine writes: no metrics code in the engine.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

from durable.core.ledger_watch import WatchedLedger
from durable.core.model import StepKind, StepRecord, StepStatus, parse_time
from durable.core.ports import Ledger, RunGuard
from durable.engine.step_context import current_step
from durable.errors import DurableError, InvalidInput
from durable.settings import Settings

Handler = Callable[[Any, Any], Any]


class StepFields(logging.Filter):
    """Adds ``step`` and ``attempt`` to records logged inside a step body."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            step = current_step()
        except DurableError:
            return True
        record.step = step.step_name
        record.attempt = step.attempt
        return True


class Telemetry:
    def __init__(self, settings: Settings, function: str) -> None:
        from aws_lambda_powertools import Logger, Metrics
        from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

        self.function = function
        self.logger = Logger(service=settings.service_name, level=settings.log_level)
        self.logger.append_keys(handler=function)
        self.metrics = Metrics(namespace=settings.metrics_namespace, service=settings.service_name)
        from aws_lambda_powertools.metrics.functions import is_metrics_disabled

        # Powertools prints a metric set by itself once a metric holds 100 values, and
        # that path ignores POWERTOOLS_METRICS_DISABLED: durable dev's sweeper (one
        # process, a sweep a second) printed a 5 KB blob every 100 s. Disabled means
        # nothing is recorded at all.
        self.metrics_on = not is_metrics_disabled()
        self.tracer: Any = None
        if settings.tracing:
            self.tracer = _xray_tracer(settings.service_name)
        # An invocation that records no metric (a read, a busy worker) is normal here.
        warnings.filterwarnings("ignore", "No application metrics to publish", UserWarning)
        for handler in self.logger.handlers:
            handler.addFilter(StepFields())
        logging.getLogger("durable")  # registered, so the copy below reaches it
        copy_config_to_registered_loggers(source_logger=self.logger, include={"durable"})

    def count(self, name: str, value: float = 1) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        if self.metrics_on:
            self.metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)

    def milliseconds(self, name: str, value: float) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        if self.metrics_on:
            self.metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)

    def wrap(self, handler: Handler, correlation_id_path: str | None = None) -> Handler:
        """Logger context (cleared per event), metrics flush, X-Ray segment."""
        # The cold-start metric is printed by a path of its own that ignores
        # POWERTOOLS_METRICS_DISABLED (durable dev's console sets it): honour it here.
        wrapped = self.metrics.log_metrics(handler, capture_cold_start_metric=self.metrics_on)
        wrapped = self.logger.inject_lambda_context(
            wrapped, correlation_id_path=correlation_id_path, clear_state=True
        )
        if self.tracer is not None:
            wrapped = self.tracer.capture_lambda_handler(wrapped, capture_response=False)
        return wrapped


def _xray_tracer(service: str) -> Any:
    """Powertools' X-Ray ``Tracer``, when the package has the X-Ray SDK (opt-in: it is not
    deployed by default and reaches its end of support on 2027-02-25)."""
    try:
        import aws_xray_sdk  # noqa: F401  Powertools' Tracer imports it lazily, and late
    except ImportError:
        raise InvalidInput(
            "DURABLE_TRACING is on but the X-Ray SDK is not in this function's package: add "
            "aws-lambda-powertools[tracer] to deploy/lambda/requirements.txt, or turn "
            "DURABLE_TRACING off and trace with OpenTelemetry (docs/operations.md, Tracing)",
            field="DURABLE_TRACING",
        ) from None
    from aws_lambda_powertools import Tracer

    return Tracer(service=service)


class MeteredLedger(WatchedLedger):
    """A ledger that reports step durations and retries as metrics; otherwise the same.

    ``WatchedLedger`` writes out every write of the port (no ``__getattr__``); only
    ``write_step`` is metered, as it was: the watcher's other hooks stay silent here."""

    def __init__(self, ledger: Ledger, telemetry: Telemetry) -> None:
        super().__init__(ledger)
        self._telemetry = telemetry

    def write_step(self, step: StepRecord, guard: RunGuard | None = None) -> StepRecord:
        stored = self._ledger.write_step(step, guard)
        if stored is step or stored == step:  # ours won; a loser's adoption is not news
            self._observe(step)
        return stored

    def _observe(self, step: StepRecord) -> None:
        if step.error_class == "retryable" and step.status in (
            StepStatus.RETRYABLE_FAILED,
            StepStatus.WAITING,
        ):
            self._telemetry.count("StepRetries")
        if step.kind == StepKind.STEP and step.status.final and step.attempts:
            last = step.attempts[-1]
            if last.finished_at:
                elapsed = parse_time(last.finished_at) - parse_time(last.started_at)
                self._telemetry.milliseconds("StepDuration", elapsed.total_seconds() * 1000)
        if step.status == StepStatus.TERMINAL_FAILED and step.kind == StepKind.STEP:
            self._telemetry.count("StepsFailed")
