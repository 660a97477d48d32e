"""The stored-bytes rule (issue 44): no live callback token in any attribute of any table
or in any stored object, on every implementation.

The rule (``durable.core.stored_bytes``) is applied where bytes leave the process: the
DynamoDB client's request hook (``durable.adapters.item_boundary``), the memory ledger and
stores, the payload stores. A token in a value is redacted; in a key, a name or an id it is
refused (``TokenInKey``); in bytes it is refused (``TokenInObject``). Finding 1 is the
reason: another run's token, echoed by an effect's call, was stored in clear in the
idempotency table, which no ledger-level boundary sees.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pytest
from pydantic import BaseModel, SecretStr

from durable import App, Context, RunStatus, current_step
from durable.adapters import item_boundary
from durable.adapters.aws_services import LazyClient
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.memory import MemoryEffectStore, MemoryLedger
from durable.adapters.nonces import DynamoNonceStore, MemoryNonceStore
from durable.adapters.payload_stores import FolderPayloads, MemoryPayloads
from durable.adapters.s3_payloads import S3Payloads
from durable.core.model import Attempt, RunError, SignalRecord
from durable.core.retry import classify
from durable.core.stored_bytes import (
    REDACTED_TOKEN,
    TokenInKey,
    TokenInObject,
    bytes_hold_token,
    check_key,
    check_object,
    kept,
)
from durable.core.tokens import make_token
from durable.errors import StorageError
from durable.testing import LocalRunner
from tests.conftest import MakeTables, aws_client
from tests.support.records import T0, make_run, make_step

pytestmark = pytest.mark.unit

# A token of another run, in the shape the engine mints (``durable.core.tokens``).
TOKEN = make_token(b"a-secret-of-sixteen-bytes", "01KDVDNA00NH4Y4J45KWBET2C0", "0003", "n1")
URL = f"https://api.example.com/prod/callbacks/{TOKEN}"
REDACTED_URL = f"https://api.example.com/prod/callbacks/{REDACTED_TOKEN}"
OTHER = make_token(b"a-secret-of-sixteen-bytes", "01KDVDNA00NH4Y4J45KWBET2C0", "0004", "n2")


# --- finding 1: an effect's reference echoing another run's token --------------------------


class Notice(BaseModel):
    url: SecretStr


def notifier_app(urls: list[str]) -> App:
    """The documented pattern: a parent hands its callback URL to a notifier child as a
    secret; the child sends it inside an effect whose call answers with the message it
    sent, link included (a mail API that echoes), which is the effect's reference."""
    app = App()

    @app.step
    def send(url: str) -> str:
        reference = current_step().effect(
            "mail", lambda key: {"id": f"msg-{key[:6]}", "echo": f"Please approve: {url}"}
        )
        return str(reference["id"])

    @app.workflow
    def notify(ctx: Context, notice: Notice) -> str:
        return send(notice.url.get_secret_value())

    @app.workflow
    def approval(ctx: Context) -> Any:
        callback = ctx.create_callback("approve")
        urls.append(callback.url)
        ctx.run_child(notify, Notice(url=SecretStr(callback.url)))
        return callback.result()

    return app


def answer_and_finish(runner: LocalRunner, urls: list[str]) -> None:
    """Run the approval to its wait, check the echoed token is live (it answers the
    parent's wait), and finish it."""
    run = runner.start("approval")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.WAITING
    token = urls[-1].rsplit("/", 1)[1]
    runner.complete_callback(token, {"approved": True})
    runner.run_until_idle()
    assert runner.result(run.run_id) == {"approved": True}


def test_an_effects_reference_echoing_another_runs_token_is_stored_redacted() -> None:
    """GIVEN a notifier child given its parent's callback URL as a secret, whose effect's
    call echoes the URL WHEN the effect's reference is stored in the (memory) effect store
    THEN the store holds no token, only the redaction, and the reference's other fields."""
    urls: list[str] = []
    runner = LocalRunner(notifier_app(urls))
    answer_and_finish(runner, urls)
    assert isinstance(runner.effect_store, MemoryEffectStore)
    references = [r.reference for r in runner.effect_store.records.values() if r.reference]
    assert len(references) == 1
    stored = json.loads(references[0])
    token = urls[0].rsplit("/", 1)[1]
    assert token not in references[0]
    assert stored["echo"].endswith(REDACTED_TOKEN) and stored["id"].startswith("msg-")


