"""Promises the docs must keep making, where a user looks for them."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from durable import Context

ROOT = Path(__file__).resolve().parents[2]


def test_compensations_are_documented_as_at_least_once() -> None:
    """The compensation API and the saga docs say plainly that an undo may run again."""
    assert Context.step.__doc__ is not None and Context.compensate.__doc__ is not None
    assert "A compensation runs at least once" in " ".join(Context.step.__doc__.split())
    assert "at least once" in " ".join(Context.compensate.__doc__.split())
    sagas = (ROOT / "docs" / "sagas.md").read_text()
    assert "**A compensation runs at least once, and may run more than once.**" in sagas
    assert "[docs/sagas.md](docs/sagas.md)" in (ROOT / "README.md").read_text()


_IMPORT = re.compile(r"^\s*from (durable(?:\.\w+)*) import (\([^)]*\)|.*)$", re.M)
_ATTRIBUTE = re.compile(r"\b(durable(?:\.\w+)+)\(")


def _code(markdown: str) -> str:
    """The Python of a page's fenced code blocks."""
    return "\n".join(re.findall(r"```python\n(.*?)```", markdown, re.S))


def _resolves(dotted: str) -> bool:
    """``durable.x.Name`` is a module, or an attribute of the longest module it starts with."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(target, part):
                return False
            target = getattr(target, part)
        return True
    return False


def test_every_name_the_readme_and_docs_import_from_durable_exists() -> None:
    """A reader copies an example's imports: ``from durable import Callback`` and the like
    must name what the package has, as must a call such as ``durable.RunKeys()`` anywhere
    on a page."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    used: set[str] = set()
    for page in pages:
        text = page.read_text()
        for module, names in _IMPORT.findall(_code(text)):
            for name in re.sub(r"#.*", "", names).strip("()").split(","):
                if name.strip():
                    used.add(f"{module}.{name.split(' as ')[0].strip()}")
        used.update(_ATTRIBUTE.findall(text))  # in the prose's code spans too
    assert len(used) > 10, used  # the pages were read
    assert not sorted(n for n in used if not _resolves(n))


def test_the_names_users_annotate_with_are_exported() -> None:
    """``Callback`` (a ``submit`` function's parameter), ``ChildHandle`` and the batch
    types appear in users' annotations, so ``durable`` itself exports them."""
    import durable

    for name in ("Callback", "ChildHandle", "StepContext", "BatchResult", "Completion"):
        assert name in durable.__all__ and hasattr(durable, name), name
