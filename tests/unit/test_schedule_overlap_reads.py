"""A schedule's overlap decision sees every run of its chain that is going, whatever a
worker does while it reads (the explorer's seed 1289, ``skip_schedule_one_chain_at_a_time``).

The decision listed the workflow's runs one status at a time (PENDING, RUNNING, WAITING,
COMPENSATING). A worker that claimed a waiting run between the RUNNING read and the
WAITING one moved it out of the statuses still to be read and into one already read: no
read saw it, and an ``overlap="skip"`` fire started a second run beside it. These tests
put such a worker between every two of the decision's reads, whichever reads they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from durable import App, Context
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger
from durable.core.clock import FakeClock
from durable.core.model import RunStatus
from durable.engine.engine import Engine
from durable.engine.schedules import Schedule, fire, fired_by
from tests.conftest import MakeTables, aws_client
from tests.support.records import make_run, t
from tests.unit.test_schedules import T0

pytestmark = pytest.mark.unit

# More reads than a decision makes (it made four, one per unfinished status): a move
# after each of them, and none at all.
READS = range(1, 7)


class WorkerBetweenReads:
    """The memory ledger, with a worker that moves one run to ``status`` right after the
    decision's ``after``-th listing read (of any kind), as a claim or a suspension does."""

    def __init__(self, inner: MemoryLedger) -> None:
        self.inner = inner
        self.reads = 0
        self.move: tuple[int, str, RunStatus] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _read(self, name: str, *args: Any, **kwargs: Any) -> Any:
        page = getattr(self.inner, name)(*args, **kwargs)
        self.reads += 1
        if self.move is not None and self.move[0] == self.reads:
            _, run_id, status = self.move
            # A status change keeps the run's listing key, as every ledger's write does.
            self.inner.patch_run(run_id, {"status": status})
        return page

    def list_runs(self, **kwargs: Any) -> Any:
        return self._read("list_runs", **kwargs)

    def open_runs(self, *args: Any, **kwargs: Any) -> Any:
        return self._read("open_runs", *args, **kwargs)


class World:
    def __init__(self, overlap: str) -> None:
        app = App()

        @app.workflow(name="sync")
        def sync(ctx: Context, source: str) -> str:
            ctx.wait_for_signal("done")
            return source

        app.schedule("sync", "rate(1 hour)", name="hourly", input="crm", overlap=overlap)  # type: ignore[arg-type]
        self.clock = FakeClock(T0)
        self.memory = MemoryLedger()
        self.ledger = WorkerBetweenReads(self.memory)
        self.engine = Engine(
            app,
            self.ledger,
            MemoryInvoker(),
            MemoryEffectStore(),
            clock=self.clock,
        )
        self.schedule: Schedule = app.schedules()["hourly"]
        self.fires = 0

    def fire(self) -> tuple[str, str | None]:
        """The schedule's next fire, on time."""
        if self.fires:
            self.clock.advance(timedelta(hours=1))
        at = T0 + timedelta(hours=self.fires)
        self.fires += 1
        fired = fire(self.engine, self.schedule, at.strftime("%Y-%m-%dT%H:%M:%SZ"))
        return fired.result, fired.run_id

    def started(self) -> list[str]:
        runs = self.memory.list_runs(workflow="sync", limit=100).items
        return [r.run_id for r in runs]


def _going(w: World, status: RunStatus) -> str:
    """A run of the schedule's, set at ``status`` (its body waits for a signal)."""
    result, run_id = w.fire()
    assert result == "started" and run_id is not None
    w.engine.resume(run_id)
    w.memory.patch_run(run_id, {"status": status})
    return run_id


MOVES = [
    (RunStatus.WAITING, RunStatus.RUNNING),  # a timer's or a signal's claim
    (RunStatus.RUNNING, RunStatus.WAITING),  # a suspension
    (RunStatus.PENDING, RunStatus.RUNNING),  # a first claim
]


@pytest.mark.parametrize("after", READS)
@pytest.mark.parametrize(("before", "then"), MOVES)
def test_a_skip_fire_sees_a_run_a_worker_moves_while_it_reads(
    before: RunStatus, then: RunStatus, after: int
) -> None:
    """GIVEN an overlap="skip" schedule whose run is at ``before`` WHEN a worker moves it to
    ``then`` right after any one of the next fire's listing reads THEN the fire is skipped,
    naming the run, and starts nothing (on the code before, a run moved from WAITING to
    RUNNING after the RUNNING read was in no read, and a second run started)."""
    w = World("skip")
    first = _going(w, before)
    w.ledger.reads = 0
    w.ledger.move = (after, first, then)
    assert w.fire() == ("skipped_overlap", first)
    assert w.started() == [first]


