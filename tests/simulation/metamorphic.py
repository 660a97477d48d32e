"""The metamorphic oracle: one program, several execution shapes, one outcome.

How a run is executed is the engine's business, never the workflow's: everything in one
invocation with short waits served in-process, a hand-off after every step body with
every wait parked, values moved to the payload store at a few bytes, the run-item
layouts on or off, the memory ledger or DynamoDB. So a program run to its end in each of
these *shapes*, with the outside world answering the same way, must give the same
outcome: each run's final status, result and error type, its steps' records, the
signals it consumed, what its workflow code was handed back, and which step bodies,
effects and condition checks ran how often. Ids and timestamps are left out.

No invariant of the explorer can say what a value *should* be; this oracle needs no such
knowledge, only that the shapes agree. The kind of bug it is for: a stateful
``wait_for_condition`` whose ``until`` sees the check's raw value while it polls in-process
(a dict keyed by int) and the JSON-decoded state after a park (keys are text then), so a
workflow succeeds with a short interval and fails when it parks.

Programs come from the explorer's generator (``programs.generate_program``, drawn from a
seed of this module's own, so the explorer's seeds keep their traces), with what depends
on the order runs take turns taken out (recorded random values and times, keyed children
two parents may race for), plus ops of a richer value domain (``RICH``): steps, stateful
conditions and parallel branches whose values are dicts keyed by int, tuples, frozensets,
``Decimal``, datetimes, nested models and texts long enough to be offloaded, each
annotated or not (plain JSON), and a step whose result fails its annotation.

A check of one shape rides along (``returned_body_not_rerun``): no crash happens here, so
a step body that returned is never started again at its position.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import random
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

import durable
from durable import App, Context, RetryPolicy
from durable.adapters.memory import MemoryEffectStore, MemoryInvoker, MemoryLedger, MemoryTimers
from durable.adapters.payload_stores import MemoryPayloads
from durable.core.claim_check import ClaimCheck
from durable.core.clock import FakeClock
from durable.core.config import EngineConfig
from durable.core.model import RunHistory, StepKind, StepStatus, format_time, parse_time
from durable.core.ports import Invocation
from durable.engine.engine import Engine
from durable.errors import CallbackTimeout, DurableError, StepFailed
from tests.simulation import programs
from tests.simulation.journal import BodyStart, Journal, Stamp, typed
from tests.simulation.programs import LANED, WORKFLOW, Hooks, Op, Point, SimInput, active
from tests.simulation.scheduler import Scheduler, seeded_randomness

META = "sim-meta"  # the workflow of this module: the explorer's ops and the rich ones
SECRET = b"metamorphic-oracle-callback-secret-0123"
MAX_ACTIONS = 3000  # invocations, answers and sweeps per program and shape, at most
# Outside events wait until nothing is due within this: longer than any chain of the
# in-process waits of one invocation, shorter than the shortest callback timeout (60 s).
QUIET = timedelta(seconds=30)
IDLE_JUMPS = (10, 60, 600, 3600, 6 * 3600, 86400)
_TICK = timedelta(milliseconds=1)


# --- the shapes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """How the engine executes: the knobs of ``EngineConfig`` that must not change what
    a workflow does, and the ledger's layout."""

    name: str
    steps_per_invocation: int = 1000
    inprocess_wait: timedelta = timedelta(seconds=5)
    offload_bytes: int = 64 * 1024
    sleeps_on_run: bool = True

    def config(self) -> EngineConfig:
        return EngineConfig(
            steps_per_invocation=self.steps_per_invocation,
            inprocess_wait_threshold=self.inprocess_wait,
            payload_offload_bytes=self.offload_bytes,
            sleeps_on_run=self.sleeps_on_run,
            sweep_grace=timedelta(0),
            callback_secret=SECRET,
        )


