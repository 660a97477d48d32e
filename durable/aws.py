"""Lambda handler factories, for the bundled template and for your own.

    import os
    from durable.aws import worker_handler, api_handler
    from durable.settings import Settings
    from myapp.workflows import app

    settings = lambda: Settings.from_env(os.environ)  # your composition root
    worker = worker_handler(app, settings)
    api = api_handler(app, settings)

A handler is composed on its first event, not at import: importing this module loads no
AWS SDK and reads nothing, so a cold start pays only for what the first event uses, and
a configuration error surfaces as a clear error in the first invocation's log.

Except where nobody waits for INIT: with provisioned concurrency or SnapStart
(``AWS_LAMBDA_INITIALIZATION_TYPE``), a handler made with ``compose_at_init=True`` (the
packaged ones pass ``durable.handlers.bootstrap.composes_at_init()``) composes while Lambda
initializes the environment, its store client made too, so the first event finds it
ready. A snapshot may be restored into many environments at once: ``after_restore``
(registered with the runtime's hooks) gives each its own random state and connections.
"""

from __future__ import annotations

import base64
import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from durable.errors import DurableError, InvalidInput, StorageError

if TYPE_CHECKING:
    from durable.core.ports import EffectStore, Invoker, Ledger, PayloadStore, Timers
    from durable.engine.registry import App
    from durable.runtime import Runtime, Services
    from durable.settings import Settings

# Sources may be values or zero-argument callables, called on the first event.
AppSource: TypeAlias = "App | Callable[[], App]"
SettingsSource: TypeAlias = "Settings | Callable[[], Settings]"
ServicesSource: TypeAlias = "Services | Callable[[], Services]"
Body: TypeAlias = "Callable[[Runtime, Any, Any, Any], Any]"  # (runtime, telemetry, event, context)


def _resolve(source: Any) -> Any:
    return source() if callable(source) else source


_log = logging.getLogger("durable.aws")
# The composed handlers of this process (weakly: tests compose thousands), whose services
# forget what they must after a snapshot's restore.
_COMPOSED: weakref.WeakSet[LambdaHandler] = weakref.WeakSet()
_HOOKS_REGISTERED: set[str] = set()  # once per process


def after_restore() -> None:
    """Make this process unique again after a snapshot's restore (Lambda SnapStart), in
    which any number of environments resume from one memory image.

    Re-seeds ``random`` and the retry jitter's generator from the OS (identical seeds
    would make restored workers back off in step, and anything drawn from ``random``
    repeat), and has each composed handler's services drop their open connections. Ids,
    tokens, nonces and lease owners need nothing: they are drawn from ``os.urandom`` (the
    kernel's generator) when minted, never at INIT."""
    import random

    from durable.core.retry import reseed_jitter

    random.seed()
    reseed_jitter()
    for handler in list(_COMPOSED):
        forget = handler.runtime.services.after_restore if handler.runtime else None
        if forget is not None:
            forget()


def _register_restore_hooks() -> None:
    """Hand ``after_restore`` to the runtime's hooks (``snapshot_restore_py``, in Lambda's
    managed Python runtimes). Elsewhere (tests, durable dev) it is not importable, and a
    snapshot never happens."""
    if _HOOKS_REGISTERED:
        return
    try:
        from snapshot_restore_py import register_after_restore  # type: ignore[import-not-found]
    except ImportError:
        return
    register_after_restore(after_restore)
    _HOOKS_REGISTERED.add("after_restore")


