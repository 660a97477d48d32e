"""``stack.yaml``: a project's own policies, variables and secrets, merged at build time.

The merge (``durable.local.overlay``), its refusals (the field and the fix, nothing
written), ``durable sam``'s use of it (build, validate and cfn-lint get the merged
template; a deploy of a build that is not of the current files is refused) and ``durable
dev``'s (the same variables for the workers; secrets created locally from the shell).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from durable import cli
from durable.local import overlay, sam
from durable.local.overlay import OverlayError
from durable.scaffold import init

ONBOARDING = """\
functions:
  worker:
    policies:
      - Sid: SendWelcomeEmail
        Effect: Allow
        Action: ses:SendEmail
        Resource:
          Fn::Sub: arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:identity/example.com
      - SESCrudPolicy: {IdentityName: example.com}
    environment:
      WELCOME_FROM: hello@example.com
      WELCOME_STAGE: !Ref Stage
      RETRIES: 3
    secrets:
      PARTNER_API_KEY_SECRET: partner/api-key
      SLACK_TOKEN_PARAM: ssm:/shop/slack-token
parameters:
  WelcomeDomain: {Type: String, Default: example.com}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    init(tmp_path / "shop", requirement="durable-lambda>=0.1")
    return tmp_path / "shop"


def _resources(path: Path) -> dict[str, Any]:
    data = overlay.load_cfn(path.read_text(), path.name)
    resources: dict[str, Any] = data["Resources"]
    return resources


def test_durable_init_writes_a_stack_yaml_of_examples_that_adds_nothing(project: Path) -> None:
    text = (project / "stack.yaml").read_text()
    assert "functions:" in text and "secrets:" in text  # the examples, commented
    template, added, _ = overlay.read(project)
    assert added.functions == {} and not any(added.sections.values())
    merged = overlay.merge(template, added)
    assert merged == template


def test_the_merge_adds_to_the_named_function_alone(project: Path) -> None:
    (project / "stack.yaml").write_text(ONBOARDING)
    made = overlay.write_merged(project)
    assert made.path == (project / ".aws-sam/durable/template.yaml").resolve()
    resources = _resources(made.path)
    worker = resources["WorkerFunction"]["Properties"]
    variables = worker["Environment"]["Variables"]
    assert variables["WELCOME_FROM"] == "hello@example.com"
    assert variables["WELCOME_STAGE"] == {"Ref": "Stage"}
    assert variables["RETRIES"] == "3"
    # A secret's variable holds its name; the role may read exactly that secret.
    assert variables["PARTNER_API_KEY_SECRET"] == "partner/api-key"
    assert variables["SLACK_TOKEN_PARAM"] == "/shop/slack-token"
    assert variables["DURABLE_MAX_HOPS"] == "1000"  # the library's own stay
    policies = worker["Policies"]
    assert policies[0]["Statement"][0]["Sid"] == "Ledger"  # the library's first
    assert policies[1]["Statement"][0]["Action"] == "ses:SendEmail"
    assert policies[2] == {"SESCrudPolicy": {"IdentityName": "example.com"}}
    (secret, parameter) = policies[3]["Statement"]
    assert secret["Action"] == "secretsmanager:GetSecretValue"
    assert secret["Resource"]["Fn::Sub"].endswith(":secret:partner/api-key-??????")
    assert parameter["Action"] == ["ssm:GetParameter", "ssm:GetParameters"]
    assert parameter["Resource"]["Fn::Sub"].endswith(":parameter/shop/slack-token")
    for other in ("ApiFunction", "EventsFunction", "SweeperFunction", "PurgeFunction"):
        props = resources[other]["Properties"]
        assert "WELCOME_FROM" not in props.get("Environment", {}).get("Variables", {})
        assert "ses:SendEmail" not in str(props["Policies"])
    data = overlay.load_cfn(made.path.read_text(), "merged")
    assert data["Parameters"]["WelcomeDomain"]["Default"] == "example.com"
    # The short tags came out in their full form, and the code folder still resolves.
    assert data["Globals"]["Function"]["CodeUri"] == "../../deploy/lambda/"
    assert (made.path.parent / "../../deploy/lambda/requirements.txt").resolve().is_file()
    assert resources["LedgerTable"]["Properties"]["TableName"] == {
        "Fn::Sub": "durable-ledger-${Stage}"
    }
    assert overlay.recorded_digest(made.path) == made.digest
    assert "stack.yaml" not in (project / "template.yaml").read_text()  # untouched


