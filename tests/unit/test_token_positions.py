"""A name, id or key that holds a live callback token is refused at the call (issue 44,
finding 3).

Values are scrubbed of tokens on their way to storage; names, ids and keys are not and
cannot be: they are stored in clear because they identify what they name (a position's
name is compared on every replay, a key derives its run's id). So a token passed as one
was stored in clear. Every public call that takes a name, an id or a key now refuses one
holding a token with ``InvalidInput`` naming the field, before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from durable import (
    App,
    Concurrency,
    Context,
    InvalidInput,
    RunStatus,
    StepFailed,
    current_step,
)
from durable.core.tokens import make_token
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit

# A token of another run, in the shape the engine mints (``durable.core.tokens``).
TOKEN = make_token(b"a-secret-of-sixteen-bytes", "01KDVDNA00NH4Y4J45KWBET2C0", "0003", "n1")
URL = f"https://api.example.com/prod/callbacks/{TOKEN}"
NOTICE = "holds a callback token"


def stored(runner: LocalRunner) -> str:
    """Everything the runner's stores hold (ledger, effects, large values), as text."""
    return "\n".join(
        repr(vars(store)) for store in (runner.memory_ledger, runner.effect_store, runner.payloads)
    )


def double(x: int) -> int:
    return x * 2


def refused_in_workflow(call: Callable[[Context], object]) -> tuple[str | None, str, str]:
    """Run a workflow making ``call``: (the refusal's field, its message, what is stored).
    The workflow catches the refusal and succeeds, so the run's own record is written."""
    app = App()
    seen: list[tuple[str | None, str]] = []

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            call(ctx)
        except InvalidInput as e:
            seen.append((e.field, str(e)))
            return "refused"
        return "accepted"

    @app.workflow
    def child(ctx: Context) -> int:
        return 1

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert seen, f"the call was accepted (run {runner.get_run(run.run_id).status})"
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED
    field, message = seen[0]
    return field, message, stored(runner)


def _condition(ctx: Context) -> None:
    ctx.wait_for_condition(lambda: True, timedelta(seconds=1), name=TOKEN)


POSITIONS: dict[str, tuple[Callable[[Context], object], str, str]] = {
    "ctx.step name=": (lambda c: c.step(double, 2, name=TOKEN), "name", "step name"),
    "ctx.step name= (a URL)": (lambda c: c.step(double, 2, name=URL), "name", "step name"),
    "ctx.sleep name=": (lambda c: c.sleep(timedelta(seconds=1), name=TOKEN), "name", "sleep"),
    "ctx.create_callback name": (lambda c: c.create_callback(TOKEN), "name", "callback name"),
    "ctx.wait_for_callback name": (
        lambda c: c.wait_for_callback(TOKEN, submit=lambda cb: None),
        "name",
        "callback name",
    ),
    "ctx.wait_for_signal name": (lambda c: c.wait_for_signal(TOKEN), "name", "signal name"),
    "ctx.wait_for_condition name=": (_condition, "name", "condition name"),
    "ctx.parallel name=": (lambda c: c.parallel(lambda b: 1, name=TOKEN), "name", "batch"),
    "ctx.parallel branch_names=": (
        lambda c: c.parallel(lambda b: 1, branch_names=[TOKEN]),
        "branch_names",
        "branch name",
    ),
    "ctx.map name=": (lambda c: c.map(lambda b, i: i, [1], name=TOKEN), "name", "map name"),
    "ctx.map item_name=": (
        lambda c: c.map(lambda b, i: i, [1], item_name=lambda item, i: f"for {URL}"),
        "item_name",
        "item_name",
    ),
    "ctx.run_child id=": (lambda c: c.run_child("child", id=TOKEN), "id", "child's id"),
    "ctx.start_child id=": (lambda c: c.start_child("child", id=TOKEN), "id", "child's id"),
    "ctx.start_child workflow name": (lambda c: c.start_child(TOKEN), "workflow", "workflow"),
    "ctx.changed patch id": (lambda c: c.changed(TOKEN), "patch_id", "patch id"),
    "ctx.changed patch id (a URL)": (lambda c: c.changed(URL), "patch_id", "patch id"),
    "ctx.parallel branch_names= (over 100 characters)": (
        lambda c: c.parallel(lambda b: 1, branch_names=[f"{URL} {'x' * 100}"]),
        "branch_names",
        "branch name",
    ),
}


@pytest.mark.parametrize("position", sorted(POSITIONS))
def test_a_token_in_a_name_or_id_is_refused_at_the_call(position: str) -> None:
    """GIVEN a workflow passing a live callback token as a name or id
    WHEN it makes the call
    THEN the call raises InvalidInput naming the field and saying what to do, the message
    does not repeat the token, and no store holds it."""
    call, field, what = POSITIONS[position]
    got_field, message, everything = refused_in_workflow(call)
    assert got_field == field, message
    assert NOTICE in message and what in message and "SecretStr" in message
    assert TOKEN not in message
    assert TOKEN not in everything


