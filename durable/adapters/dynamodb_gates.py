"""DynamoDB ledger, part four: flow-control gates (``durable.core.flow``), one item each.

A gate item (``GATE#<name>`` / ``GATE``) is written whole, conditional on the version
read (``attribute_not_exists`` for the first write): the decision is ``durable.core.flow``'s,
the same on every ledger, and two workers that decided from the same read cannot both
write. It has no index keys and no expiry: it stays small (the runs in it) and is reused
by every run of its workflow and key.
"""

from __future__ import annotations

from typing import Any

from durable.adapters.dynamodb_support import n, s, storage_error
from durable.adapters.dynamodb_table import TableBase
from durable.core.flow import GateState

GATE_SK = "GATE"


def gate_pk(name: str) -> str:
    return f"GATE#{name}"


def _strings(values: tuple[str, ...]) -> dict[str, Any]:
    return {"L": [s(v) for v in values]}


class GatesMixin(TableBase):
    def read_gate(self, name: str) -> GateState:
        try:
            response = self.client.get_item(
                TableName=self.table,
                Key={"pk": s(gate_pk(name)), "sk": s(GATE_SK)},
                ConsistentRead=True,
            )
        except Exception as e:
            storage_error(e, "reading the flow-control gate")
        item = response.get("Item")
        if not item:
            return GateState()

        def strings(attr: str) -> tuple[str, ...]:
            return tuple(v["S"] for v in item.get(attr, {}).get("L", []))

        return GateState(
            holders=strings("holders"),
            queue=strings("queue"),
            booked=strings("booked"),
            version=int(item["version"]["N"]),
        )

    def write_gate(self, name: str, state: GateState) -> bool:
        item = {
            "pk": s(gate_pk(name)),
            "sk": s(GATE_SK),
            "holders": _strings(state.holders),
            "queue": _strings(state.queue),
            "booked": _strings(state.booked),
            "version": n(state.version + 1),
        }
        if state.version == 0:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            condition = {
                "ConditionExpression": "#v = :seen",
                "ExpressionAttributeNames": {"#v": "version"},
                "ExpressionAttributeValues": {":seen": n(state.version)},
            }
        try:
            self.client.put_item(TableName=self.table, Item=item, **condition)
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        except Exception as e:
            storage_error(e, "writing the flow-control gate")
        return True
