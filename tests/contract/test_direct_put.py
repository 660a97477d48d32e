"""The direct step put (``durable.adapters.dynamodb_direct``) on every DynamoDB server.

It must be botocore's ``put_item`` in all but its CPU: the same signature byte for byte,
the same answers and exceptions, the same events for the usage meter and for handlers
that answer in place of the server, and botocore's own path for anything it does not
take itself (a throttle, a damaged answer, a dropped connection).
"""

from __future__ import annotations

import datetime
import functools
import hmac
import itertools
import json
import zlib
from collections.abc import Iterator
from typing import Any

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.client import BaseClient
from botocore.credentials import Credentials
from botocore.endpoint import Endpoint
from botocore.exceptions import ClientError, ConnectionClosedError

from durable.adapters import botocore_hooks, cached_sigv4, dynamodb_units
from durable.adapters.aws_services import LazyClient
from durable.adapters.cached_sigv4 import CachedKeySigV4
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.dynamodb_direct import DirectPut
from durable.model import StepRecord
from durable.usage import REQUESTS, WRITE_UNITS, Meter
from tests.conftest import ClientFactory, MakeTables
from tests.support.faults import dynamodb_answer
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
    {"Host": "proxy.internal"},  # given: signed as given, not taken from the URL
]
DAYS = [datetime.datetime(2026, 12, 2, 23, 59, 59), datetime.datetime(2026, 12, 3, 0, 0, 1)]
KEYS = [Credentials("AKIDONE", "secret-one"), Credentials("AKIDTWO", "secret-two", "tok")]


