"""DynamoDB's request units, as DynamoDB counts them, for a run's bill (``durable.core.usage``).

Two parts. ``watch`` asks every request of a client for its consumed capacity
(``ReturnConsumedCapacity=TOTAL``, free) and adds it to the current invocation's meter.
``RunWriteUnits`` computes, before a write, what a write of the run item will cost: the
last write of each invocation carries the invocation's usage, so its own units must be
known before it is sent. The rule is DynamoDB's (on-demand, standard table class):

* the table: one unit per started KB of the larger of the item before and after;
* each global secondary index the item is in, before or after: a new entry is one put,
  a dropped entry one delete, a changed key a delete and a put, a change of projected
  attributes one update (of the larger entry), each one unit per started KB of the
  projected entry; an index the write does not touch costs nothing.

A test compares the rule with what DynamoDB Local reports for every write of whole runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from durable.adapters.dynamodb_items import (
    SAMPLE_INPUT_SK,
    input_apart,
    input_to_item,
    run_to_item,
)
from durable.adapters.ledger_layout import LEDGER_INDEXES
from durable.core.model import RunRecord
from durable.core.usage import READ_UNITS, REQUESTS, WRITE_UNITS, Meter

if TYPE_CHECKING:
    from durable.adapters.dynamodb import DynamoLedger

KB = 1024
TABLE_KEYS = ("pk", "sk")
_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})

Item = Mapping[str, Mapping[str, Any]]  # attribute name -> low-level AttributeValue


def item_size(item: Item) -> int:
    """An item's size by DynamoDB's rules: names plus values; numbers by significant
    digits; 3 bytes per list or map plus 1 per element."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: Mapping[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(str(raw).encode())
    if kind == "N":
        digits = str(raw).lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(raw) if isinstance(raw, bytes | bytearray) else len(str(raw))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(_value_size(v) + 1 for v in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_size(v) + 1 for k, v in raw.items())
    if kind in ("SS", "NS", "BS"):
        return sum(_value_size({kind[0]: v}) for v in raw)
    return len(str(raw))


def _units(size: int) -> float:
    return float(max(1, math.ceil(size / KB)))


@dataclass(frozen=True)
class Index:
    name: str
    keys: tuple[str, ...]
    projected: frozenset[str] | None  # None: ALL

    def entry(self, item: Item | None) -> dict[str, Any] | None:
        """The index's entry for ``item``, or None (sparse: a key attribute is missing)."""
        if item is None or any(key not in item for key in self.keys):
            return None
        if self.projected is None:
            return dict(item)
        wanted = {*TABLE_KEYS, *self.keys, *self.projected}
        return {name: value for name, value in item.items() if name in wanted}


def ledger_indexes() -> tuple[Index, ...]:
    """The ledger table's global secondary indexes, as the template declares them
    (``durable.adapters.ledger_layout``: deployed code reads no template)."""
    out = []
    for gsi in LEDGER_INDEXES:
        projection = gsi.get("Projection", {})
        kind = projection.get("ProjectionType", "ALL")
        projected = (
            None
            if kind == "ALL"
            else frozenset(projection.get("NonKeyAttributes", []) if kind == "INCLUDE" else [])
        )
        keys = tuple(str(k["AttributeName"]) for k in gsi["KeySchema"])
        out.append(Index(str(gsi["IndexName"]), keys, projected))
    return tuple(out)


def write_units(before: Item | None, after: Item | None, indexes: tuple[Index, ...]) -> float:
    """The write units of replacing ``before`` by ``after`` (None: absent) in the table."""
    sizes = [item_size(i) for i in (before, after) if i is not None]
    total = _units(max(sizes)) if sizes else 0.0
    for index in indexes:
        old, new = index.entry(before), index.entry(after)
        if old is None and new is None:
            continue
        if old is None or new is None:
            total += _units(item_size(new if old is None else old))  # type: ignore[arg-type]
        elif any(old[k] != new[k] for k in index.keys):
            total += _units(item_size(old)) + _units(item_size(new))
        elif old != new:
            total += _units(max(item_size(old), item_size(new)))
    return total


class RunWriteUnits:
    """The units of a write of a run item by ``DynamoLedger`` (``ledger``): a create, or an
    update by ``changes`` of the item as ``before`` holds it. ``install`` puts them on a
    ``Meter``."""

    def __init__(self, ledger: DynamoLedger, indexes: tuple[Index, ...] | None = None) -> None:
        self._ledger = ledger
        self._known = indexes

    def _apart(self, run: RunRecord) -> bool:
        """How a create of ``run`` stores its input: as the ledger's setting says."""
        return self._ledger.inputs_apart and input_apart(run)

    def _stored(self, run: RunRecord) -> dict[str, Any]:
        """``run``'s item as stored: with its input or without it, as it was created
        (``DynamoLedger.stored_apart``), whatever the setting says today."""
        apart = self._ledger.stored_apart(run)
        return run_to_item(run, self._ledger.shards, input_item=SAMPLE_INPUT_SK if apart else None)

    def install(self, meter: Meter) -> None:
        meter.units_of_create, meter.units_of_update = self.create, self.update
        meter.requests_of_create = self.requests_of_create
        meter.units_of_input = self.input

    @property
    def _indexes(self) -> tuple[Index, ...]:
        if self._known is None:  # built once, on first use
            self._known = ledger_indexes()
        return self._known

    def create(self, run: RunRecord) -> float:
        """The run item's put (a large input's own item is ``input``)."""
        named = SAMPLE_INPUT_SK if self._apart(run) else None
        item = run_to_item(run, self._ledger.shards, input_item=named)
        return write_units(None, item, self._indexes)

    def input(self, run: RunRecord) -> float:
        """The put of a large input's own item before the run item's (``input_apart``:
        in no index); nothing when the input stays inline."""
        if not self._apart(run):
            return 0.0
        return write_units(None, input_to_item(run, SAMPLE_INPUT_SK), ())

    def requests_of_create(self, run: RunRecord) -> float:
        """The requests of a create: the run item's put, after a large input's own."""
        return 2.0 if self._apart(run) else 1.0

    def update(self, before: RunRecord, changes: Mapping[str, Any]) -> float:
        old = self._stored(before)
        new = dict(old)
        for name, value in self._ledger.run_assignments(before.run_id, changes).items():
            if value is None:
                new.pop(name, None)
            else:
                new[name] = value
        return write_units(old, new, self._indexes)


def watch(client: Any, meter: Meter) -> None:
    """Add every request of ``client`` and the capacity it consumed to ``meter``."""

    def ask(params: dict[str, Any], model: Any, **_: Any) -> None:
        members = getattr(model.input_shape, "members", {}) if model.input_shape else {}
        if "ReturnConsumedCapacity" in members:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")

    def add(parsed: Mapping[str, Any], model: Any, **_: Any) -> None:
        meter.add(REQUESTS, 1.0)
        consumed = parsed.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        units = sum(float(entry.get("CapacityUnits", 0.0)) for entry in entries)
        meter.add(READ_UNITS if model.name in _READS else WRITE_UNITS, units)

    client.meta.events.register("before-parameter-build.dynamodb", ask)
    # after-call runs for an error answer too: its request counts; it reports no units
    client.meta.events.register("after-call.dynamodb", add)
