"""The tables' billing mode (issue 48): on-demand by default; provisioned with auto scaling
on the table and on every index; throttling alarms on each, in both modes.

What must be scaled and watched is derived from the templates' own tables and indexes, so
an index added later without its capacity, scaling or alarms fails here."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from durable.adapters.schema import library_template, load_template
from durable.adapters.template_conditions import choose, decide, parameter_values

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = {
    "template.yaml": load_template(ROOT / "template.yaml"),
    "durable init": library_template(),
}
MODES = ("Read", "Write")


def tables(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: res["Properties"]
        for name, res in template["Resources"].items()
        if res["Type"] == "AWS::DynamoDB::Table"
    }


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: res for name, res in template["Resources"].items() if res["Type"] == kind}


def capacity_holders(template: dict[str, Any]) -> set[tuple[str, str | None]]:
    """(table's logical id, index name or None) for the table and each of its indexes."""
    found: set[tuple[str, str | None]] = set()
    for name, props in tables(template).items():
        found.add((name, None))
        found |= {(name, index["IndexName"]) for index in props.get("GlobalSecondaryIndexes", [])}
    return found


def scaled(template: dict[str, Any]) -> set[tuple[str, str | None, str]]:
    """(table, index, Read|Write) each scalable target with a target-tracking policy on
    it covers, checked to follow the provisioned condition and the template's parameters."""
    policies = {
        res["Properties"]["ScalingTargetId"]["Ref"]: res
        for res in of_type(template, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
    }
    covered: set[tuple[str, str | None, str]] = set()
    for name, res in of_type(template, "AWS::ApplicationAutoScaling::ScalableTarget").items():
        props = res["Properties"]
        assert res["Condition"] == "ProvisionedTables", name
        assert props["ServiceNamespace"] == "dynamodb"
        assert "RoleARN" not in props, f"{name}: the service-linked role, no role of ours"
        # table/${LedgerTable} or table/${LedgerTable}/index/<name>
        parts = props["ResourceId"]["Sub"].split("/")
        table = parts[1].removeprefix("${").removesuffix("}")
        index = parts[3] if len(parts) == 4 else None
        service, kind, dimension = props["ScalableDimension"].split(":")
        assert (service, kind) == ("dynamodb", "index" if index else "table"), name
        mode = dimension.removesuffix("CapacityUnits")
        assert props["MinCapacity"] == {"Ref": f"Min{mode}Capacity"}
        assert props["MaxCapacity"] == {"Ref": f"Max{mode}Capacity"}
        policy = policies[name]
        assert policy["Condition"] == "ProvisionedTables"
        assert policy["Properties"]["PolicyType"] == "TargetTrackingScaling"
        tracking = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        assert tracking["TargetValue"] == {"Ref": "TargetUtilization"}
        metric = tracking["PredefinedMetricSpecification"]["PredefinedMetricType"]
        assert metric == f"DynamoDB{mode}CapacityUtilization", name
        covered.add((table, index, mode))
    return covered


def watched(template: dict[str, Any]) -> set[tuple[str, str | None, str]]:
    """(table, index, Read|Write) each DynamoDB throttling alarm watches."""
    covered: set[tuple[str, str | None, str]] = set()
    for name, res in of_type(template, "AWS::CloudWatch::Alarm").items():
        props = res["Properties"]
        if props["Namespace"] != "AWS/DynamoDB":
            continue
        assert "Condition" not in res, f"{name}: on-demand tables throttle too (a hot partition)"
        assert props["MetricName"] in {"ReadThrottleEvents", "WriteThrottleEvents"}, name
        dimensions = {d["Name"]: d["Value"] for d in props["Dimensions"]}
        assert set(dimensions) <= {"TableName", "GlobalSecondaryIndexName"}, name
        covered.add(
            (
                dimensions["TableName"]["Ref"],
                dimensions.get("GlobalSecondaryIndexName"),
                props["MetricName"].removesuffix("ThrottleEvents"),
            )
        )
    return covered


def everything(template: dict[str, Any]) -> set[tuple[str, str | None, str]]:
    return {(t, i, mode) for t, i in capacity_holders(template) for mode in MODES}


@pytest.mark.parametrize("which", sorted(TEMPLATES))
def test_the_tables_are_on_demand_unless_a_deploy_chooses_provisioned(which: str) -> None:
    template = TEMPLATES[which]
    parameter = template["Parameters"]["TableBillingMode"]
    assert parameter["Default"] == "PAY_PER_REQUEST"
    assert set(parameter["AllowedValues"]) == {"PAY_PER_REQUEST", "PROVISIONED"}
    for mode in ("PAY_PER_REQUEST", "PROVISIONED"):
        conditions = decide(template, parameter_values(template, {"TableBillingMode": mode}))
        for name, raw in tables(template).items():
            props = choose(raw, conditions)
            assert props["BillingMode"] == mode, name
            # a provisioned table needs capacity on itself and on each index; on-demand none
            holders = [props, *props.get("GlobalSecondaryIndexes", [])]
            assert all(("ProvisionedThroughput" in h) == (mode == "PROVISIONED") for h in holders)


@pytest.mark.parametrize("which", sorted(TEMPLATES))
def test_provisioned_scales_reads_and_writes_of_the_table_and_every_index(which: str) -> None:
    template = TEMPLATES[which]
    assert scaled(template) == everything(template)
    utilization = template["Parameters"]["TargetUtilization"]
    # DynamoDB's target tracking accepts 20 to 90 percent
    assert 20 <= utilization["MinValue"] <= utilization["Default"] <= utilization["MaxValue"] <= 90


@pytest.mark.parametrize("which", sorted(TEMPLATES))
def test_every_table_and_index_has_read_and_write_throttling_alarms(which: str) -> None:
    template = TEMPLATES[which]
    assert watched(template) == everything(template)


def test_an_index_added_without_its_scaling_and_alarms_is_caught() -> None:
    template = copy.deepcopy(TEMPLATES["template.yaml"])
    indexes = template["Resources"]["LedgerTable"]["Properties"]["GlobalSecondaryIndexes"]
    indexes.append({**copy.deepcopy(indexes[0]), "IndexName": "new-index"})
    missing = {("LedgerTable", "new-index", "Read"), ("LedgerTable", "new-index", "Write")}
    assert everything(template) - scaled(template) == missing
    assert everything(template) - watched(template) == missing
