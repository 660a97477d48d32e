"""Custom codecs per call (``serdes=``, ``durable.Serdes``; issue 36 item 5): a user's
encoding for a type pydantic does not cover, on every call that records a value, with
the replay guarantee of the default encoding (the first execution returns what a replay
decodes), clear terminal errors when the codec fails, on every ledger."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

from durable import (
    App,
    BatchResult,
    Context,
    EngineConfig,
    InvalidInput,
    RetryPolicy,
    RunStatus,
    Serdes,
    SerdesError,
    StepFailed,
)
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker
from durable.core.clock import FakeClock
from durable.core.model import StepKind, StepStatus
from durable.engine.engine import Engine
from durable.testing import LocalRunner


class Money:
    """A value class pydantic knows nothing of (no schema): only a codec stores it."""

    __slots__ = ("cents", "currency")

    def __init__(self, cents: int, currency: str) -> None:
        self.cents, self.currency = cents, currency

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and (other.cents, other.currency) == (
            self.cents,
            self.currency,
        )

    def __hash__(self) -> int:
        return hash((self.cents, self.currency))

    def __repr__(self) -> str:
        return f"Money({self.cents}, {self.currency!r})"


class MoneyCodec:
    """Writes the amount as a JSON string ("12.50 EUR"); the currency is upper-cased on
    the way in, so the first execution's value differs from the body's unless it was
    decoded from the stored text, as a replay's is."""

    def serialize(self, value: Money) -> str:
        return json.dumps(f"{value.cents // 100}.{value.cents % 100:02d} {value.currency.upper()}")

    def deserialize(self, data: str) -> Money:
        amount, currency = json.loads(data).split()
        units, cents = amount.split(".")
        return Money(int(units) * 100 + int(cents), currency)


CODEC: Serdes[Money] = MoneyCodec()
STORED = '"12.50 EUR"'  # what the ledger keeps for Money(1250, "eur")


class Refuses:
    """A codec that cannot encode (a bug in the user's codec, a value it does not take)."""

    def serialize(self, value: Money) -> str:
        raise ValueError("no currency table for 'eur'")

    def deserialize(self, data: str) -> Money:
        raise AssertionError("never stored")


class NotJson:
    def serialize(self, value: Money) -> str:
        return f"{value.cents} {value.currency}"  # text, but not JSON

    def deserialize(self, data: str) -> Money:
        raise AssertionError("never stored")


class Forgets:
    """Writes what MoneyCodec writes, and cannot read it back (a codec changed by a deploy)."""

    def serialize(self, value: Money) -> str:
        return MoneyCodec().serialize(value)

    def deserialize(self, data: str) -> Money:
        raise KeyError("format v2 expected")


def price() -> Money:
    return Money(1250, "eur")


def replayed(runner: LocalRunner, run_id: str) -> None:
    """Run to the end, one durable call per invocation, so each value is read back from
    the ledger by a replay after the invocation that recorded it."""
    runner.run_until_idle()
    runner.advance(hours=1)
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED, runner.get_run(run_id).error


def one_call_per_invocation(app: App) -> LocalRunner:
    return LocalRunner(
        app,
        config=EngineConfig(inprocess_wait_threshold=timedelta(0), steps_per_invocation=1),
    )


# --- round trips, per call ------------------------------------------------------------


def test_a_step_stores_its_codecs_text_and_returns_the_decoded_value_first_and_on_replay() -> None:
    """GIVEN a step whose result (a class pydantic cannot encode) has a codec WHEN the run
    records it and replays it THEN the ledger holds the codec's JSON text, and the workflow
    got the decoded value (upper-cased currency) on the first execution and on every
    replay alike."""
    seen: list[Money] = []
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        money = ctx.step(price, name="price", serdes=CODEC)
        seen.append(money)
        ctx.sleep(timedelta(minutes=1))
        return repr(money)

    runner = one_call_per_invocation(app)
    run_id = runner.start("flow").run_id
    replayed(runner, run_id)
    assert runner.history(run_id)[0].output == STORED
    assert len(seen) >= 2 and set(seen) == {Money(1250, "EUR")}
    assert runner.result(run_id) == "Money(1250, 'EUR')"


