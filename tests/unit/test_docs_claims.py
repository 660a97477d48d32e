"""Promises the docs must keep making, where a user looks for them."""

from __future__ import annotations

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