def test_the_same_on_the_dynamodb_effect_store(
    mock_aws_session: None, make_tables: MakeTables
) -> None:
    """GIVEN the same runs with the effects in the idempotency table (moto) WHEN the
    notifier's effect completes THEN no item of the table holds the token."""
    client = aws_client("dynamodb", None)
    _, idem = make_tables(client)
    urls: list[str] = []
    runner = LocalRunner(notifier_app(urls), effect_store=DynamoEffectStore(client, idem))
    answer_and_finish(runner, urls)
    items = client.scan(TableName=idem)["Items"]
    token = urls[0].rsplit("/", 1)[1]
    assert items and token not in json.dumps(items)
    assert any(REDACTED_TOKEN in item.get("data", {}).get("S", "") for item in items)


# --- the pure rule --------------------------------------------------------------------------


def test_bytes_are_searched_without_decoding() -> None:
    assert bytes_hold_token(b'{"url":"' + URL.encode() + b'"}')
    assert bytes_hold_token(b"\xff\xfe binary " + TOKEN.encode() + b" \x00")
    assert not bytes_hold_token(b'{"pi":3.1415,"v":"1.2.3"}')
    assert not bytes_hold_token(json.dumps({"url": URL.replace(".", "_")}).encode())


def test_a_token_in_a_key_is_refused_with_a_message_that_names_it_and_the_way_out() -> None:
    with pytest.raises(TokenInKey) as caught:
        check_key("DynamoDB table idem", "key attribute id", f"fx#{TOKEN}")
    message = str(caught.value)
    assert "DynamoDB table idem" in message and "key attribute id" in message
    assert "SecretStr" in message and TOKEN not in message
    # Not retryable: the same write fails the same way, so the engine fails it for good.
    assert isinstance(caught.value, StorageError) and not caught.value.retryable
    assert classify(caught.value) == "terminal"
    check_key("DynamoDB table idem", "key attribute id", "fx#0001#charge")  # passes


def test_an_object_holding_a_token_is_refused() -> None:
    with pytest.raises(TokenInObject):
        check_object("s3://bucket", "RUN1/abc", json.dumps({"u": URL}).encode())
    with pytest.raises(TokenInKey):
        check_object("s3://bucket", f"RUN1/{TOKEN}", b"{}")
    check_object("s3://bucket", "RUN1/abc", b'{"u":"https://example.com/a.b"}')


def test_kept_redacts_every_value_and_leaves_the_callers_record_alone() -> None:
    """GIVEN a record with tokens in a nested dataclass, a list of them, a dict's key and
    value WHEN it is kept THEN the copy holds none, the caller's record is unchanged, and
    a record without a token is returned itself (no copy)."""
    step = make_step(
        output=json.dumps({"link": URL}),
        checkpoint={"state": URL, URL: 1},
        refs=[{"mail": URL}],
        attempts=[Attempt(1, T0, error=f"failed at {URL}")],
    )
    before = repr(step)
    out = kept(step, store="test", keys=frozenset({"run_id", "position"}))
    assert TOKEN not in repr(out) and repr(out).count(REDACTED_TOKEN) == 5
    assert repr(step) == before
    clean = make_step()
    assert kept(clean, store="test") is clean
    error = RunError("E", f"see {TOKEN}")
    assert kept(error, store="test").message == f"see {REDACTED_TOKEN}"


def test_kept_refuses_a_key_field_holding_a_token() -> None:
    with pytest.raises(TokenInKey) as caught:
        kept(make_step(position=TOKEN), store="the ledger", keys=frozenset({"position"}))
    assert "position" in str(caught.value)


# --- the memory implementations -------------------------------------------------------------


