"""Who else hooks a botocore client, as far as the direct step put must honour them.

``durable.adapters.dynamodb_direct`` does for one operation what botocore's pipeline does,
so it must know when something expects that pipeline: a tracer wrapping botocore's calls
(``tracer``), handlers on the client's events that are not botocore's own (``Hooks``),
and X-Ray's patch, whose subsegment and trace header it records itself (``XRay``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from types import FunctionType
from typing import Any

import botocore
from botocore.client import BaseClient

OPERATION = "PutItem"

_XRAY_PATCH = "aws_xray_sdk.ext.botocore.patch"
_BOTOCORE_DIR = os.path.dirname(botocore.__file__) + os.sep


def tracer() -> str:
    """Who wraps or replaces botocore's calls: "" nobody; "xray" the X-Ray SDK's botocore
    patch (what Powertools' Tracer applies), whose subsegment and trace header the direct
    put then records itself, through the SDK's own functions; "other" anything else
    (OpenTelemetry's instrumentation, a test's mock): every put then goes through it."""
    made = vars(BaseClient).get("_make_api_call")
    # botocore's own method is a plain function whose code is botocore's (its decorator's
    # wrapper, in botocore's package); a tracer's wrapper (wrapt's FunctionWrapper, for
    # both X-Ray and OpenTelemetry) is not a function, and a function wrapped in place
    # (``functools.wraps`` copies the name and module, not the code) has code elsewhere.
    # ``type``, not ``isinstance``: a wrapt proxy answers ``isinstance`` checks as the
    # function it wraps.
    if type(made) is FunctionType:
        return "" if made.__code__.co_filename.startswith(_BOTOCORE_DIR) else "other"
    wrapper = getattr(made, "_self_wrapper", None)
    return "xray" if getattr(wrapper, "__module__", None) == _XRAY_PATCH else "other"


# Around signing, botocore's own handlers are the work this path does itself (signing, the
# user agent, retry bookkeeping headers); any other handler there (Powertools adds its
# user agent on ``request-created``, a user adds a header ``before-sign``) is called by the
# direct put with botocore's arguments, before it signs, as botocore calls it.
REQUEST_CREATED = f"request-created.dynamodb.{OPERATION}"
BEFORE_SIGN = f"before-sign.dynamodb.{OPERATION}"

# The events of a PutItem that the direct put does not emit at all. A handler on one of
# them that is not botocore's own (an SDK integration's hook on the answer, a rate
# limiter) expects botocore's pipeline: then every put takes it.
_NOT_EMITTED = tuple(
    f"{event}.dynamodb.{OPERATION}"
    for event in (
        "before-endpoint-resolution",
        "choose-signer",
        "before-parse",
        "response-received",
        "needs-retry",
        "after-call-error",
    )
)


def _foreign(emitter: Any, event: str) -> list[Callable[..., Any]]:
    """The handlers of ``event`` that are not botocore's own, in the order it calls them."""
    return [
        handler
        for handler in emitter._handlers.prefix_search(event)
        if not (getattr(handler, "__module__", None) or "").startswith("botocore.")
    ]


@dataclass(frozen=True)
class Hooks:
    """The client's handlers that are not botocore's own, as far as the direct put cares."""

    expect_botocore: bool  # one listens to an event the direct put does not emit
    request_created: list[Callable[..., Any]]
    before_sign: list[Callable[..., Any]]

    @classmethod
    def of(cls, emitter: Any) -> Hooks:
        return cls(
            expect_botocore=any(_foreign(emitter, event) for event in _NOT_EMITTED),
            request_created=_foreign(emitter, REQUEST_CREATED),
            before_sign=_foreign(emitter, BEFORE_SIGN),
        )


class XRay:
    """What X-Ray's botocore patch does around a call, done around the direct put with the
    SDK's own functions: a subsegment named and annotated by its ``aws_meta_processor``
    (operation, region, table, request id, status, error), and the trace header its
    ``inject_header`` adds to the request."""

    def __init__(self) -> None:
        from aws_xray_sdk.core import xray_recorder
        from aws_xray_sdk.ext.boto_utils import aws_meta_processor, inject_header

        self.recorder = xray_recorder
        self.meta = aws_meta_processor
        self.inject = inject_header

    def record(self, client: Any, put: Callable[[dict[str, Any]], Any], params: Any) -> Any:
        # As the patch's wrapper: args (operation, params) are what the processor reads.
        return self.recorder.record_subsegment(
            lambda _operation, call: put(call),
            client,
            (OPERATION, params),
            {},
            name=client.meta.service_model.metadata["endpointPrefix"],
            namespace="aws",
            meta_processor=self.meta,
        )

    def add_header(self, request: Any) -> None:
        self.inject(lambda *_: None, None, (request,), {})
