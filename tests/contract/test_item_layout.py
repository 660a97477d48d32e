"""The hand-written item codec matches the pynamodb models that declare the layout.

Every attribute the codec writes must be declared on the model with the same type, or
pynamodb's round trip below changes the item; and the codec must read back what it wrote.
"""

from __future__ import annotations

from typing import Any

import pytest

from durable.adapters.dynamodb_items import (
    RUN_ATTRIBUTES,
    item_to_run,
    item_to_signal,
    item_to_step,
    run_to_item,
    signal_to_item,
    step_to_item,
)
from durable.adapters.dynamodb_models import RunItem, SignalItem, StepItem
from durable.core.model import Attempt, RunError, RunStatus, SignalRecord, StepKind, StepStatus
from tests.support.records import make_run, make_step, t

RUNS = [
    make_run(),
    make_run(
        status=RunStatus.FAILED,
        output='{"x":[1,2]}',
        error=RunError("ValueError", "bad ünïcode", True),
        requested_by="alice",
        idempotency_key="k",
        needs_attention=True,
        lease_owner="w",
        lease_until=t(60),
        fence=7,
        takeovers=2,
        takeover_mark=3,
        inbox=4,
        cancel_requested=True,
        cancel_reason="ops",
        cancel_compensate=True,
        purge_at=1_900_000_000,
        continued_from="PREV",
    ),
    make_run(due_at=None),
]
STEPS = [
    make_step(),
    make_step(
        kind=StepKind.CALLBACK,
        status=StepStatus.WAITING,
        output=None,
        attempts=[Attempt(1, t(1), t(2), "retryable", "boom", "req", "stream"), Attempt(2, t(3))],
        attempt=2,
        checkpoint={"payload_version": 3, "state": '{"cursor":9}'},
        refs=[{"kind": "ticket", "value": "T-1"}],
        wake_at=t(5),
        expires_at=t(9),
        token_nonce="n",
        token_hash="h",
        idempotency_key="RUN1:0001:step",
        error_type="X",
        error_class="retryable",
        error_summary="s",
        detail={"reason": "retry", "n": 1},
    ),
]


@pytest.mark.parametrize("run", RUNS)
def test_run_items_match_the_model(run: Any) -> None:
    item = run_to_item(run, 4)
    assert RunItem.from_raw_data(item).serialize() == item
    assert item_to_run(item) == run


def test_the_codec_knows_every_attribute_of_the_run_model() -> None:
    # run_attribute_value refuses a name outside RUN_ATTRIBUTES: a field added to the
    # model must be added there too, or updates of it fail.
    assert frozenset(RunItem.get_attributes()) == RUN_ATTRIBUTES


@pytest.mark.parametrize("step", STEPS)
def test_step_items_match_the_model(step: Any) -> None:
    item = step_to_item(step)
    assert StepItem.from_raw_data(item).serialize() == item
    assert item_to_step(item) == step


SIGNALS = [
    SignalRecord("RUN1", "go", "01A", '{"a":1}', t(1), "0002"),
    SignalRecord("RUN1", "go", "01B", '{"a":1}', t(1), None, key_hash="ab" * 16, payload_hash="p"),
    SignalRecord("RUN1", "go", "01C", "null", t(1), sent_by="arn:aws:iam::123456789012:user/op"),
]


@pytest.mark.parametrize("signal", SIGNALS)
def test_signal_items_match_the_model(signal: SignalRecord) -> None:
    item = signal_to_item(signal)
    assert SignalItem.from_raw_data(item).serialize() == item
    assert item_to_signal(item) == signal


def test_a_keyed_signal_sorts_by_its_key_hash_and_stores_no_key() -> None:
    # A retry of a keyed send must land on the same item, whatever its arrival id: the
    # sort key holds the key's hash, not the ULID; the key itself is stored nowhere.
    plain, keyed = (signal_to_item(s) for s in SIGNALS[:2])
    assert plain["sk"] == {"S": "SIGNAL#go#01A"}
    assert keyed["sk"] == {"S": "SIGNAL#go#K#" + "ab" * 16}
    assert keyed["signal_id"] == {"S": "01B"}
    assert "key_hash" not in plain and "payload_hash" not in plain


def test_items_are_console_readable() -> None:
    item = run_to_item(RUNS[1], 4)
    assert item["status"] == {"S": "FAILED"}
    assert item["created_at"]["S"].endswith("Z")
    assert item["error"]["M"]["message"] == {"S": "bad ünïcode"}
    assert item["list_sk"] == {"S": f"done#{RUNS[1].updated_at}#{RUNS[1].run_id}"}  # FAILED