def test_a_full_secret_arn_is_granted_with_and_without_its_suffix(project: Path) -> None:
    arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:shared/partner"
    (project / "stack.yaml").write_text(f"functions:\n  worker:\n    secrets:\n      K: {arn}\n")
    template, added, _ = overlay.read(project)
    policies = overlay.merge(template, added)["Resources"]["WorkerFunction"]["Properties"][
        "Policies"
    ]
    assert policies[-1]["Statement"][0]["Resource"] == [arn, f"{arn}-??????"]
    assert added.functions["WorkerFunction"].secrets["K"].local_name == "shared/partner"


@pytest.mark.parametrize(
    ("text", "where", "fix"),
    [
        ("functions:\n  wroker: {}\n", "functions.wroker", "its functions are api, deploy-hook"),
        ("function:\n  worker: {}\n", "function", "takes functions:, parameters:"),
        (
            "functions:\n  worker:\n    env: {A: b}\n",
            "functions.worker.env",
            "takes policies, environment, secrets",
        ),
        (
            "functions:\n  worker:\n    policies:\n      - {Effect: Allow, Action: ses:Send}\n",
            "functions.worker.policies[0]",
            "it has no Resource",
        ),
        (
            "functions:\n  worker:\n    policies:\n      SESCrudPolicy: {IdentityName: x}\n",
            "functions.worker.policies",
            "expected a list",
        ),
        (
            "functions:\n  worker:\n    policies:\n      - {SESCrud: {IdentityName: x}}\n",
            "functions.worker.policies[0]",
            "SAM policy template",
        ),
        (
            "functions:\n  worker:\n    secrets:\n      API_KEY: sk_live_51HxQz8ExampleKey00\n",
            "functions.worker.secrets.API_KEY",
            "looks like the secret's value, not its name",
        ),
        (
            "functions:\n  worker:\n    secrets:\n      KEY: 9f8A7b6C5d4E3f2A1b0C9d8E7f6A\n",
            "functions.worker.secrets.KEY",
            "looks like the secret's value",
        ),
        (
            "functions:\n  worker:\n    environment:\n      KEY: 9f8A7b6C5d4E3f2A1b0C9d8E7f6A\n",
            "functions.worker.environment.KEY",
            "Store it in Secrets Manager",
        ),
        (
            "functions:\n  worker:\n    environment:\n      DURABLE_LOG_LEVEL: DEBUG\n",
            "functions.worker.environment.DURABLE_LOG_LEVEL",
            "the library's settings",
        ),
        (
            "functions:\n  worker:\n    environment:\n      AWS_REGION: eu-west-1\n",
            "functions.worker.environment.AWS_REGION",
            "reserved",
        ),
        (
            "functions:\n  worker:\n    environment: {K: a}\n    secrets: {K: partner/key}\n",
            "functions.worker.secrets.K",
            "also under environment",
        ),
        (
            "functions:\n  worker:\n    secrets:\n      K: arn:aws:s3:::bucket/key\n",
            "functions.worker.secrets.K",
            "not a Secrets Manager ARN",
        ),
        (
            "functions:\n  worker:\n    secrets:\n      K: my key\n",
            "functions.worker.secrets.K",
            "letters, digits and / _ + = . @ - only",
        ),
        (
            "resources:\n  LedgerTable: {Type: AWS::SQS::Queue}\n",
            "resources.LedgerTable",
            "already has resource LedgerTable",
        ),
        ("parameters:\n  Extra: {Default: x}\n", "parameters.Extra", "needs Type:"),
        ("functions: [worker]\n", "functions", "expected a mapping"),
        ("functions:\n  worker:\n    policies: [\n", "(file)", "not valid YAML"),
    ],
)
def test_a_mistake_names_the_field_and_the_fix_and_writes_nothing(
    project: Path, text: str, where: str, fix: str
) -> None:
    (project / "stack.yaml").write_text(text)
    with pytest.raises(OverlayError) as caught:
        overlay.write_merged(project)
    message = str(caught.value)
    assert message.startswith(f"stack.yaml: {where}: "), message
    assert fix in message, message
    assert not (project / ".aws-sam").exists()


