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
