"""DynamoDB's item size limit, enforced before a write so it fails as ``PayloadTooLarge``.

The estimate follows DynamoDB's sizing rules closely enough to stay on the safe side:
attribute names plus UTF-8 values, about 21 bytes per number, 3 bytes of overhead per
list or map element. Every ledger calls the same function, so the memory ledger refuses
exactly what DynamoDB would.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from durable.errors import PayloadTooLarge

DYNAMODB_ITEM_LIMIT = 400 * 1024
# Head room for key attributes and index projections the adapter adds.
ITEM_LIMIT = DYNAMODB_ITEM_LIMIT - 2 * 1024


def value_size(value: Any) -> int:
    if value is None:
        return 1
    if isinstance(value, bool):
        return 1
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, int | float):
        return 21
    if isinstance(value, dict):
        return 3 + sum(len(str(k).encode()) + value_size(v) + 1 for k, v in value.items())
    if isinstance(value, list | tuple):
        return 3 + sum(value_size(v) + 1 for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return value_size({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    return len(str(value).encode("utf-8"))


def record_size(record: Any) -> int:
    return value_size(record)


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _quick_upper_bound(record: Any) -> int | None:
    """A cheap upper bound for the common small record (keeps the hot path fast)."""
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        return None
    total = 16 * 1024  # generous allowance for names, numbers, attempts and refs
    for name in _field_names(type(record)):
        value = getattr(record, name)
        if value is None or isinstance(value, int):
            continue
        if isinstance(value, str):
            total += 4 * len(value)  # UTF-8 uses at most 4 bytes per character
        elif isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            total += 4 * 1024 * len(value)  # an attempt: short fields, errors cut at 500 chars
        elif isinstance(value, dict | list) and value:
            total += value_size(value)
    return total


def check_item_size(record: Any, what: str) -> None:
    bound = _quick_upper_bound(record)
    if bound is not None and bound <= ITEM_LIMIT:
        return
    size = record_size(record)
    if size > ITEM_LIMIT:
        raise PayloadTooLarge(what, size, ITEM_LIMIT)
