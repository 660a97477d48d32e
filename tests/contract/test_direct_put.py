"""The direct step put (``durable.adapters.dynamodb_direct``) on every DynamoDB server.

It must be botocore's ``put_item`` in all but its CPU: the same signature byte for byte,
the same answers and exceptions, the same events for the usage meter and for handlers
that answer in place of the server, and botocore's own path for anything it does not
take itself (a throttle, a damaged answer, a dropped connection).
"""

from __future__ import annotations

import datetime
import itertools
import json
import zlib
from collections.abc import Iterator
from typing import Any

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

from durable.adapters import dynamodb_direct, dynamodb_units
from durable.adapters.aws_services import LazyClient
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.dynamodb_direct import CachedKeySigV4, DirectPut
from durable.model import StepRecord
from durable.usage import REQUESTS, WRITE_UNITS, Meter
from tests.conftest import ClientFactory, MakeTables
from tests.support.faults import Throttle
from tests.support.records import make_step

# --- the signature ---------------------------------------------------------------------------


def _request(body: bytes, **headers: str) -> AWSRequest:
    request = AWSRequest(
        method="POST",
        url="https://dynamodb.eu-west-1.amazonaws.com/",
        data=body,
        headers={
            "X-Amz-Target": "DynamoDB_20120810.PutItem",
            "Content-Type": "application/x-amz-json-1.0",
            **headers,
        },
    )
    request.context = {}
    return request


def _signed(
    signer: type[SigV4Auth], credentials: Any, request: AWSRequest, region: str
) -> dict[str, str]:
    signer(credentials, "dynamodb", region).add_auth(request)
    return {k: request.headers[k] for k in ("Authorization", "X-Amz-Date")} | {
        "token": request.headers.get("X-Amz-Security-Token", "")
    }


BODIES = [b"{}", json.dumps({"TableName": "t", "Item": {"pk": {"S": "RUN#é ✓"}}}).encode()]
HEADERS: list[dict[str, str]] = [
    {},
    {"User-Agent": "Boto3/1  spaced   out "},
    {"X-Amzn-Trace-Id": "Root=1-abc;Parent=def;Sampled=1", "Expect": "100-continue"},
]
DAYS = [datetime.datetime(2026, 12, 2, 23, 59, 59), datetime.datetime(2026, 12, 3, 0, 0, 1)]
KEYS = [Credentials("AKIDONE", "secret-one"), Credentials("AKIDTWO", "secret-two", "tok")]


def test_the_cached_signer_signs_byte_for_byte_as_botocore(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN every mix of body, extra headers (spaces to trim, one botocore never signs),
    two days either side of midnight, two credentials (one with a session token), two
    regions, and a request signed once already (a retry) WHEN both signers sign it
    THEN the headers they set are equal: the cached key follows the day, the secret and
    the region, and the canonical headers are botocore's."""
    compared = 0
    for body, headers, day, credentials, region in itertools.product(
        BODIES, HEADERS, DAYS, KEYS, ("eu-west-1", "us-east-1")
    ):
        monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda day=day: day)
        frozen = credentials.get_frozen_credentials()
        for resign in (False, True):
            ours, theirs = _request(body, **headers), _request(body, **headers)
            if resign:
                CachedKeySigV4(frozen, "dynamodb", region).add_auth(ours)
                SigV4Auth(frozen, "dynamodb", region).add_auth(theirs)
            assert _signed(CachedKeySigV4, frozen, ours, region) == _signed(
                SigV4Auth, frozen, theirs, region
            )
            assert ours.headers.get_all("Authorization") == [ours.headers["Authorization"]]
            compared += 1
    assert compared == len(BODIES) * len(HEADERS) * len(DAYS) * len(KEYS) * 2 * 2