def test_without_a_codec_the_same_step_fails_for_good_pointing_at_serdes() -> None:
    """GIVEN the same step without ``serdes=`` (pydantic has no schema for its class)
    WHEN it runs, with retries allowed THEN it fails at its first attempt, saying to give
    the call a codec: pydantic's schema error is a RuntimeError, which was retried (the
    body ran again each time) to the same end."""
    runs: list[int] = []
    app = App()

    def counted() -> Money:
        runs.append(1)
        return price()

    @app.workflow
    def flow(ctx: Context) -> str:
        return repr(ctx.step(counted, name="price", retry=RetryPolicy(max_attempts=3)))

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.advance(minutes=5)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert "give the call a codec (serdes=" in run.error.message
    assert runs == [1]


def test_an_app_step_given_a_codec_at_the_call_uses_it() -> None:
    """GIVEN a decorated step passed to ``ctx.step`` with ``serdes=`` THEN the codec
    applies to it as to a plain function."""
    app = App()

    @app.step
    def quote(cents: int) -> Money:
        return Money(cents, "usd")

    @app.workflow
    def flow(ctx: Context) -> int:
        return ctx.step(quote, 705, serdes=CODEC).cents

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.result(run_id) == 705
    assert runner.history(run_id)[0].output == '"7.05 USD"'


def test_a_map_and_a_parallel_encode_each_branch_by_the_codec() -> None:
    """GIVEN a map and a parallel with ``serdes=`` WHEN they are decided and replayed THEN
    each branch's value is stored in the decision as the codec's text and comes back
    decoded, the same on the first execution as on a replay."""
    seen: list[list[Money]] = []
    app = App()

    def in_cents(c: Context, cents: int) -> Money:
        return Money(cents, "eur")

    @app.workflow
    def flow(ctx: Context) -> list[int]:
        mapped: BatchResult[Money] = ctx.map(in_cents, [100, 250], name="m", serdes=CODEC)
        both = ctx.parallel(
            lambda c: Money(1, "gbp"), lambda c: Money(2, "chf"), name="p", serdes=CODEC
        )
        seen.append([*mapped.values(), *both.values()])
        ctx.sleep(timedelta(minutes=1))
        return [m.cents for m in seen[-1]]

    runner = one_call_per_invocation(app)
    run_id = runner.start("flow").run_id
    replayed(runner, run_id)
    expected = [Money(100, "EUR"), Money(250, "EUR"), Money(1, "GBP"), Money(2, "CHF")]
    assert len(seen) >= 2 and all(values == expected for values in seen)
    batches = [s for s in runner.history(run_id) if s.kind == StepKind.BATCH]
    stored = [item["v"] for b in batches for item in json.loads(b.output or "{}")["items"]]
    assert stored == ['"1.00 EUR"', '"2.50 EUR"', '"0.01 GBP"', '"0.02 CHF"']


def test_a_childs_result_is_decoded_by_the_parents_codec() -> None:
    """GIVEN a child workflow that returns the JSON form ("12.50 EUR", a str) WHEN the
    parent runs it with ``serdes=`` (``run_child``, and ``start_child``'s handle) THEN the
    parent gets the decoded value, from the child's stored result."""
    app = App()

    @app.workflow
    def quote(ctx: Context, cents: int) -> str:
        return f"{cents // 100}.{cents % 100:02d} EUR"

    @app.workflow
    def parent(ctx: Context) -> list[str]:
        waited = ctx.run_child(quote, 1250, serdes=CODEC)
        handle = ctx.start_child("quote", 7, serdes=CODEC)
        later = handle.result()
        return [repr(waited), repr(later)]

    runner = LocalRunner(app)
    run_id = runner.start("parent").run_id
    runner.run_until_idle()
    assert runner.result(run_id) == ["Money(1250, 'EUR')", "Money(7, 'EUR')"]


def test_a_distributed_maps_results_are_decoded_by_the_codec() -> None:
    app = App()

    @app.workflow
    def quote(ctx: Context, cents: int) -> str:
        return f"{cents // 100}.{cents % 100:02d} EUR"

    @app.workflow
    def parent(ctx: Context) -> list[str]:
        result = ctx.map(quote, [5, 600], name="quotes", distributed=True, serdes=CODEC)
        return [repr(m) for m in result.values()]

    runner = LocalRunner(app)
    run_id = runner.start("parent").run_id
    runner.run_until_idle()
    assert runner.result(run_id) == ["Money(5, 'EUR')", "Money(600, 'EUR')"]


