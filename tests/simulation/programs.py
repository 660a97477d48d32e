"""Random small workflows: a seeded list of ops in the run's input, run by one workflow.

Every run carries its own program (``SimInput.ops``), so each can have a different shape:
steps (both semantics, retries, terminal failures, effects, checkpoints, compensations,
results of several types), sleeps, callbacks (with ``submit`` or a send step), signals,
conditions, recorded values, ``continue_as_new`` (an iteration counter in the input; now
and then with an input the workflow rejects), a failure of the workflow's own code and a
result over DynamoDB's item limit.

Workflow code and bodies report to the active ``Hooks`` (one simulation at a time per
process): which bodies started, which effects ran, what each durable call returned. The
functions are module-level on purpose: the engine caches per callable, and closures made
per schedule would keep every finished schedule alive.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, Field

import durable
from durable import App, Concurrency, Context, RateLimit, RetryPolicy, TerminalError
from durable.core.clock import FakeClock
from durable.core.model import RunRecord, format_time
from durable.core.retention import incarnation
from durable.engine.engine_parts import IfRunning, Reuse
from durable.engine.waits import Callback
from durable.errors import CallbackFailed, CallbackTimeout, ChildFailed, StepFailed
from tests.simulation.journal import BodyStart, Journal, Mail, Stamp, typed
from tests.simulation.scheduler import Scheduler

Op = dict[str, Any]
T = TypeVar("T")
WORKFLOW = "sim"
GATED = "sim-gated"  # the same workflow behind a concurrency limit (``durable.core.flow``)
GATE_LIMIT = 2
RATED = "sim-rated"  # the same workflow behind a rate limit
LANED = "sim-laned"  # behind a keyed gate: one run at a time per ``lane`` of the input
# The same workflow declaring a lifetime (``durable.core.lifetime``): every item of its runs
# carries a TTL, which the explorer's TTL actor honours; short enough that schedules
# reach it (a run failed at its end, its items deleted by TTL after the retention).
LIVED = "sim-lived"
LIVED_LIFETIME = timedelta(hours=1)
LANES = ("east", "west")
REFUSED = "refused-"  # the lanes of a map one of whose items lacks its lane
BIG = 410_000  # characters: a result over DynamoDB's 400 KB item limit
SIGNALS = ("siga", "sigb")
CHAIN_SIGNAL = "sigc"  # what ``chain_program`` waits for: sent only once the world settles


class SimInput(BaseModel):
    ops: list[dict[str, Any]]
    iteration: int = Field(default=0, ge=0)  # continue_as_new with -1 is refused
    lane: str | None = None  # the gate key of a ``LANED`` run


class Point(BaseModel):
    x: int
    tag: str


class Amount:
    """A value pydantic has no schema for: a step stores it by a codec (``serdes=``).
    ``fresh`` is not stored: a first execution that returned the body's value instead of
    the decoded one would differ from its replays (``replay_values_equal``)."""

    __slots__ = ("cents", "fresh")

    def __init__(self, cents: int, fresh: bool = False) -> None:
        self.cents, self.fresh = cents, fresh

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Amount) and (other.cents, other.fresh) == (self.cents, self.fresh)

    def __hash__(self) -> int:
        return hash((self.cents, self.fresh))

    def __repr__(self) -> str:
        return f"Amount({self.cents}, fresh={self.fresh})"


class AmountCodec:
    """``Amount`` as a JSON text of euros ("12.05"), ``fresh`` dropped."""

    def serialize(self, value: Amount) -> str:
        euros, cents = divmod(value.cents, 100)
        return json.dumps(f"{euros}.{cents:02d}")

    def deserialize(self, data: str) -> Amount:
        euros, cents = json.loads(data).split(".")
        return Amount(int(euros) * 100 + int(cents))


class CountCodec:
    """A stateful condition's count as ``{"n": 3}`` (the state of a codec's condition)."""

    def serialize(self, value: int) -> str:
        return json.dumps({"n": value})

    def deserialize(self, data: str) -> int:
        n: int = json.loads(data)["n"]
        return n


AMOUNT_CODEC = AmountCodec()
COUNT_CODEC = CountCodec()


# --- the generator -------------------------------------------------------------------


def generate_program(rng: random.Random, focus: frozenset[str] = frozenset()) -> list[Op]:
    """A program of 1-5 ops and now and then a tail (continue as new, a failure, a big
    result). ``focus``: the features this schedule leans towards (``coverage.focus_for``),
    whose ops come first (``_lead``) and last (``_tail``), on top of the ordinary draws.
    Every op is drawn for its final index: names carry it (``cb3``, ``cb3.1.2``), and
    ``events_consumed`` reads the op back from the name."""
    kinds = (
        *("step", "sleep", "callback", "signal", "condition", "value", "batch", "child"),
        *("sleep_until", "changed", "compensate", "approvals"),
    )
    ops: list[Op] = _lead(rng, focus) if focus else []
    start = len(ops)
    for i in range(start, start + rng.randint(1, 5)):
        kind = rng.choices(kinds, weights=(7, 2, 3, 2, 1, 1, 2, 2, 0.5, 0.5, 0.5, 1))[0]
        if kind == "batch":
            ops.append(_batch(rng, i))
        elif kind == "approvals":
            ops.append(_approvals(rng, i))
        elif kind == "child" and rng.random() < 0.3:
            ops.append(_distributed_map(rng, i))
        elif kind == "child":
            ops.append(_child(rng, i))
        else:
            ops.append(_op(rng, kind, i))
    if focus and "continue-as-new" in focus and rng.random() < 0.6:
        # A signal then the hand-over: a signal may arrive while the run is about to
        # continue as new, or after (issue 43).
        ops.append(_op(rng, "signal", len(ops)))
        ops.append({"op": "continue", "times": rng.randint(1, 2), "bad": rng.random() < 0.1})
        return ops
    tail = rng.random()
    if tail < 0.15:
        ops.append({"op": "continue", "times": rng.randint(1, 2), "bad": rng.random() < 0.3})
    elif tail < 0.25:
        ops.append({"op": "fail"})
    elif tail < 0.29:
        ops.append({"op": "big"})
    return ops


def _lead(rng: random.Random, focus: frozenset[str]) -> list[Op]:
    """The first ops of a program on a seed focused on ``focus``: a keyed child of the
    focused ``if_running`` (first thing, so the parent meets a run of that key while it
    is going), a codec's step, two plain steps in a row (an async workflow awaits them
    together); now and then a callback whose sender sends heartbeats."""
    ops: list[Op] = []
    for attach in (False, True):
        if f"child if_running={'attach' if attach else 'fail'}" in focus and rng.random() < 0.7:
            # Mostly the key an operator's continuing run takes first (``Policy._start``).
            key = CHILD_KEYS[0] if rng.random() < 0.8 else rng.choice(CHILD_KEYS)
            ops.append(keyed_child(rng, key, attach))
    if "codec" in focus and rng.random() < 0.7:
        step = _op(rng, "step", len(ops))
        ops.append({**step, "ret": "int", "codec": True, "filter": False})
    if "async workflow" in focus and rng.random() < 0.5:
        ops += [{**_op(rng, "step", len(ops)), "undo": False, "codec": False} for _ in range(2)]
    if "retry/fork" in focus and rng.random() < 0.5:
        # A child that fails, which the parent catches and goes on: an operator's retry
        # finds a failed child to retry.
        failing = _child(rng, len(ops))
        ops.append({**failing, "ops": [*failing["ops"], {"op": "fail"}], "catch": True})
    if rng.random() < 0.1:
        ask = _op(rng, "callback", len(ops))
        ops.append({**ask, "timeout": 3600, "submit": True, "heartbeat": True})
    return ops


def _batch(rng: random.Random, i: int) -> Op:
    """A parallel (or a map over branch numbers) of 1-3 branches, each 1-3 ops that may
    run steps, sleep, wait for callbacks and signals, and compensate. One branch at a
    time (``max_concurrency=1``): the explorer's actors are one thread each; what the
    threads of a wider batch add, taking turns on the engine's state, is tested in
    tests/unit/test_fanout.py."""
    kinds = ("step", "sleep", "callback", "signal", "value", "child", "continue")
    branches = [
        [
            _branch_op(rng, rng.choices(kinds, weights=(6, 2, 2, 1, 1, 1, 0.5))[0], f"{i}.{j}.{k}")
            for k in range(1, rng.randint(1, 3) + 1)
        ]
        for j in range(1, rng.randint(1, 3) + 1)
    ]
    rule = rng.choice(
        ("all", "all", "first_successful", {"min_successful": 1}, {"tolerated_failures": 1})
    )
    mapped = rng.random() < 0.3
    if mapped and rng.random() < 0.5:
        # A map runs one function per item: every branch the same ops, and its callbacks
        # of one name (an approval per item), so an operator's answer by name alone cannot
        # say which (issue 31, hole 5). ``shared_name`` says how the journal finds each.
        template = branches[0]
        if not any(op["op"] == "callback" for op in template):
            template.append(_op(rng, "callback", f"{i}.1.{len(template) + 1}"))
        branches = [[dict(op) for op in template] for _ in range(max(2, len(branches)))]
        for branch_ops in branches:
            for k, op in enumerate(branch_ops, start=1):
                if op["op"] == "callback":
                    op["name"] = shared_name(i, k)
    return {"op": "batch", "map": mapped, "rule": rule, "branches": branches}


def _approvals(rng: random.Random, i: int) -> Op:
    """An approval per item: a map whose 2-3 branches each wait on a callback of one
    name, as ``ctx.map(ask_manager, expenses)`` does (issue 31, hole 5)."""
    ask = _op(rng, "callback", f"{i}.1.1")
    ask["name"] = shared_name(i, 1)
    branches = [[dict(ask)] for _ in range(rng.randint(2, 3))]
    rule = rng.choice(("all", {"tolerated_failures": 1}, {"min_successful": 1}))
    return {"op": "batch", "map": True, "rule": rule, "branches": branches}


def shared_name(i: int | str, k: int) -> str:
    """A callback name every branch of the map at op ``i`` uses for its op ``k``."""
    return f"cb{i}.m.{k}"


def _branch_op(rng: random.Random, kind: str, i: str) -> Op:
    """An op of a batch's branch: a child run among them (keyed or not, awaited or not),
    so a branch the rule cancels leaves a child to cancel (issue 31, hole 6)."""
    return _child(rng, i) if kind == "child" else _op(rng, kind, i)


# Keys a keyed child (``id=``) takes, each with a program of its own that an operator can
# also start under that key (``durable start --key``), so a parent meets a finished run of
# that key it did not start (issue 31, hole 1).
CHILD_KEYS = ("kc1", "kc2", "kc3")


def keyed_program(key: str) -> list[Op]:
    """What a keyed child of ``key`` runs: always the same, so the operator's start and
    the child's are the same run (same id, same input)."""
    return [{"op": "step", "ret": "int", "tries": 1, "undo": False, "catch": False, **_PLAIN}]


