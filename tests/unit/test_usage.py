"""A run's bill (``durable.core.usage``): what each invocation records, and its price."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durable import App, Context
from durable.adapters.dynamodb_units import Index, item_size, write_units
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger, MemoryTimers
from durable.cli import since_cutoff
from durable.core.clock import FakeClock
from durable.core.config import EngineConfig
from durable.core.model import RunRecord
from durable.core.ports import ConditionFailed, RunGuard
from durable.core.usage import Meter, Prices, UsageLedger, added
from durable.engine.engine import Engine
from durable.errors import InvalidInput
from durable.ops.render import cost_line, usd
from durable.settings import Settings

pytestmark = pytest.mark.unit


class Ticks:
    """A monotonic clock the test moves: each invocation lasts what the test says."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _app() -> App:
    app = App()

    @app.step
    def add(i: int) -> int:
        return i

    @app.workflow(name="nap")
    def nap(ctx: Context) -> int:
        first = add(1)
        ctx.sleep(timedelta(hours=1))
        return first + add(2)

    return app


class World:
    """A worker container: a metered ledger whose every request costs what ``costs`` says."""

    def __init__(self) -> None:
        self.ticks = Ticks()
        self.meter = Meter(
            units_of_create=lambda run: 3.0,
            units_of_update=lambda before, changes: 4.0 if changes.get("status") else 5.0,
            clock=self.ticks,
        )
        self.memory = MemoryLedger()
        self.clock = FakeClock()
        self.ledger = UsageLedger(self.memory, self.meter)
        self.timers = MemoryTimers()
        self.engine = Engine(
            _app(),
            self.ledger,
            MemoryInvoker(),
            MemoryEffectStore(),
            clock=self.clock,
            config=EngineConfig(inprocess_wait_threshold=timedelta(0)),
            timers=self.timers,
        )

    def invoke(self, run_id: str, *, timer: bool, ms: float, units: float) -> str:
        """One worker invocation that lasts ``ms`` and whose requests consume ``units``
        write units (as the adapter's hook would add them)."""
        with self.meter.invocation(memory_mb=512, timer=timer):
            self.meter.add("wcu", units)
            self.meter.add("ddb", 2)
            self.meter.add("rcu", 0.5)
            self.ticks.now += ms / 1000.0
            return self.engine.resume(run_id, reason="timer" if timer else "start").result

    def usage(self, run_id: str) -> Mapping[str, float]:
        run = self.memory.get_run(run_id)
        assert run is not None and run.usage is not None
        return run.usage


def test_a_run_records_each_invocation_on_its_last_write() -> None:
    w = World()
    run = w.engine.start("nap")
    assert w.usage(run.run_id) == {"api": 1, "ddb": 1, "wcu": 3}
    assert w.invoke(run.run_id, timer=False, ms=120, units=7) == "suspended"
    w.clock.advance(timedelta(hours=1, seconds=1))
    assert w.invoke(run.run_id, timer=True, ms=80, units=6) == "succeeded"
    # by hand: the start (3 units, 1 request, 1 API request); the first invocation's
    # metered 7 units and 2 requests, plus its suspension (a status, WAITING: 4 units, 1
    # request); the timer's invocation: 6 units, 2 requests, plus the final write
    # (a status: 4 units, 1 request); 0.5 read units each; 200 ms at 0.5 GB
    assert w.usage(run.run_id) == {
        "api": 1,
        "ddb": 1 + 3 + 3,
        "wcu": 3 + 7 + 4 + 6 + 4,
        "rcu": 1.0,
        "inv": 2,
        "ms": 200,
        "gbs": 0.1,
        "timers": 1,
    }
    prices = Prices.of("us-east-1")
    assert prices.dollars(w.usage(run.run_id)) == pytest.approx(
        24 * 0.625e-6 + 1 * 0.125e-6 + 2 * 0.20e-6 + 0.1 * 0.0000133334 + 1e-6 + 3.5e-6
    )


def _claimed(ledger: UsageLedger, run_id: str) -> RunGuard:
    """``run_id`` claimed by "me" through ``ledger``: the guard of its writes."""
    claim = ledger.claim(
        run_id,
        "me",
        now="2030-01-01T00:00:00.000Z",
        lease_until="2030-01-01T00:05:00.000Z",
        stale_before="2030-01-01T00:00:00.000Z",
    )
    assert claim is not None
    return RunGuard(fence=claim.run.fence, owner="me")


