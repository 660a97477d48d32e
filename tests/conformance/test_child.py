"""The peer's child-context suite (requirements 3-1 to 3-18) on our API: ``ctx.run_child``.

In our terms throughout: the peer's ``run_in_child_context`` runs a function in the same
execution, its operations checkpointed under a ``ParentId``. Our child is a run of its
own (``ctx.run_child(workflow, input)``): a registered workflow with its own ledger,
lease and retries, linked to the parent by ``RunRecord.parent`` ("<parent id>@<position>"),
its result recorded at that position of the parent's ledger (a ``child`` record). The
parent suspends while the child runs and the child's end wakes it. A failed child raises
``ChildFailed`` in the parent (the peer's ``ChildContextError``)."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest

from durable import App, ChildFailed, Context, RetryPolicy, RunStatus, StepStatus, current_step
from durable.core.model import StepKind
from durable.testing import SimulatedCrash
from tests.conformance.helpers import OVER_ITEM_LIMIT, children, play

NO_RETRY = RetryPolicy(max_attempts=1)


def test_CHILD_3_1_child_with_one_step() -> None:
    """3-1: a child runs one step returning the input; its result is the parent's."""
    app = App()

    def echo(text: str) -> str:
        return text

    @app.workflow
    def child(ctx: Context, text: str) -> str:
        return ctx.step(echo, text)

    @app.workflow
    def parent(ctx: Context, text: str) -> str:
        return ctx.run_child(child, text)

    played = play(app, "parent", "aB3dE6gH")
    assert played.result() == "aB3dE6gH"
    (record,) = played.records()
    assert (record.kind, record.status, record.output) == (
        StepKind.CHILD,
        StepStatus.DONE,
        '"aB3dE6gH"',
    )
    (kid,) = children(played)
    assert kid.parent == f"{played.run_id}@{record.position}"
    assert kid.status == RunStatus.SUCCEEDED
    assert [r.kind for r in played.runner.history(kid.run_id)] == [StepKind.STEP]


def test_CHILD_3_2_child_with_a_name() -> None:
    """3-2: a child named from the input.

    Differs: a child is named by its workflow's registered name (the parent's record is
    named "child"); the per-call name is ``id=``, the child's key within its workflow
    (``LocalRunner.run_by_key`` finds it)."""
    app = App()

    def echo(text: str) -> str:
        return text

    @app.workflow
    def child(ctx: Context, text: str) -> str:
        return ctx.step(echo, text)

    @app.workflow
    def parent(ctx: Context, event: dict[str, str]) -> str:
        return ctx.run_child(child, event["value"], id=event["name"])

    played = play(app, "parent", {"name": "nAmE1234", "value": "vAlUe567"})
    assert played.result() == "vAlUe567"
    assert [r.name for r in played.records()] == ["child"]
    (kid,) = children(played)
    assert played.runner.run_by_key("child", "nAmE1234").run_id == kid.run_id


def test_CHILD_3_3_child_with_two_sequential_steps() -> None:
    """3-3: the child's second step gets the first one's result; the child returns it."""
    app = App()

    def first(text: str) -> str:
        return text

    def second(previous: str) -> str:
        return previous

    @app.workflow
    def child(ctx: Context, text: str) -> str:
        return ctx.step(second, ctx.step(first, text))

    @app.workflow
    def parent(ctx: Context, text: str) -> str:
        return ctx.run_child(child, text)

    played = play(app, "parent", "aB3dE6gH")
    assert played.result() == "aB3dE6gH"
    (kid,) = children(played)
    assert [r.status for r in played.runner.history(kid.run_id)] == [StepStatus.DONE] * 2


def test_CHILD_3_4_failed_step_fails_the_child_and_the_run() -> None:
    """3-4: the child's step fails (no retry), the child fails, and ``ChildFailed`` left
    uncaught fails the parent."""
    app = App()

    def failing() -> str:
        raise ValueError("child step broke")

    @app.workflow
    def child(ctx: Context) -> str:
        return ctx.step(failing, retry=NO_RETRY)

    @app.workflow
    def parent(ctx: Context) -> str:
        return ctx.run_child(child)

    played = play(app, "parent")
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "ChildFailed"
    assert "child step broke" in played.error_message()
    (kid,) = children(played)
    assert kid.status == RunStatus.FAILED
    assert played.runner.history(kid.run_id)[0].status == StepStatus.TERMINAL_FAILED


