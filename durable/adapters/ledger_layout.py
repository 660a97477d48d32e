"""The ledger table's global secondary indexes, as Python data for deployed code.

``template.yaml`` declares the table and is what CloudFormation creates; tests and
``durable dev`` create their tables from it. Code that runs in a Lambda function must not
read it: the template is not in the package, and a YAML reader would be (PyYAML, about
160 ms of cold start). The usage meter prices index writes
(``durable.adapters.dynamodb_units``), so it needs the indexes' keys and projections: they
are declared here, in the template's own shape, and ``tests/handlers/test_template.py``
holds this equal to the indexes of this repo's template and of the one ``durable init``
writes. Change both together.
"""

from __future__ import annotations

from typing import Any

from durable.core.leases import LISTED_FIELDS


def _index(name: str, hash_key: str, range_key: str, projection: dict[str, Any]) -> dict[str, Any]:
    return {
        "IndexName": name,
        "KeySchema": [
            {"AttributeName": hash_key, "KeyType": "HASH"},
            {"AttributeName": range_key, "KeyType": "RANGE"},
        ],
        "Projection": projection,
    }


# What a listing shows (``durable.core.leases.LISTED_FIELDS``), not the input or output.
_LISTED = {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(LISTED_FIELDS)}

LEDGER_INDEXES: tuple[dict[str, Any], ...] = (
    # Sparse: only runs that need a future trigger carry due_shard/due_at.
    _index("due-index", "due_shard", "due_at", {"ProjectionType": "KEYS_ONLY"}),
    # list_runs without scans: WF#<shard>#<workflow> / open#<created_at>#<run id>, then
    # done#<ended at>#<run id> (durable.core.leases.listing_partition, listing_key). Keys
    # only: a transition that changes no key writes nothing here.
    _index("listing-index", "listing_pk", "list_sk", {"ProjectionType": "KEYS_ONLY"}),
    # The first listing index (WF#<workflow>, the listed fields projected): nothing new is
    # written to it; it stays until a table's runs are moved to listing-index
    # (durable.adapters.listing_migration, docs/operations.md), and goes in the next release.
    _index("list-index", "list_pk", "list_sk", _LISTED),
    # Sparse: runs an operator must look at, ATTENTION#<shard> / updated_at.
    _index("attention-index", "attention_pk", "updated_at", _LISTED),
)