class LambdaHandler:
    """A Lambda entry point that composes its runtime on the first event."""

    def __init__(
        self,
        function: str,
        body: Body,
        app: AppSource | None,
        settings: SettingsSource,
        services: ServicesSource | None = None,
        correlation_id_path: str | None = None,
        *,
        compose_at_init: bool = False,
    ) -> None:
        self.function = function
        self._body = body
        self._app = app
        self._settings = settings
        self._services = services
        self._correlation = correlation_id_path
        self._handle: Callable[[Any, Any], Any] | None = None
        self._lock = threading.Lock()
        self.runtime: Runtime | None = None
        # The packaged handlers ask ``durable.handlers.bootstrap.composes_at_init``.
        if compose_at_init:
            self.prepare()

    def __call__(self, event: Any, context: Any) -> Any:
        handle = self._handle or self._compose()
        return handle(event, context)

    def prepare(self) -> bool:
        """Compose now, and make what every event uses (the store's client): what a handler
        built during Lambda's INIT does when the environment is provisioned or snapshotted.
        Registers ``after_restore`` with the runtime's snapshot hooks. Returns whether it
        composed: a failure is logged and left to the first event, which composes again
        and reports it as an on-demand cold start would."""
        try:
            self._compose()
            assert self.runtime is not None
            if self.runtime.services.prepare is not None:
                self.runtime.services.prepare()
        except Exception as e:  # the first event tries again and says why
            _log.warning(
                "composing the %s handler during INIT failed (%s: %s); the first event composes it",
                self.function,
                type(e).__name__,
                e,
            )
            return False
        _register_restore_hooks()
        return True

    def _compose(self) -> Callable[[Any, Any], Any]:
        with self._lock:
            if self._handle is not None:
                return self._handle
            from durable.ops.observability import MeteredLedger, Telemetry
            from durable.runtime import Runtime, load_app

            settings: Settings = _resolve(self._settings)
            app: App = _resolve(self._app) if self._app is not None else load_app(settings.app)
            if self._services is None:
                from durable.adapters.aws_services import aws_services

                services: Services = aws_services(settings)
            else:
                services = _resolve(self._services)
            if settings.crash_at and self.function == "worker":
                # LOCAL ONLY crash injection (a real SIGKILL at one port call): see below.
                services = crash_injected(services, settings.crash_at)
            if settings.console_events:
                from durable.local.console import Console, ConsoleLedger

                lines = Console(scale=settings.time_scale)
                console = ConsoleLedger(services.ledger, lines)
                services = replace(services, ledger=cast("Ledger", console))
            telemetry = Telemetry(settings, self.function)
            if settings.console_events:
                _log_to_console(lines)
            ledger: Any = services.ledger
            if services.meter is not None:
                # Each invocation's last write (and a start) records what the run used.
                from durable.core.usage import UsageLedger

                ledger = UsageLedger(ledger, services.meter)
            ledger = MeteredLedger(ledger, telemetry)
            if self.function == "worker":
                ledger = _traced(ledger)
                # A warm container continues its runs without reloading what it wrote
                # (``durable.core.history_cache``); outside the metering, so a load it saves
                # is not counted as one.
                from durable.core.history_cache import CachingLedger

                ledger = CachingLedger(ledger)
            metered = replace(services, ledger=ledger)
            runtime = Runtime.build(settings, app, metered, telemetry.count)
            body = self._body

            def handle(event: Any, context: Any) -> Any:
                return body(runtime, telemetry, event, context)

            self.runtime = runtime
            _COMPOSED.add(self)
            self._handle = telemetry.wrap(handle, self._correlation)
            return self._handle


def _log_to_console(console: Any) -> None:
    """Under ``durable dev``'s console, ``ctx.logger`` and step logger records print as
    console lines at INFO and up, while the engine's own loggers stay at the quiet level
    the console chose: a developer sees what their code says, next to what the run did,
    not JSON meant for CloudWatch. Once per process (the dev server composes the API and
    the sweeper in one), so a line is never printed twice."""
    import logging

    from durable.engine.run_logging import STEP_LOGGER, WORKFLOW_LOGGER

    for logger in (WORKFLOW_LOGGER, STEP_LOGGER):
        for old in [h for h in logger.handlers if getattr(h, "durable_console", False)]:
            logger.removeHandler(old)
        handler = console.log_handler()
        handler.durable_console = True
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def _traced(ledger: Any) -> Any:
    """The worker's ledger with OpenTelemetry spans (``durable.adapters.otel``) when the
    ``otel`` extra is installed; spans go to whatever tracer provider the deployment set
    (none: OpenTelemetry's no-op tracer, next to free)."""
    try:
        from durable.adapters.otel import TracingLedger
    except ImportError:
        return ledger
    return TracingLedger(ledger)


# --- local-only crash injection ---------------------------------------------------------