# The first is the reference every other is compared with.
ONE_INVOCATION = Shape("one invocation")
PARKED = Shape("parked", steps_per_invocation=1, inprocess_wait=timedelta(0))
OFFLOADED = Shape("offloaded", offload_bytes=8)
SLEEPS_APART = Shape(
    "parked, sleeps as steps",
    steps_per_invocation=1,
    inprocess_wait=timedelta(0),
    sleeps_on_run=False,
)
SHAPES = (ONE_INVOCATION, PARKED, OFFLOADED, SLEEPS_APART)


# --- the richer value domain -----------------------------------------------------------


class Tagged(BaseModel):
    n: int
    points: dict[int, Point]


def _value(kind: str, n: int) -> Any:
    """The value of ``kind`` numbered ``n``: a pure function, so every shape (and every
    attempt) makes the same one whatever order the runs took turns in."""
    if kind == "int_keys":
        return {n: f"v{n}", n + 1: f"v{n + 1}"}
    if kind == "tuple":
        return (n, f"t{n}")
    if kind == "frozenset":
        return frozenset({n, n + 2})
    if kind == "decimal":
        return Decimal(n) / 4
    if kind == "datetime":
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=n)
    if kind == "model":
        return Tagged(n=n, points={n: Point(x=n, tag=f"p{n}")})
    if kind == "big":
        return f"{n}:" + "b" * 300  # over the offload of a few bytes, under the default
    raise ValueError(kind)


# Kinds and whether their values are plain JSON too (a body annotated ``-> Any``).
KINDS = {
    "int_keys": True,
    "tuple": True,
    "frozenset": False,
    "decimal": False,
    "datetime": False,
    "model": False,
    "big": True,
}


def _rich_body(op: Op) -> Any:
    h = hooks()
    h.body("step")
    sc = durable.current_step()
    if op["effect"]:
        sc.effect("charge", h.effect_call, h.effect_reconcile)
    if sc.attempt <= op["fails"]:
        raise RuntimeError(f"attempt {sc.attempt} fails (retryable)")
    h.returned.add((sc.idempotency_key.split(":", 1)[0], sc.position))
    if op.get("bad") and sc.attempt == 1:
        return f"not a {op['kind']}"  # fails the annotation: the engine cannot store it
    return _value(op["kind"], op["n"])


# One body per annotation: the engine encodes a step's result by its body's return type.
def step_int_keys(op: Op) -> dict[int, str]:
    return _rich_body(op)  # type: ignore[no-any-return]


def step_tuple(op: Op) -> tuple[int, str]:
    return _rich_body(op)  # type: ignore[no-any-return]


def step_frozenset(op: Op) -> frozenset[int]:
    return _rich_body(op)  # type: ignore[no-any-return]


def step_decimal(op: Op) -> Decimal:
    return _rich_body(op)  # type: ignore[no-any-return]


def step_datetime(op: Op) -> datetime:
    return _rich_body(op)  # type: ignore[no-any-return]


def step_model(op: Op) -> Tagged:
    return _rich_body(op)  # type: ignore[no-any-return]


def step_big(op: Op) -> str:
    return _rich_body(op)  # type: ignore[no-any-return]


def step_plain(op: Op) -> Any:
    """Unannotated (``Any``): stored as plain JSON, so it comes back as JSON decodes it."""
    return _rich_body(op)


STEP_BODIES: dict[str, Callable[[Op], Any]] = {
    "int_keys": step_int_keys,
    "tuple": step_tuple,
    "frozenset": step_frozenset,
    "decimal": step_decimal,
    "datetime": step_datetime,
    "model": step_model,
    "big": step_big,
}


# Stateful checks: each counts its polls in a state of its kind, and ``until`` reads it
# the way a user would write it (a key looked up, a tuple compared).
def check_int_keys(run: str, index: int, state: dict[int, int]) -> dict[int, int]:
    _poll(run, index)
    return {0: state.get(0, 0) + 1}


def check_int_keys_plain(run: str, index: int, state: Any) -> Any:
    _poll(run, index)
    return {0: state.get(0, 0) + 1}


