"""A failed write on every write path of the engine, and how the engine takes it.

``test_server_faults.py`` shows what the *adapters* make of a throttle on each ledger call (a
retryable ``StorageError``) and follows one throttled step record through a run;
``test_server_killed.py`` kills the server itself. This file goes one level up: the engine's
ledger (DynamoDB Local underneath) fails ONE call on one write path, and the run is then
driven to its end the way Lambda, the Scheduler, the sweeper and an API client would drive it.

The faults, each once, at the call that matches:

* ``condition``: the write's condition "failed": the port's own answer for it (``claim``
  returns None; ``update_run``, ``write_step_fenced`` and ``operate`` raise ``ConditionFailed``
  with the stored item; ``write_step`` finds a competing final record and returns it;
  ``complete_waiting`` raises ``WaitNotPending``; ``add_signal`` raises ``RunFinished``);
* ``before``: a retryable ``StorageError`` instead of the call (nothing was written);
* ``after``: the call is made, then a retryable ``StorageError`` (written, answer lost).

For every one: the invocation (or API call) that met the fault ends cleanly (``lease_lost``,
``busy``, a reload, or a retryable error: never a failed or compensated run); after it the
run reaches the end a clean run reaches; every step is recorded once; every side effect
happened exactly once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Literal

import pytest

from durable import (
    App,
    Context,
    Engine,
    EngineConfig,
    RetryPolicy,
    RunStatus,
    StepStatus,
    TerminalError,
    current_step,
)
from durable.adapters.dynamodb import DynamoLedger
from durable.adapters.idempotency import DynamoEffectStore
from durable.adapters.memory import MemoryInvoker, MemoryTimers
from durable.core.clock import FakeClock
from durable.core.model import RunRecord, StepKind, StepRecord
from durable.core.ports import ConditionFailed, Invocation, RunFinished, WaitNotPending
from durable.engine.engine import Outcome
from durable.engine.waits import Callback
from durable.errors import DurableError, StorageError
from examples.services import FakeServices
from tests.conftest import MakeTables

pytestmark = pytest.mark.integration

# --- the workflows ------------------------------------------------------------------------

app = App()
services = FakeServices()  # counts each effect per key (reset per test)
FIXED = {"fragile": False}


def effect(action: str, kind: str) -> str:
    return str(
        current_step().effect(
            action, lambda key: services.perform(kind, key, f"{kind}:{action}"), services.lookup
        )
    )


@app.step
def fetch(order: str) -> str:
    return effect("fetch", "fetch")


@app.step
def load_rows(order: str) -> int:
    step = current_step()
    for chunk in range(int(step.checkpoint_state or 0), 2):
        effect(f"chunk-{chunk}", "chunk")
        step.checkpoint(chunk + 1)
    return 2


# A budget longer than the lease: the lease is renewed (a fenced update_run) before the body.
@app.step(timeout=timedelta(minutes=5))
def crunch(order: str) -> str:
    return effect("crunch", "crunch")


# The approver's inbox: run id -> the token sent (the ledger keeps only its hash).
INBOX: dict[str, str] = {}


def send_link(callback: Callback) -> str:
    effect("link", "link")
    INBOX[current_step().run_id] = callback.token
    return callback.url  # stored with its token redacted


@app.step
def ship(order: str, approval: str, go: str) -> str:
    return effect("ship", "ship")


@app.workflow(name="mixed")
def mixed(ctx: Context, order: str) -> dict[str, Any]:
    fetched = fetch(order)
    rows = load_rows(order)
    crunch(order)
    ctx.sleep(timedelta(minutes=10))
    approval = ctx.wait_for_callback("approve", timeout=timedelta(days=1), submit=send_link)
    go = ctx.wait_for_signal("go", timeout=timedelta(days=1))
    return {"fetched": fetched, "rows": rows, "shipped": ship(order, str(approval), str(go))}


@app.step
def book(order: str) -> str:
    return effect("book", "book")


def unbook(booking: str, order: str) -> str:
    return effect("unbook", "unbook")


@app.step
def pay(order: str) -> str:
    raise TerminalError("card declined")


@app.workflow(name="saga")
def saga(ctx: Context, order: str) -> str:
    ctx.step(book, order, compensate=unbook)
    return ctx.step(pay, order)  # fails for good: COMPENSATING, unbook, FAILED


@app.step
def fragile(order: str) -> str:
    if not FIXED["fragile"]:
        raise TerminalError("upstream refused")
    return effect("fragile", "fragile")


@app.workflow(name="fragile")
def fragile_flow(ctx: Context, order: str) -> str:
    return fragile(order)


@app.step(retry=RetryPolicy(max_attempts=1))
def import_once(order: str) -> int:
    current_step().checkpoint(1)
    return int(effect("import", "import") == "import:import")


@app.workflow(name="brittle")
def brittle(ctx: Context, order: str) -> int:
    ctx.step(book, order, compensate=unbook)
    return import_once(order)


# What a clean run of each ends with: (status, step names in position order, effects by kind).
CLEAN: dict[str, tuple[RunStatus, list[str], dict[str, int]]] = {
    "mixed": (
        RunStatus.SUCCEEDED,
        ["fetch", "load_rows", "crunch", "sleep", "approve", "approve.submit", "go", "ship"],
        {"fetch": 1, "chunk": 2, "crunch": 1, "link": 1, "ship": 1},
    ),
    "saga": (RunStatus.FAILED, ["book", "pay", "compensate:unbook"], {"book": 1, "unbook": 1}),
    "fragile": (RunStatus.SUCCEEDED, ["fragile"], {"fragile": 1}),
    "brittle": (RunStatus.SUCCEEDED, ["book", "import_once"], {"book": 1, "import": 1}),
}

# --- the faulty ledger --------------------------------------------------------------------

Kind = Literal["condition", "before", "after"]
Match = Callable[[tuple[Any, ...], dict[str, Any]], bool]


def always(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    return True


def changes_with(*keys: str, status: str | None = None) -> Match:
    """update_run calls whose changes hold ``keys`` (and set ``status``, when given)."""

    def match(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        changes = args[2]
        return set(keys) <= set(changes) and (status is None or changes.get("status") == status)

    return match


SUSPEND = changes_with("status", status="WAITING")
SLEEP_SUSPEND = changes_with("status", "sleeps", status="WAITING")
FINISH = changes_with("purge_at")
TAKEOVER = changes_with("takeovers")
COMPENSATING = changes_with("status", status="COMPENSATING")


def handoff(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """The lease released with a due time, the status unchanged."""
    return set(args[2]) == {"lease_owner", "lease_until", "due_at", "updated_at"}


def renewal(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """A lease renewal sets nothing but the lease (and its due time, when an earlier one
    is not kept: ``durable.core.leases.lease_changes``)."""
    return set(args[2]) in ({"lease_until", "due_at"}, {"lease_until"})


def nth(n: int) -> Match:
    """The n-th call (of the method the fault is armed on)."""
    seen = [0]

    def match(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        seen[0] += 1
        return seen[0] == n

    return match


def step_status(status: StepStatus, kind: StepKind | None = None) -> Match:
    def match(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        step: StepRecord = args[0]
        return step.status == status and (kind is None or step.kind == kind)

    return match


@dataclass
class Fault:
    method: str
    kind: Kind
    match: Match = always
    fired_in: str | None = None  # which invocation or client call met it


class FaultyLedger:
    """The engine's ledger: a real one with faults armed on its calls (each fires once)."""

    def __init__(self, ledger: DynamoLedger) -> None:
        self._ledger = ledger
        self.faults: list[Fault] = []
        self.actor = "setup"  # who is calling: "invocation 3", "client complete_callback", ...

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._ledger, name)
        if not callable(value) or name.startswith("_"):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            fault = next(
                (
                    f
                    for f in self.faults
                    if f.fired_in is None and f.method == name and f.match(args, kwargs)
                ),
                None,
            )
            if fault is None:
                return value(*args, **kwargs)
            fault.fired_in = self.actor
            if fault.kind == "before":
                raise StorageError(f"injected: {name} failed before it was sent", retryable=True)
            if fault.kind == "condition":
                return self._condition_failed(name, args, kwargs, value)
            value(*args, **kwargs)
            raise StorageError(f"injected: {name} was written, its answer lost", retryable=True)

        return call

    def _condition_failed(
        self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], call: Any
    ) -> Any:
        ledger = self._ledger
        if name == "claim":
            return None  # "busy"
        if name in ("update_run", "write_step_fenced", "operate"):
            raise ConditionFailed(
                ledger.get_run(args[0] if name != "write_step_fenced" else args[0].run_id)
            )
        if name == "write_step":
            # Another writer's final record landed first (a zombie's, say): the call returns it.
            step: StepRecord = args[0]
            ledger.write_step(replace(step, output='"competitor"', updated_at=step.updated_at))
            return call(*args, **kwargs)
        if name == "complete_waiting":
            step = args[0]
            raise WaitNotPending(ledger.get_step(step.run_id, step.position))
        if name == "add_signal":
            raise RunFinished(ledger.get_run(args[0].run_id))
        raise AssertionError(f"no condition failure for {name}")


