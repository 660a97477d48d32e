"""Moving a table's runs to the sharded listing (``durable.adapters.listing_migration``):
the upgrade's one step after its deploy (docs/operations.md, "Upgrading to the sharded
listing")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.dynamodb_items import run_pk
from durable.adapters.listing_migration import migrate, moved_keys
from durable.core.model import RunStatus
from tests.conftest import MakeTables, aws_client
from tests.support.records import make_run, t


@pytest.fixture
def table(mock_aws_session: None, make_tables: MakeTables) -> Iterator[tuple[Any, str]]:
    client = aws_client("dynamodb", None)
    name, _ = make_tables(client)
    yield client, name


def _as_before_the_upgrade(client: Any, table: str, run_id: str, list_sk: str) -> None:
    """The run item as a ledger of the first listing layout wrote it."""
    item = client.get_item(TableName=table, Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": "RUN"}})
    attention = "attention_pk" in item["Item"]
    client.update_item(
        TableName=table,
        Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": "RUN"}},
        UpdateExpression="SET list_pk = :wf, list_sk = :k"
        + (", attention_pk = :att" if attention else "")
        + " REMOVE listing_pk",
        ExpressionAttributeValues={
            ":wf": {"S": "WF#wf"},
            ":k": {"S": list_sk},
            **({":att": {"S": "ATTENTION"}} if attention else {}),
        },
    )


def test_runs_written_before_the_upgrade_are_listed_once_moved(table: tuple[Any, str]) -> None:
    """GIVEN runs keyed by the first listing index (one by its very first layout,
    ``<STATUS>#<updated_at>``, a failed one in the one attention partition) beside a run of
    the sharded layout WHEN the migration runs THEN every run is listed where its status
    says, the failed one needs attention, none is left in the old index, and a second pass
    finds nothing to move."""
    client, name = table
    ledger = DynamoLedger(client, name)
    ledger.create_run(make_run("OLD0", status=RunStatus.WAITING, created_at=t(0)))
    ledger.create_run(make_run("OLD1", status=RunStatus.FAILED, created_at=t(1), updated_at=t(3)))
    ledger.create_run(make_run("NEW", status=RunStatus.PENDING, created_at=t(5)))
    _as_before_the_upgrade(client, name, "OLD0", f"PENDING#{t(0)}")  # claimed since
    _as_before_the_upgrade(client, name, "OLD1", f"done#{t(3)}#OLD1")
    assert [r.run_id for r in ledger.list_runs(workflow="wf").items] == ["NEW"]
    assert ledger.list_runs(needs_attention=True).items == []

    assert migrate(client, name) == (2, 0)

    assert [r.run_id for r in ledger.list_runs(workflow="wf").items] == ["NEW", "OLD0", "OLD1"]
    assert [r.run_id for r in ledger.open_runs("wf").items] == ["NEW", "OLD0"]
    assert [r.run_id for r in ledger.list_runs(needs_attention=True).items] == ["OLD1"]
    old_index = client.scan(TableName=name, IndexName="list-index").get("Items", [])
    assert old_index == []
    assert migrate(client, name) == (0, 0)


def test_a_first_layout_key_gets_the_phase_its_status_says() -> None:
    def item(status: str, key: str) -> dict[str, Any]:
        return {
            "run_id": {"S": "R1"},
            "workflow": {"S": "wf"},
            "status": {"S": status},
            "created_at": {"S": "c"},
            "updated_at": {"S": "u"},
            "list_sk": {"S": key},
        }

    assert moved_keys(item("RUNNING", "PENDING#u"))["list_sk"] == "open#c#R1"
    assert moved_keys(item("FAILED", "FAILED#u"))["list_sk"] == "done#u#R1"
    kept = moved_keys(item("WAITING", "open#c#R1"))
    assert "list_sk" not in kept and kept["listing_pk"].endswith("#wf")
