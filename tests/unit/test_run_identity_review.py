"""Interleavings that broke a run's identity promises after issue 43's changes (a
review's findings): each test failed on the code it was written against, and names the
promise it holds.

The runs are the memory ledger's, driven by ``LocalRunner`` (a fake clock).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from durable import App, Context
from durable.errors import InvalidState
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit


def chain_of(runner: LocalRunner, run_id: str) -> list[str]:
    """The ids of ``run_id``'s chain, in order."""
    ids = [run_id]
    while True:
        output = runner.get_run(ids[-1]).output
        value: Any = json.loads(output) if output else None
        if not (isinstance(value, dict) and "continued_as_new" in value):
            return ids
        ids.append(value["continued_as_new"])


def inbox_app() -> App:
    """``inbox`` takes one signal per run and continues as new, until it has four."""
    app = App()

    @app.workflow
    def inbox(ctx: Context, seen: list[str]) -> list[str]:
        got = ctx.wait_for_signal("item")
        seen = [*seen, str(got)]
        if len(seen) < 4:
            ctx.continue_as_new(seen)
        return seen

    return app


# --- at most once: a keyed signal is one signal, wherever in the chain it went -------------


def test_keyed_repeat_to_the_old_id_after_a_middle_link_took_it_is_one_signal() -> None:
    """GIVEN a keyed signal sent to a chain's first run after it continued (so it went to
    the second run), which the second run consumed before continuing itself WHEN the
    sender repeats it (its first answer was lost) to the same id THEN the repeat is the
    stored signal, not a new one delivered to the third run: the workflow sees "b" once.
    """
    runner = LocalRunner(inbox_app())
    head = runner.start("inbox", [])
    runner.run_until_idle()
    runner.signal(head.run_id, "item", "a", key="k-a")
    runner.run_until_idle()  # the first run takes "a" and continues
    first = runner.signal(head.run_id, "item", "b", key="k-b")  # forwarded to the second
    runner.run_until_idle()  # the second run takes "b" and continues
    assert len(chain_of(runner, head.run_id)) == 3
    again = runner.signal(head.run_id, "item", "b", key="k-b")
    assert again.signal_id == first.signal_id
    assert again.run_id == first.run_id
    runner.signal(head.run_id, "item", "c")
    runner.signal(head.run_id, "item", "d")
    runner.run_until_idle()
    assert runner.result(head.run_id) == ["a", "b", "c", "d"]
    # After the chain's end too: the repeat is found, a new keyed signal is refused.
    assert runner.signal(head.run_id, "item", "b", key="k-b").signal_id == first.signal_id
    with pytest.raises(InvalidState, match="chain ended"):
        runner.signal(head.run_id, "item", "e", key="k-e")
