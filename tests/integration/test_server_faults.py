"""Faults the DynamoDB servers show, and what the adapters make of them.

On every server that speaks DynamoDB (moto in-process in the unit tier, DynamoDB Local in the
integration tier, LocalStack in the localstack tier):

* a failed condition returns the stored item (``ReturnValuesOnConditionCheckFailure``), which
  the ledger relies on to adopt a winner's record without a second read;
* a cancelled transaction names the reason per item, with the stored item;
* a throttled request on any ledger or effect-store call surfaces as a *retryable*
  ``StorageError`` (the vendor error as its cause), and botocore's own retries, when configured,
  absorb a transient throttle before the adapter sees it.

Throttling is injected at the botocore layer (``tests.support.faults.Throttle``): no local server
can be made to throttle, and botocore then parses the fake answer as DynamoDB's own. Those tests
run on the HTTP servers only: moto in-process answers from a ``before-send`` handler too, and
botocore calls *every* such handler before it picks the first answer, so moto would still apply
a write the client saw throttled (measured: a create "throttled" twice then found its own run).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context, Engine, EngineConfig, RunStatus
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.dynamodb_support import error_code
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.memory import MemoryInvoker
from durable.core.clock import FakeClock
from durable.core.flow import GateState
from durable.core.model import SignalRecord, StepKind, StepStatus
from durable.core.ports import (
    LEDGER_READS,
    LEDGER_WRITES,
    ChildReport,
    ConditionFailed,
    Ledger,
    RunGuard,
)
from durable.errors import StorageError
from tests.conftest import ClientFactory, MakeTables, aws_client, server_endpoint
from tests.support.faults import THROTTLING_CODES, Throttle
from tests.support.records import make_run, make_step, t

NO_RETRIES = {"retries": {"total_max_attempts": 1}}


@pytest.fixture(
    params=[
        pytest.param("dynamodb-local", marks=pytest.mark.integration),
        pytest.param("localstack", marks=pytest.mark.localstack),
    ]
)
def http_factory(request: pytest.FixtureRequest) -> ClientFactory:
    """DynamoDB clients on the servers reached over HTTP (see the module docstring)."""
    endpoint = server_endpoint(request.param, request)

    def make(**config: Any) -> Any:
        return aws_client("dynamodb", endpoint, **config)

    return make


SIGNAL = SignalRecord("RUN1", "go", "01A", '"payload"', t(13))


def _retry_reopening(ledger: Ledger) -> bool:
    """A retry's write (the run and its failed step, one transaction); False if refused."""
    try:
        ledger.operate(
            "RUN1",
            statuses=("RUNNING",),
            changes={"updated_at": t(15)},
            reopen=make_step(status=StepStatus.RETRYABLE_FAILED),
        )
    except ConditionFailed:
        return False
    return True


def _child_record(position: str, child: str) -> Any:
    return make_step(
        position=position,
        status=StepStatus.WAITING,
        output=None,
        kind=StepKind.CHILD,
        detail={"child": child},
        fence=1,
    )


