"""The peer's parallel suite (requirements 8-1 to 8-22) on our API: ``ctx.parallel(*branches,
name=, max_concurrency=, completion=, branch_names=)`` and ``BatchResult``.

In our terms throughout:

* the peer checkpoints a context per branch (``ContextStarted``/``ContextSucceeded``,
  SubType ParallelBranch); ours records each branch's calls at paths under the batch's
  position (``0001.0002.0001``) and one *decision* record for the batch holding every
  branch's outcome, so a branch without a durable call leaves no record of its own;
* the peer's completion config (``min_successful``, ``tolerated_failure_count``,
  ``tolerated_failure_percentage``) is one rule in ours: ``completion="all"`` (default),
  ``"first_successful"``, ``{"min_successful": n}``, ``{"tolerated_failures": n}`` or
  ``{"tolerated_failures": "25%"}``;
* ``BatchResult`` lists every branch, the ones never started as ``canceled`` (the peer
  counts only started branches in ``totalCount``); ``ok`` says the rule held (the peer's
  ``status`` says whether any branch failed: ``bool(result.failed)`` here);
  ``completion_reason`` is the peer's in lower case.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from durable import App, BatchResult, Context, RunStatus
from durable.core.model import StepKind
from tests.conformance.helpers import WrapCodec, play


def projection(result: BatchResult[Any]) -> dict[str, Any]:
    """The peer's projection of a batch result, in our terms: ``totalCount`` counts the
    branches that ran (succeeded or failed), as the peer's does."""
    return {
        "completionReason": result.completion_reason,
        "hasFailure": bool(result.failed),
        "successCount": len(result.succeeded),
        "failureCount": len(result.failed),
        "totalCount": len(result.succeeded) + len(result.failed),
        "canceled": len(result.canceled),
    }


Branch = Callable[[Context], Any]


def returns(value: Any, ran: list[int] | None = None, index: int = 0) -> Branch:
    def branch(ctx: Context) -> Any:
        if ran is not None:
            ran.append(index)
        return value

    return branch


def raises(message: str, ran: list[int] | None = None, index: int = 0) -> Branch:
    def branch(ctx: Context) -> Any:
        if ran is not None:
            ran.append(index)
        raise RuntimeError(message)

    return branch


def outcomes_app(plan: str, completion: Any, ran: list[int]) -> App:
    """A workflow running one branch per letter of ``plan`` ("s" succeeds, "f" raises),
    one at a time, under ``completion``; it returns the projection."""
    app = App()
    branches = [
        returns(f"ok-{i}", ran, i) if kind == "s" else raises(f"failed-{i}", ran, i)
        for i, kind in enumerate(plan)
    ]

    @app.workflow
    def outcomes(ctx: Context) -> dict[str, Any]:
        result = ctx.parallel(*branches, name="p", max_concurrency=1, completion=completion)
        return projection(result)

    return app


def test_PARALLEL_8_1_two_branches_each_a_step() -> None:
    """8-1: two branches, one step each, one at a time; results in branch order."""
    app = App()

    def task(label: str) -> str:
        return label

    def first(ctx: Context) -> str:
        return ctx.step(task, "task-1")

    def second(ctx: Context) -> str:
        return ctx.step(task, "task-2")

    @app.workflow
    def basic(ctx: Context) -> list[str]:
        return ctx.parallel(first, second, name="parallel", max_concurrency=1).values()

    played = play(app, "basic")
    assert played.result() == ["task-1", "task-2"]
    assert played.shape() == [
        ("0001", "batch", "parallel", "DONE"),
        ("0001.0001.0001", "step", "task", "DONE"),
        ("0001.0002.0001", "step", "task", "DONE"),
    ]
    assert played.invocations == ["succeeded"]


def test_PARALLEL_8_2_without_a_name() -> None:
    """8-2: no name given; branches return values directly.

    In our terms: the batch is named "parallel" by default (the peer's has no name)."""
    app = App()

    @app.workflow
    def unnamed(ctx: Context) -> list[str]:
        return ctx.parallel(returns("alpha"), returns("beta"), max_concurrency=1).values()

    played = play(app, "unnamed")
    assert played.result() == ["alpha", "beta"]
    assert played.shape() == [("0001", "batch", "parallel", "DONE")]


