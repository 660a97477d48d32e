"""The DynamoDB layout's cost levers (issue 35): a large input kept in an item of its
own, written once (lever d), and a listing key that never moves (lever b).

DynamoDB bills a write by the whole item's size, and the run item is written on every
transition: an input inside it was paid for again by each claim, suspension and finish.
These pin the layout (on moto in-process): where the input is stored, that every read of
the run still has it, and that a run item of the layout before (input inline) still reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.dynamodb_items import INPUT_INLINE_MAX, run_pk
from durable.core.model import RunStatus
from durable.core.ports import RunExists, RunGuard
from tests.conftest import MakeTables, aws_client
from tests.support.records import make_run, make_step, t

LARGE = '{"notes":"' + "x" * 4096 + '"}'


class Tables:
    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name
        self.ledger = DynamoLedger(client, name)

    def item(self, sk: str, run_id: str = "RUN1") -> dict[str, Any] | None:
        key = {"pk": {"S": run_pk(run_id)}, "sk": {"S": sk}}
        item: dict[str, Any] | None = self.client.get_item(TableName=self.name, Key=key).get("Item")
        return item

    def fresh(self) -> DynamoLedger:
        """Another container's ledger: it remembers no input."""
        return DynamoLedger(self.client, self.name)


@pytest.fixture
def tables(mock_aws_session: None, make_tables: MakeTables) -> Iterator[Tables]:
    client = aws_client("dynamodb", None)
    name, _ = make_tables(client)
    yield Tables(client, name)


def test_a_large_input_is_written_once_in_its_own_item(tables: Tables) -> None:
    """GIVEN a run with a 4 KB input WHEN it is created THEN the run item holds no input,
    only the name of the item that does (``INPUT#<created_at>``), which holds it."""
    run = make_run(input=LARGE)
    tables.ledger.create_run(run)
    item = tables.item("RUN")
    assert item is not None and "input" not in item
    assert item["input_item"] == {"S": f"INPUT#{run.created_at}"}
    apart = tables.item(f"INPUT#{run.created_at}")
    assert apart is not None and apart["input"] == {"S": LARGE}
    assert apart["updated_at"] == {"S": run.created_at}  # the purge's clock


def test_a_small_input_stays_in_the_run_item(tables: Tables) -> None:
    small = '{"a":"' + "y" * (INPUT_INLINE_MAX - 8) + '"}'
    assert len(small) == INPUT_INLINE_MAX
    tables.ledger.create_run(make_run(input=small))
    item = tables.item("RUN")
    assert item is not None and item["input"] == {"S": small} and "input_item" not in item


def test_every_read_of_a_run_has_its_large_input(tables: Tables) -> None:
    """GIVEN a run whose input is apart WHEN another container claims, loads, reads and
    updates it THEN each record it gets back has the whole input."""
    tables.ledger.create_run(make_run(input=LARGE))
    other = tables.fresh()
    claim = other.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0))
    assert claim is not None and claim.run.input == LARGE
    third = tables.fresh()
    history = third.load("RUN1")
    assert history is not None and history.run.input == LARGE
    assert tables.fresh().get_run("RUN1").input == LARGE  # type: ignore[union-attr]
    updated = tables.fresh().update_run(
        "RUN1", RunGuard(claim.run.fence, "w1"), {"status": RunStatus.WAITING}
    )
    assert updated.input == LARGE


def test_a_repeated_create_reports_the_stored_run_with_its_input(tables: Tables) -> None:
    first = make_run(input=LARGE)
    tables.ledger.create_run(first)
    again = make_run(input=LARGE.replace("x", "z"), created_at=t(5), updated_at=t(5))
    with pytest.raises(RunExists) as refused:
        tables.fresh().create_run(again)
    assert refused.value.existing.input == LARGE


def test_a_run_item_of_the_layout_before_reads_as_it_did(tables: Tables) -> None:
    """A run started before the input moved out has it inline, however large: read as is."""
    tables.ledger.create_run(make_run())
    tables.client.update_item(
        TableName=tables.name,
        Key={"pk": {"S": run_pk("RUN1")}, "sk": {"S": "RUN"}},
        UpdateExpression="SET #i = :i",
        ExpressionAttributeNames={"#i": "input"},
        ExpressionAttributeValues={":i": {"S": LARGE}},
    )
    fresh = tables.fresh()
    assert fresh.get_run("RUN1").input == LARGE  # type: ignore[union-attr]
    assert fresh.load("RUN1").run.input == LARGE  # type: ignore[union-attr]


def test_the_purge_deletes_an_expired_incarnations_input_and_keeps_the_current(
    tables: Tables,
) -> None:
    """GIVEN a keyed run id that came back (the first run expired, its input item left)
    WHEN the new incarnation loads and the purge runs THEN the load has the new input and
    the purge deletes the old one, not the new one."""
    old = make_run(input=LARGE, created_at=t(0), updated_at=t(0))
    tables.ledger.create_run(old)
    tables.client.delete_item(
        TableName=tables.name, Key={"pk": {"S": run_pk("RUN1")}, "sk": {"S": "RUN"}}
    )
    new_input = LARGE.replace("x", "n")
    tables.ledger.create_run(make_run(input=new_input, created_at=t(100), updated_at=t(100)))
    tables.ledger.write_step(make_step(updated_at=t(101)))
    assert tables.fresh().load("RUN1").run.input == new_input  # type: ignore[union-attr]
    assert tables.ledger.purge_leftovers("RUN1", before=t(50)) == 1
    assert tables.item(f"INPUT#{t(0)}") is None
    assert tables.item(f"INPUT#{t(100)}") is not None


