"""Deterministic simulation of the whole system on the memory ledger: the cooperative core.

How it works
============

Every actor (2-3 workers, the sweeper, the outside world) runs in its own thread, but only
one logical thread runs at a time. Every port the engine is built with (ledger, effect
store, invoker, timers) is wrapped in a ``SimPort`` that hands control back to the
``Scheduler`` *before* each call (and, when the scheduler asks for it, after). The
scheduler, driven by a seeded ``random.Random``, decides which blocked actor proceeds, may
kill it there (``durable.testing.SimulatedCrash``, before or after the call), jumps the
shared ``FakeClock``, stalls a worker past its lease (a zombie when it comes back), fires,
loses, repeats or advances timers, drops or repeats invocations, expires finished runs
(TTL) and sends outside events (callbacks, signals with and without keys, cancel with and
without compensation, retry, fork, keyed restarts). Every other source of randomness (run
ids, owner ids, callback nonces, recorded uuids, retry jitter) is drawn from the seed too
(``seeded_randomness``), so one seed is one trace.

After the chaotic phase the in-flight actors finish (quiescence) and ``no_stuck_runs`` is
checked; then the system settles (timers on time, callbacks answered, signals sent, the
clock moved on) and the invariants of ``invariants.py`` are checked.

Files: ``scheduler.py`` (this: threads, ports, seeded randomness), ``actors.py`` (the
engine and the actors' jobs), ``policy.py`` (choosing and applying decisions),
``programs.py`` (the workflow generator and the one generic workflow), ``scripts.py``
(what each seed makes happen by construction: its pair focus, its tour), ``journal.py``
(what bodies and workflow code saw), ``invariants.py`` (named checks), ``explore.py``
(one schedule, settling, shrinking), ``compare.py`` (ledger against ledger).

Replaying a seed
================

A failing schedule prints its seed, the invariants that fired and a shrunk trace (the
chaotic decisions that still reproduce the failure, then what the in-flight actors did
at quiescence). Replay it with::

    .venv/bin/pytest tests/simulation -m unit --seed N    # that seed only, shrunk again
    SIM_SEED=N .venv/bin/pytest tests/simulation -m unit  # the same, by environment

Without ``-m unit`` the DynamoDB Local replay of that seed runs too (integration tier).
Exploration budget: ``--sim-budget SECONDS`` (env ``SIM_BUDGET``, default 90 s in the unit
tier); first seed ``--sim-seed-start`` (env ``SIM_SEED_START``, default 1); invariants left
out ``--sim-skip name,name`` (env ``SIM_SKIP``; names in ``invariants.ALL_CHECKS``).
``make soak`` explores for ``SOAK_SECONDS`` from a fresh seed. The terminal summary
reports schedules per second and the first seed of each invariant that fired. Same seed,
same trace, also in another process with another hash seed (``test_simulator.py``).
"""

from __future__ import annotations

import os
import random
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

import durable.core.retry
from durable.testing import SimulatedCrash

# What the scheduler tells a blocked actor when it lets it go on.
RUN, CRASH, CRASH_AFTER, PAUSE_AFTER = "run", "crash", "crash_after", "pause_after"
# A worker that dies inside a port call made of several writes, after some of them
# (``SimPort``'s ``within``): a child's end written, its report not (LOSE_REPORT), or the
# report written and the parent's wake-up not (LOSE_WAKE).
LOSE_REPORT, LOSE_WAKE = "lose_report", "lose_wake"
WITHIN = (LOSE_REPORT, LOSE_WAKE)


@dataclass(frozen=True)
class Decision:
    """One choice of the chaotic phase: what happens next, in a replayable form.

    ``kind``: step (let ``actor`` go on to its next port call), invoke (a worker takes an
    invocation), sweep, event (the outside world acts), timer, clock, stall, ttl, drop, dup.
    ``arg`` holds JSON-like parameters (indexes are taken modulo what exists at the time,
    so a shrunk schedule still applies).
    """

    kind: str
    actor: str = ""
    arg: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in self.arg.items() if k != "program")
        if "program" in self.arg:
            extra += f" program={[op['op'] for op in self.arg['program']]}"
        return f"{self.kind} {self.actor} {extra}".replace("  ", " ").strip()


class Task:
    """One actor's job in its own thread; it runs only while the scheduler waits for it."""

    def __init__(self, sched: Scheduler, name: str, fn: Callable[[], None]) -> None:
        self.sched = sched
        self.name = name
        self.fn = fn
        self.go = threading.Semaphore(0)
        self.command = RUN
        self.label = "start"  # the port call it waits in front of
        self.done = False
        self.crashed = False
        self.error: BaseException | None = None  # what escaped ``fn`` (a simulation bug)
        self.stalled = 0  # decisions left before a stalled (zombie) worker may go on
        # False once the job's compute is gone (a Lambda past its deadline): its next port
        # call never happens
        self.alive: Callable[[], bool] | None = None
        self.thread = threading.Thread(target=self._main, name=f"sim-{name}", daemon=True)

    def _main(self) -> None:
        self.go.acquire()
        self.sched.local.task = self
        try:
            if self.command == CRASH:
                raise SimulatedCrash(f"{self.name} crashed before it started")
            self.fn()
        except SimulatedCrash:
            self.crashed = True
        except BaseException as error:
            self.error = error
        finally:
            self.done = True
            self.sched.back.release()


