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
# What everything invokes: the alias a deploy moves once the gate passed.
LIVE_WORKER = f"{WORKER_ARN}:live"


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
    # The API passes the role only to write back a paused or resumed schedule, and may
    # change only the recurring ones (schedule.*), never a run's timers.
    assert "iam:PassRole" in worker and "iam:PassRole" in api
    assert "iam:PassRole" not in sweeper | events
    for statement in statements(FUNCTIONS["ApiFunction"]):
        acts = statement["Action"]
        if "scheduler:UpdateSchedule" in (acts if isinstance(acts, list) else [acts]):
            assert statement["Resource"]["Sub"].endswith("/schedule.*"), statement
    assert sweeper == {"dynamodb:Query", "dynamodb:UpdateItem", "lambda:InvokeFunction"}
    # The worker's fenced step writes are transactions with a ConditionCheck of the run
    # item (durable.adapters.dynamodb_steps); nobody else checks without writing.
    assert "dynamodb:ConditionCheckItem" in worker
    assert "dynamodb:ConditionCheckItem" not in api | sweeper | events
    assert "dynamodb:UpdateItem" not in events
    assert not any(a.startswith("secretsmanager:") for a in sweeper | events)
    assert not any(a.startswith("sqs:Receive") for a in worker | api | sweeper)
    # Only the API deletes (idempotency markers), and the purge (an expired run's leftovers
    # in the ledger): no other function can delete a run's history.
    for name, props in FUNCTIONS.items():
        for statement in statements(props):
            if "dynamodb:DeleteItem" in statement["Action"]:
                assert (name, statement["Resource"]) in [
                    ("ApiFunction", {"GetAtt": "IdempotencyTable.Arn"}),
                    ("PurgeFunction", {"GetAtt": "LedgerTable.Arn"}),
                ]


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
    # A DeploymentPreference becomes an alias and a CodeDeploy deployment group, both
    # depending on the function: its hook and alarms are their edges, not the function's.
    for name, props in FUNCTIONS.items():
        if "DeploymentPreference" in props:
            graph[name] = references(
                {k: v for k, v in props.items() if k != "DeploymentPreference"}
            ) & set(RESOURCES)
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
    # the alias, and the bare function for timers armed before the alias existed
    assert statement["Resource"] == [{"Sub": LIVE_WORKER}, {"Sub": WORKER_ARN}]


def test_everything_invokes_the_live_alias_and_only_the_hook_a_version() -> None:
    """A deploy moves the alias once the gate passed; an invoke of the bare function (its
    $LATEST) would reach code that no gate checked."""
    assert TEMPLATE["Globals"]["Function"]["Environment"]["Variables"][
        "DURABLE_WORKER_FUNCTION"
    ] == {"Sub": LIVE_WORKER}
    grants: dict[str, list[Any]] = {}
    for name, props in FUNCTIONS.items():
        for statement in statements(props):
            if statement["Action"] == "lambda:InvokeFunction":
                grants.setdefault(name, []).append(statement["Resource"])
    hook = grants.pop("DeployHookFunction")
    assert hook == [{"Sub": f"{WORKER_ARN}:*"}]  # the new version, and the alias
    assert set(grants) == {"WorkerFunction", "ApiFunction", "SweeperFunction", "EventsFunction"}
    assert all(resources == [{"Sub": LIVE_WORKER}] for resources in grants.values()), grants


