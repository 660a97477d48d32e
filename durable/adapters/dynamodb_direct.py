"""The hot path's one request, sent without botocore's per-request pipeline.

A step of a run costs one DynamoDB request, a conditional ``PutItem`` of its record, and
botocore spends about twice the CPU of the HTTP exchange itself on it: endpoint rules,
user agent, serialization by the service model, signing through several layers of
header objects, event lookups. For that one operation this module does the same work
once, directly: the parameters are already DynamoDB's wire format, so the body is their
JSON; the request is signed by botocore's own SigV4 signer (``CachedKeySigV4``: its
output is byte for byte botocore's, a test holds them equal) and sent through the
client's own HTTP session (its pool, proxies, TLS and timeouts).

What it does not do is decide anything botocore decides. Only two answers are taken
here: a 200 whose CRC32 matches, and ``ConditionalCheckFailedException`` (parsed by
botocore's parser and raised as the client's own exception class). Any other outcome (a
throttle, a 5xx, a validation error, a connection error, a bad checksum) is handed to
``client.put_item``: its first attempt takes that outcome instead of sending again (a
``before-send`` handler, per thread), so botocore parses, raises or retries it exactly
as its own, and the direct attempt counts as the first of its configured attempts. A
body JSON cannot carry (binary values) is never sent here: the client sends it.

The client's events that callers hook are emitted as botocore emits them:
``provide-client-params``, ``before-parameter-build`` (the usage meter asks for consumed
capacity there), ``before-call`` and ``before-send`` (a handler may answer in place of
the server, as moto and the fault injection in the tests do; a handed-over attempt emits
``before-send`` twice, once here and once in botocore), ``after-call`` (the meter counts
the request and its units). Handlers other than botocore's own on ``request-created`` and
``before-sign`` (Powertools adds its user agent there) are called before signing, as
botocore calls them. Whoever expects more of botocore gets botocore, looked at on every
put: a handler that is not botocore's own on an event this path does not emit
(``needs-retry``, ``before-parse``, ``after-call-error``...), the adaptive retry mode (its
rate limiter learns from ``needs-retry``), a ``put_item`` set on the client (a test's
mock), anything but botocore's own ``_make_api_call`` or X-Ray's wrapper of it. A client
that is not a botocore client (a test's fake) is called as it is.

Tracing: under X-Ray's botocore patch (Powertools' ``Tracer``, ``DURABLE_TRACING``) each
direct put records the subsegment and trace header the patch records for
``client.put_item``, through the SDK's own functions; under any other wrapper of
botocore's calls (OpenTelemetry) every put goes through botocore, to be traced there.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.awsrequest import AWSRequest, prepare_request_dict
from botocore.client import BaseClient
from botocore.hooks import first_non_none_response
from botocore.parsers import create_parser

from durable.adapters.botocore_hooks import (
    BEFORE_SIGN,
    OPERATION,
    REQUEST_CREATED,
    Hooks,
    XRay,
    tracer,
)
from durable.adapters.cached_sigv4 import CachedKeySigV4

_TARGET = "DynamoDB_20120810.PutItem"
_CONTENT_TYPE = "application/x-amz-json-1.0"
_SIGNING_NAME = "dynamodb"
_ANSWERED_HERE = "ConditionalCheckFailedException"


class _Fallback(Exception):
    """This outcome is botocore's to handle: the call goes through the client, whose first
    attempt is given ``outcome`` (the answer, or what the send raised) instead of
    sending again; None: nothing was sent, the client sends it."""

    def __init__(self, outcome: Any = None) -> None:
        self.outcome = outcome


_UNRESOLVED = object()  # a DirectPut's pipeline before its first put


class DirectPut:
    """``client.put_item`` for the hot path: same parameters, same result, same
    exceptions (see the module docstring for what goes back through botocore).

    Built lazily: the ledger's client may itself be lazy (created on first use, for the
    cold start), so its internals are looked at on the first put, not before."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._pipeline: object = _UNRESOLVED  # then a _Pipeline, or None: botocore
        self._lock = threading.Lock()
        self.direct = 0  # puts answered here
        self.fallbacks = 0  # puts handed to botocore after a direct attempt

    def __call__(self, **params: Any) -> Mapping[str, Any]:
        pipeline = self._pipeline
        if pipeline is _UNRESOLVED:
            with self._lock:
                if self._pipeline is _UNRESOLVED:
                    self._pipeline = _Pipeline.of(self._client)
                pipeline = self._pipeline
        if isinstance(pipeline, _Pipeline):
            return pipeline.put(self, params)
        return self._client.put_item(**params)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _Route:
    """Where a table's puts go and how they are signed, as botocore's endpoint rules say."""

    url: str
    region: str
    signing_name: str


