"""The mutation targets name code that exists (tests/mutation/targets.py).

A scope is a list of qualified names; one that names nothing (the code moved or was
renamed) silently mutates nothing, and the module's score stays high on what is left.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.mutation.operators import generate
from tests.mutation.targets import TARGETS, Target

ROOT = Path(__file__).resolve().parents[2]


def _qualnames(tree: ast.Module) -> set[str]:
    """Every class and function defined in the module, nested ones included."""
    found: set[str] = set()

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{node.name}"
                found.add(name)
                visit(node.body, f"{name}.")
            elif isinstance(node, ast.If | ast.Try | ast.With):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []), prefix)

    visit(tree.body, "")
    return found


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.path)
def test_every_scope_names_existing_code(target: Target) -> None:
    """GIVEN a mutation target WHEN its module is parsed THEN the file exists, every
    qualified name in its scope is defined there, and it yields mutants."""
    path = ROOT / target.path
    assert path.is_file(), f"{target.path} does not exist"
    source = path.read_text()
    defined = _qualnames(ast.parse(source))
    missing = [name for name in target.scope if name not in defined]
    assert not missing, f"{target.path}: the scope names code that does not exist: {missing}"
    assert generate(target.path, source, target.covers), f"{target.path}: no mutants"


def test_targets_are_distinct() -> None:
    """GIVEN the targets WHEN listed THEN no module is named twice (``--module`` finds the
    first one only)."""
    paths = [t.path for t in TARGETS]
    stems = [t.stem for t in TARGETS]
    assert len(set(paths)) == len(paths)
    assert len(set(stems)) == len(stems)


def test_the_check_finds_a_missing_name() -> None:
    """GIVEN a scope naming a method that moved away WHEN checked THEN it is reported."""
    source = "class A:\n    def kept(self) -> None: ...\n\ndef f() -> None: ...\n"
    defined = _qualnames(ast.parse(source))
    assert {"A", "A.kept", "f"} <= defined
    assert "A.moved" not in defined
