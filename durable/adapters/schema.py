"""Create the ledger and idempotency tables from ``template.yaml``.

The template is the schema's single source of truth: tests and the local runtime read
the ``AWS::DynamoDB::Table`` resources from it, so deploy and test cannot drift. A project
reads its own; without one, the library's stack template (the one ``durable init`` writes)
serves.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from durable.adapters.template_conditions import (
    choose,
    decide,
    parameter_values,
    with_parameters,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

LEDGER = "LedgerTable"
IDEMPOTENCY = "IdempotencyTable"


class _CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation short-form tags (!Ref, !Sub, ...) as plain values."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return {suffix: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {suffix: loader.construct_sequence(node, deep=True)}
    return {suffix: loader.construct_mapping(node, deep=True)}  # type: ignore[arg-type]


_CfnLoader.add_multi_constructor("!", _tag)


def find_template(start: Path | None = None) -> Path | None:
    """The project's ``template.yaml``: above ``start``, else above this package (a source
    checkout), else above the working directory (a project using the installed library);
    None when there is none (the library's own stack template serves then)."""
    starts = [start] if start is not None else [Path(__file__), Path.cwd()]
    for here in (s.resolve() for s in starts):
        for folder in [here, *here.parents]:
            candidate = folder / "template.yaml"
            if candidate.is_file():
                return candidate
    return None


def library_template() -> dict[str, Any]:
    """The stack template ``durable init`` writes: the tables every project's stack declares."""
    from durable.scaffold import stack_template

    text = stack_template({"app_reference": "app:app", "code_comment": "", "new_layouts": "false"})
    data: dict[str, Any] = yaml.load(text, Loader=_CfnLoader)
    return data


def load_template(path: Path | None = None) -> dict[str, Any]:
    found = path or find_template()
    if found is None:
        return library_template()
    with open(found, encoding="utf-8") as fh:
        data: dict[str, Any] = yaml.load(fh, Loader=_CfnLoader)
    return data


def table_definitions(
    path: Path | None = None, parameters: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """Logical id -> the table's CloudFormation properties, with each ``!If`` decided at the
    parameters' defaults (or ``parameters``): the billing mode is a parameter
    (``TableBillingMode``), and a local table is what a deploy without overrides gets."""
    template = load_template(path)
    values = parameter_values(template, parameters)
    conditions = decide(template, values)
    return {
        name: with_parameters(choose(res["Properties"], conditions), template, values)
        for name, res in template["Resources"].items()
        if res.get("Type") == "AWS::DynamoDB::Table"
    }


def create_table_request(props: dict[str, Any], table_name: str) -> dict[str, Any]:
    """Translate CloudFormation table properties into a ``CreateTable`` request."""
    request: dict[str, Any] = {
        "TableName": table_name,
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
    }
    if props.get("ProvisionedThroughput"):  # TableBillingMode=PROVISIONED
        request["ProvisionedThroughput"] = props["ProvisionedThroughput"]
    if props.get("GlobalSecondaryIndexes"):
        request["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
    stream = props.get("StreamSpecification")
    if stream:  # the ledger's stream feeds the purge of expired runs
        request["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": stream["StreamViewType"],
        }
    return request


def create_tables(
    client: DynamoDBClient,
    names: dict[str, str],
    *,
    template: Path | None = None,
    parameters: Mapping[str, str] | None = None,
    exist_ok: bool = True,
) -> None:
    """Create each table in ``names`` (logical id -> physical name) and enable its TTL;
    ``parameters`` override the template's defaults (``{"TableBillingMode": ...}``)."""
    definitions = table_definitions(template, parameters)
    for logical, physical in names.items():
        props = definitions[logical]
        try:
            client.create_table(**create_table_request(props, physical))
        except client.exceptions.ResourceInUseException:
            if not exist_ok:
                raise
            continue
        client.get_waiter("table_exists").wait(
            TableName=physical, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
        ttl = props.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            client.update_time_to_live(
                TableName=physical,
                TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
            )
