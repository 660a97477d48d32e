"""docs/testing.md's sections on asserting offloaded values and ``ctx.logger`` lines: their
examples, as written, run here (a doc that drifts from the code fails)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def example(title: str) -> dict[str, Any]:
    """Run the one Python block of the section headed ``title``; its namespace."""
    section = PAGE.read_text().split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    namespace: dict[str, Any] = {"__name__": "doc_example"}
    exec(compile(code, "docs/testing.md", "exec"), namespace)
    return namespace


def test_the_offloaded_value_example_runs() -> None:
    namespace = example("Asserting a value kept aside (`runner.payloads`)")
    # The example's own asserts ran; and the value really was over the item's threshold.
    assert len(namespace["data"]) > 64 * 1024


def test_the_logger_example_passes_as_a_test(caplog: pytest.LogCaptureFixture) -> None:
    namespace = example("Asserting what `ctx.logger` wrote")
    namespace["test_each_line_is_logged_once_with_the_runs_keys"](caplog)


def test_the_logger_example_catches_a_line_logged_again_on_replay(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example's test is not vacuous: with ``ctx.logger`` writing on replay too (as a
    plain logging call would), the same test fails."""
    from durable.engine.run_logging import WorkflowLogger

    monkeypatch.setattr(WorkflowLogger, "isEnabledFor", lambda self, level: True)
    namespace = example("Asserting what `ctx.logger` wrote")
    with pytest.raises(AssertionError):
        namespace["test_each_line_is_logged_once_with_the_runs_keys"](caplog)
