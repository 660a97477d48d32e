"""A store that accepts connections and never answers (a stopped DynamoDB Local, a network
that drops replies): the API answers 503 with ``Retry-After`` within its clients' timeout
budget, instead of holding the request as long as the store hangs (issue 45, item 2).

The store here is a real TCP listener on 127.0.0.1 that accepts every connection and never
writes a byte; the API is the production composition (``aws_services``) pointed at it with
boto3's standard ``AWS_ENDPOINT_URL_DYNAMODB`` variable, as ``durable dev`` points it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from durable.aws import api_handler
from durable.settings import Settings
from tests.handlers.conftest import WORKER_ARN
from tests.handlers.events import LambdaContext, api_event

pytestmark = pytest.mark.integration

# Far above the default budget (3 attempts of a 3 s read: about 9 s) and far below what
# botocore's defaults gave (a 60 s read, up to 10 attempts for DynamoDB): catches "hangs".
UPPER_BOUND = 30.0


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never answers them."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port: int = self.listener.getsockname()[1]
        self.held: list[socket.socket] = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.held.append(conn)  # kept open, never read nor written

    def close(self) -> None:
        self._closed.set()
        self.listener.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[SilentServer]:
    server = SilentServer()
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", f"http://127.0.0.1:{server.port}")
    try:
        yield server
    finally:
        server.close()


def answer_within(api: Any, event: dict[str, Any], bound: float) -> tuple[dict[str, Any], float]:
    """The handler's answer to ``event``, in a thread so a hang fails the test at ``bound``."""
    out: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            out.append(api(event, LambdaContext(function_name="durable-api-test")))
        except BaseException as e:  # reported below
            errors.append(e)

    began = time.monotonic()
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(bound)
    took = time.monotonic() - began
    assert not thread.is_alive(), f"the API still had no answer after {took:.1f} s"
    assert not errors, errors
    return out[0], took


SIGNUP = {"user_id": "u1", "email": "e@example.com"}
KEYED = {"Idempotency-Key": "k-hung"}  # Powertools' idempotency layer reads its table first


@pytest.mark.parametrize(
    "method,path,body,headers",
    [
        ("POST", "/workflows/greet/runs", SIGNUP, None),
        ("POST", "/workflows/greet/runs", SIGNUP, KEYED),
        ("GET", "/runs/" + "0" * 26, None, None),
    ],
    ids=["start", "keyed-start", "read"],
)
def test_a_hung_store_gets_a_503_with_retry_after_not_a_hung_request(
    silent_store: SilentServer,
    method: str,
    path: str,
    body: Any,
    headers: dict[str, str] | None,
) -> None:
    # GIVEN the API composed as on AWS, its DynamoDB endpoint a server that never answers
    settings = Settings(
        app="tests.handlers.workflows:app",
        ledger_table="durable-ledger-hung",
        idempotency_table="durable-idempotency-hung",
        worker_function=WORKER_ARN,
        served_check_seconds=0,
    )
    api = api_handler(None, settings)
    # WHEN a client starts a run, or reads one
    reply, took = answer_within(api, api_event(method, path, body, headers=headers), UPPER_BOUND)
    print(f"{method} {path}: {reply['statusCode']} after {took:.1f} s")
    # THEN it is told to come back later (storage did not answer), within the budget
    assert reply["statusCode"] == 503, reply
    both = {**(reply.get("multiValueHeaders") or {}), **(reply.get("headers") or {})}
    headers = {k.lower(): v[0] if isinstance(v, list) else v for k, v in both.items()}
    assert headers.get("retry-after") == "5", reply
    assert json.loads(reply["body"])["error"]["type"] == "ServiceUnavailable"
    assert silent_store.held, "the request never reached the silent store"
