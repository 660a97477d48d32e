"""Write units a whole run costs, by table and index (issue 15, target 1).

The run: ten trivial steps with a one-hour ``ctx.sleep`` between the fifth and the
sixth, driven as on AWS: the start, the invocation that runs five steps and suspends,
the timer's invocation that runs the other five and finishes. Every request asks
DynamoDB Local for ``ReturnConsumedCapacity=INDEXES``, and the units are added up per
table and per index, with the requests by operation. Two inputs: a tiny one and 4 KB
(an input is stored once on the run item; what an index projects is copied on every
write of that item).

    python -m benchmarks.write_units

Targets: <= 22 WCU (tiny input; issue 48's, after issue 15's 20 was argued to a floor of
25 unit by unit) and <= 24 WCU (4 KB input, issue 15's) for the whole run.

Then the purge (issue 48): the run's item deleted as TTL deletes it (no units: TTL's
deletes are free, and they are made here on another client), and the purge the table's
stream starts (``Engine.purge_expired``) counted. Once for the workflow as above, and
once for the same workflow declaring ``max_lifetime``: its items carry their own TTL
(``durable.core.lifetime``), so the purge has nothing to delete (target 0 units).
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from benchmarks.common import (
    CONFIG,
    Figure,
    benchmark_step,
    dynamo_client,
    dynamo_main,
    fresh_tables,
    make_engine,
    say,
)
from durable import App, Context
from durable.core.clock import FakeClock

TINY_TARGET = 22.0  # issue 48
LARGE_TARGET = 24.0
READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})
PURGE_TARGET = 0.0
PLANNED = [
    ("WCU per run, 10 steps + sleep, tiny input", f"<= {TINY_TARGET:.0f}"),
    ("WCU per run, 10 steps + sleep, 4 KB input", f"<= {LARGE_TARGET:.0f}"),
    ("WCU at purge, 10 steps + sleep, no declared lifetime", "(report)"),
    ("WCU at purge, 10 steps + sleep, declared max_lifetime", f"= {PURGE_TARGET:.0f}"),
]
# The lifetime the second workflow declares.
LIFETIME = timedelta(days=7)


def build_app(lifetime: timedelta | None = None, name: str = "ten_and_sleep") -> App:
    app = App()
    step = app.step(benchmark_step)

    @app.workflow(name=name, max_lifetime=lifetime)
    def ten_and_sleep(ctx: Context, payload: Any) -> int:
        total = 0
        for i in range(5):
            total += step(i)
        ctx.sleep(timedelta(hours=1))
        for i in range(5, 10):
            total += step(i)
        return total

    return app


class UnitCounter:
    """Adds up consumed write and read units per table/index, and requests by operation."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.writes: dict[str, float] = {}
        self.reads: dict[str, float] = {}
        self.requests: Counter[str] = Counter()
        events = client.meta.events
        events.register("before-parameter-build.dynamodb", self._ask)
        events.register("after-call.dynamodb", self._add)

    def _ask(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        members = getattr(model.input_shape, "members", {}) if model.input_shape else {}
        if "ReturnConsumedCapacity" in members:
            params["ReturnConsumedCapacity"] = "INDEXES"

    def _add(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        operation = str(model.name)
        self.requests[operation] += 1
        reading = operation in READS
        consumed = parsed.get("ConsumedCapacity")
        for entry in consumed if isinstance(consumed, list) else [consumed] if consumed else []:
            self._split("table", entry.get("Table") or {}, reading)
            for name, units in (entry.get("GlobalSecondaryIndexes") or {}).items():
                self._split(name, units, reading)

    def _split(self, where: str, units: dict[str, Any], reading: bool) -> None:
        """A transaction reports read units for its condition checks apart; otherwise an
        answer gives one total, of the request's kind."""
        write = float(units.get("WriteCapacityUnits", 0.0))
        read = float(units.get("ReadCapacityUnits", 0.0))
        if not write and not read:
            total = float(units.get("CapacityUnits", 0.0))
            read, write = (total, 0.0) if reading else (0.0, total)
        self.writes[where] = self.writes.get(where, 0.0) + write
        self.reads[where] = self.reads.get(where, 0.0) + read


def one_run(
    endpoint: str,
    payload: Any,
    *,
    billed: bool = False,
    lifetime: timedelta | None = None,
    purge: UnitCounter | None = None,
) -> UnitCounter:
    """The run on a fresh table; ``billed``: composed as the worker is, the run's usage
    recorded by each invocation's last write (``durable.core.usage``), to see what keeping
    the bill costs in units. ``lifetime``: the workflow declares it. ``purge``: a counter
    on its own client, which then counts the purge after the run item expired."""
    from durable.adapters import dynamodb_units
    from durable.adapters.dynamodb import DynamoLedger
    from durable.core.usage import Meter, UsageLedger

    client = dynamo_client(endpoint)
    table = fresh_tables(client)
    clock = FakeClock()
    meter = Meter()
    ledger: Any = DynamoLedger(client, table)
    if billed:
        dynamodb_units.watch(client, meter)
        units = dynamodb_units.RunWriteUnits(ledger)
        units.install(meter)
        ledger = UsageLedger(ledger, meter)
    engine, _ = make_engine(build_app(lifetime), ledger, clock=clock)
    counter = UnitCounter(client)
    run = engine.start("ten_and_sleep", payload)
    with meter.invocation(memory_mb=512, timer=False):
        first = engine.resume(run.run_id)
    if first.result != "suspended":
        raise RuntimeError(f"expected the run to sleep, got {first.result}")
    clock.advance(timedelta(hours=1, seconds=1))
    with meter.invocation(memory_mb=512, timer=True):
        last = engine.resume(run.run_id, reason="timer")
    if last.result != "succeeded":
        raise RuntimeError(f"expected the run to finish, got {last.result}")
    if purge is not None:
        expire_and_purge(endpoint, table, run.run_id, clock, purge, lifetime)
    return counter


def expire_and_purge(
    endpoint: str,
    table: str,
    run_id: str,
    clock: FakeClock,
    counter: UnitCounter,
    lifetime: timedelta | None,
) -> None:
    """After the retention: TTL deletes the run item (uncounted: free), then the purge the
    stream starts runs with its own client, counted by ``counter``."""
    from durable.adapters.dynamodb import DynamoLedger

    clock.advance(CONFIG.retention + timedelta(minutes=1))
    ttl = dynamo_client(endpoint)
    ttl.delete_item(TableName=table, Key={"pk": {"S": f"RUN#{run_id}"}, "sk": {"S": "RUN"}})
    purger, _ = make_engine(build_app(lifetime), DynamoLedger(counter.client, table), clock=clock)
    purger.purge_expired(run_id)


def _describe(counter: UnitCounter) -> str:
    where = ", ".join(f"{k} {v:g}" for k, v in sorted(counter.writes.items()))
    ops = ", ".join(f"{k} {v}" for k, v in sorted(counter.requests.items()))
    reads = sum(counter.reads.values())
    return f"{where}; {sum(counter.requests.values())} requests ({ops}); {reads:g} RCU"


def measure(endpoint: str) -> list[Figure]:
    say("write units: a 10-step run with a sleep, tiny and 4 KB inputs ...")
    figures = []
    for (label, target), payload in zip(
        PLANNED[:2], ({"user": "u1"}, {"user": "u1", "notes": "x" * 4096}), strict=True
    ):
        plain, billed = one_run(endpoint, payload), one_run(endpoint, payload, billed=True)
        figures.append(
            Figure.at_most(
                label,
                sum(plain.writes.values()),
                float(target.removeprefix("<= ")),
                ".0f",
                note=f"{_describe(plain)}; with the run's bill recorded: "
                f"{sum(billed.writes.values()):g} WCU",
            )
        )
    say("write units: the purge after the run item expired, without and with max_lifetime ...")
    for (label, _), lifetime in zip(PLANNED[2:], (None, LIFETIME), strict=True):
        purge = UnitCounter(dynamo_client(endpoint))
        run = one_run(endpoint, {"user": "u1"}, lifetime=lifetime, purge=purge)
        ran, purged = sum(run.writes.values()), sum(purge.writes.values())
        note = (
            f"the run {ran:g} WCU + the purge {purged:g} = {ran + purged:g} WCU; "
            f"purge: {_describe(purge)}"
        )
        if lifetime is None:
            figures.append(Figure.info(label, f"{purged:g}", note=note))
        else:
            figures.append(Figure.exactly(label, purged, PURGE_TARGET, "g", note=note))
    return figures


def main() -> None:
    dynamo_main("write units per run (DynamoDB Local)", measure, PLANNED)


if __name__ == "__main__":
    main()