class Scheduler:
    """Hands the one logical thread to actors, one port call at a time."""

    def __init__(self) -> None:
        self.back = threading.Semaphore(0)
        self.local = threading.local()
        self.tasks: list[Task] = []
        self.seq = 0  # port calls and decisions so far: the journal's logical time
        self.calls = 0

    def current(self) -> Task | None:
        task: Task | None = getattr(self.local, "task", None)
        return task

    def actor(self) -> str:
        task = self.current()
        return task.name if task is not None else "sim"

    def spawn(self, name: str, fn: Callable[[], None]) -> Task:
        task = Task(self, name, fn)
        self.tasks.append(task)
        task.thread.start()
        return task

    def step(self, task: Task, command: str = RUN) -> None:
        """Let ``task`` run to its next port call (or its end)."""
        self.seq += 1
        task.command = command
        task.go.release()
        self.back.acquire()
        if task.done:
            task.thread.join()
            self.tasks.remove(task)
            if task.error is not None:  # the actors report the engine's errors themselves
                raise RuntimeError(f"simulation actor {task.name} failed") from task.error

    def pause(self, label: str) -> str:
        """Called by an actor before a port call: wait for the scheduler's go."""
        task = self.current()
        if task is None:  # the simulation's own reads and writes do not interleave
            return RUN
        self.calls += 1
        task.label = label
        self.back.release()
        task.go.acquire()
        if task.command == CRASH:
            raise SimulatedCrash(f"{task.name} crashed before {label}")
        if task.alive is not None and not task.alive():
            raise SimulatedCrash(f"{task.name} was stopped at its deadline before {label}")
        return task.command

    def blocked(self) -> list[Task]:
        return [t for t in self.tasks if not t.done]

    def finish_all(self, *, crash: bool) -> None:
        """Run every task to its end (``crash``: kill each at its next port call)."""
        while self.tasks:
            self.step(self.tasks[0], CRASH if crash else RUN)


class SimPort:
    """Wraps a port: every public method call becomes a scheduling point.

    Generic (``__getattr__``), like ``durable.testing.CrashingPort``, so it keeps working
    when port signatures change. ``observe`` sees every call that returned.
    """

    def __init__(
        self,
        name: str,
        target: Any,
        sched: Scheduler,
        observe: Callable[[str, tuple[Any, ...], Any], None] | None = None,
        within: Mapping[str, Callable[..., None]] | None = None,
    ) -> None:
        self._name = name
        self._target = target
        self._sched = sched
        self._observe = observe
        # Per method made of several writes: what of it a worker dying inside it leaves
        # written, by command (``WITHIN``); a method without one dies before the call.
        self._within = within or {}

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._target, attr)
        if not callable(value) or attr.startswith("_"):
            return value
        method = f"{self._name}.{attr}"
        sched, observe, within = self._sched, self._observe, self._within.get(attr)

        def call(*args: Any, **kwargs: Any) -> Any:
            label = f"{method} {_subject(args)}".strip()
            command = sched.pause(label)
            if command in WITHIN:
                if within is not None:
                    within(command, *args, **kwargs)
                raise SimulatedCrash(f"{sched.actor()} crashed inside {label} ({command})")
            result = value(*args, **kwargs)
            if observe is not None:
                observe(method, args, result)
            if command == CRASH_AFTER:
                raise SimulatedCrash(f"{sched.actor()} crashed after {label}")
            if command == PAUSE_AFTER:
                sched.pause(f"{label} (returned)")
            return result

        return call


def _subject(args: tuple[Any, ...]) -> str:
    """What a port call is about, for traces: the run and the position."""
    if not args:
        return ""
    first = args[0]
    if isinstance(first, str):
        return first[-6:]
    run_id = getattr(first, "run_id", None)
    position = getattr(first, "position", None)
    status = getattr(first, "status", None)
    parts = [str(run_id)[-6:] if run_id else "", position or "", str(status or "")]
    return " ".join(p for p in parts if p)


class _Seeded:
    """A module with some functions replaced; everything else is the real module's."""

    def __init__(self, module: Any, **overrides: Any) -> None:
        self._module = module
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


@contextmanager
def seeded_randomness(rng: random.Random) -> Iterator[None]:
    """Draw every random value of the engine from ``rng``: run and signal ids
    (``durable.core.ids``), owner ids (``uuid.uuid4`` in ``Engine.resume``), callback nonces
    (``durable.core.tokens``), recorded uuids and floats (``durable.core.values``) and retry jitter.

    ``os`` and ``uuid`` are replaced where ``durable`` modules hold them, so a new module
    that draws from them is covered too.
    """
    seeded_os = _Seeded(os, urandom=rng.randbytes)
    seeded_uuid = _Seeded(uuid, uuid4=lambda: uuid.UUID(bytes=rng.randbytes(16), version=4))
    with pytest.MonkeyPatch.context() as patch:
        for name, module in list(sys.modules.items()):
            if name != "durable" and not name.startswith("durable."):
                continue
            if getattr(module, "os", None) is os:
                patch.setattr(module, "os", seeded_os)
            if getattr(module, "uuid", None) is uuid:
                patch.setattr(module, "uuid", seeded_uuid)
        patch.setattr(durable.core.retry, "_JITTER", random.Random(rng.getrandbits(64)))
        yield