def check_tuple(run: str, index: int, state: tuple[int, str]) -> tuple[int, str]:
    _poll(run, index)
    return (state[0] + 1, state[1])


def check_tuple_plain(run: str, index: int, state: Any) -> Any:
    _poll(run, index)
    return (state[0] + 1, state[1])


def check_model(run: str, index: int, state: Tagged) -> Tagged:
    _poll(run, index)
    return Tagged(n=state.n + 1, points={state.n + 1: Point(x=state.n + 1, tag="p")})


def check_decimal(run: str, index: int, state: Decimal) -> Decimal:
    _poll(run, index)
    return state + Decimal("0.25")


def _poll(run: str, index: int) -> None:
    h = hooks()
    h.journal.bodies.append(BodyStart(h.stamp(), run, f"poll{index}", 0, "poll", "at_least_once"))
    h.journal.polls[(run, index)] = h.journal.polls.get((run, index), 0) + 1


def _polls_made(kind: str, state: Any) -> int:
    """How many polls a state of ``kind`` counts (the ``until`` of a rich condition)."""
    if kind == "int_keys":
        return int(state.get(0, 0))
    if kind == "tuple":
        return int(state[0]) if state == (state[0], "ready") else 0
    if kind == "model":
        return int(state.n)
    return int(state * 4)


@dataclass(frozen=True)
class Condition:
    check: Callable[..., Any]
    initial: Any


CONDITIONS: dict[tuple[str, bool], Condition] = {
    ("int_keys", True): Condition(check_int_keys, {}),
    ("int_keys", False): Condition(check_int_keys_plain, {}),
    ("tuple", True): Condition(check_tuple, (0, "ready")),
    ("tuple", False): Condition(check_tuple_plain, (0, "ready")),
    ("model", True): Condition(check_model, Tagged(n=0, points={})),
    ("decimal", True): Condition(check_decimal, Decimal(0)),
}


def branch_value(kind: str, n: int, seconds: int, ctx: Context) -> Any:
    """A parallel branch: a short sleep (in-process in one shape, parked in another),
    then its value; annotated by ``BRANCHES``."""
    ctx.sleep(timedelta(seconds=seconds))
    return _value(kind, n)


def branch_int_keys(kind: str, n: int, seconds: int, ctx: Context) -> dict[int, str]:
    return branch_value(kind, n, seconds, ctx)  # type: ignore[no-any-return]


def branch_tuple(kind: str, n: int, seconds: int, ctx: Context) -> tuple[int, str]:
    return branch_value(kind, n, seconds, ctx)  # type: ignore[no-any-return]


def branch_decimal(kind: str, n: int, seconds: int, ctx: Context) -> Decimal:
    return branch_value(kind, n, seconds, ctx)  # type: ignore[no-any-return]


def branch_model(kind: str, n: int, seconds: int, ctx: Context) -> Tagged:
    return branch_value(kind, n, seconds, ctx)  # type: ignore[no-any-return]


BRANCHES: dict[str, Callable[..., Any]] = {
    "int_keys": branch_int_keys,
    "tuple": branch_tuple,
    "decimal": branch_decimal,
    "model": branch_model,
}


# --- the generator ---------------------------------------------------------------------

RICH = ("rstep", "rcond", "rbatch", "rsleep")


def generate(seed: int) -> list[Op]:
    """A program for ``seed``: the explorer's generator (its seeds untouched: this draws
    from a generator of its own), made independent of turn order, with 1-3 rich ops."""
    rng = random.Random(f"metamorphic-{seed}")
    ops = _order_free(programs.generate_program(rng))
    for _ in range(rng.randint(1, 3)):
        ops.insert(rng.randint(0, len(ops)), _rich(rng))
    # Past a tail op (continue_as_new, a failure, a big result) nothing else runs: keep
    # the tail last, as the explorer's generator does.
    tails = [op for op in ops if op["op"] in ("continue", "fail", "big")]
    return [op for op in ops if op not in tails] + tails[-1:]