def test_PARALLEL_8_3_named_branches() -> None:
    """8-3: branches named "first" and "second" (``branch_names=``); the names are kept
    with the outcomes."""
    app = App()
    names: list[list[str | None]] = []

    @app.workflow
    def named(ctx: Context) -> list[str]:
        result = ctx.parallel(
            returns("one"),
            returns("two"),
            name="named",
            max_concurrency=1,
            branch_names=["first", "second"],
        )
        names.append([item.name for item in result])
        return result.values()

    played = play(app, "named")
    assert played.result() == ["one", "two"]
    assert names == [["first", "second"]]


def test_PARALLEL_8_4_branches_of_different_types() -> None:
    """8-4: a string, a number and an object, each read back with its own type."""
    app = App()

    def text(ctx: Context) -> str:
        return "hello"

    def number(ctx: Context) -> int:
        return 42

    def obj(ctx: Context) -> dict[str, str]:
        return {"k": "v"}

    @app.workflow
    def hetero(ctx: Context) -> list[Any]:
        return ctx.parallel(text, number, obj, name="hetero", max_concurrency=1).values()

    assert play(app, "hetero").result() == ["hello", 42, {"k": "v"}]


def test_PARALLEL_8_5_no_branches() -> None:
    """8-5: no branches: the batch is decided at once, all completed, with no results."""
    app = App()
    reasons: list[str] = []

    @app.workflow
    def empty(ctx: Context) -> list[Any]:
        result = ctx.parallel(name="empty")
        reasons.append(result.completion_reason)
        return result.values()

    played = play(app, "empty")
    assert played.result() == []
    assert reasons == ["all_completed"]
    assert played.shape() == [("0001", "batch", "empty", "DONE")]


def test_PARALLEL_8_6_fail_fast_stops_at_the_first_failure() -> None:
    """8-6: tolerating no failure, branch 1's failure decides the batch: branch 2 never
    starts. The batch returns (it does not raise)."""
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


def test_PARALLEL_8_7_rethrowing_the_first_failure_fails_the_run() -> None:
    """8-7: fail-fast again; ``.values()`` raises ``BatchFailed`` (caused by branch 0's
    error), which, uncaught, fails the run. Branch 1 never starts."""
    app = App()
    ran: list[int] = []

    @app.workflow
    def throwing(ctx: Context) -> list[Any]:
        return ctx.parallel(
            raises("branch 0 broke", ran, 0),
            returns("never", ran, 1),
            name="throwing",
            max_concurrency=1,
            completion={"tolerated_failures": 0},
        ).values()

    played = play(app, "throwing")
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "BatchFailed"
    assert "branch 0 broke" in played.error_message()
    assert ran == [0]


def test_PARALLEL_8_8_min_successful_stops_early() -> None:
    """8-8: with two successes needed, branches 2 and 3 never start."""
    ran: list[int] = []
    played = play(outcomes_app("ssss", {"min_successful": 2}, ran), "outcomes")
    result = played.result()
    assert (result["completionReason"], result["successCount"], result["totalCount"]) == (
        "min_successful_reached",
        2,
        2,
    )
    assert ran == [0, 1]


def test_PARALLEL_8_9_one_tolerated_failure_lets_every_branch_run() -> None:
    """8-9: tolerating one failure, a failure in branch 1 does not stop branch 2; all
    completed, with a failure.

    In our terms: ``ok`` is True here (the rule held); the peer's ``status`` FAILED is our
    ``bool(result.failed)``."""
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


def test_PARALLEL_8_10_second_failure_exceeds_one_tolerated() -> None:
    """8-10: tolerating one failure, the second failure decides the batch; branch 2 never
    starts."""
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


def test_PARALLEL_8_11_concurrent_branches_keep_branch_order() -> None:
    """8-11: with two branches at a time, the results come back in branch order, not in
    the order the branches finished."""
    app = App()

    def slow_first(ctx: Context) -> str:
        ctx.sleep(timedelta(seconds=2))
        return "r0"

    @app.workflow
    def concurrent(ctx: Context) -> list[str]:
        return ctx.parallel(
            slow_first, returns("r1"), returns("r2"), name="concurrent", max_concurrency=2
        ).values()

    played = play(app, "concurrent", until=timedelta(seconds=5))
    assert played.result() == ["r0", "r1", "r2"]


