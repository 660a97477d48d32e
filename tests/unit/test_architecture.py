"""The dependency rule (the core never imports boto3, botocore, pynamodb or powertools) and
the layout (durable/'s root: the public modules and the packages, each saying what it owns)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = [
    "durable",
    "durable.errors",
    "durable.core.model",
    "durable.core.retry",
    "durable.core.clock",
    "durable.core.serde",
    "durable.core.ports",
    "durable.engine.registry",
    "durable.engine.context",
    "durable.engine.execution",
    "durable.engine.engine",
    "durable.testing",
    "durable.adapters.memory",
]
VENDORS = ("boto3", "botocore", "pynamodb", "aws_lambda_powertools")


def test_importing_the_core_loads_no_vendor_sdk() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in CORE)
        + f"print(sorted(m for m in sys.modules if m.split('.')[0] in {VENDORS!r}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_errors_is_standard_library_only() -> None:
    source = (Path(__file__).resolve().parents[2] / "durable" / "errors.py").read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert all(line.split()[1].split(".")[0] in {"__future__", "datetime"} for line in imports), (
        imports
    )


# The root of durable/ holds the public modules and the packages, nothing else: a new
# module goes into the package of its concept (docs/architecture.md, "The package map").
PUBLIC_ROOT_MODULES = {
    "__init__",
    "aio",
    "aws",
    "cli",
    "errors",
    "hooks",
    "runtime",
    "settings",
    "testing",
}


def test_the_root_holds_only_the_public_modules_and_the_packages() -> None:
    root = Path(__file__).resolve().parents[2] / "durable"
    modules = {p.stem for p in root.glob("*.py")}
    assert modules == PUBLIC_ROOT_MODULES, (
        f"{sorted(modules - PUBLIC_ROOT_MODULES)} at durable/'s root: move each into the "
        "package of its concept (durable/core, durable/engine, durable/ops, ...)"
    )


def test_every_package_says_what_it_owns_and_what_it_may_import() -> None:
    root = Path(__file__).resolve().parents[2] / "durable"
    for init in sorted(root.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert doc, f"{init.parent.name}/__init__.py has no docstring"
    for name in ("core", "engine", "ops", "ingress"):
        doc = ast.get_docstring(ast.parse((root / name / "__init__.py").read_text())) or ""
        assert "May import" in doc, f"durable/{name}/__init__.py does not say what it may import"


def test_the_package_map_names_every_package() -> None:
    repo = Path(__file__).resolve().parents[2]
    page = (repo / "docs" / "architecture.md").read_text()
    table = page[page.index("## The package map") : page.index("## The life of a run")]
    for package in sorted(p.parent.name for p in (repo / "durable").glob("*/__init__.py")):
        assert f"`durable/{package}/`" in table, f"durable/{package}/ missing from the map"
