"""The chaotic phase's choices: which actor goes on, crashes, stalls; timers, clock, events.

``choose`` draws one ``Decision`` from the seeded generator, given what is possible now;
``apply`` carries a decision out (a generated one, or one replayed from a shrunk list,
where it may no longer apply: then it is skipped) and returns a line for the trace.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from durable.core.ids import derived_run_id
from durable.core.model import format_time
from durable.engine.schedules import fire_key
from durable.engine.sweeper import SweepReport
from tests.simulation.actors import OUTSIDE, SWEEPER, WORKERS, World
from tests.simulation.async_programs import is_async_start
from tests.simulation.programs import (
    CHILD_KEYS,
    GATED,
    LIVED,
    SCHEDULE,
    SIGNALS,
    WORKFLOW,
    chain_program,
    generate_program,
    keyed_program,
)
from tests.simulation.scheduler import (
    CRASH,
    CRASH_AFTER,
    LOSE_REPORT,
    LOSE_WAKE,
    PAUSE_AFTER,
    RUN,
    Decision,
)
from tests.simulation.scripts import Stage, scripts_for

CLOCK_JUMPS = (1, 5, 20, 70, 600, 3600, 3 * 3600, 86400)
CLOCK_WEIGHTS = (4, 4, 3, 4, 2, 2, 1, 1)


# Keys an SQS message or an EventBridge event carries (``Engine.start``'s ``key_scope``):
# few, so that an operator's key sometimes equals what such a run shows (issue 43).
SENDER_SCOPES = ("sqs", "eventbridge")
SENDER_KEYS = ("m1", "m2")


def workflow_of_key(key: str) -> str:
    """The workflow an operator's start under ``key`` runs (``actors.World._start``)."""
    return GATED if key.startswith("g") else LIVED if key.startswith("l") else WORKFLOW