def chain_program(key: str) -> list[Op]:
    """What an operator now and then starts under a child's key instead: a run that waits
    for a signal and then continues as new (once), so a parent's ``run_child(id=key,
    if_running="attach")`` takes a run whose chain goes on under another id (issue 43).
    Its input differs from ``keyed_program``'s, so a parent attaches to it while it runs
    (and is refused once it ended). Its signal is one the chaotic phase never sends (only
    the settling does), so that it is still going when the parents come."""
    wait = {"op": "signal", "name": CHAIN_SIGNAL, "timeout": None, "catch": True}
    return [wait, {"op": "continue", "times": 1, "bad": False, "key": key}]


def keyed_child(rng: random.Random, key: str, attach: bool) -> Op:
    """A child op keyed ``key`` with ``if_running="attach"`` or ``"fail"``."""
    return {
        "op": "child",
        "ops": keyed_program(key),
        "id": key,
        "wait": rng.random() < 0.75,
        "catch": rng.random() < 0.6,
        "attach": attach,
    }


def _child(rng: random.Random, i: int | str, depth: int = 0) -> Op:
    """A child run of the same workflow with a program of its own (1-3 ops that may run
    steps, sleep, wait for callbacks and signals, start a grandchild; now and then its own
    code fails), that the parent waits for (``run_child``) or starts and forgets
    (``start_child``); now and then keyed (``id=``, ``CHILD_KEYS``)."""
    wait, catch = rng.random() < 0.75, rng.random() < 0.6
    if rng.random() < 0.25:
        key = rng.choice(CHILD_KEYS)
        # Now and then "start it unless it is running": a run holding the key is taken.
        attach = rng.random() < 0.5
        return {
            "op": "child",
            "ops": keyed_program(key),
            "id": key,
            "wait": wait,
            "catch": catch,
            "attach": attach,
        }
    kinds = ("step", "sleep", "callback", "signal", "child")
    ops = []
    for k in range(1, rng.randint(1, 3) + 1):
        kind = rng.choices(kinds, weights=(6, 2, 2, 1, 1 if depth < 1 else 0))[0]
        at = f"c{i}.{k}".replace(".", "_")
        ops.append(_child(rng, at, depth + 1) if kind == "child" else _op(rng, kind, f"c{i}.{k}"))
    if rng.random() < 0.15:
        ops.append({"op": "fail"})
    return {"op": "child", "ops": ops, "wait": wait, "catch": catch}