def test_a_write_on_every_resource_or_every_action_is_warned(project: Path) -> None:
    (project / "stack.yaml").write_text(
        textwrap.dedent("""\
        functions:
          worker:
            policies:
              - {Effect: Allow, Action: [ses:SendEmail], Resource: "*"}
              - {Effect: Allow, Action: "s3:*", Resource: arn:aws:s3:::b/*}
              - {Effect: Allow, Action: [ses:GetSendQuota], Resource: "*"}
        """)
    )
    _, added, _ = overlay.read(project)
    (everywhere, every_action) = added.warnings
    assert "policies[0]: Resource '*' lets ses:SendEmail act on every resource" in everywhere
    assert "policies[1]: Action 's3:*' allows every action" in every_action


def test_names_of_secrets_and_plain_settings_pass(project: Path) -> None:
    """The checks for pasted values leave names, paths, URLs and words alone."""
    (project / "stack.yaml").write_text(
        textwrap.dedent("""\
        functions:
          worker:
            environment:
              S3_KEY_PREFIX: uploads/2024/onboarding/
              API_TOKEN_URL: https://auth.partner.example/oauth2/token
              SIGNING_KEY_ID: partner-signing-key-2024
            secrets:
              PARTNER_API_KEY_SECRET: prod/partner-api-key-eu-west-1
        """)
    )
    _, added, _ = overlay.read(project)
    assert set(added.functions["WorkerFunction"].environment) == {
        "S3_KEY_PREFIX",
        "API_TOKEN_URL",
        "SIGNING_KEY_ID",
    }


# --- durable sam ---------------------------------------------------------------------------


class _Done:
    returncode = 0


@pytest.fixture
def sam_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **_: object) -> _Done:
        calls.append(cmd)
        return _Done()

    monkeypatch.setattr(sam, "ensure_sam", lambda: tmp_path / "venv/bin/sam")
    monkeypatch.setattr("durable.local.sam.subprocess.run", fake_run)
    return calls


