"""The template's tables and schedule groups as a plain CloudFormation stack, for local servers.

``template.yaml`` is a SAM template: its functions and API need the SAM transform and Lambda,
which no local server here can run (LocalStack needs Docker for Lambda; moto does not expand
SAM). The storage part is plain CloudFormation, though, and deploying *that* through a local
CloudFormation proves the template's table definitions are valid as CloudFormation and produce
the tables the code expects. So this module:

* extracts the ``AWS::DynamoDB::Table`` and ``AWS::Scheduler::ScheduleGroup`` resources;
* resolves ``!Ref``/``!Sub`` of the template's parameters (``Stage``) and the pseudo parameters,
  refusing any other intrinsic (a table that referenced a function could not deploy alone);
* deploys the result as a stack and waits for it, quoting the failure reasons if it fails;
* describes a table as a ``TableShape`` (keys, GSIs, TTL, stream) to compare with the template.

Command line, e.g. against LocalStack::

    python -m infra.local.cfn_tables --endpoint http://127.0.0.1:4566 --stage dev
    python -m infra.local.cfn_tables --print        # the generated template, nothing deployed
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durable.adapters.schema import find_template, load_template
from durable.adapters.template_conditions import choose, decide

__all__ = [
    "RESOURCE_TYPES",
    "CfnDeployError",
    "TableShape",
    "actual_shape",
    "delete_stack",
    "deploy_stack",
    "expected_shape",
    "storage_template",
]

RESOURCE_TYPES = ("AWS::DynamoDB::Table", "AWS::Scheduler::ScheduleGroup")
# Resource attributes plain CloudFormation accepts without further context; a Condition would
# need the template's Conditions section, which is not carried over.
_KEPT_ATTRIBUTES = ("DeletionPolicy", "UpdateReplacePolicy")
# Intrinsic function names as the schema loader returns short-form tags ({"Sub": ...}) and as
# long-form JSON spells them ({"Fn::Sub": ...}).
_INTRINSICS = {
    "Ref",
    "Condition",
    *(
        f"{prefix}{name}"
        for prefix in ("", "Fn::")
        for name in (
            "Sub",
            "GetAtt",
            "Join",
            "If",
            "Select",
            "Split",
            "ImportValue",
            "FindInMap",
            "Base64",
            "Cidr",
            "GetAZs",
            "Equals",
            "Not",
            "And",
            "Or",
            "Transform",
            "Length",
            "ToJsonString",
        )
    ),
}
_SUB_VAR = re.compile(r"\$\{([^}]*)\}")


class CfnDeployError(RuntimeError):
    """The stack did not reach CREATE_COMPLETE; the message quotes the failed resources."""


# --- template -------------------------------------------------------------------------------


def storage_template(
    template: Path | None = None,
    *,
    parameters: dict[str, str] | None = None,
    region: str = "us-east-1",
    account_id: str = "000000000000",
) -> dict[str, Any]:
    """A plain CloudFormation template with only the tables and schedule groups, resolved.

    ``parameters`` override the template's parameter defaults (``{"Stage": "test"}``). The
    result has one output per resource, its ``Ref`` (the physical name), keyed by logical id.
    """
    source = load_template(template or find_template())
    values = _parameter_values(source, parameters or {})
    values |= {
        "AWS::Region": region,
        "AWS::AccountId": account_id,
        "AWS::Partition": "aws",
        "AWS::URLSuffix": "amazonaws.com",
    }
    # The template's conditions at these values: a table's billing mode is a parameter
    # (TableBillingMode), so its properties hold !If, decided here as CloudFormation would.
    conditions = decide(source, values)
    resources: dict[str, Any] = {}
    for logical, resource in source.get("Resources", {}).items():
        if resource.get("Type") not in RESOURCE_TYPES:
            continue
        if "Condition" in resource or "DependsOn" in resource:
            raise ValueError(
                f"{logical}: Condition/DependsOn are not supported in the extracted storage "
                "stack; keep the tables and schedule groups unconditional and independent"
            )
        kept: dict[str, Any] = {"Type": resource["Type"]}
        if "Properties" in resource:
            chosen = choose(resource["Properties"], conditions)
            kept["Properties"] = _resolve(chosen, values, logical)
        for attribute in _KEPT_ATTRIBUTES:
            if attribute in resource:
                kept[attribute] = resource[attribute]
        resources[logical] = kept
    if not resources:
        raise ValueError(f"the template has no resources of types {', '.join(RESOURCE_TYPES)}")
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "durable: the storage resources of template.yaml, for local servers",
        "Resources": resources,
        "Outputs": {logical: {"Value": {"Ref": logical}} for logical in resources},
    }


def _parameter_values(source: dict[str, Any], overrides: dict[str, str]) -> dict[str, str]:
    declared: dict[str, Any] = source.get("Parameters", {}) or {}
    unknown = set(overrides) - set(declared)
    if unknown:
        raise ValueError(f"unknown template parameters: {', '.join(sorted(unknown))}")
    values: dict[str, str] = {}
    for name, spec in declared.items():
        if name in overrides:
            value = overrides[name]
        elif "Default" in spec:
            value = str(spec["Default"])
        else:
            continue  # only an error if something references it
        pattern = spec.get("AllowedPattern")
        if pattern and not re.fullmatch(pattern, value):
            raise ValueError(f"parameter {name}={value!r} does not match {pattern!r}")
        values[name] = value
    return values


def _resolve(value: Any, values: dict[str, str], where: str) -> Any:
    if isinstance(value, list):
        return [_resolve(v, values, where) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref":
            return _lookup(str(arg), values, where)
        if key in ("Sub", "Fn::Sub"):
            return _sub(arg, values, where)
        if key in _INTRINSICS:
            raise ValueError(
                f"{where}: {key} cannot be resolved in the extracted storage stack "
                "(only Ref and Sub of parameters and pseudo parameters)"
            )
    return {k: _resolve(v, values, where) for k, v in value.items()}


def _lookup(name: str, values: dict[str, str], where: str) -> str:
    if name not in values:
        raise ValueError(
            f"{where}: {name!r} is not a parameter with a value or a pseudo parameter "
            "(references to other resources cannot be resolved in the storage stack)"
        )
    return values[name]


def _sub(arg: Any, values: dict[str, str], where: str) -> str:
    if isinstance(arg, list):
        text, extra = arg[0], {k: str(_resolve(v, values, where)) for k, v in arg[1].items()}
    else:
        text, extra = arg, {}
    scope = values | extra

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith("!"):  # ${!Literal} is the escape for a literal ${Literal}
            return "${" + name[1:] + "}"
        return _lookup(name, scope, where)

    return _SUB_VAR.sub(replace, str(text))


# --- deploy ---------------------------------------------------------------------------------


def deploy_stack(
    cloudformation: Any,
    stack_name: str,
    template: dict[str, Any],
    *,
    timeout: float = 180.0,
    poll: float = 0.5,
) -> dict[str, str]:
    """Create the stack and wait for CREATE_COMPLETE; returns its outputs (logical -> value)."""
    cloudformation.create_stack(StackName=stack_name, TemplateBody=json.dumps(template))
    deadline = time.monotonic() + timeout
    while True:
        stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
        status: str = stack["StackStatus"]
        if status == "CREATE_COMPLETE":
            return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        if not status.endswith("_IN_PROGRESS"):
            reason = stack.get("StackStatusReason", "")
            raise CfnDeployError(
                f"stack {stack_name} ended in {status}: {reason}\n"
                + _failure_reasons(cloudformation, stack_name)
            )
        if time.monotonic() >= deadline:
            raise CfnDeployError(
                f"stack {stack_name} still {status} after {timeout:.0f}s\n"
                + _failure_reasons(cloudformation, stack_name)
            )
        time.sleep(poll)


def _failure_reasons(cloudformation: Any, stack_name: str) -> str:
    try:
        events = cloudformation.describe_stack_events(StackName=stack_name)["StackEvents"]
    except Exception as err:  # the reasons are a courtesy; the failure is reported regardless
        return f"(stack events unavailable: {err})"
    lines = [
        f"  {e['LogicalResourceId']} {e['ResourceStatus']}: {e.get('ResourceStatusReason', '')}"
        for e in events
        if e.get("ResourceStatus", "").endswith("FAILED")
    ]
    return "\n".join(lines) or "  (no failed resource events)"


def delete_stack(cloudformation: Any, stack_name: str, *, timeout: float = 120.0) -> None:
    """Delete the stack and wait until it is gone (or DELETE_COMPLETE)."""
    cloudformation.delete_stack(StackName=stack_name)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
        except Exception as err:
            if "does not exist" in str(err):
                return
            raise
        if not stacks or stacks[0]["StackStatus"] == "DELETE_COMPLETE":
            return
        if stacks[0]["StackStatus"] == "DELETE_FAILED":
            raise CfnDeployError(f"stack {stack_name} DELETE_FAILED")
        time.sleep(0.5)
    raise CfnDeployError(f"stack {stack_name} not deleted after {timeout:.0f}s")


# --- table shapes ---------------------------------------------------------------------------

KeySchema = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class TableShape:
    """What the code relies on in a table: keys, indexes, TTL and stream, in a stable order."""

    keys: KeySchema  # (attribute, HASH|RANGE)
    key_types: tuple[tuple[str, str], ...]  # (attribute, S|N|B) of every key attribute, sorted
    indexes: tuple[tuple[str, KeySchema, str, tuple[str, ...]], ...]  # name, keys, projection
    ttl_attribute: str | None
    stream_view_type: str | None


def _keys(schema: list[dict[str, str]]) -> KeySchema:
    # HASH before RANGE, as DynamoDB requires; servers echo them in that order anyway.
    ordered = sorted(schema, key=lambda k: k["KeyType"] != "HASH")
    return tuple((k["AttributeName"], k["KeyType"]) for k in ordered)


def _indexes(gsis: list[dict[str, Any]]) -> tuple[tuple[str, KeySchema, str, tuple[str, ...]], ...]:
    return tuple(
        sorted(
            (
                g["IndexName"],
                _keys(g["KeySchema"]),
                g["Projection"]["ProjectionType"],
                tuple(sorted(g["Projection"].get("NonKeyAttributes", []))),
            )
            for g in gsis
        )
    )


def _key_types(
    definitions: list[dict[str, str]], keys: KeySchema, indexes: tuple[Any, ...]
) -> tuple[tuple[str, str], ...]:
    used = {name for name, _ in keys} | {name for idx in indexes for name, _ in idx[1]}
    return tuple(
        sorted(
            (d["AttributeName"], d["AttributeType"])
            for d in definitions
            if d["AttributeName"] in used
        )
    )


def expected_shape(properties: dict[str, Any]) -> TableShape:
    """The shape ``AWS::DynamoDB::Table`` properties describe."""
    keys = _keys(properties["KeySchema"])
    indexes = _indexes(properties.get("GlobalSecondaryIndexes", []))
    ttl = properties.get("TimeToLiveSpecification") or {}
    stream = properties.get("StreamSpecification") or {}
    return TableShape(
        keys=keys,
        key_types=_key_types(properties["AttributeDefinitions"], keys, indexes),
        indexes=indexes,
        ttl_attribute=ttl.get("AttributeName") if ttl.get("Enabled") else None,
        stream_view_type=stream.get("StreamViewType"),
    )


def actual_shape(dynamodb: Any, table_name: str) -> TableShape:
    """The shape of a live table (DescribeTable + DescribeTimeToLive)."""
    table = dynamodb.describe_table(TableName=table_name)["Table"]
    ttl = dynamodb.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"]
    keys = _keys(table["KeySchema"])
    indexes = _indexes(table.get("GlobalSecondaryIndexes", []))
    stream = table.get("StreamSpecification") or {}
    enabled = ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING")
    return TableShape(
        keys=keys,
        key_types=_key_types(table["AttributeDefinitions"], keys, indexes),
        indexes=indexes,
        ttl_attribute=ttl.get("AttributeName") if enabled else None,
        stream_view_type=stream.get("StreamViewType") if stream.get("StreamEnabled") else None,
    )


# --- command line ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infra.local.cfn_tables",
        description="Deploy template.yaml's tables and schedule groups to a local CloudFormation.",
    )
    parser.add_argument("--endpoint", help="CloudFormation endpoint, e.g. http://127.0.0.1:4566")
    parser.add_argument("--stage", default=None, help="the Stage parameter (template default)")
    parser.add_argument("--stack-name", default=None, help="default: durable-storage-<stage>")
    parser.add_argument("--template", type=Path, default=None, help="default: template.yaml")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--print", action="store_true", help="print the template; deploy nothing")
    args = parser.parse_args(argv)

    parameters = {"Stage": args.stage} if args.stage else {}
    template = storage_template(args.template, parameters=parameters, region=args.region)
    if args.print:
        json.dump(template, sys.stdout, indent=2)
        print()
        return 0
    if not args.endpoint:
        parser.error("--endpoint is required to deploy (or use --print)")
    import boto3

    cloudformation = boto3.client(
        "cloudformation", endpoint_url=args.endpoint, region_name=args.region
    )
    stack_name = args.stack_name or "-".join(
        ["durable-storage", *([args.stage] if args.stage else [])]
    )
    outputs = deploy_stack(cloudformation, stack_name, template)
    json.dump(outputs, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
