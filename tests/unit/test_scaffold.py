"""``durable init``: a project of one's own, with the layout and stack this repo uses."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from durable import cli, scaffold
from durable.errors import InvalidInput
from durable.scaffold import check_name, init, render, stack_template, with_extra

ROOT = Path(__file__).resolve().parents[2]


def test_the_stack_template_is_this_repos_own_rendered_for_a_project() -> None:
    """One template: the scaffold's, rendered with this repo's values, is template.yaml."""
    repo_values = {
        "app_reference": "examples.app:app",
        "new_layouts": "false",  # this stack ran before issue 35's layouts existed
        "code_comment": "Symlinks to durable/, handlers/ and examples/ plus requirements.txt: "
        "the package\n    # holds the code the functions run and nothing else (no tests, "
        "no local state).",
    }
    assert stack_template(repo_values) == (ROOT / "template.yaml").read_text()


def test_init_writes_a_project_named_after_its_folder(tmp_path: Path) -> None:
    dest = tmp_path / "order-flows"
    written = init(dest, requirement="durable-lambda @ file:///wheels/durable.whl")
    names = sorted(str(p.relative_to(dest)) for p in written)
    for expected in (
        ".gitignore",
        "Makefile",
        "README.md",
        "pyproject.toml",
        "samconfig.toml",
        "template.yaml",
        "stack.yaml",
        "handlers/worker.py",
        "handlers/api.py",
        "order_flows/workflows.py",
        "tests/test_workflows.py",
        "deploy/lambda/requirements.txt",
    ):
        assert expected in names
    project = tomllib.loads((dest / "pyproject.toml").read_text())
    assert project["project"]["name"] == "order-flows"
    assert project["project"]["dependencies"] == ["durable-lambda @ file:///wheels/durable.whl"]
    assert project["tool"]["durable"]["app"] == "order_flows.workflows:app"
    dev = project["project"]["optional-dependencies"]["dev"]
    assert dev[0] == "durable-lambda[local] @ file:///wheels/durable.whl"
    template = (dest / "template.yaml").read_text()
    assert "Default: order_flows.workflows:app" in template
    # a new stack writes large inputs apart from its first deploy (no older worker)
    assert "InputsApart:\n    Type: String\n" in template
    assert (
        template.split("InputsApart:", 1)[1]
        .split("AllowedValues")[0]
        .endswith('Default: "true"\n    ')
    )
    assert "{{" not in template and "examples" not in template
    requirements = (dest / "deploy/lambda/requirements.txt").read_text()
    assert "durable-lambda @ file:///wheels/durable.whl" in requirements
    # The function package links to the project's code, not the library's.
    lambda_dir = dest / "deploy" / "lambda"
    assert os.readlink(lambda_dir / "order_flows") == "../../order_flows"
    assert (lambda_dir / "handlers" / "worker.py").read_text().startswith('"""The worker')
    assert "samconfig" not in (dest / ".gitignore").read_text()
    assert 'stack_name = "order-flows"' in (dest / "samconfig.toml").read_text()


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        ("durable-lambda>=0.1.0", "durable-lambda[local]>=0.1.0"),
        ("durable-lambda @ file:///w/d.whl", "durable-lambda[local] @ file:///w/d.whl"),
        ("durable-lambda[x]==1", "durable-lambda[x,local]==1"),
    ],
)
def test_the_dev_extra_adds_the_local_extra_to_the_library(requirement: str, expected: str) -> None:
    assert with_extra(requirement, "local") == expected


@pytest.mark.parametrize(
    "bad", ["./wheels/x.whl", 'durable-lambda"\nevil = "1', "durable-lambda @ file:///a\\b"]
)
def test_a_requirement_that_would_break_the_files_is_refused_before_writing(
    bad: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidInput, match="distribution name"):
        init(tmp_path / "p", requirement=bad)
    assert not (tmp_path / "p").exists()


def test_init_refuses_a_folder_with_files_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(InvalidInput, match="not empty"):
        init(tmp_path, "flows")
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize("bad", ["1flows", "my flows", "class", "flows!", "-x"])
def test_a_name_that_cannot_be_a_package_is_refused_with_an_example(bad: str) -> None:
    with pytest.raises(InvalidInput, match=r"e\.g\. 'order-flows'"):
        check_name(bad)