def test_sam_validate_and_cfn_lint_get_the_merged_template(
    project: Path, sam_calls: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    (project / "stack.yaml").write_text(ONBOARDING)
    assert sam.run(["validate", "--lint"]) == 0
    assert sam.run(["cfn-lint"]) == 0
    assert sam.run(["cfn-lint", "template.yaml"]) == 0  # files named: linted as named
    merged = ".aws-sam/durable/template.yaml"
    config = str((project / "samconfig.toml").resolve())
    assert sam_calls[0][1:] == [
        "validate",
        "--template-file",
        merged,
        "--config-file",
        config,
        "--lint",
    ]
    assert sam_calls[1][1:] == [merged] and sam_calls[1][0].endswith("cfn-lint")
    assert sam_calls[2][1:] == ["template.yaml"]
    assert (project / merged).is_file()


def test_sam_build_with_a_template_named_builds_that_one_merged(
    project: Path, sam_calls: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project.parent)
    monkeypatch.setattr(sam, "find_runtime_python", lambda: None)
    (project / "stack.yaml").write_text(ONBOARDING)
    assert sam.with_overlay(["build", "-t", "shop/template.yaml", "--cached"]) == [
        "build",
        "-t",
        "shop/.aws-sam/durable/template.yaml",
        "--cached",
    ]


def test_without_a_stack_yaml_sam_runs_as_given(
    project: Path, sam_calls: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    (project / "stack.yaml").unlink()
    assert sam.run(["validate", "--lint"]) == 0
    assert sam.run(["deploy", "--guided"]) == 0
    assert sam.run(["cfn-lint"]) == 0
    assert [c[1:] for c in sam_calls] == [
        ["validate", "--lint"],
        ["deploy", "--guided"],
        ["template.yaml"],
    ]
    assert not (project / ".aws-sam").exists()


def test_a_bad_stack_yaml_stops_the_build_before_sam_runs(
    project: Path,
    sam_calls: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project)
    (project / "stack.yaml").write_text("functions:\n  wroker: {}\n")
    assert cli.main(["sam", "build"]) == 1
    assert "error: stack.yaml: functions.wroker: the stack has no such function" in (
        capsys.readouterr().err
    )
    assert sam_calls == []


def test_a_deploy_refuses_a_build_that_is_not_of_the_current_files(
    project: Path, sam_calls: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    (project / "stack.yaml").write_text(ONBOARDING)
    with pytest.raises(sam.SamError, match=r"nothing built to deploy: run `durable sam build`"):
        sam.run(["deploy"])
    built = project / ".aws-sam/build/template.yaml"
    built.parent.mkdir(parents=True)
    built.write_text((project / "template.yaml").read_text())  # a bare sam build
    with pytest.raises(sam.SamError, match=r"was not built with stack\.yaml"):
        sam.run(["deploy"])
    # What sam build writes keeps the merged template's Metadata.
    built.write_text(overlay.write_merged(project).path.read_text())
    assert sam.run(["deploy", "--no-confirm-changeset"]) == 0
    assert sam.run(["package", "--s3-bucket", "b"]) == 0
    (project / "stack.yaml").write_text(ONBOARDING.replace("hello@", "welcome@"))
    with pytest.raises(sam.SamError, match=r"changed since .* was built: run `durable sam build`"):
        sam.run(["deploy"])
    with pytest.raises(sam.SamError, match=r"was not built with stack\.yaml"):
        sam.run(["deploy", "--template-file", "template.yaml"])
    assert [c[1] for c in sam_calls] == ["deploy", "package"]


# --- durable dev ---------------------------------------------------------------------------


def test_dev_gives_the_functions_their_variables_and_secret_names(project: Path) -> None:
    (project / "stack.yaml").write_text(
        ONBOARDING.replace(
            "      RETRIES: 3\n",
            "      RETRIES: 3\n"
            '      QUEUE_ARN: !Sub "arn:aws:sqs:${AWS::Region}:${AWS::AccountId}:q-${Stage}"\n'
            "      TOPIC: !GetAtt WelcomeTopic.TopicArn\n",
        )
    )
    found = overlay.local_functions(project, {"WELCOME_FROM": "me@localhost"})
    worker = found["WorkerFunction"]
    assert worker.environment == {
        "WELCOME_FROM": "me@localhost",  # the shell wins
        "WELCOME_STAGE": "dev",
        "RETRIES": "3",
        "QUEUE_ARN": "arn:aws:sqs:us-east-1:123456789012:q-dev",
        "PARTNER_API_KEY_SECRET": "partner/api-key",
        "SLACK_TOKEN_PARAM": "/shop/slack-token",
    }
    (note,) = worker.notes
    assert note.startswith("TOPIC: durable dev cannot work out") and "set TOPIC" in note
    assert set(worker.secrets) == {"PARTNER_API_KEY_SECRET", "SLACK_TOKEN_PARAM"}


def test_dev_without_a_stack_yaml_adds_nothing(tmp_path: Path) -> None:
    assert overlay.local_functions(tmp_path, {}) == {}


def test_dev_creates_the_secrets_from_the_shell_and_says_which_it_could_not(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from moto import mock_aws

    from durable.local.server import DevOptions, DevServer

    (project / "stack.yaml").write_text(ONBOARDING)
    own = overlay.local_functions(project, {})
    monkeypatch.setenv("DURABLE_LOCAL_SECRET_PARTNER_API_KEY_SECRET", "test-key")
    server = DevServer(DevOptions(app="shop.workflows:app", state_dir=tmp_path / "s", own=own))
    with mock_aws():
        server._create_own_secrets()
        got = boto3.client("secretsmanager").get_secret_value(SecretId="partner/api-key")
        assert got["SecretString"] == "test-key"
        monkeypatch.setenv("DURABLE_LOCAL_SECRET_PARTNER_API_KEY_SECRET", "rotated")
        server._create_own_secrets()  # a restart with another value
        got = boto3.client("secretsmanager").get_secret_value(SecretId="partner/api-key")
        assert got["SecretString"] == "rotated"
        monkeypatch.setenv("DURABLE_LOCAL_SECRET_SLACK_TOKEN_PARAM", "xoxb-local")
        server._create_own_secrets()
        parameter = boto3.client("ssm").get_parameter(Name="/shop/slack-token", WithDecryption=True)
        assert parameter["Parameter"]["Value"] == "xoxb-local"
    notes = own["WorkerFunction"].notes
    assert any("export DURABLE_LOCAL_SECRET_SLACK_TOKEN_PARAM=" in n for n in notes)
    assert server._own_env("WorkerFunction")["WELCOME_FROM"] == "hello@example.com"
    banner = "\n".join(server._own_banner())
    assert "stack.yaml   worker: PARTNER_API_KEY_SECRET, RETRIES" in banner


def test_dev_refuses_a_bad_stack_yaml_in_one_line(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    (project / "stack.yaml").write_text("functions:\n  worker:\n    environment: {AWS_X: y}\n")
    assert cli.main(["dev"]) == 1
    assert "error: stack.yaml: functions.worker.environment.AWS_X: reserved" in (
        capsys.readouterr().err
    )
