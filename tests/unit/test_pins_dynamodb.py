"""Pins on the DynamoDB ledger's writes (durable/adapters/dynamodb.py), on moto in-process.

What the contract suite cannot stage is staged here with a client that answers some calls
differently (``Client``): the item gone by the time a refused write is followed by a read
(TTL deleted it), a conditional failure without the old item, a transaction cancelled for
another reason, a throttled request (``Throttle``). Each test names the mutants it kills (ids
of ``python -m tests.mutation --module durable/adapters/dynamodb.py --list``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.dynamodb_items import run_pk
from durable.core.ids import due_shard
from durable.core.limits import value_size
from durable.core.model import RunError, RunStatus, StepStatus
from durable.core.ports import ConditionFailed, RunExists, RunGuard, WaitNotPending
from durable.errors import PayloadTooLarge, StorageError
from tests.conftest import MakeTables, aws_client
from tests.support.faults import Throttle
from tests.support.records import make_run, make_step, t

HUGE = "z" * 420_000


class Client:
    """The moto client, with the calls named in ``overrides`` answered by them instead."""

    def __init__(self, real: Any, **overrides: Callable[..., Any]) -> None:
        self.real = real
        self.overrides = overrides

    def __getattr__(self, name: str) -> Any:
        return self.overrides.get(name) or getattr(self.real, name)


class Tables:
    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name
        self.ledger = DynamoLedger(client, name)

    def with_client(self, **overrides: Callable[..., Any]) -> DynamoLedger:
        client: Any = Client(self.client, **overrides)  # duck-typed: the ledger's only client
        return DynamoLedger(client, self.name)

    def raw_run(self, run_id: str = "RUN1") -> dict[str, Any]:
        item = self.client.get_item(
            TableName=self.name, Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": "RUN"}}
        ).get("Item")
        assert item is not None
        return dict(item)


@pytest.fixture
def tables(mock_aws_session: None, make_tables: MakeTables) -> Iterator[Tables]:
    client = aws_client("dynamodb", None)
    name, _ = make_tables(client)
    yield Tables(client, name)


def reads_nothing(**_: Any) -> dict[str, Any]:
    """get_item answering "no such item": TTL deleted it just now."""
    return {}


def held(tables: Tables, **overrides: Any) -> Any:
    tables.ledger.create_run(make_run(**overrides))
    claim = tables.ledger.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0))
    assert claim is not None
    return claim.run


# --- create_run ---------------------------------------------------------------------------


def test_a_refused_create_reports_the_item_it_found_even_if_gone_since(tables: Tables) -> None:
    """GIVEN a stored run WHEN a create with the same id is refused, and the item is gone by
    the time anything could read it THEN RunExists carries the stored run anyway: it came
    with the refusal (ALL_OLD), no second read.

    Kills dynamodb-e3674954 ("ALL_OLD" -> ""), dynamodb-66811398 / 70aaa6ae (the item read
    from the error's response), dynamodb-b4944a03 (``if old`` negated)."""
    stored = make_run(input='{"a":1}')
    tables.ledger.create_run(stored)
    ledger = tables.with_client(get_item=reads_nothing)
    with pytest.raises(RunExists) as info:
        ledger.create_run(make_run(input='{"a":2}'))
    assert info.value.existing == stored


def test_a_refused_create_whose_item_vanished_is_a_transient_conflict(tables: Tables) -> None:
    """GIVEN a create refused without the old item, whose item is gone when read back
    WHEN it is reported THEN a retryable StorageError (try again), not RunExists.

    Kills dynamodb-fc2807b2 (that raise deleted) and dynamodb-fafbd2c2 (retryable -> False)."""
    tables.ledger.create_run(make_run())

    def put_without_old(**kwargs: Any) -> Any:
        kwargs.pop("ReturnValuesOnConditionCheckFailure", None)
        return tables.client.put_item(**kwargs)

    ledger = tables.with_client(put_item=put_without_old, get_item=reads_nothing)
    with pytest.raises(StorageError) as info:
        ledger.create_run(make_run())
    assert info.value.retryable is True


def test_a_throttled_write_is_a_retryable_storage_error(tables: Tables) -> None:
    """GIVEN a client whose every request is throttled WHEN the ledger creates a run,
    writes a step, checkpoints or updates the run THEN each raises a retryable
    StorageError: never reports success, never a raw botocore error.

    Kills dynamodb-3e10cabd (create_run), dynamodb-beb83ad0 (write_step), dynamodb-e5453436
    (write_step_fenced), dynamodb-e93ef968 (_update): their ``storage_error`` deleted."""
    run = held(tables)
    throttled = DynamoLedger(aws_client("dynamodb", None), tables.name)
    Throttle(throttled.client)
    attempts: list[Callable[[], Any]] = [
        lambda: throttled.create_run(make_run("RUN2")),
        lambda: throttled.write_step(make_step()),
        lambda: throttled.write_step_fenced(
            make_step(status=StepStatus.RUNNING, output=None), RunGuard(run.fence, "w1"), {}
        ),
        lambda: throttled.update_run("RUN1", RunGuard(run.fence, "w1"), {"inbox": 3}),
    ]
    for attempt in attempts:
        with pytest.raises(StorageError) as info:
            attempt()
        assert info.value.retryable is True


# --- claim --------------------------------------------------------------------------------


def test_a_takeover_loses_to_a_renewal_that_lands_between_its_read_and_its_write(
    tables: Tables,
) -> None:
    """GIVEN w1's lease, expired by w2's clock WHEN w1 renews it between w2's first (refused)
    claim and w2's exact-state takeover THEN the takeover is refused: the lease's end is part
    of the state it was decided on, and w1 keeps the run.

    Kills dynamodb-ee673f5f (``current.lease_until is not None`` negated) and
    dynamodb-c58c67bb (the ``lease_until = :lu`` condition deleted)."""
    run = held(tables)
    calls: list[str] = []

    def update_item(**kwargs: Any) -> Any:
        calls.append(kwargs["UpdateExpression"])
        if len(calls) == 2:  # the exact-state takeover: w1 renews first
            tables.ledger.update_run("RUN1", RunGuard(run.fence, "w1"), {"lease_until": t(200)})
        return tables.client.update_item(**kwargs)

    w2 = tables.with_client(update_item=update_item)
    assert w2.claim("RUN1", "w2", now=t(100), lease_until=t(160), stale_before=t(95)) is None
    stored = tables.ledger.get_run("RUN1")
    assert stored is not None and (stored.lease_owner, stored.lease_until) == ("w1", t(200))
    assert len(calls) == 2


# --- the derived index keys ---------------------------------------------------------------


def test_a_due_time_set_later_puts_the_run_in_the_due_index(tables: Tables) -> None:
    """GIVEN a waiting run created without a due time (not in the due index)
    WHEN an operator's change sets one THEN the run is in the due index, under its shard.

    Kills dynamodb-0f64e280 (``"due_at" in normalized`` -> ``"" in``: the shard key would
    not be written)."""
    tables.ledger.create_run(make_run(status=RunStatus.WAITING, due_at=None))
    assert "due_shard" not in tables.raw_run()
    tables.ledger.operate("RUN1", statuses=("WAITING",), changes={"due_at": t(10)})
    shard = int(due_shard("RUN1", tables.ledger.shards))
    assert ("RUN1", t(10)) in tables.ledger.due_runs(shard, before=t(20), limit=10).items


def test_removing_the_due_time_removes_the_shard_key_too(tables: Tables) -> None:
    """GIVEN a held run in the due index WHEN its due time is removed THEN the item keeps
    no due_shard either: the sparse index's keys stay exact.

    Kills dynamodb-78591f21 (``removes.append(e.name("due_shard"))`` deleted)."""
    run = held(tables)
    assert "due_shard" in tables.raw_run()
    tables.ledger.update_run("RUN1", RunGuard(run.fence, "w1"), {"due_at": None})
    assert "due_shard" not in tables.raw_run() and "due_at" not in tables.raw_run()


def test_a_run_no_longer_needing_attention_leaves_the_attention_index(tables: Tables) -> None:
    """GIVEN a failed run flagged for attention WHEN an operator retries it (PENDING, the
    flag cleared) THEN the run is no longer listed as needing attention.

    Kills dynamodb-751e691a (``removes.append(e.name("attention_pk"))`` deleted)."""
    tables.ledger.create_run(make_run(status=RunStatus.FAILED, needs_attention=True))
    assert [r.run_id for r in tables.ledger.list_runs(needs_attention=True).items] == ["RUN1"]
    tables.ledger.operate(
        "RUN1",
        statuses=("FAILED",),
        changes={"status": "PENDING", "needs_attention": False, "updated_at": t(1)},
    )
    assert tables.ledger.list_runs(needs_attention=True).items == []
    assert "attention_pk" not in tables.raw_run()


# --- operate --------------------------------------------------------------------------------


def test_an_operator_change_applies_to_a_leased_run_unless_asked_otherwise(
    tables: Tables,
) -> None:
    """GIVEN a run a worker holds WHEN an operator's cancel request is written (not
    ``unleased``) THEN it lands and bumps the inbox; with ``unleased=True`` it is refused.

    Kills dynamodb-29a108cc (``unleased: bool = False`` -> True)."""
    run = held(tables)
    new = tables.ledger.operate(
        "RUN1",
        statuses=("RUNNING",),
        changes={"cancel_requested": True, "cancel_reason": "stop"},
        bump_inbox=True,
    )
    assert new.cancel_requested and new.inbox == run.inbox + 1
    with pytest.raises(ConditionFailed):
        tables.ledger.operate("RUN1", statuses=("RUNNING",), changes={}, unleased=True)


def failed_with_step(tables: Tables) -> Any:
    tables.ledger.create_run(
        make_run(status=RunStatus.FAILED, due_at=None, error=RunError("KeyError", "x"))
    )
    step = make_step(status=StepStatus.TERMINAL_FAILED, output=None, error_type="KeyError")
    tables.ledger.write_step(step)
    return step


def reopen(ledger: DynamoLedger, step: Any) -> Any:
    return ledger.operate(
        "RUN1",
        statuses=("FAILED",),
        changes={"status": "PENDING", "updated_at": t(5), "due_at": t(5), "error": None},
        reopen=replace(step, status=StepStatus.RUNNING, detail={"attempt_base": 1}),
    )


def test_a_refused_reopening_reports_the_run_as_it_was_refused(tables: Tables) -> None:
    """GIVEN a failed run WHEN a retry is refused (the run is not in the expected status)
    and the item is gone by the time anything could read it THEN ConditionFailed carries
    the run from the refusal itself (the transaction's ALL_OLD for the run's update).

    Kills dynamodb-6bda6c58 ("ALL_OLD" -> ""), dynamodb-54847344 ("Item" -> ""),
    dynamodb-c1892a2c / 5617cca4 (the step's reason read instead of the run's),
    dynamodb-bf93dbf8 / a2af23bb / 33d1090d (the reason's code test)."""
    step = failed_with_step(tables)
    stored = tables.ledger.get_run("RUN1")
    ledger = tables.with_client(get_item=reads_nothing)
    with pytest.raises(ConditionFailed) as info:
        ledger.operate(
            "RUN1",
            statuses=("WAITING",),
            changes={"status": "PENDING", "updated_at": t(5)},
            reopen=replace(step, status=StepStatus.RUNNING),
        )
    assert info.value.current == stored


def test_a_reopened_run_that_vanished_before_the_read_back_is_not_found(tables: Tables) -> None:
    """GIVEN a retry whose transaction succeeded WHEN the run item is gone at the read-back
    (a TTL purge in between) THEN ConditionFailed(None): as if it never was.

    Kills dynamodb-e10dc63d (``raise ConditionFailed(None)`` deleted)."""
    step = failed_with_step(tables)
    with pytest.raises(ConditionFailed) as info:
        reopen(tables.with_client(get_item=reads_nothing), step)
    assert info.value.current is None


def test_a_reopened_step_too_large_for_the_ledger_is_refused(tables: Tables) -> None:
    """GIVEN a failed run WHEN a retry would reopen its step with a record over the item
    limit THEN PayloadTooLarge before anything is written.

    Kills dynamodb-114b0783 (the step's size check deleted: DynamoDB's refusal of the
    transaction would surface as a StorageError instead)."""
    step = failed_with_step(tables)
    with pytest.raises(PayloadTooLarge):
        reopen(tables.ledger, replace(step, error_summary=HUGE))
    stored = tables.ledger.get_run("RUN1")
    assert stored is not None and stored.status == RunStatus.FAILED


# --- _update --------------------------------------------------------------------------------


def test_only_a_large_change_pays_a_read_to_project_the_run_item(tables: Tables) -> None:
    """GIVEN a held run WHEN its owner writes a small change (a lease renewal), then one
    over 1 KB (an error with a long message) THEN the small one is sent as one update with
    no read before it; the large one first reads the run item (consistently) to project
    its size.

    Kills dynamodb-3720ace5 (the size test negated: every small update would pay a read
    and the large ones none)."""
    run = held(tables)
    reads: list[dict[str, Any]] = []

    def counted_get_item(**request: Any) -> Any:
        reads.append(request)
        return tables.client.get_item(**request)

    ledger = tables.with_client(get_item=counted_get_item)
    guard = RunGuard(run.fence, "w1")
    ledger.update_run("RUN1", guard, {"lease_until": t(90), "due_at": t(95)})
    assert reads == []
    ledger.update_run("RUN1", guard, {"error": RunError("Boom", "x" * 2000)})
    assert len(reads) == 1 and reads[0].get("ConsistentRead") is True


def test_a_change_of_exactly_one_kilobyte_pays_no_read(tables: Tables) -> None:
    """GIVEN a held run WHEN its owner writes a change of exactly 1024 bytes (by the
    ledger's count) THEN no read is made first: only changes over 1 KB are projected.

    Kills dynamodb-998a6f1a (``<= _SMALL_CHANGE`` -> ``<``)."""
    run = held(tables)
    changes = {"cancel_reason": "r" * 1007}
    assert value_size(changes) == 1024
    reads: list[dict[str, Any]] = []

    def counted_get_item(**request: Any) -> Any:
        reads.append(request)
        return tables.client.get_item(**request)

    tables.with_client(get_item=counted_get_item).update_run(
        "RUN1", RunGuard(run.fence, "w1"), changes
    )
    assert reads == []


class Sent:
    """Counts the writes a ledger sends (update_item and transact_write_items)."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self.calls: list[str] = []

    def ledger(self) -> DynamoLedger:
        def update_item(**request: Any) -> Any:
            self.calls.append("update_item")
            return self.tables.client.update_item(**request)

        def transact_write_items(**request: Any) -> Any:
            self.calls.append("transact_write_items")
            return self.tables.client.transact_write_items(**request)

        return self.tables.with_client(
            update_item=update_item, transact_write_items=transact_write_items
        )


@pytest.mark.parametrize("how", ["update_run", "continue_run", "continue_run_successor"])
def test_an_oversized_write_is_refused_before_it_is_sent(tables: Tables, how: str) -> None:
    """GIVEN a held run WHEN its owner writes a change that would take the run item over
    the limit (an output of 420 KB), or continues it as new with such a change, or with a
    successor whose input is that large THEN PayloadTooLarge, and no write request is sent
    at all (DynamoDB, whose own limit is higher than the ledger's, never decides).

    Kills dynamodb-4304a430 / 3d47a73f (``_check_projected_size`` not called by update_run
    / continue_run), dynamodb-f35ef1f2 (``current is not None`` negated) and
    dynamodb-04b62c16 (the projected item not checked), dynamodb-20fd7d59 (the successor's
    size not checked)."""
    run = held(tables)
    guard = RunGuard(run.fence, "w1")
    sent = Sent(tables)
    ledger = sent.ledger()
    huge = {"output": f'"{HUGE}"'}
    with pytest.raises(PayloadTooLarge):
        if how == "update_run":
            ledger.update_run("RUN1", guard, huge)
        elif how == "continue_run":
            ledger.continue_run("RUN1", guard, huge, make_run("RUN2"))
        else:
            successor = make_run("RUN2", input=f'"{HUGE}"')
            ledger.continue_run("RUN1", guard, {"status": "SUCCEEDED"}, successor)
    assert sent.calls == []
    assert tables.ledger.get_run("RUN2") is None


def padded(item: dict[str, Any]) -> dict[str, Any]:
    """A run item as DynamoDB might return it: grown past the ledger's own limit (398 KB)
    though still under DynamoDB's 400 KB."""
    return {**item, "cancel_reason": {"S": "b" * (398 * 1024 + 512)}}


@pytest.mark.parametrize("how", ["operate", "reopen"])
def test_an_operator_change_whose_item_comes_back_over_the_limit_is_refused(
    tables: Tables, how: str
) -> None:
    """GIVEN an operator's change (a cancel request, or a retry's reopening) that DynamoDB
    accepts, but whose run item comes back over the ledger's own limit (which keeps 2 KB
    of head room under DynamoDB's) THEN PayloadTooLarge, as the memory ledger refuses it.

    Kills dynamodb-57838e26 (operate's check of the item it got back deleted) and
    dynamodb-740f0ac5 (the same after a reopening's read-back)."""
    if how == "operate":
        held(tables)

        def update_item(**request: Any) -> Any:
            response = tables.client.update_item(**request)
            return {**response, "Attributes": padded(response["Attributes"])}

        with pytest.raises(PayloadTooLarge):
            tables.with_client(update_item=update_item).operate(
                "RUN1",
                statuses=("RUNNING",),
                changes={"cancel_requested": True, "cancel_reason": "stop"},
            )
        return
    step = failed_with_step(tables)

    def get_item(**request: Any) -> Any:
        response = tables.client.get_item(**request)
        return {**response, "Item": padded(response["Item"])}

    with pytest.raises(PayloadTooLarge):
        reopen(tables.with_client(get_item=get_item), step)


def test_an_update_over_the_item_limit_says_so_with_the_limit(tables: Tables) -> None:
    """GIVEN a held run WHEN its owner writes a small change that DynamoDB still refuses as
    too large (an item grown to the limit by earlier small changes) THEN PayloadTooLarge
    names the run, the 400 KB limit, and a size one byte over it (DynamoDB does not say by
    how much). A large change is refused before it is sent (the contract suite).

    Kills dynamodb-01629748 / e9450f1e / e7840a93 / f5d912bb (the reported size),
    dynamodb-1f977960 / a0a67574 / ef7ab3ef / eafd6097 (the limit)."""
    run = held(tables)

    def too_large(**_: Any) -> Any:
        raise tables.client.exceptions.ClientError(
            {
                "Error": {
                    "Code": "ValidationException",
                    "Message": "Item size has exceeded the maximum allowed size",
                }
            },
            "UpdateItem",
        )

    with pytest.raises(PayloadTooLarge) as info:
        tables.with_client(update_item=too_large).update_run(
            "RUN1", RunGuard(run.fence, "w1"), {"inbox": 3}
        )
    assert (info.value.limit, info.value.size) == (400 * 1024, 400 * 1024 + 1)
    assert info.value.what == "run RUN1"


def test_another_validation_error_is_a_storage_error_not_a_size_error(tables: Tables) -> None:
    """GIVEN an update DynamoDB refuses as invalid for another reason than the item size
    WHEN it is reported THEN a (terminal) StorageError, not PayloadTooLarge.

    Kills dynamodb-e0b066ed (``ValidationException and "Item size" in ...`` -> ``or``) and
    dynamodb-bd33ca6b ("Item size" -> "": every validation error would read as a size)."""
    run = held(tables)

    def invalid(**_: Any) -> Any:
        raise tables.client.exceptions.ClientError(
            {"Error": {"Code": "ValidationException", "Message": "Invalid UpdateExpression"}},
            "UpdateItem",
        )

    with pytest.raises(StorageError) as info:
        tables.with_client(update_item=invalid).update_run(
            "RUN1", RunGuard(run.fence, "w1"), {"inbox": 3}
        )
    assert not isinstance(info.value, PayloadTooLarge) and info.value.retryable is False


# --- steps ----------------------------------------------------------------------------------


def test_a_step_write_refused_without_the_stored_record_is_transient(tables: Tables) -> None:
    """GIVEN a final step record WHEN a second write is refused but the refusal carries no
    record (the item vanished) THEN a retryable StorageError, never a made-up adoption.

    Kills dynamodb-feccf9c8 (that raise deleted) and dynamodb-f9356161 (retryable -> False)."""
    tables.ledger.create_run(make_run())
    tables.ledger.write_step(make_step(output='"first"'))

    def put_without_old(**kwargs: Any) -> Any:
        kwargs.pop("ReturnValuesOnConditionCheckFailure", None)
        return tables.client.put_item(**kwargs)

    with pytest.raises(StorageError) as info:
        tables.with_client(put_item=put_without_old).write_step(make_step(output='"second"'))
    assert info.value.retryable is True


def test_a_refused_checkpoint_reports_the_run_from_the_refusal(tables: Tables) -> None:
    """GIVEN a run taken over by w2 WHEN w1's checkpoint is refused, and the run item is gone
    by the time anything could read it THEN ConditionFailed carries w2's run, from the
    transaction's own ALL_OLD.

    Kills dynamodb-674bf5a7 ("ALL_OLD" -> ""), dynamodb-42e26c9f ("Item" -> ""),
    dynamodb-53dff2d3 (the step's reason read), dynamodb-fbf1695b (``if old`` negated)."""
    held(tables)
    taken = tables.ledger.claim("RUN1", "w2", now=t(100), lease_until=t(160), stale_before=t(95))
    assert taken is not None
    ledger = tables.with_client(get_item=reads_nothing)
    step = make_step(status=StepStatus.RUNNING, output=None)
    with pytest.raises(ConditionFailed) as info:
        ledger.write_step_fenced(step, RunGuard(1, "w1"), {"lease_until": t(500)})
    assert info.value.current == taken.run


def test_a_refused_guarded_step_write_reports_the_run_from_the_refusal(tables: Tables) -> None:
    """GIVEN a run taken over by w2 WHEN w1's guarded step write (the run item checked in
    the same transaction) is refused, and the run item is gone by the time anything could
    read it THEN ConditionFailed carries w2's run, from the check's own ALL_OLD.

    Kills dynamodb_table-f4e9a1da (the ConditionCheck's "ALL_OLD" -> "")."""
    held(tables)
    taken = tables.ledger.claim("RUN1", "w2", now=t(100), lease_until=t(160), stale_before=t(95))
    assert taken is not None
    ledger = tables.with_client(get_item=reads_nothing)
    with pytest.raises(ConditionFailed) as info:
        ledger.write_step(make_step(), RunGuard(1, "w1"))
    assert info.value.current == taken.run


def test_a_guarded_step_write_over_a_final_record_returns_the_stored_one(tables: Tables) -> None:
    """GIVEN a step already recorded DONE, and the run held by w1 WHEN w1 writes the step
    again under its guard, and the step item is gone by the time anything could read it
    THEN the write is refused and returns the stored record, from the refusal's own
    ALL_OLD (the first writer wins; the caller adopts its result).

    Kills dynamodb_steps-96dbeba8 (the step Put's "ALL_OLD" -> ""), dynamodb_steps-55028a3c
    / b38b7aa0 / 7d445c29 / 07b838f9 (the step's refusal not recognised), dynamodb_steps-4e6e29c1
    / 62ec8f1d / ef2d1a43 (its old item not taken), dynamodb_steps-bcab48b0 (``return stored``
    -> ``return None``)."""
    held(tables)
    first = make_step(output='"first"')
    assert tables.ledger.write_step(first, RunGuard(1, "w1")) == first
    ledger = tables.with_client(get_item=reads_nothing)

    stored = ledger.write_step(make_step(output='"second"'), RunGuard(1, "w1"))

    assert stored == first


def test_a_guarded_step_write_refused_for_a_vanished_step_is_not_pending(
    tables: Tables,
) -> None:
    """GIVEN a step recorded DONE WHEN a guarded write of it is refused without the stored
    record and the step cannot be read back either THEN WaitNotPending: there is nothing
    to adopt."""
    held(tables)
    tables.ledger.write_step(make_step(output='"first"'), RunGuard(1, "w1"))

    def without_old(**kwargs: Any) -> Any:
        for item in kwargs["TransactItems"]:
            for body in item.values():
                body.pop("ReturnValuesOnConditionCheckFailure", None)
        return tables.client.transact_write_items(**kwargs)

    ledger = tables.with_client(transact_write_items=without_old, get_item=reads_nothing)
    with pytest.raises(WaitNotPending):
        ledger.write_step(make_step(output='"second"'), RunGuard(1, "w1"))


def test_a_checkpoint_cancelled_for_another_reason_is_a_storage_error(tables: Tables) -> None:
    """GIVEN a checkpoint whose transaction DynamoDB cancels for a conflict (not a failed
    condition) WHEN it is reported THEN a retryable StorageError: neither "the step is
    final" (False) nor success.

    Kills dynamodb-ab9f974f (``codes and codes[0] == ...`` -> ``or``) and dynamodb-46fd13c1
    (the ``storage_error`` after the reasons deleted)."""
    run = held(tables)

    def conflict(**_: Any) -> Any:
        raise tables.client.exceptions.TransactionCanceledException(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}],
            },
            "TransactWriteItems",
        )

    ledger = tables.with_client(transact_write_items=conflict)
    step = make_step(status=StepStatus.RUNNING, output=None)
    with pytest.raises(StorageError) as info:
        ledger.write_step_fenced(step, RunGuard(run.fence, "w1"), {"lease_until": t(90)})
    assert info.value.retryable is True