class Policy:
    def __init__(self, world: World, rng: random.Random) -> None:
        self.world = world
        self.rng = rng
        self.starts = 0
        self.keys = 0
        self.focus = world.settings.focus
        self.chained = False  # an operator's run that continues as new was started first
        # The seed's scripts (``scripts.py``): each stage is taken as soon as it is ready.
        scripts = scripts_for(world.seed, self.focus, world.settings.tour)
        self.scripts: list[list[Stage]] = [s.stages("") for s in scripts if s.chaos]
        self.progress = [0] * len(self.scripts)

    def _boost(self, feature: str, factor: float = 3.0) -> float:
        """How much more often a decision serving ``feature`` is drawn on this seed."""
        return factor if feature in self.focus else 1.0

    # --- choosing ---------------------------------------------------------------------

    def choose(self) -> Decision:
        w, r = self.world, self.rng
        weight = w.settings.weight
        scripted = self._scripted()
        if scripted is not None:
            return scripted
        if (not w.runs or (self.chained and not self.starts)) and not w.busy(OUTSIDE):
            return Decision("event", OUTSIDE, self._start())  # (a parent after a chain)
        options: list[tuple[float, Callable[[], Decision]]] = []
        for task in w.sched.tasks:
            if task.stalled == 0:
                options.append((weight("step"), self._stepper(task.name)))
        idle = [n for n in WORKERS[: w.settings.workers] if not w.busy(n)]
        if idle and w.pool:
            options.append((weight("invoke"), lambda: self._invoke(idle)))
        if not w.busy(SWEEPER):
            options.append((weight("sweep"), lambda: Decision("sweep", SWEEPER)))
        if not w.busy(OUTSIDE):
            options.append((weight("event"), lambda: Decision("event", OUTSIDE, self._event())))
        if w.timers.armed:
            options.append((weight("timer"), self._timer))
        options.append((weight("clock"), self._clock))
        running = [t.name for t in w.sched.tasks if t.name in WORKERS and t.stalled == 0]
        if running:
            options.append((weight("stall"), lambda: self._stall(running)))
        if w.pool:
            options.append((weight("drop"), lambda: self._pooled("drop")))
            options.append((weight("dup"), lambda: self._pooled("dup")))
        options.append((weight("ttl"), lambda: Decision("ttl")))
        options = [(p, make) for p, make in options if p > 0]
        if not options:  # everything left out and nobody blocked: time passes
            return Decision("clock", "", {"s": 60})
        make = r.choices([m for _, m in options], weights=[p for p, _ in options])[0]
        return make()

    def _scripted(self) -> Decision | None:
        """The next stage of a script that is ready, if any (in the scripts' order)."""
        w = self.world
        for n, stages in enumerate(self.scripts):
            while self.progress[n] < len(stages):
                stage = stages[self.progress[n]]
                if not stage.ready(w):
                    break
                d = stage.make(w)
                if d is None:  # nothing left to do (the chaos did it)
                    self.progress[n] += 1
                    continue
                if d.actor in (OUTSIDE, SWEEPER) and w.busy(d.actor):
                    break
                self.progress[n] += 1
                return d
        return None

    def _stepper(self, name: str) -> Callable[[], Decision]:
        return lambda: Decision("step", name, self._step(name))

    def _step(self, name: str) -> dict[str, Any]:
        r, w = self.rng, self.world
        if name == OUTSIDE and w.scripted:  # a script's event is carried out, not lost
            return {"do": RUN}
        roll = r.random()
        rate = w.settings.crash_rate if w.crashes < w.settings.max_crashes else 0.0
        if roll < rate:
            w.crashes += 1
            # Inside a child's end (its final write, its report, the parent's wake-up:
            # three writes), the death can come between them too.
            task = next((t for t in w.sched.tasks if t.name == name), None)
            ending = task is not None and task.label.startswith("ledger.finish_child")
            if ending and roll < rate * 2 / 3:
                return {"do": LOSE_REPORT if roll < rate / 3 else LOSE_WAKE}
            return {"do": CRASH}
        if roll < rate * 1.5:
            w.crashes += 1
            return {"do": CRASH_AFTER}
        if roll < rate * 1.5 + 0.15:
            return {"do": PAUSE_AFTER}
        return {"do": RUN}

    def _invoke(self, idle: list[str]) -> Decision:
        r = self.rng
        arg = {"index": r.randrange(99), "deadline": r.random() < 0.3}
        return Decision("invoke", r.choice(idle), arg)

    def _timer(self) -> Decision:
        mode = self.rng.choices(("on_time", "early", "twice", "never"), (6, 1, 1, 0.5))[0]
        return Decision("timer", "", {"mode": mode, "index": self.rng.randrange(99)})

    def _clock(self) -> Decision:
        weights: tuple[int, ...] = CLOCK_WEIGHTS
        if "keyed restart after retention" in self.focus:  # past a retention of 2 hours
            weights = tuple(
                w * (6 if s >= 3600 else 1) for s, w in zip(CLOCK_JUMPS, weights, strict=True)
            )
        seconds = self.rng.choices(CLOCK_JUMPS, weights)[0]
        return Decision("clock", "", {"s": seconds})

    def _stall(self, running: list[str]) -> Decision:
        return Decision("stall", self.rng.choice(running), {"for": self.rng.randint(3, 40)})

    def _pooled(self, kind: str) -> Decision:
        return Decision(kind, "", {"index": self.rng.randrange(99)})

    def _start(self) -> dict[str, Any]:
        r = self.rng
        focus = self.focus
        chains = focus & {"child if_running=attach", "continue-as-new"}
        if not self.starts and not self.chained and chains and r.random() < 0.6:
            # First, an operator's run under a child's key that continues as new once it
            # got a signal: the parents that follow (not counted in it) attach to it
            # (issue 43).
            self.chained = True
            chained = CHILD_KEYS[0] if r.random() < 0.8 else r.choice(CHILD_KEYS)
            return {"type": "start", "program": chain_program(chained), "key": chained}
        self.starts += 1
        if self.starts == 1 and "keyed restart after retention" in focus:
            # A keyed run that ends at once, so that its retention can end within the
            # schedule and an operator start its key again (issue 43).
            self.keys += 1
            return {"type": "start", "program": keyed_program("k"), "key": f"k{self.keys}"}
        key: str | None = None
        gated = r.random() < (0.7 if "gate" in focus else 0.3)  # behind a concurrency limit
        rated = not gated and r.random() < 0.1  # the copy behind a rate limit
        keyed = 0.8 if "keyed restart after retention" in focus else 0.4
        if r.random() < keyed:
            self.keys += 1
            # Every other ungated key starts the copy declaring a lifetime (no draw of
            # its own): its keyed restarts, retries, forks and TTL meet the rest.
            key = f"{'g' if gated else 'l' if self.keys % 2 == 1 else 'k'}{self.keys}"
        program = generate_program(r, focus)
        asynchronous = is_async_start(self.starts, gated, rated, key)  # no draw of its own
        if "async workflow" in focus and key is None and not gated and not rated:
            asynchronous = True
        start = {
            "type": "start",
            "program": program,
            "key": key,
            "gated": gated,
            "rated": rated,
            "async": asynchronous,
        }
        if key is None and not gated and not rated and not asynchronous and r.random() < 0.25:
            # A sender's start (an SQS message, an EventBridge event) under a key of its
            # namespace, which the run shows as ``<scope>/<key>``.
            start |= {"key": r.choice(SENDER_KEYS), "scope": r.choice(SENDER_SCOPES)}
        return start

    def _event(self) -> dict[str, Any]:
        w, r = self.world, self.rng
        kinds = ["signal", "cancel", "retry", "fork", "answer", "fire", "restart"]
        fires = max(self._boost(f"schedule overlap={o}") for o in ("allow", "skip", "buffer_one"))
        weights = [
            2.0 * self._boost("signal by key", 2.0),
            1.0 * self._boost("cancel"),
            0.7 * self._boost("retry/fork"),
            0.4 * self._boost("retry/fork"),
            1.2,
            1.2 * fires,
            0.6 * self._restarts(),
        ]
        if not w.hooks.deployed:
            kinds.append("deploy")
            weights.append(0.8)  # early enough that a failed run is often retried after it
        if self.starts < w.settings.max_starts:
            kinds.append("start")
            weights.append(1.5)
        if w.journal.mailbox:
            kinds.append("callback")
            weights.append(4.0)
        if w.expired:
            kinds.append("purge")
            weights.append(1.0)
        kind = r.choices(kinds, weights)[0]
        run = r.randrange(99)
        if kind == "start":
            return self._start()
        if kind == "restart":
            # A key used before (a start's, or a keyed child's: an operator's ``durable
            # start --key`` of the run a workflow also starts as its child).
            keys = {**{k: keyed_program(k) for k in CHILD_KEYS}, **w.keys}
            used = r.choice(sorted(keys))
            if "keyed restart after retention" in self.focus:
                # A key whose run TTL deleted, when there is one.
                gone = [k for k in sorted(keys) if self._run_of(k) in w.ever_expired]
                used = r.choice(gone) if gone else used
            same = r.random() < 0.8
            program = keys[used] if same else generate_program(r)
            attach = r.random() < 0.3  # take the run holding the key if it is running
            if used in CHILD_KEYS and r.random() < 0.3:
                program = chain_program(used)  # a run continuing as new, parents attach to
            elif r.random() < 0.25:
                # A key another kind of caller's run shows: a sender's (``sqs/m1``) or a
                # schedule fire's, typed by an operator (issue 43).
                used = self._shown_key()
            return {"type": "start", "program": program, "key": used, "attach": attach}
        if kind == "answer":
            return {
                "type": "answer",
                "run": run,
                "live": True,
                "ambiguous": r.random() < 0.5,  # the name most callbacks wait on
                "by_position": r.random() < 0.3,
                "index": r.randrange(99),
                "value": r.randrange(1000),
            }
        if kind == "fire":
            overlaps = ("skip", "buffer_one", "allow")
            chances = [3 * self._boost(f"schedule overlap={o}", 4.0) for o in overlaps]
            # A seed focused on a schedule mostly fires new times within the grace, so
            # that fires meet the runs of earlier ones still going.
            timely = any(f"schedule overlap={o}" in self.focus for o in overlaps)
            lates = (0, 30, 90, 600, 1200, 7200)
            return {
                "type": "fire",
                "again": r.random() < (0.2 if timely else 0.5),  # a fire time delivered again
                "late": r.choice(lates[:4] if timely else lates),  # seconds after its time
                "manual": r.random() < 0.1,  # run now
                "overlap": r.choices(overlaps, chances)[0],  # which of the app's schedules
                "index": r.randrange(99),
            }
        if kind == "deploy":
            return {"type": "deploy"}
        if kind == "callback":
            return {
                "type": "callback",
                "token": r.randrange(99),
                "fresh": r.random() < 0.8,  # else maybe one used already (409, 410)
                "error": r.random() < 0.2,
                "value": r.randrange(1000),
            }
        if kind == "signal":
            key: str | None = r.choice((None, None, f"s{r.randrange(3)}"))
            if key is None and "signal by key" in self.focus and r.random() < 0.5:
                key = f"s{r.randrange(3)}"
            payload = r.randrange(3) if key else r.randrange(1000)
            return {
                "type": "signal",
                "run": run,
                "live": r.random() < 0.8,
                "expected": r.random() < 0.8,  # a name the run's program waits for
                "name": r.choice(SIGNALS),
                "key": key,
                "payload": payload,
            }
        if kind == "cancel":
            live = r.random() < 0.8
            return {"type": "cancel", "run": run, "live": live, "compensate": r.random() < 0.4}
        if kind == "fork":
            return {"type": "fork", "run": run, "from": r.randint(1, 4)}
        if kind == "retry":
            return {
                "type": "retry",
                "run": run,
                "upgrade": r.random() < 0.3,
                "failed": r.random() < 0.6,  # a run that failed (a child, if one did)
            }
        return {"type": kind, "run": run}

    def _restarts(self) -> float:
        """How often an operator starts a key used before, relative to the base: on a
        seed focused on restarts after retention, often once a keyed run expired."""
        if "keyed restart after retention" not in self.focus:
            return 1.0
        expired = self.world.ever_expired
        keys = [*self.world.keys, *CHILD_KEYS]
        return 5.0 if any(self._run_of(k) in expired for k in keys) else 0.3

    @staticmethod
    def _run_of(key: str) -> str:
        """The run id an operator's start under ``key`` takes (``actors.World._event``)."""
        return derived_run_id(workflow_of_key(key), key)

    def _shown_key(self) -> str:
        """A key as a sender's run shows it, or a fire's of the skip schedule."""
        r, w = self.rng, self.world
        fired = w.fired_at.get(SCHEDULE, [])
        if fired and r.random() < 0.4:
            return fire_key(SCHEDULE, format_time(r.choice(fired)))
        if w.shown and r.random() < 0.7:  # what a sender's run shows: the same text
            return r.choice(w.shown)
        return f"{r.choice(SENDER_SCOPES)}/{r.choice(SENDER_KEYS)}"

    # --- applying ---------------------------------------------------------------------

    def apply(self, d: Decision) -> str | None:
        """Carry ``d`` out; None when it does not apply (a shrunk schedule's leftover)."""
        w = self.world
        for each in w.sched.tasks:
            each.stalled = max(0, each.stalled - 1)
        if d.kind == "step":
            task = next((t for t in w.sched.tasks if t.name == d.actor), None)
            if task is None:
                return None
            label = f"{d.actor} {d.arg['do']}: {task.label}"
            if d.arg["do"] != RUN:
                w.journal.produced[f"a worker {d.arg['do']}"] += 1
            w.sched.step(task, d.arg["do"])
            return label
        if d.kind == "invoke":
            if w.busy(d.actor) or not w.pool:
                return None
            run_id, reason, hop = w.pool.pop(d.arg["index"] % len(w.pool))
            w.sched.step(w.start_worker(d.actor, run_id, reason, hop, d.arg["deadline"]))
            return f"{d.actor} takes {reason} of {run_id[-6:]}"
        if d.kind == "sweep":
            if w.busy(SWEEPER):
                return None
            reports: list[SweepReport] = []
            w.sched.step(w.spawn(SWEEPER, w.sweep_job(reports)))
            w.journal.produced["engine.sweep"] += 1
            return "sweeper starts"
        if d.kind == "event":
            if w.busy(OUTSIDE):
                return None
            w.sched.step(w.spawn(OUTSIDE, w.event_job(d.arg)))
            return d.describe()
        return self._apply_direct(d)

    def _apply_direct(self, d: Decision) -> str | None:
        w = self.world
        if d.kind == "timer":
            w.journal.produced[f"timer {d.arg['mode']}"] += 1
            return f"timer {d.arg['mode']}: {w.fire_timer(d.arg['mode'], d.arg['index'])}"
        if d.kind == "clock":
            w.clock.advance(timedelta(seconds=d.arg["s"]))
            w.check_item_ttls()
            return f"clock +{d.arg['s']}s"
        if d.kind == "stall":
            stalled = next((t for t in w.sched.tasks if t.name == d.actor), None)
            if stalled is None:
                return None
            stalled.stalled = d.arg["for"]
            w.journal.produced["a worker stalls past its lease (a zombie)"] += 1
            lapse = w.config.lease + w.config.clock_skew + timedelta(seconds=1)
            w.clock.advance(lapse)
            return f"stall {d.actor} at {stalled.label} for {d.arg['for']}, clock +{lapse}"
        if d.kind in ("drop", "dup"):
            if not w.pool:
                return None
            index = d.arg["index"] % len(w.pool)
            item = w.pool[index]
            if d.kind == "drop":
                w.pool.pop(index)
            else:
                w.pool.insert(index, item)
            w.journal.produced[f"invocation {d.kind}"] += 1
            return f"invocation {d.kind} {item[1]} of {item[0][-6:]}"
        if d.kind == "ttl":
            gone = w.ttl()
            if gone:
                w.journal.produced["ttl expires a run"] += 1
            return f"ttl expired {[g[-6:] for g in gone]}" if gone else None
        raise ValueError(f"unknown decision {d}")