def _order_free(ops: list[Op], in_branch: bool = False) -> list[Op]:
    """The explorer's program without what depends on the order runs take turns in, or
    on how long a branch waited (which the shapes change on purpose):

    - recorded times, uuids and floats (drawn in turn order);
    - keyed children (two parents racing for one key meet it running or finished);
    - batch rules that decide before every branch ended (``first_successful``, "all" at
      the first failure...): which branches started before the decision depends on how
      long the first ones waited; every rule here tolerates every failure;
    - ``continue_as_new`` from a branch (the same race: which branches ran before it);
    - children started and not awaited (whether one ended before its parent did).
    """
    kept = []
    for op in ops:
        if op["op"] == "value" or (in_branch and op["op"] == "continue"):
            continue
        made = copy.deepcopy(op)
        if made["op"] == "child":
            made.pop("id", None)
            made.pop("attach", None)
            made["wait"] = True
            made["ops"] = _order_free(made["ops"])
        elif made["op"] == "batch":
            made["branches"] = [_order_free(b, in_branch=True) for b in made["branches"]]
            made["rule"] = {"tolerated_failures": len(made["branches"])}
        elif made["op"] == "dmap":
            made["items"] = [_order_free(item) for item in made["items"]]
            made["rule"] = {"tolerated_failures": len(made["items"])}
        kept.append(made)
    return kept


def _rich(rng: random.Random) -> Op:
    kind = rng.choice(RICH)
    n = rng.randint(1, 99)
    if kind == "rstep":
        value_kind = rng.choice(sorted(KINDS))
        plain = KINDS[value_kind] and rng.random() < 0.5
        fails = rng.choice((0, 0, 1, 2))
        return {
            "op": "rstep",
            "kind": value_kind,
            "plain": plain,
            "n": n,
            "fails": fails,
            "tries": rng.choice((fails + 1, 3)),
            "delay": rng.choice((1, 2, 30)),  # in-process (under 5 s) or parked
            "effect": rng.random() < 0.4,
            # A result that fails its annotation, on a step that retries ValueError.
            "bad": not plain and rng.random() < 0.15,
        }
    if kind == "rcond":
        value_kind, typed_ = rng.choice(sorted(CONDITIONS))
        return {
            "op": "rcond",
            "kind": value_kind,
            "typed": typed_,
            "n": n,
            "polls": rng.randint(1, 3),
            "interval": rng.choice((1, 2, 10)),
        }
    if kind == "rbatch":
        return {
            "op": "rbatch",
            "branches": [
                [rng.choice(sorted(BRANCHES)), rng.randint(1, 99), rng.choice((1, 3, 60))]
                for _ in range(rng.randint(1, 3))
            ],
        }
    return {"op": "rsleep", "s": rng.choice((1, 3, 20))}


# --- the workflow ----------------------------------------------------------------------

APP = App().include(programs.APP)


@APP.workflow(name=META)
def meta(ctx: Context, spec: SimInput) -> list[str]:
    """Each op run in turn; the result is what workflow code got back from each, with
    its types (``typed``), so a value decoded differently in one shape shows."""
    h = hooks()
    run = programs._run_key(ctx)
    seen = []
    for i, op in enumerate(spec.ops):
        if op["op"] in RICH:
            value = _interpret_rich(ctx, run, i, op)
        else:
            value = programs._interpret(ctx, run, i, op, spec)
        h.observe(run, i, value)
        seen.append(typed(value))
    if any(op["op"] == "big" for op in spec.ops):
        seen.append("x" * programs.BIG)
    return seen