_PIPELINE = "_durable_direct_put"  # the attribute a client keeps its pipeline in


class _Pipeline:
    """The direct put of one botocore client (one per client, however many ledgers)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.events = client.meta.events
        self.emitter = self.events._emitter
        self.model = client.meta.service_model.operation_model(OPERATION)
        self.region = client.meta.region_name
        self.http = client._endpoint.http_session
        self.credentials = client._request_signer._credentials
        self.parser = create_parser("json")
        self.user_agent = f"{client.meta.config.user_agent or 'Botocore'} durable-direct"
        self.routes: dict[str, _Route | None] = {}
        self.xray: XRay | None = None
        # The call context as botocore's ``_make_api_call`` starts it (handlers read it):
        # the same for every put, so built once and copied per put.
        self.context: dict[str, Any] = {
            "client_region": self.region,
            "client_config": client.meta.config,
            "has_streaming_input": self.model.has_streaming_input,
            "auth_type": self.model.resolved_auth_type,
            "unsigned_payload": self.model.unsigned_payload,
            "auth_options": client.meta.service_model.metadata.get("auth"),
        }
        # The outcome of a direct attempt handed to botocore, per thread (a client is
        # shared by threads): botocore's first attempt takes it instead of sending, so
        # its retry policy counts the direct attempt as its first and decides on it.
        self.handed = threading.local()
        self.events.register_first(f"before-send.dynamodb.{OPERATION}", self._hand_over)
        # The handlers that are not botocore's own (``Hooks``), as of the emitter's lookup
        # cache: botocore replaces that dict whenever a handler is registered or removed,
        # so an unchanged one means unchanged handlers.
        self.hooks_seen: Any = self.emitter._lookup_cache
        self.hooks = Hooks.of(self.emitter)

    @classmethod
    def of(cls, client: Any) -> _Pipeline | None:
        """The direct put of ``client``, or None when it is not a botocore DynamoDB
        client that signs with SigV4 (or one behind a lazy client), or when its retry
        mode is adaptive (a rate limiter fed by events the direct put does not emit)."""
        if not isinstance(client, BaseClient):
            # A lazy client (``aws_services.LazyClient``) is looked through; any other
            # wrapper is respected, its ``put_item`` may be there on purpose.
            unwrap = getattr(type(client), "botocore_client", None)
            client = unwrap(client) if unwrap is not None else None
            if not isinstance(client, BaseClient):
                return None
        found: Any = client  # its private parts are not in botocore's stubs
        try:
            kept = vars(found).get(_PIPELINE)
            if kept is not None:
                return kept  # type: ignore[no-any-return]
            meta = found.meta
            if meta.service_model.service_name != "dynamodb":
                return None
            if meta.config.signature_version not in (None, "v4"):
                return None  # unsigned or a custom signer: botocore's business
            if (meta.config.retries or {}).get("mode") == "adaptive":
                return None
            if getattr(meta.config, "auth_scheme_preference", None):
                return None  # the auth type is chosen per operation: botocore's business
            if found._request_signer._credentials is None:
                return None
            pipeline = cls(found)
        except AttributeError:
            return None
        setattr(found, _PIPELINE, pipeline)
        return pipeline

    def _botocores_turn(self) -> bool:
        """Whether this put goes through ``client.put_item``, looked at on every put (a
        few attribute reads): a tracer other than X-Ray's or a mock in place of
        botocore's call, a ``put_item`` set on the client itself (``mock.patch.object``),
        a foreign handler on an event the direct put does not emit."""
        wrapper = tracer()
        if wrapper == "other" or "put_item" in vars(self.client):
            return True
        if self.emitter._lookup_cache is not self.hooks_seen:
            self.hooks_seen = self.emitter._lookup_cache
            self.hooks = Hooks.of(self.emitter)
        if self.hooks.expect_botocore:
            return True
        if wrapper != "xray":
            self.xray = None
        elif self.xray is None:
            self.xray = XRay()
        return False

    def _route(self, table: str) -> _Route | None:
        """The table's route, resolved once by botocore's own endpoint rules (FIPS,
        account endpoints, a custom URL with a path); None when they ask for anything
        this path does not do (extra headers, another signer): botocore then sends every
        put to that table. A resolution that fails (credentials that could not be
        refreshed, for an account endpoint) is not kept: the next put tries again, and
        this one goes to botocore, which raises what it raises."""
        if table in self.routes:
            return self.routes[table]
        route: _Route | None = None
        context = dict(self.context)
        try:
            url, headers, _ = self.client._resolve_endpoint_ruleset(
                self.model, {"TableName": table}, context
            )
        except Exception:
            return None
        if not headers and context.get("auth_type") in ("v4", None):
            signing = context.get("signing", {})
            request: dict[str, Any] = {"url_path": "/", "query_string": "", "headers": {}}
            prepare_request_dict(request, url)
            route = _Route(
                url=request["url"],
                region=signing.get("region", self.region),
                signing_name=signing.get("signing_name", _SIGNING_NAME),
            )
        self.routes[table] = route
        return route

    def put(self, counts: DirectPut, params: dict[str, Any]) -> Mapping[str, Any]:
        if self._botocores_turn():
            return self.client.put_item(**params)  # type: ignore[no-any-return]
        if self.xray is not None:
            # In an X-Ray subsegment, as X-Ray's patch records ``client.put_item`` (a put
            # handed to botocore shows its own subsegment inside this one).
            return self.xray.record(  # type: ignore[no-any-return]
                self.client, lambda call: self._put(counts, call), params
            )
        return self._put(counts, params)

    def _put(self, counts: DirectPut, params: dict[str, Any]) -> Mapping[str, Any]:
        route = self._route(str(params.get("TableName", "")))
        if route is None:
            return self.client.put_item(**params)  # type: ignore[no-any-return]
        try:
            http, answer = self._send(route, params)
        except _Fallback as fallback:
            counts.fallbacks += 1
            self.handed.outcome = fallback.outcome
            try:
                return self.client.put_item(**params)  # type: ignore[no-any-return]
            finally:
                self.handed.outcome = None
        counts.direct += 1
        if http.status_code >= 300:
            code = answer.get("Error", {}).get("Code")
            raise self.client.exceptions.from_code(code)(answer, OPERATION)
        return answer

    def _hand_over(self, **_: Any) -> Any:
        """``before-send``: botocore's first attempt of a handed-over put takes the direct
        attempt's outcome (its answer, or what its send raised, raised again: botocore's
        endpoint treats that as its own send's)."""
        outcome = getattr(self.handed, "outcome", None)
        if outcome is None:
            return None
        self.handed.outcome = None
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _send(self, route: _Route, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        context = dict(self.context)
        events = self.events
        # As botocore's ``_emit_api_params``: a handler may replace the parameters.
        params = first_non_none_response(
            events.emit(
                f"provide-client-params.dynamodb.{OPERATION}",
                params=params,
                model=self.model,
                context=context,
            ),
            default=params,
        )
        events.emit(
            f"before-parameter-build.dynamodb.{OPERATION}",
            params=params,
            model=self.model,
            context=context,
        )
        try:
            body = json.dumps(params, separators=(",", ":")).encode()
        except (TypeError, ValueError):
            raise _Fallback from None  # binary values: botocore's serializer encodes them
        request_dict: dict[str, Any] = {
            "url_path": "/",
            "query_string": "",
            "method": "POST",
            "headers": {
                "X-Amz-Target": _TARGET,
                "Content-Type": _CONTENT_TYPE,
                "User-Agent": self.user_agent,
            },
            "body": body,
            "url": route.url,
            "context": context,
        }
        _, stubbed = events.emit_until_response(
            f"before-call.dynamodb.{OPERATION}",
            model=self.model,
            params=request_dict,
            request_signer=self.client._request_signer,
            context=context,
        )
        if stubbed is not None:
            http, parsed = stubbed
        else:
            http, parsed = self._exchange(route, request_dict)
        events.emit(
            f"after-call.dynamodb.{OPERATION}",
            http_response=http,
            parsed=parsed,
            model=self.model,
            context=context,
        )
        return http, parsed

    def _exchange(self, route: _Route, request_dict: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """One attempt: sign, send, and take the answer if it is one of the two this path
        takes (see the module docstring); else hand the outcome to botocore."""
        request = AWSRequest(
            method=request_dict["method"],
            url=request_dict["url"],
            data=request_dict["body"],
            headers=request_dict["headers"],
        )
        request.context.update(request_dict["context"])
        frozen = self.credentials.get_frozen_credentials()
        hooks = self.hooks
        for handler in hooks.request_created:
            handler(request=request, operation_name=OPERATION, event_name=REQUEST_CREATED)
        for handler in hooks.before_sign:
            handler(
                request=request,
                signing_name=route.signing_name,
                region_name=route.region,
                signature_version="v4",
                request_signer=self.client._request_signer,
                operation_name=OPERATION,
                event_name=BEFORE_SIGN,
            )
        CachedKeySigV4(frozen, route.signing_name, route.region).add_auth(request)
        prepared = request.prepare()
        if self.xray is not None:  # as botocore's, after signing: the header is not signed
            self.xray.add_header(prepared)
        # As botocore's endpoint does: every handler is called, the first answer is taken;
        # whatever a handler or the send raises is the attempt's outcome.
        try:
            answered = first_non_none_response(
                self.events.emit(f"before-send.dynamodb.{OPERATION}", request=prepared)
            )
            http = answered if answered is not None else self.http.send(prepared)
        except Exception as trouble:
            raise _Fallback(trouble) from None  # botocore retries it or raises it
        content = http.content
        crc = http.headers.get("x-amz-crc32")
        if crc is not None and (not crc.isdigit() or int(crc) != zlib.crc32(content)):
            raise _Fallback(http)  # damaged in transit: botocore's check decides
        # As botocore's parser and endpoint build it: a request id only when one came.
        headers = {k.lower(): v for k, v in http.headers.items()}
        request_id = headers.get("x-amzn-requestid")
        metadata: dict[str, Any] = {"RequestId": request_id} if request_id is not None else {}
        metadata.update(HTTPStatusCode=http.status_code, HTTPHeaders=headers, RetryAttempts=0)
        if http.status_code == 200:
            try:
                parsed = json.loads(content) if content else {}
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                raise _Fallback(http)  # not DynamoDB's JSON: botocore's parser decides
            if parsed.keys() - {"ConsumedCapacity"}:
                # Old attributes, item collection metrics, a field botocore's model does
                # not know: parsed by the model, as botocore does (binary values, names).
                parsed = self._parse(http, content, self.model.output_shape)
            parsed["ResponseMetadata"] = metadata
            return http, parsed
        if http.status_code == 400:
            parsed = self._parse(http, content, self.model.output_shape)
            code = parsed.get("Error", {}).get("Code")
            if code == _ANSWERED_HERE:
                # As botocore's endpoint does: the error's modeled fields (the old ``Item``).
                shape = self.model.service_model.shape_for_error_code(code)
                if shape is not None:
                    parsed.update(self._parse(http, content, shape))
                parsed["ResponseMetadata"] = metadata
                return http, parsed
        raise _Fallback(http)  # throttles, validation, 5xx: botocore's to retry or raise

    def _parse(self, http: Any, content: bytes, shape: Any) -> dict[str, Any]:
        answer = {"status_code": http.status_code, "headers": http.headers, "body": content}
        return self.parser.parse(answer, shape)  # type: ignore[no-any-return]