def test_the_signing_keys_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """GIVEN credentials rotated many times in one container WHEN each signs THEN only a
    few derived keys are kept (old secrets are not held for the container's life)."""
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: DAYS[0])
    for i in range(3 * dynamodb_direct._KEYS_KEPT):
        frozen = Credentials(f"AKID{i}", f"secret-{i}").get_frozen_credentials()
        CachedKeySigV4(frozen, "dynamodb", "eu-west-1").add_auth(_request(b"{}"))
        assert len(dynamodb_direct._KEYS) <= dynamodb_direct._KEYS_KEPT


# --- the put on a server -----------------------------------------------------------------------


def _step(position: str, output: str) -> StepRecord:
    return make_step(position=position, output=output)


@pytest.fixture
def setup(
    dynamodb_factory: ClientFactory, make_tables: MakeTables
) -> Iterator[tuple[Any, DynamoLedger, DirectPut]]:
    client = dynamodb_factory()
    table, _ = make_tables(client)
    ledger = DynamoLedger(client, table)
    put = ledger.put_step
    assert isinstance(put, DirectPut)
    yield client, ledger, put


def test_a_step_put_is_answered_directly_with_botocores_answers(
    setup: tuple[Any, DynamoLedger, DirectPut],
) -> None:
    """GIVEN a ledger on a botocore client WHEN a step is written, then a different final
    record at the same position THEN both went direct, never through botocore's pipeline
    (no ``request-created`` for PutItem), the first stands and the second write was
    answered with it (the refusal's old item, parsed as botocore parses it)."""
    client, ledger, put = setup
    created: list[str] = []
    client.meta.events.register(
        "request-created.dynamodb.PutItem", lambda **_: created.append("botocore")
    )
    first = _step("0001", '"first"')
    assert ledger.write_step(first) == first
    assert ledger.write_step(_step("0001", '"second"')) == first
    assert ledger.get_step("RUN1", "0001") == first
    assert (put.direct, put.fallbacks, created) == (2, 0, [])


def test_the_meter_sees_a_direct_put_as_a_botocore_one(
    setup: tuple[Any, DynamoLedger, DirectPut],
) -> None:
    """GIVEN the usage meter watching the client WHEN a step is put directly THEN it asked
    for consumed capacity and counted one request and its units, as for botocore's."""
    client, ledger, put = setup
    meter = Meter()
    dynamodb_units.watch(client, meter)
    with meter.invocation(memory_mb=512, timer=False):
        ledger.write_step(_step("0001", '"x"'))
        used = meter.so_far()
    assert put.direct == 1
    assert used.get(REQUESTS) == 1.0
    assert used.get(WRITE_UNITS) == 1.0


def test_a_throttled_put_goes_back_through_botocore(
    setup: tuple[Any, DynamoLedger, DirectPut], dynamodb_server: str
) -> None:
    """GIVEN the first PutItem answered with a throttle WHEN a step is written THEN the
    put is sent again through botocore (its retry policy applies) and the record lands."""
    if dynamodb_server == "moto":
        pytest.skip("moto in-process answers from before-send too (tests/support/faults.py)")
    client, ledger, put = setup
    throttle = Throttle(client, operations=("PutItem",), times=1)
    step = _step("0001", '"x"')
    assert ledger.write_step(step) == step
    assert (throttle.throttled, throttle.passed) == (1, 1)
    assert (put.direct, put.fallbacks) == (0, 1)
    assert ledger.get_step("RUN1", "0001") == step


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def test_a_damaged_answer_goes_back_through_botocore(
    setup: tuple[Any, DynamoLedger, DirectPut], dynamodb_server: str
) -> None:
    """GIVEN the first PutItem answered 200 with a body whose CRC32 is not the header's
    WHEN a step is written THEN the put is sent again through botocore and lands."""
    if dynamodb_server == "moto":
        pytest.skip("moto in-process answers from before-send too (tests/support/faults.py)")
    client, ledger, put = setup
    answered: list[int] = []

    def damaged(request: Any, **_: Any) -> AWSResponse | None:
        if answered:
            return None
        answered.append(1)
        headers = HTTPHeaders()
        headers["x-amz-crc32"] = str(zlib.crc32(b"{}") + 1)
        return AWSResponse(request.url, 200, headers, _Body(b"{}"))

    client.meta.events.register_first("before-send.dynamodb.PutItem", damaged)
    step = _step("0001", '"x"')
    assert ledger.write_step(step) == step
    assert (answered, put.direct, put.fallbacks) == ([1], 0, 1)
    assert ledger.get_step("RUN1", "0001") == step