def test_a_refused_last_write_records_nothing_and_the_next_counts_once() -> None:
    w = World()
    run = w.engine.start("nap")
    guard = _claimed(w.ledger, run.run_id)
    release = {"lease_owner": None, "lease_until": None}
    with w.meter.invocation(memory_mb=1024, timer=False):
        w.meter.add("wcu", 2)
        w.ticks.now += 0.05
        with pytest.raises(ConditionFailed):
            w.ledger.update_run(run.run_id, RunGuard(fence=99, owner="me"), release)
        assert w.usage(run.run_id)["wcu"] == 3  # the start's, nothing more
        w.meter.add("wcu", 1)  # the refused write was billed too
        w.ledger.update_run(run.run_id, guard, release)
    assert w.usage(run.run_id)["wcu"] == 3 + 2 + 1 + 5
    assert w.usage(run.run_id)["inv"] == 1


def test_writes_that_do_not_end_an_invocation_carry_nothing() -> None:
    w = World()
    run = w.engine.start("nap")
    guard = _claimed(w.ledger, run.run_id)
    with w.meter.invocation(memory_mb=512, timer=False):
        w.meter.add("wcu", 9)
        w.ledger.update_run(run.run_id, guard, {"lease_until": "2030-01-01T00:09:00.000Z"})
    assert w.usage(run.run_id)["wcu"] == 3  # a lease renewal
    w.ledger.update_run(run.run_id, guard, {"lease_owner": None})  # no invocation open
    assert w.usage(run.run_id)["wcu"] == 3


def test_a_write_that_records_its_units_counts_the_units_its_size_makes() -> None:
    """The figure is part of the item: a bigger figure may cross a unit boundary."""
    seen: list[float] = []

    def by_size(before: RunRecord, changes: Mapping[str, Any]) -> float:
        own = float(changes["usage"].get("wcu", 0))
        seen.append(own)
        return 1.0 if own < 1 else 2.0  # recording 1 unit makes it a 2-unit write

    meter = Meter(units_of_update=by_size)
    memory = MemoryLedger()
    ledger = UsageLedger(memory, meter)
    run = Engine(_app(), memory, MemoryInvoker(), MemoryEffectStore()).start("nap")
    guard = _claimed(ledger, run.run_id)
    with meter.invocation(memory_mb=128, timer=False):
        ledger.update_run(run.run_id, guard, {"lease_owner": None})
    stored = memory.get_run(run.run_id)
    assert stored is not None and stored.usage is not None
    assert stored.usage["wcu"] == 2 and seen == [0.0, 1.0, 2.0]


def test_a_meter_counts_only_inside_an_invocation() -> None:
    meter = Meter(clock=Ticks())
    meter.add("wcu", 5)
    assert meter.so_far() == {}
    with meter.invocation(memory_mb=2048, timer=True):
        meter.add("wcu", 1)
        assert meter.so_far() == {
            "wcu": 1,
            "inv": 1,
            "ms": 1,  # at least a millisecond, as Lambda bills
            "gbs": 0.002,
            "timers": 1,
        }
    assert meter.so_far() == {}


# --- prices ----------------------------------------------------------------------------


def test_prices_by_region_with_overrides() -> None:
    assert Prices.of("us-west-2").region == "us-west-2"
    unknown = Prices.of("eu-west-1")
    assert unknown.region == "us-east-1"  # priced as us-east-1, and says so
    own = Prices.of("us-east-1", {"wcu": 1e-6})
    assert own.dollars({"wcu": 10, "rcu": 8}) == pytest.approx(10e-6 + 8 * 0.125e-6)
    with pytest.raises(ValueError, match="unknown keys \\['WCU'\\]"):
        Prices.of(None, {"WCU": 1.0})
    assert added({"a": 1.0}, {"a": 0.1, "b": 0}) == {"a": 1.1}


def _settings(**env: str) -> Settings:
    return Settings.from_env(
        {"DURABLE_APP": "a:app", "DURABLE_LEDGER_TABLE": "led", "DURABLE_IDEMPOTENCY_TABLE": "idm"}
        | env
    )