# Every ledger call, in an order in which each one is valid after those before it (the control
# test below runs them for real). Arguments are what the engine would send.
LEDGER_CALLS: dict[str, Callable[[Any], object]] = {
    "create_run": lambda ledger: ledger.create_run(make_run(due_at=t(1))),
    "get_run": lambda ledger: ledger.get_run("RUN1"),
    "load": lambda ledger: ledger.load("RUN1"),
    "purge_leftovers": lambda ledger: ledger.purge_leftovers("RUN1", before=t(0)),
    # An erasure's last write: refused here (RUN1 was created at another time, and runs).
    "delete_run": lambda ledger: ledger.delete_run("RUN1", created_at=t(-1)),
    "claim": lambda ledger: ledger.claim(
        "RUN1", "w1", now=t(10), lease_until=t(70), stale_before=t(5)
    ),
    "update_run": lambda ledger: ledger.update_run(
        "RUN1", RunGuard(1, "w1"), {"updated_at": t(11)}
    ),
    "write_step": lambda ledger: ledger.write_step(make_step()),
    "write_step (guarded)": lambda ledger: ledger.write_step(
        make_step(position="0004", status=StepStatus.WAITING, output=None, fence=1),
        RunGuard(1, "w1"),
    ),
    "write_step_fenced": lambda ledger: ledger.write_step_fenced(
        make_step(
            position="0002",
            status=StepStatus.WAITING,
            output=None,
            kind=StepKind.CALLBACK,
            token_hash="h1",
            expires_at=t(500),
        ),
        RunGuard(1, "w1"),
        {"updated_at": t(12)},
    ),
    "get_step": lambda ledger: ledger.get_step("RUN1", "0001"),
    "extend_wait": lambda ledger: ledger.extend_wait(
        make_step(
            position="0002",
            status=StepStatus.WAITING,
            output=None,
            kind=StepKind.CALLBACK,
            token_hash="h1",
            expires_at=t(600),
            fence=1,
        ),
        token_hash="h1",
        now=t(12),
    ),
    "complete_waiting": lambda ledger: ledger.complete_waiting(
        make_step(position="0002", kind=StepKind.CALLBACK), token_hash="h1", now=t(13)
    ),
    "add_signal": lambda ledger: ledger.add_signal(SIGNAL, now=t(13)),
    "consume_signal": lambda ledger: ledger.consume_signal(
        make_step(position="0003", kind=StepKind.SIGNAL, name="go", detail={"signal_id": "01A"}),
        SIGNAL,
        RunGuard(1, "w1"),
    ),
    "due_runs": lambda ledger: ledger.due_runs(0, before=t(100), limit=10),
    "claim_trigger": lambda ledger: ledger.claim_trigger(
        "RUN1", t(13), t(300), stale_before=t(100), skew=timedelta(seconds=5)
    ),
    "list_runs": lambda ledger: ledger.list_runs(workflow="wf"),
    "open_runs": lambda ledger: ledger.open_runs("wf"),
    "operate": lambda ledger: ledger.operate(
        "RUN1", statuses=("RUNNING",), changes={"updated_at": t(14)}
    ),
    "operate (reopening a step)": _retry_reopening,
    "start_child": lambda ledger: ledger.start_child(
        _child_record("0005", "KID1"), RunGuard(1, "w1"), make_run("KID1", parent="RUN1@0005")
    ),
    "start_children": lambda ledger: ledger.start_children(
        [_child_record("0006.0001", "KID2")],
        RunGuard(1, "w1"),
        [make_run("KID2", parent="RUN1@0006.0001")],
    ),
    "get_steps": lambda ledger: ledger.get_steps("RUN1", ["0005", "0006.0001", "0007"]),
    "claim (a child)": lambda ledger: ledger.claim(
        "KID1", "w2", now=t(15), lease_until=t(75), stale_before=t(10)
    ),
    "finish_child": lambda ledger: ledger.finish_child(
        "KID1",
        RunGuard(1, "w2"),
        {"status": "SUCCEEDED", "output": '"ok"', "updated_at": t(15), "lease_owner": None},
        ChildReport("RUN1", "0005", "KID1", StepStatus.DONE, output='"ok"'),
        now=t(15),
    ),
    "continue_run": lambda ledger: ledger.continue_run(
        "RUN1",
        RunGuard(1, "w1"),
        {"status": "SUCCEEDED", "updated_at": t(16), "lease_owner": None},
        make_run("RUN2", continued_from="RUN1"),
    ),
    "write_gate": lambda ledger: ledger.write_gate("C#wf#", GateState(holders=("RUN1",))),
    "read_gate": lambda ledger: ledger.read_gate("C#wf#"),
}


EFFECT_CALLS: dict[str, Callable[[Any], object]] = {
    "begin": lambda e: e.begin("effect-key", 2_000_000_000, now=1_767_225_600),
    "complete": lambda e: e.complete("effect-key", '"ref"', 2_000_000_000),
}


def _stores(client: Any, make_tables: MakeTables | None) -> tuple[DynamoLedger, DynamoEffectStore]:
    # Throttled requests never leave the process, so those tests need no tables at all.
    ledger_table, idem_table = make_tables(client) if make_tables else ("absent", "absent")
    return DynamoLedger(client, ledger_table), DynamoEffectStore(client, idem_table)


# --- what a failed condition returns --------------------------------------------------------


