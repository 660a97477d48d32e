"""``parse_time`` on the ledger's own format (issue 47, item 6): ``datetime.fromisoformat``
against the slicing implementation it replaced, measured in the same run.

    python -m benchmarks.parse_time

The best of 7 rounds of 20,000 parses each, the two interleaved, so a busy machine slows
both alike. Issue 47 measured 1.42 us for the slicing and 0.11 us for ``fromisoformat``.
"""

from __future__ import annotations

import functools
import timeit
from collections.abc import Callable
from datetime import UTC, datetime

from durable.core.model import format_time, parse_time
from tests.unit.test_parse_time import old_parse_time

ROUNDS = 20_000
REPEAT = 7


def main() -> None:
    text = format_time(datetime(2026, 12, 6, 7, 10, 32, 224000, tzinfo=UTC))
    best: dict[str, float] = {}
    parsers: dict[str, Callable[[str], datetime]] = {
        "slicing (before)": old_parse_time,
        "fromisoformat (parse_time)": parse_time,
    }
    for _ in range(REPEAT):
        for name, parse in parsers.items():
            took = timeit.timeit(functools.partial(parse, text), number=ROUNDS)
            best[name] = min(best.get(name, took), took)
    for name, took in best.items():
        print(f"{name:28} {took / ROUNDS * 1e6:6.3f} us per parse")
    ratio = best["slicing (before)"] / best["fromisoformat (parse_time)"]
    print(f"parse_time is {ratio:.1f}x faster than the slicing it replaced")


if __name__ == "__main__":
    main()