def test_price_settings_name_the_variable_and_the_fix() -> None:
    prices = _settings(
        DURABLE_PRICE_REGION="us-east-2", DURABLE_PRICES='{"api": 1e-6}'
    ).price_table()
    assert prices.region == "us-east-2" and prices.per_unit["api"] == 1e-6
    for bad, said in [
        ("{oops", "not JSON"),
        ('{"write_units": 1}', "unknown keys"),
        ('{"wcu": -1}', "numbers >= 0"),
        ("[1]", "a JSON object"),
    ]:
        with pytest.raises(InvalidInput, match=said) as caught:
            _settings(DURABLE_PRICES=bad)
        assert "DURABLE_PRICES" in str(caught.value)


# --- showing it ------------------------------------------------------------------------


def test_cost_reads_at_every_size() -> None:
    assert [usd(x) for x in (0.0000312, 0.0425, 12345.678)] == [
        "$0.0000312",
        "$0.0425",
        "$12,345.68",
    ]
    line = cost_line(
        {
            "cost": {"usd": 0.0000312, "prices_of": "us-east-1"},
            "usage": {
                "wcu": 34,
                "rcu": 2,
                "ddb": 19,
                "inv": 2,
                "ms": 1234,
                "timers": 1,
            },
        }
    )
    assert line == (
        "$0.0000312 at us-east-1 list prices (34 WCU, 2 RCU, 19 requests, "
        "2 invocations (1,234 ms), 1 timers)"
    )


def test_since_takes_durations_and_dates() -> None:
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    assert since_cutoff("7d", now) == now - timedelta(days=7)
    assert since_cutoff("24h", now) == now - timedelta(hours=24)
    assert since_cutoff("30m", now) == now - timedelta(minutes=30)
    assert since_cutoff("2026-11-01", now) == datetime(2026, 11, 1, tzinfo=UTC)


# --- DynamoDB's rule for write units ------------------------------------------------------


LIST = Index("list-index", ("list_pk", "list_sk"), frozenset({"status", "updated_at"}))
DUE = Index("due-index", ("due_shard", "due_at"), frozenset())


def _item(**attrs: str) -> dict[str, dict[str, Any]]:
    return {"pk": {"S": "RUN#r"}, "sk": {"S": "RUN"}, **{k: {"S": v} for k, v in attrs.items()}}


def test_write_units_follow_dynamodbs_rule() -> None:
    base = _item(list_pk="WF#w", list_sk="RUNNING#1", status="RUNNING", updated_at="1", x="a")
    # a new item: the table and every index it enters
    assert write_units(None, base, (LIST, DUE)) == 1 + 1
    # nothing an index holds changed: the table alone
    assert write_units(base, {**base, "x": {"S": "b"}}, (LIST, DUE)) == 1
    # a projected attribute changed, the key did not: one index write
    moved = {**base, "updated_at": {"S": "2"}}
    assert write_units(base, moved, (LIST,)) == 2
    # the key changed: a delete and a put
    rekeyed = {**moved, "list_sk": {"S": "WAITING#2"}}
    assert write_units(base, rekeyed, (LIST,)) == 3
    # entering and leaving a sparse index: one write each
    due = {**base, "due_shard": {"S": "1"}, "due_at": {"S": "t"}}
    assert write_units(base, due, (DUE,)) == 2 and write_units(due, base, (DUE,)) == 2
    # sizes: a started KB is a unit, for the larger of before and after
    big = {**base, "x": {"S": "a" * 3000}}
    assert item_size(big) > 2048 and write_units(base, big, ()) == 3
    assert write_units(big, base, ()) == 3


def test_continuing_as_new_bills_its_transaction_twice() -> None:
    """The run's update (4 units here) and the successor's put (3) in one transaction:
    DynamoDB bills a transactional write twice."""
    w = World()
    app = App()

    @app.step
    def one() -> int:
        return 1

    @app.workflow(name="again")
    def again(ctx: Context, n: int) -> int:
        one()
        if n:
            ctx.continue_as_new(n - 1)
        return n

    engine = Engine(app, w.ledger, MemoryInvoker(), MemoryEffectStore(), clock=w.clock)
    run = engine.start("again", 1)
    with w.meter.invocation(memory_mb=512, timer=False):
        w.meter.add("wcu", 2)
        engine.resume(run.run_id)
    assert w.usage(run.run_id)["wcu"] == 3 + 2 + 2 * (4 + 3)
    (successor,) = [r for r in w.memory._runs.values() if r.run_id != run.run_id]
    assert successor.usage is None  # its start is the transaction above