def crash_injected(services: Services, spec: str) -> Services:
    """LOCAL ONLY: ``services`` whose ledger, effects, timers and invoker SIGKILL this process.

    Set through ``DURABLE_CRASH_AT`` (a ``LOCAL_ONLY`` setting the template never sets) by
    crash tests that run workers under ``durable dev``. ``spec`` is
    ``port.method:k:before|after[:once-file]``: the process kills itself with a real SIGKILL
    (no cleanup, no reply, like a Lambda sandbox dying) right before or after the k-th call
    of ``port.method`` it makes. With ``once-file``, only if that file does not exist yet; it
    is created first (holding the point and the pid), so a replacement worker lives on.
    """
    import os
    import signal

    from durable.testing import CrashPlan, CrashPoint

    target, k, when, *rest = spec.split(":", 3)
    plan = CrashPlan([CrashPoint(target, int(k), "before" if when == "before" else "after")])
    once = rest[0] if rest else None

    def die(where: str) -> None:
        if once is not None:
            try:
                fd = os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return  # fired already, in an earlier worker process
            os.write(fd, f"{where} pid={os.getpid()}\n".encode())
            os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)

    class Killing:
        # Forwards by ``__getattr__`` on purpose, as ``durable.testing.CrashingPort`` does:
        # a kill point at every method of every port (one added later included), arguments
        # and answers untouched, beneath every wrapper that must see each write.
        def __init__(self, name: str, port: Any) -> None:
            self._name, self._port = name, port

        def __getattr__(self, attr: str) -> Any:
            value = getattr(self._port, attr)
            if not callable(value) or attr.startswith("_"):
                return value
            key = f"{self._name}.{attr}"

            def call(*args: Any, **kwargs: Any) -> Any:
                before, after = plan.tick(key)
                if before:
                    die(f"before {key}")
                result = value(*args, **kwargs)
                if after:
                    die(f"after {key}")
                return result

            return call

    return replace(
        services,
        ledger=cast("Ledger", Killing("ledger", services.ledger)),
        effects=cast("EffectStore", Killing("effects", services.effects)),
        timers=cast("Timers", Killing("timers", services.timers)),
        invoker=cast("Invoker", Killing("invoker", services.invoker)),
        payloads=None
        if services.payloads is None
        else cast("PayloadStore", Killing("payloads", services.payloads)),
    )


# --- worker ---------------------------------------------------------------------------


def _worker(runtime: Runtime, telemetry: Any, event: Any, context: Any) -> dict[str, Any]:
    from pydantic import ValidationError

    from durable.core.ports import Invocation
    from durable.ingress.triggers import WorkerEvent, first_error
    from durable.ops import deploy_gate

    if isinstance(event, dict) and "schedule" in event and "run_id" not in event:
        return _fire(runtime, telemetry, event)
    if deploy_gate.is_control(event) and event.get("control") == "reconcile-schedules":
        return _reconcile(runtime, telemetry)
    if deploy_gate.is_control(event):  # synchronous: the API's or the deploy hook's question
        telemetry.logger.info(f"control event: {event.get('control')}")
        reply = deploy_gate.answer(
            runtime.engine, event, lambda: context.get_remaining_time_in_millis() / 1000.0
        )
        return {**reply, "function_version": getattr(context, "function_version", None)}
    try:
        work = WorkerEvent.model_validate(event)
    except ValidationError as e:
        # Dropped, not raised: an async invocation that fails is retried with the same
        # event, which can never succeed. Anything real is still due in the ledger.
        field, message = first_error(e)
        keys = sorted(event)[:20] if isinstance(event, dict) else type(event).__name__
        telemetry.logger.error(
            f"dropping a malformed worker event: {message}", extra={"event_keys": keys}
        )
        telemetry.count("WorkerEventsDropped")
        return {"result": "dropped", "error": message, "field": field}
    telemetry.logger.append_keys(run_id=work.run_id, reason=work.reason, hop=work.hop)
    if work.hop > runtime.settings.max_hops:
        # The hand-off already set due_at: the sweeper resumes the run at hop 0, a sweep
        # period later. A run that never waits cannot chain invocations forever.
        telemetry.logger.warning(f"hop {work.hop} > max_hops; the sweeper takes over")
        telemetry.count("HopLimitReached")
        return {"run_id": work.run_id, "result": "deferred"}
    scale = runtime.settings.time_scale  # 1 on AWS; durable dev may run time faster
    invocation = Invocation(
        request_id=getattr(context, "aws_request_id", None),
        log_stream=getattr(context, "log_stream_name", None),
        remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000.0 * scale,
    )
    meter = runtime.services.meter
    if meter is None:
        outcome = runtime.engine.resume(work.run_id, invocation, work.hop, work.reason)
    else:
        memory = float(getattr(context, "memory_limit_in_mb", 0) or 0)
        with meter.invocation(memory_mb=memory, timer=work.reason == "timer"):
            outcome = runtime.engine.resume(work.run_id, invocation, work.hop, work.reason)
    metric = {
        "succeeded": "RunsSucceeded",
        "failed": "RunsFailed",
        "canceled": "RunsCanceled",
        # No code for the run's workflow version here (a deploy in progress): the run
        # waits for a worker that has it. An alarm fires if that lasts.
        "deferred": "RunsDeferred",
    }
    if outcome.result in metric:
        telemetry.count(metric[outcome.result])
    telemetry.logger.info(f"invocation ended: {outcome.result}", extra={"status": outcome.status})
    return {"run_id": work.run_id, "result": outcome.result, "status": outcome.status}


