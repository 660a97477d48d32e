"""Pins on the engine's internal signals and error summaries (durable/engine/interrupts.py).

Each test names the mutants it kills (ids of ``python -m tests.mutation --module
durable/engine/interrupts.py --list``).
"""

from __future__ import annotations

from durable.engine.interrupts import summarize


class Boom(Exception):
    pass


def test_summarize_keeps_1000_characters_and_cuts_one_more() -> None:
    """GIVEN errors whose summary is exactly 1000 and 1001 characters WHEN summarized with
    the default limit THEN the first is kept whole and the second is cut to 1000 characters
    ending in "...". Kills interrupts-47f9a9f7 (limit 1001) and interrupts-006b92a8
    (``<`` for ``<=``)."""
    prefix = "Boom: "
    exact = Boom("x" * (1000 - len(prefix)))
    over = Boom("y" * (1001 - len(prefix)))

    assert summarize(exact) == prefix + "x" * (1000 - len(prefix))
    cut = summarize(over)
    assert len(cut) == 1000
    assert cut == (prefix + "y" * (1001 - len(prefix)))[:997] + "..."


def test_summarize_under_an_explicit_limit() -> None:
    """GIVEN a limit of 10 WHEN a longer error is summarized THEN it is cut to 10
    characters; a summary of exactly 10 is kept."""
    assert summarize(Boom("abcd"), 10) == "Boom: abcd"
    assert summarize(Boom("abcde"), 10) == "Boom: a..."
