"""Extracting the storage stack from the SAM template (no server: unit tier)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.local.cfn_tables import expected_shape, storage_template
from tests.conftest import TEMPLATE

SAM = """\
Transform: AWS::Serverless-2016-10-31
Parameters:
  Stage: {Type: String, Default: dev, AllowedPattern: "[a-z0-9-]{1,20}"}
Resources:
  Worker:
    Type: AWS::Serverless::Function
    Properties: {Handler: handlers.worker.handler, Environment: {Variables: {T: !Ref Table}}}
  Table:
    Type: AWS::DynamoDB::Table
    DeletionPolicy: Retain
    Properties:
      TableName: !Sub "t-${Stage}-${AWS::Region}"
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      Tags: [{Key: literal, Value: !Sub "${!NotAVariable}"}]
  Group:
    Type: AWS::Scheduler::ScheduleGroup
    Properties: {Name: !Sub ["g-${Name}", {Name: !Ref Stage}]}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "template.yaml"
    path.write_text(text)
    return path


def test_only_tables_and_groups_are_kept_with_names_resolved(tmp_path: Path) -> None:
    body = storage_template(write(tmp_path, SAM), parameters={"Stage": "ci"}, region="eu-west-1")
    assert "Transform" not in body and set(body["Resources"]) == {"Table", "Group"}
    table = body["Resources"]["Table"]
    assert table["DeletionPolicy"] == "Retain"
    assert table["Properties"]["TableName"] == "t-ci-eu-west-1"
    assert table["Properties"]["Tags"] == [{"Key": "literal", "Value": "${NotAVariable}"}]
    assert body["Resources"]["Group"]["Properties"]["Name"] == "g-ci"
    assert body["Outputs"] == {
        "Table": {"Value": {"Ref": "Table"}},
        "Group": {"Value": {"Ref": "Group"}},
    }


def test_the_default_stage_applies_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, SAM)
    assert storage_template(path)["Resources"]["Group"]["Properties"]["Name"] == "g-dev"
    with pytest.raises(ValueError, match="does not match"):
        storage_template(path, parameters={"Stage": "Not Valid"})
    with pytest.raises(ValueError, match="unknown template parameters"):
        storage_template(path, parameters={"Stag": "x"})


def test_a_reference_to_another_resource_is_refused(tmp_path: Path) -> None:
    text = SAM.replace('!Sub "${!NotAVariable}"', "!GetAtt Worker.Arn")
    with pytest.raises(ValueError, match="GetAtt"):
        storage_template(write(tmp_path, text))
    text = SAM.replace('!Sub "${!NotAVariable}"', '!Sub "${Worker.Arn}"')
    with pytest.raises(ValueError, match=r"Worker\.Arn"):
        storage_template(write(tmp_path, text))


def test_the_project_template_yields_its_tables_with_ttl() -> None:
    body = storage_template(TEMPLATE, parameters={"Stage": "unit"})
    ledger = body["Resources"]["LedgerTable"]["Properties"]
    assert ledger["TableName"] == "durable-ledger-unit"
    shape = expected_shape(ledger)
    assert shape.ttl_attribute == "purge_at"
    assert shape.keys == (("pk", "HASH"), ("sk", "RANGE"))


def test_the_billing_mode_is_decided_at_the_parameter_given() -> None:
    """The tables' billing mode is a parameter (!If on TableBillingMode): the storage stack
    takes the branch CloudFormation would, on-demand by default."""
    for parameters, mode in (
        ({}, "PAY_PER_REQUEST"),
        ({"TableBillingMode": "PROVISIONED"}, "PROVISIONED"),
    ):
        body = storage_template(TEMPLATE, parameters={"Stage": "unit", **parameters})
        for table in body["Resources"].values():
            props = table["Properties"]
            if table["Type"] != "AWS::DynamoDB::Table":
                continue
            assert props["BillingMode"] == mode
            holders = [props, *props.get("GlobalSecondaryIndexes", [])]
            provisioned = [h.get("ProvisionedThroughput") for h in holders]
            if mode == "PROVISIONED":
                assert provisioned == [{"ReadCapacityUnits": "5", "WriteCapacityUnits": "5"}] * len(
                    holders
                )
            else:
                assert provisioned == [None] * len(holders)