def test_the_memory_ledger_stores_values_redacted_whatever_the_field() -> None:
    """GIVEN a memory ledger written directly (no WriteBoundary in front) WHEN a run, a
    step and a signal carry tokens in values, including fields no list names (the run's
    sleeps, a step's name, a signal's sender) THEN every stored copy is redacted."""
    ledger = MemoryLedger()
    ledger.create_run(make_run(input=json.dumps({"u": URL}), sleeps={"0001": {"why": URL}}))
    ledger.write_step(make_step(name=f"notify {URL}", detail={"u": URL}))
    ledger.add_signal(
        SignalRecord("RUN1", "go", "01KDVDNA00NH4Y4J45KWBET2C1", URL, T0, sent_by=URL), now=T0
    )
    history = ledger.load("RUN1")
    assert history is not None
    assert TOKEN not in repr(history)
    assert repr(history).count(REDACTED_TOKEN) == 6


def test_the_memory_ledger_refuses_a_token_in_a_key_and_stores_nothing() -> None:
    ledger = MemoryLedger()
    with pytest.raises(TokenInKey):
        ledger.create_run(make_run(run_id=TOKEN))
    assert ledger.all_run_ids() == []
    ledger.create_run(make_run())
    with pytest.raises(TokenInKey):
        ledger.write_step(make_step(position=TOKEN))
    with pytest.raises(TokenInKey):
        ledger.add_signal(SignalRecord("RUN1", URL, "01KDVDNA00NH4Y4J45KWBET2C1", "{}", T0), now=T0)
    history = ledger.load("RUN1")
    assert history is not None and not history.steps and not history.signals
    assert history.run.inbox == 0  # refused before anything changed


def test_the_memory_effect_and_nonce_stores() -> None:
    effects = MemoryEffectStore()
    effects.begin("k1", 10, now=0)
    effects.complete("k1", json.dumps({"echo": URL}), 10)
    assert TOKEN not in repr(effects.records) and REDACTED_TOKEN in repr(effects.records)
    with pytest.raises(TokenInKey):
        effects.begin(f"k#{TOKEN}", 10, now=0)
    with pytest.raises(TokenInKey):
        effects.complete(f"k#{TOKEN}", "{}", 10)
    nonces = MemoryNonceStore()
    with pytest.raises(TokenInKey):
        nonces.claim(f"sig#{TOKEN}", 10, 0)
    assert effects.records.keys() == {"k1"} and nonces.items == {}


# --- the payload stores ---------------------------------------------------------------------

BODY = json.dumps({"notes": "x" * 300, "link": URL}).encode()


def test_the_memory_and_folder_payload_stores_refuse_a_token(tmp_path: Path) -> None:
    memory, folder = MemoryPayloads(), FolderPayloads(tmp_path)
    for store in (memory, folder):
        with pytest.raises(TokenInObject):
            store.put("RUN1/abc", BODY)
        store.put("RUN1/def", b'{"ok":1.5}')
        assert store.get("RUN1/def") == b'{"ok":1.5}'
    assert list(memory.objects) == ["RUN1/def"]
    assert [p.name for p in (tmp_path / "RUN1").iterdir()] == ["def"]


def test_the_s3_payload_store_refuses_a_token_and_sends_nothing(mock_aws_session: None) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="payloads")
    store = S3Payloads(s3, "payloads")
    with pytest.raises(TokenInObject):
        store.put("RUN1/abc", BODY)
    assert s3.list_objects_v2(Bucket="payloads").get("KeyCount") == 0
    store.put("RUN1/def", b"{}")
    assert store.get("RUN1/def") == b"{}"


# --- the DynamoDB request hook (moto) -------------------------------------------------------


@pytest.fixture
def tables(mock_aws_session: None, make_tables: MakeTables) -> tuple[Any, str, str]:
    client = item_boundary.install(aws_client("dynamodb", None))
    ledger, idem = make_tables(client)
    return client, ledger, idem


