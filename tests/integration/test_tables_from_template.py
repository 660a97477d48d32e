"""Tables created from ``template.yaml`` come out as the template says, on every server.

``create_tables`` (the path tests and the local runtime take) on moto in-process (unit tier),
moto's server and DynamoDB Local (integration), and LocalStack (localstack): same keys, key
attribute types, GSIs with their projections, TTL attribute and stream setting. The same
tables deployed through CloudFormation are checked in ``tests/localstack``.
"""

from __future__ import annotations

import uuid

import pytest

from durable.adapters.schema import IDEMPOTENCY, LEDGER, create_tables, table_definitions
from infra.local.cfn_tables import actual_shape, expected_shape
from tests.conftest import TEMPLATE, aws_client, server_endpoint


@pytest.mark.parametrize(
    "server",
    [
        "moto",
        pytest.param("moto-server", marks=pytest.mark.integration),
        pytest.param("dynamodb-local", marks=pytest.mark.integration),
        pytest.param("localstack", marks=pytest.mark.localstack),
    ],
)
def test_create_tables_builds_what_the_template_describes(
    server: str, request: pytest.FixtureRequest
) -> None:
    # GIVEN the template's table definitions and a server
    definitions = table_definitions(TEMPLATE)
    client = aws_client("dynamodb", server_endpoint(server, request))
    suffix = uuid.uuid4().hex[:8]
    names = {LEDGER: f"ledger-{suffix}", IDEMPOTENCY: f"idem-{suffix}"}
    # WHEN the tables are created from the template
    create_tables(client, names, template=TEMPLATE)
    # THEN each live table has the shape its definition describes
    for logical, physical in names.items():
        assert actual_shape(client, physical) == expected_shape(definitions[logical]), logical
    # AND the ledger has the three indexes the engine queries
    assert {i[0] for i in expected_shape(definitions[LEDGER]).indexes} == {
        "due-index",
        "listing-index",
        "list-index",
        "attention-index",
    }


@pytest.mark.parametrize(
    "server",
    [
        "moto",
        pytest.param("dynamodb-local", marks=pytest.mark.integration),
    ],
)
@pytest.mark.parametrize("mode", ["PAY_PER_REQUEST", "PROVISIONED"])
def test_either_billing_mode_creates_the_tables(
    server: str, mode: str, request: pytest.FixtureRequest
) -> None:
    """The billing mode is a template parameter (its !If decided at the value given, the
    default otherwise): CreateTable takes the tables either way, a provisioned table with
    its minimum capacity on itself and on every index."""
    # GIVEN a server
    client = aws_client("dynamodb", server_endpoint(server, request))
    suffix = uuid.uuid4().hex[:8]
    names = {LEDGER: f"ledger-{suffix}", IDEMPOTENCY: f"idem-{suffix}"}
    # WHEN the tables are created in that mode
    create_tables(client, names, template=TEMPLATE, parameters={"TableBillingMode": mode})
    # THEN each is billed so, and has the template's shape whichever the mode
    definitions = table_definitions(TEMPLATE)
    for logical, physical in names.items():
        table = client.describe_table(TableName=physical)["Table"]
        assert table.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED") == mode
        assert actual_shape(client, physical) == expected_shape(definitions[logical])
        if mode == "PROVISIONED":
            for holder in [table, *table.get("GlobalSecondaryIndexes", [])]:
                throughput = holder["ProvisionedThroughput"]
                assert (throughput["ReadCapacityUnits"], throughput["WriteCapacityUnits"]) == (5, 5)