def _interpret_rich(ctx: Context, run: str, i: int, op: Op) -> Any:
    kind = op["op"]
    try:
        if kind == "rstep":
            body = step_plain if op["plain"] else STEP_BODIES[op["kind"]]
            retry = RetryPolicy(
                max_attempts=op["tries"],
                initial_delay=timedelta(seconds=op["delay"]),
                backoff=1.0,
                jitter="none",
                retry_on=(RuntimeError, ValueError) if op["bad"] else (),
            )
            return ctx.step(body, op, name=f"op{i}", retry=retry)
        if kind == "rcond":
            condition = CONDITIONS[(op["kind"], op["typed"])]
            polls, value_kind = op["polls"], op["kind"]
            return ctx.wait_for_condition(
                functools.partial(condition.check, run, i),
                timedelta(seconds=op["interval"]),
                name=f"cond{i}",
                backoff=1.0,
                initial_state=condition.initial,
                until=lambda state: _polls_made(value_kind, state) >= polls,
                max_attempts=polls + 2,
            )
        if kind == "rbatch":
            result = ctx.parallel(
                *(
                    functools.partial(BRANCHES[value_kind], value_kind, n, seconds)
                    for value_kind, n, seconds in op["branches"]
                ),
                name=f"op{i}",
                max_concurrency=1,
            )
            return programs._batch_summary(result)
        ctx.sleep(timedelta(seconds=op["s"]))
        return None
    except (StepFailed, CallbackTimeout) as error:
        return ["caught", type(error).__name__, str(error)]


# --- where workflow code and bodies report ---------------------------------------------


class ShapeHooks(Hooks):
    """The explorer's hooks without its scheduler: one actor, no interleaving. A body's
    random draws come from its position and attempt, never from a shared generator, so
    they do not depend on the order runs take turns in either."""

    def __init__(self, journal: Journal, clock: FakeClock, ledger: Any) -> None:
        super().__init__(journal, random.Random(0), clock, Scheduler(), ledger)
        self.returned: set[tuple[str, str]] = set()  # (run key, position) a body returned at
        self.reruns: list[str] = []  # ``returned_body_not_rerun``

    @property
    def rng(self) -> random.Random:
        sc = durable.current_step()
        return random.Random(f"{sc.position}/{sc.attempt}")

    @rng.setter
    def rng(self, value: random.Random) -> None:
        pass  # ``Hooks.__init__`` sets one: each body's is its own

    def stamp(self, *, zombie: bool = False) -> Stamp:
        return Stamp(0, format_time(self.clock.now()), "worker", zombie)

    def step_stamp(self) -> Stamp:
        return self.stamp()

    def body(self, kind: str, semantics: str = "at_least_once") -> None:
        sc = durable.current_step()
        run = sc.idempotency_key.split(":", 1)[0]
        self.journal.bodies.append(
            BodyStart(self.stamp(), run, sc.position, sc.attempt, kind, semantics)
        )
        if (run, sc.position) in self.returned:
            self.reruns.append(
                f"{_run_id(run)} position {sc.position}: attempt {sc.attempt} started after "
                "a body there returned"
            )


def hooks() -> ShapeHooks:
    h = programs.hooks()
    assert isinstance(h, ShapeHooks)
    return h


# --- one program in one shape ----------------------------------------------------------