def scan(client: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.scan(TableName=table)["Items"]
    return items


def test_every_attribute_value_of_an_item_is_redacted(tables: tuple[Any, str, str]) -> None:
    """GIVEN a PutItem with tokens in a string, a nested map (a key and a value), a list
    and a string set WHEN it is sent THEN the stored item holds none of them, and the set
    holds no duplicate (DynamoDB would refuse it)."""
    client, ledger, _ = tables
    client.put_item(
        TableName=ledger,
        Item={
            "pk": {"S": "RUN#R1"},
            "sk": {"S": "STEP#0001"},
            "output": {"S": URL},
            "detail": {"M": {"u": {"S": URL}, URL: {"N": "1"}, "l": {"L": [{"S": URL}]}}},
            "tags": {"SS": [URL, URL.replace(TOKEN, OTHER), "plain"]},
            "count": {"N": "3"},
        },
    )
    (item,) = scan(client, ledger)
    assert TOKEN not in json.dumps(item)
    assert item["output"] == {"S": REDACTED_URL}
    assert REDACTED_URL in item["detail"]["M"] and item["count"] == {"N": "3"}
    # Two links that differ only by their token are one after redaction: a set of two.
    assert sorted(item["tags"]["SS"]) == [REDACTED_URL, "plain"]


def test_a_token_in_bytes_a_key_or_a_name_is_refused(tables: tuple[Any, str, str]) -> None:
    client, ledger, idem = tables
    refused: list[tuple[type[Exception], dict[str, Any]]] = [
        (TokenInObject, {"pk": {"S": "RUN#R1"}, "sk": {"S": "X"}, "blob": {"B": BODY}}),
        (TokenInKey, {"pk": {"S": f"RUN#{TOKEN}"}, "sk": {"S": "RUN"}}),
        (TokenInKey, {"pk": {"S": "RUN#R1"}, "sk": {"S": "RUN"}, "list_pk": {"S": URL}}),
        (TokenInKey, {"pk": {"S": "RUN#R1"}, "sk": {"S": "RUN"}, URL: {"S": "x"}}),
    ]
    for error, item in refused:
        with pytest.raises(error):
            client.put_item(TableName=ledger, Item=item)
    with pytest.raises(TokenInKey):
        client.put_item(TableName=idem, Item={"id": {"S": f"fx#{TOKEN}"}})
    with pytest.raises(TokenInKey):  # an update that moves an index key to a token
        client.update_item(
            TableName=ledger,
            Key={"pk": {"S": "RUN#R1"}, "sk": {"S": "RUN"}},
            UpdateExpression="SET #o = :o, #l = :l",
            ExpressionAttributeNames={"#o": "output", "#l": "list_sk"},
            ExpressionAttributeValues={":o": {"S": "fine"}, ":l": {"S": f"DONE#{TOKEN}"}},
        )
    with pytest.raises(TokenInKey):  # PartiQL: a parameter may be a key, so refused
        client.execute_statement(
            Statement=f"INSERT INTO \"{ledger}\" VALUE {{'pk': ?, 'sk': ?}}",
            Parameters=[{"S": "RUN#R2"}, {"S": URL}],
        )
    assert scan(client, ledger) == [] and scan(client, idem) == []


def test_an_update_assigning_a_value_is_redacted(tables: tuple[Any, str, str]) -> None:
    client, ledger, _ = tables
    client.update_item(
        TableName=ledger,
        Key={"pk": {"S": "RUN#R1"}, "sk": {"S": "RUN"}},
        UpdateExpression="SET #o = :o, inbox = if_not_exists(inbox, :zero) + :one",
        ExpressionAttributeNames={"#o": "output"},
        ExpressionAttributeValues={":o": {"S": URL}, ":zero": {"N": "0"}, ":one": {"N": "1"}},
    )
    (item,) = scan(client, ledger)
    assert TOKEN not in json.dumps(item) and item["inbox"] == {"N": "1"}


def test_a_transaction_is_redacted_inside_and_refused_whole(
    tables: tuple[Any, str, str],
) -> None:
    """GIVEN a TransactWriteItems with a token in a nested item's value WHEN it is sent
    THEN it is written redacted; GIVEN one with a token in an update's Key THEN it is
    refused and none of its items is written (a Put beside it included)."""
    client, ledger, _ = tables
    nested = {"M": {"mail": {"L": [{"S": URL}]}}}
    item = {"pk": {"S": "RUN#R1"}, "sk": {"S": "RUN"}, "input": nested}
    put = {"Put": {"TableName": ledger, "Item": item}}
    client.transact_write_items(TransactItems=[put])
    assert TOKEN not in json.dumps(scan(client, ledger))
    update = {
        "Update": {
            "TableName": ledger,
            "Key": {"pk": {"S": "RUN#R2"}, "sk": {"S": f"STEP#{TOKEN}"}},
            "UpdateExpression": "SET #s = :s",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {":s": {"S": "DONE"}},
        }
    }
    other = {"Put": {"TableName": ledger, "Item": {"pk": {"S": "RUN#R3"}, "sk": {"S": "RUN"}}}}
    with pytest.raises(TokenInKey):
        client.transact_write_items(TransactItems=[other, update])
    assert [item["pk"]["S"] for item in scan(client, ledger)] == ["RUN#R1"]


def test_a_batch_write_is_redacted(tables: tuple[Any, str, str]) -> None:
    client, ledger, idem = tables
    client.batch_write_item(
        RequestItems={
            idem: [{"PutRequest": {"Item": {"id": {"S": "k"}, "data": {"S": URL}}}}],
            ledger: [
                {"PutRequest": {"Item": {"pk": {"S": "P"}, "sk": {"S": "S"}, "x": {"S": URL}}}}
            ],
        }
    )
    assert TOKEN not in json.dumps(scan(client, ledger) + scan(client, idem))
    with pytest.raises(TokenInKey):
        client.batch_write_item(
            RequestItems={idem: [{"DeleteRequest": {"Key": {"id": {"S": URL}}}}]}
        )


def test_the_effect_and_nonce_stores_install_the_hook(
    mock_aws_session: None, make_tables: MakeTables
) -> None:
    """GIVEN the DynamoDB effect and nonce stores on a client nobody installed the hook on
    WHEN they write THEN their writes cross it: a reference redacted, a key refused."""
    client = aws_client("dynamodb", None)
    _, idem = make_tables(client)
    effects, nonces = DynamoEffectStore(client, idem), DynamoNonceStore(client, idem)
    effects.complete("fx#1", json.dumps({"echo": URL}), 2_000_000_000)
    with pytest.raises(TokenInKey):
        effects.begin(f"fx#{TOKEN}", 2_000_000_000, now=1)
    with pytest.raises(TokenInKey):
        nonces.claim(f"sig#{TOKEN}", 2_000_000_000, 1)
    items = scan(client, idem)
    assert len(items) == 1 and TOKEN not in json.dumps(items)


def test_a_lazy_client_is_not_made_by_the_install_and_has_the_hook_once_made(
    mock_aws_session: None, make_tables: MakeTables, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN a LazyClient two adapters install the hook on WHEN it is first used THEN it
    was made only then, and each write crosses the hook once."""
    checked: list[str] = []
    check = item_boundary.check_request

    def counted(params: dict[str, Any], table: str | None = None) -> None:
        checked.append(str(params.get("TableName")))
        check(params, table)

    monkeypatch.setattr(item_boundary, "check_request", counted)
    made: list[Any] = []

    def make() -> Any:
        made.append(aws_client("dynamodb", None))
        return made[-1]

    lazy = LazyClient(make)
    item_boundary.install(lazy)
    item_boundary.install(lazy)  # a second install (another adapter): no second hook
    assert made == []
    _, idem = make_tables(lazy)
    checked.clear()  # the tables' creation: checked too (not a known read)
    lazy.put_item(TableName=idem, Item={"id": {"S": "k"}, "data": {"S": URL}})
    assert TOKEN not in json.dumps(scan(lazy, idem))
    assert len(made) == 1 and checked == [idem]


def test_powertools_persistence_layer_writes_through_the_hook(
    mock_aws_session: None, make_tables: MakeTables
) -> None:
    """GIVEN Powertools' idempotency layer as the deployment builds it WHEN its client
    writes a record whose data echoes a token THEN the table holds it redacted."""
    from durable.adapters.aws_services import _persistence
    from durable.settings import Settings

    _, idem = make_tables(aws_client("dynamodb", None))
    session = botocore.session.get_session()
    session.set_config_variable("region", "us-east-1")
    layer = _persistence(Settings.model_construct(idempotency_table=idem), session)
    layer.client.put_item(TableName=idem, Item={"id": {"S": "hook#1"}, "data": {"S": URL}})
    items = scan(aws_client("dynamodb", None), idem)
    assert len(items) == 1 and TOKEN not in json.dumps(items)
