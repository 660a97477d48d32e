"""The peer's map suite (requirements 9-1 to 9-20) on our API: ``ctx.map(fn, items, name=,
max_concurrency=, completion=, item_name=)`` and ``BatchResult``.

In our terms throughout, as for parallel (see test_parallel.py): no record per item (an item's
calls are recorded at paths under the map's position, and the map's decision record holds
every item's outcome); one completion rule; items never started are listed as
``canceled``; ``ok`` is the rule, ``bool(result.failed)`` the peer's status; and the map
function takes ``(ctx, item)``, without the index."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from durable import App, BatchResult, Context, RunStatus
from durable.core.model import StepKind
from tests.conformance.helpers import OVER_ITEM_LIMIT, Played, WrapCodec, play
from tests.conformance.test_parallel import projection


def outcomes_app(plan: str, completion: Any, ran: list[int]) -> App:
    """A map over one item per letter of ``plan`` ("s" succeeds, "f" raises), one at a
    time, under ``completion``; the workflow returns the projection."""
    app = App()

    def item(ctx: Context, entry: tuple[int, str]) -> str:
        index, kind = entry
        ran.append(index)
        if kind == "f":
            raise RuntimeError(f"item {index} failed")
        return f"ok-{index}"

    @app.workflow
    def outcomes(ctx: Context) -> dict[str, Any]:
        result = ctx.map(
            item, list(enumerate(plan)), name="m", max_concurrency=1, completion=completion
        )
        return projection(result)

    return app


def test_MAP_9_1_each_item_runs_a_step() -> None:
    """9-1: each item runs one step, one item at a time; results in item order."""
    app = App()

    def greet(name: str) -> str:
        return f"Hello, {name}!"

    def each(ctx: Context, name: str) -> str:
        return ctx.step(greet, name)

    @app.workflow
    def basic(ctx: Context, names: list[str]) -> list[str]:
        return ctx.map(each, names, name="map", max_concurrency=1).values()

    played = play(app, "basic", ["World", "Kiro"])
    assert played.result() == ["Hello, World!", "Hello, Kiro!"]
    assert played.shape() == [
        ("0001", "batch", "map", "DONE"),
        ("0001.0001.0001", "step", "greet", "DONE"),
        ("0001.0002.0001", "step", "greet", "DONE"),
    ]
    assert played.invocations == ["succeeded"]


def test_MAP_9_2_without_a_name() -> None:
    """9-2: no name given; each item is doubled directly, without a step.

    In our terms: the map is named "map" by default (the peer's has no name)."""
    app = App()

    def double(ctx: Context, n: int) -> int:
        return n * 2

    @app.workflow
    def unnamed(ctx: Context, items: list[int]) -> list[int]:
        return ctx.map(double, items, max_concurrency=1).values()

    played = play(app, "unnamed", [1, 2])
    assert played.result() == [2, 4]
    assert played.shape() == [("0001", "batch", "map", "DONE")]


def test_MAP_9_3_item_and_index() -> None:
    """9-3: the result of each item is the item plus its index: [10, 21, 32].

    Differs: our map function takes ``(ctx, item)``, with no index; map over
    ``enumerate(items)`` to have it."""
    app = App()

    def plus_index(ctx: Context, entry: tuple[int, int]) -> int:
        index, item = entry
        return item + index

    @app.workflow
    def indexed(ctx: Context, items: list[int]) -> list[int]:
        return ctx.map(plus_index, enumerate(items), name="indexed", max_concurrency=1).values()

    assert play(app, "indexed", [10, 20, 30]).result() == [10, 21, 32]


def test_MAP_9_4_no_items() -> None:
    """9-4: no items: the map is decided at once (recorded), all completed, empty."""
    app = App()
    reasons: list[str] = []

    def never(ctx: Context, item: Any) -> Any:
        raise AssertionError("no item to run")

    @app.workflow
    def empty(ctx: Context, items: list[Any]) -> list[Any]:
        result = ctx.map(never, items, name="empty")
        reasons.append(result.completion_reason)
        return result.values()

    played = play(app, "empty", [])
    assert played.result() == []
    assert reasons == ["all_completed"]
    assert played.shape() == [("0001", "batch", "empty", "DONE")]


def test_MAP_9_5_fail_fast_stops_at_the_first_failure() -> None:
    """9-5: tolerating no failure, item 1's failure decides the map; item 2 never starts.
    The map returns (it does not raise)."""
    ran: list[int] = []
    played = play(outcomes_app("sfs", {"tolerated_failures": 0}, ran), "outcomes")
    assert played.result() == {
        "completionReason": "failure_tolerance_exceeded",
        "hasFailure": True,
        "successCount": 1,
        "failureCount": 1,
        "totalCount": 2,
        "canceled": 1,
    }
    assert ran == [0, 1]


def test_MAP_9_6_rethrowing_the_first_failure_fails_the_run() -> None:
    """9-6: fail-fast; ``.values()`` raises ``BatchFailed`` (caused by item 0's error),
    which, uncaught, fails the run; item 1 never starts."""
    app = App()
    ran: list[int] = []

    def item(ctx: Context, index: int) -> str:
        ran.append(index)
        raise RuntimeError(f"item {index} broke")

    @app.workflow
    def throwing(ctx: Context) -> list[str]:
        return ctx.map(
            item, [0, 1], name="throwing", max_concurrency=1, completion={"tolerated_failures": 0}
        ).values()

    played = play(app, "throwing")
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "BatchFailed"
    assert "item 0 broke" in played.error_message()
    assert ran == [0]


def test_MAP_9_7_min_successful_stops_early() -> None:
    """9-7: with two successes needed, items 2 and 3 never start."""
    ran: list[int] = []
    played = play(outcomes_app("ssss", {"min_successful": 2}, ran), "outcomes")
    result = played.result()
    assert (result["completionReason"], result["successCount"], result["totalCount"]) == (
        "min_successful_reached",
        2,
        2,
    )
    assert ran == [0, 1]


def test_MAP_9_8_one_tolerated_failure_lets_every_item_run() -> None:
    """9-8: tolerating one failure, every item runs: all completed, with a failure.
    (In our terms, as parallel's 8-9: ``ok`` is True, ``bool(result.failed)`` the status.)"""
    ran: list[int] = []
    played = play(outcomes_app("sfs", {"tolerated_failures": 1}, ran), "outcomes")
    assert played.result() == {
        "completionReason": "all_completed",
        "hasFailure": True,
        "successCount": 2,
        "failureCount": 1,
        "totalCount": 3,
        "canceled": 0,
    }
    assert ran == [0, 1, 2]


def test_MAP_9_9_second_failure_exceeds_one_tolerated() -> None:
    """9-9: tolerating one failure, the second decides the map; item 2 never starts."""
    ran: list[int] = []
    played = play(outcomes_app("ffs", {"tolerated_failures": 1}, ran), "outcomes")
    result = played.result()
    assert (
        result["completionReason"],
        result["successCount"],
        result["failureCount"],
        result["totalCount"],
    ) == ("failure_tolerance_exceeded", 0, 2, 2)
    assert ran == [0, 1]


def test_MAP_9_10_failure_share_over_the_tolerated_percentage() -> None:
    """9-10: tolerating 25% of four items (one), the second failure decides the map."""
    ran: list[int] = []
    played = play(outcomes_app("ffss", {"tolerated_failures": "25%"}, ran), "outcomes")
    result = played.result()
    assert (result["completionReason"], result["failureCount"], result["totalCount"]) == (
        "failure_tolerance_exceeded",
        2,
        2,
    )
    assert ran == [0, 1]


def test_MAP_9_11_concurrent_items_keep_item_order() -> None:
    """9-11: two items at a time; the results come back in item order, though item 0
    finishes last."""
    app = App()

    def each(ctx: Context, label: str) -> str:
        if label == "r0":
            ctx.sleep(timedelta(seconds=2))
        return label

    @app.workflow
    def concurrent(ctx: Context) -> list[str]:
        return ctx.map(each, ["r0", "r1", "r2"], name="concurrent", max_concurrency=2).values()

    played = play(app, "concurrent", until=timedelta(seconds=5))
    assert played.result() == ["r0", "r1", "r2"]


def test_MAP_9_12_flat_items() -> None:
    """9-12: each item's step is recorded under the map, with no record per item.

    No option needed: there is no nesting mode, ours is always like the peer's FLAT."""
    app = App()

    def echo(label: str) -> str:
        return label

    def each(ctx: Context, label: str) -> str:
        return ctx.step(echo, label)

    @app.workflow
    def flat(ctx: Context) -> list[str]:
        return ctx.map(each, ["fa", "fb"], name="flat", max_concurrency=1).values()

    played = play(app, "flat")
    assert played.result() == ["fa", "fb"]
    assert [(r.position, r.kind) for r in played.records()] == [
        ("0001", StepKind.BATCH),
        ("0001.0001.0001", StepKind.STEP),
        ("0001.0002.0001", StepKind.STEP),
    ]


def test_MAP_9_13_item_namer() -> None:
    """9-13: ``item_name=`` names each item ("item-1", "item-2") in the map's record; the
    results are unchanged."""
    app = App()
    names: list[list[str | None]] = []

    def times_ten(ctx: Context, n: int) -> int:
        return n * 10

    @app.workflow
    def named_items(ctx: Context, items: list[int]) -> list[int]:
        result = ctx.map(
            times_ten,
            items,
            name="named-items",
            max_concurrency=1,
            item_name=lambda item, index: f"item-{item}",
        )
        names.append([i.name for i in result])
        return result.values()

    played = play(app, "named_items", [1, 2])
    assert played.result() == [10, 20]
    assert names == [["item-1", "item-2"]]
    decision = json.loads(played.records()[0].output or "{}")
    assert [i["name"] for i in decision["items"]] == ["item-1", "item-2"]


def test_MAP_9_14_custom_codec_per_item() -> None:
    """9-14: each item's result goes through a codec of the call: stored in its encoding,
    read back as it was.

    In our names: the peer's ``item_serdes=`` is ``serdes=`` on ``ctx.map``, which encodes
    each item's result (we have no codec for the whole result, see 9-19). The map's
    decision record holds each item's value as the codec wrote it."""
    app = App()

    def upper(ctx: Context, item: str) -> str:
        return item.upper()

    @app.workflow
    def coded(ctx: Context) -> list[str]:
        result: BatchResult[str] = ctx.map(
            upper, ["x", "y"], name="serdes", max_concurrency=1, serdes=WrapCodec()
        )
        return result.values()

    played = play(app, "coded")
    assert played.result() == ["X", "Y"]
    assert stored_items(played, "serdes") == ['{"wrapped": "X"}', '{"wrapped": "Y"}']


def stored_items(played: Played, name: str) -> list[str]:
    """Each item's value as the map's decision record holds it (the text its encoding
    wrote), in item order."""
    decision = played.record(name)
    assert decision.kind == StepKind.BATCH
    return [item["v"] for item in json.loads(decision.output or "{}")["items"]]


def test_MAP_9_15_wait_inside_an_item_suspends_the_map() -> None:
    """9-15: item 0 runs a step; item 1 waits 1 s, suspending the run, then runs a step.
    The replay after the wait does not run item 0's step again."""
    app = App()
    bodies: list[str] = []

    def echo(label: str) -> str:
        bodies.append(label)
        return label

    def each(ctx: Context, label: str) -> str:
        if label == "r1":
            ctx.sleep(timedelta(seconds=1))
        return ctx.step(echo, label)

    @app.workflow
    def suspend(ctx: Context) -> list[str]:
        return ctx.map(each, ["r0", "r1"], name="suspend", max_concurrency=1).values()

    played = play(app, "suspend")
    assert played.status == RunStatus.WAITING
    played.advance(seconds=1)
    assert played.result() == ["r0", "r1"]
    assert bodies == ["r0", "r1"]
    assert played.invocations == ["suspended", "succeeded"]


@pytest.mark.parametrize(
    "size",
    [
        pytest.param(70 * 1024, id="peer-size"),
        pytest.param(OVER_ITEM_LIMIT // 4, id="over-item-limit"),
    ],
)
def test_MAP_9_16_large_combined_result(size: int) -> None:
    """9-16: four items of ~70 KB each, over the peer's 256 KB checkpoint limit together;
    the map succeeds and the workflow returns counts.

    How: the peer strips the map's payload and rebuilds it by running the items again
    (ReplayChildren); ours records every item's value in the map's decision, which fits
    our 400 KB item at the peer's size. Four items of 128 KB (``over-item-limit``) go
    to the payload store (the claim check)."""
    app = App()

    def large(ctx: Context, letter: str) -> str:
        return letter * size

    @app.workflow
    def large_map(ctx: Context) -> dict[str, int]:
        result = ctx.map(large, ["a", "b", "c", "d"], name="large", max_concurrency=1)
        return {"successCount": len(result.succeeded), "totalCount": len(result)}

    assert play(app, "large_map").result() == {"successCount": 4, "totalCount": 4}


def test_MAP_9_17_wait_after_a_map_skips_it_on_replay() -> None:
    """9-17: a map of two items, then a 1-second wait: the replay after it does not run
    the items again."""
    app = App()
    ran: list[str] = []

    def upper(ctx: Context, item: str) -> str:
        ran.append(item)
        return item.upper()

    @app.workflow
    def then_wait(ctx: Context) -> list[str]:
        values = ctx.map(upper, ["a", "b"], name="then-wait", max_concurrency=1).values()
        ctx.sleep(timedelta(seconds=1))
        return values

    played = play(app, "then_wait", until=timedelta(seconds=5))
    assert played.result() == ["A", "B"]
    assert ran == ["a", "b"]
    assert played.invocations == ["suspended", "succeeded"]


def test_MAP_9_18_wait_after_a_map_with_a_tolerated_failure() -> None:
    """9-18: a map tolerating one failure (item 1 fails), not rethrown, then a wait: the
    replay after it gives the same batch result without running the items again."""
    app = App()
    ran: list[str] = []

    def each(ctx: Context, item: str) -> str:
        ran.append(item)
        if item == "fail":
            raise RuntimeError("item failed")
        return item

    @app.workflow
    def fail_then_wait(ctx: Context) -> dict[str, Any]:
        result = ctx.map(
            each,
            ["ok", "fail"],
            name="fail-then-wait",
            max_concurrency=1,
            completion={"tolerated_failures": 1},
        )
        ctx.sleep(timedelta(seconds=1))
        return projection(result)

    played = play(app, "fail_then_wait", until=timedelta(seconds=5))
    assert played.result() == {
        "completionReason": "all_completed",
        "hasFailure": True,
        "successCount": 1,
        "failureCount": 1,
        "totalCount": 2,
        "canceled": 0,
    }
    assert ran == ["ok", "fail"]
    assert played.invocations == ["suspended", "succeeded"]


class PrefixCodec:
    """The peer's "OPSERDE:" marker, put on each item (our codec on a map is per item):
    "X" is stored as "OPSERDE:X" and read back as "X"."""

    def serialize(self, value: str) -> str:
        return json.dumps("OPSERDE:" + value)

    def deserialize(self, text: str) -> str:
        stored: str = json.loads(text)
        assert stored.startswith("OPSERDE:"), stored
        return stored.removeprefix("OPSERDE:")


def _op_codec_app(wait: bool, seen: list[list[str]]) -> App:
    app = App()

    def upper(ctx: Context, item: str) -> str:
        return item.upper()

    @app.workflow
    def op_codec(ctx: Context) -> list[str]:
        result = ctx.map(
            upper, ["x", "y"], name="op-serde", max_concurrency=1, serdes=PrefixCodec()
        )
        seen.append(result.values())
        if wait:
            ctx.sleep(timedelta(seconds=1))
        return result.values()

    return app


def test_MAP_9_19_codec_for_the_whole_result() -> None:
    """9-19: a codec of the call (``serdes=``) on the map: the map's record holds each
    item's encoding ("OPSERDE:X", "OPSERDE:Y"), and the workflow gets the decoded values.

    Differs: the peer's operation-level ``serdes=`` encodes the whole map result as one
    value (stored "OPSERDE:X,Y"); we have no whole-result codec. Our ``serdes=`` on
    ``ctx.map`` is the peer's ``item_serdes=``: the map's decision record keeps each item's
    outcome on its own (status, value or error, name), so the codec encodes each item's
    value and the result is rebuilt from them, decoded."""
    seen: list[list[str]] = []
    played = play(_op_codec_app(False, seen), "op_codec")
    assert played.result() == ["X", "Y"]
    assert seen == [["X", "Y"]]
    assert stored_items(played, "op-serde") == ['"OPSERDE:X"', '"OPSERDE:Y"']


def test_MAP_9_20_codec_for_the_whole_result_read_back_on_replay() -> None:
    """9-20: as 9-19, then a wait: the replay after it decodes each recorded item
    ("OPSERDE:X", "OPSERDE:Y") through the codec and returns ["X", "Y"].

    Differs: as 9-19, the codec is per item (the peer's ``item_serdes=``), not one for the
    whole result: there is none."""
    seen: list[list[str]] = []
    played = play(_op_codec_app(True, seen), "op_codec", until=timedelta(seconds=5))
    assert played.result() == ["X", "Y"]
    assert played.invocations == ["suspended", "succeeded"]
    assert seen == [["X", "Y"], ["X", "Y"]]  # the first execution's, and the replay's
    assert stored_items(played, "op-serde") == ['"OPSERDE:X"', '"OPSERDE:Y"']
