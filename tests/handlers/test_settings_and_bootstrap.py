"""Settings from the environment, the composition root, lazy handler modules, OpenAPI."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from durable.api.openapi import render
from durable.errors import InvalidInput
from durable.settings import LOCAL_ONLY, Settings
from tests.handlers.conftest import Stack
from tests.handlers.events import api_event

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = {
    "DURABLE_APP": "examples.app:app",
    "DURABLE_LEDGER_TABLE": "durable-ledger-dev",
    "DURABLE_IDEMPOTENCY_TABLE": "durable-idempotency-dev",
}


def test_settings_come_from_durable_variables_only() -> None:
    env = {**MINIMAL, "DURABLE_RETENTION_DAYS": "7", "DURABLE_WEBHOOK_SECRET_NAME": "", "PATH": "x"}
    settings = Settings.from_env(env)
    assert settings.retention_days == 7
    assert settings.webhook_secret_name is None  # "" counts as unset
    assert settings.engine_config().retention == timedelta(days=7)


@pytest.mark.parametrize(
    ("change", "variable"),
    [
        ({"DURABLE_APP": "no-colon"}, "DURABLE_APP"),
        ({"DURABLE_LEDGER_TABLE": ""}, "DURABLE_LEDGER_TABLE"),
        ({"DURABLE_DUE_SHARDS": "0"}, "DURABLE_DUE_SHARDS"),
        ({"DURABLE_TRACING": "perhaps"}, "DURABLE_TRACING"),
    ],
)
def test_bad_settings_name_the_variable(change: dict[str, str], variable: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Settings.from_env({**MINIMAL, **change})
    assert caught.value.field == variable
    assert variable in str(caught.value)


def test_a_missing_setting_is_named_when_a_function_needs_it() -> None:
    settings = Settings.from_env(MINIMAL)
    with pytest.raises(InvalidInput, match="DURABLE_WORKER_FUNCTION"):
        settings.require("worker_function", "invoking the worker")


def test_a_scaled_clock_keeps_real_durations_real() -> None:
    config = Settings.from_env({**MINIMAL, "DURABLE_TIME_SCALE": "60"}).engine_config()
    assert config.lease == timedelta(minutes=60)  # 60 real seconds of virtual time
    assert config.retention == timedelta(days=30)  # calendar time is not scaled


def test_handler_modules_compose_nothing_at_import() -> None:
    code = (
        "import sys, handlers.worker, handlers.api, handlers.sweeper, handlers.events\n"
        "import handlers.purge\n"
        "vendors = ('boto3', 'botocore', 'pynamodb', 'aws_lambda_powertools')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(vendors)))"
    )
    env = {"PATH": "/usr/bin:/bin"}  # no DURABLE_* at all: importing must not need them
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# What a deployed function's package lacks (issue 30): the template reader, pynamodb, the
# X-Ray SDK. A handler that imports one fails on AWS at its first event.
NOT_DEPLOYED = ("yaml", "pynamodb", "aws_xray_sdk")
COMPOSE_ENV = {
    **MINIMAL,
    "PATH": "/usr/bin:/bin",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "x",
    "AWS_SECRET_ACCESS_KEY": "x",
    "DURABLE_WORKER_FUNCTION": "arn:aws:lambda:us-east-1:123456789012:function:w",
    "DURABLE_SCHEDULER_GROUP": "durable-dev",
    "DURABLE_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/s",
    "DURABLE_KMS_KEY_ID": "arn:aws:kms:us-east-1:123456789012:key/k",
}


@pytest.mark.parametrize("function", ["worker", "api", "sweeper", "events", "purge"])
def test_a_composed_handler_loads_nothing_the_lambda_package_lacks(function: str) -> None:
    """GIVEN the deployed settings WHEN a handler is composed (its first event's work: the
    settings, the clients, the engine, the workflows) THEN neither PyYAML, pynamodb nor the
    X-Ray SDK was imported: the tier ``make test-deployed`` runs the built package itself;
    this catches the same mistake in the unit tier, in a second."""
    extra = "h.handler.runtime.api; h.handler.runtime.resolver\n" if function == "api" else ""
    code = (
        f"import sys, handlers.{function} as h\n"
        "h.handler._compose()\n"
        f"{extra}"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({NOT_DEPLOYED!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=COMPOSE_ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# What the worker never runs, so its cold start must not load it (issue 47: a cold start
# is import plus composition): the API and its models, the console, the CLI and durable
# dev, the events handler's SQS and EventBridge parsing, the project scaffold, the test
# kit, the YAML and JSON Schema readers; for an app with no schedule and no webhook, the
# schedules' engine and the senders' checks; the adapters of services the stack does not
# configure; boto3 itself (its resources and s3transfer), the deployment's clients being
# botocore's.
WORKER_NEVER_LOADS = (
    "durable.api",
    "durable.console",
    "durable.cli",
    "durable.local",
    "durable.ingress.event_sources",
    "durable.scaffold",
    "durable.testing",
    "yaml",
    "jsonschema",
    "durable.engine.schedules",
    "durable.core.recurrence",
    "durable.hooks",
    "durable.adapters.scheduler",
    "durable.adapters.kms",
    "durable.adapters.s3_payloads",
    "boto3",
    "s3transfer",
)


def test_the_worker_loads_only_what_it_runs() -> None:
    """GIVEN a stack without Scheduler, KMS or a payload bucket, and an app without
    schedules or webhooks WHEN the worker handler is imported, composed and answers an event
    THEN none of ``WORKER_NEVER_LOADS`` was imported: each would be paid by every cold start."""
    env = {
        **{k: v for k, v in COMPOSE_ENV.items() if "SCHEDULER" not in k and "KMS" not in k},
        "DURABLE_APP": "tests.handlers.plain_workflows:app",
    }
    code = (
        "import sys, handlers.worker as h\n"
        "assert h.handler.prepare()\n"
        "from tests.handlers.events import LambdaContext\n"
        "assert 'shout' in h.handler({'control': 'describe'}, LambdaContext())['workflows']\n"
        f"never = {WORKER_NEVER_LOADS!r}\n"
        "print(sorted(m for m in sys.modules if m.startswith(tuple(n + '.' for n in never))"
        " or m in never))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_tracing_on_without_the_xray_sdk_says_how_to_fix_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The X-Ray SDK is no longer deployed (end of support 2027-02-25): a function turned
    to DURABLE_TRACING without it fails with the fix, not an ImportError deep in Powertools."""
    from durable.ops.observability import Telemetry

    monkeypatch.setitem(sys.modules, "aws_xray_sdk", None)  # not installed
    settings = Settings.from_env({**MINIMAL, "DURABLE_TRACING": "true"})
    with pytest.raises(InvalidInput) as caught:
        Telemetry(settings, "worker")
    assert caught.value.field == "DURABLE_TRACING"
    assert "aws-lambda-powertools[tracer]" in str(caught.value)
    monkeypatch.delitem(sys.modules, "aws_xray_sdk")
    assert Telemetry(settings, "worker").tracer is not None  # with the SDK: the tracer


