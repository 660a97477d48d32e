"""The DynamoDB layout's cost levers (issue 35): a large input kept in an item of its
own, written once (lever d), and a listing key that moves only when a run ends (lever b).

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
from durable.core.model import RunStatus, StepStatus
from durable.core.ports import ConditionFailed, RunExists, RunGuard
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
    name = item["input_item"]["S"]
    assert name.startswith(f"INPUT#{run.created_at}#")
    apart = tables.item(name)
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
    (kept,) = _input_items(tables)
    assert kept["sk"]["S"].startswith(f"INPUT#{t(100)}#") and kept["input"]["S"] == new_input


def test_the_items_of_a_large_input_match_the_declared_models() -> None:
    from durable.adapters.dynamodb_items import input_to_item, run_to_item
    from durable.adapters.dynamodb_models import InputItem, RunItem

    run = make_run(input=LARGE)
    item = run_to_item(run, 4, input_item=f"INPUT#{run.created_at}#00ff00ff00ff00ff")
    assert RunItem.from_raw_data(item).serialize() == item
    apart = input_to_item(run, item["input_item"]["S"])
    assert InputItem.from_raw_data(apart).serialize() == apart


# --- the listing key moves once, when the run ends (issue 35, lever b) ------------------


def test_the_listing_key_moves_only_when_the_run_ends(tables: Tables) -> None:
    """GIVEN a run WHEN it is claimed, parked, claimed again and finished THEN its
    listing key (``list_sk``) stays ``open#<created_at>#<run id>`` until it ends, then is
    ``done#<ended at>#<run id>``. A key holding the status moved with every transition,
    and DynamoDB bills a moved index key as a delete and a put; a transition within a
    phase now updates the entry in place."""
    run = make_run()
    tables.ledger.create_run(run)
    keys = [tables.item("RUN")["list_sk"]]  # type: ignore[index]
    claim = tables.ledger.claim("RUN1", "w1", now=t(1), lease_until=t(60), stale_before=t(1))
    assert claim is not None
    keys.append(tables.item("RUN")["list_sk"])  # type: ignore[index]
    tables.ledger.update_run(
        "RUN1",
        RunGuard(claim.run.fence, "w1"),
        {"status": RunStatus.WAITING, "updated_at": t(2), "lease_owner": None},
    )
    keys.append(tables.item("RUN")["list_sk"])  # type: ignore[index]
    again = tables.ledger.claim("RUN1", "w2", now=t(3), lease_until=t(60), stale_before=t(3))
    assert again is not None
    assert {k["S"] for k in keys} == {f"open#{run.created_at}#RUN1"}
    tables.ledger.update_run(
        "RUN1",
        RunGuard(again.run.fence, "w2"),
        {"status": RunStatus.SUCCEEDED, "updated_at": t(4), "output": "1"},
    )
    assert tables.item("RUN")["list_sk"] == {"S": f"done#{t(4)}#RUN1"}  # type: ignore[index]
    (listed,) = tables.ledger.list_runs(workflow="wf", status="SUCCEEDED").items
    assert listed.run_id == "RUN1"
    assert tables.ledger.list_runs(workflow="wf", status="WAITING").items == []


def _mixed(ledger: Any) -> None:
    for i, status in enumerate(["SUCCEEDED", "PENDING", "FAILED", "WAITING"]):
        ledger.create_run(
            make_run(f"R{i}", status=RunStatus(status), created_at=t(i), updated_at=t(10 - i))
        )


def test_a_listing_shows_the_open_runs_first_then_the_latest_ended(tables: Tables) -> None:
    _mixed(tables.ledger)
    runs = tables.ledger.list_runs(workflow="wf").items
    assert [r.run_id for r in runs] == ["R3", "R1", "R0", "R2"]


def test_the_memory_ledger_lists_in_the_same_order() -> None:
    from durable.adapters.memory import MemoryLedger

    ledger = MemoryLedger()
    _mixed(ledger)
    assert [r.run_id for r in ledger.list_runs(workflow="wf").items] == ["R3", "R1", "R0", "R2"]


def test_a_retried_run_is_listed_among_the_open_ones_again(tables: Tables) -> None:
    """GIVEN a failed run WHEN a retry reopens it THEN a listing of PENDING runs finds it
    (its key is back in the open phase), in both ledgers."""
    from durable.adapters.memory import MemoryLedger

    memory = MemoryLedger()
    for ledger in (tables.ledger, memory):
        ledger.create_run(make_run(status=RunStatus.FAILED))
        ledger.write_step(make_step(status=StepStatus.TERMINAL_FAILED))
        ledger.operate(
            "RUN1",
            statuses=("FAILED",),
            changes={"status": "PENDING", "updated_at": t(9)},
            reopen=make_step(status=StepStatus.RETRYABLE_FAILED),
        )
        (again,) = ledger.list_runs(workflow="wf", status="PENDING").items
        assert again.run_id == "RUN1"
        assert ledger.list_runs(workflow="wf", status="FAILED").items == []
    assert tables.item("RUN")["list_sk"] == {"S": f"open#{t(9)}#RUN1"}  # type: ignore[index]


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
    assert reads[0]["Key"]["sk"] == tables.item("RUN")["input_item"]  # type: ignore[index]


def test_a_ledger_told_to_keep_inputs_inline_writes_the_layout_before(tables: Tables) -> None:
    """GIVEN a ledger with ``inputs_apart=False`` (a stack whose older workers may still
    run) WHEN it creates a run with a large input THEN the run item holds it and no input
    item is written: a worker from before the layout reads the run whole."""
    inline = DynamoLedger(tables.client, tables.name, inputs_apart=False)
    run = make_run(input=LARGE)
    inline.create_run(run)
    item = tables.item("RUN")
    assert item is not None and item["input"] == {"S": LARGE} and "input_item" not in item
    assert _input_items(tables) == []
    assert tables.fresh().get_run("RUN1").input == LARGE  # type: ignore[union-attr]


# --- what a review reproduced on the first version (each failed on it) -------------------


def _input_items(tables: Tables, run_id: str = "RUN1") -> list[dict[str, Any]]:
    response = tables.client.query(
        TableName=tables.name,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :input)",
        ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}, ":input": {"S": "INPUT#"}},
    )
    items: list[dict[str, Any]] = response["Items"]
    return items


def test_a_refused_start_in_the_same_millisecond_leaves_the_winner_its_input(
    tables: Tables,
) -> None:
    """GIVEN two keyed starts of one run id in the same millisecond, with different inputs
    WHEN the second is refused (the run exists) THEN the run's input is the winner's, read
    by any container, including the one whose start was refused: an input item keyed by
    the creation time alone was overwritten by the loser's, and the loser's container
    remembered its own input under the winner's run."""
    winner, loser = make_run(input=LARGE), make_run(input=LARGE.replace("x", "L"))
    tables.ledger.create_run(winner)
    refused_here = tables.fresh()
    with pytest.raises(RunExists) as refused:
        refused_here.create_run(loser)
    assert refused.value.existing.input == LARGE
    assert tables.fresh().load("RUN1").run.input == LARGE  # type: ignore[union-attr]
    assert refused_here.get_run("RUN1").input == LARGE  # type: ignore[union-attr]
    assert len(_input_items(tables)) == 1