def _distributed_map(rng: random.Random, i: int) -> Op:
    """A distributed map of 1-4 items, each a child run of this workflow with a program
    of its own, a window of 1-2 children, and any completion rule."""
    programs = [_child(rng, i)["ops"] for _ in range(rng.choice((0, 1, 2, 3, 4, 6)))]
    rules: list[Any] = ["all", "all", "first_successful", {"tolerated_failures": 1}]
    if programs:
        rules.append({"min_successful": 1})
    # Now and then over the workflow behind a keyed gate (a lane per item), and now and
    # then one item lacks its lane: the map must refuse before any child starts (issue
    # 31, hole 4), so the others get lanes no run may ever have (``REFUSED``).
    laned = bool(programs) and rng.random() < 0.3
    missing = laned and rng.random() < 0.35
    lanes: list[str | None] = [
        f"{REFUSED}{n}" if missing else rng.choice(LANES) for n in range(len(programs))
    ]
    if missing:
        lanes[rng.randrange(len(lanes))] = None
    return {
        "op": "dmap",
        "items": programs,
        "window": rng.randint(1, 3),
        "rule": rng.choice(rules),
        # After a deploy (``Hooks.deployed``) the code maps one item fewer: a replay of an
        # open map with fewer items (issue 31, hole 3).
        "shrinks": bool(programs) and not missing and rng.random() < 0.4,
        **({"lanes": lanes} if laned else {}),
    }


