"""Registration rules of the authoring API: clear errors at decoration time."""

from __future__ import annotations

import functools
from typing import Any, Protocol

import pytest
from pydantic import BaseModel

from durable import App, Context, RetryPolicy, WorkflowNotFound
from durable.errors import RegistrationError
from durable.testing import LocalRunner


def test_async_generators_are_refused_as_workflows_and_steps_with_a_clear_message() -> None:
    """``async def`` workflows and steps register (tests/unit/test_async_*.py); an async
    generator yields many values where one is recorded, so it is refused, by name."""
    app = App()
    with pytest.raises(RegistrationError, match="workflow 'flow' is an async generator"):

        @app.workflow
        async def flow(ctx: Context) -> Any:
            yield 1

    with pytest.raises(RegistrationError, match="step 'items' is an async generator"):

        @app.step
        async def items() -> Any:
            yield 1


def test_a_workflow_takes_ctx_and_at_most_one_input() -> None:
    app = App()
    with pytest.raises(RegistrationError, match="at most one input"):

        @app.workflow
        def two_inputs(ctx: Context, a: int, b: int) -> None: ...

    with pytest.raises(RegistrationError, match="at most one input"):

        @app.workflow
        def var_args(ctx: Context, *args: Any) -> None: ...


def test_the_same_version_cannot_be_registered_twice_but_versions_coexist() -> None:
    app = App()

    @app.workflow(name="w", version=1)
    def v1(ctx: Context) -> int:
        return 1

    @app.workflow(name="w", version=2)
    def v2(ctx: Context) -> int:
        return 2

    with pytest.raises(RegistrationError, match="already registered"):

        @app.workflow(name="w", version=2)
        def again(ctx: Context) -> int:
            return 3

    assert app.get_workflow("w").version == 2
    assert app.get_workflow("w", 1).fn is v1


def test_unknown_workflows_and_versions_name_what_exists() -> None:
    app = App()

    @app.workflow(name="known")
    def known(ctx: Context) -> None: ...

    with pytest.raises(WorkflowNotFound, match="known: known"):
        app.get_workflow("nope")
    with pytest.raises(WorkflowNotFound, match="registered: 1"):
        app.get_workflow("known", 7)


def test_lambdas_and_partials_need_a_name() -> None:
    app = App()

    def add(a: int, b: int) -> int:
        return a + b

    @app.workflow
    def flow(ctx: Context) -> int:
        return ctx.step(lambda: 1)

    @app.workflow
    def flow_partial(ctx: Context) -> int:
        return ctx.step(functools.partial(add, 1), 2)

    @app.workflow
    def flow_named(ctx: Context) -> int:
        return ctx.step(lambda: 1, name="one") + ctx.step(functools.partial(add, 1), 2, name="add")

    runner = LocalRunner(app)
    for name in ("flow", "flow_partial"):
        run = runner.start(name)
        runner.run_until_idle()
        stored = runner.get_run(run.run_id)
        assert stored.status == "FAILED"
        assert stored.error is not None and "pass name=" in stored.error.message
    run = runner.start("flow_named")
    runner.run_until_idle()
    assert runner.get_run(run.run_id).output == "4"
    assert [s.name for s in runner.history(run.run_id)] == ["one", "add"]


def test_a_decorated_step_outside_a_workflow_is_a_plain_call() -> None:
    app = App()
    calls: list[int] = []

    @app.step(retry=RetryPolicy(max_attempts=2))
    def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    assert double(4) == 8 and calls == [4]
    assert double.name.endswith("double")


def test_invalid_step_options_are_rejected() -> None:
    app = App()
    with pytest.raises(RegistrationError, match="semantics"):
        app.step(semantics="exactly_once")(lambda: 1)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)


class Signup(BaseModel):
    user_id: str


def test_the_input_annotation_is_resolved_at_registration() -> None:
    app = App()

    @app.workflow
    def flow(ctx: Context, signup: Signup) -> str:
        return signup.user_id

    wf = app.get_workflow("flow")
    assert wf.takes_input and wf.input_annotation is Signup


def test_a_step_version_is_recorded_with_its_result() -> None:
    app = App()

    @app.step(version=3)
    def price() -> int:
        return 42

    @app.workflow
    def flow(ctx: Context) -> int:
        return price()

    runner = LocalRunner(app)
    run = runner.start("flow")
    runner.run_until_idle()
    assert runner.history(run.run_id)[0].step_version == 3
    with pytest.raises(RegistrationError, match="version"):
        app.step(version=0)(lambda: 1)


def test_a_workflow_whose_first_parameter_is_an_input_is_refused_at_declaration() -> None:
    """`def greet(name: str)` was taken for a workflow with no input; each start with a
    name then failed "takes no input". Refused when declared, with the signature meant."""
    app = App()
    with pytest.raises(RegistrationError, match=r"declare it def greet\(ctx: Context, name: str\)"):

        @app.workflow
        def greet(name: str) -> str:
            return name

    with pytest.raises(RegistrationError, match="`order: _Order` looks like an input"):

        def take(order: _Order) -> None: ...

        app.workflow(take)


class _Order(BaseModel):
    id: str


class _Ctx(Protocol):
    def now(self) -> Any: ...


def test_anything_that_may_be_the_context_is_accepted() -> None:
    """The check runs at import, where a false refusal stops every handler: unannotated
    first parameters under any name, Any, object, a protocol, a union with a Context, a
    string annotation and a Context subclass all register."""
    app = App()

    class MyContext(Context):
        pass

    def unannotated(wctx):  # type: ignore[no-untyped-def]
        return None

    def any_typed(ctx: Any, n: int) -> None: ...

    def object_typed(ctx: object) -> None: ...

    def protocol_typed(ctx: _Ctx) -> None: ...

    def optional(ctx: Context | None) -> None: ...

    def quoted(ctx: NotImportedAnywhere) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    def subclass(ctx: MyContext) -> None: ...

    for fn in (unannotated, any_typed, object_typed, protocol_typed, optional, quoted, subclass):
        app.workflow(name=fn.__name__)(fn)
    assert {w.name for w in app.workflows()} >= {"unannotated", "protocol_typed", "quoted"}
