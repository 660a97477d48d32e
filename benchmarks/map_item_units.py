"""Write units of one distributed-map item, by ledger call and by table/index (issue 48).

A map of N items (each a child run of one trivial step, window 100) driven in-process on
DynamoDB Local, every invocation billed as a worker bills it (``durable.core.usage``).
Every request asks for ``ReturnConsumedCapacity=INDEXES``; the units are added up per
ledger call (``TimedLedger``'s method) and per table/index.

DynamoDB Local reports a ``TransactWriteItems`` as if it wrote one of its items (three
puts of small items: 2 units), where DynamoDB bills 2 units per KB of each item written
and each index entry it changes. So each transaction is also priced by that rule
(``durable.adapters.dynamodb_units.write_units`` of every item before and after it,
twice), and the item's figure is given both ways: what Local reports (what
``benchmarks.distributed_map`` sees) and what DynamoDB would bill.

    python -m benchmarks.map_item_units            # 100 items
    python -m benchmarks.map_item_units --items 200
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import Any

from benchmarks.common import (
    Figure,
    dynamo_client,
    dynamodb_endpoint,
    fresh_tables,
    make_engine,
    print_figures,
    say,
    warm_up,
)
from benchmarks.write_units import READS
from durable import App, Context
from durable.adapters.memory import MemoryInvoker
from durable.core.clock import FakeClock

TARGET = 8.0


def build_app() -> App:
    app = App()

    @app.step()
    def tick(i: int) -> int:
        return i

    @app.workflow(name="map-item")
    def map_item(ctx: Context, i: int) -> int:
        return tick(i)

    @app.workflow(name="map-all")
    def map_all(ctx: Context, items: int) -> int:
        return len(ctx.map(map_item, range(items), name="items", distributed=True).values())

    return app


class Units:
    """Units by (ledger call, request, table/index); transactions also by DynamoDB's rule."""

    def __init__(self, client: Any, reader: Any) -> None:
        from durable.adapters.dynamodb_units import ledger_indexes

        self.phase = "?"
        self.reported: dict[tuple[str, str, str], float] = defaultdict(float)
        self.ruled: dict[str, float] = defaultdict(float)  # transactions, by ledger call
        self.reads = 0.0
        self._reader, self._indexes = reader, ledger_indexes()
        self._before: list[tuple[str, str, dict[str, Any], Any]] = []
        events = client.meta.events
        events.register("before-parameter-build.dynamodb", self._ask)
        events.register("after-call.dynamodb", self._add)

    def _item(self, table: str, key: dict[str, Any]) -> Any:
        return self._reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")

    def _ask(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        members = getattr(model.input_shape, "members", {}) if model.input_shape else {}
        if "ReturnConsumedCapacity" in members:
            params["ReturnConsumedCapacity"] = "INDEXES"
        if model.name == "TransactWriteItems":
            self._before = []
            for action in params.get("TransactItems", []):
                ((kind, body),) = action.items()
                key = body.get("Key") or {k: body["Item"][k] for k in ("pk", "sk")}
                table = body["TableName"]
                self._before.append((kind, table, key, self._item(table, key)))

    def _add(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        from durable.adapters.dynamodb_units import write_units

        operation = str(model.name)
        consumed = parsed.get("ConsumedCapacity")
        for entry in consumed if isinstance(consumed, list) else [consumed] if consumed else []:
            places = [("table", entry.get("Table") or {})]
            places += list((entry.get("GlobalSecondaryIndexes") or {}).items())
            for where, units in places:
                total = float(units.get("CapacityUnits", 0.0))
                if operation in READS:
                    self.reads += total
                else:
                    self.reported[(self.phase, operation, where)] += total
        if operation == "TransactWriteItems":
            for kind, table, key, old in self._before:
                new = self._item(table, key)
                one = 1.0 if kind == "ConditionCheck" or old == new else None
                self.ruled[self.phase] += 2.0 * (one or write_units(old, new, self._indexes))
            self._before = []


def measure(endpoint: str, items: int) -> list[Figure]:
    from durable.adapters import dynamodb_units
    from durable.adapters.dynamodb import DynamoLedger
    from durable.core.usage import Meter, UsageLedger

    say(f"map item units: a map of {items} items, in-process on DynamoDB Local ...")
    client, reader = dynamo_client(endpoint), dynamo_client(endpoint)
    table = fresh_tables(client)
    meter = Meter()
    dynamodb_units.watch(client, meter)
    plain = DynamoLedger(client, table)
    dynamodb_units.RunWriteUnits(plain).install(meter)
    engine, timed = make_engine(build_app(), UsageLedger(plain, meter), clock=FakeClock())
    units = Units(client, reader)
    timed.on_call = lambda name: setattr(units, "phase", name)
    parent = engine.start("map-all", items)
    invoker = engine.invoker
    assert isinstance(invoker, MemoryInvoker)  # make_engine's: it only queues
    invoker.queue.clear()
    invoker.invoke(parent.run_id, "start")
    while (item := invoker.pop()) is not None:
        with meter.invocation(memory_mb=512, timer=False):
            engine.resume(item.run_id, reason=item.reason)
    ended = engine.get_run(parent.run_id)
    if ended is None or ended.status.value != "SUCCEEDED":
        raise RuntimeError("the map did not finish")
    local = sum(units.reported.values()) / items
    in_tx = sum(u for (_, op, _), u in units.reported.items() if op == "TransactWriteItems")
    ruled = (sum(units.reported.values()) - in_tx + sum(units.ruled.values())) / items
    calls: dict[str, float] = defaultdict(float)
    places: dict[str, float] = defaultdict(float)
    for (phase, op, where), u in units.reported.items():
        if op != "TransactWriteItems":
            calls[f"{phase} ({op})"] += u / items
            places[where] += u / items
    for phase, u in units.ruled.items():
        calls[f"{phase} (TransactWriteItems, by the rule)"] += u / items
    by_call = ", ".join(f"{k} {v:.2f}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1]))
    by_place = ", ".join(f"{k} {v:.2f}" for k, v in sorted(places.items()))
    return [
        Figure.at_most(
            "WCU per map item, as DynamoDB bills (transactions by the rule)",
            ruled,
            TARGET,
            ".2f",
            note=f"by ledger call: {by_call}; outside transactions by table/index: {by_place}",
        ),
        Figure.info(
            "WCU per map item, as DynamoDB Local reports",
            f"{local:.2f}",
            note=f"Local prices each transaction as one of its items; RCU per item "
            f"{units.reads / items:.2f}",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100)
    args = parser.parse_args()
    with dynamodb_endpoint() as endpoint:
        warm_up(endpoint)
        figures = measure(endpoint, args.items)
    print_figures("write units per distributed-map item (DynamoDB Local)", figures)


if __name__ == "__main__":
    main()