def test_only_bootstrap_reads_the_environment_on_the_lambda_path() -> None:
    code = (
        "import sys, handlers.worker, handlers.api, handlers.sweeper, handlers.events\n"
        "import handlers.purge\n"
        "import durable.adapters.aws_services, durable.api.routes, durable.ops.observability\n"
        "import durable.ingress.event_sources, durable.api.idempotency\n"
        "print('\\n'.join(m.__file__ for n, m in sys.modules.items()\n"
        "      if n.split('.')[0] in ('durable', 'handlers') and getattr(m, '__file__', None)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    readers = [
        Path(f).relative_to(ROOT).as_posix() for f in out.stdout.split() if _reads_env(Path(f))
    ]
    assert readers == ["durable/handlers/bootstrap.py"]


def _reads_env(path: Path) -> bool:
    """Code (not docstrings) touching ``os.environ`` / ``os.getenv`` / ``environ``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv", "putenv"}:
            return True
        imported = {a.name for a in node.names} if isinstance(node, ast.ImportFrom) else set()
        if getattr(node, "module", None) == "os" and imported & {"environ", "getenv"}:
            return True
    return False


def test_the_committed_openapi_document_is_current() -> None:
    assert (ROOT / "openapi.json").read_text() == render(), (
        "openapi.json is stale: run python -m durable.api.openapi"
    )


def test_the_api_serves_its_openapi_document(stack: Stack) -> None:
    reply = stack.call(api_event("GET", "/openapi.json"))
    assert reply.status == 200
    assert reply.body == json.loads((ROOT / "openapi.json").read_text())


def test_a_rotating_callback_secret_composes_the_current_and_previous_keys() -> None:
    # GIVEN the callback secret mid-rotation: a JSON array of keys, newest first
    from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger
    from durable.runtime import Runtime, Services, load_app

    stored = {"durable/callback": '["new-key-0123456789abcdef", "old-key-0123456789abcdef"]'}
    services = Services(
        ledger=MemoryLedger(),
        effects=MemoryEffectStore(),
        invoker=MemoryInvoker(),
        nonces=None,  # type: ignore[arg-type]  # no webhook route is called here
        secrets=stored.__getitem__,
    )
    settings = Settings.from_env({**MINIMAL, "DURABLE_CALLBACK_SECRET_NAME": "durable/callback"})
    # WHEN the composition root builds the runtime
    runtime = Runtime.build(settings, load_app(settings.app), services)
    # THEN new tokens use the first key and the others still verify
    config = runtime.engine.config
    assert config.callback_secret == b"new-key-0123456789abcdef"
    assert config.callback_verify_only_secrets == (b"old-key-0123456789abcdef",)
    assert "new-key" not in repr(config)  # keys never reach logs through a repr


def test_console_events_is_a_local_only_setting_read_from_the_environment() -> None:
    assert Settings.from_env({**MINIMAL, "DURABLE_CONSOLE_EVENTS": "true"}).console_events
    assert Settings.from_env(MINIMAL).console_events is False
    assert "console_events" in LOCAL_ONLY  # the template never sets it
