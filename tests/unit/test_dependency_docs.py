"""Issue 47 item 6: what the docs say about the package and its dependencies holds.

The package size is quoted in two guides, which had drifted apart; the OpenTelemetry
instructions name the OpenTelemetry packages, never the library again (a second
``durable-lambda`` requirement in the functions' package would install another copy of it);
and the floors the install section states are pyproject's.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

pytestmark = pytest.mark.unit

DOCS = Path(__file__).resolve().parents[2] / "docs"
ROOT = DOCS.parent


def _unzipped(text: str) -> set[str]:
    """The measured figures (one decimal; Lambda's 250 MiB limit is no measurement)."""
    return set(re.findall(r"(\d+\.\d) MiB unzipped", re.sub(r"\s+", " ", text)))


def test_the_guides_quote_one_package_size() -> None:
    operations = (DOCS / "operations.md").read_text()
    performance = (DOCS / "performance.md").read_text()
    assert _unzipped(operations) == _unzipped(performance)
    assert len(_unzipped(operations)) == 1
    assert not re.search(r"\d MB unzipped", operations + performance)  # one unit, MiB


def test_the_otel_instructions_name_the_opentelemetry_packages() -> None:
    text = re.sub(r"\s+", " ", (DOCS / "operations.md").read_text())
    assert "opentelemetry-api" in text
    for sentence in re.split(r"(?<=[.;:])\s", text):
        if "durable-lambda[otel]" in sentence:
            assert sentence.startswith("Name the package itself, not"), sentence


def test_the_floors_the_install_section_states_are_pyprojects() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = {}
    for requirement in map(Requirement, dependencies):
        (floor,) = [s.version for s in requirement.specifier if s.operator == ">="]
        floors[requirement.name] = floor
    text = re.sub(r"\s+", " ", (DOCS / "operations.md").read_text())
    stated = re.search(r"The library needs Python 3\.11 or newer, (.*?) at least", text)
    assert stated is not None
    sentence = stated.group(1)
    for name, label in [
        ("boto3", "boto3"),
        ("pydantic", "pydantic"),
        ("aws-lambda-powertools", "Powertools"),
        ("cryptography", "cryptography"),
    ]:
        assert re.search(rf"{label}[^,]*? {re.escape(floors[name])}\b", sentence), name
    assert floors["botocore"] == floors["boto3"] and "boto3 and botocore" in sentence
