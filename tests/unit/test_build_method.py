"""Every way of building the stack makes the compiled package (issue 47): each function of
the template, this repo's and the one ``durable init`` writes, is built by
deploy/lambda/Makefile (``BuildMethod: makefile``), which a plain ``sam build`` honours as
well as ``durable sam build``; the project's Makefile is this repo's, and both build for
the CPU the template names. (The build itself: tests/deployed/test_plain_sam_build.py.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from durable.adapters.schema import load_template
from durable.scaffold import init

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "deploy" / "lambda" / "Makefile"
SCAFFOLD_MAKEFILE = (
    ROOT / "durable" / "scaffold" / "project" / "deploy" / "lambda" / "Makefile.tmpl"
)


def _functions(template: dict[str, Any]) -> dict[str, Any]:
    return {
        name: resource
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def _default_architecture(makefile: str) -> str:
    match = re.search(r"^DURABLE_ARCHITECTURE \?= (\S+)$", makefile, re.MULTILINE)
    assert match, "the Makefile names no default CPU"
    return match.group(1)


@pytest.mark.parametrize("where", ["repo", "project"])
def test_every_function_is_built_by_the_makefile_for_the_templates_cpu(
    where: str, tmp_path: Path
) -> None:
    if where == "repo":
        project = ROOT
    else:
        project = tmp_path / "order-flows"
        init(project, requirement="durable-lambda==0.1.0")
    template = load_template(project / "template.yaml")
    functions = _functions(template)
    assert len(functions) == 6
    for name, resource in functions.items():
        assert resource.get("Metadata", {}).get("BuildMethod") == "makefile", name
        code = resource["Properties"].get("CodeUri") or template["Globals"]["Function"]["CodeUri"]
        assert (project / code / "Makefile").is_file(), name
    makefile = (project / "deploy" / "lambda" / "Makefile").read_text()
    assert template["Globals"]["Function"]["Architectures"] == [{"Ref": "Architecture"}]
    architecture = template["Parameters"]["Architecture"]["Default"]
    assert _default_architecture(makefile) == architecture
    # A target for any logical id: SAM builds functions that share a build once, under
    # the first one's name, and a new function needs no new rule.
    assert re.search(r"^build-%:$", makefile, re.MULTILINE)


def test_the_projects_makefile_is_this_repos() -> None:
    assert SCAFFOLD_MAKEFILE.read_text() == MAKEFILE.read_text()


def test_the_makefile_installs_the_lock_and_compiles_for_the_runtime() -> None:
    """What makes the package what the deployed tier tests: the lock's requirements, wheels
    for the runtime's Python and CPU, then unchecked-hash bytecode for every module."""
    makefile = MAKEFILE.read_text()
    template = load_template(ROOT / "template.yaml")
    runtime = template["Globals"]["Function"]["Runtime"]
    assert f"RUNTIME_VERSION := {runtime.removeprefix('python')}" in makefile
    assert "-r requirements.txt" in makefile and "--only-binary=:all:" in makefile
    assert "--python-version $(RUNTIME_VERSION)" in makefile
    assert "compileall" in makefile and "--invalidation-mode unchecked-hash" in makefile