def test_a_callbacks_answer_is_decoded_by_the_codec() -> None:
    """GIVEN ``create_callback`` and ``wait_for_callback`` with ``serdes=`` WHEN each is
    answered with JSON THEN ``result()`` returns what the codec decodes of its text, the
    same after a replay."""
    tokens: list[str] = []
    seen: list[Money] = []
    app = App()

    def send(cb: Any) -> None:
        tokens.append(cb.token)

    @app.workflow
    def flow(ctx: Context) -> list[str]:
        cb = ctx.create_callback("quote", serdes=CODEC)
        ctx.step(send, cb, name="send")
        first = cb.result()
        second = ctx.wait_for_callback("counter", submit=send, serdes=CODEC)
        seen.extend([first, second])
        return [repr(first), repr(second)]

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.complete_callback(tokens[0], "3.10 usd")
    runner.run_until_idle()
    runner.complete_callback(tokens[1], "0.99 jpy")
    runner.run_until_idle()
    assert runner.result(run_id) == ["Money(310, 'usd')", "Money(99, 'jpy')"]
    assert seen[-2:] == [Money(310, "usd"), Money(99, "jpy")]


def test_a_callback_takes_result_type_or_a_codec_not_both() -> None:
    app = App()

    @app.workflow
    def flow(ctx: Context) -> Any:
        return ctx.create_callback("x", result_type=int, serdes=CODEC)  # type: ignore[call-overload]

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    error = runner.get_run(run_id).error
    assert error is not None and "result_type= " in error.message and "not both" in error.message


def test_a_conditions_result_and_state_are_stored_by_the_codec() -> None:
    """GIVEN a stateless and a stateful condition with ``serdes=`` WHEN they poll, park
    and are met THEN the state recorded between polls and each result are the codec's
    text, and the run goes on from the decoded state."""
    polls: list[Money] = []
    app = App()

    def ready() -> Money:
        return Money(5, "eur")

    def grow(state: Money) -> Money:
        polls.append(state)
        return Money(state.cents + 100, state.currency)

    @app.workflow
    def flow(ctx: Context) -> list[str]:
        met = ctx.wait_for_condition(ready, timedelta(seconds=10), name="ready", serdes=CODEC)
        grown = ctx.wait_for_condition(
            grow,
            timedelta(seconds=10),
            name="grow",
            initial_state=Money(0, "eur"),
            until=lambda m: m.cents >= 300,
            serdes=CODEC,
        )
        return [repr(met), repr(grown)]

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.advance(minutes=5)
    assert runner.result(run_id) == ["Money(5, 'EUR')", "Money(300, 'EUR')"]
    # Each poll after the first started from the state the last park recorded, decoded.
    assert polls == [Money(0, "eur"), Money(100, "EUR"), Money(200, "EUR")]
    outputs = [s.output for s in runner.history(run_id)]
    assert outputs == ['"0.05 EUR"', '"3.00 EUR"']


def test_a_stateful_conditions_checks_see_the_decoded_state_without_parking_too() -> None:
    """GIVEN a stateful condition with a codec that normalizes (upper-cases the currency)
    and polls short enough to wait in memory WHEN it checks several times without parking
    THEN each check and ``until`` see the state the codec decodes, as after a park (a
    replay would): not the previous check's raw value."""
    polls: list[Money] = []
    decided: list[Money] = []
    app = App()

    def grow(state: Money) -> Money:
        polls.append(state)
        return Money(state.cents + 100, state.currency.lower())

    def enough(m: Money) -> bool:
        decided.append(m)
        return m.cents >= 300

    @app.workflow
    def flow(ctx: Context) -> str:
        grown = ctx.wait_for_condition(
            grow,
            timedelta(seconds=1),
            name="grow",
            backoff=1.0,
            initial_state=Money(0, "eur"),
            until=enough,
            serdes=CODEC,
        )
        return repr(grown)

    runner = LocalRunner(app, config=EngineConfig(inprocess_wait_threshold=timedelta(minutes=1)))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    assert runner.result(run_id) == "Money(300, 'EUR')"
    assert polls == [Money(0, "eur"), Money(100, "EUR"), Money(200, "EUR")]
    assert decided == [Money(100, "EUR"), Money(200, "EUR"), Money(300, "EUR")]
    assert runner.history(run_id)[0].attempt == 3  # three checks, in one invocation


