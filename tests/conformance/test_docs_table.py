"""docs/testing.md's conformance table says what the tests do: every ported requirement is a
row naming its tests, a pending row is an xfail and no other row is, a row that differs
is explained in its test's docstring, and the counts add up."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[1] / "docs" / "testing.md"
SECTION = "## Conformance with AWS Lambda durable functions"
TEST_NAME = re.compile(r"^test_[A-Z_]+?_(\d+)_(\d+)_")
SUITES = {
    "step": 1,
    "wait": 2,
    "child": 3,
    "callback": 4,
    "wait_for_condition": 6,
    "wait_for_callback": 7,
    "parallel": 8,
    "map": 9,
}


def _section() -> str:
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end != -1 else len(text)]


def _rows(first_cell: str) -> list[list[str]]:
    rows = []
    for line in _section().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and re.fullmatch(first_cell, cells[0]):
            rows.append(cells)
    return rows


def requirement_rows() -> list[tuple[str, list[str], str]]:
    """(id, test names, status) of each row of the requirements table."""
    return [(c[0], re.findall(r"`(test_\w+)`", c[2]), c[3]) for c in _rows(r"\d+-\d+")]


def conformance_tests() -> dict[str, Callable[..., Any]]:
    tests: dict[str, Callable[..., Any]] = {}
    for path in sorted(HERE.glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        module = importlib.import_module(f"tests.conformance.{path.stem}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("test_") and fn.__module__ == module.__name__:
                tests[name] = fn
    return tests


def xfails(fn: Callable[..., Any]) -> tuple[bool, bool]:
    """(the whole test is an xfail, some of its parameters are)."""
    marks = getattr(fn, "pytestmark", [])
    whole = any(m.name == "xfail" for m in marks)
    some = any(
        any(mark.name == "xfail" for mark in getattr(param, "marks", ()))
        for m in marks
        if m.name == "parametrize"
        for param in m.args[1]
    )
    return whole, some


def test_every_conformance_test_is_a_row_and_every_row_names_tests() -> None:
    tests = conformance_tests()
    named = [name for _, names, _ in requirement_rows() for name in names]
    assert sorted(named) == sorted(tests), "tests and table rows differ"
    for rid, names, _ in requirement_rows():
        assert names, f"row {rid} names no test"
        for name in names:
            match = TEST_NAME.match(name)
            assert match is not None and f"{match[1]}-{match[2]}" == rid, (rid, name)
            doc = inspect.getdoc(tests[name]) or ""
            assert doc.startswith(f"{rid}"), f"{name}'s docstring must start with {rid}"


def test_pending_rows_are_the_xfails() -> None:
    tests = conformance_tests()
    for rid, names, status in requirement_rows():
        marks = [xfails(tests[name]) for name in names]
        if status.startswith("pending"):
            assert all(whole for whole, _ in marks), f"{rid} is pending: mark it xfail"
            assert "issue 36 item" in status, rid
        else:
            assert not any(whole for whole, _ in marks), f"{rid} says {status!r}, not pending"
            partly = "pending" in status
            assert any(some for _, some in marks) == partly, (
                f"{rid}: a pending variant and the status must go together"
            )


def test_differing_rows_say_how_in_their_tests() -> None:
    tests = conformance_tests()
    for rid, names, status in requirement_rows():
        docs = " ".join(inspect.getdoc(tests[name]) or "" for name in names)
        assert status.split(":")[0] in ("pass", "differs", "pending") or status.startswith(
            "pass at"
        ), (rid, status)
        if status.startswith("differs"):
            assert "Differs" in docs, f"{rid} differs: its docstring must say how"
        else:
            assert "Differs" not in docs, f"{rid}'s docstring says Differs; its row does not"


def test_the_counts_add_up() -> None:
    rows = requirement_rows()
    ids = [rid for rid, _, _ in rows]
    assert len(ids) == len(set(ids))
    totals = [0, 0, 0, 0]
    for cells in _rows(r"[a-z_]+ \(\d+-x\)"):
        suite = cells[0].split(" ")[0]
        number = SUITES[suite]
        mine = [status for rid, _, status in rows if rid.split("-")[0] == str(number)]
        ids_here = sorted(int(rid.split("-")[1]) for rid in ids if rid.startswith(f"{number}-"))
        assert ids_here == list(range(1, len(ids_here) + 1)), f"{suite}: a requirement is missing"
        counted = [
            len(mine),
            sum(s.startswith("pass") for s in mine),
            sum(s.startswith("differs") for s in mine),
            sum(s.startswith("pending") for s in mine),
        ]
        assert [int(c) for c in cells[1:5]] == counted, suite
        totals = [t + c for t, c in zip(totals, counted, strict=True)]
    (total,) = _rows(r"\*\*all\*\*")
    assert [int(c.strip("*")) for c in total[1:5]] == totals
    assert totals[0] == len(rows)
