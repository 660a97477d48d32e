"""What each route does, independent of the HTTP framework: engine calls and checks.

Routes (``durable.api.routes``) parse the request and call one method here. Every check
that can refuse a request runs before the engine writes anything.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol
from urllib.parse import parse_qs

from durable.api import hooks
from durable.api.errors import HttpError
from durable.api.models import (
    AuditEntry,
    CallbackAccepted,
    CallbackError,
    CancelRequest,
    FireView,
    ForkRequest,
    HeartbeatAccepted,
    HookAccepted,
    HookChallenge,
    Progress,
    RetryRequest,
    RunCost,
    RunDetail,
    RunPage,
    RunSummary,
    ScheduleFired,
    ScheduleList,
    ScheduleView,
    SignalAccepted,
    SignalView,
    StartedRun,
    StepView,
    WaitAnswer,
    WorkflowList,
    WorkflowView,
    json_value,
)
from durable.api.preflight import FORM, check_body
from durable.api.served import ServedVersions
from durable.core import serde
from durable.core.callables import WorkflowDef
from durable.core.clock import Clock
from durable.core.ids import check_idempotency_key, check_user_key, new_ulid
from durable.core.model import RunRecord, RunStatus, format_time, position_key
from durable.core.serde import NO_ANNOTATION
from durable.core.usage import Prices
from durable.engine.children import check_if_running
from durable.engine.engine import Engine
from durable.engine.events import send_signal
from durable.engine.keys import check_reuse
from durable.engine.operations import available_decisions
from durable.engine.schedules import RecurringSchedules, Schedule, find, fire, recent_fires
from durable.errors import IdempotencyConflict, InvalidInput, RunNotFound, WorkflowNotFound
from durable.hooks import HookRejected
from durable.hooks import durable as default_hook
from durable.ops.render import audit_trail

_RUN_ID = re.compile(r"^[0-9A-Z]{26}$")


log = logging.getLogger("durable.api")


def hook_payload(headers: Mapping[str, str], body: str | None) -> Any:
    """A signed delivery's JSON: the body, or, form-encoded (GitHub's default content
    type), its ``payload`` field. Parsed only after the signature over the raw body passed."""
    media = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    if media.split(";", 1)[0].strip().lower() != FORM:
        return parse_json(body)
    fields = parse_qs(body or "", keep_blank_values=True)
    if "payload" not in fields:
        raise InvalidInput(
            "a form-encoded delivery carries its JSON in a payload field (GitHub's form "
            "content type); send payload=<JSON>, or send the JSON as application/json",
            field="payload",
        )
    payload = parse_json(fields["payload"][0])
    refused = check_body({"httpMethod": "POST", "body": json.dumps(payload)})
    if refused is not None:
        raise refused
    return payload


# What every refused signature is answered with (the reason is logged, not sent).
UNSIGNED_DELIVERY = (
    "the delivery does not carry a valid signature for this hook: sign it with the hook's "
    "key, the way its sender's scheme says (docs/operations.md, Webhooks)"
)


# Runs a listing reads the item of, for what the listing indexes do not project: what a
# WAITING run waits for, and the progress of a run not ended.
_READ_WHOLE = frozenset({RunStatus.RUNNING, RunStatus.WAITING, RunStatus.COMPENSATING})


@dataclass(frozen=True, slots=True)
class StartRequest:
    workflow: str
    input: Any
    idempotency_key: str | None
    requested_by: str | None
    # Whose idempotency keys these are: None for the management API (operators), or a
    # hook's own namespace (``durable.core.ids.derived_run_id``).
    key_scope: str | None = None
    # What a key a running run holds means: refuse another input, or take that run.
    if_running: str = "fail"
    # What a key whose run has ended means: that run, or a new one (``durable.engine.keys``).
    reuse: str = "never"

    def fingerprint(self, annotation: Any = NO_ANNOTATION) -> dict[str, str]:
        """What identifies a delivery (workflow, scope, key) and what must match on a
        retry: the input's hash with its secret-typed fields masked (``annotation``, the
        workflow's input type). The idempotency table keeps it; a hash of the raw input
        would let a reader of the table guess a low-entropy secret (a PIN) back by trying
        every value."""
        return {
            "workflow": self.workflow,
            "key": self.idempotency_key or "",
            "scope": self.key_scope or "",
            "input_hash": serde.masked_hash(self.input, annotation),
        }


class StartGuard(Protocol):
    """Deduplicates deliveries of a keyed start (Powertools idempotency on AWS)."""

    def __call__(
        self, fingerprint: dict[str, str], start: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]: ...


def unguarded(fingerprint: dict[str, str], start: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    return start()


def parse_json(body: str | None) -> Any:
    """The request body as a JSON value (empty body: None); 400 when it is not JSON."""
    if body is None or not body.strip():
        return None

    def reject(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    try:
        return json.loads(body, parse_constant=reject)
    except ValueError as e:
        raise HttpError(
            400, "MalformedJSON", f"the request body is not valid JSON: {e}", field="body"
        ) from e


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise RunNotFound(f"no run {run_id[:64]!r}: run ids are 26-character ULIDs")
    return run_id


class ApiService:
    def __init__(
        self,
        engine: Engine,
        *,
        clock: Clock,
        nonces: hooks.NonceStore,
        webhook_secret: Callable[[], str | None],
        guard: StartGuard = unguarded,
        webhook_tolerance_seconds: int = 300,
        webhook_shared_secret: bool = False,
        metric: Callable[[str], None] = lambda name: None,
        wall_clock: Callable[[], float] = time.time,
        served: ServedVersions | None = None,
        prices: Prices | None = None,
        schedules: RecurringSchedules | None = None,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.nonces = nonces
        self.webhook_secret = webhook_secret
        self.guard = guard
        self.tolerance = webhook_tolerance_seconds
        self.shared_secret = webhook_shared_secret
        self.metric = metric
        # Signatures carry the sender's real Unix time; the engine's clock may be a
        # virtual one (``durable dev --time-scale``), so freshness uses the wall clock.
        self.wall_clock = wall_clock
        # What the workers run (``durable.api.served``); None: start whatever this code has.
        self.served = served
        # A run's usage priced (``durable.core.usage``); the deployment's region by default.
        self.prices = prices or Prices.of(None)
        # The stack's recurring schedules (``durable.engine.schedules``); None: none to show.
        self.schedules = schedules

    # --- starting runs ---------------------------------------------------------------

    def start(self, request: StartRequest) -> StartedRun:
        """Start a run; a keyed start is deduplicated by the guard, then by the run id.

        Refused (503, nothing written) while the workers do not serve the version this
        code would start: a deploy in progress (``durable.api.served``). Checked only for a
        start that would create a run: a retried keyed start gets its run back."""

        fresh: list[bool] = []
        if request.idempotency_key is not None:
            # Checked here too (the engine does) so a bad key never reaches the guard's
            # table, and the refusal names the header.
            self._check_key(request.idempotency_key, request.key_scope)

        def run() -> dict[str, Any]:
            if self.served is not None:
                wf = self.engine.app.get_workflow(request.workflow)
                self.served.refuse_unserved(wf.name, wf.version)
            record, created = self.engine.start_or_get(
                request.workflow,
                request.input,
                idempotency_key=request.idempotency_key,
                requested_by=request.requested_by,
                key_scope=request.key_scope,
                if_running=check_if_running(request.if_running),
                reuse=check_reuse(request.reuse),
            )
            if created:
                self.metric("RunsStarted")
                fresh.append(True)
            return RunSummary.of(record).model_dump(mode="json")

        if (
            request.idempotency_key is None
            or request.if_running == "attach"
            or request.reuse != "never"
        ):
            # Attaching takes whatever run holds the key now, with whatever input: no
            # delivery to deduplicate, and the guard would refuse the other input. A key
            # reused after its run ended names a new run each time: the guard would
            # answer with the first run's stored response (the engine's conditional
            # create still lets one start of a race create the run).
            answer = run()
        else:
            annotation = self.engine.app.get_workflow(request.workflow).input_annotation
            answer = self.guard(request.fingerprint(annotation), run)
        # The guard answers a repeated key with the first request's stored answer, without
        # calling run(): that too is an existing run.
        return StartedRun.model_validate({**answer, "existing": not fresh})

    @staticmethod
    def _check_key(key: str, scope: str | None) -> None:
        # An operator's key (no scope) in a sender's or the engine's namespace would make
        # a second run showing that route's key (``durable.core.ids.check_user_key``).
        if scope is None:
            check_user_key(key, "Idempotency-Key")
        else:
            check_idempotency_key(key, "Idempotency-Key")

    def hook(
        self, name: str, headers: Mapping[str, str], body: str | None, key: str | None
    ) -> HookAccepted | HookChallenge:
        """A signed third-party delivery: authenticate (the workflow's scheme), refuse
        replays, map the payload, then start.

        The sender's idempotency key (its header, or the provider's delivery id) lives in
        the hook's own namespace: it can neither collide with an operator's key nor
        another hook's. The answer holds only the run's id and status: a sender learns
        nothing about runs it did not start."""
        secret_text = self.webhook_secret()
        if not secret_text:
            raise HttpError(503, "ServiceUnavailable", "webhooks are not configured here")
        workflow = self._hook_workflow(name)
        spec = (workflow.hook if workflow else None) or default_hook()
        keys = hooks.secrets_for(name, secret_text, shared=self.shared_secret)
        now = self.wall_clock()
        try:
            delivery = spec.verifier.verify(keys, name, headers, (body or "").encode(), now)
        except HookRejected as e:
            # One answer for every unsigned or badly signed delivery, to a hook that exists
            # or not, whatever its scheme: the answer must not tell an outsider which hook
            # names exist nor which provider each expects. The reason is in the log.
            log.info("hook delivery refused at %r: %s", name[:100], e)
            raise HttpError(401, "Unauthorized", UNSIGNED_DELIVERY) from e
        if workflow is None:
            # Signed, but for a hook with no workflow: say nothing an outsider could use to
            # list what is registered.
            raise HttpError(404, "NotFound", "no such hook")
        payload = hook_payload(headers, body)
        slack = spec.verifier.name == "slack" and isinstance(payload, dict)
        if slack and payload.get("type") == "url_verification":  # Slack checks the URL first
            return HookChallenge(challenge=str(payload.get("challenge", "")))
        if spec.to_input is not None:
            try:
                payload = spec.to_input(payload, headers)
            except (KeyError, TypeError, ValueError) as e:
                raise InvalidInput(
                    f"the {spec.verifier.name} payload does not map to the input of workflow "
                    f"{name!r}: {type(e).__name__}: {e}",
                    field="body",
                ) from e
        marker = delivery.marker
        if marker is not None and not self.nonces.claim(marker, delivery.keep_until, int(now)):
            raise HttpError(401, "Unauthorized", "replayed signature: sign each delivery anew")
        # A key bound to the signed body is the key: a caller's header cannot replace it
        # (else a re-post of one signed body with a new Idempotency-Key starts a run).
        chosen = delivery.idempotency_key if delivery.bound else key or delivery.idempotency_key
        request = StartRequest(name, payload, chosen, f"hook:{name}", f"hook:{name}")
        try:
            run = self.start(request)
        except BaseException:
            if marker is not None:  # nothing started: the sender may retry this request
                self.nonces.release(marker)
            raise
        return HookAccepted(run_id=run.run_id, status=run.status)

    def _hook_workflow(self, name: str) -> WorkflowDef | None:
        try:
            return self.engine.app.get_workflow(name)
        except WorkflowNotFound:
            return None

    # --- reading ----------------------------------------------------------------------

    def of_workflow(self, workflow: str, run_id: str) -> str:
        """``run_id``, if it is a run of ``workflow``: a route scoped to a workflow (which
        an IAM policy can allow for that workflow alone) acts on that workflow's runs only.
        Any other run is answered as a missing one (404): the path says nothing about it."""
        run = self.engine.peek_run(check_run_id(run_id))
        if run is None or run.workflow != workflow:
            raise RunNotFound(f"no run {run_id[:64]!r} of workflow {workflow[:100]!r}")
        return run_id

    def get_run(self, run_id: str, workflow: str | None = None) -> RunDetail:
        """The run and its ledger; with ``workflow`` (a scoped route), only a run of it."""
        history = self.engine.load(check_run_id(run_id))
        run = history.run
        if workflow is not None and run.workflow != workflow:
            raise RunNotFound(f"no run {run_id[:64]!r} of workflow {workflow[:100]!r}")
        detail = RunDetail(
            **RunSummary.of(run).model_dump(),
            input=json_value(run.input),
            output=json_value(run.output),
            decisions=available_decisions(run),
            operations=list(run.operations),
            steps=[StepView.of(history.steps[p]) for p in sorted(history.steps, key=position_key)],
            signals=[SignalView.of(s) for s in history.signals],
        )
        if run.gate is not None:
            detail.gate = run.gate
            if run.queued_at is not None:
                line = self.engine.ledger.read_gate(run.gate).queue
                detail.place_in_line = line.index(run.run_id) + 1 if run.run_id in line else None
        if run.usage:
            detail.usage = dict(run.usage)
            detail.cost = RunCost(
                usd=round(self.prices.dollars(run.usage), 9), prices_of=self.prices.region
            )
        trail = audit_trail(detail.model_dump())
        detail.audit = [AuditEntry(at=a, action=b, by=c, what=d) for a, b, c, d in trail]
        return detail

    def list_runs(
        self,
        *,
        workflow: str | None,
        status: str | None,
        needs_attention: bool | None,
        version: int | None,
        limit: int,
        cursor: str | None,
        key: str | None = None,
    ) -> RunPage:
        if key is not None:
            # A key names one run: the page holds it, or nothing.
            if workflow is None:
                raise HttpError(
                    400,
                    "MissingFilter",
                    "a key names a run within its workflow: pass workflow=<name> with key=",
                    field="workflow",
                )
            found = self.engine.run_by_key(workflow, key)
            return RunPage(runs=[RunSummary.of(found)] if found else [], next_cursor=None)
        if workflow is None and not needs_attention:
            # Served by the listing index (per workflow) or the attention index: never a
            # scan, so one of the two keys is required.
            raise HttpError(
                400,
                "MissingFilter",
                "pass workflow=<name> or needs_attention=true (runs are listed per workflow)",
                field="workflow",
            )
        page = self.engine.list_runs(
            workflow=workflow,
            status=status,
            needs_attention=needs_attention,
            version=version,
            limit=limit,
            cursor=cursor,
        )
        return RunPage(runs=[self._listed(r) for r in page.items], next_cursor=page.cursor)

    def _listed(self, run: RunRecord) -> RunSummary:
        """A listed run; a WAITING one with what it waits for, and its progress. A listing
        by workflow has both from the page's run items (``leases.PAGE_FIELDS``); the
        attention index projects neither (a global secondary index's projection cannot
        change in place on a deployed table; docs/architecture.md), so there a page pays
        one read per run on it that is running or waiting."""
        summary = RunSummary.of(run)
        if run.status in _READ_WHOLE and run.waiting_for is None and run.progress is None:
            whole = self.engine.peek_run(run.run_id)  # its state; its values stay put
            if whole is not None and whole.status == RunStatus.WAITING:
                summary.waiting_for = whole.waiting_for
            if whole is not None and not whole.terminal:
                summary.progress = Progress.of(whole.progress)
        return summary

    def workflows(self) -> WorkflowList:
        grouped: dict[str, list[int]] = {}
        schemas: dict[str, tuple[bool, dict[str, Any] | None]] = {}
        for wf in sorted(self.engine.app.workflows(), key=lambda w: (w.name, w.version)):
            grouped.setdefault(wf.name, []).append(wf.version)
            schemas[wf.name] = (wf.takes_input, _schema(wf.input_annotation, wf.takes_input))
        return WorkflowList(
            workflows=[
                WorkflowView(
                    name=name,
                    versions=versions,
                    takes_input=schemas[name][0],
                    input_schema=schemas[name][1],
                )
                for name, versions in grouped.items()
            ]
        )

    # --- schedules -------------------------------------------------------------------

    def list_schedules(self) -> ScheduleList:
        declared = self.engine.app.schedules()
        held = self.schedules.list() if self.schedules is not None else {}
        now = self.engine.clock.now()
        views = []
        for name, schedule in sorted(declared.items()):
            remote = held.get(name)
            state: Literal["enabled", "paused", "not deployed"] = (
                "not deployed" if remote is None else "enabled" if remote.enabled else "paused"
            )
            upcoming = None
            if state == "enabled" and remote is not None:
                fire = schedule.next_fire(now, remote.created)
                upcoming = format_time(fire) if fire is not None else None
            views.append(
                ScheduleView(
                    name=name,
                    workflow=schedule.workflow,
                    expression=schedule.expression,
                    timezone=schedule.timezone,
                    input=schedule.input,
                    overlap=schedule.overlap,
                    missed=schedule.missed,
                    state=state,
                    next_fire=upcoming,
                    # One read a schedule: the list is one small item (RECENT_FIRES).
                    recent_fires=[
                        FireView(**asdict(f)) for f in recent_fires(self.engine.ledger, schedule)
                    ],
                )
            )
        return ScheduleList(schedules=views)

    def _schedule(self, name: str) -> Schedule:
        try:
            return find(self.engine.app.schedules(), name)
        except InvalidInput as e:
            raise HttpError(404, "ScheduleNotFound", str(e), field="schedule") from None

    def pause_schedule(self, name: str, paused: bool) -> ScheduleView:
        self._schedule(name)
        if self.schedules is None:
            raise HttpError(
                409, "NoScheduler", "this stack has no Scheduler group", field="schedule"
            )
        self.schedules.set_enabled(name, not paused)
        (view,) = [v for v in self.list_schedules().schedules if v.name == name]
        return view

    def run_schedule(self, name: str, request_key: str | None) -> ScheduleFired:
        """'Run now': a start of the schedule's workflow outside its clock, once per
        ``request_key`` (an Idempotency-Key; else a fresh one)."""
        schedule = self._schedule(name)
        if request_key is not None:
            check_idempotency_key(request_key, "Idempotency-Key")
        manual = f"now-{request_key or new_ulid(self.engine.clock.now())}"
        fired = fire(self.engine, schedule, format_time(self.engine.clock.now()), manual=manual)
        return ScheduleFired(schedule=name, result=fired.result, run_id=fired.run_id)

    # --- events to runs ---------------------------------------------------------------

    def complete_callback(self, token: str, body: str | None) -> CallbackAccepted:
        """The sender's raw JSON body is the callback's result (empty: null)."""
        run_id = self.engine.complete_callback(token, result=parse_json(body))
        return CallbackAccepted(run_id=run_id, outcome="result")

    def heartbeat(self, token: str) -> HeartbeatAccepted:
        """The party a callback waits on says it is alive: the wait's expiry moves on."""
        run_id, expires = self.engine.heartbeat(token)
        return HeartbeatAccepted(run_id=run_id, expires_at=expires)

    def fail_callback(self, token: str, error: CallbackError) -> CallbackAccepted:
        run_id = self.engine.complete_callback(token, error=error.model_dump())
        return CallbackAccepted(run_id=run_id, outcome="error")

    def complete_wait(
        self, run_id: str, name: str, request: WaitAnswer, requested_by: str | None
    ) -> CallbackAccepted:
        """An operator answers the run's pending callback by its name (IAM, no token)."""
        error = request.error.model_dump() if request.error is not None else None
        self.engine.complete_wait(
            check_run_id(run_id),
            name,
            result=request.result,
            error=error,
            requested_by=requested_by,
            position=request.position,
        )
        return CallbackAccepted(run_id=run_id, outcome="error" if error else "result")

    def signal(
        self,
        run_id: str,
        name: str,
        payload: Any,
        idempotency_key: str | None = None,
        sent_by: str | None = None,
    ) -> SignalAccepted:
        """Store a signal; a repeated ``Idempotency-Key`` returns the first one (202)."""
        if idempotency_key is not None:
            # Checked here as well as in the engine, to name the header rather than `key`.
            check_idempotency_key(idempotency_key, "Idempotency-Key")
        try:
            delivery = send_signal(
                self.engine, check_run_id(run_id), name, payload, idempotency_key, sent_by
            )
        except IdempotencyConflict as e:
            raise HttpError(
                409,
                "IdempotencyConflict",
                f"Idempotency-Key was already used for signal {name!r} of this run with a "
                "different body; use a new key for a new signal",
                field="Idempotency-Key",
            ) from e
        record = delivery.signal
        return SignalAccepted(
            run_id=record.run_id,
            name=record.name,
            signal_id=record.signal_id,
            received_at=record.received_at,
            duplicate=delivery.duplicate,
        )

    # --- operator decisions -----------------------------------------------------------

    def cancel(self, run_id: str, request: CancelRequest, requested_by: str | None) -> RunSummary:
        run = self.engine.cancel(
            check_run_id(run_id),
            request.reason,
            compensate=request.compensate,
            requested_by=requested_by,
        )
        return RunSummary.of(run)

    def retry(self, run_id: str, request: RetryRequest, requested_by: str | None) -> RunSummary:
        run = self.engine.retry(
            check_run_id(run_id), upgrade_to=request.upgrade_to, requested_by=requested_by
        )
        return RunSummary.of(run)

    def fork(self, run_id: str, request: ForkRequest, requested_by: str | None) -> RunSummary:
        run = self.engine.fork(check_run_id(run_id), request.from_step, requested_by=requested_by)
        return RunSummary.of(run)


def _schema(annotation: Any, takes_input: bool) -> dict[str, Any] | None:
    if not takes_input:
        return None
    adapter = serde.adapter_for(annotation)
    if adapter is None or annotation is NO_ANNOTATION:
        return {}  # any JSON value
    try:
        schema: dict[str, Any] = adapter.json_schema()
    except Exception:  # a type pydantic cannot describe still validates fine
        return {}
    return schema