# --- failures --------------------------------------------------------------------------


def test_a_codec_that_cannot_encode_fails_the_step_for_good_naming_it() -> None:
    """GIVEN a step whose codec raises, with retries allowed WHEN it runs THEN it fails
    for good at its first attempt (a codec does not get better by retrying):
    ``StepFailed`` with error type SerdesError, naming the step and the codec."""
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            ctx.step(price, name="price", retry=RetryPolicy(max_attempts=5), serdes=Refuses())
        except StepFailed as e:
            return f"{e.error_type}|{e.attempts}|{e.error_message}"
        return "stored"

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    kind, attempts, message = runner.result(run_id).split("|", 2)
    assert (kind, attempts) == ("SerdesError", "1")
    assert "step 'price'" in message and "codec Refuses could not encode" in message
    assert "no currency table" in message
    assert runner.history(run_id)[0].status == StepStatus.TERMINAL_FAILED


def test_a_codec_that_writes_text_that_is_not_json_is_refused() -> None:
    app = App()

    @app.workflow
    def flow(ctx: Context) -> str:
        return repr(ctx.step(price, name="price", serdes=NotJson()))

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert "codec NotJson.serialize returned text that is not JSON" in run.error.message
    assert runner.history(run_id)[0].output is None  # nothing stored


def test_a_recorded_value_its_codec_cannot_decode_on_replay_fails_clearly() -> None:
    """GIVEN a step recorded by a codec WHEN a deploy replaces the codec by one that
    cannot read that text, and the run replays THEN the run fails with SerdesError naming
    the step, its position and the codec (not a bare KeyError)."""

    def make(codec: Serdes[Money]) -> App:
        app = App()

        @app.workflow(name="flow")
        def flow(ctx: Context) -> str:
            money = ctx.step(price, name="price", serdes=codec)
            ctx.sleep(timedelta(minutes=1))
            return repr(money)

        return app

    runner = LocalRunner(make(CODEC))
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.deploy(make(Forgets()))
    runner.advance(minutes=2)
    run = runner.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert run.error.type == "SerdesError"
    assert re.search(
        r"step 'price' at position 0001: codec Forgets could not decode the recorded value: "
        r"KeyError",
        run.error.message,
    ), run.error.message


def test_a_codec_that_cannot_encode_a_branch_fails_that_branch() -> None:
    app = App()

    @app.workflow
    def flow(ctx: Context) -> list[str]:
        result = ctx.map(lambda c, n: Money(n, "eur"), [1], name="m", serdes=Refuses())
        return [type(item.error).__name__ + ": " + str(item.error) for item in result.failed]

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    [failure] = runner.result(run_id)
    assert "SerdesError" in failure and "map 'm': codec Refuses could not encode" in failure


def test_a_codec_that_cannot_encode_a_conditions_result_fails_the_wait_recorded() -> None:
    """A condition whose codec fails ends recorded failed (``StepFailed``): a replay reads
    the failure instead of polling again."""
    checks: list[int] = []
    app = App()

    def ready() -> Money:
        checks.append(1)
        return Money(5, "eur")

    @app.workflow
    def flow(ctx: Context) -> str:
        try:
            ctx.wait_for_condition(ready, timedelta(seconds=10), name="ready", serdes=Refuses())
        except StepFailed as e:
            ctx.sleep(timedelta(minutes=1))
            return e.error_type
        return "met"

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    runner.advance(minutes=2)
    assert runner.result(run_id) == "SerdesError"
    assert checks == [1]  # the replay after the sleep read the failure
    assert runner.history(run_id)[0].status == StepStatus.TERMINAL_FAILED