def test_render_fails_loudly_on_an_unknown_placeholder() -> None:
    assert render("a {{x}} b", {"x": "1"}) == "a 1 b"
    with pytest.raises(KeyError):
        render("{{missing}}", {})


def test_the_cli_init_prints_the_next_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "shop"]) == 0
    out = capsys.readouterr().out
    assert "cd shop" in out and "make dev" in out and "make test" in out
    assert "stack.yaml" in out  # where the project's own policies and variables go
    assert (tmp_path / "shop" / "shop" / "workflows.py").exists()
    assert cli.main(["init", "shop"]) == 1
    assert "not empty" in capsys.readouterr().err


def test_dev_reads_the_app_from_the_project_or_says_how_to_give_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.project_app(tmp_path) is None
    assert cli.main(["dev"]) == 1
    assert "pass --app module:attribute" in capsys.readouterr().err
    init(tmp_path / "p", "shop")
    assert cli.project_app(tmp_path / "p") == "shop.workflows:app"
    (tmp_path / "pyproject.toml").write_text("[tool.durable\n")
    assert cli.main(["dev"]) == 1
    assert "pyproject.toml is not valid TOML" in capsys.readouterr().err


def test_the_scaffolds_own_tests_pass(tmp_path: Path) -> None:
    """The example workflow and its LocalRunner tests work as written."""
    init(tmp_path / "flows")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path / "flows",
        env={**os.environ, "PYTHONPATH": str(tmp_path / "flows")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


class _Installed:
    def __init__(self, direct_url: str | None) -> None:
        self.direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        return self.direct_url if name == "direct_url.json" else None


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        (
            '{"url": "file:///w/durable_lambda-0.1.0-py3-none-any.whl", "archive_info": {}}',
            "durable-lambda @ file:///w/durable_lambda-0.1.0-py3-none-any.whl",
        ),
        (
            '{"url": "file:///src/durable", "dir_info": {"editable": true}}',
            "durable-lambda @ file:///src/durable",
        ),
        ('{"url": "https://example.com/d.whl", "archive_info": {}}', "durable-lambda>=0.1.0"),
        (None, "durable-lambda>=0.1.0"),
    ],
)
def test_a_new_project_depends_on_the_library_where_this_copy_came_from(
    direct_url: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "distribution", lambda _: _Installed(direct_url))
    monkeypatch.setattr(scaffold, "library_version", lambda: "0.1.0")
    assert scaffold.default_requirement() == expected


def test_make_uses_the_active_virtualenv_so_nothing_is_installed_twice(tmp_path: Path) -> None:
    """The README installs the library into a virtualenv; `make test` made a second one
    and installed it all again. With a virtualenv active, make installs the project into
    it (pip skips what is there); with none, a .venv of the folder; `make clean` never
    removes a virtualenv of the user's."""
    project = tmp_path / "shop"
    project.mkdir()
    init(project, "shop")
    mine = tmp_path / "venvs" / "durable"

    def planned(target: str, env: dict[str, str]) -> str:
        # CI runs this suite from its own make, whose MAKELEVEL/MAKEFLAGS would make
        # the inner make print "Entering directory" lines around the plan.
        skip = ("VIRTUAL_ENV", "VENV", "MAKELEVEL", "MAKEFLAGS", "MFLAGS")
        clean = {k: v for k, v in os.environ.items() if k not in skip}
        done = subprocess.run(
            ["make", "--no-print-directory", "-n", target],
            cwd=project,
            env={**clean, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    active = planned("test", {"VIRTUAL_ENV": str(mine)})
    assert f'{mine}/bin/pip install --quiet -e ".[dev]"' in active
    assert f"touch {mine}/.installed-shop" in active and ".venv" not in active
    alone = planned("test", {})
    assert "python3 -m venv .venv" in alone and ".venv/bin/pip install" in alone
    assert planned("clean", {"VIRTUAL_ENV": str(mine)}).strip() == "rm -rf .venv .durable .aws-sam"


def test_the_scaffold_ships_templates_only() -> None:
    """Every file of the project scaffold is a template (``*.tmpl``): a stray file (an
    editor's backup, a patch's ``.orig``) would ship in the wheel and in every project."""
    root = ROOT / "durable" / "scaffold" / "project"
    stray = [
        p.relative_to(root)
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".tmpl"
    ]
    assert stray == []