def _op(rng: random.Random, kind: str, i: int | str) -> Op:
    if kind == "step":
        op: Op = {
            "op": "step",
            "ret": rng.choice(sorted(BODIES)),
            "amo": rng.random() < 0.4,
            "fails": rng.choice((0, 0, 0, 1, 2)),
            "terminal": rng.random() < 0.1,
            "tries": rng.choice((1, 2, 3)),
            "effect": rng.random() < 0.4,
            "undo": rng.random() < 0.3,
            "ckpt": rng.random() < 0.2,
            "catch": rng.random() < 0.5,
        }
        # A retry filter by message (RetryPolicy.retryable_errors) on a step that fails
        # twice with three tries: the first failure retries, the second is terminal by the
        # filter. Derived from the draws above, so every seed's schedule stays the same.
        op["filter"] = op["fails"] == 2 and op["tries"] == 3 and not op["terminal"]
        # A result stored by a codec (serdes=): an ``Amount`` in place of the int.
        op["codec"] = op["ret"] == "int" and op["tries"] == 2
        return op
    if kind == "sleep":
        return {"op": "sleep", "s": rng.choice((1, 30, 600, 3600))}
    if kind == "callback":
        op = {
            "op": "callback",
            "name": f"cb{i}",
            "timeout": rng.choice((None, None, 60, 3600)),
            "submit": rng.random() < 0.6,
            "work": rng.random() < 0.5,  # without submit: a step between sending and waiting
            "catch": rng.random() < 0.7,
        }
        # A callback whose sender sends heartbeats (heartbeat_timeout): derived from the
        # draws above, so every seed's schedule stays the same.
        op["heartbeat"] = op["timeout"] == 3600 and bool(op["submit"])
        return op
    if kind == "signal":
        return {
            "op": "signal",
            "name": rng.choice(SIGNALS),
            "timeout": rng.choice((None, None, 600)),
            "catch": rng.random() < 0.7,
        }
    if kind == "condition":
        op = {"op": "condition", "polls": rng.randint(1, 3), "timeout": rng.choice((None, 3600))}
        # A check that carries state (initial_state, until, max_attempts): derived from the
        # draws above, so every seed's schedule stays the same.
        op["stateful"] = op["polls"] == 2
        # Its state and result stored by a codec (serdes=), now and then.
        op["codec"] = op["stateful"] and op["timeout"] is None
        return op
    if kind == "sleep_until":
        return {"op": "sleep_until", "s": rng.choice((1, 600, 3600))}
    if kind == "changed":
        return {"op": "changed", "patch": rng.choice(("fix-a", "fix-b"))}
    if kind == "compensate":
        return {"op": "compensate"}
    if kind == "continue":  # in a branch: the run goes on as a new run from inside a batch
        return {"op": "continue", "times": rng.randint(1, 2), "bad": False}
    return {"op": "value", "kind": rng.choice(("now", "uuid", "random"))}


# --- hooks: where workflow code and bodies report -------------------------------------