@pytest.mark.parametrize("after", READS)
def test_a_skip_fire_sees_a_successor_a_worker_claims_while_it_reads(after: int) -> None:
    """The same for a run of the schedule's chain that no fire keyed: a continue-as-new
    successor (``requested_by`` the schedule), waiting, then claimed."""
    w = World("skip")
    first = _going(w, RunStatus.WAITING)
    head = w.memory.get_run(first)
    assert head is not None
    w.memory.patch_run(first, {"status": RunStatus.SUCCEEDED, "updated_at": t(5)})
    successor = make_run(
        "NEXT",
        workflow="sync",
        status=RunStatus.WAITING,
        created_at=t(6),
        updated_at=t(6),
        continued_from=first,
        requested_by=fired_by(w.schedule),
    )
    w.memory.create_run(successor)
    w.ledger.reads = 0
    w.ledger.move = (after, "NEXT", RunStatus.RUNNING)
    assert w.fire() == ("skipped_overlap", "NEXT")
    assert sorted(w.started()) == sorted([first, "NEXT"])


@pytest.mark.parametrize("after", READS)
def test_a_buffer_one_fire_sees_both_runs_while_a_worker_moves_one(after: int) -> None:
    """GIVEN an overlap="buffer_one" schedule with one run going (waiting) and one fire
    buffered behind it WHEN a worker claims the going one right after any one of the next
    fire's reads THEN that fire is dropped: it saw both (on the code before, the claimed
    run was in no read and a third run started, a second one buffered)."""
    w = World("buffer_one")
    first = _going(w, RunStatus.WAITING)
    result, buffered = w.fire()
    assert result == "started" and buffered is not None
    w.ledger.reads = 0
    w.ledger.move = (after, first, RunStatus.RUNNING)
    result, _ = w.fire()
    assert result == "skipped_overlap"
    assert sorted(w.started()) == sorted([first, buffered])


# --- the listing it reads, on DynamoDB (moto in-process) -------------------------------


@pytest.fixture
def dynamo(mock_aws_session: None, make_tables: MakeTables) -> Iterator[tuple[Any, str]]:
    client = aws_client("dynamodb", None)
    name, _ = make_tables(client)
    yield client, name


def test_open_runs_on_dynamodb_read_no_ended_run(dynamo: tuple[Any, str]) -> None:
    """GIVEN a workflow's open runs and 150 ended runs WHEN its open runs are read THEN
    each open run is there once, newest first, none of the ended ones, in the same number
    of queries as with 3 ended runs: one per shard of the listing, in its open phase."""
    from durable.core.leases import LISTING_SHARDS

    client, table = dynamo
    ledger = DynamoLedger(client, table)
    queries: list[int] = []
    client.meta.events.register("before-call.dynamodb.Query", lambda **_: queries.append(1))
    for i, status in enumerate(["PENDING", "WAITING", "COMPENSATING", "RUNNING"]):
        ledger.create_run(make_run(f"NEW{i}", status=RunStatus(status), created_at=t(10 + i)))
    ledger.create_run(make_run("ELSE", workflow="other", created_at=t(20)))

    def read(ended: int) -> list[str]:
        for i in range(ended):
            ledger.create_run(
                make_run(f"END{ended}-{i:04d}", status=RunStatus.SUCCEEDED, created_at=t(30 + i))
            )
        queries.clear()
        return [r.run_id for r in ledger.open_runs("wf").items]

    want = ["NEW3", "NEW2", "NEW1", "NEW0"]
    assert read(3) == want
    few = len(queries)
    assert read(150) == want
    assert len(queries) == few == LISTING_SHARDS
    # A cursor walks them all, a page at a time, across the shards.
    walked: list[str] = []
    cursor: str | None = None
    for _ in range(10):
        page = ledger.open_runs("wf", limit=2, cursor=cursor)
        walked += [r.run_id for r in page.items]
        cursor = page.cursor
        if cursor is None:
            break
    assert walked == want