# --- driving a run to its end -------------------------------------------------------------


@dataclass
class World:
    engine: Engine
    ledger: FaultyLedger
    raw: DynamoLedger
    invoker: MemoryInvoker
    timers: MemoryTimers
    clock: FakeClock
    reactions: dict[str, str] = field(default_factory=dict)  # actor -> how its call ended
    invocations: int = 0

    def invoke(self, run_id: str, reason: str) -> None:
        self.invocations += 1
        actor = self.ledger.actor = f"invocation {self.invocations} ({reason})"
        try:
            outcome: Outcome = self.engine.resume(run_id, Invocation(), 0, reason)
            self.reactions[actor] = outcome.result
        except StorageError as error:
            # Lambda logs the failed invocation; the run's lease lapses, the sweeper returns.
            assert error.retryable, error
            self.reactions[actor] = "retryable StorageError"
        finally:
            self.ledger.actor = "setup"

    def client(self, action: str, call: Callable[[], object]) -> bool:
        """An API client: True when the call was accepted; a 5xx is retried by the caller."""
        actor = self.ledger.actor = f"client {action}"
        try:
            call()
            self.reactions.setdefault(actor, "accepted")
            return True
        except DurableError as error:
            assert not isinstance(error, StorageError) or error.retryable, error
            self.reactions.setdefault(actor, type(error).__name__)
            return False
        finally:
            self.ledger.actor = "setup"

    def waiting_on(self, run_id: str, kind: StepKind) -> StepRecord | None:
        history = self.raw.load(run_id)
        assert history is not None
        return next(
            (
                s
                for s in history.steps.values()
                if s.kind == kind and s.status == StepStatus.WAITING
            ),
            None,
        )

    def respond(self, run_id: str) -> bool:
        """Answer what the run waits for (as an approver and a sender would, retrying 5xx)."""
        history = self.raw.load(run_id)
        assert history is not None
        steps = {s.name: s for s in history.steps.values()}
        waiting = self.waiting_on(run_id, StepKind.CALLBACK)
        submit = steps.get("approve.submit")
        if waiting is not None and submit is not None and submit.status == StepStatus.DONE:
            token = INBOX[run_id]
            for _ in range(3):
                if self.client(
                    "complete_callback", lambda: self.engine.complete_callback(token, "yes")
                ):
                    break
                if self.waiting_on(run_id, StepKind.CALLBACK) is None:
                    break  # answered after all (its answer was lost): a retry is a 409
            return True
        if self.waiting_on(run_id, StepKind.SIGNAL) is not None:

            def send() -> object:
                # Every try carries the same idempotency key, as a careful sender's would.
                return self.engine.signal(run_id, "go", "now", key=f"{run_id}-go")

            for _ in range(3):
                if self.client("signal", send):
                    break
            return True
        return False

    def drive(self, run_id: str, *, respond: bool = True, rounds: int = 300) -> RunRecord:
        """Invocations, due timers, sweeps and answers until the run ends; time moves five
        minutes whenever nothing is due, so a dead owner's lease lapses."""
        for _ in range(rounds):
            run = self.raw.get_run(run_id)
            assert run is not None
            if run.terminal:
                return run
            item = self.invoker.pop()
            if item is not None:
                self.invoke(item.run_id, item.reason)
                continue
            fired = self.timers.due(self.clock.now())
            if fired:
                for fired_id in fired:
                    self.invoke(fired_id, "timer")
                continue
            if self.engine.sweep().invoked:
                continue
            if respond and run.status == RunStatus.WAITING and self.respond(run_id):
                continue
            self.clock.advance(timedelta(minutes=5))
        raise AssertionError(f"run {run_id} did not end: {self.raw.get_run(run_id)}")

    def idle(self, run_id: str) -> RunRecord:
        """Drive without answering anything: until the run waits (or ends)."""
        for _ in range(100):
            run = self.raw.get_run(run_id)
            assert run is not None
            item = self.invoker.pop()
            if item is not None:
                self.invoke(item.run_id, item.reason)
                continue
            if run.status == RunStatus.WAITING or run.terminal:
                return run
            if not self.engine.sweep().invoked:
                self.clock.advance(timedelta(minutes=5))
        raise AssertionError("the run never settled")