class Hooks:
    def __init__(
        self,
        journal: Journal,
        rng: random.Random,
        clock: FakeClock,
        sched: Scheduler,
        ledger: Any,
    ) -> None:
        self.journal = journal
        self.rng = rng
        self.clock = clock
        self.sched = sched
        self.ledger = ledger  # unwrapped: the simulation's own reads do not interleave
        # A deploy happened (the "deploy" decision): from then on the workflow's code is
        # the new one (a distributed map that ``shrinks`` maps one item fewer).
        self.deployed = False

    def stamp(self, *, zombie: bool = False) -> Stamp:
        now = format_time(self.clock.now())
        return Stamp(self.sched.seq, now, self.sched.actor(), zombie)

    def step_stamp(self) -> Stamp:
        """A stamp from inside a step body, marked when the worker is a zombie: another
        worker claimed the run since this one did."""
        try:
            x: Any = durable.current_step()._step.x  # the engine's Execution behind the body
            run_id, fence, owner = x.run.run_id, x.run.fence, x.owner
        except AttributeError:  # the engine's internals moved: no attribution
            return self.stamp()
        stored = self.ledger.get_run(run_id)
        zombie = stored is None or stored.fence != fence or stored.lease_owner != owner
        return self.stamp(zombie=zombie)

    def body(self, kind: str, semantics: str = "at_least_once") -> None:
        sc = durable.current_step()
        run = sc.idempotency_key.split(":", 1)[0]
        stamp = self.step_stamp()
        self.journal.bodies.append(BodyStart(stamp, run, sc.position, sc.attempt, kind, semantics))
        if kind != "undo" and not stamp.zombie:
            self._check_gate(sc._step.x.run, stamp)

    def _check_gate(self, run: RunRecord, stamp: Stamp) -> None:
        """Flow control: a body of a gated run starts only while its run holds a slot,
        and the gate never holds more runs than its limit (zombies aside: a worker that
        lost its lease may still be running a body it began, as with any step). Gates:
        ``GATED``'s (``GATE_LIMIT``), one per lane of ``LANED``, and the ``buffer_one``
        schedule's (one)."""
        if run.gate is None:
            return
        self.journal.produced["a body of a gated run"] += 1
        limit = GATE_LIMIT if run.workflow == GATED else 1
        gate = self.ledger.read_gate(run.gate)
        if run.run_id not in gate.holders or len(gate.holders) > limit:
            self.journal.violate(
                "gate_limit_holds",
                f"{run.run_id} started a body holding {gate.holders} (limit {limit})",
                stamp.seq,
            )

    def effect_call(self, key: str) -> str:
        self.journal.effects.setdefault(key, []).append(self.step_stamp())
        reference = f"ref-{len(self.journal.external) + 1}"
        self.journal.external[key] = reference
        return reference

    def effect_reconcile(self, key: str) -> str | None:
        return self.journal.external.get(key)

    def mail(self, cb: Callback) -> None:
        sc = durable.current_step()
        run = sc.idempotency_key.split(":", 1)[0]
        self.journal.mailbox.setdefault(
            cb.token, Mail(self.stamp(), sc.run_id, run, cb.position, cb.name)
        )

    def observe(self, run: str, index: int | str, value: Any) -> None:
        self.journal.observed.setdefault((run, index), []).append((typed(value), self.stamp()))


_active: list[Hooks] = []


def hooks() -> Hooks:
    if not _active:
        raise RuntimeError("the simulation's workflows run only inside a simulation")
    return _active[-1]


@contextmanager
def active(h: Hooks) -> Iterator[Hooks]:
    _active.append(h)
    try:
        yield h
    finally:
        _active.remove(h)


# --- step bodies, one per result type ------------------------------------------------


def _body(op: Op, make: Callable[[random.Random], T]) -> T:
    h = hooks()
    semantics = "at_most_once_per_attempt" if op["amo"] else "at_least_once"
    h.body("step", semantics)
    sc = durable.current_step()
    if op["ckpt"]:
        sc.checkpoint({"attempt": sc.attempt})
    if op["effect"]:
        sc.effect("charge", h.effect_call, h.effect_reconcile)
    if sc.attempt <= op["fails"]:
        raise RuntimeError(f"attempt {sc.attempt} fails (retryable)")
    if op["terminal"]:
        raise TerminalError("this step fails for good")
    return make(h.rng)


def ret_int(op: Op) -> int:
    return _body(op, lambda r: r.randint(0, 10**6))


def ret_str(op: Op) -> str:
    return _body(op, lambda r: f"s{r.randint(0, 999)}")


def ret_tuple(op: Op) -> tuple[int, str]:
    return _body(op, lambda r: (r.randint(0, 99), f"t{r.randint(0, 99)}"))


def ret_point(op: Op) -> Point:
    return _body(op, lambda r: Point(x=r.randint(0, 99), tag=f"p{r.randint(0, 9)}"))


def ret_time(op: Op) -> datetime:
    return _body(op, lambda r: datetime(2026, 1, 1, tzinfo=UTC) + timedelta(r.random()))


def ret_none(op: Op) -> None:
    _body(op, lambda r: None)


def ret_amount(op: Op) -> Amount:
    """``ret_int``'s draw as an ``Amount``, stored by ``AMOUNT_CODEC``."""
    return _body(op, lambda r: Amount(r.randint(0, 10**6), fresh=True))


BODIES: dict[str, Callable[[Op], Any]] = {
    "int": ret_int,
    "str": ret_str,
    "tuple": ret_tuple,
    "point": ret_point,
    "time": ret_time,
    "none": ret_none,
}


# The same bodies as ``async def`` (issue 36): each gives its loop a turn before and after
# the work, so awaited steps of an async workflow interleave (``async_programs.py``).
async def _abody(op: Op, make: Callable[[random.Random], T]) -> T:
    await asyncio.sleep(0)
    value = _body(op, make)
    await asyncio.sleep(0)
    return value


async def aret_int(op: Op) -> int:
    return await _abody(op, lambda r: r.randint(0, 10**6))


async def aret_str(op: Op) -> str:
    return await _abody(op, lambda r: f"s{r.randint(0, 999)}")


async def aret_tuple(op: Op) -> tuple[int, str]:
    return await _abody(op, lambda r: (r.randint(0, 99), f"t{r.randint(0, 99)}"))