def test_PARALLEL_8_12_flat_branches() -> None:
    """8-12: each branch's step is recorded under the batch, with no record per branch.

    No option needed: there is no nesting mode, ours is always like the peer's FLAT (a
    branch's calls are recorded at paths under the batch, no branch context records)."""
    app = App()

    def task(label: str) -> str:
        return label

    def stepping(ctx: Context, label: str) -> str:
        return ctx.step(task, label)

    @app.workflow
    def flat(ctx: Context) -> list[str]:
        return ctx.parallel(
            functools.partial(stepping, label="fa"),
            functools.partial(stepping, label="fb"),
            name="flat",
            max_concurrency=1,
        ).values()

    played = play(app, "flat")
    assert played.result() == ["fa", "fb"]
    assert [(r.position, r.kind) for r in played.records()] == [
        ("0001", StepKind.BATCH),
        ("0001.0001.0001", StepKind.STEP),
        ("0001.0002.0001", StepKind.STEP),
    ]


def test_PARALLEL_8_13_failure_share_over_the_tolerated_percentage() -> None:
    """8-13: tolerating 25% of 4 branches (one), the second failure decides the batch;
    branches 2 and 3 never start."""
    ran: list[int] = []
    played = play(outcomes_app("ffss", {"tolerated_failures": "25%"}, ran), "outcomes")
    result = played.result()
    assert (result["completionReason"], result["failureCount"], result["totalCount"]) == (
        "failure_tolerance_exceeded",
        2,
        2,
    )
    assert ran == [0, 1]


def test_PARALLEL_8_14_branch_waits_and_the_replay_skips_the_finished_one() -> None:
    """8-14: branch 0 runs a step; branch 1 waits 2 s, suspending the run; the replay
    after the wait does not run branch 0's step again."""
    app = App()
    bodies: list[str] = []

    def task(label: str) -> str:
        bodies.append(label)
        return label

    def stepping(ctx: Context) -> str:
        return ctx.step(task, "b0")

    def waiting(ctx: Context) -> str:
        ctx.sleep(timedelta(seconds=2))
        return "b1"

    @app.workflow
    def replay(ctx: Context) -> list[str]:
        return ctx.parallel(stepping, waiting, name="replay", max_concurrency=1).values()

    played = play(app, "replay")
    assert played.status == RunStatus.WAITING
    played.advance(seconds=2)
    assert played.result() == ["b0", "b1"]
    assert bodies == ["b0"]
    assert played.invocations == ["suspended", "succeeded"]


def test_PARALLEL_8_15_custom_codec_per_branch() -> None:
    """8-15: each branch's value goes through a codec of the call: stored wrapped, read
    back as it was.

    In our names: the peer's ``item_serdes=`` is ``serdes=`` on ``ctx.parallel``, which
    encodes each branch's value (we have no codec for the whole result). The batch's
    decision record holds each branch's value as the codec wrote it."""
    app = App()

    @app.workflow
    def serde(ctx: Context) -> list[str]:
        result: BatchResult[str] = ctx.parallel(
            returns("x"), returns("y"), name="serde", max_concurrency=1, serdes=WrapCodec()
        )
        return result.values()

    played = play(app, "serde")
    assert played.result() == ["x", "y"]
    decision = played.record("serde")
    assert decision.kind == StepKind.BATCH
    stored = [item["v"] for item in json.loads(decision.output or "{}")["items"]]
    assert stored == ['{"wrapped": "x"}', '{"wrapped": "y"}']


def test_PARALLEL_8_16_every_branch_fails_within_tolerance() -> None:
    """8-16: tolerating three failures, all three branches fail and all run: all
    completed, with failures.

    In our terms: ``ok`` is True (three failures are tolerated), where the peer's status is
    FAILED; ``bool(result.failed)`` is our has-failure."""
    ran: list[int] = []
    played = play(outcomes_app("fff", {"tolerated_failures": 3}, ran), "outcomes")
    assert played.result() == {
        "completionReason": "all_completed",
        "hasFailure": True,
        "successCount": 0,
        "failureCount": 3,
        "totalCount": 3,
        "canceled": 0,
    }
    assert ran == [0, 1, 2]


