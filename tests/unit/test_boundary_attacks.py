"""Attacks on "one boundary for every stored byte" (issue 44), as a reviewer tried them.

The review found four holes, each written first as a failing test and then fixed: a
token in bytes a model encodes as base64 or hex (now scrubbed as bytes before pydantic
encodes it), a token minted at position 10000 that neither the parser nor the scans knew
(one shape now, ``durable.core.token_shape``, with positions of four digits or more),
UpdateItem's legacy ``AttributeUpdates`` passing the DynamoDB hook (now walked), and the
API stage's X-Ray tracing keeping callback URLs (stage tracing is off). The attacks that
were refused are pinned too, so a later change that reopens one fails here.

A callback token is a bearer credential: a stored text that holds one, in any form a
reader can turn back into it (plain, base64, hex), answers that run's wait. A form the
engine's own parser refuses is not live (the API compares the token's SHA-256 exactly),
so only exact tokens, however encoded, matter here.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from durable import App, Context, RunStatus
from durable.adapters import item_boundary
from durable.api.routes import named
from durable.core.token_shape import REDACTED_TOKEN, scrub_text
from durable.core.tokens import make_token, parse_token
from durable.errors import DurableError, InvalidInput
from durable.testing import LocalRunner
from tests.conftest import MakeTables, aws_client

pytestmark = pytest.mark.unit

# Another run's token, in the shape the engine mints (``durable.core.tokens``).
TOKEN = make_token(b"a-secret-of-sixteen-bytes", "01KDVDNA00NH4Y4J45KWBET2C0", "0003", "n1")


def stored_texts(runner: LocalRunner) -> str:
    """Everything the runner's stores hold (the memory ledger, its payloads and effects),
    as one text to search."""
    return repr(runner.memory_ledger.__dict__) + repr(runner.payloads.__dict__)


def decoded_blobs(text: str) -> bytes:
    """Every run of base64 or hex characters in ``text`` long enough to hold a token,
    decoded, joined: what a reader of the table gets by decoding what it sees."""
    out = []
    for blob in re.findall(r"[A-Za-z0-9+/]{60,}={0,2}", text):
        with contextlib.suppress(ValueError, binascii.Error):
            out.append(base64.b64decode(blob + "=" * (-len(blob) % 4)))
        with contextlib.suppress(ValueError):
            out.append(bytes.fromhex(blob))
    return b"\n".join(out)


# --- finding: a pydantic model that encodes bytes hides the token from every scan -----------


class Base64Body(BaseModel):
    """An HTTP body kept as bytes, serialized as base64 (a common model config)."""

    model_config = ConfigDict(ser_json_bytes="base64")
    body: bytes


class HexBody(BaseModel):
    model_config = ConfigDict(ser_json_bytes="hex")
    body: bytes


@pytest.mark.parametrize("encoding", ["base64", "hex"])
def test_a_token_in_bytes_a_model_encodes_is_not_stored(encoding: str) -> None:
    urls: list[str] = []
    app = App()

    # A mail API that answers with the raw message it sent, link included.
    if encoding == "base64":

        @app.step
        def send(url: str) -> Base64Body:
            return Base64Body(body=f"Please approve: {url}".encode())

    else:

        @app.step
        def send(url: str) -> HexBody:
            return HexBody(body=f"Please approve: {url}".encode())

    @app.workflow
    def approval(ctx: Context) -> str:
        callback = ctx.create_callback("approve")
        urls.append(callback.url)
        send(callback.url)
        return str(callback.result())

    runner = LocalRunner(app)
    run = runner.start("approval")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.WAITING
    token = urls[-1].rsplit("/", 1)[1]
    text = stored_texts(runner)
    assert token not in text  # the plain form is caught
    assert token.encode() not in decoded_blobs(text)  # the encoded one is not


# --- finding: a callback past position 9999 mints a token neither the parser nor the scan knows


def callback_at_position_10000() -> tuple[LocalRunner, str, str]:
    """A run whose callback is its 10000th durable call (max_history allows it: the
    counter may reach 10000), waiting; its run id and token."""
    urls: list[str] = []
    app = App()

    @app.workflow
    def long(ctx: Context) -> str:
        for _ in range(9999):
            ctx.uuid()  # one position each, no record: the cheapest way to 10000
        callback = ctx.create_callback("approve")
        urls.append(callback.url)
        return str(callback.result())

    runner = LocalRunner(app)
    run = runner.start("long")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).status == RunStatus.WAITING
    token = urls[-1].rsplit("/", 1)[1]
    assert ".10000." in token
    return runner, run.run_id, token


def test_a_callback_at_position_10000_can_be_answered_by_its_token() -> None:
    runner, run_id, token = callback_at_position_10000()
    runner.complete_callback(token, "ok")
    runner.run_until_idle()
    assert runner.result(run_id) == "ok"


def test_a_token_minted_at_position_10000_has_the_shape_the_scan_redacts() -> None:
    _, _, token = callback_at_position_10000()
    assert scrub_text(f"see /callbacks/{token}") == f"see /callbacks/{REDACTED_TOKEN}"


# --- finding: the DynamoDB hook does not walk the legacy AttributeUpdates parameter ----------


def test_the_legacy_attribute_updates_cross_the_hook(
    mock_aws_session: None, make_tables: MakeTables
) -> None:
    client = item_boundary.install(aws_client("dynamodb", None))
    ledger, _ = make_tables(client)
    with pytest.raises(DurableError):  # the index key holding a token: refused
        client.update_item(
            TableName=ledger,
            Key={"pk": {"S": "RUN#R1"}, "sk": {"S": "RUN"}},
            AttributeUpdates={"list_sk": {"Value": {"S": f"DONE#{TOKEN}"}, "Action": "PUT"}},
        )
    client.update_item(
        TableName=ledger,
        Key={"pk": {"S": "RUN#R2"}, "sk": {"S": "RUN"}},
        AttributeUpdates={"output": {"Value": {"S": f"see {TOKEN}"}, "Action": "PUT"}},
    )
    items = client.scan(TableName=ledger)["Items"]
    assert TOKEN not in json.dumps(items)


# --- refused: variants of a token do not answer a wait -----------------------------------------


def waiting_run() -> tuple[LocalRunner, str, str]:
    urls: list[str] = []
    app = App()

    @app.workflow
    def approval(ctx: Context) -> Any:
        callback = ctx.create_callback("approve")
        urls.append(callback.url)
        return callback.result()

    runner = LocalRunner(app)
    run = runner.start("approval")
    runner.run_until_idle()
    return runner, run.run_id, urls[-1].rsplit("/", 1)[1]


def variants(token: str) -> list[str]:
    run_id, position, mac = token.split(".", 2)
    return [
        f"{run_id.lower()}.{position}.{mac}",  # case
        f"{token}\n",  # parse_token's $ takes a trailing newline: the hash does not
        f" {token}",
        f"{token} ",
        token.replace(".", "%2E"),  # the route's named() refuses this one first
        token.replace(".", "\uff0e"),  # a full-width dot
        token.replace(".", "\\u002e"),  # a JSON escape left unescaped
        f"{run_id}.{position}.{mac}=",  # base64 padding
        f"{run_id}.{position}.{mac[:-1]}",  # one character short
        f"{run_id}.0{position}.{mac}",  # another spelling of the position
    ]


def test_no_variant_of_a_token_answers_its_wait() -> None:
    """GIVEN a run waiting on a callback WHEN each variant of its token (case, whitespace,
    a trailing newline the parser's ``$`` accepts, encodings of the dot, padding) is sent
    THEN none is taken: the wait is answered only by the token's exact bytes (its SHA-256
    is compared), so a variant the scan misses is no credential."""
    runner, run_id, token = waiting_run()
    for variant in variants(token):
        with pytest.raises(DurableError):
            runner.complete_callback(variant, "forged")
        assert runner.get_run(run_id).status == RunStatus.WAITING, variant
    with pytest.raises(InvalidInput):  # the parser takes exactly one token, nothing around it
        parse_token(f"{token}\n")
    runner.complete_callback(token, "ok")
    runner.run_until_idle()
    assert runner.result(run_id) == "ok"


def test_a_percent_encoded_dot_in_the_callback_path_is_refused() -> None:
    """The route's path segment: an encoded letter, digit or ``-._~`` is refused before
    parsing (a 400), so ``%2E`` never reaches the parser as a dot."""
    with pytest.raises(Exception) as caught:
        named(TOKEN.replace(".", "%2E"))
    assert getattr(caught.value, "status", None) == 400


# --- finding: the API stage's X-Ray tracing stores the callback URL of every request --------


def test_the_api_stage_traces_no_callback_url() -> None:
    from pathlib import Path

    from durable.adapters.schema import load_template

    root = Path(__file__).resolve().parents[2]
    resources: dict[str, Any] = load_template(root / "template.yaml")["Resources"]
    traced = [
        name
        for name, res in resources.items()
        if res["Type"] == "AWS::Serverless::Api" and res["Properties"].get("TracingEnabled")
    ]
    left_out = [
        res["Properties"]["SamplingRule"]
        for res in resources.values()
        if res["Type"] == "AWS::XRay::SamplingRule"
        and "callbacks" in str(res["Properties"]["SamplingRule"].get("URLPath", ""))
        and res["Properties"]["SamplingRule"].get("FixedRate") == 0
        and res["Properties"]["SamplingRule"].get("ReservoirSize") == 0
    ]
    assert not traced or left_out, f"{traced} trace every /callbacks/<token> request"