def test_the_cached_signer_signs_byte_for_byte_as_botocore(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN every mix of body, extra headers (spaces to trim, one botocore never signs),
    two days either side of midnight, two credentials (one with a session token), two
    regions, and a request signed once already and given a header since (a retry) WHEN
    both signers sign it
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
                for request in (ours, theirs):  # given twice: both values are signed
                    request.headers["X-Added-Since"] = "yes"
                    request.headers["X-Added-Since"] = "twice"
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
    for i in range(3 * cached_sigv4._KEYS_KEPT):
        frozen = Credentials(f"AKID{i}", f"secret-{i}").get_frozen_credentials()
        CachedKeySigV4(frozen, "dynamodb", "eu-west-1").add_auth(_request(b"{}"))
        assert len(cached_sigv4._KEYS) <= cached_sigv4._KEYS_KEPT


def test_a_signing_key_is_derived_once_a_day_per_credential(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN two credentials signing in turn on one day WHEN each signs again THEN no key is
    derived again (one HMAC a request, the signature's), the point of the cache."""
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: DAYS[0])
    monkeypatch.setattr(cached_sigv4, "_KEYS", {})
    made = [Credentials(f"AKID{i}", f"kept-{i}").get_frozen_credentials() for i in (1, 2)]
    real_new = hmac.new
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real_new(*args, **kwargs)

    monkeypatch.setattr(hmac, "new", counted)  # the module the signer derives keys with
    for frozen in made:  # first signings: 4 HMACs to derive the key, 1 to sign
        CachedKeySigV4(frozen, "dynamodb", "eu-west-1").add_auth(_request(b"{}"))
    assert len(calls) == 2 * 5
    calls.clear()
    for frozen in made:
        CachedKeySigV4(frozen, "dynamodb", "eu-west-1").add_auth(_request(b"{}"))
    assert len(calls) == 2


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
    (its endpoint never made a PutItem), the first stands and the second write was
    answered with it (the refusal's old item, parsed as botocore parses it)."""
    client, ledger, put = setup
    made = _botocore_requests(client)
    first = _step("0001", '"first"')
    assert ledger.write_step(first) == first
    assert ledger.write_step(_step("0001", '"second"')) == first
    assert ledger.get_step("RUN1", "0001") == first
    assert (put.direct, put.fallbacks, made) == (2, 0, ["GetItem"])


def _botocore_requests(client: Any) -> list[str]:
    """The operations botocore's own pipeline sends from now on (its endpoint's requests)."""
    endpoint = client._endpoint
    real = endpoint.make_request
    made: list[str] = []

    def make_request(model: Any, request_dict: Any) -> Any:
        made.append(model.name)
        return real(model, request_dict)

    endpoint.make_request = make_request
    return made


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


def _answer(url: str, status: int, body: bytes, crc: int | None = None) -> AWSResponse:
    return dynamodb_answer(url, status, body, crc=crc)


def _count_sends(client: Any) -> list[Any]:
    """The requests that reach the network (the HTTP session's sends)."""
    session = client._endpoint.http_session
    real_send = session.send
    sent: list[Any] = []

    def send(request: Any) -> Any:
        sent.append(request)
        return real_send(request)

    session.send = send
    return sent


def _answer_first(client: Any, answer: Any) -> list[int]:
    """The first PutItem answered with ``answer`` (a response, or an error raised)."""
    answered: list[int] = []

    def first(request: Any, **_: Any) -> AWSResponse | None:
        if answered:
            return None
        answered.append(1)
        if isinstance(answer, BaseException):
            raise answer
        return answer(request.url) if callable(answer) else answer  # type: ignore[no-any-return]

    client.meta.events.register_first("before-send.dynamodb.PutItem", first)
    return answered


HTTP_ONLY = "moto in-process answers from before-send and never reaches the HTTP session"
REFUSAL = json.dumps(
    {"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"}
).encode()
THROTTLE = json.dumps(
    {"__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"}
).encode()
# Answers this path must not take: botocore decides on each (retries it, here).
NOT_OURS = {
    "throttle": lambda url: _answer(url, 400, THROTTLE),
    "200 with a damaged body": lambda url: _answer(url, 200, b"{}", zlib.crc32(b"{}") + 1),
    "refusal with a damaged body": lambda url: _answer(url, 400, REFUSAL, zlib.crc32(REFUSAL) + 1),
    "refusal in a 500": lambda url: _answer(url, 500, REFUSAL),
    "dropped connection": ConnectionClosedError(endpoint_url="http://dropped"),
}


@pytest.mark.parametrize("answer", list(NOT_OURS))
def test_an_answer_not_ours_is_botocores_without_sending_again(
    setup: tuple[Any, DynamoLedger, DirectPut], dynamodb_server: str, answer: str
) -> None:
    """GIVEN the direct attempt's answer is one botocore must judge (a throttle, a damaged
    body, a refusal that is not a 400, a dropped connection) WHEN a step is written THEN
    botocore's first attempt takes that answer instead of sending again, retries it as
    its own, and the record lands: one request reached the server, not two."""
    if dynamodb_server == "moto":
        pytest.skip(HTTP_ONLY)
    client, ledger, put = setup
    answered = _answer_first(client, NOT_OURS[answer])
    sent = _count_sends(client)
    step = _step("0001", '"x"')
    assert ledger.write_step(step) == step
    assert (answered, len(sent), put.direct, put.fallbacks) == ([1], 1, 0, 1)
    assert ledger.get_step("RUN1", "0001") == step


def test_an_error_botocore_does_not_retry_is_raised_after_one_request(
    setup: tuple[Any, DynamoLedger, DirectPut], dynamodb_server: str
) -> None:
    """GIVEN a put the server refuses as invalid WHEN it is put THEN botocore raises the
    server's ValidationException, parsed from the direct attempt's answer: the request
    was sent once."""
    if dynamodb_server == "moto":
        pytest.skip(HTTP_ONLY)
    client, ledger, put = setup
    sent = _count_sends(client)
    with pytest.raises(ClientError) as info:
        ledger.put_step(
            TableName=ledger.table,
            Item={"pk": {"S": "RUN#1"}, "sk": {"S": "STEP#1"}},
            ConditionExpression="attribute_not_exists(#missing)",
        )
    assert info.value.response["Error"]["Code"] == "ValidationException"
    assert info.value.response["ResponseMetadata"]["RetryAttempts"] == 0
    assert (len(sent), put.fallbacks) == (1, 1)


def test_a_200_that_is_not_dynamodb_json_is_botocores(
    setup: tuple[Any, DynamoLedger, DirectPut],
) -> None:
    """GIVEN a 200 whose body is not a JSON object WHEN a step is put THEN botocore's
    parser judges it (it takes it as an empty success), not a decoding error here."""
    client, ledger, put = setup
    _answer_first(client, lambda url: _answer(url, 200, b"<html>a proxy page</html>"))
    meter = Meter()
    dynamodb_units.watch(client, meter)
    with meter.invocation(memory_mb=512, timer=False):
        answer = ledger.put_step(TableName=ledger.table, Item={})
        used = meter.so_far()
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert (put.direct, put.fallbacks, used.get(REQUESTS)) == (0, 1, 1.0)


def test_a_handler_answering_before_the_call_is_obeyed(
    setup: tuple[Any, DynamoLedger, DirectPut],
) -> None:
    """GIVEN a ``before-call`` handler that answers a PutItem itself (as stubs do) WHEN a
    step is written THEN its answer is the answer and nothing reaches the server."""
    client, ledger, put = setup

    def stub(**_: Any) -> tuple[Any, dict[str, Any]]:
        return _answer("", 200, b""), {"stubbed": True}

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
    """GIVEN ``direct_puts=False``
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


# --- where a put goes: botocore's endpoint rules ------------------------------------------------

ROUTES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "regional": ({"region_name": "eu-west-1"}, {}),
    "FIPS in GovCloud": ({"region_name": "us-gov-west-1"}, {"use_fips_endpoint": True}),
    "a custom URL with a path": (
        {"region_name": "us-east-1", "endpoint_url": "http://127.0.0.1:1/ddb"},
        {},
    ),
    "an account endpoint": (
        {"region_name": "us-east-1", "aws_account_id": "123456789012"},
        {"account_id_endpoint_mode": "preferred"},
    ),
}


def _scope(request: Any) -> tuple[str, str]:
    """The URL a request goes to and the credential scope it is signed for."""
    authorization = request.headers["Authorization"]
    if isinstance(authorization, bytes):
        authorization = authorization.decode()
    credential = authorization.split("Credential=")[1].split(",")[0]
    return request.url, credential.split("/", 2)[2]


@pytest.mark.unit
@pytest.mark.parametrize("route", list(ROUTES))
def test_a_put_goes_where_botocore_sends_it_signed_for_the_same_scope(route: str) -> None:
    """GIVEN a client whose endpoint rules are not the plain regional URL (FIPS, a path,
    an account endpoint) WHEN the same put is made directly and through botocore THEN
    both go to the same URL, signed for the same region and service."""
    import boto3
    from botocore.config import Config

    client_kwargs, config = ROUTES[route]
    client = boto3.client(
        "dynamodb",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(parameter_validation=False, **config),
        **client_kwargs,
    )
    seen: list[tuple[str, str]] = []

    def capture(request: Any, **_: Any) -> AWSResponse:
        seen.append(_scope(request))
        return _answer(request.url, 200, b"{}")

    client.meta.events.register_first("before-send.dynamodb.PutItem", capture)  # type: ignore[arg-type]
    params: Any = {"TableName": "ledger", "Item": {"pk": {"S": "RUN#1"}, "sk": {"S": "STEP#1"}}}
    direct = DirectPut(client)
    direct(**params)
    client.put_item(**params)
    assert direct.direct == 1
    assert seen[0] == seen[1], seen


@pytest.mark.unit
def test_a_route_botocore_cannot_resolve_leaves_the_put_to_botocore() -> None:
    """GIVEN account endpoints required but no account id WHEN a step is put THEN the
    put is botocore's, which raises its own resolution error (nothing sent elsewhere)."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError

    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(account_id_endpoint_mode="required"),
    )
    direct = DirectPut(client)
    with pytest.raises(BotoCoreError):
        direct(TableName="ledger", Item={"pk": {"S": "RUN#1"}, "sk": {"S": "STEP#1"}})
    assert direct.direct == 0


@pytest.mark.unit
def test_a_traced_botocore_gets_every_put(monkeypatch: pytest.MonkeyPatch) -> None:
    """GIVEN a tracer other than X-Ray wrapping botocore's calls with wrapt (as
    OpenTelemetry's instrumentation does) WHEN a put is made THEN it goes through the
    wrapped call, to be traced (a wrapt proxy passes ``inspect.isfunction``: the check
    must not be fooled by it)."""
    import wrapt
    from botocore.client import BaseClient

    traced: list[str] = []

    def tracer(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        traced.append(args[0])
        return wrapped(*args, **kwargs)

    original = vars(BaseClient)["_make_api_call"]
    monkeypatch.setattr(BaseClient, "_make_api_call", wrapt.FunctionWrapper(original, tracer))
    client = _answered()
    direct = DirectPut(client)
    direct(TableName="ledger", Item={"pk": {"S": "RUN#1"}, "sk": {"S": "STEP#1"}})
    assert (traced, direct.direct) == (["PutItem"], 0)


@pytest.fixture
def xray(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """X-Ray's botocore patch, as Powertools' Tracer applies it, undone afterwards (the
    patch itself is global and permanent); the segments the recorder would send."""
    import botocore.client
    import botocore.endpoint
    from aws_xray_sdk.core import xray_recorder
    from aws_xray_sdk.ext.botocore.patch import patch

    for owner, name in ((BaseClient, "_make_api_call"), (Endpoint, "prepare_request")):
        monkeypatch.setattr(owner, name, vars(owner)[name])  # restored at teardown
    request.addfinalizer(lambda: vars(botocore.client).pop("_xray_enabled", None))
    sent: list[Any] = []

    class Kept:  # an emitter keeping what it would send to the daemon
        def send_entity(self, entity: Any) -> None:
            sent.append(json.loads(entity.serialize()))

        def set_daemon_address(self, address: str) -> None:
            pass

    xray_recorder.configure(emitter=Kept(), sampling=False, context_missing="IGNORE_ERROR")
    patch()  # what the SDK's patch(["botocore"]) applies, once per process
    assert botocore_hooks.tracer() == "xray"
    return sent


def _comparable(subsegment: dict[str, Any]) -> dict[str, Any]:
    """A subsegment without what differs between any two calls (ids, times, the request
    id, the stack of a refusal)."""
    kept = {k: v for k, v in subsegment.items() if k not in ("id", "start_time", "end_time")}
    kept["aws"] = {k: v for k, v in kept["aws"].items() if k != "request_id"}
    if "cause" in kept:
        kept["cause"] = [(e["type"], e["remote"]) for e in kept["cause"]["exceptions"]]
    return kept


@pytest.mark.unit
def test_under_xray_a_direct_put_is_traced_as_botocores(xray: list[Any]) -> None:
    """GIVEN X-Ray's botocore patch (Powertools' Tracer applies it under DURABLE_TRACING)
    WHEN a put and a refused one go direct, and the same two go through botocore THEN both
    went direct, and each direct put left the subsegment botocore's leaves (name,
    namespace, operation, table, region, status, the refusal as a remote error) and sent
    the trace header naming its subsegment as parent."""
    from aws_xray_sdk.core import xray_recorder

    refused = json.dumps(
        {
            "__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
            "message": "The conditional request failed",
        }
    ).encode()
    answers = iter([(200, b"{}"), (400, refused)] * 2)

    def answer(request: Any, **_: Any) -> AWSResponse:
        status, body = next(answers)
        return _answer(request.url, status, body, zlib.crc32(body))

    client = _answered(answer=answer)
    headers = _sent_headers(client)
    direct = DirectPut(client)
    outcomes: list[str] = []
    xray_recorder.begin_segment("probe")
    for put in (direct, client.put_item):
        for _ in range(2):
            try:
                put(**ITEM)
                outcomes.append("ok")
            except ClientError as error:
                outcomes.append(error.response["Error"]["Code"])
    xray_recorder.end_segment()
    assert direct.direct == 2
    assert outcomes == ["ok", "ConditionalCheckFailedException"] * 2
    (segment,) = xray
    subsegments = segment["subsegments"]
    assert len(subsegments) == 4
    ours, botocores = subsegments[:2], subsegments[2:]
    assert [_comparable(s) for s in ours] == [_comparable(s) for s in botocores]
    assert ours[0]["aws"]["table_name"] == "ledger"
    assert ours[0]["http"] == {"response": {"status": 200}}
    assert ours[1]["cause"]["exceptions"][0]["type"] == "ConditionalCheckFailedException"
    parents = [h["X-Amzn-Trace-Id"].split("Parent=")[1].split(";")[0] for h in headers]
    assert parents == [s["id"] for s in subsegments]


@pytest.mark.unit
def test_a_ledger_on_a_lazy_client_does_not_make_it() -> None:
    """GIVEN a lazy client WHEN ledgers are built on it, direct puts on or off THEN the
    client is not made until a request needs it (the worker's cold start)."""
    made: list[int] = []

    def factory() -> Any:
        made.append(1)
        raise AssertionError("made too early")

    for direct in (True, False):
        DynamoLedger(LazyClient(factory), "ledger", direct_puts=direct)  # type: ignore[arg-type]
    assert made == []


# --- who else is listening: then botocore's pipeline ---------------------------------------


def _answered(
    body: bytes = b"{}", *, answer: Any = None, session: Any = None, **config: Any
) -> Any:
    """A botocore DynamoDB client (of ``session``, else boto3's default) whose every
    PutItem is answered from a ``before-send`` handler (the network is never reached): by
    ``answer``, else 200 with ``body``."""
    import boto3
    from botocore.config import Config

    client = (session or boto3).client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(**config),
    )
    client.meta.events.register(
        "before-send.dynamodb.PutItem",
        answer or (lambda request, **_: _answer(request.url, 200, body, zlib.crc32(body))),
    )
    return client


ITEM: dict[str, Any] = {
    "TableName": "ledger",
    "Item": {"pk": {"S": "RUN#1"}, "sk": {"S": "STEP#1"}},
}


def _sent_headers(client: Any) -> list[dict[str, str]]:
    """The headers of each PutItem as sent (seen last on ``before-send``)."""
    sent: list[dict[str, str]] = []
    client.meta.events.register_last(
        "before-send.dynamodb.PutItem",
        lambda request, **_: sent.append(
            {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        ),
    )
    return sent


@pytest.mark.unit
def test_a_hook_on_an_event_the_direct_put_skips_gets_botocores_pipeline() -> None:
    """GIVEN a handler on an event the direct put does not emit (``needs-retry``) WHEN puts
    are made THEN they go through botocore, so the handler runs; once it is unregistered,
    puts go direct again."""
    client = _answered()
    seen: list[str] = []

    def retry_watch(**_: Any) -> None:
        seen.append("PutItem")

    client.meta.events.register("needs-retry.dynamodb.PutItem", retry_watch)
    direct = DirectPut(client)
    direct(**ITEM)
    assert (seen, direct.direct) == (["PutItem"], 0)
    client.meta.events.unregister("needs-retry.dynamodb.PutItem", retry_watch)
    direct(**ITEM)
    assert (seen, direct.direct) == (["PutItem"], 1)


@pytest.mark.unit
def test_a_header_added_before_signing_is_sent_and_signed() -> None:
    """GIVEN a handler adding a header ``before-sign`` WHEN the put goes direct THEN the
    handler ran with botocore's arguments, and the header was sent and signed, as
    botocore's put sends and signs it."""
    client = _answered()
    calls: list[dict[str, Any]] = []

    def add_tenant(request: Any, **kwargs: Any) -> None:
        request.headers["x-tenant"] = "acme"
        calls.append(kwargs)

    client.meta.events.register("before-sign.dynamodb.PutItem", add_tenant)
    sent = _sent_headers(client)
    direct = DirectPut(client)
    direct(**ITEM)
    client.put_item(**ITEM)
    assert direct.direct == 1
    ours, botocores = calls
    assert {k: ours[k] for k in ("signing_name", "region_name", "operation_name")} == {
        "signing_name": "dynamodb",
        "region_name": "us-east-1",
        "operation_name": "PutItem",
    }
    assert set(botocores) <= set(ours) | {"auth_type", "context"}
    for headers in sent:
        assert headers["x-tenant"] == "acme"
        assert "x-tenant" in headers["Authorization"].split("SignedHeaders=")[1].split(",")[0]


@pytest.mark.unit
def test_under_powertools_a_step_put_is_still_direct() -> None:
    """GIVEN Powertools imported (as every handler module does): it registers a
    ``request-created`` handler on every botocore session to add its user agent WHEN a
    step put is made THEN it goes direct, and carries Powertools' user agent as botocore's
    put does."""
    import aws_lambda_powertools  # noqa: F401  registers its session initializer
    import boto3

    client = _answered(session=boto3.session.Session())
    sent = _sent_headers(client)
    direct = DirectPut(client)
    direct(**ITEM)
    client.put_item(**ITEM)
    assert direct.direct == 1
    assert all(" PT/" in headers["User-Agent"] for headers in sent), sent


@pytest.mark.unit
def test_adaptive_retries_get_botocores_pipeline() -> None:
    """GIVEN the adaptive retry mode (a client-side rate limiter fed by ``needs-retry``)
    WHEN a put is made THEN it goes through botocore, which feeds the limiter."""
    client = _answered(retries={"mode": "adaptive"})
    direct = DirectPut(client)
    direct(**ITEM)
    assert direct.direct == 0


@pytest.mark.unit
def test_a_mocked_put_item_or_api_call_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    """GIVEN a test's ``mock.patch.object(client, "put_item")``, then a plain function in
    place of ``BaseClient._make_api_call`` WHEN a put is made THEN the mock is called."""
    from unittest import mock

    from botocore.client import BaseClient

    client = _answered()
    direct = DirectPut(client)
    direct(**ITEM)  # resolved: the pipeline exists before the mocks
    with mock.patch.object(client, "put_item", return_value={"mocked": True}) as put_item:
        assert direct(**ITEM) == {"mocked": True}
    put_item.assert_called_once_with(**ITEM)
    calls: list[str] = []

    def fake_call(self: Any, operation: str, params: Any) -> Any:
        calls.append(operation)
        return {"faked": True}

    monkeypatch.setattr(BaseClient, "_make_api_call", fake_call)
    assert direct(**ITEM) == {"faked": True}
    assert (calls, direct.direct) == (["PutItem"], 1)
    # a wrapper made with functools.wraps carries botocore's name and module, not its code
    monkeypatch.undo()
    original = vars(BaseClient)["_make_api_call"]

    @functools.wraps(original)
    def wrapped(self: Any, operation: str, params: Any) -> Any:
        calls.append(operation)
        return original(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", wrapped)
    direct(**ITEM)
    assert (calls, direct.direct) == (["PutItem", "PutItem"], 1)


@pytest.mark.unit
def test_a_200_with_more_than_capacity_is_parsed_by_the_model() -> None:
    """GIVEN an answer carrying item collection metrics with a binary key WHEN the put is
    direct THEN the key is bytes, as botocore parses it, and fields the model does not know
    are dropped."""
    body = json.dumps(
        {
            "ConsumedCapacity": {"TableName": "ledger", "CapacityUnits": 1.0},
            "ItemCollectionMetrics": {"ItemCollectionKey": {"pk": {"B": "AAEC"}}},
            "SomeFutureField": 1,
        }
    ).encode()
    client = _answered(body)
    direct = DirectPut(client)
    answer = dict(direct(**ITEM))
    botocores = dict(client.put_item(**ITEM))
    assert direct.direct == 1
    assert answer["ItemCollectionMetrics"]["ItemCollectionKey"]["pk"]["B"] == b"\x00\x01\x02"
    del answer["ResponseMetadata"], botocores["ResponseMetadata"]
    assert answer == botocores


@pytest.mark.unit
def test_ledgers_on_one_client_share_one_pipeline() -> None:
    """GIVEN many ledgers built on one client WHEN each puts THEN one hand-over handler is
    registered on the client, not one per ledger."""
    client = _answered()
    puts = [DirectPut(client) for _ in range(5)]
    for put in puts:
        put(**ITEM)
    handlers = client.meta.events._emitter._handlers.prefix_search("before-send.dynamodb.PutItem")
    ours = [h for h in handlers if getattr(h, "__name__", "") == "_hand_over"]
    assert len(ours) == 1
    assert [put.direct for put in puts] == [1] * 5


@pytest.mark.unit
def test_a_route_that_failed_once_is_resolved_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """GIVEN endpoint resolution failing once (credentials that could not be refreshed)
    WHEN puts are made THEN that one goes to botocore and the next ones go direct."""
    client = _answered()
    real = client._resolve_endpoint_ruleset
    failures = [RuntimeError("credentials could not be refreshed")]

    def resolve(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return real(*args, **kwargs)

    monkeypatch.setattr(client, "_resolve_endpoint_ruleset", resolve)
    direct = DirectPut(client)
    direct(**ITEM)  # botocore's own resolution, a moment later, succeeds
    assert direct.direct == 0
    direct(**ITEM)
    assert direct.direct == 1


# --- what a handler sees, and what is kept between puts ---------------------------------------


def _refusal() -> bytes:
    return json.dumps(
        {
            "__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
            "message": "The conditional request failed",
            "Item": {"pk": {"S": "RUN#1"}, "sk": {"S": "STEP#1"}, "blob": {"B": "AAEC"}},
        }
    ).encode()


@pytest.mark.unit
def test_before_call_handlers_see_what_botocore_shows_them() -> None:
    """GIVEN a ``before-call`` handler WHEN the same put goes direct and through botocore
    THEN the request dict's method, URL, path, query and headers it sees are botocore's,
    and the context holds nothing botocore's does not, with the same values."""
    seen: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def watch(params: Any, context: Any, **_: Any) -> None:
        seen.append((dict(params), dict(context)))

    client = _answered()
    client.meta.events.register("before-call.dynamodb.PutItem", watch)
    direct = DirectPut(client)
    direct(**ITEM)
    client.put_item(**ITEM)
    assert direct.direct == 1
    (ours, our_context), (botocores, botocore_context) = seen
    for key in ("method", "url", "url_path", "query_string"):
        assert ours[key] == botocores[key], key
    for header in ("X-Amz-Target", "Content-Type"):
        assert ours["headers"][header] == botocores["headers"][header]
    assert set(our_context) <= set(botocore_context)
    shared = set(our_context) - {"client_config"}
    assert {k: our_context[k] for k in shared} == {k: botocore_context[k] for k in shared}


@pytest.mark.unit
def test_a_refusal_is_raised_as_botocore_raises_it() -> None:
    """GIVEN a conditional refusal carrying the old item (binary value included) WHEN the
    put goes direct and through botocore THEN both raise the client's exception class with
    the same response: the error, the old item as the model parses it, the metadata."""
    body = _refusal()
    client = _answered(
        answer=lambda request, **_: _answer(request.url, 400, body, zlib.crc32(body))
    )
    direct = DirectPut(client)
    errors = []
    for put in (direct, client.put_item):
        with pytest.raises(client.exceptions.ConditionalCheckFailedException) as caught:
            put(**ITEM)
        errors.append(caught.value.response)
    assert direct.direct == 1
    ours, botocores = errors
    assert ours["Item"]["blob"] == {"B": b"\x00\x01\x02"}
    assert ours == botocores


@pytest.mark.unit
def test_a_tables_route_is_resolved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """GIVEN puts to one table WHEN three are made THEN botocore's endpoint rules were run
    once for them, not once a put."""
    client = _answered()
    real = client._resolve_endpoint_ruleset
    resolved: list[str] = []

    def resolve(model: Any, params: Any, context: Any) -> Any:
        resolved.append(params.get("TableName"))
        return real(model, params, context)

    monkeypatch.setattr(client, "_resolve_endpoint_ruleset", resolve)
    direct = DirectPut(client)
    for _ in range(3):
        direct(**ITEM)
    assert (resolved, direct.direct) == (["ledger"], 3)


@pytest.mark.unit
def test_an_outcome_botocore_never_took_is_not_left_for_the_next_put() -> None:
    """GIVEN a direct attempt answered 500, handed to botocore, whose call then fails before
    sending (a ``before-call`` handler raises) WHEN the next put is made through the client
    THEN it is sent and answered, not given the stale 500 (no retries: it would raise)."""
    answers = iter([500, 200])

    def answer(request: Any, **_: Any) -> AWSResponse:
        return _answer(request.url, next(answers), b"{}", zlib.crc32(b"{}"))

    client = _answered(answer=answer, retries={"total_max_attempts": 1})
    calls = itertools.count()

    def fail_botocores_call(**_: Any) -> None:
        if next(calls) == 1:  # the direct attempt's is the first, botocore's the second
            raise RuntimeError("a handler failed")

    client.meta.events.register("before-call.dynamodb.PutItem", fail_botocores_call)
    direct = DirectPut(client)
    with pytest.raises(RuntimeError):
        direct(**ITEM)
    assert client.put_item(**ITEM)["ResponseMetadata"]["HTTPStatusCode"] == 200


@pytest.mark.unit
def test_a_binary_value_is_sent_by_botocore() -> None:
    """GIVEN an item with a binary value (JSON cannot carry bytes) WHEN it is put THEN
    botocore serializes and sends it (base64), nothing goes direct."""
    client = _answered()
    bodies: list[bytes] = []
    client.meta.events.register_last(
        "before-send.dynamodb.PutItem", lambda request, **_: bodies.append(request.body)
    )
    direct = DirectPut(client)
    direct(TableName="ledger", Item={"pk": {"S": "RUN#1"}, "blob": {"B": b"\x00\x01"}})
    assert (direct.direct, direct.fallbacks) == (0, 1)
    assert [json.loads(b)["Item"]["blob"] for b in bodies] == [{"B": "AAE="}]


@pytest.mark.unit
def test_once_xray_lets_go_puts_are_not_traced(
    xray: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN a direct put traced under X-Ray's patch WHEN the patch is undone and another
    put is made in the same segment THEN only the first left a subsegment."""
    from aws_xray_sdk.core import xray_recorder

    client = _answered()
    direct = DirectPut(client)
    xray_recorder.begin_segment("probe")
    direct(**ITEM)
    monkeypatch.undo()  # botocore's own _make_api_call again
    direct(**ITEM)
    xray_recorder.end_segment()
    (segment,) = xray
    assert (len(segment["subsegments"]), direct.direct) == (1, 2)


def _scripted(*answers: tuple[int, bytes, int | None], **config: Any) -> Any:
    """A client whose PutItems are answered in turn: (status, body, CRC32 header or None)."""
    script = iter(answers)

    def answer(request: Any, **_: Any) -> AWSResponse:
        status, body, crc = next(script)
        return _answer(request.url, status, body, crc)

    return _answered(answer=answer, **config)


THROTTLED = json.dumps(
    {
        "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
        "message": "Rate of requests exceeds the allowed throughput",
    }
).encode()


@pytest.mark.unit
def test_a_throttle_handed_over_is_botocores_first_attempt_only() -> None:
    """GIVEN a direct attempt throttled, then an answer WHEN botocore retries THEN its second
    attempt is sent (the handed outcome answered only the first) and the put succeeds
    after one retry."""
    # The handed-over attempt emits before-send again: the script's second answer is drawn
    # then, and not taken (the handed outcome is); the third answers botocore's retry.
    client = _scripted(
        (400, THROTTLED, zlib.crc32(THROTTLED)),
        (500, b"{}", zlib.crc32(b"{}")),
        (200, b"{}", zlib.crc32(b"{}")),
        retries={"mode": "standard", "total_max_attempts": 3},
    )
    direct = DirectPut(client)
    answer = direct(**ITEM)
    assert answer["ResponseMetadata"]["RetryAttempts"] == 1
    assert (direct.direct, direct.fallbacks) == (0, 1)


@pytest.mark.unit
def test_a_damaged_answer_is_botocores_to_judge() -> None:
    """GIVEN a 200 whose body does not match its CRC32 header, then a sound one WHEN the put
    is made THEN the direct put does not take it: botocore's check retries it."""
    client = _scripted(
        (200, b"{}", zlib.crc32(b"{}") + 1),
        (500, b"{}", zlib.crc32(b"{}")),  # drawn by the hand-over's emission, not taken
        (200, b"{}", zlib.crc32(b"{}")),
        retries={"mode": "standard", "total_max_attempts": 2},
    )
    direct = DirectPut(client)
    assert direct(**ITEM)["ResponseMetadata"]["RetryAttempts"] == 1
    assert (direct.direct, direct.fallbacks) == (0, 1)


@pytest.mark.unit
def test_a_stubbed_error_status_is_raised() -> None:
    """GIVEN a ``before-call`` stub answering 300 with an error WHEN the put is made THEN
    the client's error is raised, as botocore raises a stubbed status of 300 or more."""
    client = _answered()

    def stub(**_: Any) -> tuple[Any, dict[str, Any]]:
        error = {"Error": {"Code": "Moved", "Message": "elsewhere"}}
        return _answer("", 300, b""), error

    client.meta.events.register_first("before-call.dynamodb.PutItem", stub)
    with pytest.raises(ClientError) as caught:
        DirectPut(client)(**ITEM)
    assert error_code_of(caught.value) == "Moved"


def error_code_of(error: ClientError) -> str:
    return str(error.response["Error"]["Code"])


@pytest.mark.unit
def test_endpoint_rules_decide_the_scope_and_what_goes_to_botocore(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN endpoint rules that sign for another region on one table and ask for an extra
    header on another WHEN puts are made THEN the first is signed for the rules' region,
    the second goes through botocore (the direct put adds no headers of the rules')."""
    client = _answered()
    real = client._resolve_endpoint_ruleset

    def resolve(model: Any, params: Any, context: Any) -> Any:
        url, headers, properties = real(model, params, context)
        if params.get("TableName") == "elsewhere":
            context["signing"] = {"region": "eu-west-3", "signing_name": "dynamodb"}
        if params.get("TableName") == "headed":
            headers = {"x-rules": "1"}
        return url, headers, properties

    monkeypatch.setattr(client, "_resolve_endpoint_ruleset", resolve)
    sent = _sent_headers(client)
    direct = DirectPut(client)
    direct(**{**ITEM, "TableName": "elsewhere"})
    assert "/eu-west-3/dynamodb/aws4_request" in sent[-1]["Authorization"]
    direct(**{**ITEM, "TableName": "headed"})
    assert (direct.direct, direct.fallbacks) == (1, 0)