@dataclass
class Execution:
    """One program run to its end in one shape."""

    shape: Shape
    ledger: Any
    clock: FakeClock = field(default_factory=FakeClock)
    journal: Journal = field(default_factory=Journal)
    problems: list[str] = field(default_factory=list)  # errors out of resume or answers

    def __post_init__(self) -> None:
        self.payloads = MemoryPayloads(self.clock)
        self.invoker = MemoryInvoker()
        self.timers = MemoryTimers()
        self.reader = ClaimCheck(self.ledger, self.payloads)
        self.engine = Engine(
            APP,
            self.ledger,
            self.invoker,
            MemoryEffectStore(),
            clock=self.clock,
            config=self.shape.config(),
            timers=self.timers,
            payloads=self.payloads,
        )
        self.hooks = ShapeHooks(self.journal, self.clock, self.ledger)
        self.answered: set[str] = set()
        self.signaled: set[tuple[str, str]] = set()
        self.requests = 0

    def run(self, program: list[Op], seed: int) -> None:
        with (
            seeded_randomness(random.Random(f"metamorphic-values-{seed}")),
            active(self.hooks),
            warnings.catch_warnings(),
        ):
            # A result that fails its annotation makes pydantic warn as it encodes it.
            warnings.simplefilter("ignore")
            self.engine.start(META, {"ops": program})
            self._drive()

    def _drive(self) -> None:
        idle = 0
        for _ in range(MAX_ACTIONS):
            item = self.invoker.pop()
            if item is not None:
                self._resume(item.run_id, item.hop, item.reason)
                idle = 0
                continue
            fired = self.timers.due(self.clock.now())
            if fired:
                for run_id in fired:
                    self._resume(run_id, 0, "timer")
                continue
            if self.engine.sweep().invoked:
                continue
            # The outside world answers once nothing else is due soon: then every shape
            # has done the same by then, whether it served its short waits in-process
            # (the clock moved inside an invocation) or parked on timers (it moves here).
            wake = self._next_wake()
            quiet = wake is None or wake > self.clock.now() + QUIET
            if quiet and self._answer_one():
                idle = 0
                continue
            if all(h.run.terminal for h in self.histories().values()):
                return
            if wake is not None:
                self.clock.set(wake)
                continue
            self.clock.advance(timedelta(seconds=IDLE_JUMPS[min(idle, len(IDLE_JUMPS) - 1)]))
            idle += 1
            if idle > 2 * len(IDLE_JUMPS):
                return  # nothing will ever wake the rest: they stay unfinished
        self.problems.append(f"still busy after {MAX_ACTIONS} actions")

    def _resume(self, run_id: str, hop: int, reason: str) -> None:
        self.requests += 1
        try:
            self.engine.resume(run_id, Invocation(request_id=f"r{self.requests}"), hop, reason)
        except Exception as error:  # the engine must not let one out: an outcome
            self.problems.append(f"resume raised {type(error).__name__}")

    def _next_wake(self) -> datetime | None:
        now = self.clock.now()
        times = [at for _, at in self.timers.armed.values()]
        for history in self.histories().values():
            if history.run.due_at and not history.run.terminal:
                times.append(parse_time(history.run.due_at) + _TICK)
        later = [t for t in times if t > now]
        return min(later) if later else None

    def _answer_one(self) -> bool:
        """Answer one outstanding callback (7), or send a signal (1) to a run waiting for
        one it has none of: the same answers in every shape."""
        for token, mail in sorted(self.journal.mailbox.items()):
            if token in self.answered:
                continue
            self.answered.add(token)
            run = self.ledger.get_run(mail.run_id)
            if run is None or run.terminal:
                continue
            self._outside(functools.partial(self.engine.complete_callback, token, 7, None))
            return True
        for run_id, h in sorted(self.histories().items()):
            if h.run.terminal:
                continue
            for position, step in sorted(h.steps.items()):
                if step.kind != StepKind.SIGNAL or step.status != StepStatus.WAITING:
                    continue
                buffered = [s for s in h.signals if s.name == step.name and s.consumed_by is None]
                if buffered or (run_id, position) in self.signaled:
                    continue
                self.signaled.add((run_id, position))
                self._outside(functools.partial(self.engine.signal, run_id, step.name, 1))
                return True
        return False

    def _outside(self, call: Callable[[], Any]) -> None:
        try:
            call()
        except DurableError as error:  # refused (expired, already answered): an outcome
            self.problems.append(f"answer refused: {type(error).__name__}")

    def run_ids(self) -> list[str]:
        ids: set[str] = set()
        for workflow in (META, WORKFLOW, LANED):
            cursor: str | None = None
            while True:
                page = self.ledger.list_runs(workflow=workflow, limit=100, cursor=cursor)
                ids.update(r.run_id for r in page.items)
                cursor = page.cursor
                if cursor is None:
                    break
        return sorted(ids)

    def histories(self) -> dict[str, RunHistory]:
        loaded = {run_id: self.reader.load(run_id) for run_id in self.run_ids()}
        return {run_id: h for run_id, h in loaded.items() if h is not None}