async def aret_point(op: Op) -> Point:
    return await _abody(op, lambda r: Point(x=r.randint(0, 99), tag=f"p{r.randint(0, 9)}"))


async def aret_time(op: Op) -> datetime:
    return await _abody(op, lambda r: datetime(2026, 1, 1, tzinfo=UTC) + timedelta(r.random()))


async def aret_none(op: Op) -> None:
    await _abody(op, lambda r: None)


ASYNC_BODIES: dict[str, Callable[[Op], Coroutine[Any, Any, Any]]] = {
    "int": aret_int,
    "str": aret_str,
    "tuple": aret_tuple,
    "point": aret_point,
    "time": aret_time,
    "none": aret_none,
}


def step_policy(op: Op) -> RetryPolicy:
    """A step op's retry policy (its tries, now and then a filter by message)."""
    return RetryPolicy(
        max_attempts=op["tries"],
        initial_delay=timedelta(seconds=2),
        retryable_errors=(r"^attempt 1 fails",) if op.get("filter") else (),
    )


_PLAIN: Op = {"amo": False, "ckpt": False, "effect": False, "fails": 0, "terminal": False}


def undo(result: Any, op: Op) -> None:
    hooks().body("undo")


def submit(cb: Callback) -> None:
    h = hooks()
    h.body("submit")
    h.mail(cb)


def send(cb: Callback) -> None:
    h = hooks()
    h.body("send")
    h.mail(cb)


def poll(run: str, index: int | str, needed: int) -> dict[str, int] | None:
    h = hooks()
    h.journal.bodies.append(BodyStart(h.stamp(), run, "", 0, "poll", "at_least_once"))
    count = h.journal.polls.get((run, index), 0) + 1
    h.journal.polls[(run, index)] = count
    return {"polls": count} if count >= needed else None


def poll_state(run: str, index: int | str, state: int) -> int:
    """A stateful check: the state the last recorded poll left, plus one."""
    h = hooks()
    h.journal.bodies.append(BodyStart(h.stamp(), run, "", 0, "poll", "at_least_once"))
    h.journal.polls[(run, index)] = h.journal.polls.get((run, index), 0) + 1
    return state + 1


# --- the one workflow ------------------------------------------------------------------

APP = App()


@APP.workflow(name=LIVED, max_lifetime=LIVED_LIFETIME)
@APP.workflow(name=LANED, concurrency=Concurrency(1, key="lane"))
@APP.workflow(name=RATED, rate_limit=RateLimit(2, timedelta(minutes=1)))
@APP.workflow(name=GATED, concurrency=GATE_LIMIT)
@APP.workflow(name=WORKFLOW)
def sim(ctx: Context, spec: SimInput) -> dict[str, Any]:
    h = hooks()
    run = _run_key(ctx)
    if ctx.run_id not in h.journal.runs_seen:
        h.journal.runs_seen.append(ctx.run_id)
    for i, op in enumerate(spec.ops):
        h.observe(run, i, _interpret(ctx, run, i, op, spec))
        # After each op, how far this run has got; the note names the run and its round,
        # so a stored value can be traced to the code that set it (``invariants``).
        h.journal.produced["ctx.set_progress"] += 1
        ctx.set_progress(i + 1, len(spec.ops), note=progress_note(ctx.run_id, spec.iteration))
    if any(op["op"] == "big" for op in spec.ops):
        return {"blob": "x" * BIG}
    return {"iteration": spec.iteration, "ops": len(spec.ops)}


def progress_note(run_id: str, iteration: int) -> str:
    """The note ``sim`` reports its progress with: whose it is."""
    return f"{run_id} round {iteration}"


def _run_key(ctx: Context) -> str:
    """``<run id>.<incarnation>``, as step idempotency keys start (a keyed restart after
    expiry reuses the run id, not the incarnation)."""
    try:
        return f"{ctx.run_id}.{incarnation(ctx._exec.run)}"
    except AttributeError:  # the engine's internals moved: the run id alone
        return ctx.run_id


def branch(run: str, i: str, ops: list[Op], spec: SimInput, ctx: Context) -> list[str]:
    """One branch of a batch: its ops, each observed under ``i.j.k`` like a top-level
    op (replays of the branch must see the same values); the branch's value is their
    typed texts, so that it encodes the same whatever the ops returned."""
    h = hooks()
    seen = []
    for k, op in enumerate(ops, start=1):
        value = _interpret(ctx, run, f"{i}.{k}", op, spec)
        h.observe(run, f"{i}.{k}", value)
        seen.append(typed(value))
    return seen


def branch_of_map(
    run: str, i: int | str, ops: list[list[Op]], spec: SimInput, ctx: Context, j: int
) -> list[str]:
    return branch(run, f"{i}.{j}", ops[j - 1], spec, ctx)