def test_a_failed_condition_returns_the_stored_item(
    dynamodb_client: Any, make_tables: MakeTables
) -> None:
    # GIVEN a stored item
    table, _ = make_tables(dynamodb_client)
    stored = {"pk": {"S": "RUN#1"}, "sk": {"S": "RUN"}, "fence": {"N": "3"}}
    dynamodb_client.put_item(TableName=table, Item=stored)
    # WHEN a put and an update lose their conditions, asking for the old item
    with pytest.raises(dynamodb_client.exceptions.ConditionalCheckFailedException) as put:
        dynamodb_client.put_item(
            TableName=table,
            Item={**stored, "fence": {"N": "4"}},
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    with pytest.raises(dynamodb_client.exceptions.ConditionalCheckFailedException) as update:
        dynamodb_client.update_item(
            TableName=table,
            Key={"pk": stored["pk"], "sk": stored["sk"]},
            UpdateExpression="SET fence = :new",
            ConditionExpression="fence = :expected",
            ExpressionAttributeValues={":new": {"N": "4"}, ":expected": {"N": "2"}},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    # THEN both errors carry the stored item, and nothing changed
    assert put.value.response["Item"] == stored
    assert update.value.response["Item"] == stored
    assert (
        dynamodb_client.get_item(TableName=table, Key={"pk": stored["pk"], "sk": stored["sk"]})[
            "Item"
        ]
        == stored
    )


def test_a_cancelled_transaction_gives_a_reason_per_item(
    dynamodb_client: Any, make_tables: MakeTables
) -> None:
    # GIVEN a run item at fence 3
    table, _ = make_tables(dynamodb_client)
    run = {"pk": {"S": "RUN#1"}, "sk": {"S": "RUN"}, "fence": {"N": "3"}}
    dynamodb_client.put_item(TableName=table, Item=run)
    step = {"pk": {"S": "RUN#1"}, "sk": {"S": "STEP#0001"}, "status": {"S": "DONE"}}
    # WHEN a fenced step write (put step + conditional update of the run) holds a stale fence
    with pytest.raises(dynamodb_client.exceptions.TransactionCanceledException) as info:
        dynamodb_client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": step}},
                {
                    "Update": {
                        "TableName": table,
                        "Key": {"pk": run["pk"], "sk": run["sk"]},
                        "UpdateExpression": "SET fence = fence + :one",
                        "ConditionExpression": "fence = :stale",
                        "ExpressionAttributeValues": {":one": {"N": "1"}, ":stale": {"N": "2"}},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
            ]
        )
    # THEN the reasons line up with the items: none for the put, the failed check with the
    # stored run for the update; and the put did not happen either
    reasons = info.value.response["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["None", "ConditionalCheckFailed"]
    assert reasons[1]["Item"] == run
    key = {"pk": step["pk"], "sk": step["sk"]}
    assert "Item" not in dynamodb_client.get_item(TableName=table, Key=key)


# --- throttling -----------------------------------------------------------------------------


def test_every_ledger_call_is_covered() -> None:
    # A new Ledger method needs a line in LEDGER_CALLS, so a throttle on it is tested too
    # (a call whose variants take different requests has a line per variant: "name (how)").
    protocol = {*LEDGER_READS, *LEDGER_WRITES}  # every method of the port (a unit test says so)
    assert protocol == {name.split(" ")[0] for name in LEDGER_CALLS}


def test_every_call_is_valid_without_faults(dynamodb_client: Any, make_tables: MakeTables) -> None:
    # The control for the throttled calls below: on a real table, in order, every call is
    # accepted by the server and does what it says (so a throttle is all that fails them).
    ledger, effects = _stores(dynamodb_client, make_tables)
    results = {name: call(ledger) for name, call in LEDGER_CALLS.items()}
    assert results["claim"] is not None and results["claim_trigger"] is True
    assert results["purge_leftovers"] == 0  # nothing of RUN1 is older than its creation
    assert results["delete_run"] is False and ledger.get_run("RUN1") is not None
    assert results["write_gate"] is True
    assert results["read_gate"] == GateState(holders=("RUN1",), version=1)
    assert results["operate (reopening a step)"] is False  # the step is DONE, not TERMINAL_FAILED
    history = ledger.load("RUN1")
    assert history is not None
    assert sorted(history.steps) == ["0001", "0002", "0003", "0004", "0005", "0006.0001"]
    assert results["start_children"] is True and len(results["get_steps"]) == 2  # type: ignore[arg-type]
    assert results["finish_child"][1] is True  # type: ignore[index]
    assert history.steps["0005"].status == StepStatus.DONE  # the child's report
    assert history.run.status == "SUCCEEDED" and ledger.get_run("RUN2") is not None
    for call in EFFECT_CALLS.values():
        call(effects)


@pytest.mark.parametrize("call", list(LEDGER_CALLS))
def test_a_throttled_ledger_call_is_a_retryable_storage_error(
    call: str, http_factory: ClientFactory
) -> None:
    # GIVEN a client without retries whose every request is throttled
    client = http_factory(**NO_RETRIES)
    ledger, _ = _stores(client, None)
    throttle = Throttle(client)
    # WHEN the ledger call is made THEN it fails with a retryable StorageError whose cause is
    # the vendor error, after exactly one request
    with pytest.raises(StorageError) as info:
        LEDGER_CALLS[call](ledger)
    assert info.value.retryable, info.value
    assert error_code(info.value.__cause__) == throttle.code  # type: ignore[arg-type]
    assert info.value.__cause__.response["ResponseMetadata"]["RetryAttempts"] == 0  # type: ignore[union-attr]
    assert throttle.throttled == 1


@pytest.mark.parametrize("code", THROTTLING_CODES)
@pytest.mark.parametrize("call", list(EFFECT_CALLS))
def test_a_throttled_effect_store_call_is_a_retryable_storage_error(
    call: str, code: str, http_factory: ClientFactory
) -> None:
    client = http_factory(**NO_RETRIES)
    _, effects = _stores(client, None)
    Throttle(client, code=code)
    with pytest.raises(StorageError) as info:
        EFFECT_CALLS[call](effects)
    assert info.value.retryable, info.value


def test_botocore_retries_absorb_a_transient_throttle(
    http_factory: ClientFactory, make_tables: MakeTables
) -> None:
    # GIVEN botocore's standard retry mode with 3 attempts in all, and 2 throttled requests ahead
    client = http_factory(retries={"mode": "standard", "total_max_attempts": 3})
    ledger, _ = _stores(client, make_tables)
    throttle = Throttle(client, times=2)
    # WHEN the run is created THEN the third attempt reaches the server and succeeds
    ledger.create_run(make_run())
    assert (throttle.throttled, throttle.passed) == (2, 1)
    assert ledger.get_run("RUN1") == make_run()


def test_a_throttle_outlasting_the_retries_is_still_a_clean_retryable_error(
    http_factory: ClientFactory,
) -> None:
    # GIVEN retries configured, but a throttle that does not let up
    client = http_factory(retries={"mode": "standard", "total_max_attempts": 3})
    ledger, _ = _stores(client, None)
    throttle = Throttle(client)
    # WHEN a step is written THEN botocore gives up after its attempts and the adapter raises
    # one retryable StorageError (the engine's retry policy takes over from there)
    with pytest.raises(StorageError) as info:
        ledger.write_step(make_step())
    assert info.value.retryable
    # botocore made its 3 attempts, each answered by the Throttle
    assert info.value.__cause__.response["ResponseMetadata"]["RetryAttempts"] == 2  # type: ignore[union-attr]
    assert throttle.throttled == 3


# --- a storage failure inside a run is the invocation's failure, not the run's ---------------

bumpy = App()
undone: list[str] = []


def create_thing() -> str:
    return "thing"


def delete_thing(result: str) -> None:
    undone.append(result)


@bumpy.workflow
def with_compensation(ctx: Context) -> str:
    ctx.step(create_thing, compensate=delete_thing)
    return ctx.step(create_thing, name="again")


def test_a_step_record_lost_to_a_throttle_leaves_the_run_to_a_retry(
    http_factory: ClientFactory, make_tables: MakeTables
) -> None:
    # GIVEN a run whose first step (with a compensation) is recorded, and whose second step's
    # record (a PutItem) is throttled past botocore's retries while the run item stays writable
    undone.clear()
    client = http_factory(**NO_RETRIES)
    tables = make_tables(client)
    clock = FakeClock()
    engine = Engine(
        bumpy,
        DynamoLedger(client, tables[0]),
        MemoryInvoker(),
        DynamoEffectStore(client, tables[1]),
        clock=clock,
        config=EngineConfig(lease=timedelta(seconds=60)),
    )
    run = engine.start("with_compensation")
    throttle = Throttle(client, operations=("PutItem",), skip=1, times=1)
    # WHEN the worker cannot record the second step
    # THEN the invocation fails with the retryable StorageError; the run is neither failed nor
    # compensated (before the fix in Engine._conclude it was FAILED, "retryable": false, and
    # the first step's compensation ran): a transient storage fault must not end a run
    with pytest.raises(StorageError) as info:
        engine.resume(run.run_id)
    assert info.value.retryable and throttle.throttled == 1
    stored = engine.get_run(run.run_id)
    assert stored.status == RunStatus.RUNNING and stored.error is None
    assert undone == []
    # AND once the lease expires, the next invocation completes the run
    clock.advance(timedelta(seconds=70))
    assert engine.resume(run.run_id).result == "succeeded"
    assert [s.status for s in engine.history(run.run_id)] == [StepStatus.DONE] * 2
    assert undone == []