def _fire(runtime: Runtime, telemetry: Any, event: dict[str, Any]) -> dict[str, Any]:
    """A schedule's fire (Scheduler's delivery, or "run now"): start its run, once."""
    from durable.engine import schedules

    name = str(event.get("schedule"))
    declared = runtime.app.schedules().get(name)
    if declared is None:
        # Removed from the code, not yet from Scheduler (the next reconcile deletes it):
        # dropped, not raised; a raise would only be retried.
        telemetry.logger.warning(f"a fire of schedule {name[:64]!r}, which the code lacks")
        if runtime.settings.console_events:  # durable dev says every fire, this one too
            from durable.local.console import Console

            Console().say("-" * 26, "⤼", f"schedule {name[:64]!r} fire dropped: the code lacks it")
        return {"schedule": name, "result": "dropped"}
    scheduled_time = str(event.get("scheduled_time") or "")
    manual = str(event.get("manual") or "")
    fired = schedules.fire(runtime.engine, declared, scheduled_time, manual=manual)
    # Every verdict is said: a fire that started nothing for a rule (missed, skipped for
    # overlap) is a warning a person looks for, not a silence.
    skipped = fired.result.startswith("skipped")
    said = telemetry.logger.warning if skipped else telemetry.logger.info
    said(
        f"schedule {name} fire {scheduled_time or 'now'}: {fired.result}"
        + (f" ({fired.detail})" if fired.detail else ""),
        extra={"run_id": fired.run_id, "scheduled_time": scheduled_time, "schedule": name},
    )
    if runtime.settings.console_events:  # durable dev: one console line per fire
        from durable.local.console import Console, schedule_line

        schedule_line(
            Console(scale=runtime.settings.time_scale),
            schedule=name,
            workflow=declared.workflow,
            scheduled_time=scheduled_time,
            result=fired.result,
            run_id=fired.run_id,
            detail=fired.detail,
            manual=bool(manual),
        )
    telemetry.count("ScheduleRunsStarted" if fired.result == "started" else "ScheduleFiresSkipped")
    return {"schedule": name, "result": fired.result, "run_id": fired.run_id}


def _reconcile(runtime: Runtime, telemetry: Any) -> dict[str, Any]:
    """Make the stack's recurring schedules match this version's code."""
    from dataclasses import asdict

    from durable.engine import schedules

    port = runtime.services.schedules
    declared = runtime.app.schedules()
    if port is None:
        if not declared:
            return {
                "control": "reconcile-schedules",
                "created": [],
                "updated": [],
                "deleted": [],
                "unchanged": [],
            }
        return {
            "control": "reconcile-schedules",
            "error": "the app declares schedules but no Scheduler group is configured "
            "(DURABLE_SCHEDULER_GROUP)",
        }
    done = schedules.reconcile(port, declared.values())
    telemetry.logger.info("schedules reconciled", extra={"schedules": asdict(done)})
    return {"control": "reconcile-schedules", **asdict(done)}


def worker_handler(
    app: AppSource | None,
    settings: SettingsSource,
    *,
    services: ServicesSource | None = None,
    compose_at_init: bool = False,
) -> LambdaHandler:
    """The worker: ``{run_id, reason, hop}`` from hand-offs, timers and the sweeper."""
    return LambdaHandler(
        "worker", _worker, app, settings, services, compose_at_init=compose_at_init
    )


# --- api ------------------------------------------------------------------------------


def body_bytes(event: Any) -> int:
    body = event.get("body") if isinstance(event, dict) else None
    if not body:
        return 0
    if event.get("isBase64Encoded"):
        return len(body) * 3 // 4
    return len(body.encode("utf-8")) if isinstance(body, str) else 0


