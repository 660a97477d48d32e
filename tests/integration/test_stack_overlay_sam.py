"""The SAM CLI itself on a project's merged template: a fresh ``durable init`` project
with docs/operations.md's ``stack.yaml`` (an SES statement, a SAM policy template, a
variable, a Secrets Manager secret, an SSM parameter, a queue of its own) passes ``sam
validate --lint`` and cfn-lint, as ``make validate`` runs them.

The SAM CLI is the one ``durable sam`` installs into the user cache; this test does not
install it (that needs PyPI): it skips, saying how to, when it is not there.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from durable.local import sam
from durable.scaffold import init

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def docs_example() -> str:
    """The ``stack.yaml`` of docs/operations.md, as a reader would copy it."""
    text = (ROOT / "docs" / "operations.md").read_text()
    found = re.search(r"```yaml\n# stack.yaml\n(.*?)```", text, re.S)
    assert found, "docs/operations.md lost its stack.yaml example"
    return found.group(1)


@pytest.fixture
def sam_installed() -> None:
    if not (sam.sam_home() / ".installed").exists():
        pytest.skip(
            f"the SAM CLI is not installed in {sam.sam_home()}: run "
            "`python -m durable.local.sam install` (needs PyPI) or infra/sam/validate.sh"
        )


def test_the_docs_stack_yaml_merged_into_a_fresh_project_passes_sam_validate_and_cfn_lint(
    sam_installed: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    project = tmp_path / "shop"
    init(project, requirement="durable-lambda>=0.1")
    (project / "stack.yaml").write_text(docs_example())
    monkeypatch.chdir(project)
    monkeypatch.setenv("SAM_CLI_TELEMETRY", "0")
    assert sam.run(["validate", "--lint", "--region", "us-east-1"]) == 0
    assert sam.run(["cfn-lint"]) == 0
    out = capfd.readouterr().out
    assert "template.yaml + stack.yaml -> .aws-sam/durable/template.yaml" in out, out
    assert "durable/template.yaml is a valid SAM Template" in out, out
    merged = (project / ".aws-sam/durable/template.yaml").read_text()
    assert "ses:SendEmail" in merged and "secret:partner/api-key-??????" in merged


def test_sam_validate_finds_what_only_sam_knows_in_a_stack_yaml(
    sam_installed: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A policy template SAM does not have passes the file's own checks (its form is
    right) and is caught by ``sam validate``, before any deploy."""
    project = tmp_path / "shop"
    init(project, requirement="durable-lambda>=0.1")
    (project / "stack.yaml").write_text(
        "functions:\n  worker:\n    policies:\n      - SESSendEverythingPolicy: {}\n"
    )
    monkeypatch.chdir(project)
    assert sam.run(["validate", "--region", "us-east-1"]) != 0
    captured = capfd.readouterr()
    said = captured.out + captured.err
    assert "WorkerFunction" in said and "'Policies' property is not valid" in said, said
