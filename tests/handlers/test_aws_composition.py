"""The production composition (``aws_services``: boto3 clients, Powertools parameters and
idempotency) on moto: what ``handlers/`` builds on AWS, without a fake in between."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from durable.adapters.aws_services import LazyClient, aws_services, secrets_manager
from durable.aws import api_handler, worker_handler
from durable.errors import StorageError
from durable.settings import Settings
from tests.conftest import MakeTables, aws_client
from tests.handlers.conftest import CALLBACK_SECRET, WORKER_ARN
from tests.handlers.events import LambdaContext, api_event


@pytest.fixture
def settings(mock_aws_session: None, make_tables: MakeTables) -> Settings:
    ledger, idem = make_tables(aws_client("dynamodb", None))
    secrets = boto3.client("secretsmanager", region_name="us-east-1")
    secrets.create_secret(Name="durable/test/callback", SecretString=CALLBACK_SECRET)
    boto3.client("scheduler", region_name="us-east-1").create_schedule_group(Name="durable-test")
    return Settings(
        app="tests.handlers.workflows:app",
        ledger_table=ledger,
        idempotency_table=idem,
        worker_function=WORKER_ARN,
        scheduler_group="durable-test",
        scheduler_role_arn="arn:aws:iam::123456789012:role/durable-scheduler-test",
        callback_secret_name="durable/test/callback",
        callback_base_url="https://abcdef1234.execute-api.us-east-1.amazonaws.com/test",
    )


def test_composition_creates_no_client_until_one_is_used() -> None:
    made: list[str] = []

    def make() -> Any:
        made.append("client")
        return boto3.client("sts", region_name="us-east-1")

    client = LazyClient(make)
    assert made == []
    assert client.meta.service_model.service_name == "sts"
    assert made == ["client"]


def test_secrets_are_read_through_powertools_parameters(settings: Settings) -> None:
    read = secrets_manager(lambda: boto3.client("secretsmanager", region_name="us-east-1"))
    assert read("durable/test/callback") == CALLBACK_SECRET
    with pytest.raises(StorageError) as caught:
        read("durable/test/missing")
    assert "durable/test/missing" in str(caught.value)
    assert CALLBACK_SECRET not in str(caught.value)


def test_a_sleeping_run_through_the_production_composition(settings: Settings) -> None:
    # GIVEN the handlers composed exactly as on AWS (DURABLE_APP names the workflows)
    api = api_handler(None, settings)
    worker = worker_handler(None, settings)
    # WHEN a run is started with an idempotency key and its worker invocation happens
    event = api_event("POST", "/workflows/sleeper/runs", headers={"Idempotency-Key": "k1"})
    reply = api(event, LambdaContext(function_name="durable-api-test"))
    assert reply["statusCode"] == 202, reply
    run_id = json.loads(reply["body"])["run_id"]
    again = api(event, LambdaContext(function_name="durable-api-test"))
    assert json.loads(again["body"])["run_id"] == run_id
    result = worker({"run_id": run_id, "reason": "start", "hop": 0}, LambdaContext())
    # THEN it sleeps on an EventBridge Scheduler schedule that targets the worker
    assert result["result"] == "suspended"
    scheduler = boto3.client("scheduler", region_name="us-east-1")
    (listed,) = scheduler.list_schedules(GroupName="durable-test")["Schedules"]
    target = scheduler.get_schedule(Name=listed["Name"], GroupName="durable-test")["Target"]
    assert target["Arn"] == WORKER_ARN
    assert json.loads(target["Input"]) == {"run_id": run_id, "reason": "timer"}


def test_the_ports_follow_the_settings(settings: Settings) -> None:
    services = aws_services(settings)
    assert services.ledger.shards == settings.due_shards
    assert services.idempotency is not None
    without_timers = aws_services(settings.model_copy(update={"scheduler_group": None}))
    assert type(without_timers.timers).__name__ == "NoTimers"


def test_a_deployed_ledger_keeps_inputs_inline_until_the_setting_says_otherwise(
    settings: Settings,
) -> None:
    """A worker from before the input item would read such a run as one with an empty
    input, so a stack writes that layout only once told (``DURABLE_INPUTS_APART``), in
    the deploy after every function can read it."""
    assert settings.inputs_apart is False
    ledger: Any = aws_services(settings).ledger
    assert ledger.inputs_apart is False
    turned_on: Any = aws_services(settings.model_copy(update={"inputs_apart": True})).ledger
    assert turned_on.inputs_apart is True


def test_a_deployed_engine_records_sleeps_as_step_items_until_the_setting_says_otherwise(
    settings: Settings,
) -> None:
    """A worker from before the sleeps kept on the run item would not see such a sleep
    and sleep it again, so a stack writes that layout only once told
    (``DURABLE_SLEEPS_ON_RUN``), in the deploy after every function can read it."""
    assert settings.sleeps_on_run is False
    assert settings.engine_config().sleeps_on_run is False
    environ = {
        "DURABLE_APP": settings.app,
        "DURABLE_LEDGER_TABLE": settings.ledger_table,
        "DURABLE_IDEMPOTENCY_TABLE": settings.idempotency_table,
        "DURABLE_SLEEPS_ON_RUN": "true",
    }
    assert Settings.from_env(environ).engine_config().sleeps_on_run is True


def test_the_ledgers_client_skips_client_side_parameter_checks(settings: Settings) -> None:
    """Only the DynamoDB client: the contract suite proves its requests on every server."""
    services = aws_services(settings)
    # botocore wraps the serializer in its validator when validation is on.
    ledger_client = services.ledger.client  # type: ignore[attr-defined]
    assert type(ledger_client._serializer).__name__ == "JSONSerializer"
    invoker_client = services.invoker.client  # type: ignore[attr-defined]
    assert type(invoker_client._serializer).__name__ == "ParamValidationDecorator"


def test_the_deploy_hook_waits_for_a_whole_check_call_and_never_repeats_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A check call runs up to the worker's timeout (900 s at most): botocore's default
    60 s read timeout, with its retries, would start the same check again in parallel,
    then fail the gate."""
    from durable.adapters.aws_services import deploy_hook_clients

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    lambda_client, _ = deploy_hook_clients()
    config = lambda_client.meta.config
    assert config.read_timeout >= 900
    assert config.retries["total_max_attempts"] == 1  # the first attempt only
