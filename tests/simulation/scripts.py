"""Scripts: what a seed makes happen by construction, not by the luck of its draws.

The chaotic phase draws every decision from the seed, so what a schedule produces moves
whenever the engine changes how many port calls anything takes (every later draw
shifts). What the coverage test holds the generator to must not depend on that. So each
seed also carries out a few scripts (``scripts_for``): one per feature of its pair focus
(``coverage.focus_for``), each made of that pair's features where they compose (a run of
the focused workflow, async or gated, with a codec's step or keyed children first), and
one tour of the seed's class (``TOURS``: the rare operations, such as a version-1 run
that fails before a deploy and an operator's retry of it with ``upgrade_to``).

A script is a list of stages: each waits until the world is ready for it (a run it
started waits, failed, expired) and then is one ordinary decision (an outside event,
TTL, the clock, a timer, a worker's crash), so its steps are interleaved with the chaos
and replay as the rest do. The policy takes a stage as soon as it is ready. Whatever a
script did not bring about in the chaotic phase (its run canceled by an operator's
random cancel, its decisions past the schedule's end) is carried out again, calmly,
after the world settled (``explore.carry_out``): so a script's names are produced in
every schedule that runs it, whatever the engine's call counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from durable.core.model import RunRecord, parse_time
from tests.simulation.actors import OUTSIDE, SWEEPER, WORKERS, World
from tests.simulation.coverage import FEATURES, features_of
from tests.simulation.programs import (
    CHAIN_SIGNAL,
    CHILD_KEYS,
    SIGNALS,
    Op,
    keyed_program,
    shared_name,
)
from tests.simulation.scheduler import (
    CRASH,
    CRASH_AFTER,
    LOSE_REPORT,
    LOSE_WAKE,
    PAUSE_AFTER,
    Decision,
)

Apply = Callable[[Decision], None]


@dataclass(frozen=True)
class Stage:
    """One step of a script: taken once ``ready``; ``make`` gives its decision (None: it
    has nothing left to do, as when the chaos did it already). ``prepare`` is how the
    calm run after settling brings the world to ``ready`` when settling alone does not
    (a worker halfway through an invocation, an invocation in the pool)."""

    ready: Callable[[World], bool]
    make: Callable[[World], Decision | None]
    prepare: Callable[[World, Apply], None] | None = None


@dataclass(frozen=True)
class Script:
    name: str
    # What it makes happen: names of ``coverage`` it produces in every schedule it runs in.
    produces: tuple[str, ...]
    # Its stages; ``suffix`` tells the tags and keys of a second attempt from the first's.
    stages: Callable[[str], list[Stage]]
    # Whether a schedule did what the script is for (a feature: one of its names).
    met: Callable[[Mapping[str, int]], bool]
    # Whether the chaotic phase carries it out (else only the calm run after settling,
    # when another script's run did not bring it about: ``scripts_for``'s riders).
    chaos: bool = True


def _all(names: tuple[str, ...]) -> Callable[[Mapping[str, int]], bool]:
    return lambda produced: all(produced.get(n) for n in names)


# --- ops -------------------------------------------------------------------------------


def step(**extra: Any) -> Op:
    """A step that returns an int at once (``keyed_program``'s), with ``extra`` keys."""
    return {**keyed_program("")[0], "filter": False, "codec": False, **extra}


HOLD: Op = {"op": "signal", "name": CHAIN_SIGNAL, "timeout": None, "catch": True}
"""A wait only a script (or the settling) ends: the chaos never sends ``CHAIN_SIGNAL``."""
FAIL: Op = {"op": "fail"}


def callback(i: int, *, submit: bool, heartbeat: bool = False, name: str = "") -> Op:
    return {
        "op": "callback",
        "name": name or f"cb{i}",  # its op's index (``invariants.events_consumed``)
        "timeout": 3600 if heartbeat else None,
        "submit": submit,
        "work": not submit,
        "catch": True,
        "heartbeat": heartbeat,
    }


def child(
    ops: list[Op],
    *,
    wait: bool = True,
    key: str | None = None,
    attach: bool = False,
    reuse: bool = False,
) -> Op:
    keyed: dict[str, Any] = (
        {"id": key, "attach": attach, "ops": keyed_program(key)} if key else {"ops": ops}
    )
    if key and reuse:
        keyed["reuse"] = True
    return {"op": "child", "wait": wait, "catch": True, **keyed}


def batch(branches: list[list[Op]], *, mapped: bool = False) -> Op:
    return {"op": "batch", "map": mapped, "rule": "all", "branches": branches}


def dmap(items: list[list[Op]], lanes: list[str | None] | None = None) -> Op:
    laned = {"lanes": lanes} if lanes is not None else {}
    return {"op": "dmap", "items": items, "window": 1, "rule": "all", "shrinks": False, **laned}


def numbered(ops: list[Op]) -> list[Op]:
    """``ops`` with each callback named by its final index (``cb3``)."""
    return [
        {**op, "name": f"cb{i}"} if op["op"] == "callback" and ".m." not in op["name"] else op
        for i, op in enumerate(ops)
    ]


# --- stages ----------------------------------------------------------------------------


def _always(world: World) -> bool:
    return True


def _event(**arg: Any) -> Decision:
    return Decision("event", OUTSIDE, arg)


def start(script: str, tag: str, program: list[Op], **how: Any) -> Stage:
    """Start a run of ``program`` (``how``: key, async, gated, version...), tagged."""
    arg: dict[str, Any] = {"type": "start", "script": script, "tag": tag, "key": None}
    arg |= {"program": numbered(program), **how}
    return Stage(_always, lambda w: _event(**arg))


def _run(world: World, tag: str) -> RunRecord | None:
    """The tagged run's item as stored (its status and times: no value resolved)."""
    run_id = world.tagged.get(tag)
    run: RunRecord | None = world.raw.get_run(run_id) if run_id is not None else None
    return run


def on_run(tag: str, when: Callable[[RunRecord], bool], **arg: Any) -> Stage:
    """An event on the tagged run, once ``when`` holds of it."""

    def ready(world: World) -> bool:
        run = _run(world, tag)
        return run is not None and when(run)

    return Stage(ready, lambda w: _event(on=tag, **arg))


def live(run: RunRecord) -> bool:
    return not run.terminal


def failed(run: RunRecord) -> bool:
    return run.status.value == "FAILED"


def ended(run: RunRecord) -> bool:
    return run.terminal


def restart_after_retention(
    script: str, tag: str, key: str, program: list[Op], **how: Any
) -> list[Stage]:
    """A keyed run that ends, the clock past its retention, TTL deleting it, and an
    operator's start of its key again (the same program: the same run id)."""

    def gone(world: World) -> bool:
        return world.tagged.get(tag) in world.ever_expired

    def past_retention(world: World) -> bool:
        run = _run(world, tag)
        return gone(world) or (run is not None and run.terminal and run.purge_at is not None)

    def to_purge(world: World) -> Decision | None:
        run = _run(world, tag)
        if run is None or run.purge_at is None:
            return None
        seconds = math.ceil(run.purge_at - world.clock.now().timestamp()) + 1
        return Decision("clock", "", {"s": seconds}) if seconds > 0 else None

    def due(world: World) -> bool:
        run = _run(world, tag)
        purge = run.purge_at if run is not None else None
        return gone(world) or (purge is not None and purge <= world.clock.now().timestamp())

    return [
        start(script, tag, program, key=key, **how),
        Stage(past_retention, to_purge),
        Stage(due, lambda w: None if gone(w) else Decision("ttl")),
        Stage(gone, lambda w: _event(**_restart(script, key, program, how))),
    ]


def _restart(script: str, key: str, program: list[Op], how: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "start", "script": script, "program": numbered(program), "key": key, **how}


def fire(script: str, overlap: str, late: int = 0, **more: Any) -> Stage:
    arg = {"type": "fire", "script": script, "overlap": overlap, "late": late}
    arg |= {"again": False, "manual": False, "index": 0, **more}
    return Stage(_always, lambda w: _event(**arg))


def _blocked_worker(world: World) -> str | None:
    names = [t.name for t in world.sched.tasks if t.name in WORKERS and t.stalled == 0]
    return names[0] if names else None


def _invocation(world: World, apply: Apply) -> None:
    """(Calmly) a worker halfway through an invocation: a fresh run's, if none waits."""
    world.drain_invoker()
    if not world.pool:
        apply(_event(type="start", script="prepare", program=[step()], key=None))
        world.drain_invoker()
    idle = [n for n in WORKERS if not world.busy(n)]
    if world.pool and idle:
        apply(Decision("invoke", idle[0], {"index": 0, "deadline": False}))


def _queued(world: World, apply: Apply) -> None:
    world.drain_invoker()
    if not world.pool:
        apply(_event(type="start", script="prepare", program=[step()], key=None))


def worker(do: str) -> Stage:
    """A worker halfway through an invocation crashes, stalls past its lease or stops."""

    def make(world: World) -> Decision | None:
        name = _blocked_worker(world)
        if name is None:
            return None
        if do == "stall":
            return Decision("stall", name, {"for": 5})
        return Decision("step", name, {"do": do})

    return Stage(lambda w: _blocked_worker(w) is not None, make, _invocation)


def _ending_child(world: World) -> str | None:
    """A worker about to write a child's end (``Ledger.finish_child``)."""
    names = [
        t.name
        for t in world.sched.tasks
        if t.name in WORKERS and t.stalled == 0 and t.label.startswith("ledger.finish_child")
    ]
    return names[0] if names else None


def inside_a_childs_end(do: str) -> Stage:
    """A worker dies inside a child's end: after its final write (``LOSE_REPORT``), or
    after its report too (``LOSE_WAKE``). The parent must find the outcome itself."""

    def make(world: World) -> Decision | None:
        name = _ending_child(world)
        return None if name is None else Decision("step", name, {"do": do})

    return Stage(lambda w: _ending_child(w) is not None, make, _child_ending)


def _child_ending(world: World, apply: Apply) -> None:
    """(Calmly) a parent that waits for a one-step child, driven until a worker is
    about to write the child's end."""
    world.drain_invoker()
    if not any(reason == "start" for _, reason, _ in world.pool):
        apply(_event(type="start", script="prepare", program=[child([step()])], key=None))
        world.drain_invoker()
    for _ in range(200):
        if _ending_child(world) is not None:
            return
        busy = [t for t in world.sched.tasks if t.name in WORKERS]
        if busy:
            world.sched.step(busy[0])
            continue
        world.drain_invoker()
        idle = [n for n in WORKERS if not world.busy(n)]
        if not world.pool or not idle:
            return
        apply(Decision("invoke", idle[0], {"index": len(world.pool) - 1, "deadline": False}))


def pooled(kind: str) -> Stage:
    """An invocation in the pool lost (drop) or delivered twice (dup)."""
    return Stage(lambda w: bool(w.pool), lambda w: Decision(kind, "", {"index": 0}), _queued)


def timer(mode: str) -> Stage:
    """An armed timer fired early, twice, never, or on time (once one is due)."""

    def ready(world: World) -> bool:
        wakes = [at for _, at in world.timers.armed.values()]
        return bool(wakes) and (mode != "on_time" or min(wakes) <= world.clock.now())

    return Stage(ready, lambda w: Decision("timer", "", {"mode": mode, "index": 0}))


# --- the features of a pair focus ------------------------------------------------------


def _flavour(focus: frozenset[str], suffix: str) -> tuple[dict[str, Any], list[Op]]:
    """How a focus's scripts start their runs: the focused workflow (async, or behind
    the gate) and the focused ops first (a step, which a gated run runs holding its slot;
    a codec's step; keyed children), so that the pair's features meet in one run where
    they compose. A keyed child takes the key the chaos's operators start runs under
    (``CHILD_KEYS``): one that does not attach may be refused while such a run goes on,
    and its parent fails there; the calm second attempt takes a key of its own."""
    how: dict[str, Any] = {}
    if "async workflow" in focus:
        how["async"] = True
    elif "gate" in focus:
        how["gated"] = True
    lead: list[Op] = [step()]
    if "codec" in focus:  # an async workflow runs a step with an undo by ``ctx.step``
        lead.append(step(ret="int", tries=2, codec=True, undo="async" in how))
    for attach in (False, True):
        if f"child if_running={'attach' if attach else 'fail'}" in focus:
            key = f"kf{suffix}" if suffix else CHILD_KEYS[0]
            lead.append(child([], key=key, attach=attach))
    return how, lead


def feature_script(feature: str, focus: frozenset[str], seed: int) -> Script:
    """The script that makes ``feature`` happen, in the flavour of the pair ``focus``."""
    name = f"feature {feature}"

    def stages(suffix: str) -> list[Stage]:
        how, lead = _flavour(focus, suffix)
        tag = f"{feature}{suffix}"
        if feature == "continue-as-new":
            return [
                start(
                    name, tag, [*lead, step(), {"op": "continue", "times": 1, "bad": False}], **how
                )
            ]
        if feature == "gate":
            return [start(name, tag, [*lead, step()], **{"gated": True})]
        if feature == "async workflow":
            return [start(name, tag, [*lead, step(), step()], **{"async": True})]
        if feature.startswith("schedule overlap="):
            overlap = feature.partition("=")[2]
            return [fire(name, overlap, late=30), fire(name, overlap)]
        if feature == "signal by key":
            program = [*lead, HOLD]
            signal = {"type": "signal", "script": name, "name": CHAIN_SIGNAL, "payload": 1}
            return [start(name, tag, program, **how), on_run(tag, live, **signal, key="s0")]
        if feature == "cancel":
            program = [*lead, step(undo=True), HOLD]
            cancel = {"type": "cancel", "script": name, "compensate": seed % 2 == 0}
            return [start(name, tag, program, **how), on_run(tag, live, **cancel)]
        if feature == "retry/fork":
            retry = {"type": "retry", "script": name}
            return [start(name, tag, [*lead, step(), FAIL], **how), on_run(tag, failed, **retry)]
        if feature == "keyed restart after retention":
            return restart_after_retention(name, tag, f"r{suffix}", [*lead, step()], **how)
        # Children, codecs, offloaded values: the flavoured run does them (its lead; with
        # the payload store at a few bytes on such a seed, every value is offloaded).
        return [start(name, tag, [*lead, step()], **how)]

    return Script(name, FEATURES[feature], stages, lambda p: feature in features_of(p))


# --- tours: the rare operations, one class of seeds each --------------------------------


def _values_and_waits(name: str, suffix: str) -> list[Stage]:
    ops = [
        step(fails=2, tries=3, filter=True, catch=True),  # retried once, then by its filter
        step(ret="int", tries=2, codec=True),
        step(undo=True),  # an async body, with a compensation
        {"op": "sleep", "s": 30},
        {"op": "sleep_until", "s": 60},
        {"op": "signal", "name": SIGNALS[0], "timeout": 600, "catch": True},
        {"op": "condition", "polls": 1, "timeout": None, "stateful": False, "codec": False},
        {"op": "condition", "polls": 2, "timeout": 3600, "stateful": True, "codec": False},
        {"op": "condition", "polls": 2, "timeout": None, "stateful": True, "codec": True},
        {"op": "changed", "patch": "fix-a"},
        {"op": "compensate"},
        *({"op": "value", "kind": k} for k in ("now", "uuid", "random")),
        callback(0, submit=False),
        callback(0, submit=True),
        {"op": "big"},
    ]
    return [start(name, f"tour{suffix}", ops)]


def _children_and_maps(name: str, suffix: str) -> list[Stage]:
    # Keys of its own (a chaotic run under a key of ``CHILD_KEYS`` still going would
    # refuse a keyed child that does not attach, and the parent with it), in a run of
    # their own (a run that continues as new would start them again while they run).
    children = [
        child([step()]),
        child([step()], wait=False),
        *(child([], key=f"kt1{suffix}", attach=a) for a in (False, True)),
        *(child([], key=f"kt2{suffix}", wait=False, attach=a) for a in (False, True)),
        # A key reused by a recurring parent (issue 46): the first child has ended when
        # the second starts, which is a new run; the third starts while that one may run.
        *(child([], key=f"kt3{suffix}", reuse=True) for _ in range(2)),
        child([], key=f"kt3{suffix}", wait=False, reuse=True),
    ]
    ops = [
        batch([[step()], [step()]], mapped=True),
        dmap([[step()]]),
        dmap([[step()]], lanes=["east"]),
        batch([[{"op": "continue", "times": 1, "bad": False}]]),  # continues from a branch
        dmap([[step()], [step()]], lanes=["refused-0", None]),  # refused: one lacks its lane
    ]
    return [
        start(name, f"children{suffix}", children),
        start(name, f"maps{suffix}", ops),
        inside_a_childs_end(LOSE_REPORT),
        inside_a_childs_end(LOSE_WAKE),
    ]


def _async_tour(name: str, suffix: str) -> list[Stage]:
    ops = [step(), step(), batch([[step()], [step()]]), step()]
    return [start(name, f"tour{suffix}", ops, **{"async": True})]


def _upgrade(name: str, suffix: str) -> list[Stage]:
    """A version-1 run that fails (before the deploy, or pinned to version 1 after it),
    the deploy, and an operator's retry of it on version 2."""
    tag = f"v1{suffix}"
    deploy = Stage(lambda w: (r := _run(w, tag)) is not None and failed(r), _deploy)
    retry = {"type": "retry", "script": name, "upgrade": True}
    ready = on_run(tag, failed, **retry)
    return [
        # Fixed in version 2: a retry upgraded to it replays the run without the failure.
        start(name, tag, [step(), {**FAIL, "fixed_in": 2}], version=1),
        start(name, f"again{suffix}", [step(), FAIL]),  # retried as it is (and fails again)
        deploy,
        Stage(lambda w: w.hooks.deployed and ready.ready(w), ready.make),
        on_run(f"again{suffix}", failed, type="retry", script=name),
    ]


def _deploy(world: World) -> Decision | None:
    return None if world.hooks.deployed else _event(type="deploy", script="tour upgrade")


def _child_retry(name: str, suffix: str) -> list[Stage]:
    """A child that fails while its parent (which caught it) goes on; its retry."""
    tag = f"parent{suffix}"

    def child_failed(world: World) -> bool:
        parent = world.tagged.get(tag)
        return parent is not None and any(
            (run := world.raw.get_run(r)) is not None
            and (run.parent or "").partition("@")[0] == parent
            and failed(run)
            for r in world.runs
        )

    retry = _event(type="retry", script=name, child_of=tag)
    return [start(name, tag, [child([step(), FAIL]), HOLD]), Stage(child_failed, lambda w: retry)]


def _approvals(name: str, suffix: str) -> list[Stage]:
    """Two callbacks of one name waiting at once: an answer by that name alone is
    refused, one by position taken, then one by name alone (one left) taken."""
    tag = f"ask{suffix}"
    ask = callback(0, submit=True, name=shared_name(0, 1))
    program = [batch([[ask], [dict(ask)]], mapped=True)]

    def waiting(count: int) -> Callable[[World], bool]:
        def ready(world: World) -> bool:
            run_id = world.tagged.get(tag)
            if run_id is None:
                return False
            callbacks = world.waiting_callbacks(run_id).get(shared_name(0, 1), [])
            return len(callbacks) == count

        return ready

    answer = {"type": "answer", "script": name, "on": tag, "index": 0, "value": 1}
    return [
        start(name, tag, program),
        Stage(waiting(2), lambda w: _event(**answer, ambiguous=True, by_position=False)),
        Stage(waiting(2), lambda w: _event(**answer, ambiguous=False, by_position=True)),
        Stage(waiting(1), lambda w: _event(**answer, ambiguous=False, by_position=False)),
    ]


def _callbacks(name: str, suffix: str) -> list[Stage]:
    """A callback's sender's heartbeat, then its answer."""
    tag = f"cb{suffix}"

    def mailed(world: World) -> bool:
        run_id = world.tagged.get(tag)
        return any(
            m.run_id == run_id and t not in world.journal.answered
            for t, m in world.journal.mailbox.items()
        )

    answer = {"type": "callback", "script": name, "on": tag, "token": 0, "fresh": True}
    return [
        start(name, tag, [callback(0, submit=True, heartbeat=True)]),
        Stage(mailed, lambda w: _event(**answer, error=False, value=4)),  # a heartbeat
        Stage(mailed, lambda w: _event(**answer, error=False, value=1)),
    ]


def _keys(name: str, suffix: str) -> list[Stage]:
    """Starts with and without a key, attached, under a sender's namespace, under a key
    a sender's run shows; signals with and without a key."""
    held = [HOLD]
    signal = {"type": "signal", "script": name, "name": CHAIN_SIGNAL, "payload": 1}
    return [
        start(name, f"plain{suffix}", held),
        start(name, f"keyed{suffix}", held, key=f"ka{suffix}"),
        start(name, f"attached{suffix}", held, key=f"ka{suffix}", attach=True),
        start(name, f"sender{suffix}", [step()], key=f"m{suffix}", scope="sqs"),
        start(name, f"typed{suffix}", [step()], key=f"sqs/m{suffix}"),
        on_run(f"plain{suffix}", live, **signal, key=None),
        on_run(f"keyed{suffix}", live, **signal, key="s1"),
        # A key a recurring job reuses (issue 46): started again once its run ended.
        start(name, f"reused{suffix}", [step()], key=f"kr{suffix}"),
        on_run(f"reused{suffix}", ended, **_restart(name, f"kr{suffix}", [step()], {}), reuse=1),
    ]


def _cancels(name: str, suffix: str) -> list[Stage]:
    program = [step(undo=True), HOLD]
    cancel = {"type": "cancel", "script": name}
    return [
        start(name, f"c0{suffix}", program),
        start(name, f"c1{suffix}", program),
        start(name, f"fork{suffix}", [step(), step()]),
        on_run(f"c0{suffix}", live, **cancel, compensate=False),
        on_run(f"c1{suffix}", live, **cancel, compensate=True),
        on_run(f"fork{suffix}", ended, type="fork", script=name, **{"from": 1}),
    ]


def _expiry(name: str, suffix: str) -> list[Stage]:
    stages = restart_after_retention(name, f"exp{suffix}", f"e{suffix}", [step()])
    purge = Stage(lambda w: bool(w.expired), lambda w: _event(type="purge", script=name))
    tag = f"exp{suffix}"

    def restarted(world: World) -> bool:  # the key's second run, finished
        run = _run(world, tag)
        return world.tagged.get(tag) in world.ever_expired and run is not None and run.terminal

    def tick(world: World) -> Decision | None:
        # Erased, the id is free for a keyed start at once: a start in the millisecond
        # the erased run was created in would share its incarnation (a fake clock's
        # artifact: on AWS the run's own work lies between). So the clock moves first.
        run = _run(world, tag)
        if run is None or world.clock.now() > parse_time(run.created_at):
            return None
        return Decision("clock", "", {"s": 1})

    erase = Stage(restarted, lambda w: _event(type="erase", script=name, tag=tag))
    return [
        *stages[:3],
        purge,
        stages[3],
        Stage(restarted, tick),
        erase,
        *_lived_expiry(name, suffix),
    ]


def _lived_expiry(name: str, suffix: str) -> list[Stage]:
    """A keyed run of the workflow declaring a lifetime (``l`` keys), restarted after its
    retention, then the clock past its items' own TTL and TTL deleting them."""
    tag = f"lived{suffix}"
    stages = restart_after_retention(name, tag, f"l{suffix}", [step()])

    def again(world: World) -> bool:  # the restarted run, finished
        run = _run(world, tag)
        return world.tagged.get(tag) in world.ever_expired and run is not None and run.terminal

    def to_items_ttl(world: World) -> Decision | None:
        run = _run(world, tag)
        if run is None or run.items_purge_at is None:
            return None
        seconds = math.ceil(run.items_purge_at - world.clock.now().timestamp()) + 1
        return Decision("clock", "", {"s": seconds}) if seconds > 0 else None

    return [
        *stages,
        Stage(again, to_items_ttl),
        Stage(lambda w: True, lambda w: Decision("ttl")),
    ]


def _schedules(name: str, suffix: str) -> list[Stage]:
    return [
        fire(name, "skip"),
        fire(name, "skip", again=True),
        fire(name, "buffer_one", late=600),
        fire(name, "allow", manual=True),
    ]


def _mechanics(name: str, suffix: str) -> list[Stage]:
    sleeps = [{"op": "sleep", "s": 600} for _ in range(4)]
    return [
        start(name, f"sleeper{suffix}", [*sleeps, step()]),
        start(name, f"gated{suffix}", [step()], gated=True),
        pooled("dup"),
        pooled("drop"),
        worker(CRASH),
        worker(CRASH_AFTER),
        worker(PAUSE_AFTER),
        worker("stall"),
        Stage(lambda w: not w.busy(SWEEPER), lambda w: Decision("sweep", SWEEPER)),
        *(timer(mode) for mode in ("early", "twice", "never", "on_time")),
    ]


TourStages = Callable[[str, str], list[Stage]]
# Each tour: what it produces (``coverage.required``), and how. The seeds take them in
# turn (``tour_for``); ``test_coverage`` checks that together they produce every name.
TOURS: dict[str, tuple[tuple[str, ...], TourStages]] = {
    "values and waits": (
        (
            *("ctx.step", "ctx.step(retryable_errors)", "ctx.step(serdes)", "ctx.step(async)"),
            *("ctx.sleep", "ctx.sleep_until", "ctx.wait_for_signal", "ctx.wait_for_condition"),
            "ctx.wait_for_condition(initial_state)",
            "ctx.wait_for_condition(serdes)",
            *("ctx.changed", "ctx.compensate", "ctx.now", "ctx.uuid", "ctx.random"),
            "ctx.set_progress",  # after each op of a program (programs.sim)
            *("ctx.create_callback", "ctx.wait_for_callback", "a result over the item limit"),
        ),
        _values_and_waits,
    ),
    "children and maps": (
        (
            *("ctx.run_child", "ctx.start_child", "ctx.run_child(id=)", "ctx.start_child(id=)"),
            *("ctx.run_child(id=, attach)", "ctx.start_child(id=, attach)"),
            *("ctx.run_child(id=, reuse=after_end)", "ctx.start_child(id=, reuse=after_end)"),
            *("ctx.parallel", "ctx.map", "ctx.map(distributed=True)"),
            "ctx.map(distributed=True) over a keyed gate",
            "a map item missing its gate key",
            *("ctx.continue_as_new", "ctx.continue_as_new in a branch", "a run continues as new"),
            *("a worker lose_report", "a worker lose_wake"),
        ),
        _children_and_maps,
    ),
    "async": (
        ("async def workflow", "await step", "asyncio.gather(steps)", "asyncio.gather(tasks)"),
        _async_tour,
    ),
    "upgrade": (
        ("engine.retry(upgrade_to)", "engine.retry", "deploy", "workflow code fails"),
        _upgrade,
    ),
    "child retry": (("engine.retry of a child",), _child_retry),
    "approvals": (
        (
            "engine.complete_wait refused as ambiguous",
            "engine.complete_wait(position)",
            "engine.complete_wait",
        ),
        _approvals,
    ),
    "callbacks": (("engine.heartbeat", "engine.complete_callback"), _callbacks),
    "keys": (
        (
            *("engine.start(key)", "engine.start(no key)", "engine.start(key, attach)"),
            "engine.start(key, sender scope)",
            "engine.start(key shown by a sender)",
            *("engine.signal(key)", "engine.signal(no key)"),
            "engine.start(key, reuse=after_end)",
        ),
        _keys,
    ),
    "cancels and forks": (
        ("engine.cancel(compensate=False)", "engine.cancel(compensate=True)", "engine.fork"),
        _cancels,
    ),
    "expiry": (
        (
            *("ttl expires a run", "engine.start(key) after its run expired"),
            *("engine.purge_expired", "engine.start(a workflow declaring max_lifetime)"),
            "engine.erase",
            "ttl deletes the items of a declared lifetime",
        ),
        _expiry,
    ),
    "schedules": (
        (
            *("schedule fire, on time", "schedule fire, late", "schedule fire, delivered again"),
            *("schedule run now", "schedule fire, buffer_one", "schedule fire, skip"),
            "schedule fire, allow",
        ),
        _schedules,
    ),
    "mechanics": (
        (
            *("invocation drop", "invocation dup", "a worker stalls past its lease (a zombie)"),
            *("a worker crash", "a worker crash_after", "a worker pause_after", "engine.sweep"),
            "an invocation retried after its worker died",
            *("timer on_time", "timer early", "timer twice", "timer never"),
            *("a body of a gated run", "a value kept in the payload store"),
        ),
        _mechanics,
    ),
}


def tour_for(seed: int) -> str:
    """The tour seed ``seed`` carries out: the seeds take them in turn."""
    return list(TOURS)[seed % len(TOURS)]


def tour_script(tour: str) -> Script:
    produces, stages = TOURS[tour]
    name = f"tour {tour}"
    return Script(name, produces, lambda suffix: stages(name, suffix), _all(produces))


# Features any run of a focus's flavour exercises (``_flavour``): its workflow, its lead.
RIDERS = frozenset(
    {
        "async workflow",
        "gate",
        "codec",
        "child if_running=fail",
        "child if_running=attach",
        "offloaded value",
    }
)


def scripts_for(seed: int, focus: frozenset[str], tour: str) -> list[Script]:
    """What seed ``seed`` makes happen by construction: its focus's features, its tour.
    A rider rides the other feature's run when that one starts a run of the focus's
    flavour (one run where the pair meets, and fewer runs), and the first of two riders
    carries both (but an async run is not gated: that pair takes two)."""
    features = sorted(focus)
    carried = [f for f in features if not f.startswith("schedule overlap=")]
    riders = [f for f in carried if f in RIDERS]
    if len(riders) == len(carried) == 2 and set(riders) != {"async workflow", "gate"}:
        riders = riders[1:]  # the first's run carries the second
    elif len(riders) == len(carried):
        riders = []  # none has another's run to ride
    scripts = [feature_script(f, focus, seed) for f in features]
    scripts = [
        replace(s, chaos=False) if f in riders else s
        for f, s in zip(features, scripts, strict=True)
    ]
    return [*scripts, tour_script(tour)]