@pytest.fixture
def world(ddb_local_client: Any, make_tables: MakeTables) -> Iterator[World]:
    services.reset()
    FIXED["fragile"] = False
    ledger_table, idem_table = make_tables(ddb_local_client)
    raw = DynamoLedger(ddb_local_client, ledger_table)
    faulty = FaultyLedger(raw)
    invoker, timers, clock = MemoryInvoker(), MemoryTimers(), FakeClock()
    engine = Engine(
        app,
        faulty,  # a proxy: every Ledger method, by delegation
        invoker,
        DynamoEffectStore(ddb_local_client, idem_table),
        clock=clock,
        config=EngineConfig(
            lease=timedelta(seconds=60),
            steps_per_invocation=1,  # a hand-off after every step
            inprocess_wait_threshold=timedelta(0),  # every wait suspends
            sweep_grace=timedelta(0),
            callback_secret=os.urandom(32),
        ),
        timers=timers,
    )
    yield World(engine, faulty, raw, invoker, timers, clock)


def start(world: World, workflow: str) -> str:
    world.ledger.actor = "client start"
    run_id = world.engine.start(workflow, "o1", idempotency_key=f"{workflow}-o1").run_id
    world.ledger.actor = "setup"
    return run_id


def assert_clean_end(world: World, workflow: str, run: RunRecord) -> None:
    """The end a clean run reaches: status, every step once in order, each effect once."""
    status, names, effects = CLEAN[workflow]
    assert run.status == status, run
    history = world.raw.load(run.run_id)
    assert history is not None
    steps = [history.steps[p] for p in sorted(history.steps)]
    assert [s.name for s in steps] == names
    assert [s.position for s in steps] == [f"{i:04d}" for i in range(1, len(steps) + 1)]
    assert all(s.status.final for s in steps), steps
    assert dict(services.effects) == effects  # happened once each: none lost, none doubled
    assert dict(services.calls) == effects  # and each was asked for once