def test_CHILD_3_5_caught_child_failure_then_a_recovery_step() -> None:
    """3-5: the parent catches the child's failure and a recovery step succeeds."""
    app = App()

    def failing() -> str:
        raise ValueError("child step broke")

    def recover(text: str) -> str:
        return text

    @app.workflow
    def child(ctx: Context) -> str:
        return ctx.step(failing, retry=NO_RETRY)

    @app.workflow
    def parent(ctx: Context, text: str) -> str:
        try:
            return ctx.run_child(child)
        except ChildFailed:
            return ctx.step(recover, text)

    played = play(app, "parent", "aB3dE6gH")
    assert played.result() == "aB3dE6gH"
    assert [(r.kind, r.status) for r in played.records()] == [
        (StepKind.CHILD, StepStatus.TERMINAL_FAILED),
        (StepKind.STEP, StepStatus.DONE),
    ]


def test_CHILD_3_6_nested_children() -> None:
    """3-6: an outer child runs a step and an inner child (with its own step); each
    child's result flows up to the parent."""
    app = App()

    def echo(text: str) -> str:
        return text

    @app.workflow
    def inner(ctx: Context, text: str) -> str:
        return ctx.step(echo, text)

    @app.workflow
    def outer(ctx: Context, text: str) -> str:
        ctx.step(echo, text)
        return ctx.run_child(inner, text)

    @app.workflow
    def parent(ctx: Context, text: str) -> str:
        return ctx.run_child(outer, text)

    played = play(app, "parent", "aB3dE6gH")
    assert played.result() == "aB3dE6gH"
    (outer_run,) = children(played)
    outer_records = played.runner.history(outer_run.run_id)
    assert [r.kind for r in outer_records] == [StepKind.STEP, StepKind.CHILD]
    ledger = played.runner.memory_ledger
    inner_runs = [
        r
        for r in (ledger.get_run(i) for i in ledger.all_run_ids())
        if r is not None and r.workflow == "inner"
    ]
    assert [r.parent for r in inner_runs] == [f"{outer_run.run_id}@{outer_records[1].position}"]


def test_CHILD_3_7_child_step_retried_then_succeeds() -> None:
    """3-7: the child's step fails once, is retried after its delay, and succeeds."""
    app = App()
    attempts: list[int] = []

    def flaky(text: str) -> str:
        attempts.append(current_step().attempt)
        if len(attempts) == 1:
            raise RuntimeError("transient")
        return text

    @app.workflow
    def child(ctx: Context, text: str) -> str:
        policy = RetryPolicy(max_attempts=3, initial_delay=timedelta(seconds=1), jitter="none")
        return ctx.step(flaky, text, retry=policy)

    @app.workflow
    def parent(ctx: Context, text: str) -> str:
        return ctx.run_child(child, text)

    played = play(app, "parent", "aB3dE6gH", until=timedelta(seconds=10))
    assert played.result() == "aB3dE6gH"
    assert attempts == [1, 2]


def test_CHILD_3_8_child_step_out_of_retries_fails_the_child() -> None:
    """3-8: the child's step fails on both of its 2 attempts; the child fails, and the
    parent with it."""
    app = App()
    attempts: list[int] = []

    def always_fail() -> str:
        attempts.append(current_step().attempt)
        raise RuntimeError("always")

    @app.workflow
    def child(ctx: Context) -> str:
        policy = RetryPolicy(max_attempts=2, initial_delay=timedelta(seconds=1), jitter="none")
        return ctx.step(always_fail, retry=policy)

    @app.workflow
    def parent(ctx: Context) -> str:
        return ctx.run_child(child)

    played = play(app, "parent", until=timedelta(seconds=10))
    assert played.status == RunStatus.FAILED
    assert attempts == [1, 2]
    (kid,) = children(played)
    assert kid.status == RunStatus.FAILED


def test_CHILD_3_9_replay_returns_the_childs_recorded_result() -> None:
    """3-9: a child, then a wait: the replay after the wait gets the child's result from
    the parent's record, without running the child again."""
    app = App()
    bodies: list[str] = []

    def echo(text: str) -> str:
        bodies.append(text)
        return text

    @app.workflow
    def child(ctx: Context, text: str) -> str:
        return ctx.step(echo, text)

    @app.workflow
    def parent(ctx: Context, text: str) -> str:
        value = ctx.run_child(child, text)
        ctx.sleep(timedelta(seconds=1))
        return value

    played = play(app, "parent", "aB3dE6gH", until=timedelta(seconds=5))
    assert played.result() == "aB3dE6gH"
    assert bodies == ["aB3dE6gH"]
    assert len(children(played)) == 1
    assert [r.kind for r in played.records()] == [StepKind.CHILD, StepKind.SLEEP]


