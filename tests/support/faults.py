"""Faults injected at the botocore layer, below every adapter and above the network.

``Throttle`` answers a client's DynamoDB requests with a throttling error before they are sent:
botocore parses the fake response exactly as one from DynamoDB, so its error classes, its retry
handler and the adapter's translation all see the real thing. In front of DynamoDB Local and
LocalStack the request never leaves the process. Not in front of moto in-process: moto answers
from a ``before-send`` handler too, and botocore calls every such handler before it takes the
first answer, so moto still applies a write the client saw throttled (tests that need the write
not to happen use the HTTP servers, or a ``before-call`` hook as ``tests/handlers/test_purge.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders

THROTTLING_CODES = ("ProvisionedThroughputExceededException", "ThrottlingException")


class _Body:
    """The ``raw`` of an ``AWSResponse``: botocore reads the body through ``stream()``."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def dynamodb_answer(
    url: str, status: int, body: bytes, *, crc: int | None = None, request_id: str = ""
) -> AWSResponse:
    """A response as DynamoDB sends it, for a ``before-send`` handler to answer with:
    JSON content, the CRC32 header when ``crc`` is given, a request id when one is."""
    headers = HTTPHeaders()
    headers["Content-Type"] = "application/x-amz-json-1.0"
    headers["Content-Length"] = str(len(body))
    if crc is not None:
        headers["x-amz-crc32"] = str(crc)
    if request_id:
        headers["x-amzn-RequestId"] = request_id
    return AWSResponse(url, status, headers, _Body(body))


class Throttle:
    """Answers DynamoDB requests of ``client`` with a throttling error: after letting ``skip``
    through, the next ``times`` (every one when None); only those of ``operations`` when given
    (API names: ``PutItem``). Counts what it answered and what it let through."""

    def __init__(
        self,
        client: Any,
        *,
        times: int | None = None,
        code: str = "ProvisionedThroughputExceededException",
        operations: tuple[str, ...] = (),
        skip: int = 0,
    ) -> None:
        self.skip = skip
        self.times = times
        self.code = code
        self.throttled = 0
        self.passed = 0
        # First: the first handler that returns a response is the one botocore uses.
        for event in [f"before-send.dynamodb.{op}" for op in operations] or [
            "before-send.dynamodb"
        ]:
            client.meta.events.register_first(event, self._answer)

    def _answer(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse | None:
        if self.skip > 0 or (self.times is not None and self.throttled >= self.times):
            self.skip = max(0, self.skip - 1)
            self.passed += 1
            return None
        self.throttled += 1
        body = json.dumps(
            {
                "__type": f"com.amazonaws.dynamodb.v20120810#{self.code}",
                "message": "Rate of requests exceeds the allowed throughput (injected)",
            }
        ).encode()
        return dynamodb_answer(
            request.url, 400, body, request_id=f"injected-throttle-{self.throttled}"
        )


class LostReply:
    """Sends a client's first ``times`` DynamoDB requests of ``operation`` to the server, lets
    the server apply them, and then drops the answer (a connection closed on the way back, a
    read timeout): botocore's retry sends the same request again, as after a reply lost in
    a real network. What an idempotent write must survive."""

    def __init__(self, client: Any, operation: str, *, times: int = 1) -> None:
        self.client = client
        self.times = times
        self.dropped = 0
        client.meta.events.register_first(f"before-send.dynamodb.{operation}", self._send)

    def _send(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse | None:
        if self.dropped >= self.times:
            return None
        self.dropped += 1
        import urllib.request

        from botocore.exceptions import ConnectionClosedError

        body = request.body
        data = body.encode() if isinstance(body, str) else body if isinstance(body, bytes) else b""
        sent = urllib.request.Request(
            request.url, data=data, headers=dict(request.headers.items()), method="POST"
        )
        try:
            with urllib.request.urlopen(sent, timeout=30) as reply:
                reply.read()
        except urllib.error.HTTPError:
            pass  # answered, then lost all the same
        raise ConnectionClosedError(endpoint_url=request.url)
