"""The HTTP routes on a Powertools REST resolver (API Gateway proxy events).

Bodies with a schema (callbacks, cancel, retry, fork) are validated by Powertools from the
pydantic models; bodies that are a workflow's input or a signal's payload are any JSON
and are validated by the engine against the workflow's types. The webhook route reads
its raw body itself: the signature covers the exact bytes, and it must be checked before
anything is parsed. A REST API keeps the path percent-encoded (its ``pathParameters`` are
decoded), and Powertools matches on the path: each path parameter is decoded here.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable
from typing import Annotated, Any, Literal
from urllib.parse import quote, unquote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Header, Query

from durable.api.errors import Answer, HttpError, answer, validation_answer
from durable.api.models import (
    CallbackAccepted,
    CallbackError,
    CancelRequest,
    ErrorResponse,
    ForkRequest,
    HeartbeatAccepted,
    HookAccepted,
    HookChallenge,
    RetryRequest,
    RunDetail,
    RunPage,
    RunStatusName,
    RunSummary,
    ScheduleFired,
    ScheduleList,
    ScheduleView,
    SignalAccepted,
    StartedRun,
    WaitAnswer,
    WorkflowList,
)
from durable.api.service import ApiService, StartRequest, parse_json

JSON = "application/json"
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Retries with the same key and body return the same run; a reused key "
        "with another body is 409.",
    ),
]

# A run found by the key it was started under (a key names one run of its workflow).
RunKey = Annotated[
    str | None,
    Query(
        max_length=300,
        description="The idempotency key the run shows (an operator's as given, a "
        "sender's with its namespace, e.g. `eventbridge/<id>`): the page holds that run "
        "or is empty. Needs the workflow.",
    ),
]

# The same header on the signal route, where it deduplicates deliveries of one signal.
SignalIdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="At most 256 characters, no control characters; scoped to the run and "
        "the signal's name. A retry with the same key and body is stored once and answered "
        "with the first signal (`duplicate: true`); a reused key with another body is 409.",
    ),
]


def _errors(*codes: int) -> dict[int, Any]:
    described = {
        400: "Malformed request (body is not JSON, missing filter)",
        401: "Missing, wrong, stale or replayed signature",
        404: "Unknown workflow, run or callback token",
        409: "Conflict with the run's state or an earlier request",
        410: "The callback expired",
        413: "Body too large",
        415: "The body is not JSON (send it as application/json)",
        422: "Invalid input; `field` names it",
        503: "Storage is busy or a dependency is not configured; retry later",
    }
    # Every route reads the ledger, so every route may answer 503 (retryable).
    return {
        code: {"description": described[code], "content": {JSON: {"model": ErrorResponse}}}
        for code in sorted({*codes, 503})
    }


# Every route with a body: unparseable (400), above max_body_bytes (413), not JSON (415),
# the wrong shape (422). The preflight and the handler factory answer these for all routes.
BODY = (400, 413, 415, 422)


def _ok(status: int, description: str, model: Any = None) -> dict[int, Any]:
    # Passing responses= replaces Powertools' default success answer: declare it here.
    if model is None:
        return {status: {"description": description}}
    return {status: {"description": description, "content": {JSON: {"model": model}}}}


_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")


def named(segment: str) -> str:
    """The name a path segment carries. A letter, digit or ``-._~`` sent percent-encoded is
    refused (RFC 3986 section 6.2.2.2 says those are never encoded): an IAM policy allows
    or denies a workflow by its path, and ``/workflows/cardwai%74/...`` must not reach
    ``cardwait`` past a rule written for ``/workflows/cardwait/*`` (issue 32). Any other
    character may come encoded either way, as Python's ``quote`` and the browser's
    ``encodeURIComponent`` differ on ``!'()*``."""
    for escape in _ESCAPE.finditer(segment):
        if chr(int(escape.group(1), 16)) in _UNRESERVED:
            name = unquote(segment)
            raise HttpError(
                400,
                "NonCanonicalPath",
                f"the path names {name[:100]!r} with {escape.group(0)!r} encoded; send it as "
                f"{quote(name, safe='')!r} (letters, digits and -._~ are sent as they are)",
                field="path",
            )
    return unquote(segment)


def _json(status: int, model: Any) -> Response[Any]:
    return Response(status_code=status, content_type=JSON, body=model)


ANSWERED = _ok(202, "Answer recorded", CallbackAccepted)


def error_response(found: Answer) -> Response[str]:
    return Response(
        status_code=found.status, content_type=JSON, body=found.json(), headers=found.headers
    )


# What a ``<name>`` segment of a rule matches, as Powertools' REST resolver matches it: the
# characters RFC 3986 calls unreserved or sub-delimiters, ``:`` and ``@``, word characters,
# and a few unsafe ones API Gateway passes through. Kept here (not read from Powertools'
# private names), and tests/handlers/test_route_table.py checks it answers like the resolver.
_SEGMENT = r"[-._~()'!*:@,;=+&$%<> \[\]{}|^\w]+"
_PARAMETER = re.compile(r"<(\w+)>")


def compile_rule(rule: str) -> re.Pattern[str]:
    """A route's rule as a pattern of whole paths: ``<name>`` one segment, trailing slashes
    ignored (the REST resolver strips them from rules and accepts them on paths)."""
    named = _PARAMETER.sub(lambda found: f"(?P<{found[1]}>{_SEGMENT})", rule.rstrip("/"))
    return re.compile(f"^{named}/*$")


class Resolver(APIGatewayRestResolver):
    """Powertools' REST resolver that keeps its own table of the routes registered (every
    ``get``/``post``/... goes through ``route``): a request it has no route for can then be
    told apart as an unknown path (404) or a method the path does not answer (405, with
    ``Allow``). Powertools keeps no public list, and reading its private one would turn every
    404 into a 500 the day it is renamed."""

    def __init__(self, **options: Any) -> None:
        self.route_table: list[tuple[str, re.Pattern[str]]] = []  # before any route is added
        super().__init__(**options)

    def route(  # the base's other arguments pass through as they are
        self, rule: str, method: str | list[str] | tuple[str], *args: Any, **kwargs: Any
    ) -> Any:
        pattern = compile_rule(rule)
        methods = [method] if isinstance(method, str) else list(method)
        self.route_table.extend((name.upper(), pattern) for name in methods)
        return super().route(rule, method, *args, **kwargs)

    def allowed_methods(self, path: str) -> list[str]:
        """The methods of the routes whose rule matches ``path`` (none: the path is unknown)."""
        return sorted({name for name, pattern in self.route_table if pattern.match(path)})


def _schedule_routes(app: APIGatewayRestResolver, service: Callable[[], ApiService]) -> None:
    """``durable schedules``: list, pause, resume, run now (``durable.engine.schedules``)."""

    @app.get("/schedules", summary="The app's schedules: state, next fire", tags=["schedules"])
    def schedules() -> ScheduleList:
        return service().list_schedules()

    @app.post(
        "/schedules/<name>/pause",
        summary="Pause a schedule (it stays paused across deploys until resumed)",
        tags=["schedules"],
        responses={**_ok(202, "Paused", ScheduleView), **_errors(*BODY, 404, 409)},
    )
    def pause_schedule(name: str) -> Response[ScheduleView]:
        return _json(202, service().pause_schedule(named(name), True))

    @app.post(
        "/schedules/<name>/resume",
        summary="Resume a paused schedule",
        tags=["schedules"],
        responses={**_ok(202, "Resumed", ScheduleView), **_errors(*BODY, 404, 409)},
    )
    def resume_schedule(name: str) -> Response[ScheduleView]:
        return _json(202, service().pause_schedule(named(name), False))

    @app.post(
        "/schedules/<name>/run",
        summary="Run a schedule's workflow now (once per Idempotency-Key)",
        tags=["schedules"],
        responses={
            **_ok(202, "Started (or the run that key started)", ScheduleFired),
            **_errors(*BODY, 404, 409),
        },
    )
    def run_schedule(name: str, idempotency_key: IdempotencyKey = None) -> Response[ScheduleFired]:
        return _json(202, service().run_schedule(named(name), idempotency_key))


def build_resolver(service: Callable[[], ApiService]) -> Resolver:
    """The resolver with every route; ``service`` is called per request (lazy)."""
    app = Resolver(enable_validation=True)

    def caller() -> str | None:
        # Operator routes are IAM-authorized: API Gateway puts the caller's ARN here.
        identity = app.current_event.request_context.identity
        return identity.user_arn or identity.caller or None

    def _invalid(error: RequestValidationError) -> Response[str]:
        return error_response(validation_answer(list(error.errors())))

    def _failed(error: Exception) -> Response[str]:
        return error_response(answer(error))

    app.exception_handler(RequestValidationError)(_invalid)
    app.exception_handler(Exception)(_failed)

    @app.not_found
    def _not_found(_: Exception) -> Response[str]:
        method, path = app.current_event.http_method, app.current_event.path
        allowed = app.allowed_methods(path)
        if not allowed:
            return error_response(answer(HttpError(404, "NotFound", f"no route {method} {path}")))
        # A known path asked with another method: 405, with the methods it answers.
        found = answer(
            HttpError(
                405,
                "MethodNotAllowed",
                f"{method} is not allowed on {path}; it answers {', '.join(allowed)}",
            )
        )
        return Response(
            status_code=found.status,
            content_type=JSON,
            body=found.json(),
            headers={**found.headers, "Allow": ", ".join(allowed)},
        )

    @app.post(
        "/workflows/<name>/runs",
        summary="Start a run (the body is the workflow's input)",
        tags=["runs"],
        responses={
            **_ok(202, "Run accepted (existing: the run a repeated key started)", StartedRun),
            **_errors(*BODY, 404, 409),
        },
    )
    def start(
        name: str,
        idempotency_key: IdempotencyKey = None,
        if_running: Annotated[
            Literal["fail", "attach"],
            Query(
                description='With an Idempotency-Key a running run already holds: "fail" '
                '(409 for another input) or "attach" (that run is the answer)'
            ),
        ] = "fail",
        reuse: Annotated[
            Literal["never", "after_end"],
            Query(
                description='With an Idempotency-Key whose run has ended: "never" (the '
                "default: the key names that run for its retention; the same body gets it "
                'back, another is 409) or "after_end" (a new run under the key; lookups '
                "by key name the newest)"
            ),
        ] = "never",
    ) -> Response[StartedRun]:
        payload = parse_json(app.current_event.body)
        request = StartRequest(
            named(name), payload, idempotency_key, caller(), if_running=if_running, reuse=reuse
        )
        return _json(202, service().start(request))

    @app.post(
        "/hooks/<name>",
        summary="Start a run from a signed third-party webhook",
        tags=["webhooks"],
        responses={
            **_ok(202, "Run accepted: its id and status", HookAccepted),
            **_ok(200, "Slack's URL verification: its challenge back", HookChallenge),
            **_errors(*BODY, 401, 404, 409),
        },
    )
    def hook(
        name: str, idempotency_key: IdempotencyKey = None
    ) -> Response[HookAccepted | HookChallenge]:
        event = app.current_event
        headers = dict(event.headers or {})
        answer = service().hook(named(name), headers, event.body, idempotency_key)
        return _json(200 if isinstance(answer, HookChallenge) else 202, answer)

    @app.get(
        "/runs/<run_id>",
        summary="A run: status, result or error, and its step ledger",
        tags=["runs"],
        responses={**_ok(200, "The run", RunDetail), **_errors(404)},
    )
    def get_run(run_id: str) -> RunDetail:
        return service().get_run(named(run_id))

    @app.get(
        "/runs",
        summary="List runs of a workflow (unfinished first), or those needing attention",
        tags=["runs"],
        responses={**_ok(200, "A page of runs", RunPage), **_errors(400, 422)},
    )
    def list_runs(
        workflow: Annotated[str | None, Query(max_length=200)] = None,
        status: Annotated[RunStatusName | None, Query()] = None,
        needs_attention: Annotated[bool | None, Query()] = None,
        version: Annotated[int | None, Query(ge=1)] = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 50,
        cursor: Annotated[str | None, Query(max_length=2048)] = None,
        key: RunKey = None,
    ) -> RunPage:
        return service().list_runs(
            workflow=workflow,
            status=status,
            needs_attention=needs_attention,
            version=version,
            limit=limit,
            cursor=cursor,
            key=key,
        )

    @app.post(
        "/callbacks/<token>",
        summary="Answer a callback: the body, any JSON, is its result (empty: null)",
        tags=["events"],
        responses={
            **_ok(202, "Answer recorded", CallbackAccepted),
            **_errors(*BODY, 404, 409, 410),
        },
    )
    def callback(token: str) -> Response[CallbackAccepted]:
        # The sender's own JSON, as it posts it: nothing to wrap. A callback that declared
        # its result's type refuses a body that does not fit it (422, naming the field).
        body = app.current_event.body
        return _json(202, service().complete_callback(named(token), body))

    @app.post(
        "/callbacks/<token>/fail",
        summary="Answer a callback with a failure (a rejection): {type, message}",
        tags=["events"],
        responses={
            **_ok(202, "Answer recorded", CallbackAccepted),
            **_errors(*BODY, 404, 409, 410),
        },
    )
    def callback_failed(token: str, body: CallbackError) -> Response[CallbackAccepted]:
        return _json(202, service().fail_callback(named(token), body))

    @app.post(
        "/callbacks/<token>/heartbeat",
        summary="A heartbeat for a callback with a heartbeat_timeout: the wait goes on",
        tags=["events"],
        responses={
            **_ok(202, "Heartbeat taken: the new expiry", HeartbeatAccepted),
            **_errors(*BODY, 404, 409, 410),
        },
    )
    def callback_heartbeat(token: str) -> Response[HeartbeatAccepted]:
        # The token is the authority, as for an answer; the body is ignored.
        return _json(202, service().heartbeat(named(token)))

    @app.post(
        "/runs/<run_id>/waits/<name>",
        summary="Answer a run's pending callback by its name, as an operator (no token)",
        tags=["operator"],
        responses={**_ok(202, "Answer recorded"), **_errors(*BODY, 404, 409, 410)},
    )
    def complete_wait(run_id: str, name: str, body: WaitAnswer) -> Response[CallbackAccepted]:
        answered = service().complete_wait(named(run_id), named(name), body, caller())
        return _json(202, answered)

    @app.post(
        "/runs/<run_id>/signals/<name>",
        summary="Send a named signal (the body is its payload)",
        tags=["events"],
        responses={
            **_ok(202, "Signal stored (or, repeating an Idempotency-Key, the one stored first)"),
            **_errors(*BODY, 404, 409),
        },
    )
    def signal(
        run_id: str, name: str, idempotency_key: SignalIdempotencyKey = None
    ) -> Response[SignalAccepted]:
        payload = parse_json(app.current_event.body)
        accepted = service().signal(named(run_id), named(name), payload, idempotency_key, caller())
        return _json(202, accepted)

    @app.post(
        "/runs/<run_id>/cancel",
        summary="Cancel a run, optionally running its compensations",
        tags=["operator"],
        responses={**_ok(202, "Cancel accepted"), **_errors(*BODY, 404, 409)},
    )
    def cancel(run_id: str, body: CancelRequest) -> Response[RunSummary]:
        return _json(202, service().cancel(named(run_id), body, caller()))

    @app.post(
        "/runs/<run_id>/retry",
        summary="Retry a failed run from its failed step (optionally on a newer version)",
        tags=["operator"],
        responses={**_ok(202, "Retry accepted"), **_errors(*BODY, 404, 409)},
    )
    def retry(run_id: str, body: RetryRequest) -> Response[RunSummary]:
        return _json(202, service().retry(named(run_id), body, caller()))

    @app.post(
        "/runs/<run_id>/fork",
        summary="Start a new run from a copy of this run's ledger up to a step",
        tags=["operator"],
        responses={**_ok(201, "Forked run created"), **_errors(*BODY, 404, 409)},
    )
    def fork(run_id: str, body: ForkRequest) -> Response[RunSummary]:
        return _json(201, service().fork(named(run_id), body, caller()))

    # --- the same routes scoped to one workflow --------------------------------------
    # execute-api resource ARNs name the path, so an IAM policy can allow these for one
    # workflow alone (.../POST/workflows/expense_approval/runs/*/waits/*: an approver of
    # expenses); each acts only on runs of the workflow in its path (else 404).

    def _scoped(name: str, run_id: str) -> str:
        return service().of_workflow(named(name), named(run_id))

    @app.get(
        "/workflows/<name>/runs",
        summary="List runs of this workflow (unfinished first, newest first)",
        tags=["scoped"],
        responses={**_ok(200, "A page of runs", RunPage), **_errors(400, 422)},
    )
    def list_workflow_runs(
        name: str,
        status: Annotated[RunStatusName | None, Query()] = None,
        needs_attention: Annotated[bool | None, Query()] = None,
        version: Annotated[int | None, Query(ge=1)] = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 50,
        cursor: Annotated[str | None, Query(max_length=2048)] = None,
        key: RunKey = None,
    ) -> RunPage:
        return service().list_runs(
            workflow=named(name),
            status=status,
            needs_attention=needs_attention,
            version=version,
            limit=limit,
            cursor=cursor,
            key=key,
        )

    @app.get(
        "/workflows/<name>/runs/<run_id>",
        summary="A run of this workflow",
        tags=["scoped"],
        responses={**_ok(200, "The run", RunDetail), **_errors(404)},
    )
    def get_workflow_run(name: str, run_id: str) -> RunDetail:
        return service().get_run(named(run_id), workflow=named(name))  # one read

    @app.post(
        "/workflows/<name>/runs/<run_id>/waits/<wait>",
        summary="Answer a pending callback of a run of this workflow, by its name",
        tags=["scoped"],
        responses={**_ok(202, "Answer recorded"), **_errors(*BODY, 404, 409, 410)},
    )
    def complete_workflow_wait(
        name: str, run_id: str, wait: str, body: WaitAnswer
    ) -> Response[CallbackAccepted]:
        scoped = _scoped(name, run_id)
        return _json(202, service().complete_wait(scoped, named(wait), body, caller()))

    @app.post(
        "/workflows/<name>/runs/<run_id>/signals/<signal>",
        summary="Send a named signal to a run of this workflow",
        tags=["scoped"],
        responses={**_ok(202, "Signal stored"), **_errors(*BODY, 404, 409)},
    )
    def workflow_signal(
        name: str, run_id: str, signal: str, idempotency_key: SignalIdempotencyKey = None
    ) -> Response[SignalAccepted]:
        scoped = _scoped(name, run_id)
        payload = parse_json(app.current_event.body)
        accepted = service().signal(scoped, named(signal), payload, idempotency_key, caller())
        return _json(202, accepted)

    @app.post(
        "/workflows/<name>/runs/<run_id>/cancel",
        summary="Cancel a run of this workflow",
        tags=["scoped"],
        responses={**_ok(202, "Cancel accepted"), **_errors(*BODY, 404, 409)},
    )
    def workflow_cancel(name: str, run_id: str, body: CancelRequest) -> Response[RunSummary]:
        return _json(202, service().cancel(_scoped(name, run_id), body, caller()))

    @app.post(
        "/workflows/<name>/runs/<run_id>/retry",
        summary="Retry a failed run of this workflow",
        tags=["scoped"],
        responses={**_ok(202, "Retry accepted"), **_errors(*BODY, 404, 409)},
    )
    def workflow_retry(name: str, run_id: str, body: RetryRequest) -> Response[RunSummary]:
        return _json(202, service().retry(_scoped(name, run_id), body, caller()))

    @app.post(
        "/workflows/<name>/runs/<run_id>/fork",
        summary="Fork a run of this workflow",
        tags=["scoped"],
        responses={**_ok(201, "Forked run created"), **_errors(*BODY, 404, 409)},
    )
    def workflow_fork(name: str, run_id: str, body: ForkRequest) -> Response[RunSummary]:
        return _json(201, service().fork(_scoped(name, run_id), body, caller()))

    _schedule_routes(app, service)

    @app.get("/workflows", summary="Registered workflows and their input schemas", tags=["runs"])
    def workflows() -> WorkflowList:
        return service().workflows()

    @app.get("/openapi.json", summary="This document", tags=["meta"], include_in_schema=False)
    def openapi() -> Response[str]:
        from durable.api.spec import document

        return Response(status_code=200, content_type=JSON, body=json.dumps(document(app)))

    return app