# --- the outcome -----------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class RunOutcome:
    """What a run did, without ids and timestamps (run ids become ``label``s)."""

    label: str  # the workflow and a digest of its input
    status: str
    result: str
    error: str
    steps: tuple[tuple[str, str, str, str, int], ...]  # position, kind, name, status, attempt
    signals: tuple[tuple[str, str, str], ...]  # name, payload, the position that took it
    observed: tuple[tuple[str, tuple[str, ...]], ...]  # op -> what code got back, each
    bodies: tuple[tuple[str, str, int, int], ...]  # position, kind, attempt, times
    effects: int
    polls: tuple[tuple[str, int], ...]


@dataclass
class Outcome:
    shape: str
    runs: list[RunOutcome]
    problems: list[str]
    reruns: list[str]  # ``returned_body_not_rerun``: bodies started after one returned


_TIME = re.compile(r"(?<!datetime\()\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?")


def outcome(execution: Execution) -> Outcome:
    histories = execution.histories()
    labels = {run_id: _label(h) for run_id, h in histories.items()}

    def mask(text: str) -> str:
        for run_id, label in labels.items():
            text = text.replace(run_id, label)
        return _TIME.sub("<time>", text)

    journal = execution.journal
    by_run: dict[str, list[BodyStart]] = {}
    for b in journal.bodies:
        by_run.setdefault(_run_id(b.run), []).append(b)
    runs = []
    for run_id, h in histories.items():
        r = h.run
        keys = {key for key in journal.observed if _run_id(key[0]) == run_id}
        observed = tuple(
            sorted(
                (
                    str(key[1]),
                    tuple(sorted({mask(text) for text, _ in journal.observed[key]})),
                )
                for key in keys
            )
        )
        bodies = Counter(
            (b.position, b.kind, b.attempt) for b in by_run.get(run_id, []) if b.kind != "poll"
        )
        effects = sum(len(stamps) for key, stamps in journal.effects.items() if run_id in key)
        polls = tuple(
            sorted((str(k[1]), n) for k, n in journal.polls.items() if _run_id(k[0]) == run_id)
        )
        runs.append(
            RunOutcome(
                label=labels[run_id],
                status=r.status.value,
                result=mask(_short(r.output or "")),
                error=mask(f"{r.error.type}: {r.error.message}") if r.error else "",
                steps=tuple(
                    (s.position, s.kind.value, s.name, s.status.value, s.attempt)
                    for _, s in sorted(h.steps.items())
                ),
                signals=tuple(
                    sorted((s.name, s.payload or "", s.consumed_by or "") for s in h.signals)
                ),
                observed=observed,
                bodies=tuple(sorted((*k, n) for k, n in bodies.items())),
                effects=effects,
                polls=polls,
            )
        )
    return Outcome(
        execution.shape.name,
        sorted(runs),
        [mask(p) for p in execution.problems],
        [mask(r) for r in execution.hooks.reruns],
    )


def _run_id(run_key: str) -> str:
    """The run id of a run key ``<run id>.<incarnation>``."""
    return run_key.rsplit(".", 1)[0]


def _label(history: RunHistory) -> str:
    run = history.run
    text = json.dumps(json.loads(run.input or "null"), sort_keys=True)
    return f"{run.workflow}#{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def _short(text: str) -> str:
    """``text`` with every run of one character longer than 100 written as its count (a
    result over the item limit is 410,000 of them), so a difference shows."""
    return _REPEATS.sub(lambda m: f"<{m.group(1)}*{len(m.group(0))}>", text)


_REPEATS = re.compile(r"(.)\1{100,}")


# --- comparing the shapes --------------------------------------------------------------