# --- the matrix ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    workflow: str
    fault: Fault
    reactions: frozenset[str]  # acceptable ends of the call that met the fault


def case(id: str, workflow: str, method: str, kind: Kind, match: Match, *ends: str) -> Case:
    return Case(id, workflow, Fault(method, kind, match), frozenset(ends))


STORAGE = "retryable StorageError"
WORKER_CASES = [
    # claim: busy (nothing happens), or the lease taken with the answer lost (a ghost owner
    # whose lease lapses; the next claim is a takeover)
    case("claim-condition", "mixed", "claim", "condition", always, "busy"),
    case("claim-before", "mixed", "claim", "before", always, STORAGE),
    case("claim-after", "mixed", "claim", "after", always, STORAGE),
    # update_run, by purpose
    case("suspend-condition", "mixed", "update_run", "condition", SUSPEND, "suspended"),
    case("suspend-before", "mixed", "update_run", "before", SUSPEND, STORAGE),
    case("suspend-after", "mixed", "update_run", "after", SUSPEND, STORAGE),
    case("finish-condition", "mixed", "update_run", "condition", FINISH, "lease_lost"),
    case("finish-before", "mixed", "update_run", "before", FINISH, STORAGE),
    case("finish-after", "mixed", "update_run", "after", FINISH, STORAGE),
    case("handoff-condition", "mixed", "update_run", "condition", handoff, "lease_lost"),
    case("handoff-before", "mixed", "update_run", "before", handoff, STORAGE),
    case("handoff-after", "mixed", "update_run", "after", handoff, STORAGE),
    case("renewal-condition", "mixed", "update_run", "condition", renewal, "lease_lost"),
    case("renewal-before", "mixed", "update_run", "before", renewal, STORAGE),
    case("renewal-after", "mixed", "update_run", "after", renewal, STORAGE),
    case("compensating-condition", "saga", "update_run", "condition", COMPENSATING, "lease_lost"),
    case("compensating-before", "saga", "update_run", "before", COMPENSATING, STORAGE),
    case("compensating-after", "saga", "update_run", "after", COMPENSATING, STORAGE),
    # write_step: a step's result, a sleep's and a callback's WAITING record, a failure
    case(
        "step-done-condition",
        "mixed",
        "write_step",
        "condition",
        step_status(StepStatus.DONE, StepKind.STEP),
        "handed_off",
    ),
    case("step-done-after", "mixed", "write_step", "after", step_status(StepStatus.DONE), STORAGE),
    # a sleep's record rides in the suspension that parks the run (durable.core.sleeps)
    case("sleep-suspend-before", "mixed", "update_run", "before", SLEEP_SUSPEND, STORAGE),
    case("sleep-suspend-after", "mixed", "update_run", "after", SLEEP_SUSPEND, STORAGE),
    case(
        "callback-waiting-after",
        "mixed",
        "write_step",
        "after",
        step_status(StepStatus.WAITING, StepKind.CALLBACK),
        STORAGE,
    ),
    case(
        "step-failed-before",
        "saga",
        "write_step",
        "before",
        step_status(StepStatus.TERMINAL_FAILED),
        STORAGE,
    ),
    # write_step_fenced: a checkpoint (step + lease renewal in one transaction), called from
    # inside the step's body: a retryable storage error there ends the invocation, and the
    # next one resumes the step from its last checkpoint (see the test below).
    case("checkpoint-condition", "mixed", "write_step_fenced", "condition", always, "lease_lost"),
    case("checkpoint-before", "mixed", "write_step_fenced", "before", always, STORAGE, "suspended"),
    case("checkpoint-after", "mixed", "write_step_fenced", "after", always, STORAGE, "suspended"),
]