def test_a_deploy_publishes_a_version_that_takes_traffic_only_after_the_gate() -> None:
    worker = FUNCTIONS["WorkerFunction"]
    assert worker["AutoPublishAlias"] == "live"
    preference = worker["DeploymentPreference"]
    assert preference["Type"] == {"Ref": "DeploymentType"}
    assert TEMPLATE["Parameters"]["DeploymentType"]["Default"] == "AllAtOnce"
    assert preference["Hooks"] == {"PreTraffic": {"Ref": "DeployHookFunction"}}
    assert preference["Alarms"] == [{"Ref": "NewWorkerVersionErrorsAlarm"}]
    # the version being deployed alone: an old version's error does not undo a good deploy
    alarm = RESOURCES["NewWorkerVersionErrorsAlarm"]["Properties"]
    dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
    assert dimensions["ExecutedVersion"] == {"GetAtt": "WorkerFunction.Version.Version"}
    assert alarm["Threshold"] >= 2 and alarm["DatapointsToAlarm"] >= 2
    hook = FUNCTIONS["DeployHookFunction"]
    # SAM's CodeDeploy role may invoke only functions named CodeDeployHook_*.
    assert hook["FunctionName"] == {"Sub": "CodeDeployHook_durable-${Stage}"}
    assert hook["Handler"] == "handlers.deploy_hook.handler"
    assert hook["DeploymentPreference"] == {"Enabled": False}
    assert hook["Environment"]["Variables"] == {
        "DURABLE_WORKER_VERSION": {"Ref": "WorkerFunction.Version"}
    }
    # It reads nothing itself (the check runs inside the worker version): it invokes and
    # reports the verdict, nothing else.
    assert actions(hook) == {
        "lambda:InvokeFunction",
        "codedeploy:PutLifecycleEventHookExecutionStatus",
    }
    (report,) = [s for s in statements(hook) if s["Action"].startswith("codedeploy:")]
    assert "deploymentgroup:${ServerlessDeploymentApplication}/*" in report["Resource"]["Sub"]


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
    assert public == {
        ("/callbacks/{token}", "post"),
        ("/callbacks/{token}/fail", "post"),
        ("/callbacks/{token}/heartbeat", "post"),
        ("/hooks/{name}", "post"),
    }
    # The document tells clients the same: no credentials on exactly those routes.
    unsigned = {
        (path, method)
        for path, ops in document["paths"].items()
        for method, op in ops.items()
        if op["security"] == []
    }
    assert unsigned == public
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
        "listing-index",
        "list-index",  # the first listing index, until the next release (listing_migration)
        "attention-index",
    ]
    assert ledger["TimeToLiveSpecification"] == {"AttributeName": "purge_at", "Enabled": True}
    idem = RESOURCES["IdempotencyTable"]["Properties"]
    assert idem["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}
    for props in (ledger, idem):
        assert props["SSESpecification"] == {"SSEEnabled": True}
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_alarms_notify_the_topic_parameter() -> None:
    alarms = [
        res["Properties"] for res in RESOURCES.values() if res["Type"] == "AWS::CloudWatch::Alarm"
    ]
    metrics = {alarm["MetricName"] for alarm in alarms}
    assert {"RunsFailed", "RunsNeedingAttention", "RunsDeferred", "Errors"} <= metrics
    for alarm in alarms:
        assert alarm["AlarmActions"]["If"][0] == "HasAlarmTopic"
    assert {"Stage", "RetentionDays", "WebhookSecretName", "AlarmTopicArn"} <= set(
        TEMPLATE["Parameters"]
    )


def test_the_package_holds_the_code_and_the_runtime_requirements() -> None:
    package = ROOT / TEMPLATE["Globals"]["Function"]["CodeUri"]
    for name in ("durable", "handlers", "examples"):
        assert (package / name).resolve() == (ROOT / name).resolve()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted = [line.split("#")[0].strip() for line in (package / "requirements.in").open()]
    # The deployed ranges are pyproject's, exactly (comments aside).
    assert sorted(w for w in wanted if w) == sorted(d.split("#")[0].strip() for d in project)


def test_the_deployed_requirements_are_a_lock_within_pyprojects_ranges() -> None:
    """deploy/lambda/requirements.txt pins every package to one version with its hashes
    (what sam build installs is what the deployed tier ran), each within the ranges
    pyproject declares, and durable init's scaffold pins the same versions."""
    from packaging.requirements import Requirement

    from infra.lock import LOCK, SCAFFOLD, normalize, pins

    text = LOCK.read_text()
    locked = pins(text)
    entries = [e for e in re.split(r"\n(?=[A-Za-z])", text) if re.match(r"[A-Za-z]", e)]
    assert len(entries) == len(locked) > 0
    assert all("--hash=sha256:" in entry for entry in entries)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for declared in map(Requirement, project):
        assert declared.specifier.contains(locked[normalize(declared.name)]), declared
    assert pins(SCAFFOLD.read_text()) == locked, "run make lock: the scaffold's pins are stale"


def test_ci_validates_the_template_and_runs_the_built_package() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "infra/sam/validate.sh" in ci
    assert "make test-deployed" in ci


# --- retention: TTL deletes the run item, the stream's purge the rest ------------------


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """Lambda's event filtering for the exact-match patterns used here: every field of the
    pattern must be present, nested objects match recursively, a list lists the values
    allowed. Anything fancier (prefix, numeric, exists) is refused rather than guessed."""
    for key, want in pattern.items():
        if key not in event:
            return False
        if isinstance(want, dict):
            if not isinstance(event[key], dict) or not matches(want, event[key]):
                return False
        else:
            assert isinstance(want, list) and all(isinstance(v, str) for v in want), want
            if event[key] not in want:
                return False
    return True


def purge_filters() -> list[dict[str, Any]]:
    import json

    mapping = RESOURCES["PurgeMapping"]["Properties"]
    return [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]


def passes(record: dict[str, Any]) -> bool:
    return any(matches(pattern, record) for pattern in purge_filters())


def test_the_ledger_streams_keys_to_the_purge() -> None:
    ledger = RESOURCES["LedgerTable"]["Properties"]
    assert ledger["StreamSpecification"] == {"StreamViewType": "KEYS_ONLY"}
    mapping = RESOURCES["PurgeMapping"]
    assert mapping["Type"] == "AWS::Lambda::EventSourceMapping"
    props = mapping["Properties"]
    assert props["EventSourceArn"] == {"GetAtt": "LedgerTable.StreamArn"}
    assert props["FunctionName"] == {"Ref": "PurgeFunction"}
    assert FUNCTIONS["PurgeFunction"]["Handler"] == "handlers.purge.handler"
    assert not FUNCTIONS["PurgeFunction"].get("Events")  # no SAM-managed stream policy
    assert props["StartingPosition"] == "TRIM_HORIZON"
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["BisectBatchOnFunctionError"] is True
    assert 0 <= props["MaximumRetryAttempts"] <= 10
    # Given up on (dead-lettered) while the stream still holds the records: 24 hours.
    assert 60 <= props["MaximumRecordAgeInSeconds"] <= 12 * 3600
    assert props["DestinationConfig"] == {
        "OnFailure": {"Destination": {"GetAtt": "PurgeDeadLetterQueue.Arn"}}
    }
    assert RESOURCES["PurgeDeadLetterQueue"]["Type"] == "AWS::SQS::Queue"


def test_the_purge_filter_passes_only_ttl_removals_of_run_items() -> None:
    from tests.handlers.events import stream_record, ttl_removal

    run = "01JH0000000000000000000000"
    assert passes(ttl_removal(run))
    refused = [
        stream_record("REMOVE", f"RUN#{run}", "RUN"),  # deleted by a user, not by TTL
        stream_record("INSERT", f"RUN#{run}", "RUN"),  # a start
        stream_record("MODIFY", f"RUN#{run}", "RUN"),  # any run-item write
        stream_record("REMOVE", f"RUN#{run}", "STEP#0001", by_ttl=True),  # not a run item
        stream_record("REMOVE", f"RUN#{run}", "SIGNAL#go#01JH00000000000000000000", by_ttl=True),
        {**ttl_removal(run), "userIdentity": {"type": "Service", "principalId": "x.amazonaws.com"}},
    ]
    assert [passes(record) for record in refused] == [False] * len(refused)


LEDGER_ARN = {"GetAtt": "LedgerTable.Arn"}
STREAM_READS = ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"]


def test_the_purge_function_reads_its_stream_and_deletes_only_in_the_ledger() -> None:
    purge = FUNCTIONS["PurgeFunction"]
    assert actions(purge) == {
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:DeleteItem",
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
        "sqs:SendMessage",
        "s3:ListBucket",
        "s3:DeleteObject",
    }
    scope = sorted(
        (sorted([s["Action"]] if isinstance(s["Action"], str) else s["Action"]), s["Resource"])
        for s in statements(purge)
    )
    assert scope == [
        (["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:Query"], LEDGER_ARN),
        (STREAM_READS, {"GetAtt": "LedgerTable.StreamArn"}),
        (["dynamodb:ListStreams"], {"Sub": "${LedgerTable.Arn}/stream/*"}),
        (["s3:DeleteObject"], RUN_OBJECTS),
        (["s3:ListBucket"], {"GetAtt": "PayloadBucket.Arn"}),
        (["sqs:SendMessage"], {"GetAtt": "PurgeDeadLetterQueue.Arn"}),
    ]
    # No other function reads the stream.
    for name, props in FUNCTIONS.items():
        if name != "PurgeFunction":
            assert not actions(props) & {*STREAM_READS, "dynamodb:ListStreams"}, name


RUN_OBJECTS = {"Sub": "${PayloadBucket.Arn}/runs/*"}


def test_large_values_are_read_and_written_only_under_runs_and_deleted_only_by_the_purge() -> None:
    """The payload bucket (durable.core.claim_check): who may touch which object. The
    functions that write values (worker, API, events) read and write objects under
    runs/ only; only the purge lists and deletes, under runs/ only; the sweeper and the
    deploy hook never touch it."""

    def listed(statement: dict[str, Any]) -> list[str]:
        acts = statement["Action"]
        return sorted([acts] if isinstance(acts, str) else acts)

    s3 = {
        name: sorted(
            (listed(st), st["Resource"], st.get("Condition"))
            for st in statements(props)
            if any(a.startswith("s3:") for a in listed(st))
        )
        for name, props in FUNCTIONS.items()
    }
    # PutObjectTagging: a declared lifetime's value is written with its expiry class.
    rw = [(["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"], RUN_OBJECTS, None)]
    assert s3["WorkerFunction"] == rw and s3["ApiFunction"] == rw and s3["EventsFunction"] == rw
    assert s3["PurgeFunction"] == [
        (["s3:DeleteObject"], RUN_OBJECTS, None),
        (
            ["s3:ListBucket"],
            {"GetAtt": "PayloadBucket.Arn"},
            {"StringLike": {"s3:prefix": "runs/*"}},
        ),
    ]
    assert s3["SweeperFunction"] == [] and s3["DeployHookFunction"] == []
    assert set(s3) == set(FUNCTIONS)


def test_the_payload_buckets_lifecycle_has_a_rule_per_expiry_class() -> None:
    """A value of a run with a declared lifetime is tagged with its class
    (``durable.core.lifetime.lifecycle_days``): each class has its rule, deleting it that
    many days after its write, and nothing untagged expires."""
    from durable.core.lifetime import LIFECYCLE_DAYS, LIFECYCLE_TAG

    rules = RESOURCES["PayloadBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    expiring = {
        int(rule["ExpirationInDays"]): rule["TagFilters"]
        for rule in rules
        if "ExpirationInDays" in rule
    }
    assert sorted(expiring) == list(LIFECYCLE_DAYS)
    for days, filters in expiring.items():
        assert filters == [{"Key": LIFECYCLE_TAG, "Value": str(days)}]


def test_the_payload_bucket_is_private_encrypted_and_tls_only() -> None:
    bucket = RESOURCES["PayloadBucket"]
    props = bucket["Properties"]
    assert bucket["DeletionPolicy"] == "Retain"  # runs in flight reference its objects
    rule = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}
    assert all(props["PublicAccessBlockConfiguration"].values())
    assert len(props["PublicAccessBlockConfiguration"]) == 4
    assert props["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    policy = RESOURCES["PayloadBucketPolicy"]["Properties"]
    assert policy["Bucket"] == {"Ref": "PayloadBucket"}
    [deny] = policy["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == "*"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    env = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    assert env["DURABLE_PAYLOAD_BUCKET"] == {"Ref": "PayloadBucket"}
    assert TEMPLATE["Outputs"]["PayloadBucketName"]["Value"] == {"Ref": "PayloadBucket"}


def test_the_purge_has_its_log_group_and_a_dead_letter_alarm() -> None:
    logs = RESOURCES["PurgeLogs"]["Properties"]
    assert logs["LogGroupName"] == {"Sub": "/aws/lambda/durable-purge-${Stage}"}
    assert FUNCTIONS["PurgeFunction"]["FunctionName"] == {"Sub": "durable-purge-${Stage}"}
    assert logs["RetentionInDays"] > 0
    (alarm,) = [
        res["Properties"]
        for res in RESOURCES.values()
        if res["Type"] == "AWS::CloudWatch::Alarm"
        and res["Properties"]["Dimensions"][0]["Value"]
        == {"GetAtt": "PurgeDeadLetterQueue.QueueName"}
    ]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["AlarmActions"]["If"][0] == "HasAlarmTopic"


def test_the_listing_indexes_project_what_a_listing_shows_and_nothing_else() -> None:
    """Input, output, lease and operations stay out of the indexes: no copy of a run's
    payload on every write of the run item (issue 15). The listing index holds its keys
    alone: a projected ``status`` or ``updated_at`` is rewritten there by every transition
    (issue 48), so a listing reads its page's run items instead. The attention index holds
    what a listing shows (``durable.core.leases.listed``)."""
    from durable.core.leases import LISTED_FIELDS

    ledger = load_template()["Resources"]["LedgerTable"]["Properties"]
    indexes = {i["IndexName"]: i for i in ledger["GlobalSecondaryIndexes"]}
    for name in ("list-index", "attention-index"):
        projection = indexes[name]["Projection"]
        assert projection["ProjectionType"] == "INCLUDE"
        assert tuple(projection["NonKeyAttributes"]) == LISTED_FIELDS
    for name in ("due-index", "listing-index"):
        assert indexes[name]["Projection"] == {"ProjectionType": "KEYS_ONLY"}


def test_deployed_code_knows_the_ledger_indexes_the_templates_declare() -> None:
    """The usage meter prices index writes from ``durable.adapters.ledger_layout`` (deployed
    code reads no YAML, issue 30): it must say what this repo's template and the one
    ``durable init`` writes declare, or a run's cost is priced for indexes it does not have."""
    from durable.adapters.ledger_layout import LEDGER_INDEXES
    from durable.adapters.schema import library_template

    scaffold = library_template()
    for declared in (
        RESOURCES["LedgerTable"]["Properties"],
        scaffold["Resources"]["LedgerTable"]["Properties"],
    ):
        # An index's capacity (TableBillingMode=PROVISIONED) is billing, not layout.
        layout = [
            {k: v for k, v in index.items() if k != "ProvisionedThroughput"}
            for index in declared["GlobalSecondaryIndexes"]
        ]
        assert list(LEDGER_INDEXES) == layout, (
            "durable/adapters/ledger_layout.py differs from the template's LedgerTable "
            "indexes: change both together"
        )


def test_only_the_functions_that_open_sealed_values_may_decrypt() -> None:
    """The internet-facing API makes a new run's data key (a secret-typed input is sealed
    at the start) but opens no sealed value, so it holds kms:GenerateDataKey and not
    kms:Decrypt (issue 32, finding 10); the worker, which replays sealed values, holds
    both. The code agrees: only the replay (``durable.engine.execution``) opens a data key."""
    api, worker = actions(FUNCTIONS["ApiFunction"]), actions(FUNCTIONS["WorkerFunction"])
    assert {a for a in api if a.startswith("kms:")} == {"kms:GenerateDataKey"}
    assert {"kms:GenerateDataKey", "kms:Decrypt"} <= worker
    openers = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "durable").rglob("*.py"))
        if "open_sealer(" in path.read_text() and path.name != "secrets.py"
    ]
    # LocalRunner.result opens with the test runner's own in-process keys (no KMS, no role).
    assert openers == ["durable/engine/execution.py", "durable/testing.py"]


