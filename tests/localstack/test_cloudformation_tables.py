"""The template's storage resources deployed through LocalStack's CloudFormation.

``template.yaml`` is the schema's source of truth; ``create_tables`` reads it, and a deploy goes
through CloudFormation. This deploys the template's own tables and schedule groups as a stack
(``infra.local.cfn_tables``: the SAM parts need Lambda, which LocalStack cannot run without
Docker) and checks that CloudFormation builds the same tables the code expects: keys, GSIs, TTL.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.local.cfn_tables import (
    actual_shape,
    delete_stack,
    deploy_stack,
    expected_shape,
    storage_template,
)
from tests.conftest import TEMPLATE, aws_client


@pytest.fixture
def clients(localstack_endpoint: str) -> dict[str, Any]:
    # A fresh LocalStack account per test: physical names from the template cannot collide.
    account = f"{uuid.uuid4().int % 10**12:012d}"
    return {
        service: aws_client(service, localstack_endpoint, account=account)
        for service in ("cloudformation", "dynamodb", "scheduler")
    }


@pytest.fixture
def deployed(clients: dict[str, Any]) -> Iterator[Any]:
    """Deploys a template's storage stack; deletes what it deployed afterwards."""
    stacks: list[str] = []

    def deploy(template: Path, stage: str) -> tuple[dict[str, Any], dict[str, str]]:
        body = storage_template(template, parameters={"Stage": stage})
        name = f"durable-storage-{stage}"
        stacks.append(name)
        return body, deploy_stack(clients["cloudformation"], name, body)

    yield deploy
    for name in stacks:
        delete_stack(clients["cloudformation"], name)


def test_the_templates_tables_deploy_through_cloudformation(
    clients: dict[str, Any], deployed: Any
) -> None:
    # GIVEN the storage resources of template.yaml for stage "ci"
    # WHEN they are deployed as a CloudFormation stack
    body, outputs = deployed(TEMPLATE, "ci")
    # THEN every table exists under its !Sub-resolved name with the shape the template describes
    tables = {k: v for k, v in body["Resources"].items() if v["Type"] == "AWS::DynamoDB::Table"}
    assert {"LedgerTable", "IdempotencyTable"} <= set(tables)
    for logical, resource in tables.items():
        physical = outputs[logical]
        assert physical.endswith("-ci"), physical
        assert actual_shape(clients["dynamodb"], physical) == expected_shape(
            resource["Properties"]
        ), logical
    # AND the timers' schedule group exists under its resolved name
    groups = [
        k for k, v in body["Resources"].items() if v["Type"] == "AWS::Scheduler::ScheduleGroup"
    ]
    assert groups, "template.yaml defines no AWS::Scheduler::ScheduleGroup for the timers"
    for logical in groups:
        assert outputs[logical].endswith("-ci"), outputs[logical]
        group = clients["scheduler"].get_schedule_group(Name=outputs[logical])
        assert group["State"] == "ACTIVE"