def test_figures_are_kept_to_a_millionth() -> None:
    """Sums of small floats would otherwise grow digits (bytes of the run item)."""
    assert added({}, {"wcu": 1.0000004}) == {"wcu": 1.0}
    assert added({"gbs": 0.1}, {"gbs": 0.2}) == {"gbs": 0.3}


def test_lambda_time_in_gb_seconds() -> None:
    ticks = Ticks()
    meter = Meter(clock=ticks)
    with meter.invocation(memory_mb=1024, timer=False):
        ticks.now += 1.0
        assert meter.so_far()["gbs"] == 1.0  # a second at 1 GB
    with meter.invocation(memory_mb=128, timer=False):
        ticks.now += 0.001
        assert meter.so_far()["gbs"] == 0.0001  # 0.000125, kept to 4 places


def test_the_memory_ledgers_writes_cost_no_units() -> None:
    """The default rule (the memory ledger): a start records its requests, no units;
    a last write with nothing metered before it still counts itself as a request."""
    meter = Meter(clock=Ticks())
    memory = MemoryLedger()
    ledger = UsageLedger(memory, meter)
    run = Engine(_app(), ledger, MemoryInvoker(), MemoryEffectStore()).start("nap")
    stored = memory.get_run(run.run_id)
    assert stored is not None and stored.usage == {"api": 1, "ddb": 1}
    guard = _claimed(ledger, run.run_id)
    with meter.invocation(memory_mb=512, timer=False):
        ledger.update_run(run.run_id, guard, {"lease_owner": None})
    stored = memory.get_run(run.run_id)
    assert stored is not None and stored.usage is not None
    assert stored.usage["ddb"] == 2 and "wcu" not in stored.usage


def test_claims_kept_for_the_bill_stay_bounded() -> None:
    """A container claims many runs: what it keeps of them (the usage each claim read)
    is bounded, the newest kept."""
    memory = MemoryLedger()
    ledger = UsageLedger(memory, Meter())
    engine = Engine(_app(), memory, MemoryInvoker(), MemoryEffectStore())
    runs = [engine.start("nap", idempotency_key=f"k{i}").run_id for i in range(18)]
    for run_id in runs[:16]:
        _claimed(ledger, run_id)
    _claimed(ledger, runs[0])  # claimed again: the newest now
    _claimed(ledger, runs[16])
    assert len(ledger._claimed) == 16
    assert runs[1] not in ledger._claimed and runs[0] in ledger._claimed
    _claimed(ledger, runs[17])
    assert runs[2] not in ledger._claimed and len(ledger._claimed) == 16


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ({"S": "héllo"}, 6),  # UTF-8 bytes
        ({"N": "12345"}, 4),  # (significant digits + 1) // 2 + 1
        ({"N": "-1.50"}, 2),  # the sign, the point and trailing zeros do not count
        ({"N": "100"}, 2),
        ({"N": "0"}, 2),
        ({"B": b"\x00\x01\x02"}, 3),
        ({"BOOL": True}, 1),
        ({"NULL": True}, 1),
        ({"L": [{"S": "ab"}, {"N": "7"}]}, 3 + (2 + 1) + (2 + 1)),
        ({"M": {"k": {"S": "v"}}}, 3 + (1 + 1 + 1)),
        ({"SS": ["ab", "c"]}, 3),
        ({"NS": ["12", "3"]}, 2 + 2),
        ({"BS": [b"ab", b"c"]}, 3),
        ({"XX": "future type"}, 11),  # a type this rule does not know: its text's length
    ],
)
def test_item_sizes_follow_dynamodbs_rule(value: dict[str, Any], size: int) -> None:
    assert item_size({"attr": value}) == len("attr") + size


def test_the_edges_of_the_write_unit_rule() -> None:
    assert write_units(None, None, ()) == 0  # nothing written, nothing billed
    assert write_units(None, {}, ()) == 1  # a write is at least one unit
    everything = Index("all-index", ("list_pk",), None)  # ProjectionType ALL
    item = _item(list_pk="WF#w", x="a" * 1500)
    assert everything.entry(item) == item
    assert write_units(None, item, (everything,)) == 2 + 2