def _throttles() -> dict[tuple[str, str], tuple[str, str]]:
    """(path, method) -> the parameters naming its rate and burst, from the stage's
    MethodSettings (a resource path's slashes are written ~1 there)."""
    found = {}
    for setting in RESOURCES["Api"]["Properties"]["MethodSettings"]:
        path = setting["ResourcePath"]
        path = path if path == "/*" else path[1:].replace("~1", "/")
        found[(path, setting["HttpMethod"])] = (
            setting["ThrottlingRateLimit"]["Ref"],
            setting["ThrottlingBurstLimit"]["Ref"],
        )
    return found


def test_the_stage_throttles_and_every_unsigned_route_tighter() -> None:
    """A flood on /hooks or /callbacks must not take the concurrency the workers need
    (issue 32): the stage has a rate, and every route the internet reaches unsigned
    (Authorizer NONE, read from the function's events so a new one cannot be missed)
    has its own, lower one; a throttle names a route that exists."""
    routes = {
        (e["Properties"]["Path"], e["Properties"]["Method"].upper()): e["Properties"]
        for e in FUNCTIONS["ApiFunction"]["Events"].values()
        if e["Type"] == "Api"
    }
    unsigned = {r for r, p in routes.items() if p.get("Auth", {}).get("Authorizer") == "NONE"}
    assert unsigned == {
        ("/hooks/{name}", "POST"),
        ("/callbacks/{token}", "POST"),
        ("/callbacks/{token}/fail", "POST"),
        ("/callbacks/{token}/heartbeat", "POST"),
    }
    throttles = _throttles()
    assert throttles.pop(("/*", "*")) == ("ApiRateLimit", "ApiBurstLimit")
    assert set(throttles) == unsigned and set(throttles) <= set(routes)
    assert set(throttles.values()) == {("PublicRateLimit", "PublicBurstLimit")}
    params = TEMPLATE["Parameters"]
    for public, stage in (
        ("PublicRateLimit", "ApiRateLimit"),
        ("PublicBurstLimit", "ApiBurstLimit"),
    ):
        assert 1 <= params[public]["Default"] <= params[stage]["Default"]
        assert params[public]["MinValue"] == params[stage]["MinValue"] == 1