def test_an_effect_s_action_holding_a_token_is_refused_before_its_key_is_stored() -> None:
    """The action is part of the effect's key in the idempotency table: refused in the
    step's body, which fails for good (the step's error names the action)."""
    app = App()
    calls: list[str] = []

    def call(key: str) -> str:
        calls.append(key)
        return "sent"

    def body() -> str:
        return str(current_step().effect(TOKEN, call))

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            return ctx.step(body)
        except StepFailed as e:
            return f"{e.error_type}: {e.error_message}"

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    output = runner.get_run(run.run_id).output or ""
    assert output.startswith('"InvalidInput: ') and "effect action holds a callback token" in output
    assert calls == [] and TOKEN not in stored(runner)


def test_a_decorated_step_s_name_and_a_compensation_s_are_refused() -> None:
    """A step declared with ``@app.step(name=...)`` is named at the call by its
    declaration; a compensation by its own."""
    app = App()
    named = app.step(name=TOKEN)(double)

    def forget(result: int, x: int) -> None:
        return None

    undo = app.step(name=f"undo-{TOKEN}")(forget)
    seen: list[str | None] = []

    @app.workflow
    def flow(ctx: Context) -> None:
        try:
            ctx.step(named, 1)
        except InvalidInput as e:
            seen.append(e.field)
        try:
            ctx.step(double, 1, compensate=undo)
        except InvalidInput as e:
            seen.append(e.field)

    runner = LocalRunner(app)
    runner.start("flow")
    runner.run_until_idle()
    assert seen == ["name", "compensate"]
    assert TOKEN not in stored(runner)


def test_an_async_step_s_declared_name_is_refused() -> None:
    app = App()

    @app.step(name=TOKEN)
    async def fetch(x: int) -> int:
        return x

    seen: list[str | None] = []

    @app.workflow
    async def flow(ctx: Context) -> None:
        try:
            await fetch(1)
        except InvalidInput as e:
            seen.append(e.field)

    runner = LocalRunner(app)
    runner.start("flow")
    runner.run_until_idle()
    assert seen == ["name"]
    assert TOKEN not in stored(runner)


def test_a_name_holding_this_run_s_own_callback_token_is_refused() -> None:
    """The token a run just minted, passed as a step's name: the name would have been
    stored in clear (a value holding it is redacted; a name never was)."""
    app = App()
    seen: list[str] = []

    @app.workflow
    def flow(ctx: Context) -> str:
        cb = ctx.create_callback("approval")
        seen.append(cb.token)
        try:
            ctx.step(double, 1, name=f"mail {cb.url}")
        except InvalidInput as e:
            return f"refused: {e.field}"
        return "accepted"

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == '"refused: name"'
    assert seen and seen[0] not in stored(runner)


def test_a_start_s_idempotency_key_holding_a_token_is_refused() -> None:
    app = App()

    @app.workflow
    def flow(ctx: Context) -> None:
        return None

    runner = LocalRunner(app)
    for key in (TOKEN, f"order-{TOKEN}"):
        with pytest.raises(InvalidInput, match=NOTICE) as refused:
            runner.start("flow", idempotency_key=key)
        assert refused.value.field == "idempotency_key" and TOKEN not in str(refused.value)
        with pytest.raises(InvalidInput, match=NOTICE):
            runner.engine.start_or_get("flow", None, idempotency_key=key)
    assert runner.memory_ledger._runs == {}


def test_a_signal_s_name_and_key_holding_a_token_are_refused() -> None:
    app = App()

    @app.workflow
    def flow(ctx: Context) -> Any:
        return ctx.wait_for_signal("go")

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    before = stored(runner)
    with pytest.raises(InvalidInput, match=NOTICE) as by_name:
        runner.signal(run.run_id, TOKEN, 1)
    with pytest.raises(InvalidInput, match=NOTICE) as by_key:
        runner.signal(run.run_id, "go", 1, key=TOKEN)
    assert (by_name.value.field, by_key.value.field) == ("name", "key")
    assert stored(runner) == before and TOKEN not in before


def test_a_flow_control_key_holding_a_token_is_refused_at_the_start() -> None:
    """A gate's name holds its key in clear: a key read from the input that holds a token
    refuses the start, naming the input field."""
    app = App()

    @app.workflow(concurrency=Concurrency(1, key="customer"))
    def flow(ctx: Context, order: dict[str, str]) -> None:
        return None

    runner = LocalRunner(app)
    with pytest.raises(InvalidInput, match=NOTICE) as refused:
        runner.start("flow", {"customer": f"c-{TOKEN}"})
    assert refused.value.field == "input.customer"
    assert TOKEN not in stored(runner)
