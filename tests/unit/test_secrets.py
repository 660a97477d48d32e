"""Secret-typed values are sealed in the ledger, shown as *** to readers, and whole in
workflow code on the first run and on replay (issue 13, finding 5)."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Secret, SecretStr

from durable import App, Context, RunStatus
from durable.adapters.nonces import MemoryNonceStore
from durable.api.service import ApiService
from durable.errors import InvalidInput
from durable.testing import LocalRunner

CARD = "tok_4242424242424242"
API_KEY = "sk-live-correct-horse-battery"
PIN = 918273


class Payment(BaseModel):
    customer: str
    card: SecretStr


class Vault(BaseModel):
    api_key: SecretStr
    pin: Secret[int]


def payment_app(seen: list[object]) -> App:
    app = App()

    def fetch_credentials(customer: str) -> Vault:
        return Vault(api_key=SecretStr(API_KEY), pin=Secret(PIN))

    def charge(card: str, api_key: str, pin: int) -> str:
        seen.append((card, api_key, pin))
        return "ch_1"

    @app.workflow
    def pay(ctx: Context, payment: Payment) -> str:
        vault = ctx.step(fetch_credentials, payment.customer)
        ctx.sleep(timedelta(minutes=5))  # the rest runs on replay, from the ledger
        logging.getLogger("durable.workflow").info("paying with %s / %s", payment, vault)
        return ctx.step(
            charge,
            payment.card.get_secret_value(),
            vault.api_key.get_secret_value(),
            vault.pin.get_secret_value(),
        )

    return app


def stored_text(runner: LocalRunner) -> str:
    ledger = runner.memory_ledger
    rows = [asdict(r) for r in ledger._runs.values()]
    rows += [asdict(s) for by in ledger._steps.values() for s in by.values()]
    return json.dumps(rows, default=str)


def test_secrets_are_sealed_when_stored_and_whole_in_workflow_code(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """GIVEN a workflow whose input and a step's result hold secret-typed fields
    WHEN it runs, suspends and replays
    THEN no plaintext secret is in any ledger item, log line or API answer; the API shows
    ***; the workflow used the real values after a replay."""
    caplog.set_level(logging.INFO)
    seen: list[object] = []
    runner = LocalRunner(payment_app(seen))
    run = runner.start("pay", {"customer": "c1", "card": CARD})
    runner.run_until_idle()
    runner.advance(minutes=5)
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert seen == [(CARD, API_KEY, PIN)]
    text = stored_text(runner)
    api = ApiService(
        runner.engine, clock=runner.clock, nonces=MemoryNonceStore(), webhook_secret=lambda: None
    )
    view = api.get_run(run.run_id).model_dump_json()
    for secret in (CARD, API_KEY, str(PIN)):
        assert secret not in text and secret not in view and secret not in caplog.text
    assert "$sealed" in text and '"***"' in view
    assert "paying with" in caplog.text


def test_a_sealed_value_does_not_open_in_another_run() -> None:
    """GIVEN two runs with secret inputs
    WHEN one run's sealed input is copied into the other's item
    THEN the copy does not open there (the run id is the associated data)."""
    runner = LocalRunner(payment_app([]))
    a = runner.start("pay", {"customer": "a", "card": CARD})
    b = runner.start("pay", {"customer": "b", "card": "tok_other"})
    runner.memory_ledger._runs[b.run_id].input = runner.get_run(a.run_id).input
    runner.run_until_idle()
    stored = runner.get_run(b.run_id)
    assert stored.status == RunStatus.FAILED
    assert runner.get_run(a.run_id).status == RunStatus.WAITING


def test_without_a_key_service_secrets_are_refused_naming_the_setting() -> None:
    """GIVEN an engine without a key service (no DURABLE_KMS_KEY_ID)
    WHEN a run with a secret input starts, or a step returns a secret
    THEN the start is refused (422 naming the setting) and the step fails for good, and
    no plaintext is written."""
    runner = LocalRunner(payment_app([]))
    runner.engine.keys = None
    with pytest.raises(InvalidInput, match="DURABLE_KMS_KEY_ID"):
        runner.start("pay", {"customer": "c1", "card": CARD})
    assert runner.memory_ledger.all_run_ids() == []

    app = App()

    def leak() -> Vault:
        return Vault(api_key=SecretStr(API_KEY), pin=Secret(PIN))

    @app.workflow
    def flow(ctx: Context) -> None:
        ctx.step(leak)

    plain = LocalRunner(app)
    plain.engine.keys = None
    run = plain.start("flow")
    plain.run_until_idle()
    stored = plain.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED and "DURABLE_KMS_KEY_ID" in (
        stored.error.message if stored.error else ""
    )
    assert API_KEY not in stored_text(plain)


def test_two_starts_differing_only_in_a_secret_are_one_start() -> None:
    """Sealing is randomized and a hash of a secret could be guessed back, so a keyed
    start compares inputs with their secrets masked."""
    runner = LocalRunner(payment_app([]))
    first = runner.start("pay", {"customer": "c1", "card": CARD}, idempotency_key="k")
    again = runner.start("pay", {"customer": "c1", "card": CARD}, idempotency_key="k")
    assert again.run_id == first.run_id
    assert CARD not in first.input_hash


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    card=st.text(alphabet=st.characters(codec="utf-8"), min_size=6, max_size=60),
    key=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=8, max_size=40),
)
def test_no_secrets_plaintext_is_in_any_stored_item(card: str, key: str) -> None:
    """Property: whatever the secret values, no stored item holds their text (they are
    sealed under the run's key), and the workflow gets them back whole."""
    seen: list[object] = []
    app = App()

    def fetch(customer: str) -> Vault:
        return Vault(api_key=SecretStr(key), pin=Secret(PIN))

    def use(card: str, api_key: str) -> str:
        seen.append((card, api_key))
        return "ok"

    @app.workflow
    def pay(ctx: Context, payment: Payment) -> str:
        vault = ctx.step(fetch, payment.customer)
        ctx.sleep(timedelta(minutes=1))
        return ctx.step(use, payment.card.get_secret_value(), vault.api_key.get_secret_value())

    runner = LocalRunner(app)
    run = runner.start("pay", {"customer": "c", "card": card})
    runner.run_until_idle()
    runner.advance(minutes=1)
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert seen == [(card, key)]
    text = stored_text(runner)
    stored = json.dumps([card, key])[1:-1]  # as JSON text would carry them
    assert card not in text and key not in text and stored not in text


# --- a callback's secret-typed answer (issue 32, finding 3) -----------------------------

NUMBER = "4000056655665556"


class Card(BaseModel):
    holder: str
    number: SecretStr


def card_app(seen: list[str], tokens: list[str]) -> App:
    app = App()

    def charge(number: str) -> str:
        seen.append(number)
        return "ch_1"

    @app.workflow
    def collect(ctx: Context) -> str:
        card = ctx.wait_for_callback(
            "card", submit=lambda cb: tokens.append(cb.token), result_type=Card
        )
        ctx.sleep(timedelta(minutes=1))  # the charge runs on replay, from the ledger
        return ctx.step(charge, card.number.get_secret_value())

    return app


@pytest.mark.parametrize("answered_by", ["token", "operator"])
def test_a_secret_typed_callback_answer_is_sealed_and_whole_in_workflow_code(
    answered_by: str,
) -> None:
    """GIVEN a callback whose result_type has a SecretStr field
    WHEN the sender (by token) or an operator (by name) answers it
    THEN the step item holds it sealed, GET /runs shows ***, and the workflow, replayed
    from the ledger, charges the real number. The answer is sealed under a data key of
    its own (the API may make keys but not open them: finding 10)."""
    seen: list[str] = []
    tokens: list[str] = []
    runner = LocalRunner(card_app(seen, tokens))
    run = runner.start("collect")
    runner.run_until_idle()
    answer = {"holder": "Ada", "number": NUMBER}
    if answered_by == "token":
        runner.complete_callback(tokens[0], answer)
    else:
        runner.complete_wait(run.run_id, "card", answer)
    text = stored_text(runner)
    assert NUMBER not in text and "$sealed" in text
    runner.run_until_idle()
    runner.advance(minutes=1)
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    assert seen == [NUMBER]
    api = ApiService(
        runner.engine, clock=runner.clock, nonces=MemoryNonceStore(), webhook_secret=lambda: None
    )
    view = api.get_run(run.run_id).model_dump_json()
    assert NUMBER not in view and NUMBER not in stored_text(runner) and '"***"' in view
    assert "Ada" in view  # the rest of the answer is shown as it came


def test_a_secret_typed_answer_without_a_key_service_is_refused_and_nothing_written() -> None:
    seen: list[str] = []
    tokens: list[str] = []
    runner = LocalRunner(card_app(seen, tokens))
    run = runner.start("collect")
    runner.run_until_idle()
    runner.engine.keys = None
    before = stored_text(runner)
    with pytest.raises(InvalidInput, match="DURABLE_KMS_KEY_ID"):
        runner.complete_callback(tokens[0], {"holder": "Ada", "number": NUMBER})
    assert stored_text(runner) == before and runner.get_run(run.run_id).status == RunStatus.WAITING


def test_a_secret_typed_result_type_must_be_importable_by_the_api() -> None:
    """The API seals the answer by the type's fields, so it must import the type: a class
    defined inside a function cannot be, and the workflow is told so at the callback,
    before any token exists (else the answer would be stored in clear)."""

    class Local(BaseModel):
        number: SecretStr

    app = App()

    @app.workflow
    def collect(ctx: Context) -> object:
        return ctx.create_callback("card", result_type=Local).result()

    runner = LocalRunner(app)
    run = runner.start("collect")
    runner.run_until_idle()
    stored = runner.get_run(run.run_id)
    assert stored.status == RunStatus.FAILED and stored.error is not None
    assert "module level" in stored.error.message and "Local" in stored.error.message


def test_a_sealed_answer_copied_to_another_run_does_not_open_there() -> None:
    """The node carries its key's record, so the copy could be opened by KMS: the worker
    refuses a key made for another run (and the key's associated data would too)."""
    tokens: list[str] = []
    runner = LocalRunner(card_app([], tokens))
    a, b = runner.start("collect"), runner.start("collect")
    runner.run_until_idle()
    runner.complete_callback(tokens[0], {"holder": "Ada", "number": NUMBER})
    steps = runner.memory_ledger._steps
    runner.complete_callback(tokens[1], {"holder": "Bob", "number": "4111111111111111"})
    (sealed,) = [s for s in steps[a.run_id].values() if s.name == "card"]
    (answered,) = [s for s in steps[b.run_id].values() if s.name == "card"]
    assert sealed.output is not None and "$key" in sealed.output
    answered.output = sealed.output  # a reader of the table pastes run a's answer into b
    runner.run_until_idle()
    runner.advance(minutes=1)
    stored = runner.get_run(b.run_id)
    assert stored.status == RunStatus.FAILED and stored.error is not None
    assert "do not move between runs" in stored.error.message
    assert runner.get_run(a.run_id).status == RunStatus.SUCCEEDED


def test_an_answer_holding_a_sealed_shape_is_refused() -> None:
    tokens: list[str] = []
    runner = LocalRunner(card_app([], tokens))
    runner.start("collect")
    runner.run_until_idle()
    forged = {"holder": "Eve", "number": {"$sealed": "AAAA", "$key": "01J:x"}}
    with pytest.raises(InvalidInput, match=r"\$sealed"):
        runner.complete_callback(tokens[0], forged)
