"""No hot partition (issue 48, item 5): the keys one workflow's runs, or one failure
storm, write to spread over their index's shards, so none takes more than its share.

DynamoDB serves about 1,000 write units a second per partition, and cannot split a
partition for heat when its sort key grows with time (every index here is such). The
rule is pure (``durable.core.leases``, ``durable.core.ids``): the keys of 1,000 runs of
one workflow started in one second, and of 1,000 runs failing at once, are counted per
partition, priced at the units a run writes there (docs/performance.md, "Capacity")."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime

from durable.core.ids import DUE_SHARDS, _base32, due_shard, time_token
from durable.core.leases import (
    ATTENTION_SHARDS,
    LISTING_SHARDS,
    attention_partition,
    listing_partition,
    listing_partitions,
)

PARTITION_WCU = 1_000  # a partition's write units a second
RUNS = 1_000
# Units a 10-step run with a sleep writes (python -m benchmarks.write_units): the
# listing index's create and end (a put, then a delete and a put); an attention entry's put.
LISTING_UNITS, ATTENTION_UNITS, DUE_UNITS = 3, 1, 4


def _run_ids(count: int, seed: int) -> list[str]:
    """``count`` run ids of one millisecond (a ULID's time, then its random part)."""
    rng = random.Random(seed)
    stamp = time_token(datetime(2026, 1, 1, tzinfo=UTC))
    return [stamp + _base32(rng.getrandbits(80), 16) for _ in range(count)]


def _heaviest(keys: list[str]) -> tuple[int, int]:
    counts = Counter(keys)
    return max(counts.values()), len(counts)


def test_one_workflow_at_a_thousand_runs_a_second_heats_no_listing_partition() -> None:
    for seed in range(5):
        ids = _run_ids(RUNS, seed)
        keys = [listing_partition("onboarding", run_id) for run_id in ids]
        heaviest, used = _heaviest(keys)
        assert used == LISTING_SHARDS and set(keys) == set(listing_partitions("onboarding"))
        share = RUNS / LISTING_SHARDS
        assert heaviest <= 1.25 * share  # no shard takes much more than its share
        assert heaviest * LISTING_UNITS <= PARTITION_WCU / 2  # half a partition at most


def test_a_thousand_runs_failing_at_once_heat_no_attention_partition() -> None:
    for seed in range(5):
        keys = [attention_partition(run_id) for run_id in _run_ids(RUNS, 100 + seed)]
        heaviest, used = _heaviest(keys)
        assert used == ATTENTION_SHARDS
        assert heaviest <= 1.25 * RUNS / ATTENTION_SHARDS
        assert heaviest * ATTENTION_UNITS <= PARTITION_WCU / 4


def test_one_workflow_at_a_thousand_runs_a_second_heats_no_due_partition() -> None:
    """The due index is shared by every workflow, sharded by ``DURABLE_DUE_SHARDS`` (the
    template's and the default: ``DUE_SHARDS``)."""
    for seed in range(5):
        keys = [due_shard(run_id, DUE_SHARDS) for run_id in _run_ids(RUNS, 200 + seed)]
        heaviest, used = _heaviest(keys)
        assert used == DUE_SHARDS
        assert heaviest <= 1.25 * RUNS / DUE_SHARDS
        assert heaviest * DUE_UNITS <= 0.75 * PARTITION_WCU


def test_the_template_shards_the_due_index_as_the_model_says() -> None:
    from durable.adapters.schema import library_template
    from tests.handlers.test_template import TEMPLATE

    for template in (TEMPLATE, library_template()):
        env = template["Globals"]["Function"]["Environment"]["Variables"]
        assert env["DURABLE_DUE_SHARDS"] == str(DUE_SHARDS)