def test_an_object_that_is_not_a_codec_is_refused_at_the_call() -> None:
    app = App()

    @app.workflow
    def flow(ctx: Context) -> Any:
        return ctx.step(price, name="price", serdes=cast(Any, json))

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    error = runner.get_run(run_id).error
    assert error is not None and error.type == InvalidInput.__name__
    assert "serdes= takes a codec with serialize(value) -> str" in error.message
    assert runner.history(run_id) == []  # nothing recorded, the body never ran


def test_serdes_is_a_reserved_step_option() -> None:
    """A step function's own ``serdes`` argument cannot be passed through ``**kwargs``:
    it would be taken for the option (bind it with functools.partial)."""
    app = App()

    def takes(serdes: str) -> str:
        return serdes

    @app.workflow
    def flow(ctx: Context) -> Any:
        return ctx.step(takes, **{"serdes": "x"})

    runner = LocalRunner(app)
    run_id = runner.start("flow").run_id
    runner.run_until_idle()
    error = runner.get_run(run_id).error
    assert error is not None and "serdes= takes a codec" in error.message


def test_serdes_error_is_terminal_and_exported() -> None:
    import durable
    from durable.core.retry import classify

    assert {"Serdes", "SerdesError"} <= set(durable.__all__)
    assert classify(SerdesError("x")) == "terminal"


# --- every ledger ------------------------------------------------------------------------


def test_a_codec_applies_on_every_ledger(ledger: Any) -> None:
    """GIVEN the memory ledger and DynamoDB (moto here; DynamoDB Local and LocalStack in
    their tiers) WHEN a run records a step, a map and a stateful condition by a codec and
    replays them in a later invocation THEN the stored texts are the codec's, and the
    replay decodes the same values the first execution returned."""
    seen: list[list[Money]] = []
    app = App()

    def grow(state: Money) -> Money:
        return Money(state.cents + 100, state.currency)

    @app.workflow
    def flow(ctx: Context) -> list[str]:
        one = ctx.step(price, name="price", serdes=CODEC)
        mapped = ctx.map(lambda c, n: Money(n, "eur"), [3], name="m", serdes=CODEC)
        grown = ctx.wait_for_condition(
            grow,
            timedelta(minutes=1),
            name="grow",
            initial_state=Money(0, "usd"),
            until=lambda m: m.cents >= 200,
            serdes=CODEC,
        )
        seen.append([one, *mapped.values(), grown])
        ctx.sleep(timedelta(hours=1))
        return [repr(m) for m in seen[-1]]

    clock = FakeClock()
    config = EngineConfig(inprocess_wait_threshold=timedelta(0), callback_secret=b"k" * 32)
    engine = Engine(app, ledger, MemoryInvoker(), MemoryEffectStore(), clock=clock, config=config)
    run_id = engine.start("flow").run_id
    results = []
    for _ in range(3):  # the condition parks once, then the sleep
        results.append(engine.resume(run_id, reason="timer").result)
        clock.advance(timedelta(hours=2))
    assert results == ["suspended", "suspended", "succeeded"]
    history = ledger.load(run_id)
    steps = history.steps
    assert steps["0001"].output == STORED
    assert json.loads(steps["0002"].output or "{}")["items"][0]["v"] == '"0.03 EUR"'
    assert steps["0003"].output == '"2.00 USD"'
    expected = [Money(1250, "EUR"), Money(3, "EUR"), Money(200, "USD")]
    assert len(seen) >= 2 and all(values == expected for values in seen)
    assert json.loads(history.run.output or "[]") == [repr(m) for m in expected]


# --- the docs ----------------------------------------------------------------------------


def test_the_docs_example_runs() -> None:
    """docs/reference/context.md's "Custom codecs" example, as written, through LocalRunner."""
    page = (Path(__file__).resolve().parents[2] / "docs/reference/context.md").read_text()
    section = page.split("## Custom codecs", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, Any] = {"__name__": "docs_codec_example"}
    exec(compile(code.group(1), "context.md", "exec"), namespace)
    runner = LocalRunner(namespace["app"])
    run_id = runner.start("invoice", "o-7").run_id
    runner.run_until_idle()
    assert runner.result(run_id) == "o-7: 12.50 EUR"
    assert runner.history(run_id)[0].output == '{"amount": "12.50", "currency": "EUR"}'