def _batch_summary(result: durable.BatchResult[Any]) -> list[Any]:
    """What a batch returned, as plain values (errors by type and text)."""
    return [
        [
            item.status,
            item.value,
            type(item.error).__name__ if item.error else None,
            str(item.error or ""),
            item.name,  # recorded: a replay must give the same names and reason
        ]
        for item in result
    ] + [result.ok, result.rule, result.completion_reason]


def context_call(op: Op) -> str:
    """The public ``Context`` method an op calls (``tests/simulation/coverage.py``)."""
    kind = op["op"]
    if kind == "child":
        made = "ctx.run_child" if op["wait"] else "ctx.start_child"
        if op.get("id"):
            if op.get("reuse"):
                return f"{made}(id=, reuse=after_end)"
            return f"{made}(id=, attach)" if op.get("attach") else f"{made}(id=)"
        return made
    if kind == "callback":
        return "ctx.wait_for_callback" if op["submit"] else "ctx.create_callback"
    if kind == "batch":
        return "ctx.map" if op["map"] else "ctx.parallel"
    if kind == "value":
        return f"ctx.{op['kind']}"
    if kind == "step" and op.get("filter"):
        return "ctx.step(retryable_errors)"
    if kind == "condition" and op.get("stateful"):
        return "ctx.wait_for_condition(initial_state)"
    return {
        "dmap": "ctx.map(distributed=True)",
        "signal": "ctx.wait_for_signal",
        "condition": "ctx.wait_for_condition",
        "continue": "ctx.continue_as_new",
        "fail": "workflow code fails",
        "big": "a result over the item limit",
    }.get(kind, f"ctx.{kind}")


def _distributed(ctx: Context, i: int | str, op: Op) -> Any:
    """A distributed map over this workflow, or over ``LANED`` with a lane per item."""
    items = op["items"][:-1] if op.get("shrinks") and hooks().deployed else op["items"]
    lanes = op.get("lanes")
    if lanes is not None:
        hooks().journal.produced["ctx.map(distributed=True) over a keyed gate"] += 1
        if None in lanes:
            hooks().journal.produced["a map item missing its gate key"] += 1
    inputs = [
        {"ops": ops, **({} if lanes is None or lanes[n] is None else {"lane": lanes[n]})}
        for n, ops in enumerate(items)
    ]
    result: durable.BatchResult[Any] = ctx.map(
        WORKFLOW if lanes is None else LANED,
        inputs,
        name=f"op{i}",
        distributed=True,
        max_concurrency=op["window"],
        completion=op["rule"],
    )
    return _batch_summary(result)


def _step_body(op: Op) -> Any:
    """A step op's body: by a codec, async (with an undo) or plain, by its result kind."""
    if op.get("codec"):
        return ret_amount
    return (ASYNC_BODIES if op["undo"] else BODIES)[op["ret"]]


def _continue(ctx: Context, spec: SimInput, op: Op) -> None:
    """The run goes on as a new one: counted as it happens, not as generated
    (``coverage.FEATURES``)."""
    hooks().journal.produced["a run continues as new"] += 1
    following = -1 if op["bad"] else spec.iteration + 1
    ctx.continue_as_new({"ops": spec.ops, "iteration": following})


