"""template.yaml: settings, routes, least privilege and the things the handlers rely on."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from durable.adapters.schema import load_template
from durable.api.openapi import render
from durable.settings import LOCAL_ONLY, Settings

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
FUNCTIONS = {
    name: res["Properties"]
    for name, res in RESOURCES.items()
    if res["Type"] == "AWS::Serverless::Function"
}


WORKER_ARN = (
    "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:durable-worker-${Stage}"
)


def env_vars() -> set[str]:
    names = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    for props in FUNCTIONS.values():
        names |= set(props.get("Environment", {}).get("Variables", {}))
    return names


def statements(props: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for policy in props.get("Policies", []):
        # !If [condition, policy, AWS::NoValue]; the loader keeps short tags as keys.
        document = policy["If"][1] if "If" in policy else policy
        out.extend(document["Statement"])
    return out


def actions(props: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    for statement in statements(props):
        value = statement["Action"]
        found |= {value} if isinstance(value, str) else set(value)
    return found


def test_every_template_variable_is_a_setting_and_vice_versa() -> None:
    deployed = {Settings.env_name(f) for f in Settings.model_fields if f not in LOCAL_ONLY}
    assert env_vars() == deployed
    assert not env_vars() & {Settings.env_name(f) for f in LOCAL_ONLY}


def test_the_worker_may_invoke_itself_in_a_long_chain() -> None:
    worker = FUNCTIONS["WorkerFunction"]
    assert worker["RecursiveLoop"] == "Allow"
    assert "lambda:InvokeFunction" in actions(worker)
    env = worker["Environment"]["Variables"]
    assert {"DURABLE_MAX_HOPS", "DURABLE_SCHEDULER_GROUP", "DURABLE_SCHEDULER_ROLE_ARN"} <= set(env)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_each_handler_exists(name: str) -> None:
    module, _, attribute = FUNCTIONS[name]["Handler"].rpartition(".")
    assert callable(getattr(importlib.import_module(module), attribute))


def test_no_wildcards_but_list_schedules() -> None:
    for name, props in FUNCTIONS.items():
        for statement in statements(props):
            acts = statement["Action"]
            acts = [acts] if isinstance(acts, str) else acts
            assert all(not a.endswith("*") for a in acts), (name, acts)
            if statement["Resource"] == "*":
                assert acts == ["scheduler:ListSchedules"], (name, statement)


def test_each_function_gets_only_what_it_calls() -> None:
    worker, api, sweeper, events = (
        actions(FUNCTIONS[n])
        for n in ["WorkerFunction", "ApiFunction", "SweeperFunction", "EventsFunction"]
    )
    assert "scheduler:CreateSchedule" in worker
    assert "scheduler:CreateSchedule" not in api | sweeper | events
    assert "iam:PassRole" in worker
    assert "iam:PassRole" not in api | sweeper | events
    assert sweeper == {"dynamodb:Query", "dynamodb:UpdateItem", "lambda:InvokeFunction"}
    assert "dynamodb:UpdateItem" not in events
    assert not any(a.startswith("secretsmanager:") for a in sweeper | events)
    assert not any(a.startswith("sqs:Receive") for a in worker | api | sweeper)
    # The ledger is never deleted from: only the API deletes (idempotency markers).
    for name, props in FUNCTIONS.items():
        for statement in statements(props):
            if "dynamodb:DeleteItem" in statement["Action"]:
                assert (name, statement["Resource"]) == (
                    "ApiFunction",
                    {"GetAtt": "IdempotencyTable.Arn"},
                )


def references(value: Any) -> set[str]:
    """Logical ids a value depends on (Ref, GetAtt, ${X} in Sub)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "GetAtt":
                found.add(inner[0] if isinstance(inner, list) else inner.split(".")[0])
            elif key == "Sub":
                text = inner if isinstance(inner, str) else inner[0]
                found |= set(re.findall(r"\$\{([A-Za-z0-9]+)", text))
            found |= references(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= references(inner)
    return found


def test_no_dependency_cycle_after_the_sam_transform() -> None:
    # SAM adds edges the raw template does not show: a function depends on its generated
    # role (its Policies), and an API's deployment on every function it integrates.
    graph = {
        name: references(res.get("Properties", {})) & set(RESOURCES)
        for name, res in RESOURCES.items()
    }
    for name, props in FUNCTIONS.items():
        for event in props.get("Events", {}).values():
            api = event["Properties"].get("RestApiId", {}).get("Ref")
            if api:
                graph[api].add(name)
                graph[name].discard(api)  # the event's own reference is the API's, not ours

    def visit(node: str, path: list[str]) -> None:
        assert node not in path, f"dependency cycle: {' -> '.join([*path, node])}"
        for nxt in sorted(graph[node]):
            visit(nxt, [*path, node])

    for node in sorted(graph):
        visit(node, [])


def test_the_scheduler_role_can_only_invoke_the_worker() -> None:
    role = RESOURCES["SchedulerRole"]["Properties"]
    (statement,) = role["Policies"][0]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "lambda:InvokeFunction"
    assert statement["Resource"] == {"Sub": WORKER_ARN}


def test_api_events_match_the_routes_and_their_authorization() -> None:
    import json

    document = json.loads(render())
    routes = {(path, method) for path, ops in document["paths"].items() for method in ops}
    events = FUNCTIONS["ApiFunction"]["Events"].values()
    declared = {(e["Properties"]["Path"], e["Properties"]["Method"].lower()) for e in events}
    assert declared == routes | {("/openapi.json", "get")}
    public = {
        (e["Properties"]["Path"], e["Properties"]["Method"].lower())
        for e in events
        if e["Properties"].get("Auth", {}).get("Authorizer") == "NONE"
    }
    assert public == {("/callbacks/{token}", "post"), ("/hooks/{name}", "post")}
    auth = RESOURCES["Api"]["Properties"]["Auth"]
    assert auth == {"DefaultAuthorizer": "AWS_IAM", "InvokeRole": "NONE"}


def test_the_sweeper_runs_every_minute_alone() -> None:
    sweeper = FUNCTIONS["SweeperFunction"]
    (event,) = sweeper["Events"].values()
    assert event["Type"] == "ScheduleV2"
    assert event["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert sweeper["ReservedConcurrentExecutions"] == 1


def test_sqs_starts_report_partial_failures_and_dead_letter() -> None:
    mapping = RESOURCES["StartQueueMapping"]["Properties"]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    queue = RESOURCES["StartQueue"]["Properties"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 3
    assert queue["VisibilityTimeout"] >= 6 * FUNCTIONS["EventsFunction"]["Timeout"]


def test_tables_keep_their_schema_and_protection() -> None:
    ledger = RESOURCES["LedgerTable"]["Properties"]
    assert [k["AttributeName"] for k in ledger["KeySchema"]] == ["pk", "sk"]
    assert [i["IndexName"] for i in ledger["GlobalSecondaryIndexes"]] == [
        "due-index",
        "list-index",
        "attention-index",
    ]
    assert ledger["TimeToLiveSpecification"] == {"AttributeName": "purge_at", "Enabled": True}
    idem = RESOURCES["IdempotencyTable"]["Properties"]
    assert idem["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}
    for props in (ledger, idem):
        assert props["SSESpecification"] == {"SSEEnabled": True}
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_alarms_notify_the_topic_parameter() -> None:
    alarms = {
        res["Properties"]["MetricName"]: res["Properties"]
        for res in RESOURCES.values()
        if res["Type"] == "AWS::CloudWatch::Alarm"
    }
    assert {"RunsFailed", "RunsNeedingAttention", "Errors"} <= set(alarms)
    for alarm in alarms.values():
        assert alarm["AlarmActions"]["If"][0] == "HasAlarmTopic"
    assert {"Stage", "RetentionDays", "WebhookSecretName", "AlarmTopicArn"} <= set(
        TEMPLATE["Parameters"]
    )


def test_the_package_holds_the_code_and_the_runtime_requirements() -> None:
    package = ROOT / TEMPLATE["Globals"]["Function"]["CodeUri"]
    for name in ("durable", "handlers", "examples"):
        assert (package / name).resolve() == (ROOT / name).resolve()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {re.split(r"[\[<>=]", d, maxsplit=1)[0].lower(): d for d in project}
    lines = (package / "requirements.txt").read_text().splitlines()
    for line in (x for x in lines if x and not x.startswith("#")):
        name = re.split(r"[\[<>=]", line, maxsplit=1)[0].lower()
        specifier = line[line.index("]") + 1 :] if "[" in line else line[len(name) :]
        assert name in declared, line
        assert declared[name].endswith(specifier), (line, declared[name])


def test_ci_validates_the_template() -> None:
    assert "infra/sam/validate.sh" in (ROOT / ".ci" / "run").read_text()
