"""The metamorphic oracle across ledgers (integration tier): a sample of generated
programs gives on DynamoDB Local, with the input item's layout on and off, the outcome
it gives on the memory ledger.

    SIM_METAMORPHIC_DYNAMO_PROGRAMS=N   programs in the sample (default 6)
    SIM_METAMORPHIC_SEED=N              that program only
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.memory import MemoryLedger
from tests.conftest import MakeTables
from tests.simulation.metamorphic import ONE_INVOCATION, PARKED, check_program

pytestmark = pytest.mark.integration

SHAPES = (
    replace(ONE_INVOCATION, name="memory, one invocation"),
    replace(ONE_INVOCATION, name="DynamoDB, one invocation, inputs apart"),
    replace(PARKED, name="DynamoDB, parked, inputs inline"),
    replace(PARKED, name="DynamoDB, parked, inputs apart, offloaded", offload_bytes=8),
)


def sample() -> list[int]:
    seed = os.environ.get("SIM_METAMORPHIC_SEED")
    if seed:
        return [int(seed)]
    count = int(os.environ.get("SIM_METAMORPHIC_DYNAMO_PROGRAMS", "6"))
    return [1 + 37 * i for i in range(count)]


def test_memory_and_dynamodb_give_one_outcome(
    ddb_local_client: Any, make_tables: MakeTables
) -> None:
    """GIVEN a sample of generated programs
    WHEN each runs on the memory ledger, and on DynamoDB Local in one invocation with
    large inputs in an item of their own, parked with inputs in the run item, and parked
    with every value offloaded
    THEN every run gives the memory ledger's outcome"""

    def ledgers() -> Iterator[Any]:
        yield MemoryLedger()
        for inputs_apart in (True, False, True):
            table, _ = make_tables(ddb_local_client)
            yield DynamoLedger(ddb_local_client, table, inputs_apart=inputs_apart)

    failed = [check_program(seed, SHAPES, ledgers()) for seed in sample()]
    reports = [verdict.report() for verdict in failed if not verdict.ok]
    assert not reports, "\n\n".join(reports)
