"""Attacks on "one boundary for every stored byte" (issue 44), as a reviewer tried them.

Each finding is a test marked ``xfail(strict=True)`` whose reason states the finding: it
fails today and turns the suite red the day the hole is closed, so the fix removes the
mark. The attacks that were refused are pinned too (plain tests), so a later change that
reopens one fails here.

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
from durable.errors import DurableError
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
@pytest.mark.xfail(
    strict=True,
    reason=(
        "finding (low-medium): a step's result typed as a pydantic model whose bytes are "
        "serialized as base64 or hex (ConfigDict(ser_json_bytes=...), a common way to "
        "keep an HTTP body) is stored with another run's callback URL encoded: no codec is "
        "involved, so layer 1 (scrub_value) never sees it, and layers 2-3 scan text after "
        "pydantic encoded it; bytes are not scrubbed by scrub_value at all. Decoding the "
        "stored value yields a live token."
    ),
)
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


@pytest.mark.xfail(
    strict=True,
    reason=(
        "finding (low, availability; a latent leak): positions are zero-padded to 4 "
        "digits, so the 10000th call (reachable with the default max_history, and at any "
        "depth: a map's 10000th item, a raised max_history) has position '10000'; the "
        "token minted there is refused by parse_token as malformed ([0-9]{4} per part), "
        "so the party given the URL can never answer and the run waits until its timeout "
        "(stuck forever without one) unless an operator answers by name"
    ),
)
def test_a_callback_at_position_10000_can_be_answered_by_its_token() -> None:
    runner, run_id, token = callback_at_position_10000()
    runner.complete_callback(token, "ok")
    runner.run_until_idle()
    assert runner.result(run_id) == "ok"


@pytest.mark.xfail(
    strict=True,
    reason=(
        "finding (latent): the shape TOKEN_TEXT has the same [0-9]{4} parts, so a token "
        "minted at position 10000 (or 0003.10000) is stored in clear by every layer. It "
        "is not live today only because parse_token refuses it too: a fix that widens "
        "the parser alone turns it into a live token in clear. Define the shape once "
        "(token_shape) and build tokens._TOKEN from it, with [0-9]{4,} in both"
    ),
)
def test_a_token_minted_at_position_10000_has_the_shape_the_scan_redacts() -> None:
    _, _, token = callback_at_position_10000()
    assert scrub_text(f"see /callbacks/{token}") == f"see /callbacks/{REDACTED_TOKEN}"


# --- finding: the DynamoDB hook does not walk the legacy AttributeUpdates parameter ----------


@pytest.mark.xfail(
    strict=True,
    reason=(
        "finding (low, backstop gap): item_boundary.check_request walks Item, Key, "
        "ExpressionAttributeValues, TransactItems, RequestItems and PartiQL, not "
        "UpdateItem's legacy AttributeUpdates: a write through it (a tool, a table added "
        "later, an older library) stores a token in clear, even in an index key "
        "(list_sk); fix: walk AttributeUpdates[*].Value like an item (keys refused) and, "
        "fail safe, refuse any write request holding a parameter the walk does not know"
    ),
)
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
    assert parse_token(f"{token}\n")  # the parser alone would take it (harmless, see above)
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


@pytest.mark.xfail(
    strict=True,
    reason=(
        "finding (medium, outside the tables): the API stage has TracingEnabled: true and "
        "no X-Ray sampling rule leaves out /callbacks/*, so API Gateway's trace segment "
        "(http.request.url) keeps the token of every sampled POST /callbacks/<token>... "
        "for 30 days, searchable by URL (GetTraceSummaries). A heartbeat's token is live "
        "while its wait is pending, and so is the token of an answer that was refused "
        "(422, 503): any reader of X-Ray (xray:BatchGetTraces, often in read-only roles) "
        "can answer the wait. Fix: an AWS::XRay::SamplingRule with ReservoirSize 0 and "
        "FixedRate 0 for URLPath */callbacks/* on the API stage (in both templates), or "
        "no stage tracing (the functions' own segments carry no URL)"
    ),
)
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