def differences(reference: Outcome, other: Outcome) -> list[str]:
    """What ``other`` did that ``reference`` did not (empty: the same outcome)."""
    out = []
    where = f"{other.shape} vs {reference.shape}"
    ref_labels = Counter(r.label for r in reference.runs)
    other_labels = Counter(r.label for r in other.runs)
    if ref_labels != other_labels:
        out.append(f"{where}: runs {sorted(other_labels.items())} != {sorted(ref_labels.items())}")
    for label in sorted(set(ref_labels) & set(other_labels)):
        ours = [r for r in reference.runs if r.label == label]
        theirs = [r for r in other.runs if r.label == label]
        for a, b in zip(ours, theirs, strict=False):
            if a == b:
                continue
            for f in fields(RunOutcome):
                x, y = getattr(a, f.name), getattr(b, f.name)
                if x != y:
                    out.append(f"{where}: run {label}: {f.name}: {_show(y, x)} != {_show(x, y)}")
            break  # the first of its runs that differs says it
    if reference.problems != other.problems:
        out.append(f"{where}: problems {other.problems} != {reference.problems}")
    return out


def _show(value: Any, against: Any) -> str:
    """``value`` as text, around where it first differs from ``against``."""
    text, other = repr(value), repr(against)
    at = next((i for i, (a, b) in enumerate(zip(text, other, strict=False)) if a != b), None)
    if at is None:
        at = min(len(text), len(other))
    start = max(0, at - 200)
    return (
        ("..." if start else "") + text[start : at + 300] + ("..." if at + 300 < len(text) else "")
    )


@dataclass
class Verdict:
    seed: int
    program: list[Op]
    outcomes: list[Outcome]
    mismatches: list[str]  # ``shapes_agree``
    reruns: list[str]  # ``returned_body_not_rerun``, any shape

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.reruns

    def report(self) -> str:
        lines = [f"metamorphic seed {self.seed}: the shapes disagree or a body ran again"]
        lines += [f"  [shapes_agree] {m}" for m in self.mismatches[:8]]
        lines += [f"  [returned_body_not_rerun] {r}" for r in self.reruns[:4]]
        lines.append(f"  program: {json.dumps(self.program)[:1500]}")
        test = "tests/simulation/test_metamorphic*.py"
        lines.append(f"  replay: SIM_METAMORPHIC_SEED={self.seed} pytest {test}")
        return "\n".join(lines)


def run_in(shape: Shape, program: list[Op], seed: int, ledger: Any = None) -> Outcome:
    execution = Execution(shape, ledger if ledger is not None else MemoryLedger())
    execution.run(program, seed)
    return outcome(execution)


def check_program(
    seed: int,
    shapes: tuple[Shape, ...] = SHAPES,
    ledgers: Iterator[Any] | None = None,
    program: list[Op] | None = None,
) -> Verdict:
    """Run the program of ``seed`` (or ``program``) in each shape (on the next of
    ``ledgers`` for each, else a new memory ledger) and compare each with the first."""
    ops = program if program is not None else generate(seed)
    outcomes = [
        run_in(shape, ops, seed, next(ledgers) if ledgers is not None else None) for shape in shapes
    ]
    mismatches = [m for other in outcomes[1:] for m in differences(outcomes[0], other)]
    reruns = sorted({f"{o.shape}: {r}" for o in outcomes for r in o.reruns})
    return Verdict(seed, ops, outcomes, mismatches, reruns)


def explore(
    budget: float, start: int = 1, seed: int | None = None
) -> tuple[int, float, list[Verdict]]:
    """Programs from seed ``start`` on for ``budget`` seconds (or only ``seed``): how many
    were checked, in how long, and the failing ones."""
    import time

    began = time.monotonic()
    seeds = [seed] if seed is not None else _count(start)
    checked, failed = 0, []
    for s in seeds:
        if seed is None and time.monotonic() - began > budget:
            break
        verdict = check_program(s)
        checked += 1
        if not verdict.ok:
            failed.append(verdict)
    return checked, time.monotonic() - began, failed


def _count(start: int) -> Iterator[int]:
    n = start
    while True:
        yield n
        n += 1