def test_a_refused_start_leaves_no_input_item_behind(tables: Tables) -> None:
    """GIVEN a live run WHEN ten keyed starts of its id are refused, each with a large
    input THEN the partition holds only the run's own input: leftovers under a live run
    are never purged, and every load of the run would read them."""
    tables.ledger.create_run(make_run(input=LARGE))
    for i in range(10):
        again = make_run(input=LARGE.replace("x", str(i)), created_at=t(i + 1))
        with pytest.raises(RunExists):
            tables.fresh().create_run(again)
    (kept,) = _input_items(tables)
    assert kept["input"] == {"S": LARGE}


def test_a_refused_successor_leaves_no_input_item_behind(tables: Tables) -> None:
    """GIVEN a run that continues as new under an id already taken WHEN the transaction is
    refused THEN the successor's input item is gone with it."""
    from durable.core.ports import RunExists as Taken

    tables.ledger.create_run(make_run())
    tables.ledger.create_run(make_run("NEXT", input=LARGE))
    claim = tables.ledger.claim("RUN1", "w1", now=t(1), lease_until=t(60), stale_before=t(1))
    assert claim is not None
    successor = make_run("NEXT", input=LARGE.replace("x", "s"), created_at=t(2))
    with pytest.raises(Taken):
        tables.ledger.continue_run(
            "RUN1",
            RunGuard(claim.run.fence, "w1"),
            {"status": RunStatus.SUCCEEDED, "updated_at": t(2)},
            successor,
        )
    (kept,) = _input_items(tables, "NEXT")
    assert kept["input"] == {"S": LARGE}


