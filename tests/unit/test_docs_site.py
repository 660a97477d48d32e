"""The documentation site: generated reference pages that follow the code, a strict build."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from durable.api.openapi import render
from durable.cli import parser

ROOT = Path(__file__).resolve().parents[2]


def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_reference_hook", ROOT / "docs" / "hooks" / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def subcommands(root: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_the_cli_page_documents_every_command_and_argument() -> None:
    page = hook().cli_markdown(parser())
    for name, sub in subcommands(parser()).items():
        assert f"## `durable {name}` {{#durable-{name}}}" in page
        assert f"[`{name}`](#durable-{name})" in page
        for action in sub._actions:
            for option in action.option_strings:
                assert option in {"-h", "--help"} or f"`{option}`" in page
    assert "| `--worker-timeout` `WORKER_TIMEOUT` | `60.0` |" in page
    assert "| `--reason` `REASON` |  | **required.** |" in page  # durable cancel
    assert "| `dir` |  | the new project's folder (missing or empty) |" in page  # durable init


def test_a_new_command_appears_without_touching_the_docs() -> None:
    """GIVEN the CLI gains a command WHEN the page is generated THEN it has its section,
    usage and arguments: nothing to update by hand."""
    root = parser()
    (action,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    new = action.add_parser("archive", help="write runs to a file")
    new.add_argument("directory", help="where to write")
    new.add_argument("--force", action="store_true", help="overwrite files")
    page = hook().cli_markdown(root)
    assert "[`archive`](#durable-archive) | write runs to a file |" in page
    assert "## `durable archive` {#durable-archive}" in page
    assert "usage: durable archive [-h] [--force] directory" in page
    assert "| `directory` |  | where to write |" in page


def test_the_http_page_documents_every_route_and_schema() -> None:
    document = json.loads(render())
    page = hook().http_markdown(document)
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"### `{method.upper()} {path}`" in page
    for name in document["components"]["schemas"]:
        assert f"### {name} {{#schema-{name}}}" in page
    assert "| `limit` | query | integer (≥ 1, ≤ 100) |" in page
    assert "| `POST` | [`/callbacks/{token}`](#post--callbacks--token) | none (token" in page


def test_every_guide_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f": {page.name}\n" in config, f"{page.name} is missing from mkdocs.yml's nav"


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="needs .[docs]")
def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    """`make docs` in miniature: a broken link, a page out of the nav, or a docstring the
    reference cannot render fails the build."""
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    cli_page = (site / "reference" / "cli" / "index.html").read_text()
    assert "durable show" in cli_page
    assert json.loads((site / "reference" / "openapi.json").read_text()) == json.loads(render())
    testing = (site / "reference" / "testing" / "index.html").read_text()
    assert "ledger.write_step_fenced" in testing  # CRASH_TARGETS, listed
    assert (site / "search" / "search_index.json").is_file()