def test_CHILD_3_10_child_with_a_step_and_a_wait() -> None:
    """3-10: a child runs a step then waits; it ends after the wait, and so does the
    parent."""
    app = App()

    def echo(text: str) -> str:
        return text

    @app.workflow
    def child(ctx: Context, text: str) -> str:
        value = ctx.step(echo, text)
        ctx.sleep(timedelta(seconds=1))
        return value

    @app.workflow
    def parent(ctx: Context, text: str) -> str:
        return ctx.run_child(child, text)

    played = play(app, "parent", "aB3dE6gH")
    (kid,) = children(played)
    assert kid.status == RunStatus.WAITING and played.status == RunStatus.WAITING
    played.advance(seconds=1)
    assert played.result() == "aB3dE6gH"
    assert [r.kind for r in played.runner.history(kid.run_id)] == [StepKind.STEP, StepKind.SLEEP]


@pytest.mark.parametrize(
    "size",
    [
        pytest.param(300 * 1024, id="peer-size"),
        pytest.param(OVER_ITEM_LIMIT, id="over-item-limit"),
    ],
)
def test_CHILD_3_11_child_with_a_large_result(size: int, caplog: pytest.LogCaptureFixture) -> None:
    """3-11: a child builds a result over the peer's 256 KB checkpoint limit from a small
    step's result; the parent gets it whole after a wait and a replay.

    Differs: the peer re-runs such a child on replay (ReplayChildren, so its log line
    appears twice); we record the child's result (it fits our 400 KB item) and log once.
    A result over our item limit (``over-item-limit``) goes to the payload store."""
    app = App()

    def seed(text: str) -> str:
        return text[:1]

    @app.workflow
    def child(ctx: Context, text: str) -> str:
        ctx.logger.info("child got %s", text)
        return ctx.step(seed, text) * size

    @app.workflow
    def parent(ctx: Context, text: str) -> int:
        value = ctx.run_child(child, text)
        ctx.sleep(timedelta(seconds=1))
        return len(value)

    with caplog.at_level(logging.INFO):
        played = play(app, "parent", "aB3dE6gH", until=timedelta(seconds=5))
    assert played.result() == size
    assert [r.getMessage() for r in caplog.records].count("child got aB3dE6gH") == 1


def test_CHILD_3_12_child_interrupted_in_a_step_runs_it_again() -> None:
    """3-12: the worker dies inside the child's step body; the worker that takes the child
    over after its lease runs the step again, and it succeeds.

    Our default semantics (``at_least_once``) writes the step once, after its body: there
    is no record of the interrupted attempt, as the peer has no second ``StepStarted``."""
    app = App()
    bodies: list[str] = []

    def echo(text: str) -> str:
        bodies.append(text)
        if len(bodies) == 1:
            raise SimulatedCrash("the Lambda runtime exits")
        return text

    @app.workflow
    def child(ctx: Context, text: str) -> str:
        return ctx.step(echo, text)

    @app.workflow
    def parent(ctx: Context, text: str) -> str:
        return ctx.run_child(child, text)

    played = play(app, "parent", "aB3dE6gH", until=timedelta(minutes=5))
    assert played.result() == "aB3dE6gH"
    assert bodies == ["aB3dE6gH", "aB3dE6gH"]
    (kid,) = children(played)
    (step,) = played.runner.history(kid.run_id)
    assert (step.status, step.attempt) == (StepStatus.DONE, 1)


def test_CHILD_3_13_child_with_only_a_wait_then_a_step_outside() -> None:
    """3-13: a child that only waits; after it ends, the parent runs a step."""
    app = App()

    def echo(text: str) -> str:
        return text

    @app.workflow
    def child(ctx: Context, text: str) -> str:
        ctx.sleep(timedelta(seconds=1))
        return text

    @app.workflow
    def parent(ctx: Context, text: str) -> str:
        ctx.run_child(child, text)
        return ctx.step(echo, text)

    played = play(app, "parent", "aB3dE6gH", until=timedelta(seconds=5))
    assert played.result() == "aB3dE6gH"
    assert [r.kind for r in played.records()] == [StepKind.CHILD, StepKind.STEP]