def _refuse(status: int, kind: str, message: str, field: str = "body") -> dict[str, Any]:
    from durable.api.errors import HttpError, answer

    found = answer(HttpError(status, kind, message, field=field))
    headers = {"Content-Type": "application/json", **found.headers}
    return {"statusCode": status, "headers": headers, "body": found.json()}


def _api(runtime: Runtime, telemetry: Any, event: Any, context: Any) -> dict[str, Any]:
    limit = runtime.settings.max_body_bytes
    size = body_bytes(event)
    if size > limit:  # before routing or parsing anything
        return _refuse(413, "PayloadTooLarge", f"body is {size} bytes; send at most {limit}")
    if isinstance(event, dict) and event.get("isBase64Encoded") and event.get("body"):
        # Every route takes JSON: decode, so signatures and parsing see the sent bytes.
        try:
            text = base64.b64decode(event["body"], validate=True).decode("utf-8")
        except ValueError:
            return _refuse(400, "MalformedBody", "the body is not UTF-8 text")
        event = {**event, "body": text, "isBase64Encoded": False}
    from durable.api.preflight import check_body

    refused = check_body(event) if isinstance(event, dict) else None
    if refused is not None:
        return _refuse(refused.status, refused.kind, str(refused), refused.field or "body")
    _ = runtime.api  # composed first: composing it creates the idempotency config
    if runtime.idempotency_config is not None:
        runtime.idempotency_config.register_lambda_context(context)
    response: dict[str, Any] = runtime.resolver.resolve(event, context)
    return response


def api_handler(
    app: AppSource | None,
    settings: SettingsSource,
    *,
    services: ServicesSource | None = None,
    compose_at_init: bool = False,
) -> LambdaHandler:
    """The HTTP API (API Gateway REST proxy events)."""
    return LambdaHandler(
        "api",
        _api,
        app,
        settings,
        services,
        "requestContext.requestId",
        compose_at_init=compose_at_init,
    )


# --- sweeper --------------------------------------------------------------------------


def _sweeper(runtime: Runtime, telemetry: Any, event: Any, context: Any) -> dict[str, Any]:
    report = runtime.engine.sweep()
    telemetry.count("SweepInvocations", report.invoked)
    flagged = flagged_runs(runtime)
    telemetry.count("RunsNeedingAttention", flagged)
    if report.capped:
        telemetry.logger.warning("sweep capped; the rest is picked up by the next sweep")
    return {
        "seen": report.seen,
        "invoked": report.invoked,
        "capped": report.capped,
        "needs_attention": flagged,
    }


# Pages of the attention index the gauge reads at most per sweep (100 runs each).
ATTENTION_GAUGE_PAGES = 10


def flagged_runs(runtime: Runtime) -> int:
    """The gauge behind the "needs attention" alarm: runs the engine parked for an
    operator (``needs_attention``), not every run in the attention index. That index also
    holds every FAILED run and every approval waiting (``leases.wants_a_person``): counted,
    the alarm would go off at the first routine approval and stay on, and a run parked
    later would notify nobody (an alarm notifies when its state changes). Reads up to
    ``ATTENTION_GAUGE_PAGES`` pages, newest first: failures retained past that hide an
    older parked run from the gauge, never from the listing."""
    count, cursor = 0, None
    for _ in range(ATTENTION_GAUGE_PAGES):
        page = runtime.engine.list_runs(needs_attention=True, limit=100, cursor=cursor)
        count += sum(1 for run in page.items if run.needs_attention)
        cursor = page.cursor
        if cursor is None:
            break
    return count


def sweeper_handler(
    app: AppSource | None,
    settings: SettingsSource,
    *,
    services: ServicesSource | None = None,
    compose_at_init: bool = False,
) -> LambdaHandler:
    """The sweeper (scheduled every minute): wakes every run whose trigger was lost."""
    return LambdaHandler(
        "sweeper", _sweeper, app, settings, services, compose_at_init=compose_at_init
    )


# --- events ---------------------------------------------------------------------------


def start_from(runtime: Runtime, request: Any) -> str:
    """Start (or find) the run for one event; returns the run id."""
    from durable.core.model import format_time

    before = format_time(runtime.clock.now())
    run = runtime.engine.start(
        request.workflow,
        request.input,
        idempotency_key=request.idempotency_key,
        requested_by=request.requested_by,
        version=request.version,
        key_scope=request.key_scope or None,
    )
    if run.created_at >= before:  # not a redelivery
        runtime.metric("RunsStarted")
    return run.run_id


