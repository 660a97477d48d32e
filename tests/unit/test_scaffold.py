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


def _wheel(folder: Path, version: str = "0.1.0") -> Path:
    """A minimal wheel of the library that pip can resolve (metadata only)."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"durable_lambda-{version}-py3-none-any.whl"
    info = f"durable_lambda-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: durable-lambda\nVersion: {version}\n",
        )
        zf.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{info}/RECORD", "")
    return path


def test_init_writes_a_project_named_after_its_folder(tmp_path: Path) -> None:
    dest = tmp_path / "order-flows"
    wheel = _wheel(tmp_path / "dist")
    written = init(dest, requirement=f"durable-lambda @ {wheel.as_uri()}")
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
    assert project["project"]["dependencies"] == ["durable-lambda==0.1.0"]
    assert project["tool"]["durable"]["app"] == "order_flows.workflows:app"
    dev = project["project"]["optional-dependencies"]["dev"]
    assert dev[0] == "durable-lambda[local]==0.1.0"
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
    assert "durable-lambda==0.1.0\n--find-links ./wheels" in requirements
    assert (dest / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()
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


def _installed_from(monkeypatch: pytest.MonkeyPatch, direct_url: str | None) -> None:
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "distribution", lambda _: _Installed(direct_url))
    monkeypatch.setattr(scaffold, "library_version", lambda: "0.1.0")


@pytest.mark.parametrize(
    "direct_url",
    [
        '{"url": "file:///w/durable_lambda-0.1.0-py3-none-any.whl", "archive_info": {}}',
        '{"url": "file:///src/durable", "dir_info": {"editable": true}}',
        '{"url": "https://example.com/d.whl", "archive_info": {}}',
        None,
    ],
)
def test_a_new_project_pins_the_librarys_version_wherever_this_copy_came_from(
    direct_url: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _installed_from(monkeypatch, direct_url)
    assert scaffold.default_requirement() == "durable-lambda==0.1.0"


def _machine_paths(tmp_path: Path) -> list[str]:
    here = [str(tmp_path), str(Path.home()), str(ROOT), sys.prefix, "file://"]
    return [p for p in here if p not in ("", "/")]


def test_init_writes_no_path_of_this_machine_and_copies_the_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46, item 6: the project named the wheel by its absolute file:/// URL (in
    pyproject.toml, deploy/lambda/requirements.txt and the README), so it could not be
    committed and built on another machine. Now: a pin, and the wheel in wheels/."""
    wheel = _wheel(tmp_path / "dist")
    _installed_from(monkeypatch, f'{{"url": "{wheel.as_uri()}", "archive_info": {{}}}}')
    dest = tmp_path / "shop"
    init(dest)
    found = []
    for path in sorted(dest.rglob("*")):
        if path.is_symlink():
            target = os.readlink(path)
            assert not Path(target).is_absolute(), (path, target)
            continue
        if not path.is_file() or path.suffix == ".whl":
            continue
        text = path.read_text()
        found += [(str(path.relative_to(dest)), p) for p in _machine_paths(tmp_path) if p in text]
    assert found == []
    project = tomllib.loads((dest / "pyproject.toml").read_text())
    assert project["project"]["dependencies"] == ["durable-lambda==0.1.0"]
    assert [p.name for p in (dest / "wheels").iterdir()] == [wheel.name]
    assert os.readlink(dest / "deploy" / "lambda" / "wheels") == "../../wheels"
    assert "*.egg-info" in (dest / ".gitignore").read_text().split()[-1]


def test_a_library_from_the_index_needs_no_wheels_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _installed_from(monkeypatch, None)
    init(tmp_path / "shop")
    assert not (tmp_path / "shop" / "wheels").exists()
    requirements = (tmp_path / "shop" / "deploy" / "lambda" / "requirements.txt").read_text()
    assert "durable-lambda==0.1.0\n" in requirements and "--find-links" not in requirements


def test_pip_finds_the_copied_wheel_from_a_clone_elsewhere(tmp_path: Path) -> None:
    """The relative --find-links of deploy/lambda/requirements.txt resolves in a copy of the
    project made elsewhere (the original wheel gone), as SAM's copy of the folder does."""
    import shutil

    wheel = _wheel(tmp_path / "dist")
    init(tmp_path / "shop", requirement=f"durable-lambda @ {wheel.as_uri()}")
    clone = tmp_path / "elsewhere" / "shop"
    shutil.copytree(tmp_path / "shop", clone, symlinks=True)
    shutil.rmtree(tmp_path / "shop")
    shutil.rmtree(tmp_path / "dist")
    only_library = clone / "deploy" / "lambda" / "only.txt"
    lines = (clone / "deploy" / "lambda" / "requirements.txt").read_text().splitlines()
    only_library.write_text("\n".join(lines[1:3]) + "\n")  # the pin and the find-links
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--no-index",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
            str(tmp_path / "t"),
            "-r",
            str(only_library),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_wheel_that_is_not_there_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not a wheel file here"):
        init(tmp_path / "p", requirement="durable-lambda @ file:///nowhere/durable.whl")
    assert not (tmp_path / "p").exists()


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