# --- continue_run's refusals -------------------------------------------------------------


def test_a_refused_continue_as_new_reports_the_run_from_the_refusal(tables: Tables) -> None:
    """GIVEN a run held by another owner now WHEN the old owner continues it as new, and
    the run item is gone by the time anything could read it THEN ConditionFailed carries
    the run from the refusal itself (the transaction's ALL_OLD for the run's update).

    Kills dynamodb-3feb0d32 (``if old`` negated: the run read again, and found gone),
    dynamodb-1bc68a0c ("Item" -> "") and dynamodb-dfae9454 (the successor's reason read
    instead of the run's)."""
    run = held(tables)
    tables.ledger.operate("RUN1", statuses=("RUNNING",), changes={"lease_owner": "w2"})
    stored = tables.ledger.get_run("RUN1")
    ledger = tables.with_client(get_item=reads_nothing)
    with pytest.raises(ConditionFailed) as info:
        ledger.continue_run(
            "RUN1", RunGuard(run.fence, "w1"), {"status": "SUCCEEDED"}, make_run("RUN2")
        )
    assert info.value.current == stored


def test_a_continue_as_new_onto_a_taken_id_reports_the_run_found_there(tables: Tables) -> None:
    """GIVEN a successor id already taken by a stored run WHEN a run is continued as new
    under it, and that item is gone by the time anything could read it THEN RunExists
    carries the stored run from the refusal itself (the successor put's ALL_OLD).

    Kills dynamodb-05b40c42 ("Item" -> ""), dynamodb-b796f078 (the run's reason read
    instead of the successor's), dynamodb-e0b127f3 (``if old`` negated), dynamodb-15da8093
    (the successor put's "ALL_OLD" -> "")."""
    run = held(tables)
    taken = make_run("RUN2", input='{"b":2}')
    tables.ledger.create_run(taken)
    ledger = tables.with_client(get_item=reads_nothing)
    with pytest.raises(RunExists) as info:
        ledger.continue_run("RUN1", RunGuard(run.fence, "w1"), {"status": "SUCCEEDED"}, taken)
    assert info.value.existing == taken


def test_a_successor_conflict_without_the_item_is_a_transient_conflict(tables: Tables) -> None:
    """GIVEN a continue-as-new refused for its successor id without the old item, and that
    item gone when read back WHEN it is reported THEN a retryable StorageError (try
    again), not RunExists.

    Kills dynamodb-6cdc4b10 (that raise deleted) and dynamodb-f6b5a61b (retryable ->
    False)."""
    run = held(tables)

    def successor_taken(**_: Any) -> Any:
        raise tables.client.exceptions.TransactionCanceledException(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "taken"},
                "CancellationReasons": [{"Code": "None"}, {"Code": "ConditionalCheckFailed"}],
            },
            "TransactWriteItems",
        )

    ledger = tables.with_client(transact_write_items=successor_taken, get_item=reads_nothing)
    with pytest.raises(StorageError) as info:
        ledger.continue_run(
            "RUN1", RunGuard(run.fence, "w1"), {"status": "SUCCEEDED"}, make_run("RUN2")
        )
    assert info.value.retryable is True