def _events(runtime: Runtime, telemetry: Any, event: Any, context: Any) -> Any:
    from durable.ingress.event_sources import eventbridge_start, sqs_batch

    if isinstance(event, dict) and isinstance(event.get("Records"), list):
        return sqs_batch(runtime, telemetry, event, context, start_from)
    try:
        settings = runtime.settings
        call = eventbridge_start(
            event,
            sources=settings.allowed("start_event_sources"),
            accounts=settings.allowed("start_event_accounts"),
        )
        return {"run_id": start_from(runtime, call)}
    except DurableError as e:
        # Raised either way: Lambda retries the event twice, then its on-failure
        # destination (a dead-letter queue) keeps it for an operator.
        if not (isinstance(e, StorageError) and e.retryable):
            telemetry.logger.error(f"event refused: {e}", extra={"error_type": type(e).__name__})
            telemetry.count("EventsRefused")
        raise


def events_handler(
    app: AppSource | None,
    settings: SettingsSource,
    *,
    services: ServicesSource | None = None,
    compose_at_init: bool = False,
) -> LambdaHandler:
    """Starts runs from EventBridge events and SQS batches (partial failure reporting)."""
    return LambdaHandler(
        "events", _events, app, settings, services, compose_at_init=compose_at_init
    )


# --- purge ----------------------------------------------------------------------------

# What a DynamoDB Streams record says about an item that Time to Live deleted.
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def expired_run_id(record: Any) -> str | None:
    """The run id when ``record`` reports that TTL deleted a run item (keys ``pk``
    ``RUN#<id>``, ``sk`` ``RUN``); None for every other record: inserts, updates, deletes
    made by anyone but TTL, and items that are not run items. The event source mapping's
    filter passes only the first kind; this is the same check, again."""
    if not isinstance(record, dict) or record.get("eventName") != "REMOVE":
        return None
    identity = record.get("userIdentity")
    if not isinstance(identity, dict) or any(identity.get(k) != v for k, v in TTL_IDENTITY.items()):
        return None
    change = record.get("dynamodb")
    keys = change.get("Keys") if isinstance(change, dict) else None
    if not isinstance(keys, dict):
        return None
    pk, sk = (keys.get(name) for name in ("pk", "sk"))
    if not (isinstance(pk, dict) and isinstance(sk, dict)) or sk.get("S") != "RUN":
        return None
    value = pk.get("S")
    if not isinstance(value, str) or not value.startswith("RUN#") or len(value) == len("RUN#"):
        return None
    return value[len("RUN#") :]


# A purge of a long run's partition takes a few seconds (one conditional delete per item):
# stop starting new ones with less than this left of the invocation.
PURGE_RESERVE_MS = 15_000


def _erase(runtime: Runtime, telemetry: Any, run_id: Any) -> dict[str, Any]:
    """An operator's erasure of one finished run (``{"erase": "<run id>"}``, invoked
    directly): every item and large value under its id, now (``Engine.erase``)."""
    if not isinstance(run_id, str) or not run_id.isalnum() or len(run_id) > 64:
        raise InvalidInput("erase takes a run id", field="erase")
    erased = runtime.engine.erase(run_id)
    telemetry.count("RunsErased")
    telemetry.logger.info(
        f"erased {erased} items and values of run", extra={"run_id": run_id, "erased": erased}
    )
    return {"run_id": run_id, "erased": erased}