def test_the_items_of_a_large_input_match_the_declared_models() -> None:
    from durable.adapters.dynamodb_items import input_to_item, run_to_item
    from durable.adapters.dynamodb_models import InputItem, RunItem

    run = make_run(input=LARGE)
    item = run_to_item(run, 4)
    assert RunItem.from_raw_data(item).serialize() == item
    apart = input_to_item(run)
    assert InputItem.from_raw_data(apart).serialize() == apart


# --- the listing key does not move (issue 35, lever b) -----------------------------------


def test_the_listing_key_is_set_once_at_creation_and_never_moves(tables: Tables) -> None:
    """GIVEN a run WHEN it is claimed, parked, claimed again and finished THEN its
    listing key (``list_sk``) stays what the create wrote: ``created#<created_at>#<run
    id>``. A key that moved with the status cost a delete and a put in the listing index
    on every transition; a status change now updates the entry in place."""
    run = make_run()
    tables.ledger.create_run(run)
    first = tables.item("RUN")
    assert first is not None
    assert first["list_sk"] == {"S": f"created#{run.created_at}#RUN1"}
    claim = tables.ledger.claim("RUN1", "w1", now=t(1), lease_until=t(60), stale_before=t(1))
    assert claim is not None
    guard = RunGuard(claim.run.fence, "w1")
    tables.ledger.update_run(
        "RUN1", guard, {"status": RunStatus.WAITING, "updated_at": t(2), "lease_owner": None}
    )
    again = tables.ledger.claim("RUN1", "w2", now=t(3), lease_until=t(60), stale_before=t(3))
    assert again is not None
    tables.ledger.update_run(
        "RUN1",
        RunGuard(again.run.fence, "w2"),
        {"status": RunStatus.SUCCEEDED, "updated_at": t(4), "output": "1"},
    )
    last = tables.item("RUN")
    assert last is not None and last["list_sk"] == first["list_sk"]
    (listed,) = tables.ledger.list_runs(workflow="wf", status="SUCCEEDED").items
    assert listed.run_id == "RUN1"
    assert tables.ledger.list_runs(workflow="wf", status="WAITING").items == []


def test_a_listing_shows_the_newest_runs_first_whatever_their_status(tables: Tables) -> None:
    for i, status in enumerate(["SUCCEEDED", "PENDING", "FAILED"]):
        tables.ledger.create_run(
            make_run(f"R{i}", status=RunStatus(status), created_at=t(i), updated_at=t(10 - i))
        )
    assert [r.run_id for r in tables.ledger.list_runs(workflow="wf").items] == ["R2", "R1", "R0"]


def test_the_memory_ledger_lists_in_the_same_order() -> None:
    from durable.adapters.memory import MemoryLedger

    ledger = MemoryLedger()
    for i, status in enumerate(["SUCCEEDED", "PENDING", "FAILED"]):
        ledger.create_run(
            make_run(f"R{i}", status=RunStatus(status), created_at=t(i), updated_at=t(10 - i))
        )
    assert [r.run_id for r in ledger.list_runs(workflow="wf").items] == ["R2", "R1", "R0"]


def test_the_container_that_wrote_an_input_does_not_read_it_again(tables: Tables) -> None:
    """GIVEN a ledger that created a run with a large input WHEN it claims and updates the
    run THEN it sends no read for the input (it never changes); a ledger that has not
    seen it reads it once, consistently, and then remembers it."""
    reads: list[dict[str, Any]] = []

    class Counting:
        def __init__(self, real: Any) -> None:
            self.real = real

        def get_item(self, **request: Any) -> Any:
            reads.append(request)
            return self.real.get_item(**request)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    client: Any = Counting(tables.client)
    writer = DynamoLedger(client, tables.name)
    writer.create_run(make_run(input=LARGE))
    claim = writer.claim("RUN1", "w1", now=t(0), lease_until=t(60), stale_before=t(0))
    assert claim is not None and claim.run.input == LARGE and reads == []
    other = DynamoLedger(client, tables.name)
    guard = RunGuard(claim.run.fence, "w1")
    for _ in range(2):
        assert other.update_run("RUN1", guard, {"lease_until": t(70)}).input == LARGE
    assert len(reads) == 1 and reads[0]["ConsistentRead"] is True
    assert reads[0]["Key"]["sk"] == {"S": f"INPUT#{make_run().created_at}"}


def test_a_ledger_told_to_keep_inputs_inline_writes_the_layout_before(tables: Tables) -> None:
    """GIVEN a ledger with ``inputs_apart=False`` (a stack whose older workers may still
    run) WHEN it creates a run with a large input THEN the run item holds it and no input
    item is written: a worker from before the layout reads the run whole."""
    inline = DynamoLedger(tables.client, tables.name, inputs_apart=False)
    run = make_run(input=LARGE)
    inline.create_run(run)
    item = tables.item("RUN")
    assert item is not None and item["input"] == {"S": LARGE} and "input_item" not in item
    assert tables.item(f"INPUT#{run.created_at}") is None
    assert tables.fresh().get_run("RUN1").input == LARGE  # type: ignore[union-attr]