def test_a_listing_by_status_reads_no_more_as_finished_runs_pile_up(tables: Tables) -> None:
    """GIVEN one PENDING run among many ended ones (and one FAILED run among many open
    ones) WHEN the runs are listed by that status, a page of 50 THEN the number of queries
    does not grow with the runs of the other phase: a filter on the status under a key
    without it sent one query per page of ended runs (301 for 300), and a deploy check and
    an ``overlap=skip`` schedule list unfinished runs on every deploy and every fire."""
    queries: list[int] = []
    tables.client.meta.events.register("before-call.dynamodb.Query", lambda **_: queries.append(1))

    def listing_queries(status: str, others: RunStatus, count: int) -> int:
        for i in range(count):
            tables.ledger.create_run(
                make_run(f"{others.value}{count}-{i:04d}", status=others, created_at=t(i))
            )
        queries.clear()
        page = tables.ledger.list_runs(workflow="wf", status=status)
        assert [r.run_id for r in page.items] == [status]
        return len(queries)

    tables.ledger.create_run(make_run("PENDING", status=RunStatus.PENDING, created_at=t(0)))
    few = listing_queries("PENDING", RunStatus.SUCCEEDED, 3)
    assert listing_queries("PENDING", RunStatus.SUCCEEDED, 150) == few
    tables.ledger.create_run(make_run("FAILED", status=RunStatus.FAILED, created_at=t(0)))
    few = listing_queries("FAILED", RunStatus.RUNNING, 3)
    assert listing_queries("FAILED", RunStatus.RUNNING, 150) == few


def test_an_update_is_priced_by_how_the_run_is_stored(tables: Tables) -> None:
    """GIVEN a run created with its large input inline (before the layout, or while the
    setting was off) WHEN a worker whose ledger keeps inputs apart prices an update of it
    THEN the price is of the item as stored, input included (5 units for a 4 KB input),
    not of the item the worker would have written (1 unit)."""
    from durable.adapters.dynamodb_units import RunWriteUnits

    DynamoLedger(tables.client, tables.name, inputs_apart=False).create_run(make_run(input=LARGE))
    worker = tables.fresh()
    before = worker.get_run("RUN1")
    assert before is not None and worker.inputs_apart
    assert RunWriteUnits(worker).update(before, {"lease_until": t(70)}) >= 5
    fresh = make_run("RUN2", input=LARGE)
    assert RunWriteUnits(worker).update(fresh, {"lease_until": t(70)}) == 1


def test_a_successor_s_input_item_is_billed_once_not_twice() -> None:
    """continue-as-new bills its transaction at twice the units of its writes; the put of
    the successor's large input is outside it, billed once."""
    from durable.core.usage import Meter, UsageLedger

    billed: list[float] = []

    class Ledger:
        def continue_run(self, run_id: str, guard: Any, changes: Any, successor: Any) -> None:
            billed.append(changes["usage"]["wcu"])

    meter = Meter(
        units_of_create=lambda run: 1.0,
        units_of_update=lambda before, changes: 1.0,
        units_of_input=lambda run: 4.0,
    )
    usage = UsageLedger(Ledger(), meter)  # type: ignore[arg-type]
    run = make_run()
    usage._claimed["RUN1"] = run  # as its claim left it
    with meter.invocation(memory_mb=128, timer=False):
        meter.add("wcu", 0.5)
        usage.continue_run(
            "RUN1", RunGuard(1, "w"), {"lease_owner": None}, make_run("NEXT", input=LARGE)
        )
    assert billed == [0.5 + 2.0 * (1.0 + 1.0) + 4.0]


def test_a_retry_of_a_run_that_failed_in_its_own_code_is_listed_as_open(tables: Tables) -> None:
    """GIVEN a run that failed in its own code (no failed step to reopen) WHEN a retry
    makes it PENDING again THEN a listing of PENDING runs finds it in both ledgers: its
    listing key moved back to ``open#`` (a deploy check and an ``overlap=skip`` schedule
    list exactly those)."""
    from durable.adapters.memory import MemoryLedger

    for ledger in (MemoryLedger(), tables.ledger):
        ledger.create_run(make_run(status=RunStatus.FAILED))
        ledger.operate(
            "RUN1",
            statuses=("FAILED",),
            unleased=True,
            changes={"status": "PENDING", "updated_at": t(9), "error": None, "due_at": t(9)},
            reopen=None,
        )
        (again,) = ledger.list_runs(workflow="wf", status="PENDING").items
        assert again.run_id == "RUN1"