@pytest.mark.parametrize("c", WORKER_CASES, ids=[c.id for c in WORKER_CASES])
def test_a_failed_worker_write_ends_the_invocation_cleanly_and_the_run_completes(
    world: World, c: Case
) -> None:
    # GIVEN a run and one fault armed on one write path of the worker
    world.ledger.faults.append(c.fault)
    run_id = start(world, c.workflow)
    # WHEN the run is driven to its end (the failed invocation is followed by the next one)
    run = world.drive(run_id)
    # THEN the fault fired inside an invocation, which ended cleanly
    actor = c.fault.fired_in
    assert actor is not None and actor.startswith("invocation"), f"never fired: {c.fault}"
    assert world.reactions[actor] in c.reactions, (actor, world.reactions)
    # AND no invocation failed the run over it: the run ends as a clean run does
    if c.id == "step-done-condition":
        # The competitor's record was adopted: the workflow went on with its result.
        assert run.output is not None and '"fetched":"competitor"' in run.output, run.output
    assert_clean_end(world, c.workflow, run)


# --- the API's writes: callbacks, signals, operator decisions -----------------------------


@pytest.mark.parametrize("kind", ["condition", "before", "after"])
def test_a_failed_callback_completion_is_never_half_done(world: World, kind: Kind) -> None:
    # GIVEN a run waiting for its callback, and the completion's transaction failing once
    world.ledger.faults.append(Fault("complete_waiting", kind))
    run_id = start(world, "mixed")
    # WHEN the approver answers (retrying a 5xx) and the run is driven to its end
    run = world.drive(run_id)
    # THEN the approver's first call got a clean error: a retryable one (503) or, for a
    # condition failure, the 409 "already answered" (nothing was written by it either way)
    first = world.reactions["client complete_callback"]
    expected = {"condition": "CallbackAlreadyCompleted", "before": "StorageError"}
    assert first == expected.get(kind, "StorageError")
    # AND the answer was recorded once (the retry after a lost answer found it answered),
    # and the run ended as a clean run does
    assert_clean_end(world, "mixed", run)
    history = world.raw.load(run_id)
    assert history is not None
    (approve,) = [s for s in history.steps.values() if s.name == "approve"]
    assert approve.status == StepStatus.DONE and approve.output == '"yes"'


@pytest.mark.parametrize("kind", ["condition", "before", "after"])
def test_a_failed_signal_is_never_lost(world: World, kind: Kind) -> None:
    # GIVEN a run waiting for its signal, and the signal's transaction failing once
    world.ledger.faults.append(Fault("add_signal", kind))
    run_id = start(world, "mixed")
    # WHEN the sender sends it (retrying a 5xx) and the run is driven to its end
    run = world.drive(run_id)
    # THEN the sender's first call got a clean error, and the run ended as a clean run does
    expected = {"condition": "InvalidState", "before": "StorageError", "after": "StorageError"}
    assert world.reactions["client signal"] == expected[kind]
    assert_clean_end(world, "mixed", run)
    history = world.raw.load(run_id)
    assert history is not None
    # AND the signal was stored exactly once, even when the first call wrote it and lost
    # the answer ("after"): the retry carried the same key, met the stored signal in the
    # ledger's conditional write and got it back without writing (or bumping) anything
    (signal,) = history.signals
    assert (signal.name, signal.payload) == ("go", '"now"')
    assert signal.key_hash is not None and signal.consumed_by is not None