class UpperOnRead:
    """A codec for a child's result, which the parent's codec only decodes: the stored
    text upper-cased on the way out; never asked to encode."""

    def serialize(self, value: str) -> str:
        raise AssertionError("a child's result is encoded by its own annotation")

    def deserialize(self, text: str) -> str:
        stored: str = json.loads(text)
        return stored.upper()


def test_CHILD_3_14_child_with_a_custom_codec() -> None:
    """3-14: a child run with a codec of the call (``serdes=``): the parent gets its
    result through the codec, upper-cased.

    Differs: the peer's codec encodes the child context's result (upper-cased on the way
    in, stored "HELLO CHILD"). Our child is a workflow of its own: it stores its result by
    its own return annotation ("hello child", the same in the child's run and in the
    parent's child record) and the parent's codec only decodes that stored JSON into the
    value the parent gets, so the upper-casing sits in ``deserialize`` here, and
    ``serialize`` is never called (nor is the child's input encoded by it)."""
    app = App()

    def echo(text: str) -> str:
        return text

    @app.workflow
    def child(ctx: Context, text: str) -> str:
        return ctx.step(echo, text)

    @app.workflow
    def parent(ctx: Context, text: str) -> str:
        return ctx.run_child(child, text, serdes=UpperOnRead())

    played = play(app, "parent", "hello child")
    assert played.result() == "HELLO CHILD"
    (kid,) = children(played)
    assert kid.input == '"hello child"'
    assert kid.output == '"hello child"'
    assert played.record("child").output == '"hello child"'


def test_CHILD_3_15_child_raises_without_a_durable_call() -> None:
    """3-15: the child's own code raises before any step; the child fails with no step
    records, and the parent fails with ``ChildFailed``."""
    app = App()

    @app.workflow
    def child(ctx: Context) -> str:
        raise ValueError("raised in the child's body")

    @app.workflow
    def parent(ctx: Context) -> str:
        return ctx.run_child(child)

    played = play(app, "parent")
    assert played.status == RunStatus.FAILED
    assert played.error_type() == "ChildFailed"
    (kid,) = children(played)
    assert kid.status == RunStatus.FAILED
    assert played.runner.history(kid.run_id) == []


def test_CHILD_3_16_child_returns_none() -> None:
    """3-16: a child returns None without a durable call; the parent returns None."""
    app = App()

    @app.workflow
    def child(ctx: Context) -> None:
        return None

    @app.workflow
    def parent(ctx: Context) -> None:
        return ctx.run_child(child)

    played = play(app, "parent")
    assert played.status == RunStatus.SUCCEEDED
    assert played.result() is None


def test_CHILD_3_17_child_that_only_logs_is_not_run_again_on_replay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """3-17: a child that only logs (``ctx.logger``) and returns; the parent's replay after
    a wait does not run it again, so the line is logged once."""
    app = App()

    @app.workflow
    def child(ctx: Context, text: str) -> str:
        ctx.logger.info("child logged %s", text)
        return text

    @app.workflow
    def parent(ctx: Context, text: str) -> str:
        value = ctx.run_child(child, text)
        ctx.sleep(timedelta(seconds=1))
        return value

    with caplog.at_level(logging.INFO):
        played = play(app, "parent", "aB3dE6gH", until=timedelta(seconds=5))
    assert played.result() == "aB3dE6gH"
    assert [r.getMessage() for r in caplog.records].count("child logged aB3dE6gH") == 1


def test_CHILD_3_18_step_and_wait_inside_then_step_and_wait_after() -> None:
    """3-18: a child runs a step and a wait; then the parent runs a step and a wait of its
    own; the parent ends after both waits."""
    app = App()
    bodies: list[str] = []

    def echo(text: str) -> str:
        bodies.append(text)
        return text

    @app.workflow
    def child(ctx: Context, text: str) -> str:
        value = ctx.step(echo, text)
        ctx.sleep(timedelta(seconds=1))
        return value

    @app.workflow
    def parent(ctx: Context, text: str) -> str:
        ctx.run_child(child, text)
        value = ctx.step(echo, text)
        ctx.sleep(timedelta(seconds=1))
        return value

    played = play(app, "parent", "aB3dE6gH", until=timedelta(seconds=10))
    assert played.result() == "aB3dE6gH"
    assert bodies == ["aB3dE6gH", "aB3dE6gH"]  # once inside the child, once after it
    assert [r.kind for r in played.records()] == [StepKind.CHILD, StepKind.STEP, StepKind.SLEEP]