def test_a_refused_child_start_never_deletes_an_input_another_start_names(
    tables: Tables,
) -> None:
    """GIVEN a zombie and the lease's new owner starting one child (a derived id, the same
    input, the same millisecond) WHEN the new owner has written its input item and the
    zombie's start is refused before the new owner's commits THEN the child's input is
    still there: each write has a key of its own, so the zombie deletes only its own."""
    from durable.core.model import StepKind

    large = '{"n":"' + "x" * 2048 + '"}'
    tables.ledger.create_run(make_run("P"))
    zombie = tables.ledger.claim("P", "z", now=t(1), lease_until=t(2), stale_before=t(1))
    owner = tables.ledger.claim("P", "n", now=t(5), lease_until=t(60), stale_before=t(5))
    assert zombie is not None and owner is not None
    child = make_run("C", input=large, parent="P", created_at=t(6), updated_at=t(6))
    step = make_step(
        "P",
        "0001",
        status=StepStatus.WAITING,
        output=None,
        kind=StepKind.CHILD,
        detail={"child": "C"},
    )
    new_owner, stale = tables.fresh(), tables.fresh()
    name = new_owner._put_input(child)  # the new owner's first write
    with pytest.raises(ConditionFailed):
        stale.start_child(step, RunGuard(zombie.run.fence, "z"), child)
    new_owner._put_input = lambda run: name  # type: ignore[method-assign]
    new_owner.start_child(step, RunGuard(owner.run.fence, "n"), child)
    assert tables.fresh().get_run("C").input == large  # type: ignore[union-attr]
    assert len(_input_items(tables, "C")) == 1


@pytest.mark.parametrize("seed", range(2))
def test_a_cursor_walks_the_whole_listing_whatever_the_keys(tables: Tables, seed: int) -> None:
    """Random runs, spread over the listing's shards: for every status and page size,
    walking the cursor gives the whole listing, in its order, no run twice, none missed
    (the cursor holds where the page stopped in each shard)."""
    import random

    rng = random.Random(seed)
    statuses = [status.value for status in RunStatus]
    made: dict[str, str] = {}
    for i in range(30):
        status = rng.choice(statuses)
        made[f"R{i:03d}"] = status
        run = make_run(
            f"R{i:03d}",
            status=RunStatus(status),
            created_at=t(i),
            updated_at=t(i + rng.randint(0, 50)),
        )
        tables.ledger.create_run(run)
    # The whole listing, an unfinished status (the open phase) and a finished one.
    listed_by: list[str | None] = [None, "PENDING", "FAILED"]
    for wanted in listed_by:
        whole = [
            r.run_id
            for r in tables.ledger.list_runs(workflow="wf", status=wanted, limit=1000).items
        ]
        assert len(set(whole)) == len(whole)
        assert set(whole) == {r for r, st in made.items() if wanted in (None, st)}
        for limit in (1, 4):
            walked: list[str] = []
            cursor: str | None = None
            for _ in range(200):
                page = tables.ledger.list_runs(
                    workflow="wf", status=wanted, limit=limit, cursor=cursor
                )
                assert len(page.items) <= limit
                walked += [r.run_id for r in page.items]
                cursor = page.cursor
                if cursor is None:
                    break
            assert walked == whole, (wanted, limit)


def test_a_cursor_of_another_listing_is_refused(tables: Tables) -> None:
    """A cursor another listing returned (another status's phase, another workflow), or
    one whose position is outside its listing's key range, is ``InvalidCursor``: no
    query is sent on it."""
    import base64
    import json

    from durable.errors import InvalidCursor

    for i in range(3):
        tables.ledger.create_run(make_run(f"R{i}", status=RunStatus.FAILED, created_at=t(i)))
    cursor = tables.ledger.list_runs(workflow="wf", status="FAILED", limit=1).cursor
    assert cursor is not None
    for other in ({"status": "PENDING"}, {"workflow": "other", "status": "FAILED"}):
        with pytest.raises(InvalidCursor, match="start again without it"):
            tables.ledger.list_runs(**{"workflow": "wf", **other}, cursor=cursor)  # type: ignore[arg-type]
    data = json.loads(base64.urlsafe_b64decode(cursor))
    data["at"] = [f"open#{t(1)}#R1"] * len(data["at"])  # not in the done# range
    crafted = base64.urlsafe_b64encode(json.dumps(data).encode()).decode()
    with pytest.raises(InvalidCursor):
        tables.ledger.list_runs(workflow="wf", status="FAILED", cursor=crafted)
    page = tables.ledger.list_runs(workflow="wf", status="FAILED", cursor=cursor)
    assert [r.run_id for r in page.items] == ["R1", "R0"]


def test_a_cursor_across_every_shard_fits_the_api_s_query_limit(tables: Tables) -> None:
    """The cursor holds a position in each shard: with the longest workflow name the API
    takes (200) and every shard started, it stays within the API's 2,048 characters."""
    from durable.core.leases import LISTING_SHARDS

    workflow = "w" * 200
    for i in range(4 * LISTING_SHARDS):
        tables.ledger.create_run(make_run(f"R{i:025d}", workflow=workflow, created_at=t(i)))
    first = tables.ledger.list_runs(workflow=workflow, limit=3 * LISTING_SHARDS)
    assert first.cursor is not None and len(first.cursor) <= 2048
    rest = tables.ledger.list_runs(workflow=workflow, limit=100, cursor=first.cursor)
    assert len(first.items) + len(rest.items) == 4 * LISTING_SHARDS