@pytest.mark.parametrize(
    ("function", "parameter"),
    [("ApiFunction", "ApiReservedConcurrency"), ("WorkerFunction", "WorkerReservedConcurrency")],
)
def test_reserved_concurrency_is_a_parameter_unset_by_default(
    function: str, parameter: str
) -> None:
    """Reserving concurrency caps the API (a flood cannot take the workers' share) and
    guarantees the workers theirs, but an account whose quota is below 100 + the
    reservation cannot deploy it (new accounts start at 10): a parameter, -1 leaving
    the property out (AWS::NoValue), 0 a real value (the function stopped)."""
    param = TEMPLATE["Parameters"][parameter]
    assert (param["Type"], param["Default"], param["MinValue"]) == ("Number", -1, -1)
    (condition,) = [
        name
        for name, rule in TEMPLATE["Conditions"].items()
        if rule == {"Not": [{"Equals": [{"Ref": parameter}, "-1"]}]}
    ]
    assert FUNCTIONS[function]["ReservedConcurrentExecutions"] == {
        "If": [condition, {"Ref": parameter}, {"Ref": "AWS::NoValue"}]
    }


def _query_grants(props: dict[str, Any]) -> set[str]:
    """The resources a function may Query, as the template names them."""
    found: set[str] = set()
    for statement in statements(props):
        acts = statement["Action"]
        if "dynamodb:Query" not in (acts if isinstance(acts, list) else [acts]):
            continue
        resources = statement["Resource"]
        for resource in resources if isinstance(resources, list) else [resources]:
            found.add(str(resource.get("Sub") or resource.get("GetAtt") or resource))
    return found


def test_the_worker_may_read_the_open_runs_a_schedule_fire_checks() -> None:
    """A schedule's fire is delivered to the worker (``durable.aws._worker``), and a
    ``skip`` or ``buffer_one`` fire reads the workflow's open runs from the listing index
    (``durable.engine.schedules``, ``Ledger.open_runs``): on AWS a worker without Query on
    that index fails every such fire with AccessDenied. The sweeper reads the due index."""
    worker = _query_grants(FUNCTIONS["WorkerFunction"])
    assert "${LedgerTable.Arn}/index/listing-index" in worker, worker
    assert not any("list-index" in g or "attention-index" in g for g in worker), worker
    sweeper = _query_grants(FUNCTIONS["SweeperFunction"])
    assert "${LedgerTable.Arn}/index/due-index" in sweeper, sweeper