def test_a_dropped_connection_goes_back_through_botocore(
    setup: tuple[Any, DynamoLedger, DirectPut], dynamodb_server: str
) -> None:
    """GIVEN the HTTP session failing the first send WHEN a step is written THEN the put
    is sent again through botocore (which owns retries of connection errors)."""
    if dynamodb_server == "moto":
        pytest.skip("moto in-process never reaches the HTTP session")
    client, ledger, put = setup
    session = client._endpoint.http_session
    real_send = session.send
    failed: list[int] = []

    def send(request: Any) -> Any:
        if not failed:
            failed.append(1)
            raise ConnectionResetError("dropped (injected)")
        return real_send(request)

    session.send = send
    step = _step("0001", '"x"')
    assert ledger.write_step(step) == step
    assert (failed, put.direct, put.fallbacks) == ([1], 0, 1)


def test_a_handler_answering_before_the_call_is_obeyed(
    setup: tuple[Any, DynamoLedger, DirectPut],
) -> None:
    """GIVEN a ``before-call`` handler that answers a PutItem itself (as stubs do) WHEN a
    step is written THEN its answer is the answer and nothing reaches the server."""
    client, ledger, put = setup

    def stub(**_: Any) -> tuple[Any, dict[str, Any]]:
        return AWSResponse("", 200, HTTPHeaders(), _Body(b"")), {"stubbed": True}

    client.meta.events.register_first("before-call.dynamodb.PutItem", stub)
    assert ledger.put_step(TableName=ledger.table, Item={}) == {"stubbed": True}
    assert ledger.get_step("RUN1", "0001") is None
    assert put.direct == 1


def test_a_lazy_client_is_looked_through_and_a_wrapper_respected(
    dynamodb_factory: ClientFactory, make_tables: MakeTables
) -> None:
    """GIVEN a lazy client (made on first use) and a wrapper whose ``put_item`` is its own
    WHEN each ledger writes a step THEN the lazy one goes direct and the wrapper's
    ``put_item`` is called."""
    client = dynamodb_factory()
    table, _ = make_tables(client)
    lazy = DynamoLedger(LazyClient(lambda: client), table)  # type: ignore[arg-type]
    step = _step("0001", '"x"')
    assert lazy.write_step(step) == step
    assert isinstance(lazy.put_step, DirectPut) and lazy.put_step.direct == 1

    called: list[dict[str, Any]] = []

    class Wrapper:
        def __getattr__(self, name: str) -> Any:
            return getattr(client, name)

        def put_item(self, **params: Any) -> Any:
            called.append(params)
            return client.put_item(**params)

    wrapped = DynamoLedger(Wrapper(), table)  # type: ignore[arg-type]
    assert wrapped.write_step(_step("0002", '"y"')) == _step("0002", '"y"')
    assert len(called) == 1
    assert isinstance(wrapped.put_step, DirectPut) and wrapped.put_step.direct == 0


def test_off_every_put_is_botocores(
    dynamodb_factory: ClientFactory, make_tables: MakeTables
) -> None:
    """GIVEN ``direct_puts=False`` (the composition root's choice under X-Ray tracing)
    WHEN a step is written THEN it goes through botocore's pipeline."""
    client = dynamodb_factory()
    table, _ = make_tables(client)
    created: list[str] = []
    client.meta.events.register(
        "request-created.dynamodb.PutItem", lambda **_: created.append("botocore")
    )
    ledger = DynamoLedger(client, table, direct_puts=False)
    ledger.write_step(_step("0001", '"x"'))
    assert created == ["botocore"]
