"""Ledger contract, part three: operator changes (cancel, retry) and a retry reopening its step."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from durable.core.model import RunStatus, StepStatus
from durable.core.ports import ConditionFailed
from tests.support.records import make_run, make_step, t

ACTIVE = ("PENDING", "RUNNING", "WAITING", "COMPENSATING")
OP = {"action": "cancel", "at": t(5), "by": "alice", "reason": "duplicate"}


def test_a_cancel_request_bumps_the_inbox_and_logs_the_operation(ledger: Any) -> None:
    ledger.create_run(make_run(status=RunStatus.WAITING, inbox=2, due_at=None))
    new = ledger.operate(
        "RUN1",
        statuses=ACTIVE,
        changes={"cancel_requested": True, "cancel_reason": "duplicate", "due_at": t(5)},
        operation=OP,
        bump_inbox=True,
    )
    assert (new.inbox, new.cancel_requested, new.due_at) == (3, True, t(5))
    assert new.operations == [OP]
    again = ledger.operate("RUN1", statuses=ACTIVE, changes={}, operation={**OP, "by": "bob"})
    assert [o["by"] for o in again.operations] == ["alice", "bob"]
    assert ledger.get_run("RUN1") == again


def test_an_operation_on_a_run_in_another_status_writes_nothing(ledger: Any) -> None:
    ledger.create_run(make_run(status=RunStatus.SUCCEEDED))
    with pytest.raises(ConditionFailed) as info:
        ledger.operate("RUN1", statuses=ACTIVE, changes={"cancel_requested": True}, operation=OP)
    assert info.value.current is not None and info.value.current.status == RunStatus.SUCCEEDED
    assert ledger.get_run("RUN1").operations == []
    with pytest.raises(ConditionFailed) as missing:
        ledger.operate("NOPE", statuses=ACTIVE, changes={})
    assert missing.value.current is None


def test_an_unleased_operation_refuses_a_leased_run(ledger: Any) -> None:
    ledger.create_run(make_run(status=RunStatus.FAILED, lease_owner="w", lease_until=t(60)))
    with pytest.raises(ConditionFailed):
        ledger.operate("RUN1", statuses=("FAILED",), changes={"status": "PENDING"}, unleased=True)


RETRY = {"status": "PENDING", "error": None, "due_at": t(20), "updated_at": t(20)}


def _failed_run(ledger: Any) -> Any:
    ledger.create_run(make_run(status=RunStatus.FAILED, due_at=None))
    failed = make_step(status=StepStatus.TERMINAL_FAILED, output=None, attempt=3, error_summary="x")
    ledger.write_step(failed)
    return replace(failed, status=StepStatus.RETRYABLE_FAILED, detail={"attempt_base": 3})


def test_a_retry_reopens_its_failed_step_with_the_run_in_one_write(ledger: Any) -> None:
    reopened = _failed_run(ledger)
    new = ledger.operate(
        "RUN1", statuses=("FAILED",), changes=RETRY, unleased=True, reopen=reopened
    )
    assert new.status == RunStatus.PENDING and new.due_at == t(20)
    assert ledger.get_run("RUN1") == new
    assert ledger.get_step("RUN1", "0001") == reopened


def test_a_refused_retry_writes_neither_the_run_nor_the_step(ledger: Any) -> None:
    reopened = _failed_run(ledger)
    ledger.operate("RUN1", statuses=("FAILED",), changes=RETRY, reopen=reopened)
    # again: the run is PENDING now, and the step is not TERMINAL_FAILED any more
    with pytest.raises(ConditionFailed) as info:
        ledger.operate("RUN1", statuses=("FAILED",), changes=RETRY, reopen=reopened)
    assert info.value.current is not None and info.value.current.status == RunStatus.PENDING


def test_a_retry_whose_step_is_no_longer_failed_leaves_the_run_failed(ledger: Any) -> None:
    # GIVEN a FAILED run whose step at 0001 was meanwhile recorded DONE (another decision)
    ledger.create_run(make_run(status=RunStatus.FAILED, due_at=None))
    ledger.write_step(make_step())
    before = ledger.load("RUN1")
    # WHEN a retry tries to reopen it THEN nothing is written: the run stays FAILED
    reopen = make_step(status=StepStatus.RETRYABLE_FAILED)
    with pytest.raises(ConditionFailed) as info:
        ledger.operate("RUN1", statuses=("FAILED",), changes=RETRY, reopen=reopen)
    assert info.value.current is not None and info.value.current.status == RunStatus.FAILED
    assert ledger.load("RUN1") == before
