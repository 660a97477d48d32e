"""The API reference pages are rendered Markdown in the repository, and never stale.

docs/reference/*.md are read on GitHub and in editors as well as in the built site, so
they hold each public object's signature and docstring as text (infra/reference.py writes
them from the docstrings). A docstring changed without ``python -m infra.reference``
fails here, as a route changed without regenerating openapi.json fails its check.
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path

import griffe
import pytest

from durable import Context
from durable.testing import LocalRunner
from infra import reference

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    return reference.load()


def test_the_committed_pages_match_the_docstrings(
    package: griffe.Module, caplog: pytest.LogCaptureFixture
) -> None:
    pages = reference.pages()
    assert {page.name for page in pages} >= {"app.md", "context.md", "testing.md", "errors.md"}
    with caplog.at_level(logging.WARNING, logger="griffe"):
        for page in pages:
            text = page.read_text()
            assert reference.render_page(text, package) == text, (
                f"{page.relative_to(ROOT)} is stale: run python -m infra.reference"
            )
    # What mkdocs --strict refused before: a docstring the Google reader cannot parse.
    assert [r.getMessage() for r in caplog.records] == []


def test_no_page_is_a_generator_stub() -> None:
    for page in sorted((ROOT / "docs" / "reference").glob("*.md")):
        stubs = [line for line in page.read_text().splitlines() if line.startswith(":::")]
        assert stubs == [], f"{page.name} needs a built site to be read: {stubs}"


@pytest.mark.parametrize(("cls", "page"), [(Context, "context.md"), (LocalRunner, "testing.md")])
def test_every_documented_public_method_is_on_its_page(cls: type, page: str) -> None:
    """Checked against the live class (inspect, not the reader the generator uses): each
    public method with a docstring has its heading, its signature's parameters and its
    docstring's first line."""
    text = (ROOT / "docs" / "reference" / page).read_text()
    for name, member in vars(cls).items():
        if name.startswith("_") or not inspect.isfunction(member) or not member.__doc__:
            continue
        assert f"### `{cls.__name__}.{name}`" in text
        section = text.split(f"### `{cls.__name__}.{name}`", 1)[1].split("\n### ", 1)[0]
        for parameter in list(inspect.signature(member).parameters)[1:]:
            assert parameter in section, f"{cls.__name__}.{name}: {parameter} not shown"
        first_line = inspect.cleandoc(member.__doc__).splitlines()[0]
        assert first_line in section


def test_a_changed_docstring_makes_the_page_stale(
    tmp_path: Path, package: griffe.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN a page whose block was rendered from an older docstring WHEN checked THEN
    --check fails naming it and writes nothing; without --check the block is rewritten
    with the current docstring and the prose around it is kept."""
    page = tmp_path / "page.md"
    stale = (
        "# Title\n\nProse before.\n\n"
        "<!-- reference: durable.core.retry.RetryPolicy -->\n"
        "## `RetryPolicy`\n\nAn old docstring.\n"
        "<!-- end reference -->\n\nProse after.\n"
    )
    page.write_text(stale)
    monkeypatch.setattr(reference, "PAGES", tmp_path)
    monkeypatch.setattr(reference, "ROOT", tmp_path)
    assert reference.main(["--check"]) == 1
    assert page.read_text() == stale
    assert reference.main([]) == 0
    fresh = page.read_text()
    assert fresh.startswith("# Title\n\nProse before.\n\n") and fresh.endswith("Prose after.\n")
    assert "An old docstring." not in fresh
    assert "How often and how soon a failed step is tried again." in fresh
    assert "def next_delay(attempt: int, error: BaseException) -> timedelta | None" in fresh
    assert reference.main(["--check"]) == 0


def test_a_marker_naming_nothing_is_refused(package: griffe.Module) -> None:
    text = "<!-- reference: durable.engine.context.Nowhere -->\n<!-- end reference -->\n"
    with pytest.raises(reference.UnknownObject, match="Nowhere"):
        reference.render_page(text, package)


def test_members_are_rendered_in_the_order_the_marker_names(
    package: griffe.Module,
) -> None:
    text = (
        "<!-- reference: durable.errors members: StepFailed DurableError -->\n"
        "<!-- end reference -->\n"
    )
    rendered = reference.render_page(text, package)
    assert rendered.index("## `StepFailed`") < rendered.index("## `DurableError`")
    assert "## `TerminalError`" not in rendered