def _interpret(ctx: Context, run: str, i: int | str, op: Op, spec: SimInput) -> Any:
    kind = op["op"]
    hooks().journal.produced[context_call(op)] += 1
    if kind == "continue" and isinstance(i, str) and "." in i:
        hooks().journal.produced["ctx.continue_as_new in a branch"] += 1
    if op.get("codec"):
        hooks().journal.produced[f"{context_call(op).partition('(')[0]}(serdes)"] += 1
    timeout = timedelta(seconds=op["timeout"]) if op.get("timeout") else None
    if kind == "dmap":
        return _distributed(ctx, i, op)
    if kind == "batch":
        branches = op["branches"]
        if op["map"]:
            fn = functools.partial(branch_of_map, run, i, branches, spec)
            result = ctx.map(
                fn,
                range(1, len(branches) + 1),
                name=f"op{i}",
                max_concurrency=1,
                completion=op["rule"],
                item_name=lambda item, index: f"item-{item}",
            )
        else:
            result = ctx.parallel(
                *(
                    functools.partial(branch, run, f"{i}.{j}", ops, spec)
                    for j, ops in enumerate(branches, 1)
                ),
                name=f"op{i}",
                max_concurrency=1,
                completion=op["rule"],
            )
        return _batch_summary(result)
    try:
        if kind == "child":
            program = {"ops": op["ops"]}
            policy: IfRunning = "attach" if op.get("attach") else "fail"
            # A key a recurring parent reuses once its run ended (issue 46).
            reuse: Reuse = "after_end" if op.get("reuse") else "never"
            if op["wait"]:
                return ctx.run_child(
                    WORKFLOW, program, id=op.get("id"), if_running=policy, reuse=reuse
                )
            return ctx.start_child(
                WORKFLOW, program, id=op.get("id"), if_running=policy, reuse=reuse
            ).run_id
        if kind == "step":
            # A step with an undo runs an ``async def`` body (derived from the draws, so
            # every seed's schedule stays the same): ``ctx.step`` runs it to its end.
            if op["undo"] and not op.get("codec"):
                hooks().journal.produced["ctx.step(async)"] += 1
            return ctx.step(
                _step_body(op),
                op,
                name=f"op{i}",
                retry=step_policy(op),
                semantics="at_most_once_per_attempt" if op["amo"] else "at_least_once",
                compensate=undo if op["undo"] else None,
                serdes=AMOUNT_CODEC if op.get("codec") else None,
            )
        if kind == "sleep":
            ctx.sleep(timedelta(seconds=op["s"]))
            return None
        if kind == "callback":
            if op["submit"]:
                beat = timedelta(seconds=600) if op.get("heartbeat") else None
                return ctx.wait_for_callback(
                    op["name"], timeout, submit=submit, heartbeat_timeout=beat
                )
            cb = ctx.create_callback(op["name"], timeout)
            ctx.step(send, cb, name=f"{op['name']}.send")
            if op.get("work"):
                ctx.step(ret_int, _PLAIN, name=f"{op['name']}.work")
            return cb.result()
        if kind == "signal":
            return ctx.wait_for_signal(op["name"], timeout)
        if kind == "condition":
            if op.get("stateful"):
                return ctx.wait_for_condition(
                    functools.partial(poll_state, run, i),
                    timedelta(seconds=10),
                    timeout,
                    name=f"cond{i}",
                    backoff=1.0,
                    initial_state=0,
                    until=lambda n: n >= op["polls"],
                    max_attempts=op["polls"] + 3,
                    serdes=COUNT_CODEC if op.get("codec") else None,
                )
            check = functools.partial(poll, run, i, op["polls"])
            return ctx.wait_for_condition(
                check, timedelta(seconds=10), timeout, name=f"cond{i}", backoff=1.0
            )
        if kind == "value":
            return {"now": ctx.now, "uuid": ctx.uuid, "random": ctx.random}[op["kind"]]()
        if kind == "sleep_until":
            ctx.sleep_until(ctx.now() + timedelta(seconds=op["s"]))
            return None
        if kind == "changed":
            return ctx.changed(op["patch"])
        if kind == "compensate":
            ctx.compensate()
            return None
        if kind == "continue" and spec.iteration < op["times"]:
            _continue(ctx, spec, op)
        if kind == "fail" and ctx.version < op.get("fixed_in", ctx.version + 1):
            # (``fixed_in``: a bug the code of that version fixed, so that an operator's
            # retry of a run that failed on it, upgraded to that version, goes on.)
            raise RuntimeError("the workflow's own code fails here")
        return None
    except (StepFailed, CallbackTimeout, CallbackFailed, ChildFailed) as error:
        if not op.get("catch"):
            raise
        return ["caught", type(error).__name__, str(error)]


# The schedule the explorer fires (``World.fire``): its runs sleep a little, continue as
# new once, and the successor waits for a signal, so a fire may find the chain still going
# (and be skipped), mostly under another run than the one the schedule started (issue 43).
SCHEDULE = "sim-every-hour"
APP.schedule(
    WORKFLOW,
    "rate(1 hour)",
    name=SCHEDULE,
    input={
        "ops": [
            {"op": "sleep", "s": 30},
            {"op": "continue", "times": 1, "bad": False},
            {"op": "signal", "name": SIGNALS[0], "timeout": None, "catch": True},
        ]
    },
    overlap="skip",
)
# The same with ``overlap="allow"``: every fire starts a run.
ALLOWED = "sim-allow"
APP.schedule(
    WORKFLOW,
    "rate(1 hour)",
    name=ALLOWED,
    input={
        "ops": [
            {"op": "signal", "name": SIGNALS[1], "timeout": None, "catch": True},
            {"op": "continue", "times": 1, "bad": False},
        ]
    },
    overlap="allow",
)
# The same with ``buffer_one``: a fire while one runs waits for it (its gate holds one).
BUFFERED = "sim-buffered"
APP.schedule(
    WORKFLOW,
    "rate(1 hour)",
    name=BUFFERED,
    input={"ops": [{"op": "signal", "name": SIGNALS[1], "timeout": None, "catch": True}]},
    overlap="buffer_one",
)

# The code after a deploy: the same workflow as version 2 as well, so runs started (and
# children started) after it take version 2 while runs in flight replay on version 1
# (version skew between a parent and its children), and an operator may retry a failed
# run with ``upgrade_to=2``.
APP_V2 = App().include(APP)
APP_V2.workflow(name=WORKFLOW, version=2)(sim)