def _purge(runtime: Runtime, telemetry: Any, event: Any, context: Any) -> dict[str, Any]:
    if isinstance(event, dict) and "erase" in event:
        return _erase(runtime, telemetry, event["erase"])
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list):
        raise InvalidInput("not a DynamoDB Streams batch (no Records)", field="Records")
    failures: list[dict[str, str]] = []
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    for record in records:
        run_id = expired_run_id(record)
        if run_id is None:
            continue
        if remaining is not None and remaining() < PURGE_RESERVE_MS:
            # Out of time: hand the rest back rather than time out with all of it. Lambda
            # resumes a stream batch from the first reported record, so one is enough.
            failures.append({"itemIdentifier": record["dynamodb"]["SequenceNumber"]})
            break
        try:
            purged = runtime.engine.purge_expired(run_id)
        except Exception as e:
            # Reported, not raised: Lambda retries the batch from this record on (the
            # records before it are done), bisecting and at most MaximumRetryAttempts
            # times, then sends the batch's description to the dead-letter queue. The
            # purge is idempotent, so records after this one may safely run again.
            # The storage adapters' messages name the call and the AWS error, never an
            # item's contents; anything else is logged by its type alone.
            said = str(e) if isinstance(e, StorageError) else type(e).__name__
            telemetry.logger.warning(
                f"purging the expired run failed: {said}",
                extra={
                    "run_id": run_id,
                    "error_type": type(e).__name__,
                    "retryable": isinstance(e, StorageError) and e.retryable,
                },
            )
            failures.append({"itemIdentifier": record["dynamodb"]["SequenceNumber"]})
            continue
        telemetry.count("ExpiredRunsPurged")
        telemetry.logger.info(
            f"purged {purged} leftover items of expired run",
            extra={"run_id": run_id, "purged": purged},
        )
    return {"batchItemFailures": failures}


def purge_handler(
    app: AppSource | None,
    settings: SettingsSource,
    *,
    services: ServicesSource | None = None,
    compose_at_init: bool = False,
) -> LambdaHandler:
    """The purge, fed by the ledger table's stream: once TTL has deleted a finished run's
    item, delete the step and signal items it left that carry no TTL of their own (TTL
    deletes only the items carrying ``purge_at``). Reports the records that failed
    (``ReportBatchItemFailures``).
    Invoked directly with ``{"erase": "<run id>"}``, it erases that finished run now."""
    return LambdaHandler("purge", _purge, app, settings, services, compose_at_init=compose_at_init)


# --- deploy hook ------------------------------------------------------------------------


def _time_left(context: Any) -> Callable[[], float] | None:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return None
    return lambda: float(remaining()) / 1000.0


def deploy_hook_handler(
    settings: SettingsSource, *, clients: Callable[[], tuple[Any, Any]] | None = None
) -> Callable[[Any, Any], dict[str, Any]]:
    """CodeDeploy's PreTraffic hook: may the new worker version take traffic?

    Puts ``describe`` and ``check-deploy`` to the new version (``DURABLE_WORKER_VERSION``)
    and ``describe`` to the alias as it still is (``DURABLE_WORKER_FUNCTION``), then
    reports Succeeded or Failed to CodeDeploy (``durable.ops.deploy_gate.pre_traffic``). A
    Failed hook rolls the deploy back: the alias stays on the old version.
    ``clients`` makes (lambda, codedeploy) clients; boto3's default ones otherwise.
    """

    def handler(event: Any, context: Any) -> dict[str, Any]:
        import json
        from dataclasses import asdict

        from durable.adapters.lambda_invoker import LambdaCaller, split_qualifier
        from durable.ops.deploy_gate import pre_traffic

        given = event if isinstance(event, dict) else {}
        deployment = given.get("DeploymentId")
        execution = given.get("LifecycleEventHookExecutionId")
        if not isinstance(deployment, str) or not isinstance(execution, str):
            raise InvalidInput(
                "not a CodeDeploy lifecycle hook event: DeploymentId and "
                "LifecycleEventHookExecutionId are required",
                field="DeploymentId",
            )
        config: Settings = _resolve(settings)
        function, alias = split_qualifier(config.require("worker_function", "the deploy hook"))
        # A version number, or the version's ARN (the template's ``!Ref Worker.Version``).
        version = config.require("worker_version", "the deploy hook")
        version = split_qualifier(version)[1] or version
        if clients is not None:
            lambda_client, codedeploy = clients()
        else:
            from durable.adapters.aws_services import deploy_hook_clients

            lambda_client, codedeploy = deploy_hook_clients()
        result = pre_traffic(
            LambdaCaller(lambda_client, function, version),
            LambdaCaller(lambda_client, function, alias) if alias else None,
            time_left=_time_left(context),
            log=print,
        )
        summary = {k: v for k, v in asdict(result).items() if k != "broken"}
        print(json.dumps({"deploy_gate": summary, "broken": result.broken[:10]}, default=str))
        codedeploy.put_lifecycle_event_hook_execution_status(
            deploymentId=deployment,
            lifecycleEventHookExecutionId=execution,
            status=result.status,
        )
        return asdict(result)

    return handler