def test_PARALLEL_8_17_min_successful_out_of_reach() -> None:
    """8-17: three successes needed of three branches, and branch 1 fails.

    Differs: in the peer failures never stop a min-successful batch, so branch 2 runs and
    the reason is ALL_COMPLETED. Ours decides ``{"min_successful": n}`` as soon as too few
    branches are left to reach ``n`` (docs/fan-out.md): branch 1's failure decides it
    (failure_tolerance_exceeded) and branch 2 never starts."""
    ran: list[int] = []
    played = play(outcomes_app("sfs", {"min_successful": 3}, ran), "outcomes")
    assert played.result() == {
        "completionReason": "failure_tolerance_exceeded",
        "hasFailure": True,
        "successCount": 1,
        "failureCount": 1,
        "totalCount": 2,
        "canceled": 1,
    }
    assert ran == [0, 1]


def test_PARALLEL_8_18_min_successful_and_tolerated_failures_together() -> None:
    """8-18: three successes needed of four, one failure tolerated: the second failure
    decides the batch; branches 2 and 3 never start.

    Our completion is one rule; ``{"min_successful": 3}`` over four branches tolerates
    exactly one failure, the peer's combined config."""
    ran: list[int] = []
    played = play(outcomes_app("ffss", {"min_successful": 3}, ran), "outcomes")
    result = played.result()
    assert (
        result["completionReason"],
        result["successCount"],
        result["failureCount"],
        result["totalCount"],
    ) == ("failure_tolerance_exceeded", 0, 2, 2)
    assert ran == [0, 1]


def test_PARALLEL_8_19_max_concurrency_zero_is_refused() -> None:
    """8-19: ``max_concurrency=0`` is refused (``InvalidInput``) before any branch runs,
    and fails the run."""
    app = App()
    ran: list[int] = []

    @app.workflow
    def bad_concurrency(ctx: Context) -> list[Any]:
        return ctx.parallel(
            returns("a", ran, 0), returns("b", ran, 1), name="bad", max_concurrency=0
        ).values()

    played = play(app, "bad_concurrency")
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "InvalidInput"
    assert "max_concurrency" in played.error_message()
    assert ran == [] and played.records() == []


def test_PARALLEL_8_20_batch_result_accessors() -> None:
    """8-20: one failure of three, tolerated: ``.failed`` (the peer's hasFailure),
    ``.succeeded``, ``.failed`` and ``.errors()``."""
    app = App()

    @app.workflow
    def accessors(ctx: Context) -> dict[str, Any]:
        result = ctx.parallel(
            returns("a"),
            raises("b broke"),
            returns("c"),
            name="accessors",
            max_concurrency=1,
            completion={"tolerated_failures": 1},
        )
        return {
            "hasFailure": bool(result.failed),
            "successCount": len(result.succeeded),
            "failureCount": len(result.failed),
            "errorCount": len(result.errors()),
        }

    assert play(app, "accessors").result() == {
        "hasFailure": True,
        "successCount": 2,
        "failureCount": 1,
        "errorCount": 1,
    }


def test_PARALLEL_8_21_nested_parallel() -> None:
    """8-21: a branch runs a parallel of two steps; the outer result is [["i1", "i2"]]."""
    app = App()

    def task(label: str) -> str:
        return label

    def i1(ctx: Context) -> str:
        return ctx.step(task, "i1")

    def i2(ctx: Context) -> str:
        return ctx.step(task, "i2")

    def inner(ctx: Context) -> list[str]:
        return ctx.parallel(i1, i2, name="inner", max_concurrency=1).values()

    @app.workflow
    def nested(ctx: Context) -> list[list[str]]:
        return ctx.parallel(inner, name="outer", max_concurrency=1).values()

    played = play(app, "nested")
    assert played.result() == [["i1", "i2"]]
    assert played.shape() == [
        ("0001", "batch", "outer", "DONE"),
        ("0001.0001.0001", "batch", "inner", "DONE"),
        ("0001.0001.0001.0001.0001", "step", "task", "DONE"),
        ("0001.0001.0001.0002.0001", "step", "task", "DONE"),
    ]


def test_PARALLEL_8_22_failure_share_equal_to_the_tolerated_percentage() -> None:
    """8-22: one failure of four is 25%, which does not exceed 25%: every branch runs."""
    ran: list[int] = []
    played = play(outcomes_app("fsss", {"tolerated_failures": "25%"}, ran), "outcomes")
    assert played.result() == {
        "completionReason": "all_completed",
        "hasFailure": True,
        "successCount": 3,
        "failureCount": 1,
        "totalCount": 4,
        "canceled": 0,
    }
    assert ran == [0, 1, 2, 3]
