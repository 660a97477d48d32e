"""Issue 47: the locks tell the truth about what they were resolved from.

``make lock`` (infra/lock.py) writes two locks, each with a digest of its inputs in its
header: the deployed functions' (deploy/lambda/requirements.txt, from requirements.in) and
the dev and CI environment's (requirements/dev.lock, from pyproject.toml's dependencies and
extras, held to the deployed versions). A floor raised or a package added without ``make
lock`` fails here, before CI installs something the lock does not say. The tier ``make
test-lowest`` installs the floors; its test tools' floors are pyproject's.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from infra import lock

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_every_lock_was_resolved_from_its_inputs_as_they_are() -> None:
    assert lock.stale_locks() == [], "run make lock"
    assert lock.recorded_digest(lock.DEV_LOCK) == lock.digest(lock.dev_inputs())
    assert lock.recorded_digest(lock.LOCK) == lock.digest(lock.deployed_inputs())


def _copy_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    pyproject, source = tmp_path / "pyproject.toml", tmp_path / "requirements.in"
    shutil.copy(lock.PYPROJECT, pyproject)
    shutil.copy(lock.SOURCE, source)
    monkeypatch.setattr(lock, "PYPROJECT", pyproject)
    monkeypatch.setattr(lock, "SOURCE", source)
    return pyproject, source


def test_a_floor_raised_in_pyproject_without_make_lock_makes_the_dev_lock_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pyproject, _ = _copy_inputs(tmp_path, monkeypatch)
    assert lock.stale_locks() == []
    text = pyproject.read_text()
    pyproject.write_text(text.replace('"pydantic>=2.11,<3"', '"pydantic>=2.12,<3"', 1))
    assert pyproject.read_text() != text
    (stale,) = lock.stale_locks()
    assert "requirements/dev.lock" in stale


def test_a_test_tool_added_to_an_extra_makes_the_dev_lock_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pyproject, _ = _copy_inputs(tmp_path, monkeypatch)
    text = pyproject.read_text()
    pyproject.write_text(text.replace('    "pytest>=8",\n', '    "pytest>=8",\n    "tox",\n', 1))
    assert pyproject.read_text() != text
    (stale,) = lock.stale_locks()
    assert "requirements/dev.lock" in stale


def test_a_deployed_requirement_changed_without_make_lock_makes_its_lock_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, source = _copy_inputs(tmp_path, monkeypatch)
    source.write_text(source.read_text() + "requests>=2\n")
    (stale,) = lock.stale_locks()
    assert "deploy/lambda/requirements.txt" in stale
    # Comments and blank lines are no input: editing them leaves the lock current.
    source.write_text(source.read_text().removesuffix("requests>=2\n") + "\n# a note\n")
    assert lock.stale_locks() == []


def _locked(text: str) -> dict[str, set[str]]:
    """name -> the versions a lock pins (a universal lock may pin two, by Python version)."""
    found: dict[str, set[str]] = {}
    for name, version in re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", text, re.M):
        found.setdefault(lock.normalize(name), set()).add(version)
    return found


def test_the_dev_lock_is_hashed_and_holds_the_deployed_versions() -> None:
    """What the tests run is what the functions deploy: every package both locks name has
    the same version in both, and each of the dev lock's entries carries its hashes."""
    text = lock.DEV_LOCK.read_text()
    dev = _locked(text)
    entries = [e for e in re.split(r"\n(?=[A-Za-z])", text) if re.match(r"[A-Za-z]", e)]
    assert len(entries) > 100
    assert all("--hash=sha256:" in entry for entry in entries)
    deployed = lock.pins(lock.LOCK.read_text())
    for name, version in deployed.items():
        assert dev.get(name) == {version}, name
    for tool in ("pytest", "moto", "mypy", "ruff", "uv", "playwright"):
        assert tool in dev, tool


def _floors(requirements: list[str]) -> dict[str, str]:
    floors = {}
    for line in requirements:
        req = Requirement(line.split("#")[0].strip())
        lows = [s.version for s in req.specifier if s.operator == ">="]
        if lows:
            floors[lock.normalize(req.name)] = lows[0]
    return floors


def test_the_lowest_tiers_test_tools_have_pyprojects_floors() -> None:
    """requirements/lowest.in names what the handler and contract tests import besides the
    library; the tier resolves each to its floor, which must be the floor pyproject
    declares (else the tier proves a floor nobody declared)."""
    project = tomllib.loads(lock.PYPROJECT.read_text())["project"]
    declared = _floors(
        [r for reqs in project["optional-dependencies"].values() for r in reqs]
        + project["dependencies"]
    )
    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements/lowest.in").open()]
    tier = _floors([line for line in lines if line])
    assert {"moto", "pytest", "hypothesis", "stripe"} <= set(tier)
    for name, floor in tier.items():
        assert declared.get(name) == floor, name


def test_make_installs_the_dev_lock_and_ci_runs_the_lowest_tier() -> None:
    makefile = (ROOT / "Makefile").read_text()
    stamp = makefile[makefile.index("$(STAMP): ") :].split("\n\n")[0]
    assert "$(DEV_LOCK)" in stamp.splitlines()[0]  # a new lock reinstalls the venv
    assert "--constraint $(DEV_LOCK)" in stamp and "--require-hashes" in stamp
    lowest = makefile[makefile.index("test-lowest: ") :].split("\n\n")[0]
    assert "--resolution lowest-direct" in lowest and "tests/handlers tests/contract" in lowest
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test-lowest" in ci and "make .venv/.installed" in ci