@pytest.mark.parametrize("kind", ["condition", "before", "after"])
def test_a_failed_cancel_is_refused_cleanly_or_takes_effect(world: World, kind: Kind) -> None:
    # GIVEN a run asleep, and the cancel's conditional write failing once
    run_id = start(world, "mixed")
    assert world.idle(run_id).status == RunStatus.WAITING
    world.ledger.faults.append(Fault("operate", kind))
    # WHEN an operator cancels it, retrying when the call failed
    for _ in range(3):
        if world.client("cancel", lambda: world.engine.cancel(run_id, "no longer needed")):
            break
    run = world.drive(run_id, respond=False)
    # THEN the first call failed cleanly (a condition failure on a live run reads as "no such
    # run" to the caller: the condition only fails for real once the run is gone or ended),
    # and the run ends CANCELED all the same, without a compensation
    expected = {"condition": "RunNotFound", "before": "StorageError", "after": "StorageError"}
    assert world.reactions["client cancel"] == expected[kind]
    assert run.status == RunStatus.CANCELED
    assert "unbook" not in services.effects


@pytest.mark.parametrize("kind", ["condition", "before", "after"])
def test_a_failed_retry_decision_can_be_reissued(world: World, kind: Kind) -> None:
    # GIVEN a FAILED run (its step failed for good) whose cause was then fixed
    run_id = start(world, "fragile")
    assert world.drive(run_id).status == RunStatus.FAILED
    FIXED["fragile"] = True
    world.ledger.faults.append(Fault("operate", kind))
    # WHEN an operator retries it, reissuing the decision when the call failed
    for _ in range(3):
        if world.client("retry", lambda: world.engine.retry(run_id)):
            break
    run = world.drive(run_id)
    # THEN the first call failed cleanly and the run then completed with one effect
    expected = {"condition": "InvalidState", "before": "StorageError", "after": "StorageError"}
    assert world.reactions["client retry"] == expected[kind]
    assert_clean_end(world, "fragile", run)
    (step,) = world.engine.history(run_id)
    assert step.attempt == 2  # the failed attempt and the retried one, nothing lost


def test_a_takeover_whose_count_fails_to_record_is_retried(world: World) -> None:
    # GIVEN a run whose owner vanished holding the lease after its first steps (the third
    # claim's answer was lost), and the takeover's count (a fenced update_run) failing once
    world.ledger.faults += [
        Fault("claim", "after", nth(3)),
        Fault("update_run", "condition", TAKEOVER),
    ]
    run_id = start(world, "mixed")
    # WHEN the run is driven to its end
    run = world.drive(run_id)
    # THEN the taker-over stood down (lease lost), the next one took over, and the run ended
    # as a clean run does
    counted = world.ledger.faults[1].fired_in
    assert counted is not None and world.reactions[counted] == "lease_lost"
    assert run.takeovers >= 1
    assert_clean_end(world, "mixed", run)


# Was a bug: a retryable StorageError inside a step body counted as the step's failure.
def test_a_throttled_checkpoint_does_not_fail_a_step_that_has_no_retry_left(
    world: World,
) -> None:
    # GIVEN a step allowed one attempt that checkpoints, after a compensable step, and the
    # checkpoint's transaction throttled once
    world.ledger.faults.append(Fault("write_step_fenced", "before"))
    run_id = start(world, "brittle")
    # WHEN the run is driven to its end
    run = world.drive(run_id)
    # THEN the throttle failed the invocation, not the step: the run completes, nothing undone
    assert world.ledger.faults[0].fired_in is not None
    assert_clean_end(world, "brittle", run)


def test_every_write_path_of_the_engine_is_in_the_matrix() -> None:
    # A new write path of the ledger needs a row here (read paths fail like any invocation).
    writes = {"claim", "update_run", "write_step", "write_step_fenced"}
    covered = {c.fault.method for c in WORKER_CASES}
    assert writes <= covered
    api_writes = {"complete_waiting", "add_signal", "operate"}  # the tests above
    assert not api_writes & covered
    purposes = {c.id.rsplit("-", 1)[0] for c in WORKER_CASES if c.fault.method == "update_run"}
    # (sleep-suspend: the suspension that records a sleep kept in the run item)
    assert purposes == {"suspend", "sleep-suspend", "finish", "handoff", "renewal", "compensating"}
